/* The accessibility tree (desktop.h): desktop-image/deskbox-a11y.py,
 * embedded here, is the sandbox's resident reader: a python3 of the image
 * started at the first request and kept (a process helper), that holds its
 * connection to AT-SPI on the session bus the sandbox's init starts and
 * answers each request with one JSON object; deskboxd never speaks D-Bus
 * to sandbox code.  Bounds come in screen pixels and, when
 * the agent declared its own display, in that space too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "desktop.h"
#include "internal.h"

__asm__(".section .rodata\n"
	".global deskbox_a11y_src\n"
	"deskbox_a11y_src:\n"
	".incbin \"desktop-image/deskbox-a11y.py\"\n"
	".byte 0\n"
	".previous\n");
extern const char deskbox_a11y_src[];

#define A11Y_TIMEOUT_MS	 15000
#define A11Y_MAX_OUTPUT	 (16u << 20)
#define A11Y_NODES_LIMIT 20000

static enum err_kind kind_of(const char *msg, size_t *skip)
{
	static const struct {
		const char *prefix;
		enum err_kind kind;
	} kinds[] = {{"not_found: ", ERR_NOT_FOUND},
		     {"invalid: ", ERR_INVALID},
		     {"unavailable: ", ERR_UNAVAILABLE}};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t n = strlen(kinds[i].prefix);
		if (strncmp(msg, kinds[i].prefix, n) == 0) {
			*skip = n;
			return kinds[i].kind;
		}
	}
	*skip = 0;
	return ERR_INTERNAL;
}

/* Asks the sandbox's resident reader (started at the first request and
 * kept, process_helper_call) and parses its one JSON answer; consumes
 * `req`. */
static int a11y_ask(struct desk *d, cJSON *req, cJSON **out, struct err *e)
{
	const char *argv[] = {"/usr/bin/python3", "-c", deskbox_a11y_src, NULL};
	const char *env[] = {"PYTHONDONTWRITEBYTECODE=1", NULL};
	const struct process_helper_spec spec = {
	    .name = "accessibility reader",
	    .argv = argv,
	    .env = env,
	    .max_answer = A11Y_MAX_OUTPUT,
	};
	char *text = req ? cJSON_PrintUnformatted(req) : NULL;
	cJSON_Delete(req);
	if (!text)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	char *ans;
	size_t len;
	int r = process_helper_call(d->procs, &spec, text, strlen(text), A11Y_TIMEOUT_MS, &ans,
				    &len, e);
	free(text);
	if (r < 0)
		return err_wrap(e, "reading the accessibility tree");
	cJSON *j = cJSON_ParseWithLength(ans, len);
	free(ans);
	const cJSON *msg = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
	size_t skip = 0;
	if (cJSON_IsString(msg))
		r = err_set(e, kind_of(msg->valuestring, &skip), EIO, "%.*s",
			    UTF8_CUT(msg->valuestring + skip, 400));
	else if (!cJSON_IsObject(j))
		r = err_set(e, ERR_INTERNAL, EPROTO,
			    "the accessibility reader's answer is not JSON");
	if (r < 0) {
		cJSON_Delete(j);
		return r;
	}
	*out = j;
	return 0;
}

/* Adds "agent_bounds" to every node of `list` (and below). */
static void add_agent_bounds(const struct desk *d, cJSON *list)
{
	cJSON *n;
	cJSON_ArrayForEach(n, list)
	{
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(n, "bounds");
		if (cJSON_IsObject(b)) {
			int32_t x = (int32_t)cJSON_GetNumberValue(cJSON_GetObjectItem(b, "x"));
			int32_t y = (int32_t)cJSON_GetNumberValue(cJSON_GetObjectItem(b, "y"));
			int32_t w = (int32_t)cJSON_GetNumberValue(cJSON_GetObjectItem(b, "width"));
			int32_t h = (int32_t)cJSON_GetNumberValue(cJSON_GetObjectItem(b, "height"));
			int32_t ax, ay, ax1, ay1;
			desk_to_agent(d, x, y, &ax, &ay);
			desk_to_agent(d, x + w, y + h, &ax1, &ay1);
			cJSON *ab = cJSON_AddObjectToObject(n, "agent_bounds");
			cJSON_AddNumberToObject(ab, "x", ax);
			cJSON_AddNumberToObject(ab, "y", ay);
			cJSON_AddNumberToObject(ab, "width", ax1 - ax);
			cJSON_AddNumberToObject(ab, "height", ay1 - ay);
		}
		add_agent_bounds(d, cJSON_GetObjectItemCaseSensitive(n, "children"));
	}
}

