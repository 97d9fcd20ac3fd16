/* runtime_dockerfile: the Dockerfile parser of image builds (docs/images.md,
 * "Images from a Dockerfile").  The text is untrusted (a request body):
 * every size is bounded (DOCKERFILE_MAX_*), every error names its line, and
 * an instruction deskbox does not do is refused by name rather than
 * skipped, so a build never quietly makes an image other than the one
 * written.  Variables ($X, ${X}, ${X:-w}, ${X:+w}) are substituted here, from
 * the ARG and ENV lines above, as Docker's builder does for every
 * instruction but RUN, CMD and ENTRYPOINT (the shell expands those). */
#include "runtime.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void dockerfile_free(struct dockerfile *df)
{
	if (!df)
		return;
	for (size_t i = 0; i < df->n_steps; i++) {
		df_free_words(df->steps[i].argv);
		free(df->steps[i].chown);
		free(df->steps[i].chmod);
	}
	free(df->steps);
	free(df);
}

const char *dockerfile_op_name(enum dockerfile_op op)
{
	static const char *const names[] = {
	    [DF_FROM] = "FROM",
	    [DF_RUN] = "RUN",
	    [DF_COPY] = "COPY",
	    [DF_ADD] = "ADD",
	    [DF_ENV] = "ENV",
	    [DF_WORKDIR] = "WORKDIR",
	    [DF_USER] = "USER",
	    [DF_CMD] = "CMD",
	    [DF_ENTRYPOINT] = "ENTRYPOINT",
	    [DF_LABEL] = "LABEL",
	    [DF_EXPOSE] = "EXPOSE",
	    [DF_ARG] = "ARG",
	    [DF_VOLUME] = "VOLUME",
	    [DF_STOPSIGNAL] = "STOPSIGNAL",
	};
	return op < sizeof(names) / sizeof(names[0]) && names[op] ? names[op] : "?";
}

/* A new step of `op` at the current line, argv taken over (NULL: none). */
static struct dockerfile_step *add_step(struct parser *p, enum dockerfile_op op, char **argv,
					size_t argc)
{
	struct dockerfile *df = p->df;
	if (df->n_steps == DOCKERFILE_MAX_STEPS) {
		df_free_words(argv);
		df_fail(p, "more than %d instructions", DOCKERFILE_MAX_STEPS);
		p->e->kind = ERR_LIMIT;
		return NULL;
	}
	struct dockerfile_step *st = realloc(df->steps, (df->n_steps + 1) * sizeof(*st));
	if (!st) {
		df_free_words(argv);
		err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
		return NULL;
	}
	df->steps = st;
	st = &df->steps[df->n_steps++];
	*st = (struct dockerfile_step){.op = op, .line = p->line, .argv = argv, .argc = argc};
	return st;
}

/* `text` as the JSON array of strings of an exec form, or NULL (then it is
 * the shell form, as in Docker). */
static char **json_form(const char *text, size_t *argc)
{
	if (text[0] != '[')
		return NULL;
	cJSON *j = cJSON_Parse(text);
	size_t n = (size_t)cJSON_GetArraySize(j);
	char **w = cJSON_IsArray(j) && n <= DOCKERFILE_MAX_ARGS ? calloc(n + 1, sizeof(*w)) : NULL;
	const cJSON *it, *arr = w ? j : NULL;
	size_t i = 0;
	cJSON_ArrayForEach(it, arr)
	{
		if (!cJSON_IsString(it) || !(w[i] = strdup(it->valuestring))) {
			df_free_words(w);
			w = NULL;
			break;
		}
		i++;
	}
	cJSON_Delete(j);
	*argc = i;
	return w;
}

/* RUN, CMD, ENTRYPOINT: the exec form's words, or the shell form's text. */
static int command_step(struct parser *p, enum dockerfile_op op, const char *text)
{
	if (!text[0])
		return df_fail(p, "%s needs a command", dockerfile_op_name(op));
	if (op == DF_RUN && strncmp(text, "--", 2) == 0)
		return df_fail(p, "RUN %.*s is not supported: only a plain RUN command",
			       (int)strcspn(text, " \t="), text);
	size_t n = 0;
	char **w = json_form(text, &n);
	int exec = w != NULL;
	if (!w) {
		w = calloc(2, sizeof(*w));
		if (w && !(w[0] = strdup(text))) {
			free(w);
			w = NULL;
		}
		n = 1;
	}
	if (!w)
		return err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (exec && n == 0 && op == DF_RUN) {
		df_free_words(w);
		return df_fail(p, "RUN needs a command");
	}
	struct dockerfile_step *st = add_step(p, op, w, n);
	if (!st)
		return err_code(p->e);
	st->exec_form = exec;
	return 0;
}

