/* The protocol: JSON-RPC messages, sessions and the methods (initialize,
 * ping, tools/list, tools/call).  The tools are in mcp_tools*.c. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/text.h"
#include "common/clock.h"
#include "common/fs.h"
#include "internal.h"

/* Newest first: initialize answers the client's revision when it is one
 * of these, the newest otherwise (the client then decides whether to go
 * on).  Older revisions are not offered: 2025-03-26 has batches. */
static const char *const versions[] = {"2025-11-25", "2025-06-18", NULL};

#define SERVER_NAME    "deskbox"
#define SERVER_VERSION "0.1.0"

#define RPC_PARSE_ERROR	     -32700
#define RPC_INVALID_REQUEST  -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS   -32602
/* The MCP SDKs' code for a transport-level refusal (no such session). */
#define RPC_SERVER_ERROR -32000

/* ---- sessions ---- */

struct mcp_session {
	char id[MCP_SESSION_ID_LEN + 1]; /* "" when the slot is free */
	char sandbox[64];
	long long used_ms;
};

struct mcp_sessions {
	pthread_mutex_t mu;
	struct mcp_session s[MCP_MAX_SESSIONS];
};

int mcp_sessions_new(struct mcp_sessions **out, struct err *e)
{
	struct mcp_sessions *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_init(&s->mu, NULL);
	*out = s;
	return 0;
}

void mcp_sessions_free(struct mcp_sessions *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* The session `id` of `sandbox`, or NULL; under s->mu. */
static struct mcp_session *session_find(struct mcp_sessions *s, const char *sandbox, const char *id)
{
	if (strlen(id) != MCP_SESSION_ID_LEN)
		return NULL;
	for (size_t i = 0; i < MCP_MAX_SESSIONS; i++)
		if (s->s[i].id[0] && strcmp(s->s[i].id, id) == 0 &&
		    strcmp(s->s[i].sandbox, sandbox) == 0)
			return &s->s[i];
	return NULL;
}

static int session_add(struct mcp_sessions *s, const char *sandbox, char id[MCP_SESSION_ID_LEN + 1],
		       struct err *e)
{
	if (fs_random_hex(id, MCP_SESSION_ID_LEN / 2, e) < 0)
		return err_code(e);
	pthread_mutex_lock(&s->mu);
	struct mcp_session *slot = &s->s[0];
	for (size_t i = 0; i < MCP_MAX_SESSIONS; i++) {
		if (!s->s[i].id[0]) {
			slot = &s->s[i];
			break;
		}
		if (s->s[i].used_ms < slot->used_ms)
			slot = &s->s[i];
	}
	snprintf(slot->id, sizeof(slot->id), "%s", id);
	snprintf(slot->sandbox, sizeof(slot->sandbox), "%s", sandbox);
	slot->used_ms = clock_mono_ms();
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int mcp_session_end(struct mcp_sessions *s, const char *sandbox_id, const char *id, struct err *e)
{
	pthread_mutex_lock(&s->mu);
	struct mcp_session *ss = session_find(s, sandbox_id, id);
	if (ss)
		memset(ss, 0, sizeof(*ss));
	pthread_mutex_unlock(&s->mu);
	if (!ss)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no MCP session '%.*s'", UTF8_CUT(id, 40));
	return 0;
}

/* ---- messages ---- */

/* A JSON-RPC error response; `id` may be NULL (then "id": null). */
static cJSON *rpc_error(const cJSON *id, int code, const char *msg)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "jsonrpc", "2.0");
	if (id)
		cJSON_AddItemToObject(j, "id", cJSON_Duplicate(id, 1));
	else
		cJSON_AddNullToObject(j, "id");
	cJSON *err = cJSON_AddObjectToObject(j, "error");
	cJSON_AddNumberToObject(err, "code", code);
	cJSON_AddStringToObject(err, "message", msg);
	return j;
}

/* A JSON-RPC result response; takes `result`. */
static cJSON *rpc_result(const cJSON *id, cJSON *result)
{
	cJSON *j = cJSON_CreateObject();
	if (!j || !result) {
		cJSON_Delete(j);
		cJSON_Delete(result);
		return NULL;
	}
	cJSON_AddStringToObject(j, "jsonrpc", "2.0");
	cJSON_AddItemToObject(j, "id", cJSON_Duplicate(id, 1));
	cJSON_AddItemToObject(j, "result", result);
	return j;
}

