/* Gemini's computer-use tool: one function call taken verbatim and answered
 * with the FunctionResponse the reference loop sends back.
 *
 * Sources: google-gemini/computer-use-preview, agent.py (the predefined
 * functions open_web_browser, click_at, hover_at, type_text_at,
 * scroll_document, scroll_at, wait_5_seconds, go_back, go_forward, search,
 * navigate, key_combination, drag_and_drop; coordinates normalized to
 * 0-999 and scaled by x / 1000 * width; scroll_at's magnitude, default 800,
 * normalized along its axis; the FunctionResponse {name, response: {url},
 * parts: [{inline_data: {mime_type: "image/png", data}}]}) and
 * computers/playwright/playwright.py (what each function does: type_text_at
 * clicks, clears with ctrl+a Delete unless clear_before_typing is false,
 * types, presses Enter when press_enter; scroll_document up/down is
 * PageUp/PageDown; key_combination's "control+c" names).  Docs:
 * docs/actions.md.
 *
 * The call is a FunctionCall {name, args, id?} or a Part around it
 * ({"function_call": ...} or {"functionCall": ...}).  A failed action is a
 * FunctionResponse too, its response {"error": reason}, as function results
 * carry errors; the reason is also in desk_tool.error. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/args.h"
#include "common/text.h"
#include "desktop.h"
#include "internal.h"

/* The reference's search_engine_url. */
#define GEMINI_SEARCH_URL "https://www.google.com"
#define GEMINI_SCALE	  1000
#define GEMINI_MAGNITUDE  800
/* scroll_at's pixels to wheel clicks, as for OpenAI's scroll_x/scroll_y. */
#define PX_PER_CLICK 100
#define WAIT_5_MS    5000

/* A normalized coordinate (0-999; 1000 is taken as the last pixel) to the
 * agent's space along an axis `size` pixels long: x / 1000 * size, as the
 * reference computes it. */
static int norm(const cJSON *args, const char *name, uint32_t size, int64_t *out, struct err *e)
{
	int64_t v;
	if (args_int(args, name, 0, GEMINI_SCALE, 0, ARGS_REQUIRED, &v, e) < 0)
		return err_code(e);
	*out = v * (int64_t)size / GEMINI_SCALE;
	if (*out >= (int64_t)size)
		*out = (int64_t)size - 1;
	return 0;
}

static int xy(struct desk *d, const cJSON *args, const char *xn, const char *yn, int64_t *x,
	      int64_t *y, struct err *e)
{
	if (norm(args, xn, d->aw, x, e) < 0 || norm(args, yn, d->ah, y, e) < 0)
		return err_code(e);
	return 0;
}

/* Runs a deskbox action with arguments built from a small template. */
static int run_xy(struct desk *d, const char *name, int64_t x, int64_t y, struct err *e)
{
	cJSON *a = cJSON_CreateObject();
	if (!a)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_AddNumberToObject(a, "x", (double)x);
	cJSON_AddNumberToObject(a, "y", (double)y);
	int r = desk_adapter_run(d, name, a, e);
	cJSON_Delete(a);
	return r;
}

static int run_str(struct desk *d, const char *name, const char *field, const char *v,
		   struct err *e)
{
	cJSON *a = cJSON_CreateObject();
	if (!a)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_AddStringToObject(a, field, v);
	int r = desk_adapter_run(d, name, a, e);
	cJSON_Delete(a);
	return r;
}

/* One key of key_combination as deskbox names it: the reference's names
 * (Playwright's key map: "control", "command" is Meta, the Windows key,
 * numpad "add" ...) and otherwise the name itself. */
