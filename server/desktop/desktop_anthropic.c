/* Anthropic's computer-use tool (computer_20250124; computer_20251124 adds
 * zoom), its input taken verbatim and answered with a tool_result block.
 *
 * Sources: the tool's input schema as Anthropic's API documents it (action
 * list and parameters; `text` holds modifier keys on clicks and scrolls) and
 * the reference implementation, anthropics/anthropic-quickstarts
 * computer-use-demo/computer_use_demo/tools/computer.py (limits: `duration`
 * 0-100 s for hold_key and wait, `scroll_amount` a non-negative integer,
 * `key` also names modifiers on clicks, cursor_position answers
 * "X=..,Y=.." as text).  Docs: docs/actions.md.
 *
 * A failure of the action itself (a bad parameter, an unknown action, the
 * desktop refusing) is a tool_result with "is_error": true and the reason
 * as text, which the model can read and act on; only requests that are not
 * JSON or name no sandbox are HTTP errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/args.h"
#include "desktop.h"
#include "internal.h"

/* The reference's limit for hold_key and wait, in seconds. */
#define ANTHROPIC_MAX_DURATION_S 100

static cJSON *obj(void)
{
	return cJSON_CreateObject();
}

/* "coordinate": [x, y] into args' x, y; *have = 0 when absent. */
static int coord(const cJSON *in, const char *name, cJSON *args, int *have, struct err *e)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(in, name);
	*have = 0;
	if (!c || cJSON_IsNull(c))
		return 0;
	const cJSON *x = cJSON_GetArrayItem(c, 0), *y = cJSON_GetArrayItem(c, 1);
	if (!cJSON_IsArray(c) || cJSON_GetArraySize(c) != 2 || !cJSON_IsNumber(x) ||
	    !cJSON_IsNumber(y) || x->valuedouble < 0 || y->valuedouble < 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "'%s' must be [x, y], two non-negative integers", name);
	cJSON_AddNumberToObject(args, "x", x->valuedouble);
	cJSON_AddNumberToObject(args, "y", y->valuedouble);
	*have = 1;
	return 0;
}

static int need_coord(const cJSON *in, cJSON *args, const char *action, struct err *e)
{
	int have;
	if (coord(in, "coordinate", args, &have, e) < 0)
		return err_code(e);
	return have ? 0 : err_set(e, ERR_INVALID, EINVAL, "coordinate is required for %s", action);
}

/* Modifier keys to hold: `text` (the documented schema) or `key` (the
 * reference implementation), e.g. "shift" or "ctrl+shift". */
static void add_mods(const cJSON *in, cJSON *args)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(in, "text");
	if (!cJSON_IsString(t) || !t->valuestring[0])
		t = cJSON_GetObjectItemCaseSensitive(in, "key");
	if (cJSON_IsString(t) && t->valuestring[0])
		cJSON_AddStringToObject(args, "modifiers", t->valuestring);
}

/* `duration` in seconds, 0-100, as milliseconds. */
static int duration_ms(const cJSON *in, int64_t *ms, struct err *e)
{
	double dur;
	if (args_double(in, "duration", 0, ANTHROPIC_MAX_DURATION_S, 0, ARGS_REQUIRED, &dur, e) < 0)
		return err_code(e);
	*ms = (int64_t)(dur * 1000 + 0.5);
	return 0;
}

/* The click actions: which button, how many times. */
static const struct anthropic_click {
	const char *name, *button;
	int count;
} anthropic_clicks[] = {
    {"left_click", "left", 1},	 {"right_click", "right", 1}, {"middle_click", "middle", 1},
    {"double_click", "left", 2}, {"triple_click", "left", 3},
};

static int click(struct desk *d, const cJSON *in, const struct anthropic_click *c, cJSON *args,
		 struct err *e)
{
	int have;
	if (coord(in, "coordinate", args, &have, e) < 0)
		return err_code(e);
	cJSON_AddStringToObject(args, "button", c->button);
	cJSON_AddNumberToObject(args, "count", c->count);
	add_mods(in, args);
	return desk_adapter_run(d, "click", args, e);
}

