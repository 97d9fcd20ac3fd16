/* A URL for every port of a sandbox (docs/ports.md):
 * /v1/sandboxes/{id}/ports/{port}/... is proxied (server/http/http.h,
 * "reverse proxy") to 127.0.0.1:{port} inside the sandbox, over a
 * connection made from the sandbox's own network namespace, so it works in
 * every network mode and the sandbox never gets a route to the host.
 *
 * Credentials: the API token (Authorization: Bearer, never passed on), or a
 * share token of that port (POST .../ports/{port}/tokens) given once as
 * ?deskbox_token=... and then kept by the browser in a cookie scoped to the
 * port's path (or host, with --ports-domain), so pages and their assets
 * load without the API token.  The query parameter and the cookie are
 * deskboxd's and are not passed on either.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "internal.h"
#include "server/viewer/viewer.h"
#include "common/args.h"

#define CONNECT_MS   5000
#define SHARE_COOKIE "deskbox_share"
#define TOKEN_PARAM  "deskbox_token"

int api_port_parse(const char *s, unsigned *port, struct err *e)
{
	int64_t v;
	if (!s || args_parse_int(s, 1, 65535, &v) < 0)
		return err_set(e, ERR_INVALID, EINVAL, "port must be an integer from 1 to 65535");
	*port = (unsigned)v;
	return 0;
}

/* The share token a request presents: the query parameter, else the
 * cookie; NULL when neither. */
static const char *share_presented(const struct http_request *req, char *buf, size_t size)
{
	const char *q = http_query(req, TOKEN_PARAM);
	if (q)
		return q;
	const char *cookie = http_header(req, "Cookie");
	for (const char *s = cookie; s && *s;) {
		while (*s == ' ' || *s == ';')
			s++;
		size_t n = strcspn(s, ";");
		size_t cl = strlen(SHARE_COOKIE);
		if (n > cl + 1 && strncmp(s, SHARE_COOKIE "=", cl + 1) == 0 && n - cl - 1 < size) {
			memcpy(buf, s + cl + 1, n - cl - 1);
			buf[n - cl - 1] = '\0';
			return buf;
		}
		s += n;
	}
	return NULL;
}

/* The target to send upstream: the raw request target less the
 * /v1/sandboxes/{id}/ports/{port} prefix and less our token parameter. */
static int upstream_target(const struct http_request *req, const char *prefix, char *out,
			   size_t size, struct err *e)
{
	const char *raw = req->raw_uri;
	size_t pl = strlen(prefix);
	if (strncmp(raw, prefix, pl) != 0)
		return err_set(e, ERR_INVALID, 0, "the request target must not encode '%s'",
			       prefix);
	const char *rest = raw + pl;
	size_t pathlen = strcspn(rest, "?");
	size_t k = (size_t)snprintf(out, size, "%s%.*s", pathlen ? "" : "/", (int)pathlen, rest);
	const char *q = rest[pathlen] == '?' ? rest + pathlen + 1 : NULL;
	char sep = '?';
	while (q && *q && k < size) {
		size_t n = strcspn(q, "&");
		int ours = strncmp(q, TOKEN_PARAM "=", strlen(TOKEN_PARAM) + 1) == 0 ||
			   (n == strlen(TOKEN_PARAM) && strncmp(q, TOKEN_PARAM, n) == 0);
		if (!ours && n)
			k += (size_t)snprintf(out + k, size - k, "%c%.*s", sep, (int)n, q),
			    sep = '&';
		q += n + (q[n] == '&');
	}
	if (k >= size)
		return err_set(e, ERR_TOO_LARGE, 0, "request target too long");
	return 0;
}

/* How the request target names the sandbox: its name when the client
 * used that (captures[0] holds the id then, api_canon_captures), so that
 * the prefix stripped and the share cookie's path are the ones the client
 * sees; otherwise the id. */
static const char *sent_ref(const struct http_request *req, char *buf, size_t size)
{
	struct api *api = req->app;
	static const char sb[] = "/v1/sandboxes/";
	const char *raw = req->raw_uri, *sid = req->captures[0];
	if (strncmp(raw, sb, sizeof(sb) - 1) != 0)
		return sid;
	const char *seg = raw + sizeof(sb) - 1;
	size_t n = strcspn(seg, "/?");
	char id[SANDBOX_ID_LEN + 1];
	if (n == 0 || n >= size)
		return sid;
	memcpy(buf, seg, n);
	buf[n] = '\0';
	if (strcmp(buf, sid) != 0 &&
	    (!sandbox_name_ok(buf) || sandbox_resolve(api->sandboxes, buf, id, sizeof(id)) < 0 ||
	     strcmp(id, sid) != 0))
		return sid;
	return buf;
}

