/* OpenAI's computer-use tool: a computer_call's `action`, or its batched
 * `actions`, taken verbatim and answered with a computer_call_output item.
 *
 * Source: the response types in openai/openai-python,
 * src/openai/types/responses/response_computer_tool_call.py (actions
 * click with button left|right|wheel|back|forward, double_click, drag along
 * `path`, keypress, move, screenshot, scroll with scroll_x/scroll_y, type,
 * wait; `keys` held during click, double_click, drag, move and scroll; the
 * call's `action` or its flattened `actions` list) and
 * response_input_item_param.py (ComputerCallOutput: type, call_id, output
 * {type: computer_screenshot, image_url}, optional status).  Docs:
 * docs/actions.md.
 *
 * The output item has no text field, so a failed action is answered with
 * the item (a screenshot of the screen as it is, "status":"incomplete") and
 * the reason in desk_tool.error, which the API sends as a header and, when
 * the client asks for the items to append (?items=true), as a user message
 * with the reason as input_text after the item (desk_openai_reason_item),
 * the way OpenAI's computer-use sample loop extends its input with the list
 * of items its handler returns. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/text.h"
#include "common/args.h"
#include "desktop.h"
#include "internal.h"

/* scroll_x/scroll_y are pixels; one wheel click scrolls about this many in
 * common X toolkits. */
#define OPENAI_PX_PER_CLICK 100
/* Actions one computer_call may batch. */
#define OPENAI_MAX_ACTIONS 64

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

/* One key name of a `keys` list as deskbox names it: a single letter is the
 * key, not the capital (which would be typed with shift); "+" is "plus". */
static const char *key_name(const char *name, char *one)
{
	if (name[0] && name[1] == '\0' && isalpha((unsigned char)name[0])) {
		one[0] = (char)tolower((unsigned char)name[0]);
		one[1] = '\0';
		return one;
	}
	/* OpenAI's META is the Windows/Command key, which X calls Super
	 * (deskbox's "meta" is xdotool's Meta). */
	if (strcasecmp(name, "meta") == 0)
		return "super";
	return strcmp(name, "+") == 0 ? "plus" : name;
}

/* `keys` held during a pointer action, as the action's "modifiers". */
static int held_keys(const cJSON *in, cJSON *args, struct err *e)
{
	const cJSON *keys = cJSON_GetObjectItemCaseSensitive(in, "keys");
	if (!keys || cJSON_IsNull(keys))
		return 0;
	if (!cJSON_IsArray(keys))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'keys' must be an array of key names");
	cJSON *mods = cJSON_AddArrayToObject(args, "modifiers");
	const cJSON *k;
	cJSON_ArrayForEach(k, keys)
	{
		if (!cJSON_IsString(k) || !k->valuestring[0] || strlen(k->valuestring) > 64)
			return err_set(e, ERR_INVALID, EINVAL, "field 'keys' must hold key names");
		char one[2];
		cJSON_AddItemToArray(mods, cJSON_CreateString(key_name(k->valuestring, one)));
	}
	return 0;
}

/* keypress's `keys`, ["CTRL", "A"], as one combination, "CTRL+a". */
static int key_combo(const cJSON *in, char *combo, size_t size, struct err *e)
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
		    n + strlen(k->valuestring) + 6 > size) {
			bad = 1;
			break;
		}
		char one[2];
		n += (size_t)snprintf(combo + n, size - n, "%s%s", n ? "+" : "",
				      key_name(k->valuestring, one));
	}
	if (bad)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'keys' must be a non-empty array of key names");
	return 0;
}

/* click, double_click and move. */
static int pointer(struct desk *d, const cJSON *in, const char *type, cJSON *args, struct err *e)
{
	if (xy_args(in, args, e) < 0 || held_keys(in, args, e) < 0)
		return err_code(e);
	if (strcmp(type, "move") == 0)
		return desk_adapter_run(d, "move", args, e);
	const char *b = "left";
	if (strcmp(type, "click") == 0 && args_string(in, "button", 16, 0, &b, e) < 0)
		return err_code(e);
	cJSON_AddStringToObject(args, "button", b ? b : "left");
	cJSON_AddNumberToObject(args, "count", type[0] == 'd' ? 2 : 1);
	return desk_adapter_run(d, "click", args, e);
}

static int scroll(struct desk *d, const cJSON *in, cJSON *args, struct err *e)
{
	double sx, sy;
	if (xy_args(in, args, e) < 0 || held_keys(in, args, e) < 0 ||
	    args_double(in, "scroll_x", -1e6, 1e6, 0, 0, &sx, e) < 0 ||
	    args_double(in, "scroll_y", -1e6, 1e6, 0, 0, &sy, e) < 0)
		return err_code(e);
	cJSON_AddNumberToObject(args, "dx", px_to_clicks(sx));
	cJSON_AddNumberToObject(args, "dy", px_to_clicks(sy));
	return desk_adapter_run(d, "scroll", args, e);
}

