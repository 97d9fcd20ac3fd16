/* The in-sandbox browser over the Chrome DevTools Protocol (docs/ports.md,
 * "The browser from outside").
 *
 * The sandbox's chromium listens for DevTools on 127.0.0.1:9222 inside.
 * GET .../browser/cdp answers like Chrome's /json/version (and
 * .../browser/cdp/json/... like /json/...), with every webSocketDebuggerUrl
 * pointing at .../browser/cdp/devtools/..., which deskboxd pipes to the
 * browser: `chromium.connectOverCDP(".../browser/cdp", {headers})` in
 * Playwright, or puppeteer's browserURL, then drive it from outside.
 *
 * Chrome answers /json only to a Host that is an address or localhost and
 * refuses DevTools WebSockets that carry a foreign Origin, so both are set
 * or dropped here; the API token protects the routes instead.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

#define CDP_PORT     9222
#define CDP_HOST     "127.0.0.1:9222"
#define CDP_BODY_MAX (1u << 20)
#define CDP_WAIT_MS  10000

/* Whether buf[0..got) holds a whole answer: Chrome keeps the connection
 * open whatever the request says, so its Content-Length tells the end. */
static int answer_complete(const char *buf, size_t got)
{
	const char *end = memmem(buf, got, "\r\n\r\n", 4);
	if (!end)
		return 0;
	const char *cl = strcasestr(buf, "\r\nContent-Length:");
	if (!cl || cl > end)
		return 0;
	unsigned long long len = strtoull(cl + 17, NULL, 10);
	return got - (size_t)(end + 4 - buf) >= len;
}

/* GET `path` from the browser's DevTools HTTP server: the body, malloc'd. */
static int cdp_get(int fd, const char *path, char **body, size_t *len, struct err *e)
{
	char req[512];
	int n =
	    snprintf(req, sizeof(req),
		     "GET %s HTTP/1.1\r\nHost: " CDP_HOST "\r\nConnection: close\r\n\r\n", path);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		return err_sys(e, ERR_BAD_GATEWAY, errno, "asking the browser");
	size_t cap = 64 * 1024, got = 0;
	char *buf = malloc(cap + 1);
	if (!buf)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, CDP_WAIT_MS) <= 0) {
			free(buf);
			return err_set(e, ERR_TIMEOUT, ETIMEDOUT, "the browser did not answer");
		}
		if (got == cap) {
			char *nb = cap < CDP_BODY_MAX ? realloc(buf, cap * 2 + 1) : NULL;
			if (!nb) {
				free(buf);
				return err_set(e, ERR_BAD_GATEWAY, 0,
					       "the browser's answer is too long");
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		buf[got] = '\0';
		if (answer_complete(buf, got))
			break;
	}
	buf[got] = '\0';
	int code = 0;
	char *start = strstr(buf, "\r\n\r\n");
	if (!start || sscanf(buf, "HTTP/1.%*d %d", &code) != 1 || code != 200) {
		free(buf);
		return err_set(e, ERR_BAD_GATEWAY, 0, "the browser answered %s with status %d",
			       path, code);
	}
	start += 4;
	*len = got - (size_t)(start - buf);
	memmove(buf, start, *len + 1);
	*body = buf;
	return 0;
}

/* `body` with every "ws://127.0.0.1:9222/devtools/" made `base`: malloc'd. */
static char *rewrite_ws(const char *body, const char *base)
{
	static const char from[] = "ws://" CDP_HOST "/devtools/";
	size_t fl = sizeof(from) - 1, bl = strlen(base), count = 0;
	for (const char *s = body; (s = strstr(s, from)); s += fl)
		count++;
	char *out = malloc(strlen(body) + count * bl + 1), *o = out;
	if (!out)
		return NULL;
	for (const char *s = body;;) {
		const char *hit = strstr(s, from);
		size_t n = hit ? (size_t)(hit - s) : strlen(s);
		memcpy(o, s, n);
		o += n;
		if (!hit)
			break;
		memcpy(o, base, bl);
		o += bl;
		s = hit + fl;
	}
	*o = '\0';
	return out;
}