static const char *key_name(const char *k)
{
	static const struct {
		const char *from, *to;
	} map[] = {
	    {"control", "ctrl"},	   {"command", "super"},	{"meta", "super"},
	    {"equals", "equal"},	   {"multiply", "KP_Multiply"}, {"add", "KP_Add"},
	    {"separator", "KP_Separator"}, {"subtract", "KP_Subtract"}, {"decimal", "KP_Decimal"},
	    {"divide", "KP_Divide"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcasecmp(k, map[i].from) == 0)
			return map[i].to;
	return k;
}

static int key_combination(struct desk *d, const cJSON *args, struct err *e)
{
	const char *keys;
	if (args_string(args, "keys", 512, ARGS_REQUIRED, &keys, e) < 0)
		return err_code(e);
	char combo[1024], one[2], part[80];
	size_t n = 0;
	combo[0] = '\0';
	for (const char *p = keys; *p;) {
		size_t len = strcspn(p, "+");
		if (len == 0 || len >= sizeof(part))
			return err_set(e, ERR_INVALID, EINVAL, "field 'keys': bad key in '%.*s'",
				       UTF8_CUT(keys, 64));
		memcpy(part, p, len);
		part[len] = '\0';
		const char *k = key_name(part);
		if (len == 1 && isupper((unsigned char)part[0])) {
			/* "control+C" is the C key, as Playwright presses it. */
			one[0] = (char)tolower((unsigned char)part[0]);
			one[1] = '\0';
			k = one;
		}
		n += (size_t)snprintf(combo + n, sizeof(combo) - n, "%s%s", n ? "+" : "", k);
		p += len;
		if (*p == '+')
			p++;
	}
	return run_str(d, "key", "keys", combo, e);
}

static int type_text_at(struct desk *d, const cJSON *args, struct err *e)
{
	int64_t x, y;
	const char *text;
	int enter, clear;
	if (xy(d, args, "x", "y", &x, &y, e) < 0 ||
	    args_string(args, "text", 256 * 1024, ARGS_REQUIRED, &text, e) < 0 ||
	    args_bool(args, "press_enter", 0, &enter, e) < 0 ||
	    args_bool(args, "clear_before_typing", 1, &clear, e) < 0)
		return err_code(e);
	int r = run_xy(d, "click", x, y, e);
	if (r == 0 && clear)
		r = run_str(d, "key", "keys", "ctrl+a Delete", e);
	if (r == 0 && text[0])
		r = run_str(d, "type_text", "text", text, e);
	if (r == 0 && enter)
		r = run_str(d, "key", "keys", "Return", e);
	return r;
}

static int scroll(struct desk *d, int64_t x, int64_t y, int64_t dx, int64_t dy, struct err *e)
{
	cJSON *a = cJSON_CreateObject();
	if (!a)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_AddNumberToObject(a, "x", (double)x);
	cJSON_AddNumberToObject(a, "y", (double)y);
	cJSON_AddNumberToObject(a, "dx", (double)dx);
	cJSON_AddNumberToObject(a, "dy", (double)dy);
	int r = desk_adapter_run(d, "scroll", a, e);
	cJSON_Delete(a);
	return r;
}

static const char *const dirs[] = {"up", "down", "left", "right", NULL};

/* Wheel clicks for `px` pixels: at least one. */
static int64_t clicks(int64_t px)
{
	int64_t c = (px + PX_PER_CLICK / 2) / PX_PER_CLICK;
	return c < 1 ? 1 : c > INPUT_SCROLL_MAX ? INPUT_SCROLL_MAX : c;
}

static int scroll_at(struct desk *d, const cJSON *args, struct err *e)
{
	int64_t x, y, mag;
	int dir;
	if (xy(d, args, "x", "y", &x, &y, e) < 0 ||
	    args_enum(args, "direction", dirs, 0, ARGS_REQUIRED, &dir, e) < 0 ||
	    args_int(args, "magnitude", 0, GEMINI_SCALE, GEMINI_MAGNITUDE, 0, &mag, e) < 0)
		return err_code(e);
	int64_t px = mag * (int64_t)(dir < 2 ? d->ah : d->aw) / GEMINI_SCALE;
	int64_t c = clicks(px), sign = dir == 0 || dir == 2 ? -1 : 1;
	return scroll(d, x, y, dir >= 2 ? sign * c : 0, dir < 2 ? sign * c : 0, e);
}

static int scroll_document(struct desk *d, const cJSON *args, struct err *e)
{
	int dir;
	if (args_enum(args, "direction", dirs, 0, ARGS_REQUIRED, &dir, e) < 0)
		return err_code(e);
	if (dir < 2)
		return run_str(d, "key", "keys", dir == 0 ? "Page_Up" : "Page_Down", e);
	int64_t c = clicks(d->aw / 2);
	return scroll(d, d->aw / 2, d->ah / 2, dir == 2 ? -c : c, 0, e);
}

/* navigate: the address bar of the browser in front, as a person would. */
static int navigate(struct desk *d, const char *url, struct err *e)
{
	if (strlen(url) > 8192 || !url[0])
		return err_set(e, ERR_INVALID, EINVAL, "field 'url' must be 1-8192 bytes");
	int r = run_str(d, "key", "keys", "ctrl+l", e);
	size_t n = strlen(url) + 2;
	char *line = malloc(n);
	if (!line)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	snprintf(line, n, "%s\n", url);
	if (r == 0)
		r = run_str(d, "type_text", "text", line, e);
	free(line);
	return r;
}

static int drag_and_drop(struct desk *d, const cJSON *args, struct err *e)
{
	int64_t x, y, tx, ty;
	if (xy(d, args, "x", "y", &x, &y, e) < 0 ||
	    xy(d, args, "destination_x", "destination_y", &tx, &ty, e) < 0)
		return err_code(e);
	cJSON *a = cJSON_CreateObject(), *path = cJSON_CreateArray();
	int64_t pts[2][2] = {{x, y}, {tx, ty}};
	for (int i = 0; path && i < 2; i++) {
		cJSON *pt = cJSON_CreateArray();
		cJSON_AddItemToArray(pt, cJSON_CreateNumber((double)pts[i][0]));
		cJSON_AddItemToArray(pt, cJSON_CreateNumber((double)pts[i][1]));
		cJSON_AddItemToArray(path, pt);
	}
	int r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (a && path) {
		cJSON_AddItemToObject(a, "path", path);
		path = NULL;
		r = desk_adapter_run(d, "drag", a, e);
	}
	cJSON_Delete(path);
	cJSON_Delete(a);
	return r;
}

/* The functions without coordinates. */
static int browser_fn(struct desk *d, const char *fn, const cJSON *args, struct err *e)
{
	if (strcmp(fn, "open_web_browser") == 0)
		return run_str(d, "browser", "url", "about:blank", e);
	if (strcmp(fn, "go_back") == 0)
		return run_str(d, "key", "keys", "alt+Left", e);
	if (strcmp(fn, "go_forward") == 0)
		return run_str(d, "key", "keys", "alt+Right", e);
	if (strcmp(fn, "search") == 0)
		return navigate(d, GEMINI_SEARCH_URL, e);
	const char *url;
	if (args_string(args, "url", 8192, ARGS_REQUIRED, &url, e) < 0)
		return err_code(e);
	return navigate(d, url, e);
}

static int function(struct desk *d, const char *fn, const cJSON *args, struct err *e)
{
	int64_t x, y;
	if (strcmp(fn, "click_at") == 0 || strcmp(fn, "hover_at") == 0) {
		if (xy(d, args, "x", "y", &x, &y, e) < 0)
			return err_code(e);
		return run_xy(d, fn[0] == 'c' ? "click" : "move", x, y, e);
	}
	if (strcmp(fn, "type_text_at") == 0)
		return type_text_at(d, args, e);
	if (strcmp(fn, "key_combination") == 0)
		return key_combination(d, args, e);
	if (strcmp(fn, "scroll_at") == 0)
		return scroll_at(d, args, e);
	if (strcmp(fn, "scroll_document") == 0)
		return scroll_document(d, args, e);
	if (strcmp(fn, "drag_and_drop") == 0)
		return drag_and_drop(d, args, e);
	if (strcmp(fn, "wait_5_seconds") == 0) {
		cJSON *a = cJSON_CreateObject();
		cJSON_AddNumberToObject(a, "ms", WAIT_5_MS);
		int r = a ? desk_adapter_run(d, "wait", a, e)
			  : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		cJSON_Delete(a);
		return r;
	}
	static const char *const browser[] = {"open_web_browser", "go_back", "go_forward", "search",
					      "navigate"};
	for (size_t i = 0; i < sizeof(browser) / sizeof(browser[0]); i++)
		if (strcmp(fn, browser[i]) == 0)
			return browser_fn(d, fn, args, e);
	return err_set(e, ERR_INVALID, EINVAL, "unknown computer-use function '%.*s'",
		       UTF8_CUT(fn, 64));
}

/* The FunctionCall inside `in`: itself, or a Part's function_call. */
static const cJSON *the_call(const cJSON *in)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(in, "function_call");
	if (!cJSON_IsObject(c))
		c = cJSON_GetObjectItemCaseSensitive(in, "functionCall");
	return cJSON_IsObject(c) ? c : in;
}