static int is_url(const char *s)
{
	return strstr(s, "://") || strncmp(s, "git@", 4) == 0;
}

/* COPY and ADD: --chown and --chmod, then sources and the destination. */
static int copy_step(struct parser *p, enum dockerfile_op op, const char *text)
{
	const char *name = dockerfile_op_name(op);
	char *chown = NULL, *chmod = NULL;
	while (strncmp(text, "--", 2) == 0) {
		size_t flen = strcspn(text, " \t");
		char flag[64];
		snprintf(flag, sizeof(flag), "%.*s", (int)(flen < 63 ? flen : 63), text);
		char **slot = strncmp(flag, "--chown=", 8) == 0	  ? &chown
			      : strncmp(flag, "--chmod=", 8) == 0 ? &chmod
								  : NULL;
		if (!slot || *slot) {
			free(chown);
			free(chmod);
			if (strncmp(flag, "--from", 6) == 0)
				return df_fail(p,
					       "%s --from is not supported: multi-stage builds are "
					       "not supported",
					       name);
			return df_fail(p, "%s %.*s is not supported (only --chown and --chmod)",
				       name, (int)strcspn(flag, "="), flag);
		}
		char value[DOCKERFILE_NAME_MAX + 1];
		snprintf(value, sizeof(value), "%.*s", (int)(flen - 8), text + 8);
		if (!(*slot = df_expand_all(p, value))) {
			free(chown);
			free(chmod);
			return err_code(p->e);
		}
		text += flen;
		text += strspn(text, " \t");
	}
	size_t n = 0;
	char **w = json_form(text, &n);
	if (!w && df_words_of(p, text, &w, &n) < 0) {
		free(chown);
		free(chmod);
		return err_code(p->e);
	}
	int r = 0;
	if (n < 2)
		r = df_fail(p, "%s needs a source and a destination", name);
	for (size_t i = 0; r == 0 && i + 1 < n; i++)
		if (is_url(w[i]))
			r = df_fail(p,
				    "%s of a URL ('%s') is not supported: only files of the build "
				    "context",
				    name, w[i]);
	struct dockerfile_step *st = NULL;
	if (r < 0)
		df_free_words(w);
	else if (!(st = add_step(p, op, w, n))) /* it freed w */
		r = err_code(p->e);
	if (r < 0) {
		free(chown);
		free(chmod);
		return r;
	}
	st->chown = chown;
	st->chmod = chmod;
	return 0;
}

/* The value given for ARG `k` ("K=V" in `args`), or NULL. */
static const char *build_arg(const char *const *args, const char *k)
{
	size_t n = strlen(k);
	for (size_t i = 0; args && args[i]; i++)
		if (strncmp(args[i], k, n) == 0 && args[i][n] == '=')
			return args[i] + n + 1;
	return NULL;
}

/* ENV, LABEL, ARG: key=value pairs (ENV also the old `ENV key value`). */
static int pairs_step(struct parser *p, enum dockerfile_op op, const char *text)
{
	const char *name = dockerfile_op_name(op);
	char **w = NULL, **kv = NULL;
	size_t n = 0, m = 0;
	size_t first = strcspn(text, " \t");
	if (op == DF_ENV && !memchr(text, '=', first)) {
		char key[DOCKERFILE_NAME_MAX + 1];
		if (first == 0 || first > DOCKERFILE_NAME_MAX || !text[first])
			return df_fail(p, "ENV needs key=value");
		snprintf(key, sizeof(key), "%.*s", (int)first, text);
		char *v = df_expand_all(p, text + first + strspn(text + first, " \t"));
		kv = v ? calloc(3, sizeof(*kv)) : NULL;
		if (kv && !(kv[0] = strdup(key)))
			free(v), v = NULL;
		if (!kv || !v) {
			free(v);
			free(kv);
			return p->e->kind ? err_code(p->e)
					  : err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
		}
		kv[1] = v;
		m = 2;
	} else {
		if (df_words_of(p, text, &w, &n) < 0)
			return err_code(p->e);
		kv = calloc(2 * n + 1, sizeof(*kv));
		for (size_t i = 0; kv && i < n; i++) {
			char *eq = strchr(w[i], '=');
			if (!eq && op == DF_ARG) {
				kv[m++] = strdup(w[i]);
				kv[m] = NULL;
				const char *v = df_var_get(p, w[i]);
				kv[m++] = strdup(v ? v : "");
				continue;
			}
			if (!eq || eq == w[i]) {
				int r = df_fail(p, "%s needs key=value, not '%.60s'", name, w[i]);
				df_free_words(kv);
				df_free_words(w);
				return r;
			}
			*eq = '\0';
			kv[m++] = strdup(w[i]);
			kv[m++] = strdup(eq + 1);
		}
		df_free_words(w);
		if (!kv || n == 0) {
			df_free_words(kv);
			return n ? err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory")
				 : df_fail(p, "%s needs key=value", name);
		}
	}
	for (size_t i = 0; i < m; i += 2) {
		if (!kv[i] || !kv[i + 1]) {
			df_free_words(kv);
			return err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
		}
		const char *given = op == DF_ARG ? build_arg(p->build_args, kv[i]) : NULL;
		if (given) {
			char *v = strdup(given);
			if (!v) {
				df_free_words(kv);
				return err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
			}
			free(kv[i + 1]);
			kv[i + 1] = v;
		}
		if (op != DF_LABEL && df_var_set(p, kv[i], kv[i + 1]) < 0) {
			df_free_words(kv);
			return err_code(p->e);
		}
	}
	return add_step(p, op, kv, m) ? 0 : err_code(p->e);
}

