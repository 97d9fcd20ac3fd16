/* The tool table, and the desktop's tools: a screenshot as an image, the
 * pointer and keyboard actions and waits through desk_action().  The
 * schemas name the same fields and limits as the REST actions
 * (docs/actions.md), whose checks still decide. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "internal.h"

int mcp_content_text(cJSON *content, const char *text)
{
	cJSON *t = cJSON_CreateObject();
	if (!t || !cJSON_AddStringToObject(t, "type", "text") ||
	    !cJSON_AddStringToObject(t, "text", text)) {
		cJSON_Delete(t);
		return -1;
	}
	cJSON_AddItemToArray(content, t);
	return 0;
}

int mcp_content_json(cJSON *content, cJSON *j)
{
	char *s = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	int r = s ? mcp_content_text(content, s) : -1;
	free(s);
	return r;
}

static int oom(struct err *e)
{
	return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
}

static int screenshot(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	struct shot_opts so;
	struct shot s;
	if (desk_shot_parse(c->desk, args, &so, e) < 0 || desk_shot_take(c->desk, &so, &s, e) < 0)
		return err_code(e);
	char *b64 = base64_encode(s.data, s.len);
	cJSON *img = cJSON_CreateObject();
	int r = 0;
	if (!b64 || !img || !cJSON_AddStringToObject(img, "type", "image") ||
	    !cJSON_AddStringToObject(img, "data", b64) ||
	    !cJSON_AddStringToObject(img, "mimeType", s.mime)) {
		cJSON_Delete(img);
		r = oom(e);
	} else {
		cJSON_AddItemToArray(content, img);
	}
	free(b64);
	desk_shot_release(&s);
	return r;
}

/* Runs the desktop action `name` and answers its result as JSON text
 * ({"events","frame"} for input, {"frame","waited_ms","timed_out"} for a
 * wait). */
static int action(const struct mcp_ctx *c, const char *name, const cJSON *args, cJSON *content,
		  struct err *e)
{
	cJSON *out = cJSON_CreateObject();
	if (!out)
		return oom(e);
	if (desk_action(c->desk, name, args, out, e) < 0) {
		cJSON_Delete(out);
		return err_code(e);
	}
	return mcp_content_json(content, out) < 0 ? oom(e) : 0;
}

static int click(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	return action(c, "click", args, content, e);
}

static int double_click(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	cJSON *a = cJSON_Duplicate(args, 1);
	if (!a)
		return oom(e);
	cJSON_DeleteItemFromObjectCaseSensitive(a, "count");
	cJSON_AddNumberToObject(a, "count", 2);
	int r = action(c, "click", a, content, e);
	cJSON_Delete(a);
	return r;
}

static int move(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	return action(c, "move", args, content, e);
}

static int drag(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	return action(c, "drag", args, content, e);
}

static int scroll(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	return action(c, "scroll", args, content, e);
}

static int type_text(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	return action(c, "type_text", args, content, e);
}

static int key(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	return action(c, "key", args, content, e);
}

static int wait(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	return action(c, "wait", args, content, e);
}

static int browser(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	return action(c, "browser", args, content, e);
}

/* ---- the table ---- */

#define XY                                                                                         \
	"\"x\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"pixels from the left\"},"     \
	"\"y\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"pixels from the top\"}"
#define BUTTON                                                                                     \
	"\"button\":{\"type\":\"string\",\"enum\":[\"left\",\"middle\",\"right\",\"back\","        \
	"\"forward\"],\"default\":\"left\"}"
#define MODIFIERS                                                                                  \
	"\"modifiers\":{\"description\":\"keys held meanwhile: [\\\"ctrl\\\",\\\"shift\\\"] or "   \
	"\\\"ctrl+shift\\\"\",\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"items\":{"    \
	"\"type\":\"string\"}}]}"
#define OBJECT(props, required)                                                                    \
	"{\"type\":\"object\",\"properties\":{" props "}" required                                 \
	",\"additionalProperties\":false}"
#define NONE_REQUIRED  ""
#define REQUIRED(list) ",\"required\":[" list "]"

#define DESK MCP_NEED_DESK

