/* Browser viewers (docs/vnc.md): viewer tokens, the noVNC page and its
 * static files, and the WebSocket bridge to the sandbox's VNC server.
 *
 * The page, its files and the WebSocket are HTTP_NO_AUTH routes: a browser
 * cannot send an Authorization header with a page load or a WebSocket, so
 * they take a viewer token from ?token= (or the API token as a bearer
 * header, for programs) and check it here, before anything of the sandbox
 * is shown.  The static files are the public noVNC distribution and are
 * served to anyone. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/text.h"
#include "common/cleanup.h"
#include "internal.h"
#include "common/args.h"
#include "server/viewer/viewer.h"
#include "common/websocket.h"

/* The Debian novnc package's files: packaged and updated by apt, no build
 * step or registry download needed. */
#define NOVNC_DIR	 "/usr/share/novnc"
#define STATIC_MAX_BYTES (4u << 20)
#define STATIC_PATH_MAX	 256
#define PAGE_CSP                                                                                   \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "    \
	"connect-src 'self'; base-uri 'none'; form-action 'none'"

int api_sandbox_alive(void *cls, const char *sid)
{
	struct sandbox *sb;
	if (sandbox_get(cls, sid, &sb, NULL) < 0)
		return 0;
	sandbox_put(sb);
	return 1;
}

int api_vnc_token_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	const char *sid = req->captures[0];
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	int view_only;
	int64_t ttl;
	static const char *const fields[] = {"view_only", "ttl_s", NULL};
	int r = args_only(body, NULL, fields, e);
	r = r ?: args_bool(body, "view_only", 1, &view_only, e);
	if (r == 0)
		r = args_int(body, "ttl_s", 1, VNC_TTL_MAX_S, VNC_TTL_DEFAULT_S, 0, &ttl, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, sid, &sb, e) < 0)
		return err_code(e);
	sandbox_put(sb);
	vnc_sweep(api->vnc, api_sandbox_alive, api->sandboxes);
	char token[VNC_TOKEN_HEX + 1];
	long long expires_at;
	if (vnc_token_create(api->vnc, sid, view_only, ttl, token, &expires_at, e) < 0)
		return err_code(e);
	char url[160];
	snprintf(url, sizeof(url), "/v1/sandboxes/%s/vnc/?token=%s", sid, token);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "token", token);
	cJSON_AddStringToObject(j, "url", url);
	char t_s[CLOCK_RFC3339_MAX];
	clock_rfc3339(expires_at * 1000, t_s, sizeof(t_s));
	cJSON_AddStringToObject(j, "expires_at", t_s);
	cJSON_AddBoolToObject(j, "view_only", view_only);
	return http_reply_json(res, 201, j, e);
}

int api_vnc_token_revoke(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	if (vnc_token_revoke(api->vnc, req->captures[0], req->captures[1], e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}

/* Who may view: a viewer token in ?token= (or as a bearer header), or the
 * API token as a bearer header (interactive unless ?view_only=1). */
static int authorize(struct http_request *req, struct vnc_grant *g, struct err *e)
{
	return api_viewer_authorize(req, "", g, e);
}

int api_viewer_authorize(struct http_request *req, const char *scope, struct vnc_grant *g,
			 struct err *e)
{
	struct api *api = req->app;
	const char *sid = req->captures[0];
	const char *token = http_query(req, "token");
	const char *auth = http_header(req, "Authorization");
	if (!token && auth && strncasecmp(auth, "Bearer ", 7) == 0) {
		const char *b = auth + 7;
		while (*b == ' ')
			b++;
		if (vnc_is_api_token(api->vnc, b)) {
			const char *vo = http_query(req, "view_only");
			g->view_only = vo && (strcmp(vo, "1") == 0 || strcmp(vo, "true") == 0);
			g->expires_at = 0;
			g->token_id = 0;
			return 0;
		}
		token = b;
	}
	if (vnc_token_check_scoped(api->vnc, sid, scope, token, g, e) < 0)
		return err_code(e);
	return 0;
}

static void add_common_headers(struct http_response *res)
{
	http_add_header(res, "X-Content-Type-Options", "nosniff", NULL);
	http_add_header(res, "Referrer-Policy", "no-referrer", NULL);
}

int api_vnc_page(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct vnc_grant g;
	if (authorize(req, &g, e) < 0)
		return err_code(e);
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	sandbox_put(sb);
	/* No string from the request goes into the page. */
	size_t len;
	char *html = vnc_page_render(g.view_only, &len);
	if (!html)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	http_reply_data(res, 200, "text/html; charset=utf-8", html, len);
	add_common_headers(res);
	http_add_header(res, "Cache-Control", "no-store", NULL);
	http_add_header(res, "Content-Security-Policy", PAGE_CSP, NULL);
	return 0;
}

static const char *content_type(const char *path)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
	    {".js", "text/javascript; charset=utf-8"},
	    {".css", "text/css; charset=utf-8"},
	    {".svg", "image/svg+xml"},
	    {".png", "image/png"},
	};
	const char *dot = strrchr(path, '.');
	for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(dot, types[i].ext) == 0)
			return types[i].type;
	return NULL;
}