/* FROM image [AS name] */
static int from_step(struct parser *p, const char *text)
{
	for (size_t i = 0; i < p->df->n_steps; i++)
		if (p->df->steps[i].op == DF_FROM)
			return df_fail(p, "a second FROM: multi-stage builds are not supported");
	if (strncmp(text, "--", 2) == 0)
		return df_fail(p, "FROM %.*s is not supported", (int)strcspn(text, " \t="), text);
	char **w;
	size_t n;
	if (df_words_of(p, text, &w, &n) < 0)
		return err_code(p->e);
	if (n != 1 && !(n == 3 && strcasecmp(w[1], "AS") == 0)) {
		df_free_words(w);
		return df_fail(p, "FROM takes an image (and AS name)");
	}
	if (n == 3) {
		free(w[1]);
		free(w[2]);
		w[1] = NULL;
	}
	return add_step(p, DF_FROM, w, 1) ? 0 : err_code(p->e);
}

/* WORKDIR, USER, STOPSIGNAL: one word after substitution. */
static int word_step(struct parser *p, enum dockerfile_op op, const char *text)
{
	char *v = df_expand_all(p, text);
	if (!v)
		return err_code(p->e);
	int r = 0;
	if (!v[0])
		r = df_fail(p, "%s needs a value", dockerfile_op_name(op));
	else if (op == DF_WORKDIR) {
		char path[DOCKERFILE_PATH_MAX];
		int len = v[0] == '/' ? snprintf(path, sizeof(path), "%s", v)
				      : snprintf(path, sizeof(path), "%s/%s",
						 strcmp(p->workdir, "/") ? p->workdir : "", v);
		if (len < 0 || (size_t)len >= sizeof(path))
			r = df_fail(p, "WORKDIR is longer than %d bytes", DOCKERFILE_PATH_MAX - 1);
		else {
			free(v);
			v = strdup(path);
			snprintf(p->workdir, sizeof(p->workdir), "%s", path);
		}
	} else if (strpbrk(v, " \t"))
		r = df_fail(p, "%s takes one word", dockerfile_op_name(op));
	char **w = r == 0 && v ? calloc(2, sizeof(*w)) : NULL;
	if (r == 0 && !w)
		r = err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r < 0) {
		free(v);
		return r;
	}
	w[0] = v;
	return add_step(p, op, w, 1) ? 0 : err_code(p->e);
}

/* EXPOSE port[/tcp|/udp]..., VOLUME path... (recorded). */
static int list_step(struct parser *p, enum dockerfile_op op, const char *text)
{
	size_t n = 0;
	char **w = op == DF_VOLUME ? json_form(text, &n) : NULL;
	if (!w && df_words_of(p, text, &w, &n) < 0)
		return err_code(p->e);
	for (size_t i = 0; op == DF_EXPOSE && i < n; i++) {
		char *end;
		long port = strtol(w[i], &end, 10);
		if (end == w[i] || port < 1 || port > 65535 ||
		    (*end && strcmp(end, "/tcp") && strcmp(end, "/udp"))) {
			int r = df_fail(p, "EXPOSE: bad port '%s'", w[i]);
			df_free_words(w);
			return r;
		}
	}
	if (n == 0) {
		df_free_words(w);
		return df_fail(p, "%s needs a value", dockerfile_op_name(op));
	}
	return add_step(p, op, w, n) ? 0 : err_code(p->e);
}

