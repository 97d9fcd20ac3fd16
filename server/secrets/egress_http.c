/* egress_http: the client's HTTP/1.x requests, parsed (http-parser) and
 * written again onto the real host with placeholders replaced.
 *
 * Each request is rebuilt from the parser's callbacks: the request line
 * and headers once the head is complete (placeholders replaced in the
 * target and the header values when the connection's verified host is
 * one of the secret's), then the body as it arrives (chunked bodies
 * chunked again; trailers are dropped).  A secret with replace_in_body
 * has a Content-Length body of at most BODY_MAX buffered, replaced and
 * its length corrected.  A placeholder on its way anywhere else is left
 * as it is, logged and counted. */
#include "internal.h"

#include <errno.h>
#include <http_parser.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define HEAD_MAX (64 * 1024)
#define BODY_MAX (1024 * 1024)

struct buf {
	char *p;
	size_t len, cap;
};

struct egress_rw {
	struct egress_conn *c;
	http_parser parser;
	http_parser_settings settings;
	struct buf url, fields; /* fields: "name\\0value\\0" pairs */
	int in_value;		/* the last callback was a value */
	int chunked, buffering, failed;
	struct buf body;
	struct secrets_subst sub;
};

static int buf_add(struct buf *b, const char *p, size_t n, size_t max)
{
	if (n > max || b->len > max - n)
		return -1;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 1024;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			return -1;
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

static void buf_free(struct buf *b)
{
	if (b->p)
		explicit_bzero(b->p, b->cap);
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct egress_rw *rw = p->data;
	return buf_add(&rw->url, at, n, HEAD_MAX);
}

static int on_field(http_parser *p, const char *at, size_t n)
{
	struct egress_rw *rw = p->data;
	if (rw->in_value || rw->fields.len == 0) { /* a new header */
		if (rw->fields.len && buf_add(&rw->fields, "", 1, HEAD_MAX) < 0)
			return -1;
		rw->in_value = 0;
	}
	return buf_add(&rw->fields, at, n, HEAD_MAX);
}

static int on_value(http_parser *p, const char *at, size_t n)
{
	struct egress_rw *rw = p->data;
	if (!rw->in_value) {
		if (buf_add(&rw->fields, "", 1, HEAD_MAX) < 0)
			return -1;
		rw->in_value = 1;
	}
	return buf_add(&rw->fields, at, n, HEAD_MAX);
}

/* Appends `s` with every placeholder of `sub` replaced (only where
 * `allowed`); counts what was replaced and what was not. */
static int put_replaced(struct egress_rw *rw, struct buf *out, const char *s, size_t n, int body)
{
	struct egress_conn *c = rw->c;
	const struct egress_binding *b = c->b;
	size_t i = 0, start = 0;
	while (i + SECRETS_PLACEHOLDER_LEN <= n) {
		if (memcmp(s + i, "deskbox-secret-", 15) != 0) {
			i++;
			continue;
		}
		const char *value = NULL;
		for (size_t k = 0; k < rw->sub.n && !value; k++)
			if ((!body || rw->sub.in_body[k]) &&
			    memcmp(s + i, rw->sub.placeholder[k], SECRETS_PLACEHOLDER_LEN) == 0)
				value = rw->sub.value[k];
		if (!value) {
			for (size_t k = 0; k < b->n; k++)
				if (memcmp(s + i, b->placeholders[k], SECRETS_PLACEHOLDER_LEN) ==
				    0) {
					egress_count(c->g, EGRESS_REFUSED, 1);
					log_msg(
					    LOG_LEVEL_WARN,
					    "egress: sandbox %s sent the placeholder of '%s' to "
					    "%s (%s): left as it is",
					    b->addr, b->names[k],
					    c->host[0] ? c->host : "plain http", c->dst);
				}
			i++;
			continue;
		}
		if (buf_add(out, s + start, i - start, SIZE_MAX / 4) < 0 ||
		    buf_add(out, value, strlen(value), SIZE_MAX / 4) < 0)
			return -1;
		egress_count(c->g, EGRESS_REPLACED, 1);
		i += SECRETS_PLACEHOLDER_LEN;
		start = i;
	}
	return buf_add(out, s + start, n - start, SIZE_MAX / 4);
}

/* The Host header's name without a port, or "". */
static void host_of(const struct buf *fields, char *out, size_t size)
{
	out[0] = '\0';
	for (const char *f = fields->p; f && f < fields->p + fields->len;) {
		const char *v = f + strlen(f) + 1;
		if (strcasecmp(f, "host") == 0) {
			snprintf(out, size, "%s", v);
			out[strcspn(out, ":")] = '\0';
			return;
		}
		f = v + strlen(v) + 1;
	}
}

/* Writes the head, with Content-Length `clen` in place of the given one
 * when >= 0. */
static int write_head(struct egress_rw *rw, long long clen)
{
	http_parser *p = &rw->parser;
	struct buf out = {0};
	char line[64];
	int r = buf_add(&out, http_method_str(p->method), strlen(http_method_str(p->method)),
			HEAD_MAX) |
		buf_add(&out, " ", 1, HEAD_MAX) |
		put_replaced(rw, &out, rw->url.p ? rw->url.p : "", rw->url.len, 0);
	snprintf(line, sizeof(line), " HTTP/%u.%u\r\n", p->http_major, p->http_minor);
	r |= buf_add(&out, line, strlen(line), HEAD_MAX);
	for (const char *f = rw->fields.p; r == 0 && f && f < rw->fields.p + rw->fields.len;) {
		const char *v = f + strlen(f) + 1;
		if (clen >= 0 && strcasecmp(f, "content-length") == 0) {
			snprintf(line, sizeof(line), "Content-Length: %lld\r\n", clen);
			r |= buf_add(&out, line, strlen(line), SIZE_MAX / 4);
		} else {
			r |= buf_add(&out, f, strlen(f), SIZE_MAX / 4) |
			     buf_add(&out, ": ", 2, SIZE_MAX / 4) |
			     put_replaced(rw, &out, v, strlen(v), 0) |
			     buf_add(&out, "\r\n", 2, SIZE_MAX / 4);
		}
		f = v + strlen(v) + 1;
	}
	r |= buf_add(&out, "\r\n", 2, SIZE_MAX / 4);
	if (r == 0)
		r = egress_write(&rw->c->up, out.p, out.len);
	buf_free(&out);
	return r < 0 ? -1 : 0;
}

static int on_headers(http_parser *p)
{
	struct egress_rw *rw = p->data;
	struct egress_conn *c = rw->c;
	secrets_subst_release(&rw->sub);
	char host[SECRETS_HOST_MAX + 1];
	host_of(&rw->fields, host, sizeof(host));
	/* Only over TLS whose host proved its name, and only when the
	 * request names that host too. */
	if (c->host[0] && strcasecmp(host, c->host) == 0)
		secrets_subst_for(c->g->secrets, c->host, c->b->n, c->b->name_p, c->b->ph_p,
				  &rw->sub);
	rw->chunked = (p->flags & F_CHUNKED) != 0;
	rw->buffering = 0;
	for (size_t k = 0; k < rw->sub.n; k++)
		rw->buffering |= rw->sub.in_body[k];
	for (size_t k = 0; k < c->b->n; k++)
		for (size_t i = 0; i < rw->sub.n; i++)
			if (rw->sub.placeholder[i] == c->b->ph_p[k])
				secrets_touch(c->g->secrets, c->b->names[k]);
	/* Buffered only when its length is known and small. */
	if (rw->buffering &&
	    (rw->chunked || p->content_length > BODY_MAX || p->content_length == ULLONG_MAX))
		rw->buffering = 0;
	if (rw->buffering)
		return 0;
	return write_head(rw, -1) < 0 ? -1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct egress_rw *rw = p->data;
	if (rw->buffering)
		return buf_add(&rw->body, at, n, BODY_MAX);
	if (!rw->chunked)
		return egress_write(&rw->c->up, at, n) < 0 ? -1 : 0;
	char hdr[32];
	snprintf(hdr, sizeof(hdr), "%zx\r\n", n);
	return egress_write(&rw->c->up, hdr, strlen(hdr)) < 0 ||
		       egress_write(&rw->c->up, at, n) < 0 ||
		       egress_write(&rw->c->up, "\r\n", 2) < 0
		   ? -1
		   : 0;
}

static int on_complete(http_parser *p)
{
	struct egress_rw *rw = p->data;
	int r = 0;
	if (rw->buffering) {
		struct buf out = {0};
		r = put_replaced(rw, &out, rw->body.p ? rw->body.p : "", rw->body.len, 1);
		if (r == 0)
			r = write_head(rw, (long long)out.len);
		if (r == 0 && out.len)
			r = egress_write(&rw->c->up, out.p, out.len);
		buf_free(&out);
		buf_free(&rw->body);
	} else if (rw->chunked) {
		r = egress_write(&rw->c->up, "0\r\n\r\n", 5);
	}
	rw->url.len = rw->fields.len = 0;
	rw->in_value = 0;
	secrets_subst_release(&rw->sub);
	return r < 0 ? -1 : 0;
}

int egress_rw_new(struct egress_conn *c, struct egress_rw **out)
{
	struct egress_rw *rw = calloc(1, sizeof(*rw));
	if (!rw)
		return -ENOMEM;
	rw->c = c;
	http_parser_init(&rw->parser, HTTP_REQUEST);
	rw->parser.data = rw;
	http_parser_settings_init(&rw->settings);
	rw->settings.on_url = on_url;
	rw->settings.on_header_field = on_field;
	rw->settings.on_header_value = on_value;
	rw->settings.on_headers_complete = on_headers;
	rw->settings.on_body = on_body;
	rw->settings.on_message_complete = on_complete;
	*out = rw;
	return 0;
}

int egress_rw_feed(struct egress_rw *rw, const char *buf, size_t len, size_t *raw_off)
{
	size_t n = http_parser_execute(&rw->parser, &rw->settings, buf, len);
	if (rw->parser.upgrade) {
		*raw_off = n;
		return 1;
	}
	if (HTTP_PARSER_ERRNO(&rw->parser) != HPE_OK || n != len)
		return -1;
	return 0;
}

void egress_rw_free(struct egress_rw *rw)
{
	if (!rw)
		return;
	buf_free(&rw->url);
	buf_free(&rw->fields);
	buf_free(&rw->body);
	secrets_subst_release(&rw->sub);
	free(rw);
}
