/* Fuzzes the MCP message path with what a client can send: a POST body
 * through mcp_parse, mcp_admit and mcp_handle, with the session and
 * protocol-version headers taken from the input too.  Tool calls meet a
 * sandbox that is not available, so every tool's failure path runs but no
 * desktop or program is needed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/mcp/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SANDBOX "0123456789abcdef0123456789abcdef"

static struct mcp_sessions *sessions;

/* Initializes a session and puts its id into `id`. */
static int new_session(char *id, struct err *e)
{
	static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
				   "\"params\":{\"protocolVersion\":\"2025-11-25\"}}";
	struct mcp_request r = {.sandbox_id = SANDBOX};
	cJSON *refusal;
	if (mcp_parse(init, sizeof(init) - 1, &r.msg, &refusal) < 0)
		return -1;
	struct mcp_ctx c = {.root = {.fd = -1}};
	struct mcp_answer a;
	int rc = mcp_handle(sessions, &r, &c, &a, e);
	mcp_message_release(&r.msg);
	if (rc < 0)
		return rc;
	cJSON_Delete(a.reply);
	strcpy(id, a.session_id);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err e = ERR_INIT;
	if (!sessions && mcp_sessions_new(&sessions, &e) < 0)
		abort();
	/* "<session>\n<version>\n<body>": the first two lines are headers
	 * ("-" for none; a session "new" is one initialized first, so
	 * tools/call gets past the session check). */
	char hdr[2][64] = {"", ""};
	size_t off = 0;
	for (int i = 0; i < 2; i++) {
		const uint8_t *nl = memchr(data + off, '\n', size - off);
		if (!nl)
			return 0;
		size_t n = (size_t)(nl - (data + off));
		if (n >= sizeof(hdr[i]))
			return 0;
		memcpy(hdr[i], data + off, n);
		hdr[i][n] = '\0';
		off += n + 1;
	}
	if (strcmp(hdr[0], "new") == 0 && new_session(hdr[0], &e) < 0)
		abort();
	struct mcp_request r = {
	    .sandbox_id = SANDBOX,
	    .session_id = strcmp(hdr[0], "-") ? hdr[0] : NULL,
	    .protocol_version = strcmp(hdr[1], "-") ? hdr[1] : NULL,
	};
	cJSON *refusal = NULL;
	enum mcp_outcome out;
	if (mcp_parse((const char *)data + off, size - off, &r.msg, &refusal) < 0) {
		if (!refusal)
			abort();
		cJSON_Delete(refusal);
		return 0;
	}
	if (mcp_admit(sessions, &r, &out, &refusal) == 0) {
		struct err down = ERR_INIT;
		err_set(&down, ERR_CONFLICT, 0, "sandbox is stopped");
		struct mcp_ctx c = {.root = {.fd = -1}, .unavailable = &down};
		struct mcp_answer a;
		(void)mcp_needs(&r.msg);
		if (mcp_handle(sessions, &r, &c, &a, &e) == 0) {
			if (a.outcome == MCP_REPLY && !a.reply)
				abort();
			cJSON_Delete(a.reply);
		}
	} else {
		cJSON_Delete(refusal);
	}
	mcp_message_release(&r.msg);
	return 0;
}
