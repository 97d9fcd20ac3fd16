/* Shared by mcp.c and the tool files (mcp_tools*.c); not used elsewhere. */
#ifndef DESKBOX_SERVER_MCP_INTERNAL_H
#define DESKBOX_SERVER_MCP_INTERNAL_H

#include "mcp.h"

/* A tool run puts its result into `content` (a JSON array of MCP content
 * items) and returns 0; a negative return with `e` filled is the tool
 * failing, which the caller turns into an isError result. */
typedef int (*mcp_tool_fn)(const struct mcp_ctx *c, const cJSON *args, cJSON *content,
			   struct err *e);

struct mcp_tool {
	const char *name;
	const char *description;
	const char *schema; /* the input schema, JSON text */
	unsigned needs;	    /* enum mcp_needs */
	mcp_tool_fn run;
};

/* The tool table (mcp_tools.c), and NULL for an unknown name. */
extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_n_tools;
const struct mcp_tool *mcp_tool_find(const char *name);

/* Adds {"type":"text","text":...} to `content`; -1 out of memory. */
int mcp_content_text(cJSON *content, const char *text);
/* Adds `j` printed as text and frees it; -1 out of memory. */
int mcp_content_json(cJSON *content, cJSON *j);

/* mcp_tools_run.c: programs and files. */
int mcp_tool_exec(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e);
int mcp_tool_code_run(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e);
int mcp_tool_read_file(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e);
int mcp_tool_write_file(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e);
int mcp_tool_list_files(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e);

#endif