/* left_mouse_down / left_mouse_up: at the pointer, or first moved to a
 * `coordinate` when one is given. */
static int mouse_button(struct desk *d, const cJSON *in, int down, cJSON *args, struct err *e)
{
	int have;
	if (coord(in, "coordinate", args, &have, e) < 0)
		return err_code(e);
	return desk_adapter_run(d, down ? "mouse_down" : "mouse_up", args, e);
}

/* left_click_drag: from `start_coordinate` (computer_20250124), or from
 * where the pointer is (computer_20241022), to `coordinate`. */
static int drag(struct desk *d, const cJSON *in, cJSON *args, struct err *e)
{
	cJSON *from = obj(), *to = obj();
	cJSON *path = cJSON_AddArrayToObject(args, "path");
	cJSON_AddItemToArray(path, from);
	cJSON_AddItemToArray(path, to);
	int hf, ht;
	if (coord(in, "start_coordinate", from, &hf, e) < 0 ||
	    coord(in, "coordinate", to, &ht, e) < 0)
		return err_code(e);
	if (!ht)
		return err_set(e, ERR_INVALID, EINVAL,
			       "coordinate is required for left_click_drag");
	if (!hf) {
		cJSON *cur = obj();
		int r = cur ? desk_action(d, "cursor", cur, cur, e) : -ENOMEM;
		if (r == 0) {
			cJSON_AddNumberToObject(from, "x",
						cJSON_GetObjectItem(cur, "x")->valuedouble);
			cJSON_AddNumberToObject(from, "y",
						cJSON_GetObjectItem(cur, "y")->valuedouble);
		}
		cJSON_Delete(cur);
		if (r < 0)
			return r == -ENOMEM ? err_set(e, ERR_INTERNAL, ENOMEM, "out of memory") : r;
	}
	add_mods(in, args);
	return desk_adapter_run(d, "drag", args, e);
}

/* key, type and hold_key: `text` holds the keys or the text. */
static int keys(struct desk *d, const cJSON *in, const char *act, cJSON *args, struct err *e)
{
	const cJSON *text = cJSON_GetObjectItemCaseSensitive(in, "text");
	if (!cJSON_IsString(text))
		return err_set(e, ERR_INVALID, EINVAL, "text is required for %s", act);
	if (strcmp(act, "type") == 0) {
		cJSON_AddStringToObject(args, "text", text->valuestring);
		return desk_adapter_run(d, "type_text", args, e);
	}
	cJSON_AddStringToObject(args, "keys", text->valuestring);
	if (strcmp(act, "key") == 0)
		return desk_adapter_run(d, "key", args, e);
	int64_t ms;
	if (duration_ms(in, &ms, e) < 0)
		return err_code(e);
	cJSON_AddNumberToObject(args, "duration_ms", (double)ms);
	return desk_adapter_run(d, "hold_key", args, e);
}

static int scroll(struct desk *d, const cJSON *in, cJSON *args, struct err *e)
{
	static const char *const dirs[] = {"up", "down", "left", "right", NULL};
	int have, dir;
	int64_t amount;
	if (coord(in, "coordinate", args, &have, e) < 0 ||
	    args_enum(in, "scroll_direction", dirs, 0, ARGS_REQUIRED, &dir, e) < 0 ||
	    args_int(in, "scroll_amount", 0, INPUT_SCROLL_MAX, 3, 0, &amount, e) < 0)
		return err_code(e);
	cJSON_AddStringToObject(args, "direction", dirs[dir]);
	cJSON_AddNumberToObject(args, "amount", (double)amount);
	add_mods(in, args);
	return desk_adapter_run(d, "scroll", args, e);
}

/* cursor_position answers with text, "X=10,Y=20", not a screenshot. */
static int cursor_position(struct desk *d, cJSON *content, struct err *e)
{
	cJSON *cur = obj();
	int r = cur ? desk_action(d, "cursor", cur, cur, e)
		    : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r == 0) {
		char buf[64];
		snprintf(buf, sizeof(buf), "X=%d,Y=%d",
			 (int)cJSON_GetObjectItem(cur, "x")->valuedouble,
			 (int)cJSON_GetObjectItem(cur, "y")->valuedouble);
		cJSON *t = obj();
		cJSON_AddStringToObject(t, "type", "text");
		cJSON_AddStringToObject(t, "text", buf);
		cJSON_AddItemToArray(content, t);
	}
	cJSON_Delete(cur);
	return r;
}