int mcp_parse(const char *body, size_t len, struct mcp_message *m, cJSON **error)
{
	memset(m, 0, sizeof(*m));
	*error = NULL;
	cJSON *j = cJSON_ParseWithLength(body, len);
	if (!j) {
		*error = rpc_error(NULL, RPC_PARSE_ERROR, "parse error: the body is not JSON");
		return -1;
	}
	const char *why = NULL;
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "jsonrpc");
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(j, "method");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(j, "params");
	if (cJSON_IsArray(j))
		why = "batches are not part of MCP since revision 2025-06-18: send one message";
	else if (!cJSON_IsObject(j))
		why = "a JSON-RPC message is an object";
	else if (!cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0)
		why = "\"jsonrpc\" must be \"2.0\"";
	else if (method && !cJSON_IsString(method))
		why = "\"method\" must be a string";
	else if (id && !cJSON_IsString(id) && !cJSON_IsNumber(id))
		why = "\"id\" must be a string or a number";
	else if (!method && !id)
		why = "neither a request, a notification nor a response";
	else if (params && !cJSON_IsObject(params) && !cJSON_IsArray(params))
		why = "\"params\" must be an object";
	if (why) {
		*error = rpc_error(
		    cJSON_IsObject(j) && (cJSON_IsString(id) || cJSON_IsNumber(id)) ? id : NULL,
		    RPC_INVALID_REQUEST, why);
		cJSON_Delete(j);
		return -1;
	}
	m->json = j;
	m->method = method ? method->valuestring : NULL;
	m->id = id;
	m->params = params;
	return 0;
}

void mcp_message_release(struct mcp_message *m)
{
	cJSON_Delete(m->json);
	memset(m, 0, sizeof(*m));
}

static int version_supported(const char *v)
{
	for (size_t i = 0; versions[i]; i++)
		if (strcmp(versions[i], v) == 0)
			return 1;
	return 0;
}

static int is_initialize(const struct mcp_message *m)
{
	return m->method && strcmp(m->method, "initialize") == 0;
}

int mcp_admit(struct mcp_sessions *s, const struct mcp_request *r, enum mcp_outcome *out,
	      cJSON **reply)
{
	*reply = NULL;
	/* initialize negotiates the revision in its body; a header there
	 * would name what the client has not agreed on yet. */
	if (!is_initialize(&r->msg) && r->protocol_version &&
	    !version_supported(r->protocol_version)) {
		*out = MCP_BAD_REQUEST;
		*reply = rpc_error(NULL, RPC_INVALID_REQUEST,
				   "unsupported MCP-Protocol-Version (deskbox speaks 2025-11-25 "
				   "and 2025-06-18)");
		return -1;
	}
	if (is_initialize(&r->msg))
		return 0;
	if (!r->session_id) {
		*out = MCP_BAD_REQUEST;
		*reply = rpc_error(NULL, RPC_INVALID_REQUEST,
				   "missing Mcp-Session-Id header: send initialize first");
		return -1;
	}
	pthread_mutex_lock(&s->mu);
	struct mcp_session *ss = session_find(s, r->sandbox_id, r->session_id);
	if (ss)
		ss->used_ms = clock_mono_ms();
	pthread_mutex_unlock(&s->mu);
	if (!ss) {
		*out = MCP_NO_SESSION;
		*reply = rpc_error(NULL, RPC_SERVER_ERROR,
				   "no such MCP session (it ended or expired): initialize again");
		return -1;
	}
	return 0;
}

unsigned mcp_needs(const struct mcp_message *m)
{
	if (!m->method || strcmp(m->method, "tools/call") != 0 || !cJSON_IsObject(m->params))
		return 0;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(m->params, "name");
	const struct mcp_tool *t = cJSON_IsString(name) ? mcp_tool_find(name->valuestring) : NULL;
	return t ? t->needs : 0;
}

/* ---- methods ---- */

static cJSON *initialize(struct mcp_sessions *s, const struct mcp_request *r, struct mcp_answer *a,
			 struct err *e)
{
	const cJSON *pv = cJSON_GetObjectItemCaseSensitive(r->msg.params, "protocolVersion");
	if (!cJSON_IsString(pv))
		return rpc_error(r->msg.id, RPC_INVALID_PARAMS,
				 "params.protocolVersion must be a string");
	const char *version = version_supported(pv->valuestring) ? pv->valuestring : versions[0];
	if (session_add(s, r->sandbox_id, a->session_id, e) < 0)
		return NULL;
	cJSON *res = cJSON_CreateObject();
	if (!res)
		return NULL;
	cJSON_AddStringToObject(res, "protocolVersion", version);
	cJSON *caps = cJSON_AddObjectToObject(res, "capabilities");
	cJSON_AddObjectToObject(caps, "tools");
	cJSON *info = cJSON_AddObjectToObject(res, "serverInfo");
	cJSON_AddStringToObject(info, "name", SERVER_NAME);
	cJSON_AddStringToObject(info, "title", "deskbox sandbox");
	cJSON_AddStringToObject(info, "version", SERVER_VERSION);
	cJSON_AddStringToObject(res, "instructions",
				"One deskbox sandbox: a Linux desktop (take a screenshot, then "
				"click, type and press keys at its pixel coordinates), a shell "
				"(exec, code_run) and its files (read_file, write_file, "
				"list_files; relative paths start at /workspace).");
	return rpc_result(r->msg.id, res);
}