/* A connection to the browser's DevTools port into o->fd; 409 saying how
 * to start the browser when nothing listens there. */
static int cdp_open(struct http_request *req, const char *sid, struct http_proxy_opts *o,
		    struct err *e)
{
	if (api_proxy_open(req, sid, CDP_PORT, o, e) == 0)
		return 0;
	if (e->kind == ERR_BAD_GATEWAY)
		return err_set(e, ERR_CONFLICT, 0,
			       "the browser is not running in the sandbox (POST "
			       "/v1/sandboxes/%s/desktop/browser starts it)",
			       sid);
	return err_code(e);
}

int api_browser_cdp(struct http_request *req, struct http_response *res, struct err *e)
{
	const char *sid = req->captures[0];
	char path[256];
	const char *rest = req->n_captures > 1 ? req->captures[1] : NULL;
	if (rest && strlen(rest) > 200)
		return err_set(e, ERR_INVALID, 0, "DevTools path too long");
	snprintf(path, sizeof(path), "/json/%s", rest ? rest : "version");
	struct http_proxy_opts o = {0};
	if (cdp_open(req, sid, &o, e) < 0)
		return err_code(e);
	char *body = NULL;
	size_t len = 0;
	int r = cdp_get(o.fd, path, &body, &len, e);
	close(o.fd);
	if (r < 0)
		return r;
	const char *host = http_header(req, "Host");
	char base[512];
	snprintf(base, sizeof(base), "%s://%s/v1/sandboxes/%s/browser/cdp/devtools/",
		 http_request_tls(req) ? "wss" : "ws", host ? host : "127.0.0.1", sid);
	char *out = rewrite_ws(body, base);
	free(body);
	if (!out)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	http_reply_data(res, 200, "application/json", out, strlen(out));
	return 0;
}

int api_browser_devtools_begin(struct http_request *req, struct http_body_sink *sink, struct err *e)
{
	char target[1024];
	const char *q = http_raw_query(req);
	if (snprintf(target, sizeof(target), "/devtools/%s%s%s", req->captures[1], *q ? "?" : "",
		     q) >= (int)sizeof(target))
		return err_set(e, ERR_INVALID, 0, "DevTools path too long");
	struct http_proxy_opts o = {
	    .target = target,
	    .host = CDP_HOST,
	    .strip_authorization = 1,
	    .strip_origin = 1,
	};
	if (cdp_open(req, req->captures[0], &o, e) < 0)
		return err_code(e);
	return http_proxy_begin(req, &o, sink, e);
}

int api_browser_devtools(struct http_request *req, struct http_response *res, struct err *e)
{
	return http_proxy_finish(req, res, e);
}

int api_cdp_page_url(struct http_request *req, char *url, size_t size)
{
	struct err e = ERR_INIT;
	struct http_proxy_opts o = {0};
	if (api_proxy_open(req, req->captures[0], CDP_PORT, &o, &e) < 0)
		return -1;
	char *body = NULL;
	size_t len = 0;
	int r = cdp_get(o.fd, "/json/list", &body, &len, &e);
	close(o.fd);
	if (r < 0)
		return -1;
	/* Chrome lists its targets most recently active first. */
	cJSON *list = cJSON_ParseWithLength(body, len), *t;
	free(body);
	r = -1;
	const cJSON *arr = cJSON_IsArray(list) ? list : NULL;
	cJSON_ArrayForEach(t, arr)
	{
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(t, "url");
		if (cJSON_IsString(type) && strcmp(type->valuestring, "page") == 0 &&
		    cJSON_IsString(u) && strlen(u->valuestring) < size) {
			snprintf(url, size, "%s", u->valuestring);
			r = 0;
			break;
		}
	}
	cJSON_Delete(list);
	return r;
}