/* Checks the credential: 1 for the API token, 0 for a share token (then a
 * cookie keeps it, see port_answer_cookie). */
static int port_auth(struct http_request *req, const char *sid, unsigned port, struct err *e)
{
	struct api *api = req->app;
	struct err te = ERR_INIT;
	if (http_header(req, "Authorization") && http_check_token(req, &te) == 0)
		return 1;
	char buf[VNC_TOKEN_MAX_LEN + 1];
	const char *tok = share_presented(req, buf, sizeof(buf));
	if (!tok && te.kind != ERR_NONE) {
		*e = te;
		return err_code(e);
	}
	return share_token_check(api->shares, sid, port, tok, e);
}

int api_proxy_open(struct http_request *req, const char *sid, unsigned port,
		   struct http_proxy_opts *o, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, sid, &sb, e) < 0)
		return err_code(e);
	int r = sandbox_use(sb, 0, NULL, e);
	if (r == 0) {
		r = sandbox_port_connect(sb, (uint16_t)port, CONNECT_MS, e);
		sandbox_unuse(sb);
	}
	sandbox_put(sb);
	if (r < 0)
		return r;
	o->fd = r;
	return 0;
}

int api_port_proxy_begin(struct http_request *req, struct http_body_sink *sink, struct err *e)
{
	unsigned port = 0;
	if (api_port_parse(req->captures[1], &port, e) < 0)
		return err_code(e);
	const char *sid = req->captures[0];
	int api_token = port_auth(req, sid, port, e);
	if (api_token < 0)
		return api_token;
	http_request_trusted(req);
	char prefix[160], target[8192], ref[SANDBOX_NAME_MAX + 1];
	snprintf(prefix, sizeof(prefix), "/v1/sandboxes/%s/ports/%u",
		 sent_ref(req, ref, sizeof(ref)), port);
	if (upstream_target(req, prefix, target, sizeof(target), e) < 0)
		return err_code(e);
	struct http_proxy_opts o = {
	    .target = target,
	    .prefix = req->host_routed ? NULL : prefix,
	    .strip_authorization = api_token,
	    .strip_cookie = SHARE_COOKIE,
	};
	if (api_proxy_open(req, sid, port, &o, e) < 0)
		return err_code(e);
	return http_proxy_begin(req, &o, sink, e);
}

int api_port_proxy(struct http_request *req, struct http_response *res, struct err *e)
{
	int r = http_proxy_finish(req, res, e);
	const char *q = http_query(req, TOKEN_PARAM);
	if (r < 0 || !q || res->upgrade)
		return r;
	/* A share token that came in the URL: the browser keeps it for the
	 * page's further requests. */
	char cookie[VNC_TOKEN_MAX_LEN + 200], ref[SANDBOX_NAME_MAX + 1];
	if (req->host_routed)
		snprintf(cookie, sizeof(cookie), SHARE_COOKIE "=%s; Path=/; HttpOnly; SameSite=Lax",
			 q);
	else
		snprintf(cookie, sizeof(cookie),
			 SHARE_COOKIE
			 "=%s; Path=/v1/sandboxes/%s/ports/%s/; HttpOnly; SameSite=Lax",
			 q, sent_ref(req, ref, sizeof(ref)), req->captures[1]);
	http_add_header(res, "Set-Cookie", cookie, NULL);
	return 0;
}

/* /ports/{port} without the slash: relative links of the app would resolve
 * one level too high, so send the browser to the slash. */
int api_port_slash(struct http_request *req, struct http_response *res, struct err *e)
{
	unsigned port = 0;
	if (api_port_parse(req->captures[1], &port, e) < 0)
		return err_code(e);
	const char *q = http_raw_query(req);
	char loc[512];
	snprintf(loc, sizeof(loc), "/v1/sandboxes/%s/ports/%u/%s%s", req->captures[0], port,
		 *q ? "?" : "", q);
	if (http_add_header(res, "Location", loc, e) < 0)
		return err_code(e);
	http_reply_empty(res, 308);
	return 0;
}

