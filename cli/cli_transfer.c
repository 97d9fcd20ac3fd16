/* Streamed transfers: uploads read from an fd, downloads written to one,
 * server-sent events handed over as they arrive, and the progress bar.
 * Nothing here holds a whole file in memory. */
#include "internal.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"

/* A bar appears only for transfers still running after this long. */
#define PROGRESS_AFTER_S 1.0

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_progress_start(struct cli_progress *p, const struct cli *c, const char *label)
{
	p->on = c->progress;
	p->label = label;
	p->started = now_s();
	p->drawn = 0;
}

int cli_progress_cb(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		    curl_off_t ulnow)
{
	struct cli_progress *p = ctx;
	double t = now_s() - p->started;
	if (!p->on || t < PROGRESS_AFTER_S)
		return 0;
	double done = (double)(ultotal ? ulnow : dlnow),
	       total = (double)(ultotal ? ultotal : dltotal);
	char bar[31];
	int fill = total > 0 ? (int)(30 * done / total) : 0;
	for (int i = 0; i < 30; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[30] = 0;
	fprintf(stderr, "\r%s [%s] %.1f / %.1f MiB  %.1f MiB/s ", p->label, bar, done / 1048576,
		total / 1048576, done / 1048576 / t);
	p->drawn = 1;
	return 0;
}

void cli_progress_end(struct cli_progress *p)
{
	if (p->drawn)
		fputc('\n', stderr);
}

static void set_progress(CURL *h, struct cli_progress *p)
{
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cli_progress_cb);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, p);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, p->on ? 0L : 1L);
}

static void sha256_hex(struct sha256_ctx *s, char *out)
{
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_digest(s, sizeof(d), d);
	hex_encode(d, sizeof(d), out);
}

struct upload {
	int fd;
	int read_errno;
	struct sha256_ctx sha;
	struct cli_buf answer;
};

static size_t upload_read(char *buf, size_t size, size_t n, void *ctx)
{
	struct upload *u = ctx;
	ssize_t got;
	do
		got = read(u->fd, buf, size * n);
	while (got < 0 && errno == EINTR);
	if (got < 0) {
		u->read_errno = errno;
		return CURL_READFUNC_ABORT;
	}
	sha256_update(&u->sha, (size_t)got, (const uint8_t *)buf);
	return (size_t)got;
}

static size_t upload_answer(char *data, size_t size, size_t n, void *ctx)
{
	struct upload *u = ctx;
	return cli_buf_add(&u->answer, data, size * n) < 0 ? 0 : size * n;
}

int cli_upload(struct cli *c, const char *path, int fd, uint64_t size, char *sha_hex,
	       struct cli_reply *r, struct err *e)
{
	struct curl_slist *hdrs = NULL;
	struct upload u = {.fd = fd};
	struct cli_progress p;
	memset(r, 0, sizeof(*r));
	sha256_init(&u.sha);
	CURL *h = cli_handle(c, "PUT", path, "application/octet-stream", &hdrs, e);
	if (!h)
		return err_code(e);
	curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
	curl_easy_setopt(h, CURLOPT_READFUNCTION, upload_read);
	curl_easy_setopt(h, CURLOPT_READDATA, &u);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, upload_answer);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &u);
	cli_progress_start(&p, c, "upload");
	set_progress(h, &p);
	int rc = cli_perform(h, "upload", e);
	cli_progress_end(&p);
	if (u.read_errno)
		rc = err_sys(e, ERR_INTERNAL, u.read_errno, "reading the local file");
	if (rc == 0) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
		if (r->status >= 300)
			rc = cli_answer_error(c, r->status, u.answer.data, u.answer.len, e);
	}
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	sha256_hex(&u.sha, sha_hex);
	r->body = u.answer.data ? u.answer.data : strdup("");
	r->len = u.answer.len;
	return rc;
}

struct download {
	CURL *h;
	int fd;
	int write_errno;
	long status;
	uint64_t size;
	struct sha256_ctx sha;
	struct cli_buf error; /* the body of an error answer */
};

