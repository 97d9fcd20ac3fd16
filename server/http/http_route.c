/* Routing: a path against the route tables (the main one and the
 * mounts'), which miss is a 404 and which a 405, and the API token in the
 * header a route names. */
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "common/text.h"

int http_route_match(const char *pattern, const char *path, char *buf, size_t buf_size,
		     const char **captures, size_t *n_captures)
{
	size_t len = strlen(path);
	*n_captures = 0;
	if (len + 1 > buf_size || path[0] != '/' || pattern[0] != '/')
		return 0;
	memcpy(buf, path, len + 1);
	const char *p = pattern + 1;
	char *s = buf + 1;
	for (;;) {
		size_t plen = strcspn(p, "/"), slen = strcspn(s, "/");
		int capture = plen >= 2 && p[0] == '{' && p[plen - 1] == '}';
		if (capture && plen >= 3 && p[plen - 2] == '*' && !p[plen]) {
			/* "{name*}" as the last segment: the rest of the path,
			 * slashes included (static file trees). */
			if (!*s || *n_captures >= HTTP_MAX_CAPTURES)
				return 0;
			captures[(*n_captures)++] = s;
			return 1;
		}
		if (capture) {
			if (slen == 0 || *n_captures >= HTTP_MAX_CAPTURES)
				return 0;
			captures[(*n_captures)++] = s;
		} else if (plen != slen || memcmp(p, s, plen) != 0) {
			return 0;
		}
		char pc = p[plen], sc = s[slen];
		if (pc != sc)
			return 0;
		if (capture)
			s[slen] = '\0';
		if (!pc)
			return 1;
		p += plen + 1;
		s += slen + 1;
	}
}

static int is_capture(const char *seg, size_t n)
{
	return n >= 2 && seg[0] == '{' && seg[n - 1] == '}';
}

/* Whether a route of `method` has a literal segment where `pattern` has a
 * wildcard, after the same segments before it ("POST .../process/exec"
 * against "GET .../process/{pid}"): a path that matched `pattern` there is
 * then most likely that route misspelt, a 404, not a wrong method. */
static int literal_sibling(const struct http_route *routes, size_t n, const char *method,
			   const char *pattern)
{
	for (size_t i = 0; i < n; i++) {
		const struct http_route *r = &routes[i];
		if (strcmp(r->method, method) != 0)
			continue;
		const char *p = pattern + 1, *q = r->pattern + 1;
		for (;;) {
			size_t pn = strcspn(p, "/"), qn = strcspn(q, "/");
			int pc = is_capture(p, pn), qc = is_capture(q, qn);
			if (pc && !qc && qn > 0)
				return 1;
			if (pc != qc || (!pc && (pn != qn || memcmp(p, q, pn) != 0)))
				break;
			if (!p[pn] || !q[qn])
				break;
			p += pn + 1;
			q += qn + 1;
		}
	}
	return 0;
}

static const struct http_route *route_in(const struct http_route *routes, size_t n,
					 const char *method, const char *path,
					 struct request_ctx *c, struct err *e)
{
	int path_matched = 0;
	for (size_t i = 0; i < n; i++) {
		const struct http_route *r = &routes[i];
		if (!http_route_match(r->pattern, path, c->pathbuf, sizeof(c->pathbuf), c->captures,
				      &c->n_captures))
			continue;
		if (strcmp(r->method, method) == 0 || strcmp(r->method, "*") == 0)
			return r;
		if (!literal_sibling(routes, n, method, r->pattern))
			path_matched = 1;
	}
	/* 405 only for a path that is this route's in any case: a mistyped
	 * action or sub-resource name is a 404. */
	if (path_matched)
		err_set(e, ERR_METHOD, 0, "method %s not allowed on '%s'", method, path);
	else
		err_set(e, ERR_NOT_FOUND, 0, "no route %s '%s'", method, path);
	return NULL;
}

/* A mount whose prefix `path` is under (c->mount), its route in that
 * table; else the main table's. */
const struct http_route *http_route_find(const struct http *h, const char *method, const char *path,
					 struct request_ctx *c, struct err *e)
{
	c->mount = NULL;
	for (size_t i = 0; i < h->o.n_mounts; i++) {
		const struct http_mount *m = &h->o.mounts[i];
		size_t pl = strlen(m->prefix);
		if (strncmp(path, m->prefix, pl) == 0 && (path[pl] == '/' || !path[pl])) {
			c->mount = m;
			return route_in(m->routes, m->n_routes, method, path[pl] ? path + pl : "/",
					c, e);
		}
	}
	return route_in(h->o.routes, h->o.n_routes, method, path, c, e);
}

/* The token in a front-end's own header (the whole value). */
int http_auth_header(const struct http *h, struct MHD_Connection *conn, const char *name,
		     struct err *e)
{
	const char *tok = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
	if (!tok)
		return err_set(e, ERR_UNAUTHORIZED, 0, "missing '%s' header", name);
	if (!text_equal_secret(tok, h->token))
		return err_set(e, ERR_UNAUTHORIZED, 0, "invalid token");
	return 0;
}