/* zoom's `region`: [x1, y1, x2, y2] inside the agent display. */
static int zoom_region(const struct desk *d, const cJSON *in, int64_t *region, struct err *e)
{
	const cJSON *rg = cJSON_GetObjectItemCaseSensitive(in, "region");
	int ok = cJSON_IsArray(rg) && cJSON_GetArraySize(rg) == 4;
	for (int i = 0; ok && i < 4; i++) {
		const cJSON *v = cJSON_GetArrayItem(rg, i);
		ok = cJSON_IsNumber(v) && v->valuedouble >= 0 &&
		     v->valuedouble <= (i % 2 ? d->ah : d->aw);
		if (ok)
			region[i] = (int64_t)v->valuedouble;
	}
	if (!ok || region[2] <= region[0] || region[3] <= region[1])
		return err_set(e, ERR_INVALID, EINVAL,
			       "region must be [x1, y1, x2, y2] with x1 < x2 <= %u, y1 < y2 <= %u",
			       d->aw, d->ah);
	return 0;
}

static const struct anthropic_click *find_click(const char *act)
{
	for (size_t i = 0; i < sizeof(anthropic_clicks) / sizeof(anthropic_clicks[0]); i++)
		if (strcmp(act, anthropic_clicks[i].name) == 0)
			return &anthropic_clicks[i];
	return NULL;
}

/* Runs one of the actions that send input; `args` is scratch space. */
static int input_action(struct desk *d, const cJSON *in, const char *act, cJSON *args,
			struct err *e)
{
	const struct anthropic_click *c = find_click(act);
	if (c)
		return click(d, in, c, args, e);
	if (strcmp(act, "mouse_move") == 0)
		return need_coord(in, args, act, e) < 0 ? err_code(e)
							: desk_adapter_run(d, "move", args, e);
	if (strcmp(act, "left_mouse_down") == 0 || strcmp(act, "left_mouse_up") == 0)
		return mouse_button(d, in, strcmp(act, "left_mouse_down") == 0, args, e);
	if (strcmp(act, "left_click_drag") == 0)
		return drag(d, in, args, e);
	if (strcmp(act, "key") == 0 || strcmp(act, "type") == 0 || strcmp(act, "hold_key") == 0)
		return keys(d, in, act, args, e);
	if (strcmp(act, "scroll") == 0)
		return scroll(d, in, args, e);
	if (strcmp(act, "wait") == 0) {
		int64_t ms;
		if (duration_ms(in, &ms, e) < 0)
			return err_code(e);
		cJSON_AddNumberToObject(args, "ms", (double)ms);
		return desk_adapter_run(d, "wait", args, e);
	}
	return err_set(e, ERR_INVALID, EINVAL, "invalid action: %.*s", UTF8_CUT(act, 64));
}

/* A tool_use block names its tool: only "computer" is run here ("bash" is
 * taken by the API layer before); another name is refused rather than run
 * as the computer tool. */
static int tool_name(const cJSON *block, struct err *e)
{
	const cJSON *name = block ? cJSON_GetObjectItemCaseSensitive(block, "name") : NULL;
	if (!name || cJSON_IsNull(name))
		return 0;
	if (!cJSON_IsString(name))
		return err_set(e, ERR_INVALID, EINVAL, "field 'name' must be a tool name");
	if (strcmp(name->valuestring, "computer") != 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "unknown tool '%.*s': this adapter runs the 'computer', 'bash' and "
			       "'str_replace_based_edit_tool' tools",
			       UTF8_CUT(name->valuestring, 64));
	return 0;
}

/* Runs `act`.  *shot: 0 for no screenshot (cursor_position), 1 after
 * settling, 2 at once (screenshot, zoom); *zoom with `region` filled. */
