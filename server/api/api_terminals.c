/* Terminals (docs/terminals.md): PTY sessions in a sandbox, their
 * WebSocket, their xterm.js page and the viewer tokens that open it. */
#include "common/clock.h"
#include "common/text.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/websocket.h"
#include "server/viewer/viewer.h"

#define TERM_SIZE_MAX 1000
#define TERM_PAGE_CSP                                                                              \
	"default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "                \
	"connect-src 'self'; base-uri 'none'; form-action 'none'"

static cJSON *term_json(const struct process_term_info *in)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", in->id);
	cJSON_AddNumberToObject(j, "pid", in->pid);
	cJSON_AddStringToObject(j, "command", in->command);
	cJSON_AddStringToObject(j, "user", in->root ? "root" : "user");
	cJSON_AddNumberToObject(j, "cols", in->cols);
	cJSON_AddNumberToObject(j, "rows", in->rows);
	cJSON_AddStringToObject(j, "status", in->running ? "running" : "exited");
	if (in->running)
		cJSON_AddNullToObject(j, "exit_code");
	else
		cJSON_AddNumberToObject(j, "exit_code", in->exit_code);
	cJSON_AddNumberToObject(j, "attached", in->attached);
	cJSON_AddNumberToObject(j, "output_bytes", (double)in->output_bytes);
	char t_s[CLOCK_RFC3339_MAX];
	clock_rfc3339(in->created_at_ms, t_s, sizeof(t_s));
	cJSON_AddStringToObject(j, "created_at", t_s);
	return j;
}

static int parse_command(const cJSON *body, struct exec_args *a, struct err *e)
{
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(body, "command");
	if (!cmd || cJSON_IsNull(cmd)) {
		/* The user's login shell. */
		a->argv[0] = "/bin/bash";
		a->argv[1] = "-l";
		a->argv[2] = NULL;
		return 0;
	}
	if (!cJSON_IsArray(cmd) || cJSON_GetArraySize(cmd) == 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'command' must be a non-empty array of strings");
	size_t n = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, cmd)
	{
		if (n >= EXEC_MAX_ARGS)
			return err_set(e, ERR_INVALID, E2BIG, "more than %d arguments",
				       EXEC_MAX_ARGS);
		if (!cJSON_IsString(it))
			return err_set(e, ERR_INVALID, EINVAL, "command[%zu] must be a string", n);
		a->argv[n++] = it->valuestring;
	}
	a->argv[n] = NULL;
	if (!a->argv[0][0])
		return err_set(e, ERR_INVALID, EINVAL, "command[0] must not be empty");
	return 0;
}

/* TERM unless the request set it. */
static int add_term_env(struct exec_args *a, struct err *e)
{
	for (size_t i = 0; i < a->n_env; i++)
		if (strncmp(a->env_kv[i], "TERM=", 5) == 0)
			return 0;
	char *kv = strdup("TERM=xterm-256color");
	if (!kv)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	a->env_owned[a->n_env] = kv;
	a->env_kv[a->n_env++] = kv;
	a->env_kv[a->n_env] = NULL;
	return 0;
}

static int parse_create(const cJSON *body, struct exec_args *a, struct process_opts *o,
			struct err *e)
{
	int64_t cols, rows;
	const char *cwd;
	static const char *const fields[] = {"cols", "rows", "cwd", "command", "env", "user", NULL};
	int root;
	if (args_only(body, NULL, fields, e) < 0 ||
	    args_int(body, "cols", 1, TERM_SIZE_MAX, 80, 0, &cols, e) < 0 ||
	    args_int(body, "rows", 1, TERM_SIZE_MAX, 24, 0, &rows, e) < 0 ||
	    args_string(body, "cwd", 4096, 0, &cwd, e) < 0 || parse_command(body, a, e) < 0 ||
	    api_parse_env(body, a, e) < 0 || api_parse_user(body, a, &root, e) < 0 ||
	    add_term_env(a, e) < 0)
		return err_code(e);
	if (cwd && cwd[0] != '/')
		return err_set(e, ERR_INVALID, EINVAL, "field 'cwd' must be an absolute path");
	memset(o, 0, sizeof(*o));
	o->argv = a->argv;
	o->env = a->env_kv;
	o->cwd = cwd;
	o->pty = 1;
	o->cols = (unsigned short)cols;
	o->rows = (unsigned short)rows;
	o->root = root;
	return 0;
}

