/* A reverse proxy to one upstream connection (http.h, "reverse proxy").
 *
 * One upstream connection per request, "Connection: close": no pooling, so
 * no request of one client can ever be answered on another's connection.
 * The request head is rewritten (hop-by-hop headers dropped, the
 * credential removed, X-Forwarded-* added), the body streams through as it
 * arrives (re-chunked when the client sent it chunked), and the answer's
 * head is parsed here and its body streamed back through MHD (its framing
 * undone: MHD frames it again for our client).  A 101 to an upgrade
 * request turns the connection into a byte pipe both ways.
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
#include "common/log.h"

#define HEAD_MAX     (64 * 1024) /* the upstream's answer head */
#define REQ_HEAD_MAX (64 * 1024)
#define IDLE_MS	     (120 * 1000) /* no byte from upstream this long: give up */

enum body_mode { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_EOF };

struct proxy {
	int fd;
	int stop;	 /* http_stop_fd: the server is stopping */
	int chunked_out; /* the request body goes upstream as chunks */
	int upgrade;	 /* the client asked for a protocol upgrade */
	int head_only;	 /* HEAD: the answer has no body whatever it says */
	char what[96];	 /* who answers, for messages: "the service in the sandbox" */
	enum body_mode mode;
	uint64_t left;	 /* BODY_LENGTH: bytes still to come; BODY_CHUNKED: in this chunk */
	int chunk_phase; /* BODY_CHUNKED: 0 size line next, 1 data, 2 CRLF after data, 3 done */
	size_t off, len; /* unread upstream bytes in buf[off..len) */
	char buf[HEAD_MAX];
};

static void proxy_free(void *cls)
{
	struct proxy *p = cls;
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	free(p);
}

static int send_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads more upstream bytes into buf (compacting it first): >0 read, 0 at
 * the end, -1 on an error or IDLE_MS of silence. */
static ssize_t fill(struct proxy *p)
{
	if (p->off == p->len)
		p->off = p->len = 0;
	if (p->len == sizeof(p->buf)) {
		memmove(p->buf, p->buf + p->off, p->len - p->off);
		p->len -= p->off;
		p->off = 0;
	}
	struct pollfd pf[2] = {{.fd = p->fd, .events = POLLIN}, {.fd = p->stop, .events = POLLIN}};
	int r;
	do
		r = poll(pf, 2, IDLE_MS);
	while (r < 0 && errno == EINTR);
	if (r <= 0 || pf[1].revents)
		return -1;
	ssize_t n;
	do
		n = read(p->fd, p->buf + p->len, sizeof(p->buf) - p->len);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		p->len += (size_t)n;
	return n;
}

/* ---- the request ---- */

static int hop_by_hop(const char *name)
{
	static const char *const hop[] = {
	    "Connection",	 "Keep-Alive",		"Proxy-Connection",  "TE",
	    "Trailer",		 "Transfer-Encoding",	"Upgrade",	     "Host",
	    "Content-Length",	 "Proxy-Authorization", "Forwarded",	     "X-Forwarded-For",
	    "X-Forwarded-Proto", "X-Forwarded-Host",	"X-Forwarded-Prefix"};
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (strcasecmp(name, hop[i]) == 0)
			return 1;
	return 0;
}

struct head {
	char *s;
	size_t len, cap;
	int overflow;
	const struct http_proxy_opts *o;
};

static void head_add(struct head *h, const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = b ? strlen(b) : 0, lc = c ? strlen(c) : 0;
	if (h->len + la + lb + lc + 2 >= h->cap) {
		h->overflow = 1;
		return;
	}
	memcpy(h->s + h->len, a, la);
	if (b)
		memcpy(h->s + h->len + la, b, lb);
	if (c)
		memcpy(h->s + h->len + la + lb, c, lc);
	h->len += la + lb + lc;
	memcpy(h->s + h->len, "\r\n", 2);
	h->len += 2;
}

/* The Cookie header without the cookie named o->strip_cookie; "" when
 * nothing else is left. */
static void cookie_filter(const char *value, const char *drop, char *out, size_t size)
{
	size_t dl = strlen(drop), k = 0;
	out[0] = '\0';
	for (const char *s = value; *s;) {
		while (*s == ' ' || *s == ';')
			s++;
		size_t n = strcspn(s, ";");
		if (!n)
			break;
		int ours = n > dl && strncmp(s, drop, dl) == 0 && s[dl] == '=';
		if (!ours && k + n + 3 < size) {
			if (k) {
				memcpy(out + k, "; ", 2);
				k += 2;
			}
			memcpy(out + k, s, n);
			k += n;
			out[k] = '\0';
		}
		s += n;
	}
}

