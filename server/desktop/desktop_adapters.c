/* Compatibility adapters: Anthropic's computer-use tool input
 * (computer_20250124, plus zoom of computer_20251124) and OpenAI's
 * computer_call actions, taken verbatim, run as deskbox actions, answered
 * with what the tool result needs (a screenshot as base64). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "desktop.h"

/* Settle time before the screenshot a tool result carries: the model should
 * see the effect of its action, not the frame before it. */
#define SETTLE_QUIET_MS	  150
#define SETTLE_TIMEOUT_MS 2000
/* OpenAI scroll_x/scroll_y are pixels; one wheel click scrolls about this
 * many in common X toolkits. */
#define OPENAI_PX_PER_CLICK 100

static cJSON *obj(void)
{
	return cJSON_CreateObject();
}

/* Runs `name` with `args` (consumed). */
static int run(struct desk *d, const char *name, cJSON *args, cJSON *out, struct err *e)
{
	cJSON *res = obj();
	int r = args ? desk_action(d, name, args, res, e)
		     : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_Delete(args);
	cJSON_Delete(res);
	return r;
}

static int settle(struct desk *d, struct err *e)
{
	cJSON *w = obj(), *res = obj();
	cJSON_AddStringToObject(w, "until", "stable");
	cJSON_AddNumberToObject(w, "quiet_ms", SETTLE_QUIET_MS);
	cJSON_AddNumberToObject(w, "timeout_ms", SETTLE_TIMEOUT_MS);
	int r = desk_wait(d, w, res, e);
	cJSON_Delete(w);
	cJSON_Delete(res);
	return r;
}

/* A PNG screenshot (of `region` in agent space, scaled back to the agent
 * display's size, when given) as base64. */
static int shot_b64(struct desk *d, const int64_t *region, cJSON **b64obj, struct err *e)
{
	cJSON *o = obj();
	if (region) {
		int64_t w = region[2] - region[0], h = region[3] - region[1];
		cJSON_AddNumberToObject(o, "x", (double)region[0]);
		cJSON_AddNumberToObject(o, "y", (double)region[1]);
		cJSON_AddNumberToObject(o, "w", (double)w);
		cJSON_AddNumberToObject(o, "h", (double)h);
		/* Zoom: the region fitted into the agent display. */
		cJSON_AddNumberToObject(o, "width", d->aw);
		cJSON_AddNumberToObject(o, "height", d->ah);
	}
	struct shot_opts so;
	struct shot s;
	int r = desk_shot_parse(d, o, &so, e);
	cJSON_Delete(o);
	if (r == 0)
		r = desk_shot_take(d, &so, &s, e);
	if (r < 0)
		return r;
	*b64obj = desk_shot_json(&s);
	desk_shot_release(&s);
	return *b64obj ? 0 : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
}

/* ---- Anthropic ---- */

/* "coordinate": [x, y] into args' x, y; *have = 0 when absent. */
static int coord(const cJSON *in, const char *name, cJSON *args, int *have, struct err *e)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(in, name);
	*have = 0;
	if (!c || cJSON_IsNull(c))
		return 0;
	const cJSON *x = cJSON_GetArrayItem(c, 0), *y = cJSON_GetArrayItem(c, 1);
	if (!cJSON_IsArray(c) || cJSON_GetArraySize(c) != 2 || !cJSON_IsNumber(x) ||
	    !cJSON_IsNumber(y))
		return err_set(e, ERR_INVALID, EINVAL, "field '%s' must be [x, y]", name);
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
	return have ? 0 : err_set(e, ERR_INVALID, EINVAL, "action '%s' needs 'coordinate'", action);
}

/* `text` on click and scroll actions names modifier keys to hold. */
static void add_mods(const cJSON *in, cJSON *args)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(in, "text");
	if (cJSON_IsString(t) && t->valuestring[0])
		cJSON_AddStringToObject(args, "modifiers", t->valuestring);
}