static int action(struct desk *d, const cJSON *in, const char *act, cJSON *content, int *shot,
		  int64_t *region, int *zoom, struct err *e)
{
	*shot = 1;
	if (strcmp(act, "screenshot") == 0 || strcmp(act, "zoom") == 0) {
		*shot = 2;
		*zoom = act[0] == 'z';
		return *zoom ? zoom_region(d, in, region, e) : 0;
	}
	if (strcmp(act, "cursor_position") == 0) {
		*shot = 0;
		return cursor_position(d, content, e);
	}
	cJSON *args = obj();
	int r = args ? input_action(d, in, act, args, e)
		     : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_Delete(args);
	return r;
}

/* The image block of a tool_result's content. */
static int add_image(struct desk *d, cJSON *content, const int64_t *region, struct desk_tool *t,
		     struct err *e)
{
	char *b64;
	if (desk_adapter_shot(d, region, &b64, &t->frame, e) < 0)
		return err_code(e);
	cJSON *img = obj();
	cJSON_AddItemToArray(content, img);
	cJSON_AddStringToObject(img, "type", "image");
	cJSON *src = cJSON_AddObjectToObject(img, "source");
	cJSON_AddStringToObject(src, "type", "base64");
	cJSON_AddStringToObject(src, "media_type", "image/png");
	cJSON_AddStringToObject(src, "data", b64);
	free(b64);
	return 0;
}

/* The members of the tool's input schema (computer_20250124; `region`
 * from computer_20251124; `key` as the reference implementation reads
 * modifiers) and of a tool_use block around it.  Anything else is refused,
 * naming it, as the tool_result's error: an input deskbox would partly
 * ignore is not acted on. */
static const char *const input_fields[] = {
    "action",	"coordinate",	    "start_coordinate", "text",	  "key",
    "duration", "scroll_direction", "scroll_amount",	"region", NULL};
static const char *const block_fields[] = {"type", "id", "name", "input", "cache_control", NULL};
/* What every desktop body may carry at its top (api_desktop.c reads it). */
static const char *const body_fields[] = {"agent_display", "sensitive", NULL};

int desk_anthropic(struct desk *d, const cJSON *in, cJSON *out, struct desk_tool *t, struct err *e)
{
	memset(t, 0, sizeof(*t));
	/* Verbatim tool input, or a whole tool_use block around it. */
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(in, "id");
	const cJSON *inner = cJSON_GetObjectItemCaseSensitive(in, "input");
	const cJSON *block = NULL;
	if (cJSON_IsObject(inner)) {
		block = in;
		in = inner;
	}
	cJSON_AddStringToObject(out, "type", "tool_result");
	if (cJSON_IsString(id))
		cJSON_AddStringToObject(out, "tool_use_id", id->valuestring);
	cJSON *content = cJSON_AddArrayToObject(out, "content");
	const char *act;
	int shot = 1, zoom = 0, r;
	int64_t region[4];
	const char *const *top = block ? NULL : body_fields;
	r = tool_name(block, e);
	r = r ?: args_only2(block, NULL, block_fields, body_fields, e);
	r = r ?: args_only2(in, block ? "input" : NULL, input_fields, top, e);
	r = r ?: args_string(in, "action", 64, ARGS_REQUIRED, &act, e);
	if (r == 0)
		r = action(d, in, act, content, &shot, region, &zoom, e);
	if (r == 0 && shot == 1)
		r = desk_adapter_settle(d, e);
	if (r == 0 && shot)
		r = add_image(d, content, zoom ? region : NULL, t, e);
	if (r == 0)
		return 0;
	/* The action failed: a result the model reads, not an HTTP error. */
	t->failed = 1;
	cJSON_DeleteItemFromObject(out, "content");
	content = cJSON_AddArrayToObject(out, "content");
	cJSON *txt = obj();
	cJSON_AddItemToArray(content, txt);
	cJSON_AddStringToObject(txt, "type", "text");
	snprintf(t->error, sizeof(t->error), "%s", e->msg[0] ? e->msg : "the action failed");
	cJSON_AddStringToObject(txt, "text", t->error);
	cJSON_AddBoolToObject(out, "is_error", 1);
	err_clear(e);
	return 0;
}