static int copy_header(void *cls, const char *name, const char *value)
{
	struct head *h = cls;
	const struct http_proxy_opts *o = h->o;
	if (hop_by_hop(name) ||
	    (o->strip_authorization && strcasecmp(name, "Authorization") == 0) ||
	    (o->strip_origin && strcasecmp(name, "Origin") == 0))
		return 0;
	if (o->strip_cookie && strcasecmp(name, "Cookie") == 0) {
		char kept[8192];
		cookie_filter(value, o->strip_cookie, kept, sizeof(kept));
		if (kept[0])
			head_add(h, "Cookie: ", kept, NULL);
		return 0;
	}
	head_add(h, name, ": ", value);
	return 0;
}

static int request_head(struct http_request *req, const struct http_proxy_opts *o, struct proxy *p,
			struct head *h)
{
	head_add(h, req->method, " ", o->target);
	h->len -= 2; /* the request line goes on with the version */
	head_add(h, " HTTP/1.1", NULL, NULL);
	const char *host = http_header(req, "Host");
	head_add(h, "Host: ", o->host ? o->host : host ? host : "localhost", NULL);
	http_each_header(req, copy_header, h);
	const char *cl = http_header(req, "Content-Length");
	const char *te = http_header(req, "Transfer-Encoding");
	if (cl)
		head_add(h, "Content-Length: ", cl, NULL);
	else if (te) {
		head_add(h, "Transfer-Encoding: chunked", NULL, NULL);
		p->chunked_out = 1;
	}
	const char *up = http_header(req, "Upgrade");
	if (up) {
		head_add(h, "Upgrade: ", up, NULL);
		head_add(h, "Connection: Upgrade", NULL, NULL);
		p->upgrade = 1;
	} else {
		head_add(h, "Connection: close", NULL, NULL);
	}
	char addr[64];
	http_client_addr(req, addr, sizeof(addr));
	if (addr[0])
		head_add(h, "X-Forwarded-For: ", addr, NULL);
	head_add(h, "X-Forwarded-Proto: ", http_request_tls(req) ? "https" : "http", NULL);
	if (host)
		head_add(h, "X-Forwarded-Host: ", host, NULL);
	if (o->prefix && o->prefix[0])
		head_add(h, "X-Forwarded-Prefix: ", o->prefix, NULL);
	if (o->extra_name && o->extra_value)
		head_add(h, o->extra_name, ": ", o->extra_value);
	head_add(h, "", NULL, NULL);
	return h->overflow ? -1 : 0;
}

static int sink_write(void *cls, const char *data, size_t len, struct err *e)
{
	struct proxy *p = cls;
	char size[24];
	int n = snprintf(size, sizeof(size), "%zx\r\n", len);
	if ((p->chunked_out && send_all(p->fd, size, (size_t)n) < 0) ||
	    send_all(p->fd, data, len) < 0 || (p->chunked_out && send_all(p->fd, "\r\n", 2) < 0))
		return err_sys(e, ERR_BAD_GATEWAY, errno, "%s stopped reading", p->what);
	return 0;
}