static cJSON *tools_list(const struct mcp_message *m)
{
	cJSON *res = cJSON_CreateObject();
	cJSON *tools = cJSON_AddArrayToObject(res, "tools");
	if (!tools) {
		cJSON_Delete(res);
		return NULL;
	}
	for (size_t i = 0; i < mcp_n_tools; i++) {
		cJSON *t = cJSON_CreateObject();
		cJSON *schema = cJSON_Parse(mcp_tools[i].schema);
		if (!t || !schema) {
			cJSON_Delete(t);
			cJSON_Delete(schema);
			cJSON_Delete(res);
			return NULL;
		}
		cJSON_AddStringToObject(t, "name", mcp_tools[i].name);
		cJSON_AddStringToObject(t, "description", mcp_tools[i].description);
		cJSON_AddItemToObject(t, "inputSchema", schema);
		cJSON_AddItemToArray(tools, t);
	}
	return rpc_result(m->id, res);
}

/* A tool's arguments hold only what its inputSchema's "properties" name
 * (each schema says "additionalProperties": false): a tool error naming
 * the first other member, as a REST body's unknown field is a 400. */
static int args_in_schema(const struct mcp_tool *t, const cJSON *args, struct err *e)
{
	cJSON *schema = cJSON_Parse(t->schema);
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
	const cJSON *it;
	int r = props ? 0 : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_ArrayForEach(it, args)
	{
		if (r == 0 && !cJSON_GetObjectItemCaseSensitive(props, it->string)) {
			r = err_set(e, ERR_UNKNOWN_FIELD, EINVAL, "unknown field '%.*s'",
				    UTF8_CUT(it->string, 64));
			break;
		}
	}
	cJSON_Delete(schema);
	return r;
}

static cJSON *tools_call(const struct mcp_message *m, const struct mcp_ctx *ctx)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(m->params, "name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(m->params, "arguments");
	if (!cJSON_IsString(name))
		return rpc_error(m->id, RPC_INVALID_PARAMS, "params.name must be a string");
	const struct mcp_tool *t = mcp_tool_find(name->valuestring);
	if (!t) {
		char msg[128];
		snprintf(msg, sizeof(msg), "unknown tool '%.*s'", UTF8_CUT(name->valuestring, 64));
		return rpc_error(m->id, RPC_INVALID_PARAMS, msg);
	}
	if (args && !cJSON_IsObject(args))
		return rpc_error(m->id, RPC_INVALID_PARAMS, "params.arguments must be an object");
	cJSON *none = args ? NULL : cJSON_CreateObject();
	cJSON *res = cJSON_CreateObject();
	cJSON *content = cJSON_AddArrayToObject(res, "content");
	if (!content || (!args && !none)) {
		cJSON_Delete(none);
		cJSON_Delete(res);
		return NULL;
	}
	struct err te = ERR_INIT;
	int r;
	if (args && args_in_schema(t, args, &te) < 0)
		r = err_code(&te);
	else if (t->needs && ctx->unavailable)
		r = err_set(&te, ctx->unavailable->kind, 0, "%s", ctx->unavailable->msg);
	else
		r = t->run(ctx, args ? args : none, content, &te);
	cJSON_Delete(none);
	if (r < 0) {
		/* What the tool put in before failing is not its result. */
		cJSON_DeleteItemFromObject(res, "content");
		content = cJSON_AddArrayToObject(res, "content");
		if (!content || mcp_content_text(content, te.msg) < 0) {
			cJSON_Delete(res);
			return NULL;
		}
		cJSON_AddTrueToObject(res, "isError");
	}
	return rpc_result(m->id, res);
}

int mcp_handle(struct mcp_sessions *s, const struct mcp_request *r, const struct mcp_ctx *ctx,
	       struct mcp_answer *a, struct err *e)
{
	const struct mcp_message *m = &r->msg;
	memset(a, 0, sizeof(*a));
	/* Notifications (initialized, cancelled, ...) and responses to
	 * requests deskbox never sends need no answer. */
	if (!m->method || !m->id) {
		a->outcome = MCP_ACCEPTED;
		return 0;
	}
	a->outcome = MCP_REPLY;
	if (m->params && !cJSON_IsObject(m->params))
		a->reply = rpc_error(m->id, RPC_INVALID_PARAMS, "params must be an object");
	else if (strcmp(m->method, "initialize") == 0)
		a->reply = initialize(s, r, a, e);
	else if (strcmp(m->method, "ping") == 0)
		a->reply = rpc_result(m->id, cJSON_CreateObject());
	else if (strcmp(m->method, "tools/list") == 0)
		a->reply = tools_list(m);
	else if (strcmp(m->method, "tools/call") == 0)
		a->reply = tools_call(m, ctx);
	else
		a->reply = rpc_error(m->id, RPC_METHOD_NOT_FOUND, "method not found");
	if (!a->reply)
		return e->kind ? err_code(e) : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	return 0;
}