const struct mcp_tool mcp_tools[] = {
    {"screenshot",
     "Takes a screenshot of the sandbox's screen (PNG unless format is jpeg or webp). Coordinates in the "
     "other desktop tools are pixels of this picture at its default size.",
     OBJECT("\"width\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":8192,\"description\":"
	    "\"output width (keeps the aspect ratio unless height is given too)\"},"
	    "\"height\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":8192},"
	    "\"format\":{\"type\":\"string\",\"enum\":[\"png\",\"jpeg\",\"webp\"],\"default\":\"png\"},"
	    "\"cursor\":{\"type\":\"boolean\",\"description\":\"draw the mouse pointer\"}",
	    NONE_REQUIRED),
     DESK, screenshot},
    {"click", "Clicks a mouse button at x, y (or where the pointer is when they are left out).",
     OBJECT(XY "," BUTTON "," MODIFIERS, NONE_REQUIRED), DESK, click},
    {"double_click", "Double-clicks a mouse button at x, y.",
     OBJECT(XY "," BUTTON "," MODIFIERS, REQUIRED("\"x\",\"y\"")), DESK, double_click},
    {"move", "Moves the mouse pointer to x, y.", OBJECT(XY "," MODIFIERS, REQUIRED("\"x\",\"y\"")),
     DESK, move},
    {"drag",
     "Presses a mouse button at the first point of path, moves through the others and releases "
     "at the last.",
     OBJECT("\"path\":{\"type\":\"array\",\"minItems\":2,\"maxItems\":1024,\"description\":"
	    "\"points [x, y]\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},"
	    "\"minItems\":2,\"maxItems\":2}}," BUTTON "," MODIFIERS,
	    REQUIRED("\"path\"")),
     DESK, drag},
    {"scroll", "Turns the mouse wheel at x, y: amount clicks in direction.",
     OBJECT(XY ",\"direction\":{\"type\":\"string\",\"enum\":[\"up\",\"down\",\"left\","
	       "\"right\"]},\"amount\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,"
	       "\"default\":3}," MODIFIERS,
	    REQUIRED("\"direction\"")),
     DESK, scroll},
    {"type_text",
     "Types text into the focused window, exactly (any Unicode; \\n presses Return, \\t Tab).",
     OBJECT("\"text\":{\"type\":\"string\",\"maxLength\":262144},"
	    "\"delay_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":1000,\"description\":"
	    "\"pause after each character\"}",
	    REQUIRED("\"text\"")),
     DESK, type_text},
    {"key",
     "Presses key combinations, xdotool names: \"Return\", \"ctrl+c\", \"alt+F4\"; several "
     "separated by spaces or as a list.",
     OBJECT("\"keys\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"items\":{"
	    "\"type\":\"string\"}}]}",
	    REQUIRED("\"keys\"")),
     DESK, key},
    {"wait",
     "Waits: for ms milliseconds, until the screen is stable (no change for quiet_ms), or until "
     "it changes.",
     OBJECT("\"ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":60000},"
	    "\"until\":{\"type\":\"string\",\"enum\":[\"stable\",\"change\"]},"
	    "\"quiet_ms\":{\"type\":\"integer\",\"minimum\":0,\"default\":300},"
	    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":60000,"
	    "\"default\":10000}",
	    NONE_REQUIRED),
     DESK, wait},
    {"browser",
     "Opens a URL in the sandbox's web browser (chromium): starts it, or opens a new tab in the "
     "one running, and answers once its window is up.",
     OBJECT("\"url\":{\"type\":\"string\",\"maxLength\":8192,\"description\":"
	    "\"an http://, https://, file:// or about: URL; default about:blank\"}",
	    NONE_REQUIRED),
     DESK, browser},
    {"exec",
     "Runs a command in the sandbox (a shell command line, or argv) and answers its exit code, "
     "stdout and stderr; with background, starts it and answers its pid at once (for programs "
     "that keep running, such as GUI applications).",
     OBJECT("\"command\":{\"type\":\"string\",\"description\":\"run by /bin/sh -c\"},"
	    "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1},"
	    "\"cwd\":{\"type\":\"string\",\"description\":\"absolute; default /workspace\"},"
	    "\"stdin\":{\"type\":\"string\"},"
	    "\"timeout_s\":{\"type\":\"number\",\"exclusiveMinimum\":0},"
	    "\"background\":{\"type\":\"boolean\",\"default\":false}",
	    NONE_REQUIRED),
     MCP_NEED_PROCS, mcp_tool_exec},
    {"code_run", "Runs a piece of Python, bash or Node.js code and answers its output.",
     OBJECT("\"code\":{\"type\":\"string\"},"
	    "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"bash\",\"node\"],"
	    "\"default\":\"python\"},"
	    "\"timeout_s\":{\"type\":\"number\",\"exclusiveMinimum\":0}",
	    REQUIRED("\"code\"")),
     MCP_NEED_PROCS | MCP_NEED_ROOT, mcp_tool_code_run},
    {"read_file",
     "Reads a file of the sandbox: text, or a base64 blob when it is not UTF-8 (at most 4 MiB).",
     OBJECT("\"path\":{\"type\":\"string\",\"description\":\"relative paths start at "
	    "/workspace\"}",
	    REQUIRED("\"path\"")),
     MCP_NEED_ROOT, mcp_tool_read_file},
    {"write_file", "Writes a file of the sandbox, replacing it whole.",
     OBJECT("\"path\":{\"type\":\"string\",\"description\":\"relative paths start at "
	    "/workspace\"},"
	    "\"content\":{\"type\":\"string\"},"
	    "\"encoding\":{\"type\":\"string\",\"enum\":[\"text\",\"base64\"],\"default\":"
	    "\"text\"},"
	    "\"parents\":{\"type\":\"boolean\",\"default\":false,\"description\":\"create missing "
	    "parent directories\"}",
	    REQUIRED("\"path\",\"content\"")),
     MCP_NEED_ROOT | MCP_NEED_QUOTA, mcp_tool_write_file},
    {"list_files",
     "Lists a directory of the sandbox: name, type, size, mode and mtime of each entry.",
     OBJECT("\"path\":{\"type\":\"string\",\"default\":\"/workspace\"}", NONE_REQUIRED),
     MCP_NEED_ROOT, mcp_tool_list_files},
};

const size_t mcp_n_tools = sizeof(mcp_tools) / sizeof(mcp_tools[0]);

const struct mcp_tool *mcp_tool_find(const char *name)
{
	for (size_t i = 0; i < mcp_n_tools; i++)
		if (strcmp(mcp_tools[i].name, name) == 0)
			return &mcp_tools[i];
	return NULL;
}