/* The Anthropic click actions: which button, how many times. */
static const struct anthropic_click {
	const char *name, *button;
	int count;
} anthropic_clicks[] = {
    {"left_click", "left", 1},	 {"right_click", "right", 1}, {"middle_click", "middle", 1},
    {"double_click", "left", 2}, {"triple_click", "left", 3},
};

static const struct anthropic_click *anthropic_click(const char *act)
{
	for (size_t i = 0; i < sizeof(anthropic_clicks) / sizeof(anthropic_clicks[0]); i++)
		if (strcmp(act, anthropic_clicks[i].name) == 0)
			return &anthropic_clicks[i];
	return NULL;
}

/* left_click_drag: a path from `start_coordinate`, or from where the pointer
 * is, to `coordinate`. */
static int anthropic_drag_args(struct desk *d, const cJSON *in, cJSON *args, struct err *e)
{
	cJSON *from = obj(), *to = obj();
	int hf, ht;
	int r = coord(in, "start_coordinate", from, &hf, e);
	if (r == 0)
		r = coord(in, "coordinate", to, &ht, e);
	if (r == 0 && !ht)
		r = err_set(e, ERR_INVALID, EINVAL, "left_click_drag needs 'coordinate'");
	if (r == 0 && !hf) {
		/* No start: from where the pointer is. */
		cJSON *cur = obj();
		r = desk_action(d, "cursor", cur, cur, e);
		if (r == 0) {
			cJSON_AddNumberToObject(from, "x",
						cJSON_GetObjectItem(cur, "x")->valuedouble);
			cJSON_AddNumberToObject(from, "y",
						cJSON_GetObjectItem(cur, "y")->valuedouble);
		}
		cJSON_Delete(cur);
	}
	if (r < 0) {
		cJSON_Delete(from);
		cJSON_Delete(to);
		return r;
	}
	cJSON *path = cJSON_AddArrayToObject(args, "path");
	cJSON_AddItemToArray(path, from);
	cJSON_AddItemToArray(path, to);
	return 0;
}

/* key, type and hold_key: `text` holds the keys or the text to type; *name
 * is the deskbox action to run. */
static int anthropic_key_args(const cJSON *in, const char *act, cJSON *args, const char **name,
			      struct err *e)
{
	const cJSON *text = cJSON_GetObjectItemCaseSensitive(in, "text");
	if (!cJSON_IsString(text))
		return err_set(e, ERR_INVALID, EINVAL, "action '%s' needs 'text'", act);
	if (act[0] == 't') {
		cJSON_AddStringToObject(args, "text", text->valuestring);
		*name = "type_text";
		return 0;
	}
	cJSON_AddStringToObject(args, "keys", text->valuestring);
	*name = act[0] == 'k' ? "key" : "hold_key";
	if (act[0] == 'k')
		return 0;
	double dur;
	if (args_double(in, "duration", 0.001, 10, 0, ARGS_REQUIRED, &dur, e) < 0)
		return err_code(e);
	cJSON_AddNumberToObject(args, "duration_ms", (double)(int)(dur * 1000 + 0.5));
	return 0;
}

static int anthropic_scroll_args(const cJSON *in, cJSON *args, struct err *e)
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
	return 0;
}

/* cursor_position answers with text, "X=10,Y=20", not a screenshot. */
static int anthropic_cursor_position(struct desk *d, cJSON *out, struct err *e)
{
	cJSON *cur = obj();
	int r = desk_action(d, "cursor", cur, cur, e);
	if (r == 0) {
		char buf[64];
		snprintf(buf, sizeof(buf), "X=%d,Y=%d",
			 (int)cJSON_GetObjectItem(cur, "x")->valuedouble,
			 (int)cJSON_GetObjectItem(cur, "y")->valuedouble);
		cJSON_AddStringToObject(out, "output", buf);
	}
	cJSON_Delete(cur);
	return r;
}