int api_port_token_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	unsigned port = 0;
	if (api_port_parse(req->captures[1], &port, e) < 0)
		return err_code(e);
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	long long ttl = VNC_TTL_DEFAULT_S;
	static const char *const fields[] = {"ttl_s", NULL};
	int r = args_only(body, NULL, fields, e);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(body, "ttl_s");
	if (r == 0 && t &&
	    (!cJSON_IsNumber(t) || t->valuedouble < 1 || t->valuedouble > VNC_TTL_MAX_S ||
	     t->valuedouble != (double)(long long)t->valuedouble))
		r = err_set(e, ERR_INVALID, EINVAL, "ttl_s must be an integer from 1 to %d",
			    VNC_TTL_MAX_S);
	else if (r == 0 && t)
		ttl = (long long)t->valuedouble;
	cJSON_Delete(body);
	if (r < 0)
		return r;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	const char *sid = sandbox_id(sb);
	shares_sweep(api->shares, api_sandbox_alive, api->sandboxes);
	char token[VNC_TOKEN_HEX + 1];
	long long expires;
	r = share_token_create(api->shares, sid, port, ttl, token, &expires, e);
	if (r < 0) {
		sandbox_put(sb);
		return r;
	}
	char url[512];
	snprintf(url, sizeof(url), "/v1/sandboxes/%s/ports/%u/?" TOKEN_PARAM "=%s", sid, port,
		 token);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "token", token);
	cJSON_AddNumberToObject(out, "port", port);
	char t_s[CLOCK_RFC3339_MAX];
	clock_rfc3339(expires * 1000, t_s, sizeof(t_s));
	cJSON_AddStringToObject(out, "expires_at", t_s);
	cJSON_AddStringToObject(out, "url", url);
	if (api->ports_domain) {
		snprintf(url, sizeof(url), "%u-%s.%s/?" TOKEN_PARAM "=%s", port, sid,
			 api->ports_domain, token);
		cJSON_AddStringToObject(out, "host_url", url);
	}
	sandbox_put(sb);
	return http_reply_json(res, 201, out, e);
}

int api_port_token_revoke(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	unsigned port = 0;
	if (api_port_parse(req->captures[1], &port, e) < 0)
		return err_code(e);
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	sandbox_put(sb);
	if (share_token_revoke(api->shares, req->captures[0], port, req->captures[2], e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}

/* The prefix for "{port}-{name}" (the first `label` bytes of `host`,
 * the dash at `dash`): 1 with it, 0 when that is no port and name. */
static int name_prefix(const char *host, size_t dash, size_t label, char *prefix, size_t size)
{
	char name[SANDBOX_NAME_MAX + 1];
	size_t n = label - dash - 1;
	if (n > SANDBOX_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		name[i] = (char)tolower((unsigned char)host[dash + 1 + i]);
	name[n] = '\0';
	unsigned port = 0;
	for (size_t i = 0; i < dash; i++) {
		if (host[i] < '0' || host[i] > '9')
			return 0;
		port = port * 10 + (unsigned)(host[i] - '0');
	}
	if (!sandbox_name_ok(name) || port < 1 || port > 65535)
		return 0;
	return snprintf(prefix, size, "/v1/sandboxes/%s/ports/%u", name, port) < (int)size;
}

int api_ports_rewrite(void *app, const char *host, char *prefix, size_t size)
{
	const struct api *api = app;
	if (!api->ports_domain)
		return 0;
	/* "{port}-{id}.{domain}[:listen-port]", or a sandbox's name in place
	 * of the id (names are DNS labels; api_canon_captures resolves it) */
	size_t hl = strcspn(host, ":"), dl = strlen(api->ports_domain);
	if (hl < dl + 4 || host[hl - dl - 1] != '.' ||
	    strncasecmp(host + hl - dl, api->ports_domain, dl) != 0)
		return 0;
	size_t label = hl - dl - 1, dash = strcspn(host, "-");
	if (dash == 0 || dash >= label || dash > 5)
		return 0;
	if (label - dash - 1 != SANDBOX_ID_LEN)
		return name_prefix(host, dash, label, prefix, size);
	unsigned port = 0;
	for (size_t i = 0; i < dash; i++) {
		if (host[i] < '0' || host[i] > '9')
			return 0;
		port = port * 10 + (unsigned)(host[i] - '0');
	}
	char id[SANDBOX_ID_LEN + 1];
	for (size_t i = 0; i < SANDBOX_ID_LEN; i++) {
		char c = host[dash + 1 + i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
		id[i] = c;
	}
	id[SANDBOX_ID_LEN] = '\0';
	if (port < 1 || port > 65535)
		return 0;
	return snprintf(prefix, size, "/v1/sandboxes/%s/ports/%u", id, port) < (int)size;
}
