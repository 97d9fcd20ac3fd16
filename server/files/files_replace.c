/* files: find-and-replace in a file, written back atomically (see
 * files.h).  The file is read whole (at most FILES_REPLACE_MAX_SIZE) through
 * files_open_read() and written through the upload path (temporary file,
 * fsync, rename), so readers see the old content or the new, never a mix. */
#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "internal.h"

/* A growing output buffer. */
struct buf {
	char *p;
	size_t len, cap;
	int oom;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->oom || !n)
		return;
	if (b->len + n > b->cap) {
		size_t nc = b->cap ? b->cap : 4096;
		while (nc < b->len + n)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

/* The replacement for one regex match: "\N" is group N, "\\" a backslash. */
static void put_replacement(struct buf *b, const char *rep, const char *base,
			    const regmatch_t *m)
{
	for (const char *p = rep; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '9') {
			const regmatch_t *g = &m[p[1] - '0'];
			if (g->rm_so >= 0)
				put(b, base + g->rm_so, (size_t)(g->rm_eo - g->rm_so));
			p++;
		} else if (p[0] == '\\' && p[1] == '\\') {
			put(b, "\\", 1);
			p++;
		} else {
			put(b, p, 1);
		}
	}
}

static unsigned replace_regex(const regex_t *re, const char *text, size_t len, const char *rep,
			      struct buf *out)
{
	unsigned count = 0;
	size_t pos = 0;
	regmatch_t m[10];
	while (pos <= len) {
		int flags = pos > 0 && text[pos - 1] != '\n' ? REG_NOTBOL : 0;
		if (regexec(re, text + pos, 10, m, flags) != 0)
			break;
		const char *base = text + pos;
		put(out, base, (size_t)m[0].rm_so);
		put_replacement(out, rep, base, m);
		count++;
		size_t end = (size_t)m[0].rm_eo;
		if (m[0].rm_eo == m[0].rm_so) {
			/* An empty match: keep one character and go on after it. */
			if (pos + end >= len) {
				pos = len + 1;
				break;
			}
			put(out, base + end, 1);
			end++;
		}
		pos += end;
	}
	if (pos < len)
		put(out, text + pos, len - pos);
	return count;
}

static unsigned replace_text(const char *text, size_t len, const char *pat, const char *rep,
			     struct buf *out)
{
	unsigned count = 0;
	size_t pl = strlen(pat), rl = strlen(rep), pos = 0;
	const char *hit;
	while (pos < len && (hit = memmem(text + pos, len - pos, pat, pl))) {
		put(out, text + pos, (size_t)(hit - (text + pos)));
		put(out, rep, rl);
		pos = (size_t)(hit - text) + pl;
		count++;
	}
	put(out, text + pos, len - pos);
	return count;
}

/* The whole file, NUL-terminated, into *out (caller frees). */
static int read_whole(const struct files_root *fr, const char *canon, char **out, size_t *len,
		      struct err *e)
{
	_cleanup_fd_ int fd = -1;
	struct stat st;
	if (files_open_read(fr, canon, &fd, &st, e) < 0)
		return err_code(e);
	if ((uint64_t)st.st_size > FILES_REPLACE_MAX_SIZE)
		return err_set(e, ERR_TOO_LARGE, EFBIG, "'%s' is larger than %u MiB", canon,
			       FILES_REPLACE_MAX_SIZE >> 20);
	char *p = malloc((size_t)st.st_size + 1);
	if (!p)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, p + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	p[got] = '\0';
	if (memchr(p, '\0', got)) {
		free(p);
		return err_set(e, ERR_INVALID, EINVAL, "'%s' is a binary file (it holds NUL bytes)",
			       canon);
	}
	*out = p;
	*len = got;
	return 0;
}

static int write_back(const struct files_root *fr, const char *canon, const struct buf *b,
		      struct err *e)
{
	struct files_upload *u;
	if (files_upload_begin(fr, canon, 0, -1, &u, e) < 0)
		return err_code(e);
	int r = files_upload_write(u, b->p ? b->p : "", b->len, e);
	if (r == 0)
		r = files_upload_commit(u, e);
	files_upload_free(u);
	return r;
}

static int compile(regex_t *re, const char *pattern, int flags, struct err *e)
{
	int rc = regcomp(re, pattern, flags);
	if (rc == 0)
		return 0;
	char msg[128];
	regerror(rc, re, msg, sizeof(msg));
	regfree(re);
	return err_set(e, ERR_INVALID, EINVAL, "field 'pattern': bad regex: %s", msg);
}

int files_regex_check(const char *pattern, struct err *e)
{
	regex_t re;
	if (compile(&re, pattern, REG_EXTENDED | REG_NEWLINE, e) < 0)
		return err_code(e);
	regfree(&re);
	return 0;
}

int files_replace(const struct files_root *fr, const char *canon, const char *pattern,
		  const char *replacement, int regex, unsigned *count, struct err *e)
{
	*count = 0;
	if (!*pattern)
		return err_set(e, ERR_INVALID, EINVAL, "field 'pattern' must not be empty");
	regex_t re;
	if (regex && compile(&re, pattern, REG_EXTENDED | REG_NEWLINE, e) < 0)
		return err_code(e);
	char *text = NULL;
	size_t len = 0;
	struct buf out = {0};
	int r = read_whole(fr, canon, &text, &len, e);
	if (r == 0) {
		*count = regex ? replace_regex(&re, text, len, replacement, &out)
			       : replace_text(text, len, pattern, replacement, &out);
		if (out.oom)
			r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		else if (out.len > FILES_REPLACE_MAX_SIZE)
			r = err_set(e, ERR_TOO_LARGE, EFBIG, "'%s' would grow past %u MiB", canon,
				    FILES_REPLACE_MAX_SIZE >> 20);
		else if (*count)
			r = write_back(fr, canon, &out, e);
	}
	if (regex)
		regfree(&re);
	free(text);
	free(out.p);
	if (r < 0)
		*count = 0;
	return r;
}