static int one_action(struct desk *d, const cJSON *in, const char *type, cJSON *args, struct err *e)
{
	if (strcmp(type, "click") == 0 || strcmp(type, "double_click") == 0 ||
	    strcmp(type, "move") == 0)
		return pointer(d, in, type, args, e);
	if (strcmp(type, "drag") == 0) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(in, "path");
		cJSON_AddItemToObject(args, "path", cJSON_Duplicate(p, 1));
		return held_keys(in, args, e) < 0 ? err_code(e)
						  : desk_adapter_run(d, "drag", args, e);
	}
	if (strcmp(type, "scroll") == 0)
		return scroll(d, in, args, e);
	if (strcmp(type, "keypress") == 0) {
		char combo[512];
		if (key_combo(in, combo, sizeof(combo), e) < 0)
			return err_code(e);
		cJSON_AddStringToObject(args, "keys", combo);
		return desk_adapter_run(d, "key", args, e);
	}
	if (strcmp(type, "type") == 0) {
		const char *t;
		if (args_string(in, "text", 256 * 1024, ARGS_REQUIRED, &t, e) < 0)
			return err_code(e);
		cJSON_AddStringToObject(args, "text", t);
		return desk_adapter_run(d, "type_text", args, e);
	}
	if (strcmp(type, "wait") == 0) {
		/* wait has no duration; OpenAI's sample apps sleep 1-2 s.
		 * Waiting for the screen to settle serves the same purpose. */
		cJSON_AddStringToObject(args, "until", "stable");
		cJSON_AddNumberToObject(args, "quiet_ms", 500);
		cJSON_AddNumberToObject(args, "timeout_ms", 2000);
		return desk_adapter_run(d, "wait", args, e);
	}
	if (strcmp(type, "screenshot") == 0)
		return 0;
	return err_set(e, ERR_INVALID, EINVAL, "unknown computer_call action type '%.*s'",
		       UTF8_CUT(type, 64));
}

/* The members OpenAI documents for a computer_call item and for each
 * action type (response_computer_tool_call.py).  Fields of the item that
 * deskbox does not act on (id, status, pending_safety_checks) are known;
 * anything else is refused, naming it, before any action runs: an action
 * with a member deskbox would ignore is not done half-understood. */
static const char *const call_fields[] = {
    "type", "id", "call_id", "action", "actions", "status", "pending_safety_checks", NULL};
/* What every desktop body may carry at its top (api_desktop.c reads it). */
static const char *const body_fields[] = {"agent_display", "sensitive", NULL};
static const struct {
	const char *type;
	const char *const fields[7];
} action_fields[] = {
    {"click", {"type", "button", "x", "y", "keys", NULL}},
    {"double_click", {"type", "x", "y", "keys", NULL}},
    {"move", {"type", "x", "y", "keys", NULL}},
    {"drag", {"type", "path", "keys", NULL}},
    {"scroll", {"type", "x", "y", "scroll_x", "scroll_y", "keys", NULL}},
    {"keypress", {"type", "keys", NULL}},
    {"type", {"type", "text", NULL}},
    {"wait", {"type", NULL}},
    {"screenshot", {"type", NULL}},
};

static int check_action(const cJSON *a, const char *where, const char *const *also, struct err *e)
{
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "type"));
	for (size_t i = 0; type && i < sizeof(action_fields) / sizeof(action_fields[0]); i++)
		if (strcmp(type, action_fields[i].type) == 0)
			return args_only2(a, where, action_fields[i].fields, also, e);
	return 0; /* no type, or an unknown one: run_action names it */
}

/* `in` as a whole: the item and its action(s), or one bare action. */
static int check_call(const cJSON *in, struct err *e)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(in, "actions");
	const cJSON *action = cJSON_GetObjectItemCaseSensitive(in, "action");
	if (!list && !action)
		return check_action(in, NULL, body_fields, e);
	if (args_only2(in, NULL, call_fields, body_fields, e) < 0 ||
	    (cJSON_IsObject(action) && check_action(action, "action", NULL, e) < 0))
		return err_code(e);
	const cJSON *a, *items = cJSON_IsArray(list) ? list : NULL;
	int i = 0;
	cJSON_ArrayForEach(a, items)
	{
		char where[32];
		snprintf(where, sizeof(where), "actions[%d]", i++);
		if (check_action(a, where, NULL, e) < 0)
			return err_code(e);
	}
	return 0;
}

/* Runs action `in`; *settle says whether the screen should settle after. */
static int run_action(struct desk *d, const cJSON *in, int *settle, struct err *e)
{
	const char *type;
	if (!cJSON_IsObject(in))
		return err_set(e, ERR_INVALID, EINVAL, "an action must be an object");
	if (args_string(in, "type", 64, ARGS_REQUIRED, &type, e) < 0)
		return err_code(e);
	*settle = strcmp(type, "screenshot") != 0 && strcmp(type, "wait") != 0;
	cJSON *args = cJSON_CreateObject();
	int r = args ? one_action(d, in, type, args, e)
		     : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_Delete(args);
	return r < 0 ? err_wrap(e, "%s", type) : 0;
}