/* zoom's `region`: [x1, y1, x2, y2] inside the agent display. */
static int anthropic_zoom_region(const struct desk *d, const cJSON *in, int64_t *region,
				 struct err *e)
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
			       "field 'region' must be [x1, y1, x2, y2] with x1 < x2 <= %u, "
			       "y1 < y2 <= %u",
			       d->aw, d->ah);
	return 0;
}

static int anthropic_action(struct desk *d, const cJSON *in, const char *act, cJSON *out,
			    int *want_shot, int64_t *region, int *zoom, struct err *e)
{
	cJSON *args = obj();
	const struct anthropic_click *click = anthropic_click(act);
	const char *name;
	int have;
	if (click) {
		if (coord(in, "coordinate", args, &have, e) < 0)
			goto fail;
		cJSON_AddStringToObject(args, "button", click->button);
		cJSON_AddNumberToObject(args, "count", click->count);
		add_mods(in, args);
		return run(d, "click", args, out, e);
	}
	if (strcmp(act, "mouse_move") == 0) {
		if (need_coord(in, args, act, e) < 0)
			goto fail;
		return run(d, "move", args, out, e);
	}
	if (strcmp(act, "left_mouse_down") == 0 || strcmp(act, "left_mouse_up") == 0) {
		if (coord(in, "coordinate", args, &have, e) < 0)
			goto fail;
		return run(d, act[10] == 'd' ? "mouse_down" : "mouse_up", args, out, e);
	}
	if (strcmp(act, "left_click_drag") == 0) {
		if (anthropic_drag_args(d, in, args, e) < 0)
			goto fail;
		return run(d, "drag", args, out, e);
	}
	if (strcmp(act, "key") == 0 || strcmp(act, "type") == 0 || strcmp(act, "hold_key") == 0) {
		if (anthropic_key_args(in, act, args, &name, e) < 0)
			goto fail;
		return run(d, name, args, out, e);
	}
	if (strcmp(act, "scroll") == 0) {
		if (anthropic_scroll_args(in, args, e) < 0)
			goto fail;
		return run(d, "scroll", args, out, e);
	}
	if (strcmp(act, "wait") == 0) {
		double dur;
		if (args_double(in, "duration", 0, 60, 1, 0, &dur, e) < 0)
			goto fail;
		cJSON_AddNumberToObject(args, "ms", (double)(int)(dur * 1000 + 0.5));
		return run(d, "wait", args, out, e);
	}
	if (strcmp(act, "cursor_position") == 0) {
		cJSON_Delete(args);
		*want_shot = 0;
		return anthropic_cursor_position(d, out, e);
	}
	if (strcmp(act, "screenshot") == 0) {
		cJSON_Delete(args);
		return 0;
	}
	if (strcmp(act, "zoom") == 0) {
		if (anthropic_zoom_region(d, in, region, e) < 0)
			goto fail;
		*zoom = 1;
		cJSON_Delete(args);
		return 0;
	}
	err_set(e, ERR_INVALID, EINVAL, "unknown computer-use action '%.64s'", act);
fail:
	cJSON_Delete(args);
	return err_code(e);
}

int desk_anthropic(struct desk *d, const cJSON *in, cJSON *out, struct err *e)
{
	/* Verbatim tool input, or a whole tool_use block around it. */
	const cJSON *inner = cJSON_GetObjectItemCaseSensitive(in, "input");
	if (cJSON_IsObject(inner))
		in = inner;
	const char *act;
	if (args_string(in, "action", 64, ARGS_REQUIRED, &act, e) < 0)
		return err_code(e);
	int want_shot = 1, zoom = 0;
	int64_t region[4];
	if (anthropic_action(d, in, act, out, &want_shot, region, &zoom, e) < 0)
		return err_wrap(e, "%s", act);
	if (!want_shot)
		return 0;
	if (strcmp(act, "screenshot") != 0 && strcmp(act, "zoom") != 0 && settle(d, e) < 0)
		return err_code(e);
	cJSON *s;
	if (shot_b64(d, zoom ? region : NULL, &s, e) < 0)
		return err_code(e);
	const cJSON *data = cJSON_GetObjectItem(s, "data");
	cJSON_AddStringToObject(out, "base64_image", data->valuestring);
	/* Ready to use as a tool_result's content. */
	cJSON *content = cJSON_AddArrayToObject(out, "content");
	cJSON *img = obj();
	cJSON_AddItemToArray(content, img);
	cJSON_AddStringToObject(img, "type", "image");
	cJSON *src = cJSON_AddObjectToObject(img, "source");
	cJSON_AddStringToObject(src, "type", "base64");
	cJSON_AddStringToObject(src, "media_type", "image/png");
	cJSON_AddStringToObject(src, "data", data->valuestring);
	cJSON_AddNumberToObject(out, "frame", cJSON_GetObjectItem(s, "frame")->valuedouble);
	cJSON_Delete(s);
	return 0;
}

