/* compat/e2b: the route table under /e2b and E2B's error shapes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define API_KEY	      "X-API-KEY"
#define ACCESS_TOKEN  "X-Access-Token"
#define TRAFFIC_TOKEN "E2B-Traffic-Access-Token"
#define SB	      "/sandboxes/{id}"

#define API(m_, p_, h_)                                                                            \
	{                                                                                          \
		.method = m_, .pattern = p_, .handler = h_, .token_header = API_KEY,               \
		.error = e2b_error_api                                                             \
	}

/* envd's Connect procedures and routes: the token handed out at create. */
#define RPC(p_, h_)                                                                                \
	{                                                                                          \
		.method = "POST", .pattern = p_, .handler = h_, .token_header = ACCESS_TOKEN,      \
		.error = e2b_error_connect                                                         \
	}
#define PROC "/process.Process/"
#define FS   "/filesystem.Filesystem/"

/* The code interpreter's routes: the SDK sends the traffic token on all. */
#define CODE(m_, p_, h_)                                                                           \
	{                                                                                          \
		.method = m_, .pattern = p_, .handler = h_, .token_header = TRAFFIC_TOKEN,         \
		.error = e2b_error_api                                                             \
	}

const struct http_route e2b_routes[] = {
    CODE("POST", "/execute", e2b_execute),
    CODE("POST", "/contexts", e2b_context_create),
    CODE("GET", "/contexts", e2b_context_list),
    CODE("POST", "/contexts/{cid}/restart", e2b_context_restart),
    CODE("DELETE", "/contexts/{cid}", e2b_context_delete),
    RPC(PROC "Start", e2b_process_start),
    RPC(PROC "List", e2b_process_list),
    RPC(PROC "SendSignal", e2b_process_signal),
    RPC(PROC "Connect", e2b_process_connect),
    RPC(PROC "SendInput", e2b_process_input),
    RPC(PROC "CloseStdin", e2b_process_close_stdin),
    RPC(PROC "Update", e2b_process_update),
    RPC(PROC "{method}", e2b_rpc_unimplemented),
    RPC(FS "Stat", e2b_fs_stat),
    RPC(FS "ListDir", e2b_fs_list),
    RPC(FS "MakeDir", e2b_fs_mkdir),
    RPC(FS "Move", e2b_fs_move),
    RPC(FS "Remove", e2b_fs_remove),
    RPC(FS "WatchDir", e2b_fs_watch),
    RPC(FS "{method}", e2b_rpc_unimplemented),
    {.method = "GET",
     .pattern = "/files",
     .handler = e2b_files_get,
     .flags = HTTP_NO_AUTH, /* the token or a signed URL: e2b_files_auth */
     .error = e2b_error_api},
    {.method = "POST",
     .pattern = "/files",
     .handler = e2b_files_post,
     .flags = HTTP_STREAM_BODY | HTTP_NO_AUTH,
     .begin = e2b_files_post_begin,
     .error = e2b_error_api},
    {.method = "GET", .pattern = "/health", .handler = e2b_health, .flags = HTTP_NO_AUTH},

    API("POST", "/v2/sandboxes", e2b_sandbox_create),
    API("POST", "/sandboxes", e2b_sandbox_create),
    API("GET", "/v2/sandboxes", e2b_sandbox_list),
    API("GET", "/sandboxes", e2b_sandbox_list),
    API("GET", SB, e2b_sandbox_get),
    API("DELETE", SB, e2b_sandbox_kill),
    API("POST", SB "/timeout", e2b_sandbox_timeout),
    API("POST", SB "/pause", e2b_sandbox_pause),
    API("POST", "/v2/sandboxes/{id}/connect", e2b_sandbox_connect),
    API("POST", SB "/connect", e2b_sandbox_connect),
    API("POST", SB "/resume", e2b_sandbox_connect),
    /* E2B's cloud features deskbox does not offer (docs/compat.md). */
    API("GET", SB "/metrics", e2b_refused),
    API("PUT", SB "/network", e2b_refused),
    API("POST", SB "/fork", e2b_refused),
    API("POST", SB "/snapshots", e2b_refused),
    API("GET", "/snapshots", e2b_refused),
};

const size_t e2b_n_routes = sizeof(e2b_routes) / sizeof(e2b_routes[0]);

static void reply_body(struct http_response *res, cJSON *j, const char *fallback)
{
	int status = res->status;
	if (http_reply_json(res, status, j, NULL) < 0) {
		char *copy = strdup(fallback);
		http_reply_data(res, status, "application/json", copy, copy ? strlen(copy) : 0);
	}
}

void e2b_error_api(struct http_response *res, const struct err *e)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "code", res->status);
	cJSON_AddStringToObject(j, "message", e->msg[0] ? e->msg : "internal error");
	reply_body(res, j, "{\"code\":500,\"message\":\"out of memory\"}");
}

/* Connect's code names (connectrpc.com/docs/protocol#error-codes) for the
 * statuses deskbox answers. */
static const char *connect_code(int status)
{
	switch (status) {
	case 400:
	case 415:
		return "invalid_argument";
	case 401:
		return "unauthenticated";
	case 403:
		return "permission_denied";
	case 404:
		return "not_found";
	case 405:
		return "unimplemented";
	case 409:
		return "failed_precondition"; /* already_exists: see e2b_error_connect */
	case 413:
	case 429:
	case 507:
		return "resource_exhausted";
	case 502:
	case 503:
		return "unavailable";
	case 504:
		return "deadline_exceeded";
	}
	return "internal";
}

void e2b_error_connect(struct http_response *res, const struct err *e)
{
	cJSON *j = cJSON_CreateObject();
	int exists = e->kind == ERR_CONFLICT && e->sys_errno == EEXIST;
	cJSON_AddStringToObject(j, "code", exists ? "already_exists" : connect_code(res->status));
	cJSON_AddStringToObject(j, "message", e->msg[0] ? e->msg : "internal error");
	reply_body(res, j, "{\"code\":\"internal\",\"message\":\"out of memory\"}");
}

int e2b_refused(struct http_request *req, struct http_response *res, struct err *e)
{
	return err_set(e, ERR_INVALID, ENOTSUP,
		       "'%s %s' is an E2B cloud feature deskbox does not offer", req->method,
		       req->path);
}

int e2b_rpc_unimplemented(struct http_request *req, struct http_response *res, struct err *e)
{
	return err_set(e, ERR_METHOD, ENOTSUP, "procedure '%s' is not offered by deskbox",
		       req->path);
}
