/* runtime_dockerfile_words: the word level of the Dockerfile parser
 * (runtime_dockerfile.c): quotes, backslash escapes, variable substitution
 * ($X, ${X}, ${X:-word}, ${X:+word}) and splitting into words, bounded as
 * the rest of the parser is. */
#include "runtime.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void df_sb_putc(struct sbuf *b, char c)
{
	if (b->failed)
		return;
	if (b->len + 2 > b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 64;
		char *s = cap <= 2 * DOCKERFILE_MAX_BYTES ? realloc(b->s, cap) : NULL;
		if (!s) {
			b->failed = 1;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
	b->s[b->len++] = c;
	b->s[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
	while (*s)
		df_sb_putc(b, *s++);
}

static char *sb_take(struct sbuf *b)
{
	if (b->failed) {
		free(b->s);
		return NULL;
	}
	char *s = b->s ? b->s : strdup("");
	*b = (struct sbuf){0};
	return s;
}

int df_fail(struct parser *p, const char *fmt, ...)
{
	char msg[ERR_MSG_MAX - 32];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return err_set(p->e, ERR_INVALID, EINVAL, "Dockerfile line %u: %s", p->line, msg);
}

const char *df_var_get(const struct parser *p, const char *k)
{
	for (size_t i = p->n_vars; i-- > 0;)
		if (strcmp(p->keys[i], k) == 0)
			return p->vals[i];
	return NULL;
}

int df_var_set(struct parser *p, const char *k, const char *v)
{
	for (size_t i = 0; i < p->n_vars; i++)
		if (strcmp(p->keys[i], k) == 0) {
			char *nv = strdup(v);
			if (!nv)
				return err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
			free(p->vals[i]);
			p->vals[i] = nv;
			return 0;
		}
	if (p->n_vars == DOCKERFILE_MAX_VARS)
		return df_fail(p, "more than %d variables", DOCKERFILE_MAX_VARS);
	p->keys[p->n_vars] = strdup(k);
	p->vals[p->n_vars] = strdup(v);
	if (!p->keys[p->n_vars] || !p->vals[p->n_vars]) {
		free(p->keys[p->n_vars]);
		free(p->vals[p->n_vars]);
		return err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	p->n_vars++;
	return 0;
}

static int expand(struct parser *p, const char **sp, const char *stop, int split, struct sbuf *out,
		  char ***words, size_t *n_words, int depth);

/* One ${...} or $NAME at *sp (just after the '$') onto `out`. */
static int expand_var(struct parser *p, const char **sp, struct sbuf *out, int depth)
{
	const char *s = *sp;
	char name[DOCKERFILE_NAME_MAX + 1];
	size_t n = 0;
	int braced = *s == '{';
	s += braced;
	while ((isalnum((unsigned char)*s) || *s == '_') && n < DOCKERFILE_NAME_MAX)
		name[n++] = *s++;
	name[n] = '\0';
	if (!braced && (n == 0 || isdigit((unsigned char)name[0]))) {
		df_sb_putc(out, '$'); /* a lone '$' stays, as in Docker */
		*sp = s;
		return 0;
	}
	if (n == 0 || isdigit((unsigned char)name[0]))
		return df_fail(p, "bad variable name after '${'");
	const char *v = df_var_get(p, name);
	if (!braced || *s == '}') {
		if (braced)
			s++;
		sb_puts(out, v ? v : "");
		*sp = s;
		return 0;
	}
	if (s[0] != ':' || (s[1] != '-' && s[1] != '+'))
		return df_fail(p,
			       "unsupported variable expansion '${%s%.2s': only ${%s}, "
			       "${%s:-word} and ${%s:+word}",
			       name, s, name, name, name);
	int plus = s[1] == '+';
	s += 2;
	struct sbuf word = {0};
	if (expand(p, &s, "}", 0, &word, NULL, NULL, depth + 1) < 0 || *s != '}') {
		free(word.s);
		return p->e->kind ? err_code(p->e) : df_fail(p, "unterminated '${'");
	}
	s++;
	int set = v && *v;
	sb_puts(out,
		plus ? (set ? (word.s ? word.s : "") : "") : (set ? v : (word.s ? word.s : "")));
	free(word.s);
	*sp = s;
	return 0;
}

static int push_word(struct parser *p, struct sbuf *cur, char ***words, size_t *n)
{
	if (*n >= DOCKERFILE_MAX_ARGS)
		return df_fail(p, "more than %d words", DOCKERFILE_MAX_ARGS);
	char **w = realloc(*words, (*n + 2) * sizeof(**words));
	char *s = sb_take(cur);
	if (!w || !s) {
		free(s);
		if (w)
			*words = w;
		return err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	*words = w;
	w[(*n)++] = s;
	w[*n] = NULL;
	return 0;
}

/* Shell-like word processing of *sp up to a character in `stop` (or the
 * end): quotes, backslash escapes and variables.  With `split`, unquoted
 * blanks separate words, appended to *words; else all goes to `out`. */
static int expand(struct parser *p, const char **sp, const char *stop, int split, struct sbuf *out,
		  char ***words, size_t *n_words, int depth)
{
	if (depth > 8)
		return df_fail(p, "variable expansions nested too deep");
	const char *s = *sp;
	char quote = 0;
	int in_word = 0;
	for (; *s && (quote || !strchr(stop, *s)); s++) {
		if (!quote && split && (*s == ' ' || *s == '\t')) {
			if (in_word && push_word(p, out, words, n_words) < 0)
				return err_code(p->e);
			in_word = 0;
			continue;
		}
		in_word = 1;
		if (quote != '\'' && *s == '\\' && s[1] && (!quote || strchr("\"\\$", s[1]))) {
			df_sb_putc(out, *++s);
		} else if (!quote && (*s == '\'' || *s == '"')) {
			quote = *s;
		} else if (quote && *s == quote) {
			quote = 0;
		} else if (quote != '\'' && *s == '$') {
			s++;
			if (expand_var(p, &s, out, depth) < 0)
				return err_code(p->e);
			s--;
		} else {
			df_sb_putc(out, *s);
		}
	}
	if (quote)
		return df_fail(p, "unterminated %s quote", quote == '"' ? "double" : "single");
	if (out->failed)
		return df_fail(p, "a word is too long");
	if (split && in_word && push_word(p, out, words, n_words) < 0)
		return err_code(p->e);
	*sp = s;
	return 0;
}

void df_free_words(char **w)
{
	for (size_t i = 0; w && w[i]; i++)
		free(w[i]);
	free(w);
}

int df_words_of(struct parser *p, const char *text, char ***words, size_t *n)
{
	struct sbuf cur = {0};
	*words = NULL;
	*n = 0;
	int r = expand(p, &text, "", 1, &cur, words, n, 0);
	free(cur.s);
	if (r < 0) {
		df_free_words(*words);
		*words = NULL;
		*n = 0;
	}
	return r;
}

char *df_expand_all(struct parser *p, const char *text)
{
	struct sbuf out = {0};
	if (expand(p, &text, "", 0, &out, NULL, NULL, 0) < 0) {
		free(out.s);
		return NULL;
	}
	char *s = sb_take(&out);
	if (!s)
		err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
	return s;
}
