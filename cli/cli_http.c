/* The CLI's HTTP layer on libcurl: handles, JSON requests, error answers,
 * and the small helpers (escaping, base64, writes) the verbs share. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An error answer is JSON of a few hundred bytes; a proxy's HTML page is
 * kept only in part. */
#define ERROR_BODY_MAX (64 << 10)

int cli_http_init(struct err *e)
{
	CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (rc != CURLE_OK)
		return err_set(e, ERR_INTERNAL, 0, "libcurl: %s", curl_easy_strerror(rc));
	return 0;
}

void cli_http_cleanup(void)
{
	curl_global_cleanup();
}

void cli_reply_free(struct cli_reply *r)
{
	free(r->body);
	r->body = NULL;
	r->len = 0;
}

int cli_buf_add(struct cli_buf *b, const void *data, size_t len)
{
	if (b->len + len + 1 > b->alloc) {
		size_t n = b->alloc ? b->alloc : 4096;
		while (n < b->len + len + 1)
			n *= 2;
		char *p = realloc(b->data, n);
		if (!p)
			return -1;
		b->data = p;
		b->alloc = n;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = 0;
	return 0;
}

static size_t collect(char *data, size_t size, size_t n, void *ctx)
{
	return cli_buf_add(ctx, data, size * n) < 0 ? 0 : size * n;
}

CURL *cli_handle(const struct cli *c, const char *method, const char *path,
		 const char *content_type, struct curl_slist **hdrs, struct err *e)
{
	CURL *h = curl_easy_init();
	if (!h) {
		err_set(e, ERR_INTERNAL, ENOMEM, "libcurl: cannot make a handle");
		return NULL;
	}
	size_t ulen = strlen(c->url);
	while (ulen && c->url[ulen - 1] == '/')
		ulen--;
	char *url = NULL;
	if (asprintf(&url, "%.*s%s", (int)ulen, c->url, path) < 0) {
		curl_easy_cleanup(h);
		err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		return NULL;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "deskbox-cli");
	*hdrs = NULL;
	char line[1024];
	if (c->token && *c->token) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s", c->token);
		*hdrs = curl_slist_append(*hdrs, line);
	}
	if (content_type) {
		snprintf(line, sizeof(line), "Content-Type: %s", content_type);
		*hdrs = curl_slist_append(*hdrs, line);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
	return h;
}

int cli_perform(CURL *h, const char *what, struct err *e)
{
	CURLcode rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		return 0;
	if (rc == CURLE_ABORTED_BY_CALLBACK || rc == CURLE_WRITE_ERROR)
		return err_set(e, ERR_INTERNAL, EIO, "%s: stopped", what);
	const char *url = NULL;
	curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &url);
	return err_set(e, ERR_UNAVAILABLE, EIO, "%s: %s (%s)", what, curl_easy_strerror(rc),
		       url ? url : "?");
}

int cli_answer_error(struct cli *c, long status, const char *body, size_t len, struct err *e)
{
	c->status = status;
	cJSON *j = body ? cJSON_ParseWithLength(body, len) : NULL;
	cJSON *er = cJSON_GetObjectItemCaseSensitive(j, "error");
	const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(er, "code"));
	const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(er, "message"));
	enum err_kind kind = status == 404 ? ERR_NOT_FOUND : ERR_INTERNAL;
	int r;
	if (code && msg)
		r = err_set(e, kind, 0, "%s (%s)", msg, code);
	else
		r = err_set(e, kind, 0, "the server answered %ld", status);
	cJSON_Delete(j);
	return r;
}

int cli_request(struct cli *c, const char *method, const char *path, const char *body,
		struct cli_reply *r, struct err *e)
{
	struct curl_slist *hdrs = NULL;
	struct cli_buf b = {0};
	memset(r, 0, sizeof(*r));
	CURL *h = cli_handle(c, method, path, body ? "application/json" : NULL, &hdrs, e);
	if (!h)
		return err_code(e);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	} else if (strcmp(method, "GET") == 0 || strcmp(method, "DELETE") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	} else {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
	}
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	int rc = cli_perform(h, method, e);
	if (rc == 0) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
		if (r->status >= 300)
			rc = cli_answer_error(c, r->status, b.data, b.len, e);
	}
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	if (rc < 0) {
		free(b.data);
		return rc;
	}
	r->body = b.data ? b.data : strdup("");
	r->len = b.len;
	return 0;
}

char *cli_escape(const char *s)
{
	char *q = curl_easy_escape(NULL, s, 0);
	char *out = q ? strdup(q) : NULL;
	curl_free(q);
	return out;
}

char *cli_sandbox_path(const char *id, const char *suffix)
{
	char *q = cli_escape(id), *out = NULL;
	if (q && asprintf(&out, "/v1/sandboxes/%s%s", q, suffix) < 0)
		out = NULL;
	free(q);
	return out;
}

void cli_print_body(const struct cli_reply *r)
{
	fwrite(r->body, 1, r->len, stdout);
	if (!r->len || r->body[r->len - 1] != '\n')
		fputc('\n', stdout);
}

int cli_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
