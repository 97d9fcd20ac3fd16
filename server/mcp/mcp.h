/* mcp: the Model Context Protocol server behind POST
 * /v1/sandboxes/{id}/mcp (docs/mcp.md): JSON-RPC 2.0 messages, sessions,
 * and the tools (screenshot, the desktop actions, exec, code_run, files)
 * mapped onto the desktop, process and files subsystems.
 *
 * It knows no HTTP and no struct sandbox: server/api/api_mcp.c parses
 * nothing itself, asks mcp_admit() whether a message may run, hands over
 * the handles a message needs (mcp_needs()) and turns the outcome into a
 * status and headers.  Protocol revisions 2025-11-25 and 2025-06-18: one
 * message per POST (those revisions have no batches), answers as a single
 * JSON object, no server-initiated messages.
 */
#ifndef DESKBOX_SERVER_MCP_H
#define DESKBOX_SERVER_MCP_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "server/files/files.h"
#include "common/error.h"
#include "server/desktop/desktop.h"
#include "server/process/process.h"

#define MCP_SESSION_ID_LEN 32 /* hex: 128 random bits */
/* Sessions kept at once; past it the one unused the longest is dropped
 * (its client gets 404 and initializes again, as the transport says). */
#define MCP_MAX_SESSIONS 1024
/* The largest file read_file returns (base64 grows it by a third, and the
 * answer must stay well inside what a client takes in one message). */
#define MCP_READ_MAX (4u << 20)

/* ---- sessions ---- */

struct mcp_sessions;

int mcp_sessions_new(struct mcp_sessions **out, struct err *e);
void mcp_sessions_free(struct mcp_sessions *s);

/* Ends session `id` of sandbox `sandbox_id`; ERR_NOT_FOUND when there is
 * none (or it belongs to another sandbox). */
int mcp_session_end(struct mcp_sessions *s, const char *sandbox_id, const char *id, struct err *e);

/* ---- messages ---- */

/* One JSON-RPC message from a client. */
struct mcp_message {
	cJSON *json;	     /* owned: mcp_message_release() */
	const char *method;  /* NULL for a response */
	const cJSON *id;     /* NULL for a notification */
	const cJSON *params; /* NULL when absent */
};

/* What arrives with a message besides its body: the sandbox it is for and
 * the transport's headers (NULL when absent). */
struct mcp_request {
	const char *sandbox_id;
	const char *session_id;	      /* Mcp-Session-Id */
	const char *protocol_version; /* MCP-Protocol-Version */
	struct mcp_message msg;
};

/* Parses a POST body into r->msg.  On failure *error is a JSON-RPC error
 * response to send back (-32700 parse error, -32600 invalid request: not
 * an object, no "jsonrpc":"2.0", a batch), caller frees. */
int mcp_parse(const char *body, size_t len, struct mcp_message *m, cJSON **error);
void mcp_message_release(struct mcp_message *m);

enum mcp_outcome {
	MCP_REPLY,	 /* answer `reply` (a JSON-RPC response) */
	MCP_ACCEPTED,	 /* a notification or a response: answer nothing */
	MCP_NO_SESSION,	 /* an unknown or ended session id: the client must initialize again */
	MCP_BAD_REQUEST, /* no session id where one is needed, or an unsupported
			  * MCP-Protocol-Version: `reply` is a JSON-RPC error */
};

/* The transport's checks, before anything runs: 0 when `r` may go on,
 * else the refusal in *out (MCP_NO_SESSION or MCP_BAD_REQUEST, *reply
 * then a JSON-RPC error the caller frees). */
int mcp_admit(struct mcp_sessions *s, const struct mcp_request *r, enum mcp_outcome *out,
	      cJSON **reply);

/* ---- running a message ---- */

/* Which handles a message needs from its sandbox. */
enum mcp_needs {
	MCP_NEED_DESK = 1 << 0,	 /* the desktop: a struct desk, entered */
	MCP_NEED_PROCS = 1 << 1, /* running programs: the process table, entered */
	MCP_NEED_ROOT = 1 << 2,	 /* the filesystem: a root fd */
	MCP_NEED_QUOTA = 1 << 3, /* writes: reserving room on the sandbox's disk */
};
unsigned mcp_needs(const struct mcp_message *m);

/* The sandbox as a message sees it.  The caller fills what mcp_needs()
 * asked for; when it could not (the sandbox is stopped, the screen mirror
 * reconnecting), `unavailable` says why and a tool call needing it fails
 * with that reason. */
struct mcp_ctx {
	struct desk *desk;
	struct process_table *procs;
	struct files_root root; /* the sandbox's "/" and its user's ids; fd -1: none */
	/* Reserves room for a write on the sandbox's disk (ERR_NO_SPACE when
	 * it would not fit, so concurrent writers cannot overshoot) and gives
	 * it back afterwards; NULL: no limit. */
	int (*reserve)(void *cls, uint64_t bytes, struct err *e);
	void (*unreserve)(void *cls, uint64_t bytes);
	void *reserve_cls;
	const struct err *unavailable;
	int exec_timeout_default_s, exec_timeout_max_s;
	size_t max_output; /* per stream of a run */
	/* Called once a run has started (so a delete of the sandbox kills it
	 * rather than waiting for it): the caller stops holding the sandbox.
	 * At most once; may be NULL. */
	void (*release)(void *cls);
	void *release_cls;
};

struct mcp_answer {
	enum mcp_outcome outcome; /* MCP_REPLY or MCP_ACCEPTED */
	cJSON *reply;		  /* MCP_REPLY: the response, caller frees */
	/* After initialize: the new session's id, to send as Mcp-Session-Id. */
	char session_id[MCP_SESSION_ID_LEN + 1];
};

/* Runs an admitted message: initialize (a new session), ping, tools/list,
 * tools/call, notifications.  Failures of a tool are its result
 * ("isError": true, the reason as text); protocol errors are JSON-RPC
 * errors (-32601 unknown method, -32602 bad params).  A negative return
 * is left for deskbox itself failing (out of memory). */
int mcp_handle(struct mcp_sessions *s, const struct mcp_request *r, const struct mcp_ctx *ctx,
	       struct mcp_answer *a, struct err *e);

#endif