/* The members a FunctionCall, and a Part around one, may have (Google's
 * types); anything else is refused, naming it, before the call runs. */
static int check_call(const cJSON *in, const cJSON *call, struct err *e)
{
	static const char *const call_fields[] = {"name", "args", "id", NULL};
	static const char *const part_fields[] = {"function_call", "functionCall",
						  "thought_signature", "thoughtSignature", NULL};
	static const char *const body_fields[] = {"agent_display", "sensitive", NULL};
	if (call != in)
		return args_only2(in, NULL, part_fields, body_fields, e) ?:
			   args_only(call, cJSON_GetObjectItemCaseSensitive(in, "function_call")
					       ? "function_call"
					       : "functionCall",
				     call_fields, e);
	return args_only2(in, NULL, call_fields, body_fields, e);
}

static int run_call(struct desk *d, const cJSON *call, const char **name, struct err *e)
{
	if (!cJSON_IsObject(call))
		return err_set(e, ERR_INVALID, EINVAL, "a function call must be an object");
	if (args_string(call, "name", 64, ARGS_REQUIRED, name, e) < 0)
		return err_code(e);
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(call, "args");
	if (args && !cJSON_IsObject(args) && !cJSON_IsNull(args))
		return err_set(e, ERR_INVALID, EINVAL, "field 'args' must be an object");
	cJSON *empty = cJSON_IsObject(args) ? NULL : cJSON_CreateObject();
	int r = function(d, *name, empty ? empty : args, e);
	cJSON_Delete(empty);
	if (r == 0 && strcmp(*name, "wait_5_seconds") != 0)
		r = desk_adapter_settle(d, e);
	return r;
}