int http_proxy_begin(struct http_request *req, const struct http_proxy_opts *o,
		     struct http_body_sink *sink, struct err *e)
{
	struct proxy *p = calloc(1, sizeof(*p));
	char *hbuf = malloc(REQ_HEAD_MAX);
	if (!p || !hbuf) {
		free(p);
		free(hbuf);
		close(o->fd);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	p->fd = o->fd;
	p->stop = http_stop_fd(req);
	p->head_only = strcmp(req->method, "HEAD") == 0;
	snprintf(p->what, sizeof(p->what), "%s", o->what ? o->what : "the service in the sandbox");
	struct head h = {hbuf, 0, REQ_HEAD_MAX, 0, o};
	int r = request_head(req, o, p, &h);
	if (r < 0)
		r = err_set(e, ERR_TOO_LARGE, 0, "request header too large to forward");
	else if (send_all(p->fd, h.s, h.len) < 0)
		r = err_sys(e, ERR_BAD_GATEWAY, errno, "sending the request to %s", p->what);
	free(hbuf);
	if (r < 0) {
		proxy_free(p);
		return r;
	}
	*sink = (struct http_body_sink){sink_write, proxy_free, p};
	return 0;
}

/* ---- the answer ---- */

/* Reads the answer's head into buf; skips 1xx interim answers other than
 * 101.  Returns the head's length (up to and with the blank line). */
static int read_head(struct proxy *p, struct err *e)
{
	for (;;) {
		char *end = p->len ? memmem(p->buf, p->len, "\r\n\r\n", 4) : NULL;
		if (end) {
			size_t hl = (size_t)(end - p->buf) + 4;
			int code = 0;
			sscanf(p->buf, "HTTP/1.%*d %d", &code);
			if (code >= 100 && code < 200 && code != 101) {
				memmove(p->buf, p->buf + hl, p->len - hl);
				p->len -= hl;
				continue;
			}
			return (int)hl;
		}
		if (p->len == sizeof(p->buf))
			return err_set(e, ERR_BAD_GATEWAY, 0, "%s sent a header over %d bytes",
				       p->what, HEAD_MAX);
		ssize_t n = fill(p);
		if (n < 0)
			return err_set(e, ERR_TIMEOUT, ETIMEDOUT, "%s did not answer", p->what);
		if (n == 0)
			return err_set(e, ERR_BAD_GATEWAY, 0,
				       "%s closed the connection without an answer", p->what);
	}
}

static int answer_header(struct proxy *p, struct http_response *res, char *name, char *value,
			 struct err *e)
{
	if (strcasecmp(name, "Content-Length") == 0) {
		char *end;
		unsigned long long v = strtoull(value, &end, 10);
		if (end == value || *end)
			return err_set(e, ERR_BAD_GATEWAY, 0,
				       "bad Content-Length from the sandbox");
		if (p->mode != BODY_CHUNKED) {
			p->mode = BODY_LENGTH;
			p->left = v;
		}
		return 0;
	}
	if (strcasecmp(name, "Transfer-Encoding") == 0) {
		if (strcasestr(value, "chunked"))
			p->mode = BODY_CHUNKED;
		return 0;
	}
	static const char *const skip[] = {"Connection", "Keep-Alive", "Date", "Proxy-Connection"};
	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (strcasecmp(name, skip[i]) == 0)
			return 0;
	if (http_add_header_copy(res, name, value, e) < 0)
		log_msg(LOG_LEVEL_WARN, "proxy: header '%s' dropped: %s", name, e->msg);
	err_clear(e);
	return 0;
}

/* Parses the head in buf[0..hl): status into res, headers copied, the body
 * framing into p->mode.  Returns the status. */
static int parse_head(struct proxy *p, size_t hl, struct http_response *res, struct err *e)
{
	p->buf[hl - 2] = '\0';
	char *line = p->buf, *next = strstr(line, "\r\n");
	int code = 0;
	if (!next || sscanf(line, "HTTP/1.%*d %d", &code) != 1 || code < 101 || code > 999)
		return err_set(e, ERR_BAD_GATEWAY, 0, "%s spoke no HTTP/1", p->what);
	p->mode = BODY_EOF;
	for (line = next + 2; *line; line = next + 2) {
		next = strstr(line, "\r\n");
		if (!next)
			break;
		*next = '\0';
		char *colon = strchr(line, ':');
		if (!colon || colon == line)
			continue;
		*colon = '\0';
		char *value = colon + 1;
		while (*value == ' ' || *value == '\t')
			value++;
		if (answer_header(p, res, line, value, e) < 0)
			return err_code(e);
	}
	if (p->head_only || code == 204 || code == 304 || code == 101)
		p->mode = BODY_NONE;
	p->off = hl;
	return code;
}

/* Copies up to `max` waiting bytes (at most `cap`) to out. */
static size_t take(struct proxy *p, char *out, size_t max, uint64_t cap)
{
	size_t n = p->len - p->off;
	if (n > max)
		n = max;
	if (n > cap)
		n = (size_t)cap;
	memcpy(out, p->buf + p->off, n);
	p->off += n;
	return n;
}

/* One CRLF-terminated line from upstream into *line (NUL-terminated in
 * buf); -1 when it does not come. */
static int read_line(struct proxy *p, char **line)
{
	for (;;) {
		char *s = p->buf + p->off;
		char *eol = memmem(s, p->len - p->off, "\r\n", 2);
		if (eol) {
			*eol = '\0';
			*line = s;
			p->off = (size_t)(eol - p->buf) + 2;
			return 0;
		}
		if (p->len - p->off > 4096 || fill(p) <= 0)
			return -1;
	}
}

/* The chunked body's next data bytes, its framing taken off. */
static long chunked_read(struct proxy *p, char *buf, size_t max)
{
	for (;;) {
		char *line;
		if (p->chunk_phase == 0) {
			if (read_line(p, &line) < 0)
				return HTTP_STREAM_ERROR;
			char *end;
			p->left = strtoull(line, &end, 16);
			if (end == line)
				return HTTP_STREAM_ERROR;
			p->chunk_phase = p->left ? 1 : 3;
		} else if (p->chunk_phase == 1) {
			if (p->off == p->len && fill(p) <= 0)
				return HTTP_STREAM_ERROR;
			size_t n = take(p, buf, max, p->left);
			p->left -= n;
			if (!p->left)
				p->chunk_phase = 2;
			return (long)n;
		} else if (p->chunk_phase == 2) {
			if (read_line(p, &line) < 0)
				return HTTP_STREAM_ERROR;
			p->chunk_phase = 0;
		} else {
			/* Trailers up to the blank line; they are dropped. */
			do
				if (read_line(p, &line) < 0)
					return HTTP_STREAM_END;
			while (*line);
			return HTTP_STREAM_END;
		}
	}
}

static long proxy_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct proxy *p = cls;
	if (p->mode == BODY_CHUNKED)
		return chunked_read(p, buf, max);
	if (p->mode == BODY_LENGTH && !p->left)
		return HTTP_STREAM_END;
	if (p->off == p->len) {
		ssize_t n = fill(p);
		if (n == 0 && p->mode == BODY_EOF)
			return HTTP_STREAM_END;
		if (n <= 0)
			return HTTP_STREAM_ERROR;
	}
	size_t n = take(p, buf, max, p->mode == BODY_LENGTH ? p->left : UINT64_MAX);
	if (p->mode == BODY_LENGTH)
		p->left -= n;
	return (long)n;
}

