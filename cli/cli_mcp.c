/* deskbox mcp ID: MCP's stdio transport for clients that launch MCP servers
 * as commands (Claude Desktop, IDEs), bridged to the sandbox's Streamable
 * HTTP endpoint (POST /v1/sandboxes/{id}/mcp, docs/mcp.md).  Each line on
 * stdin is one JSON-RPC message; each answer the server gives is one line
 * on stdout; notifications (202) get none.  The session id the server
 * issues at initialize goes with every later message, and the session is
 * ended (DELETE) at end of input.  Nothing but answers is written to
 * stdout: diagnostics go to stderr. */
#include "common/text.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A message line: MCP messages carry base64 screenshots and files. */
#define MCP_LINE_MAX (64u << 20)

struct mcp_bridge {
	struct cli *c;
	char path[160];
	char session[160];
};

/* Keeps the Mcp-Session-Id of an answer. */
static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
	struct mcp_bridge *b = ctx;
	size_t len = size * n;
	static const char name[] = "mcp-session-id:";
	if (len > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
		const char *v = data + sizeof(name) - 1;
		size_t vl = len - (sizeof(name) - 1);
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		if (vl < sizeof(b->session)) {
			memcpy(b->session, v, vl);
			b->session[vl] = '\0';
		}
	}
	return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
	return cli_buf_add(ctx, data, size * n) < 0 ? 0 : size * n;
}

/* Sends one message (or, with `method` DELETE, ends the session); *status
 * and `answer` receive the reply. */
static int send_message(struct mcp_bridge *b, const char *method, const char *msg, long *status,
			struct cli_buf *answer, struct err *e)
{
	struct curl_slist *hdrs = NULL;
	CURL *h = cli_handle(b->c, method, b->path, msg ? "application/json" : NULL, &hdrs, e);
	if (!h)
		return err_code(e);
	char line[256];
	hdrs = curl_slist_append(hdrs, "Accept: application/json, text/event-stream");
	if (b->session[0]) {
		snprintf(line, sizeof(line), "Mcp-Session-Id: %s", b->session);
		hdrs = curl_slist_append(hdrs, line);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (msg) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, msg);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(msg));
	}
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, b);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
	int r = cli_perform(h, "mcp", e);
	if (r == 0)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	return r;
}

/* A JSON-RPC error answer to the request `msg` (nothing for a
 * notification): the transport failed, the client must hear of it. */
static void answer_error(const char *msg, const char *why)
{
	cJSON *in = cJSON_Parse(msg);
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(in, "id");
	if (id && !cJSON_IsNull(id)) {
		cJSON *out = cJSON_CreateObject();
		cJSON_AddStringToObject(out, "jsonrpc", "2.0");
		cJSON_AddItemToObject(out, "id", cJSON_Duplicate(id, 1));
		cJSON *er = cJSON_AddObjectToObject(out, "error");
		cJSON_AddNumberToObject(er, "code", -32603);
		cJSON_AddStringToObject(er, "message", why);
		char *s = cJSON_PrintUnformatted(out);
		if (s) {
			printf("%s\n", s);
			fflush(stdout);
		}
		free(s);
		cJSON_Delete(out);
	}
	cJSON_Delete(in);
}

/* One stdin line through the endpoint and its answer to stdout. */
static void relay(struct mcp_bridge *b, const char *msg)
{
	long status = 0;
	struct cli_buf answer = {0};
	struct err e = ERR_INIT;
	if (send_message(b, "POST", msg, &status, &answer, &e) < 0) {
		fprintf(stderr, "deskbox mcp: %s\n", e.msg);
		answer_error(msg, e.msg);
	} else if (status == 200 && answer.len) {
		/* One line per message: the server answers compact JSON. */
		for (size_t i = 0; i < answer.len; i++)
			if (answer.data[i] == '\n' || answer.data[i] == '\r')
				answer.data[i] = ' ';
		printf("%s\n", answer.data);
		fflush(stdout);
	} else if (status != 202) {
		char why[200];
		snprintf(why, sizeof(why), "the MCP endpoint answered HTTP %ld", status);
		fprintf(stderr, "deskbox mcp: %s: %.*s\n", why,
			UTF8_CUT(answer.data ? answer.data : "", 300));
		answer_error(msg, why);
	}
	free(answer.data);
}

int cli_cmd_mcp(struct cli *c, int argc, char **argv)
{
	if (argc != 2)
		return cli_usage_error("mcp", "give one sandbox id");
	struct mcp_bridge b = {.c = c};
	snprintf(b.path, sizeof(b.path), "/v1/sandboxes/%.*s/mcp", UTF8_CUT(argv[1], 64));
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, stdin)) >= 0) {
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (!n)
			continue;
		if ((size_t)n > MCP_LINE_MAX) {
			fprintf(stderr, "deskbox mcp: a message over %u bytes is dropped\n",
				MCP_LINE_MAX);
			continue;
		}
		relay(&b, line);
	}
	free(line);
	if (b.session[0]) {
		long status = 0;
		struct cli_buf ignored = {0};
		struct err e = ERR_INIT;
		send_message(&b, "DELETE", NULL, &status, &ignored, &e);
		free(ignored.data);
	}
	return 0;
}