/* The call's `actions` (batched) or `action`, or `in` itself. */
static int run_call(struct desk *d, const cJSON *in, struct err *e)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(in, "actions");
	const cJSON *action = cJSON_GetObjectItemCaseSensitive(in, "action");
	int settle = 0, r = 0;
	if (cJSON_IsArray(list)) {
		int n = cJSON_GetArraySize(list), i = 0, any = 0;
		if (n < 1 || n > OPENAI_MAX_ACTIONS)
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'actions' must hold 1-%d actions",
				       OPENAI_MAX_ACTIONS);
		const cJSON *a;
		cJSON_ArrayForEach(a, list)
		{
			if ((r = run_action(d, a, &settle, e)) < 0)
				return err_wrap(e, "actions[%d]", i);
			any |= settle;
			i++;
		}
		settle = any;
	} else {
		r = run_action(d, cJSON_IsObject(action) ? action : in, &settle, e);
	}
	return r == 0 && settle ? desk_adapter_settle(d, e) : r;
}

/* pending_safety_checks: the call runs only when the client acknowledged
 * them (t->ack, its ?acknowledge_safety_checks=true); they then come back
 * as the output's acknowledged_safety_checks.  Never dropped silently. */
static int safety_checks(const cJSON *in, int ack, const cJSON **pending, struct err *e)
{
	*pending = cJSON_GetObjectItemCaseSensitive(in, "pending_safety_checks");
	if (!*pending || cJSON_IsNull(*pending))
		return 0;
	if (!cJSON_IsArray(*pending))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'pending_safety_checks' must be an array");
	if (cJSON_GetArraySize(*pending) == 0 || ack)
		return 0;
	const cJSON *first = cJSON_GetArrayItem(*pending, 0);
	const cJSON *msg =
	    cJSON_IsObject(first) ? cJSON_GetObjectItemCaseSensitive(first, "message") : NULL;
	return err_set(e, ERR_CONFLICT, EPERM,
		       "the call has %d pending safety check(s) (%.*s): ask the user, then send it "
		       "again with ?acknowledge_safety_checks=true",
		       cJSON_GetArraySize(*pending),
		       UTF8_CUT(cJSON_IsString(msg) ? msg->valuestring : "no message", 200));
}

int desk_openai(struct desk *d, const cJSON *in, cJSON *out, struct desk_tool *t, struct err *e)
{
	int ack = t->ack;
	memset(t, 0, sizeof(*t));
	const cJSON *call_id = cJSON_GetObjectItemCaseSensitive(in, "call_id");
	const cJSON *pending;
	if (safety_checks(in, ack, &pending, e) < 0)
		return err_code(e);
	/* An unknown member is a failed action the model reads, like one
	 * that failed running. */
	if (check_call(in, e) < 0 || run_call(d, in, e) < 0) {
		t->failed = 1;
		snprintf(t->error, sizeof(t->error), "%s",
			 e->msg[0] ? e->msg : "the action failed");
		err_clear(e);
	}
	char *b64;
	if (desk_adapter_shot(d, NULL, &b64, &t->frame, e) < 0)
		return err_code(e);
	size_t n = strlen(b64) + 32;
	char *url = malloc(n);
	if (!url) {
		free(b64);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	snprintf(url, n, "data:image/png;base64,%s", b64);
	free(b64);
	/* Ready to append to the next request's input. */
	cJSON_AddStringToObject(out, "type", "computer_call_output");
	if (cJSON_IsString(call_id))
		cJSON_AddStringToObject(out, "call_id", call_id->valuestring);
	cJSON *o = cJSON_AddObjectToObject(out, "output");
	cJSON_AddStringToObject(o, "type", "computer_screenshot");
	cJSON_AddStringToObject(o, "image_url", url);
	if (pending && cJSON_GetArraySize(pending) > 0)
		cJSON_AddItemToObject(out, "acknowledged_safety_checks",
				      cJSON_Duplicate(pending, 1));
	if (t->failed)
		cJSON_AddStringToObject(out, "status", "incomplete");
	free(url);
	return 0;
}

cJSON *desk_openai_reason_item(const char *reason)
{
	cJSON *m = cJSON_CreateObject();
	if (!m)
		return NULL;
	cJSON_AddStringToObject(m, "type", "message");
	cJSON_AddStringToObject(m, "role", "user");
	cJSON *content = cJSON_AddArrayToObject(m, "content");
	cJSON *part = cJSON_CreateObject();
	size_t n = strlen(reason) + 128;
	char *text = malloc(n);
	if (!content || !part || !text) {
		cJSON_Delete(part);
		cJSON_Delete(m);
		free(text);
		return NULL;
	}
	snprintf(text, n,
		 "The computer action failed: %s. The screenshot shows the screen as it is now.",
		 reason);
	cJSON_AddStringToObject(part, "type", "input_text");
	cJSON_AddStringToObject(part, "text", text);
	cJSON_AddItemToArray(content, part);
	free(text);
	return m;
}