/* SECURITY: the path comes from the URL.  Only [A-Za-z0-9._-] segments, none
 * empty or starting with '.', under core/ or vendor/; then openat2 with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, so nothing outside the noVNC tree
 * can be reached whatever the checks above missed. */
static int static_path_ok(const char *path)
{
	size_t len = strlen(path);
	if (len == 0 || len > STATIC_PATH_MAX)
		return 0;
	if (strncmp(path, "core/", 5) != 0 && strncmp(path, "vendor/", 7) != 0)
		return 0;
	const char *seg = path;
	for (;;) {
		size_t n = strcspn(seg, "/");
		if (n == 0 || seg[0] == '.')
			return 0;
		for (size_t i = 0; i < n; i++) {
			char c = seg[i];
			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
				return 0;
		}
		if (!seg[n])
			return 1;
		seg += n + 1;
	}
}

static int read_static(const char *path, char **out, size_t *len, struct err *e)
{
	_cleanup_fd_ int root = open(NOVNC_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return err_sys(e, ERR_UNAVAILABLE, errno, "noVNC files not found in '%s'",
			       NOVNC_DIR);
	struct open_how how = {
	    .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_fd_ int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no file '%s'", path);
	if (st.st_size > STATIC_MAX_BYTES)
		return err_set(e, ERR_INTERNAL, EFBIG, "'%s' is too large to serve", path);
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n <= 0) {
			free(buf);
			return err_sys(e, ERR_INTERNAL, n < 0 ? errno : EIO, "reading '%s'", path);
		}
		got += (size_t)n;
	}
	*out = buf;
	*len = got;
	return 0;
}

int api_vnc_static(struct http_request *req, struct http_response *res, struct err *e)
{
	const char *path = req->captures[1];
	const char *builtin = strcmp(path, "viewer.js") == 0	? vnc_page_js
			      : strcmp(path, "viewer.css") == 0 ? vnc_page_css
								: NULL;
	char *data = NULL;
	size_t len = 0;
	const char *type = content_type(path);
	if (builtin) {
		len = strlen(builtin);
		data = malloc(len + 1);
		if (!data)
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		memcpy(data, builtin, len + 1);
	} else {
		if (!type || !static_path_ok(path))
			return err_set(e, ERR_NOT_FOUND, ENOENT, "no file '%.*s'",
				       UTF8_CUT(path, 64));
		if (read_static(path, &data, &len, e) < 0)
			return err_code(e);
	}
	http_reply_data(res, 200, type, data, len);
	add_common_headers(res);
	http_add_header(res, "Cache-Control", "public, max-age=3600", NULL);
	return 0;
}

/* ---- the WebSocket ---- */

/* 1 when the comma-separated header value `list` holds `token`
 * (case-insensitive). */
static int header_has(const char *list, const char *token)
{
	size_t tl = strlen(token);
	for (const char *p = list; p && *p;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		size_t n = strcspn(p, ",");
		size_t m = n;
		while (m && (p[m - 1] == ' ' || p[m - 1] == '\t'))
			m--;
		if (m == tl && strncasecmp(p, token, tl) == 0)
			return 1;
		p += n;
	}
	return 0;
}

/* Cross-site WebSocket hijacking: a browser always sends Origin, and a page
 * of another site must not reach the desktop with a token it got hold of,
 * so Origin's host must be the Host the page was served from.  No Origin:
 * not a browser, and the token alone decides. */
