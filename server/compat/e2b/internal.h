/* compat/e2b: E2B's SDKs (npm e2b, @e2b/code-interpreter) against deskbox.
 *
 * E2B_API_URL and E2B_SANDBOX_URL both point at http://HOST:PORT/e2b: the
 * control plane (/v2/sandboxes, /sandboxes/{id}/…) and the in-sandbox
 * planes (envd's Connect RPC under /process.Process and /filesystem.Filesystem,
 * /files, /health; the code interpreter's /execute, /contexts) share the
 * prefix, and in-sandbox requests name their sandbox in E2b-Sandbox-Id.
 * Credentials: X-API-KEY on the control plane; the create answer hands
 * the same token back as envdAccessToken and trafficAccessToken, which
 * the SDKs then send as X-Access-Token (envd, /execute) and
 * E2B-Traffic-Access-Token (/contexts); /files takes the signature of
 * uploadUrl()/downloadUrl() in its place (e2b_sign.c).  Facts:
 * ../shared/compat/e2b.md. */
#ifndef DESKBOX_SERVER_COMPAT_E2B_INTERNAL_H
#define DESKBOX_SERVER_COMPAT_E2B_INTERNAL_H

#include <sys/types.h>

#include "server/compat/compat.h"

extern const struct http_route e2b_routes[];
extern const size_t e2b_n_routes;

/* Error bodies: the control plane's {"code":404,"message":"…"} (the SDK
 * reads the numeric code, not the status), envd's Connect
 * {"code":"not_found","message":"…"}. */
void e2b_error_api(struct http_response *res, const struct err *e);
void e2b_error_connect(struct http_response *res, const struct err *e);

/* e2b_sandboxes.c: the control plane */
int e2b_sandbox_create(struct http_request *req, struct http_response *res, struct err *e);
int e2b_sandbox_list(struct http_request *req, struct http_response *res, struct err *e);
int e2b_sandbox_get(struct http_request *req, struct http_response *res, struct err *e);
int e2b_sandbox_kill(struct http_request *req, struct http_response *res, struct err *e);
int e2b_sandbox_timeout(struct http_request *req, struct http_response *res, struct err *e);
int e2b_sandbox_pause(struct http_request *req, struct http_response *res, struct err *e);
int e2b_sandbox_connect(struct http_request *req, struct http_response *res, struct err *e);
/* The sandbox an in-sandbox request names (E2b-Sandbox-Id): a reference
 * (sandbox_put), or inside an operation on it too (e2b_enter: then
 * sandbox_unuse and sandbox_put). */
struct sandbox;
int e2b_sandbox_of(struct http_request *req, struct sandbox **sb, struct err *e);
int e2b_enter(struct http_request *req, struct sandbox **sb, struct err *e);

/* e2b_process.c: process.Process */
int e2b_process_start(struct http_request *req, struct http_response *res, struct err *e);
int e2b_process_list(struct http_request *req, struct http_response *res, struct err *e);
int e2b_process_signal(struct http_request *req, struct http_response *res, struct err *e);
int e2b_process_connect(struct http_request *req, struct http_response *res, struct err *e);
int e2b_process_input(struct http_request *req, struct http_response *res, struct err *e);
int e2b_process_close_stdin(struct http_request *req, struct http_response *res, struct err *e);
int e2b_process_update(struct http_request *req, struct http_response *res, struct err *e);
/* e2b_pstream.c: Start's and Connect's stream of the program `pid` of `sb`
 * (a reference it takes over, put on failure too) or of its terminal
 * `term`; `from_now`: only the output that comes next. */
int e2b_pstream_reply(struct http_response *res, struct sandbox *sb, pid_t pid,
		      const char *term, int from_now, struct err *e);
/* A stream that is only its end, carrying `err` as Connect's code (the
 * SDK reads a stream's errors from there: any status but 200 would be
 * Connect's unimplemented or internal). */
int e2b_pstream_error(struct http_response *res, const struct err *err, struct err *e);
/* A server-streaming request's one message (enveloped), a JSON object. */
int e2b_connect_message(struct http_request *req, cJSON **msg, struct err *e);
/* e2b_files.c: filesystem.Filesystem, /health */
int e2b_fs_stat(struct http_request *req, struct http_response *res, struct err *e);
int e2b_fs_list(struct http_request *req, struct http_response *res, struct err *e);
int e2b_fs_mkdir(struct http_request *req, struct http_response *res, struct err *e);
int e2b_fs_move(struct http_request *req, struct http_response *res, struct err *e);
int e2b_fs_remove(struct http_request *req, struct http_response *res, struct err *e);
int e2b_fs_watch(struct http_request *req, struct http_response *res, struct err *e);
int e2b_health(struct http_request *req, struct http_response *res, struct err *e);
/* e2b_sign.c: /files's credential, X-Access-Token or the signature of
 * uploadUrl()/downloadUrl() for `op` ("read", "write"); 0 or 401. */
int e2b_files_auth(struct http_request *req, const char *op, struct err *e);
/* e2b_files_http.c: /files */
int e2b_files_get(struct http_request *req, struct http_response *res, struct err *e);
int e2b_files_post_begin(struct http_request *req, struct http_body_sink *sink, struct err *e);
int e2b_files_post(struct http_request *req, struct http_response *res, struct err *e);
/* e2b_code.c: the code interpreter */
int e2b_execute(struct http_request *req, struct http_response *res, struct err *e);
int e2b_context_create(struct http_request *req, struct http_response *res, struct err *e);
int e2b_context_list(struct http_request *req, struct http_response *res, struct err *e);
int e2b_context_restart(struct http_request *req, struct http_response *res, struct err *e);
int e2b_context_delete(struct http_request *req, struct http_response *res, struct err *e);
/* Procedures deskbox does not offer: Connect's unimplemented. */
int e2b_rpc_unimplemented(struct http_request *req, struct http_response *res, struct err *e);

/* Calls of E2B's cloud that deskbox has no counterpart for. */
int e2b_refused(struct http_request *req, struct http_response *res, struct err *e);

#endif