/* A window given by its id: its title, which AT-SPI knows it by. */
static int window_title(struct desk *d, const char *window, char *title, size_t size, struct err *e)
{
	snprintf(title, size, "%s", window);
	if (!*window || strspn(window, "0123456789") != strlen(window))
		return 0;
	cJSON *none = cJSON_CreateObject(), *res = cJSON_CreateObject();
	int r = none && res ? desk_x_action(d, "windows", NULL, none, res, e)
			    : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	const cJSON *w;
	int found = 0;
	const cJSON *list = r == 0 ? cJSON_GetObjectItemCaseSensitive(res, "windows") : NULL;
	cJSON_ArrayForEach(w, list)
	{
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(w, "id");
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(w, "title");
		if (cJSON_IsNumber(id) && cJSON_IsString(t) &&
		    (unsigned long long)id->valuedouble == strtoull(window, NULL, 10)) {
			snprintf(title, size, "%s", t->valuestring);
			found = 1;
		}
	}
	cJSON_Delete(none);
	cJSON_Delete(res);
	if (r == 0 && !found)
		r = err_set(e, ERR_NOT_FOUND, ENOENT, "no window %s", window);
	return r;
}

int desk_a11y_tree(struct desk *d, const struct desk_a11y_query *q, cJSON **out, struct err *e)
{
	if (q->max_depth < 0 || q->max_depth > 1000 || q->max_nodes < 1 ||
	    q->max_nodes > A11Y_NODES_LIMIT)
		return err_set(e, ERR_INVALID, EINVAL, "max_depth 0-1000, max_nodes 1-%d",
			       A11Y_NODES_LIMIT);
	char title[512];
	if (window_title(d, q->window ? q->window : "", title, sizeof(title), e) < 0)
		return err_code(e);
	cJSON *req = cJSON_CreateObject(), *j;
	cJSON_AddStringToObject(req, "op", "tree");
	cJSON_AddStringToObject(req, "window", title);
	cJSON_AddNumberToObject(req, "max_depth", q->max_depth);
	cJSON_AddStringToObject(req, "find", q->find ? q->find : "");
	cJSON_AddNumberToObject(req, "max_nodes", q->max_nodes);
	if (a11y_ask(d, req, &j, e) < 0)
		return err_code(e);
	if (d->aw != d->w || d->ah != d->h) {
		add_agent_bounds(d, cJSON_GetObjectItemCaseSensitive(j, "nodes"));
		add_agent_bounds(d, cJSON_GetObjectItemCaseSensitive(j, "matches"));
	}
	*out = j;
	return 0;
}

int desk_a11y_action(struct desk *d, const char *node, const char *name, cJSON **out, struct err *e)
{
	if (strlen(node) > 256 || strspn(node, "0123456789.") != strlen(node) || !*node)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no accessible node '%.*s'",
			       UTF8_CUT(node, 64));
	if (!*name || strlen(name) > 64)
		return err_set(e, ERR_INVALID, EINVAL, "field 'name' must be an action's name");
	/* An action like any other: logged, refused during a takeover. */
	cJSON *args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "node", node);
	cJSON_AddStringToObject(args, "name", name);
	struct desk_obs_act a;
	if (desk_obs_begin(d, "accessibility_action", &a, e) < 0) {
		cJSON_Delete(args);
		return err_code(e);
	}
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", "action");
	cJSON_AddStringToObject(req, "node", node);
	cJSON_AddStringToObject(req, "name", name);
	int r = a11y_ask(d, req, out, e);
	desk_obs_end(d, &a, args, r, e);
	cJSON_Delete(args);
	return r;
}
