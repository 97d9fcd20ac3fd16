/* Shared by the process route files (api_process*.c); not used elsewhere. */
#ifndef DESKBOX_SERVER_API_INTERNAL_H
#define DESKBOX_SERVER_API_INTERNAL_H

#include "api.h"
#include "server/process/process.h"

#define EXEC_MAX_ARGS 4096
#define EXEC_MAX_ENV  256
#define EXEC_EXTRA_ENV                                                                             \
	6 /* variables deskboxd adds (PYTHONUNBUFFERED, TERM, HOME and USER of root) */
#define EXEC_MAX_STDIN (1u << 20)
/* One argv string (MAX_ARG_STRLEN is 32 pages including the NUL). */
#define CODE_MAX (128u * 1024 - 1)

/* argv and env as C arrays pointing into the request's JSON. */
struct exec_args {
	const char *argv[EXEC_MAX_ARGS + 1];
	const char *env_kv[EXEC_MAX_ENV + EXEC_EXTRA_ENV + 1];
	char *env_owned[EXEC_MAX_ENV + EXEC_EXTRA_ENV];
	size_t n_env;
};

void exec_args_release(struct exec_args *a);

/* Adds `name` (and `name`_b64 with the exact bytes when they are not
 * UTF-8, the text then made valid by U+FFFD replacement) to `j`. */
void api_add_output(cJSON *j, const char *name, const char *data, size_t len);

/* exit_code, [stdout, stderr,] timed_out, oom_killed, truncated,
 * duration_ms. */
cJSON *api_result_json(const struct process_result *pr, int with_output);

/* api_anthropic_bash.c: a tool_use block of Anthropic's bash tool on the
 * adapter route, answered with its tool_result (*handled = 1); any other
 * body is left to the computer adapter (*handled = 0). */
int api_anthropic_bash(struct http_request *req, struct http_response *res, int *handled,
		       struct err *e);
/* api_cdp.c: the URL of the in-sandbox browser's most recently active page
 * (over CDP); -1 when the browser does not answer or has none. */
int api_cdp_page_url(struct http_request *req, char *url, size_t size);

/* api_anthropic_edit.c: the text editor tool's `input` run on the
 * sandbox's files, its tool_result content (and is_error) added to `out`;
 * a failure's reason also in `why`.  Returns 0 or the failure's code. */
int api_anthropic_edit(struct http_request *req, const cJSON *input, cJSON *out, char *why,
		       size_t why_size);

/* ?stream=1 or Accept: text/event-stream. */
int api_wants_stream(struct http_request *req);

/* Answers with the run's output as Server-Sent Events (`stdout`, `stderr`,
 * then one `result`); takes ownership of `run`. */
int api_stream_run(struct http_response *res, struct process_run *run, struct err *e);

/* code_run with "context": runs `code` in the Python context `cid`. */
int api_context_run(struct http_request *req, struct http_response *res, const char *cid,
		    const char *code, const struct process_opts *o, struct err *e);

/* api_ports.c: {port} (1..65535) from a capture; and a connection to
 * 127.0.0.1:port inside sandbox `sid` into o->fd. */
int api_port_parse(const char *s, unsigned *port, struct err *e);
int api_proxy_open(struct http_request *req, const char *sid, unsigned port,
		   struct http_proxy_opts *o, struct err *e);

/* The process routes' argument parsers, shared with terminals and
 * sessions (api_terminals.c). */
int api_parse_env(const cJSON *body, struct exec_args *a, struct err *e);
/* "user": "user" (the default) | "root" into *root; with root, HOME and
 * USER are root's unless the request's env set them.  ERR_INVALID for
 * anything else. */
int api_parse_user(const cJSON *body, struct exec_args *a, int *root, struct err *e);
/* With `root`: ERR_ROOT_DISABLED unless sandbox `sb` may run as root
 * (sandbox_root_check). */
int api_root_check(struct sandbox *sb, int root, struct err *e);

/* Browser-facing pieces of api_viewer.c shared with api_terminals.c. */
struct vnc_grant;
/* A viewer token of `scope` ("" the desktop) in ?token= or as a bearer
 * header, or the API token as a bearer header. */
int api_viewer_authorize(struct http_request *req, const char *scope, struct vnc_grant *g,
			 struct err *e);
/* Checks a WebSocket upgrade request (and its Origin); `accept` receives
 * WS_ACCEPT_LEN + 1 bytes for api_ws_accept(). */
int api_ws_handshake(struct http_request *req, char *accept, struct err *e);
/* The 101's WebSocket headers (after http_reply_upgrade). */
int api_ws_accept(struct http_request *req, struct http_response *res, const char *accept,
		  struct err *e);

/* Answers the file open on `fd` (taken over, closed here) of `size`
 * bytes as `mime`, honouring a single-range Range header (206, or 416
 * past the end). */
int api_reply_file(struct http_request *req, struct http_response *res, int fd, uint64_t size,
		   const char *mime, struct err *e);

/* api_sse.c: a Server-Sent Events body being produced.  Events go in with
 * api_sse_event() ("event: NAME\ndata: JSON\n\n"; `j` stays the caller's),
 * a streamed response's reader takes them out with api_sse_take() (0 when
 * nothing waits); `failed` is set when memory ran out. */
struct api_sse {
	char *buf;
	size_t len, off, cap;
	int failed;
};
void api_sse_append(struct api_sse *s, const char *data, size_t n);
void api_sse_event(struct api_sse *s, const char *name, const cJSON *j);
size_t api_sse_take(struct api_sse *s, char *buf, size_t max);
void api_sse_release(struct api_sse *s);

/* Whether sandbox `sid` of registry `cls` (struct sandboxes) is still
 * there: the sweep callback of viewer and share tokens (api_viewer.c). */
int api_sandbox_alive(void *cls, const char *sid);

#endif