static int origin_ok(const char *origin, const char *host)
{
	if (!origin)
		return 1;
	if (!host)
		return 0;
	const char *rest = NULL;
	if (strncasecmp(origin, "http://", 7) == 0)
		rest = origin + 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		rest = origin + 8;
	return rest && strcasecmp(rest, host) == 0;
}

struct ws_session {
	struct vnc *vnc;
	struct vnc_viewer *viewer;
	int vnc_fd;
	int lease_fd; /* held while vnc_fd is open (sandbox_vnc_connect) */
	struct vnc_grant grant;
	char sid[SANDBOX_ID_LEN + 1];
};

static void ws_session_release(void *cls)
{
	struct ws_session *ws = cls;
	if (ws->vnc_fd >= 0)
		close(ws->vnc_fd);
	if (ws->lease_fd >= 0)
		close(ws->lease_fd);
	vnc_viewer_remove(ws->vnc, ws->viewer);
	free(ws);
}

static void ws_session_run(void *cls, int fd, const char *extra, size_t extra_len)
{
	struct ws_session *ws = cls;
	struct vnc_session_opts o = {
	    .ws_fd = fd,
	    .vnc_fd = ws->vnc_fd,
	    .stop_fd = vnc_viewer_stop_fd(ws->viewer),
	    .view_only = ws->grant.view_only,
	    .expires_at = ws->grant.expires_at,
	    .extra = extra,
	    .extra_len = extra_len,
	    .sid = ws->sid,
	};
	vnc_session_run(&o);
}

int api_ws_handshake(struct http_request *req, char *accept, struct err *e)
{
	const char *upgrade = http_header(req, "Upgrade");
	const char *connection = http_header(req, "Connection");
	const char *version = http_header(req, "Sec-WebSocket-Version");
	const char *key = http_header(req, "Sec-WebSocket-Key");
	if (!upgrade || !header_has(upgrade, "websocket") || !connection ||
	    !header_has(connection, "upgrade"))
		return err_set(e, ERR_INVALID, 0, "a WebSocket upgrade is required here");
	if (!version || strcmp(version, "13") != 0)
		return err_set(e, ERR_INVALID, 0, "Sec-WebSocket-Version must be 13");
	if (!key || ws_accept_key(key, accept) < 0)
		return err_set(e, ERR_INVALID, 0, "bad Sec-WebSocket-Key");
	if (!origin_ok(http_header(req, "Origin"), http_header(req, "Host")))
		return err_set(e, ERR_FORBIDDEN, 0, "Origin does not match Host");
	return 0;
}

int api_ws_accept(struct http_request *req, struct http_response *res, const char *accept,
		  struct err *e)
{
	const char *protocols = http_header(req, "Sec-WebSocket-Protocol");
	if (http_add_header(res, "Upgrade", "websocket", e) < 0 ||
	    http_add_header(res, "Sec-WebSocket-Accept", accept, e) < 0 ||
	    (protocols && header_has(protocols, "binary") &&
	     http_add_header(res, "Sec-WebSocket-Protocol", "binary", e) < 0))
		return err_code(e);
	return 0;
}

int api_vnc_websocket(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	const char *sid = req->captures[0];
	char accept[WS_ACCEPT_LEN + 1];
	if (api_ws_handshake(req, accept, e) < 0)
		return err_code(e);

	struct ws_session *ws = calloc(1, sizeof(*ws));
	if (!ws)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	ws->vnc = api->vnc;
	ws->vnc_fd = ws->lease_fd = -1;
	snprintf(ws->sid, sizeof(ws->sid), "%s", sid);
	if (authorize(req, &ws->grant, e) < 0 ||
	    vnc_viewer_add(api->vnc, sid, &ws->grant, &ws->viewer, e) < 0) {
		free(ws);
		return err_code(e);
	}
	/* Not a byte flows before here: token, Origin and viewer cap are
	 * checked, and the VNC connection is the viewer's own. */
	struct sandbox *sb;
	if (api_enter(req, 0, &sb, NULL, e) == 0) {
		ws->vnc_fd = sandbox_vnc_connect(sb, &ws->lease_fd, e);
		api_release(sb);
	}
	if (ws->vnc_fd < 0) {
		ws_session_release(ws);
		return err_code(e);
	}
	http_reply_upgrade(res, ws_session_run, ws, ws_session_release);
	return api_ws_accept(req, res, accept, e);
}