/* ---- OpenAI ---- */

static int xy_args(const cJSON *in, cJSON *args, struct err *e)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(in, "x");
	const cJSON *y = cJSON_GetObjectItemCaseSensitive(in, "y");
	if (!cJSON_IsNumber(x) || !cJSON_IsNumber(y))
		return err_set(e, ERR_INVALID, EINVAL, "fields 'x' and 'y' must be numbers");
	cJSON_AddNumberToObject(args, "x", x->valuedouble);
	cJSON_AddNumberToObject(args, "y", y->valuedouble);
	return 0;
}

static int px_to_clicks(double px)
{
	if (px == 0)
		return 0;
	double c = px / OPENAI_PX_PER_CLICK;
	int n = (int)(c < 0 ? c - 0.5 : c + 0.5);
	if (n == 0)
		n = px < 0 ? -1 : 1;
	if (n > INPUT_SCROLL_MAX)
		n = INPUT_SCROLL_MAX;
	if (n < -INPUT_SCROLL_MAX)
		n = -INPUT_SCROLL_MAX;
	return n;
}

/* keypress's `keys`, ["CTRL", "A"], as one combination, "CTRL+a".  A single
 * letter means the key, not the capital (which x11vnc would type with
 * shift). */
static int openai_key_combo(const cJSON *in, char *combo, size_t size, struct err *e)
{
	const cJSON *keys = cJSON_GetObjectItemCaseSensitive(in, "keys");
	size_t n = 0;
	const cJSON *k;
	int bad = !cJSON_IsArray(keys) || cJSON_GetArraySize(keys) == 0;
	const cJSON *list = bad ? NULL : keys;
	combo[0] = '\0';
	cJSON_ArrayForEach(k, list)
	{
		if (!cJSON_IsString(k) || !k->valuestring[0] || strlen(k->valuestring) > 64 ||
		    n + strlen(k->valuestring) + 2 > size) {
			bad = 1;
			break;
		}
		const char *name = k->valuestring;
		char one[2] = {0};
		if (name[1] == '\0' && isalpha((unsigned char)name[0])) {
			one[0] = (char)tolower((unsigned char)name[0]);
			name = one;
		} else if (strcmp(name, "+") == 0) {
			name = "plus";
		}
		n += (size_t)snprintf(combo + n, size - n, "%s%s", n ? "+" : "", name);
	}
	if (bad)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'keys' must be a non-empty array of key names");
	return 0;
}