static size_t download_write(char *data, size_t size, size_t n, void *ctx)
{
	struct download *d = ctx;
	if (!d->status)
		curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &d->status);
	if (d->status >= 300) {
		if (d->error.len < (64 << 10))
			cli_buf_add(&d->error, data, size * n);
		return size * n;
	}
	if (cli_write_all(d->fd, data, size * n) < 0) {
		d->write_errno = errno;
		return 0;
	}
	sha256_update(&d->sha, size * n, (const uint8_t *)data);
	d->size += size * n;
	return size * n;
}

int cli_download(struct cli *c, const char *path, int fd, uint64_t *size, char *sha_hex,
		 struct err *e)
{
	struct curl_slist *hdrs = NULL;
	struct download d = {.fd = fd};
	struct cli_progress p;
	sha256_init(&d.sha);
	CURL *h = cli_handle(c, "GET", path, NULL, &hdrs, e);
	if (!h)
		return err_code(e);
	d.h = h;
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, download_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &d);
	cli_progress_start(&p, c, "download");
	set_progress(h, &p);
	int rc = cli_perform(h, "download", e);
	cli_progress_end(&p);
	if (d.write_errno)
		rc = err_sys(e, ERR_INTERNAL, d.write_errno, "writing the local file");
	if (rc == 0) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &d.status);
		if (d.status >= 300)
			rc = cli_answer_error(c, d.status, d.error.data, d.error.len, e);
	}
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	free(d.error.data);
	*size = d.size;
	if (sha_hex)
		sha256_hex(&d.sha, sha_hex);
	return rc;
}

/* Server-sent events: lines "event: NAME" and "data: ..." up to a blank
 * line (deskboxd sends one data line per event; several are joined with
 * "\n" as the format says); lines starting with ':' are comments. */
struct sse {
	CURL *h;
	long status;
	struct cli_buf line;
	struct cli_buf data;
	char event[64];
	cli_event_fn fn;
	void *ctx;
};

static int sse_line(struct sse *s, const char *l)
{
	if (!*l) {
		int r = 0;
		if (s->data.len || s->event[0])
			r = s->fn(s->ctx, s->event[0] ? s->event : "message",
				  s->data.data ? s->data.data : "");
		s->event[0] = 0;
		s->data.len = 0;
		return r;
	}
	if (l[0] == ':')
		return 0;
	const char *v = strchr(l, ':');
	size_t klen = v ? (size_t)(v - l) : strlen(l);
	v = v ? v + 1 + (v[1] == ' ') : "";
	if (klen == 5 && strncmp(l, "event", 5) == 0)
		snprintf(s->event, sizeof(s->event), "%s", v);
	else if (klen == 4 && strncmp(l, "data", 4) == 0) {
		if (s->data.len)
			cli_buf_add(&s->data, "\n", 1);
		cli_buf_add(&s->data, v, strlen(v));
	}
	return 0;
}

static size_t sse_write(char *data, size_t size, size_t n, void *ctx)
{
	struct sse *s = ctx;
	if (!s->status)
		curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->status);
	if (s->status >= 300)
		return cli_buf_add(&s->line, data, size * n) < 0 ? 0 : size * n;
	for (size_t i = 0; i < size * n; i++) {
		if (data[i] != '\n') {
			if (data[i] != '\r' && cli_buf_add(&s->line, data + i, 1) < 0)
				return 0;
			continue;
		}
		if (sse_line(s, s->line.data ? s->line.data : "") < 0)
			return 0;
		s->line.len = 0;
		if (s->line.data)
			s->line.data[0] = 0;
	}
	return size * n;
}

int cli_stream(struct cli *c, const char *path, const char *body, cli_event_fn fn, void *ctx,
	       struct err *e)
{
	struct curl_slist *hdrs = NULL;
	struct sse s = {.fn = fn, .ctx = ctx};
	CURL *h = cli_handle(c, "POST", path, "application/json", &hdrs, e);
	if (!h)
		return err_code(e);
	s.h = h;
	hdrs = curl_slist_append(hdrs, "Accept: text/event-stream");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sse_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	int rc = cli_perform(h, "stream", e);
	if (rc == 0) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s.status);
		if (s.status >= 300)
			rc = cli_answer_error(c, s.status, s.line.data, s.line.len, e);
	}
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	free(s.line.data);
	free(s.data.data);
	return rc;
}