int api_terminal_create(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct exec_args *a = calloc(1, sizeof(*a));
	if (!a) {
		cJSON_Delete(body);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	struct process_opts o;
	struct process_term_info in;
	int r = parse_create(body, a, &o, e);
	struct sandbox *sb;
	if (r == 0 && (r = api_enter(req, 0, &sb, NULL, e)) == 0) {
		r = api_root_check(sb, o.root, e)
			?: process_term_create(sandbox_procs(sb), &o, &in, e);
		api_release(sb);
	}
	exec_args_release(a);
	free(a);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	return http_reply_json(res, 201, term_json(&in), e);
}

/* The sandbox of the request (it need not run: ended terminals are
 * listed) with a reference the caller puts. */
static int lookup(struct http_request *req, struct sandbox **sb, struct err *e)
{
	struct api *api = req->app;
	return sandbox_get(api->sandboxes, req->captures[0], sb, e) < 0 ? err_code(e) : 0;
}

int api_terminal_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct sandbox *sb;
	if (lookup(req, &sb, e) < 0)
		return err_code(e);
	struct process_term_info in[PROCESS_TERM_MAX];
	size_t n = process_term_list(sandbox_procs(sb), in, PROCESS_TERM_MAX);
	sandbox_put(sb);
	cJSON *j = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(j, "terminals");
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, term_json(&in[i]));
	return http_reply_json(res, 200, j, e);
}

static int term_answer(struct http_request *req, struct http_response *res,
		       int (*op)(struct process_table *, const char *, struct process_term_info *,
				 struct err *),
		       struct err *e)
{
	struct sandbox *sb;
	if (lookup(req, &sb, e) < 0)
		return err_code(e);
	struct process_term_info in;
	int r = op(sandbox_procs(sb), req->captures[1], &in, e);
	sandbox_put(sb);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, term_json(&in), e);
}

int api_terminal_get(struct http_request *req, struct http_response *res, struct err *e)
{
	return term_answer(req, res, process_term_get, e);
}

int api_terminal_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	return term_answer(req, res, process_term_delete, e);
}

/* "terminal/<tid>": what a terminal's viewer token opens. */
static void scope_of(const char *tid, char *out, size_t size)
{
	snprintf(out, size, "terminal/%.*s", UTF8_CUT(tid, 32));
}

/* The terminal `tid` of the request must exist. */
static int term_exists(struct http_request *req, struct err *e)
{
	struct sandbox *sb;
	if (lookup(req, &sb, e) < 0)
		return err_code(e);
	struct process_term_info in;
	int r = process_term_get(sandbox_procs(sb), req->captures[1], &in, e);
	sandbox_put(sb);
	return r;
}

int api_terminal_token_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	int view_only;
	int64_t ttl;
	static const char *const fields[] = {"view_only", "ttl_s", NULL};
	int r = args_only(body, NULL, fields, e);
	r = r ?: args_bool(body, "view_only", 0, &view_only, e);
	if (r == 0)
		r = args_int(body, "ttl_s", 1, VNC_TTL_MAX_S, VNC_TTL_DEFAULT_S, 0, &ttl, e);
	cJSON_Delete(body);
	if (r < 0 || term_exists(req, e) < 0)
		return err_code(e);
	char scope[VNC_SCOPE_MAX + 1], token[VNC_TOKEN_HEX + 1];
	scope_of(req->captures[1], scope, sizeof(scope));
	long long expires_at;
	if (vnc_token_create_scoped(api->vnc, req->captures[0], scope, view_only, ttl, token,
				    &expires_at, e) < 0)
		return err_code(e);
	char url[200];
	snprintf(url, sizeof(url), "/v1/sandboxes/%s/terminals/%s/?token=%s", req->captures[0],
		 req->captures[1], token);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "token", token);
	cJSON_AddStringToObject(j, "url", url);
	char t_s[CLOCK_RFC3339_MAX];
	clock_rfc3339(expires_at * 1000, t_s, sizeof(t_s));
	cJSON_AddStringToObject(j, "expires_at", t_s);
	cJSON_AddBoolToObject(j, "view_only", view_only);
	return http_reply_json(res, 201, j, e);
}