static int openai_action(struct desk *d, const cJSON *in, const char *type, cJSON *out,
			 struct err *e)
{
	cJSON *args = obj();
	if (strcmp(type, "click") == 0 || strcmp(type, "double_click") == 0 ||
	    strcmp(type, "move") == 0) {
		if (xy_args(in, args, e) < 0)
			goto fail;
		if (type[0] == 'm')
			return run(d, "move", args, out, e);
		const char *b;
		if (args_string(in, "button", 16, 0, &b, e) < 0)
			goto fail;
		cJSON_AddStringToObject(args, "button", b ? b : "left");
		cJSON_AddNumberToObject(args, "count", type[0] == 'd' ? 2 : 1);
		return run(d, "click", args, out, e);
	}
	if (strcmp(type, "drag") == 0) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(in, "path");
		cJSON_AddItemToObject(args, "path", cJSON_Duplicate(p, 1));
		return run(d, "drag", args, out, e);
	}
	if (strcmp(type, "scroll") == 0) {
		double sx, sy;
		if (xy_args(in, args, e) < 0 ||
		    args_double(in, "scroll_x", -1e6, 1e6, 0, 0, &sx, e) < 0 ||
		    args_double(in, "scroll_y", -1e6, 1e6, 0, 0, &sy, e) < 0)
			goto fail;
		cJSON_AddNumberToObject(args, "dx", px_to_clicks(sx));
		cJSON_AddNumberToObject(args, "dy", px_to_clicks(sy));
		return run(d, "scroll", args, out, e);
	}
	if (strcmp(type, "keypress") == 0) {
		char combo[512];
		if (openai_key_combo(in, combo, sizeof(combo), e) < 0)
			goto fail;
		cJSON_AddStringToObject(args, "keys", combo);
		return run(d, "key", args, out, e);
	}
	if (strcmp(type, "type") == 0) {
		const char *t;
		if (args_string(in, "text", 256 * 1024, ARGS_REQUIRED, &t, e) < 0)
			goto fail;
		cJSON_AddStringToObject(args, "text", t);
		return run(d, "type_text", args, out, e);
	}
	if (strcmp(type, "wait") == 0) {
		/* OpenAI's wait has no duration; its sample apps sleep ~1-2 s.
		 * Waiting for the screen to settle serves the same purpose. */
		cJSON_AddStringToObject(args, "until", "stable");
		cJSON_AddNumberToObject(args, "quiet_ms", 500);
		cJSON_AddNumberToObject(args, "timeout_ms", 2000);
		return run(d, "wait", args, out, e);
	}
	if (strcmp(type, "screenshot") == 0) {
		cJSON_Delete(args);
		return 0;
	}
	err_set(e, ERR_INVALID, EINVAL, "unknown computer_call action type '%.64s'", type);
fail:
	cJSON_Delete(args);
	return err_code(e);
}

int desk_openai(struct desk *d, const cJSON *in, cJSON *out, struct err *e)
{
	/* The action object, or the whole computer_call output item. */
	const cJSON *call_id = cJSON_GetObjectItemCaseSensitive(in, "call_id");
	const cJSON *action = cJSON_GetObjectItemCaseSensitive(in, "action");
	if (cJSON_IsObject(action))
		in = action;
	const char *type;
	if (args_string(in, "type", 64, ARGS_REQUIRED, &type, e) < 0)
		return err_code(e);
	if (openai_action(d, in, type, out, e) < 0)
		return err_wrap(e, "%s", type);
	if (strcmp(type, "screenshot") != 0 && strcmp(type, "wait") != 0 && settle(d, e) < 0)
		return err_code(e);
	cJSON *s;
	if (shot_b64(d, NULL, &s, e) < 0)
		return err_code(e);
	const cJSON *data = cJSON_GetObjectItem(s, "data");
	size_t n = strlen(data->valuestring) + 32;
	char *url = malloc(n);
	if (!url) {
		cJSON_Delete(s);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	snprintf(url, n, "data:image/png;base64,%s", data->valuestring);
	/* Ready to append to the next request's input. */
	cJSON_AddStringToObject(out, "type", "computer_call_output");
	if (cJSON_IsString(call_id))
		cJSON_AddStringToObject(out, "call_id", call_id->valuestring);
	cJSON *o = cJSON_AddObjectToObject(out, "output");
	cJSON_AddStringToObject(o, "type", "computer_screenshot");
	cJSON_AddStringToObject(o, "image_url", url);
	cJSON_AddNumberToObject(out, "frame", cJSON_GetObjectItem(s, "frame")->valuedouble);
	free(url);
	cJSON_Delete(s);
	return 0;
}