/* ---- upgraded connections ---- */

/* Moves bytes from `from` to `to`; 0 when `from` ended, -1 on an error. */
static int pump(int from, int to)
{
	char buf[16384];
	ssize_t n;
	do
		n = read(from, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return n == 0 ? 0 : -1;
	return send_all(to, buf, (size_t)n) < 0 ? -1 : 1;
}

static void pipe_run(void *cls, int fd, const char *extra, size_t extra_len)
{
	struct proxy *p = cls;
	if ((extra_len && send_all(p->fd, extra, extra_len) < 0) ||
	    (p->len > p->off && send_all(fd, p->buf + p->off, p->len - p->off) < 0))
		return;
	struct pollfd pf[3] = {{.fd = fd, .events = POLLIN},
			       {.fd = p->fd, .events = POLLIN},
			       {.fd = p->stop, .events = POLLIN}};
	int open_in = 1, open_out = 1;
	while (open_in || open_out) {
		int r = poll(pf, 3, -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || pf[2].revents)
			return;
		for (int i = 0; i < 2; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int got = pump(pf[i].fd, pf[1 - i].fd);
			if (got < 0)
				return;
			if (got == 0) {
				/* One side is done sending: pass the end on. */
				shutdown(pf[1 - i].fd, SHUT_WR);
				pf[i].fd = -1;
				*(i == 0 ? &open_in : &open_out) = 0;
			}
		}
	}
}

int http_proxy_finish(struct http_request *req, struct http_response *res, struct err *e)
{
	struct proxy *p = req->stream;
	/* On failure the sink's abort() (proxy_free) releases p: the http
	 * layer calls it for a handler that failed. */
	if (p->chunked_out && send_all(p->fd, "0\r\n\r\n", 5) < 0)
		return err_sys(e, ERR_BAD_GATEWAY, errno, "%s went away", p->what);
	int hl = read_head(p, e);
	int code = hl < 0 ? hl : parse_head(p, (size_t)hl, res, e);
	if (code < 0)
		return code;
	if (code == 101 && p->upgrade) {
		http_reply_upgrade(res, pipe_run, p, proxy_free);
		return 0;
	}
	if (p->mode == BODY_NONE || (p->mode == BODY_LENGTH && !p->left)) {
		http_reply_empty(res, code);
		proxy_free(p);
		return 0;
	}
	http_reply_stream(res, code, NULL, p->mode == BODY_LENGTH ? p->left : HTTP_SIZE_UNKNOWN,
			  proxy_read, p, proxy_free);
	return 0;
}