int api_terminal_page(struct http_request *req, struct http_response *res, struct err *e)
{
	char scope[VNC_SCOPE_MAX + 1];
	scope_of(req->captures[1], scope, sizeof(scope));
	struct vnc_grant g;
	if (api_viewer_authorize(req, scope, &g, e) < 0 || term_exists(req, e) < 0)
		return err_code(e);
	size_t len;
	char *html = vnc_term_page_render(g.view_only, &len);
	if (!html)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	http_reply_data(res, 200, "text/html; charset=utf-8", html, len);
	http_add_header(res, "X-Content-Type-Options", "nosniff", NULL);
	http_add_header(res, "Referrer-Policy", "no-referrer", NULL);
	http_add_header(res, "Cache-Control", "no-store", NULL);
	http_add_header(res, "Content-Security-Policy", TERM_PAGE_CSP, NULL);
	return 0;
}

int api_terminal_static(struct http_request *req, struct http_response *res, struct err *e)
{
	size_t len;
	const char *type;
	const char *data = vnc_term_static(req->captures[2], &len, &type);
	if (!data)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no file '%.*s'",
			       UTF8_CUT(req->captures[2], 64));
	char *copy = malloc(len + 1);
	if (!copy)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	memcpy(copy, data, len + 1);
	http_reply_data(res, 200, type, copy, len);
	http_add_header(res, "X-Content-Type-Options", "nosniff", NULL);
	http_add_header(res, "Cache-Control", "public, max-age=3600", NULL);
	return 0;
}

struct term_ws {
	struct vnc *vnc;
	struct vnc_viewer *viewer; /* NULL for the API token */
	struct process_term_client *client;
	struct vnc_grant grant;
	char sid[SANDBOX_ID_LEN + 1];
};

static void term_ws_release(void *cls)
{
	struct term_ws *ws = cls;
	process_term_detach(ws->client);
	if (ws->viewer)
		vnc_viewer_remove(ws->vnc, ws->viewer);
	free(ws);
}

static void term_ws_run(void *cls, int fd, const char *extra, size_t extra_len)
{
	struct term_ws *ws = cls;
	struct vnc_term_session_opts o = {
	    .ws_fd = fd,
	    .stop_fd = ws->viewer ? vnc_viewer_stop_fd(ws->viewer) : -1,
	    .view_only = ws->grant.view_only,
	    .expires_at = ws->grant.expires_at,
	    .extra = extra,
	    .extra_len = extra_len,
	    .client = ws->client,
	    .sid = ws->sid,
	};
	vnc_term_session_run(&o);
}

int api_terminal_websocket(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	char accept[WS_ACCEPT_LEN + 1], scope[VNC_SCOPE_MAX + 1];
	scope_of(req->captures[1], scope, sizeof(scope));
	if (api_ws_handshake(req, accept, e) < 0)
		return err_code(e);
	struct term_ws *ws = calloc(1, sizeof(*ws));
	if (!ws)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	ws->vnc = api->vnc;
	snprintf(ws->sid, sizeof(ws->sid), "%s", req->captures[0]);
	struct sandbox *sb = NULL;
	int r = api_viewer_authorize(req, scope, &ws->grant, e);
	if (r == 0 && ws->grant.token_id)
		r = vnc_viewer_add(api->vnc, ws->sid, &ws->grant, &ws->viewer, e);
	if (r == 0)
		r = lookup(req, &sb, e);
	if (r == 0) {
		r = process_term_attach(sandbox_procs(sb), req->captures[1], &ws->client, e);
		sandbox_put(sb);
	}
	if (r < 0) {
		if (ws->client)
			process_term_detach(ws->client);
		if (ws->viewer)
			vnc_viewer_remove(api->vnc, ws->viewer);
		free(ws);
		return r;
	}
	http_reply_upgrade(res, term_ws_run, ws, term_ws_release);
	return api_ws_accept(req, res, accept, e);
}