static const struct {
	const char *name;
	enum dockerfile_op op;
} instructions[] = {
    {"FROM", DF_FROM},
    {"RUN", DF_RUN},
    {"COPY", DF_COPY},
    {"ADD", DF_ADD},
    {"ENV", DF_ENV},
    {"WORKDIR", DF_WORKDIR},
    {"USER", DF_USER},
    {"CMD", DF_CMD},
    {"ENTRYPOINT", DF_ENTRYPOINT},
    {"LABEL", DF_LABEL},
    {"EXPOSE", DF_EXPOSE},
    {"ARG", DF_ARG},
    {"VOLUME", DF_VOLUME},
    {"STOPSIGNAL", DF_STOPSIGNAL},
};

/* Instructions deskbox refuses, and why. */
static const char *const refused[][2] = {
    {"ONBUILD", "it acts in other builds"},
    {"HEALTHCHECK", "deskbox does not run health checks"},
    {"SHELL", "RUN always uses /bin/sh -c"},
};

/* One logical line: the instruction word, then its arguments. */
static int instruction(struct parser *p, const char *line)
{
	size_t wl = strcspn(line, " \t");
	const char *args = line + wl + strspn(line + wl, " \t");
	char word[16];
	snprintf(word, sizeof(word), "%.*s", (int)(wl < 15 ? wl : 15), line);
	for (char *c = word; *c; c++)
		*c = (char)toupper((unsigned char)*c);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (wl == strlen(refused[i][0]) && strcmp(word, refused[i][0]) == 0)
			return df_fail(p, "%s is not supported: %s", refused[i][0], refused[i][1]);
	enum dockerfile_op op = DF_FROM;
	size_t i = 0;
	for (; i < sizeof(instructions) / sizeof(instructions[0]); i++)
		if (wl == strlen(instructions[i].name) && strcmp(word, instructions[i].name) == 0)
			break;
	int maintainer = wl == 10 && strcmp(word, "MAINTAINER") == 0;
	if (i == sizeof(instructions) / sizeof(instructions[0]) && !maintainer)
		return df_fail(p, "unknown instruction '%.*s'", (int)(wl < 40 ? wl : 40), line);
	op = maintainer ? DF_LABEL : instructions[i].op;
	int has_from = 0;
	for (size_t k = 0; k < p->df->n_steps; k++)
		has_from |= p->df->steps[k].op == DF_FROM;
	if (!has_from && op != DF_FROM && op != DF_ARG)
		return df_fail(p, "%s before FROM: a Dockerfile starts with FROM", word);
	if (maintainer) {
		char **kv = calloc(3, sizeof(*kv));
		if (!kv || !(kv[0] = strdup("maintainer")) || !(kv[1] = strdup(args))) {
			df_free_words(kv);
			return err_set(p->e, ERR_INTERNAL, ENOMEM, "out of memory");
		}
		return add_step(p, DF_LABEL, kv, 2) ? 0 : err_code(p->e);
	}
	switch (op) {
	case DF_FROM:
		return from_step(p, args);
	case DF_RUN:
	case DF_CMD:
	case DF_ENTRYPOINT:
		return command_step(p, op, args);
	case DF_COPY:
	case DF_ADD:
		return copy_step(p, op, args);
	case DF_ENV:
	case DF_LABEL:
	case DF_ARG:
		return pairs_step(p, op, args);
	case DF_EXPOSE:
	case DF_VOLUME:
		return list_step(p, op, args);
	default:
		return word_step(p, op, args);
	}
}

/* A parser directive on one of the first lines (`# escape=`). */
static int directive(struct parser *p, const char *line)
{
	const char *s = line + 1 + strspn(line + 1, " \t");
	if (strncasecmp(s, "escape", 6) != 0)
		return 0;
	s += 6;
	s += strspn(s, " \t");
	if (*s != '=')
		return 0;
	s++;
	s += strspn(s, " \t");
	if (strncmp(s, "\\", 1) != 0 || s[1 + strspn(s + 1, " \t\r")] != '\0')
		return df_fail(p, "the escape directive is not supported: the escape character is "
				  "always '\\'");
	return 0;
}

/* The logical lines of `text`: comments and blank lines dropped, lines
 * ending in '\' joined with the next, each passed to instruction() with
 * the number of its first line. */