int desk_gemini(struct desk *d, const cJSON *in, cJSON *out, struct desk_tool *t, struct err *e)
{
	memset(t, 0, sizeof(*t));
	const cJSON *call = the_call(in);
	const char *name = NULL;
	if (check_call(in, call, e) < 0 || run_call(d, call, &name, e) < 0) {
		t->failed = 1;
		snprintf(t->error, sizeof(t->error), "%s",
			 e->msg[0] ? e->msg : "the action failed");
		err_clear(e);
	}
	char *b64;
	if (desk_adapter_shot(d, NULL, &b64, &t->frame, e) < 0)
		return err_code(e);
	const cJSON *id =
	    cJSON_IsObject(call) ? cJSON_GetObjectItemCaseSensitive(call, "id") : NULL;
	if (cJSON_IsString(id))
		cJSON_AddStringToObject(out, "id", id->valuestring);
	cJSON_AddStringToObject(out, "name", name ? name : "");
	cJSON *resp = cJSON_AddObjectToObject(out, "response");
	if (t->failed)
		cJSON_AddStringToObject(resp, "error", t->error);
	cJSON *parts = cJSON_AddArrayToObject(out, "parts");
	cJSON *part = cJSON_CreateObject();
	cJSON_AddItemToArray(parts, part);
	cJSON *blob = cJSON_AddObjectToObject(part, "inline_data");
	cJSON_AddStringToObject(blob, "mime_type", "image/png");
	cJSON_AddStringToObject(blob, "data", b64);
	free(b64);
	return 0;
}