static int lines(struct parser *p, const char *text, size_t len)
{
	struct sbuf cur = {0};
	unsigned lineno = 0, start = 0;
	int directives = 1, r = 0;
	for (size_t off = 0; r == 0 && off < len;) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		const char *l = text + off;
		off += n + (nl != NULL);
		lineno++;
		while (n && (l[n - 1] == '\r' || l[n - 1] == ' ' || l[n - 1] == '\t'))
			n--;
		size_t lead = strspn(l, " \t");
		lead = lead > n ? n : lead;
		if (lead < n && l[lead] == '#') {
			char buf[128];
			snprintf(buf, sizeof(buf), "%.*s", (int)(n - lead < 127 ? n - lead : 127),
				 l + lead);
			p->line = lineno;
			if (directives && !cur.len)
				r = directive(p, buf);
			continue;
		}
		if (lead == n) /* blank, also inside a continuation (as Docker) */
			continue;
		directives = 0;
		if (!cur.len)
			start = lineno;
		int more = n > 0 && l[n - 1] == '\\';
		for (size_t i = lead; i < n - (size_t)more; i++)
			df_sb_putc(&cur, l[i]);
		if (cur.failed) {
			p->line = start;
			r = df_fail(p, "the line is too long");
		} else if (!more) {
			p->line = start;
			if (cur.len)
				r = instruction(p, cur.s);
			free(cur.s);
			cur = (struct sbuf){0};
		} else {
			df_sb_putc(&cur, ' ');
		}
	}
	/* A continuation on the last line ends the instruction there. */
	if (r == 0 && cur.len && !cur.failed) {
		p->line = start;
		while (cur.len && cur.s[cur.len - 1] == ' ')
			cur.s[--cur.len] = '\0';
		r = instruction(p, cur.s);
	}
	free(cur.s);
	return r;
}

int dockerfile_parse(const char *text, size_t len, struct dockerfile **out, struct err *e)
{
	return dockerfile_parse_args(text, len, NULL, out, e);
}

/* Every build arg names an ARG of the Dockerfile. */
static int args_declared(const struct dockerfile *df, const char *const *args, struct err *e)
{
	for (size_t i = 0; args && args[i]; i++) {
		size_t n = strcspn(args[i], "=");
		int found = 0;
		for (size_t k = 0; k < df->n_steps && !found; k++)
			for (size_t a = 0; df->steps[k].op == DF_ARG && a < df->steps[k].argc;
			     a += 2)
				found |= strlen(df->steps[k].argv[a]) == n &&
					 strncmp(df->steps[k].argv[a], args[i], n) == 0;
		if (!found)
			return err_set(
			    e, ERR_INVALID, EINVAL,
			    "build arg '%.*s' is not declared by an ARG of the Dockerfile",
			    (int)(n < 100 ? n : 100), args[i]);
	}
	return 0;
}

int dockerfile_parse_args(const char *text, size_t len, const char *const *args,
			  struct dockerfile **out, struct err *e)
{
	*out = NULL;
	if (len > DOCKERFILE_MAX_BYTES)
		return err_set(e, ERR_TOO_LARGE, EFBIG, "the Dockerfile is larger than %d bytes",
			       DOCKERFILE_MAX_BYTES);
	if (memchr(text, '\0', len))
		return err_set(e, ERR_INVALID, EINVAL, "the Dockerfile holds a NUL byte");
	struct parser p = {.e = e, .workdir = "/", .build_args = args};
	p.df = calloc(1, sizeof(*p.df));
	if (!p.df)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	/* What an image's PATH is before any ENV (Docker's default), so that
	 * ENV PATH=/x:$PATH keeps the usual directories. */
	/* A NUL-terminated copy: the body need not be. */
	char *copy = malloc(len + 1);
	int r = copy ? df_var_set(&p, "PATH", DOCKERFILE_DEFAULT_PATH)
		     : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (copy) {
		memcpy(copy, text, len);
		copy[len] = '\0';
	}
	r = r ?: lines(&p, copy, len);
	free(copy);
	if (r == 0 && (p.df->n_steps == 0 || !dockerfile_from(p.df)))
		r = err_set(e, ERR_INVALID, EINVAL, "the Dockerfile has no FROM");
	r = r ?: args_declared(p.df, args, e);
	for (size_t i = 0; i < p.n_vars; i++) {
		free(p.keys[i]);
		free(p.vals[i]);
	}
	if (r < 0) {
		dockerfile_free(p.df);
		return r;
	}
	*out = p.df;
	return 0;
}

const char *dockerfile_from(const struct dockerfile *df)
{
	for (size_t i = 0; i < df->n_steps; i++)
		if (df->steps[i].op == DF_FROM)
			return df->steps[i].argv[0];
	return NULL;
}
