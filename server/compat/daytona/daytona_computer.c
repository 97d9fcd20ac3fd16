/* Daytona's computer use (toolbox /computeruse/...) straight onto deskbox's
 * desktop subsystem: screenshots from the VNC mirror, pointer and keys as
 * RFB events, windows through deskbox-xtool.  No xdotool is run. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/args.h"
#include "internal.h"
#include "server/desktop/desktop.h"

/* An operation on the desktop of the request's sandbox: the caller must
 * compat_release(*sb). */
static int desk_enter(struct http_request *req, struct desk *d, struct sandbox **sb, struct err *e)
{
	struct api *api = req->app;
	struct capture *cap;
	if (sandbox_get(api->sandboxes, req->captures[0], sb, e) < 0)
		return err_code(e);
	if (sandbox_use(*sb, 1, &cap, e) < 0) {
		sandbox_put(*sb);
		return err_code(e);
	}
	uint32_t aw, ah;
	sandbox_agent_display(*sb, &aw, &ah);
	desk_init(d, cap, sandbox_procs(*sb), aw, ah, api->png_level);
	return 0;
}

/* Runs deskbox action `name` with `args` (consumed); *out its result. */
static int act(struct http_request *req, const char *name, cJSON *args, cJSON **out, struct err *e)
{
	struct desk d;
	struct sandbox *sb;
	*out = NULL;
	if (!args)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (desk_enter(req, &d, &sb, e) < 0) {
		cJSON_Delete(args);
		return err_code(e);
	}
	cJSON *j = cJSON_CreateObject();
	int r = desk_action(&d, name, args, j, e);
	compat_release(sb);
	cJSON_Delete(args);
	if (r < 0)
		cJSON_Delete(j);
	else
		*out = j;
	return r;
}

static cJSON *xy(double x, double y)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "x", x);
	cJSON_AddNumberToObject(j, "y", y);
	return j;
}

static int body_xy(const cJSON *b, const char *xn, const char *yn, int64_t *x, int64_t *y,
		   struct err *e)
{
	if (args_int(b, xn, 0, 65535, 0, ARGS_REQUIRED, x, e) < 0 ||
	    args_int(b, yn, 0, 65535, 0, ARGS_REQUIRED, y, e) < 0)
		return err_code(e);
	return 0;
}

/* ---- screenshots ---- */

/* GET screenshot[/region][/compressed]?x=&y=&width=&height=&showCursor=
 * &format=&quality=&scale=: {"screenshot": base64, "sizeBytes", ...}. */
int dt_screenshot(struct http_request *req, struct http_response *res, struct err *e)
{
	static const char *const ints[][2] = {
	    {"x", "x"}, {"y", "y"}, {"width", "w"}, {"height", "h"}, {"quality", "quality"}};
	cJSON *o = cJSON_CreateObject();
	int region = strstr(req->path, "/screenshot/region") != NULL;
	for (size_t i = region ? 0 : 4; i < sizeof(ints) / sizeof(ints[0]); i++) {
		int64_t v;
		if (http_query_int(req, ints[i][0], 0, 65535, -1, 0, &v, e) < 0) {
			cJSON_Delete(o);
			return err_code(e);
		}
		if (v >= 0)
			cJSON_AddNumberToObject(o, ints[i][1], (double)v);
	}
	const char *fmt = http_query(req, "format"), *scale = http_query(req, "scale");
	const char *cur = http_query(req, "showCursor");
	cJSON_AddStringToObject(o, "format", fmt ? fmt : "png");
	if (scale)
		cJSON_AddNumberToObject(o, "scale", atof(scale));
	cJSON_AddBoolToObject(o, "cursor", cur && strcmp(cur, "true") == 0);
	struct desk d;
	struct sandbox *sb;
	struct shot_opts so;
	struct shot s;
	if (desk_enter(req, &d, &sb, e) < 0) {
		cJSON_Delete(o);
		return err_code(e);
	}
	int r = desk_shot_parse(&d, o, &so, e);
	cJSON_Delete(o);
	if (r == 0)
		r = desk_shot_take(&d, &so, &s, e);
	compat_release(sb);
	if (r < 0)
		return r;
	cJSON *shot = desk_shot_json(&s);
	desk_shot_release(&s);
	if (!shot)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "screenshot",
			      cJSON_DetachItemFromObjectCaseSensitive(shot, "data"));
	cJSON_AddNumberToObject(j, "sizeBytes", (double)s.len);
	cJSON_AddNumberToObject(j, "width", s.w);
	cJSON_AddNumberToObject(j, "height", s.h);
	cJSON_Delete(shot);
	return http_reply_json(res, 200, j, e);
}

/* ---- pointer ---- */

int dt_mouse(struct http_request *req, struct http_response *res, struct err *e)
{
	const char *op = req->captures[1];
	cJSON *b, *out = NULL;
	if (http_json_body(req, &b, e) < 0)
		return err_code(e);
	int64_t x = 0, y = 0, x2 = 0, y2 = 0, amount;
	const char *button, *dir;
	cJSON *a = cJSON_CreateObject(), *reply = NULL;
	int r = args_string(b, "button", 16, 0, &button, e);
	if (r == 0 && button && (strcmp(op, "click") == 0 || strcmp(op, "drag") == 0))
		cJSON_AddStringToObject(a, "button", button);
	if (r == 0 && strcmp(op, "drag") == 0) {
		r = body_xy(b, "startX", "startY", &x, &y, e);
		if (r == 0)
			r = body_xy(b, "endX", "endY", &x2, &y2, e);
		cJSON *path = cJSON_AddArrayToObject(a, "path");
		cJSON_AddItemToArray(path, xy((double)x, (double)y));
		cJSON_AddItemToArray(path, xy((double)x2, (double)y2));
		reply = xy((double)x2, (double)y2);
	} else if (r == 0) {
		r = body_xy(b, "x", "y", &x, &y, e);
		cJSON_AddNumberToObject(a, "x", (double)x);
		cJSON_AddNumberToObject(a, "y", (double)y);
		reply = xy((double)x, (double)y);
	}
	if (r == 0 && strcmp(op, "click") == 0) {
		cJSON_AddNumberToObject(
		    a, "count",
		    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "double")) ? 2 : 1);
	} else if (r == 0 && strcmp(op, "scroll") == 0) {
		r = args_string(b, "direction", 8, ARGS_REQUIRED, &dir, e);
		if (r == 0)
			r = args_int(b, "amount", 0, 1000, 1, 0, &amount, e);
		if (r == 0) {
			cJSON_AddStringToObject(a, "direction", dir);
			cJSON_AddNumberToObject(a, "amount", (double)amount);
		}
		cJSON_Delete(reply);
		reply = cJSON_CreateObject();
		cJSON_AddBoolToObject(reply, "success", 1);
	}
	cJSON_Delete(b);
	if (r == 0)
		r = act(req, op, a, &out, e);
	else
		cJSON_Delete(a);
	cJSON_Delete(out);
	if (r < 0) {
		cJSON_Delete(reply);
		return r;
	}
	return http_reply_json(res, 200, reply, e);
}

int dt_mouse_position(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *out;
	if (act(req, "cursor", cJSON_CreateObject(), &out, e) < 0)
		return err_code(e);
	return http_reply_json(res, 200, out, e);
}

/* ---- keyboard ---- */

/* Daytona's key and modifier names as deskbox's (xdotool's) key names. */
static const char *key_name(const char *k)
{
	static const char *const map[][2] = {
	    {"enter", "Return"},
	    {"return", "Return"},
	    {"escape", "Escape"},
	    {"esc", "Escape"},
	    {"tab", "Tab"},
	    {"backspace", "BackSpace"},
	    {"delete", "Delete"},
	    {"space", "space"},
	    {"up", "Up"},
	    {"down", "Down"},
	    {"left", "Left"},
	    {"right", "Right"},
	    {"home", "Home"},
	    {"end", "End"},
	    {"pageup", "Prior"},
	    {"pagedown", "Next"},
	    {"insert", "Insert"},
	    {"num_plus", "KP_Add"},
	    {"num_minus", "KP_Subtract"},
	    {"num_enter", "KP_Enter"},
	    {"ctrl", "ctrl"},
	    {"control", "ctrl"},
	    {"alt", "alt"},
	    {"option", "alt"},
	    {"shift", "shift"},
	    {"cmd", "super"},
	    {"meta", "super"},
	    {"win", "super"},
	    {"super", "super"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcasecmp(k, map[i][0]) == 0)
			return map[i][1];
	return k;
}

/* Appends key `k` (of `n` bytes) to the combination in `buf`. */
static int add_key(char *buf, size_t size, const char *k, size_t n, struct err *e)
{
	char one[64];
	if (!n || n >= sizeof(one))
		return err_set(e, ERR_INVALID, EINVAL, "bad key name");
	memcpy(one, k, n);
	one[n] = '\0';
	const char *name = key_name(one);
	char fkey[8];
	if ((one[0] == 'f' || one[0] == 'F') && n <= 3 && isdigit((unsigned char)one[1])) {
		snprintf(fkey, sizeof(fkey), "F%s", one + 1);
		name = fkey;
	}
	size_t len = strlen(buf);
	if (snprintf(buf + len, size - len, "%s%s", len ? "+" : "", name) >= (int)(size - len))
		return err_set(e, ERR_INVALID, E2BIG, "key combination too long");
	return 0;
}

/* POST keyboard/type {"text","delay"?}, keyboard/key {"key","modifiers"},
 * keyboard/hotkey {"keys":"ctrl+c"}; Daytona's daemon answers {}. */
int dt_keyboard(struct http_request *req, struct http_response *res, struct err *e)
{
	const char *op = req->captures[1];
	cJSON *b, *out = NULL;
	if (http_json_body(req, &b, e) < 0)
		return err_code(e);
	cJSON *a = cJSON_CreateObject();
	const char *action = "key", *text;
	char combo[256] = "";
	int64_t delay;
	int r;
	if (strcmp(op, "type") == 0) {
		action = "type_text";
		r = args_string(b, "text", 256u << 10, ARGS_REQUIRED, &text, e);
		if (r == 0)
			r = args_int(b, "delay", 0, 1000, 0, 0, &delay, e);
		if (r == 0) {
			cJSON_AddStringToObject(a, "text", text);
			cJSON_AddNumberToObject(a, "delay_ms", (double)delay);
		}
	} else if (strcmp(op, "key") == 0) {
		const cJSON *mods = cJSON_GetObjectItemCaseSensitive(b, "modifiers"), *it;
		if (!cJSON_IsArray(mods))
			mods = NULL;
		r = args_string(b, "key", 63, ARGS_REQUIRED, &text, e);
		cJSON_ArrayForEach(it, mods)
		{
			if (r == 0)
				r = cJSON_IsString(it)
					? add_key(combo, sizeof(combo), it->valuestring,
						  strlen(it->valuestring), e)
					: err_set(e, ERR_INVALID, EINVAL,
						  "'modifiers' must hold strings");
		}
		if (r == 0)
			r = add_key(combo, sizeof(combo), text, strlen(text), e);
	} else {
		r = args_string(b, "keys", 200, ARGS_REQUIRED, &text, e);
		for (const char *p = text; r == 0 && p && *p;) {
			p += strspn(p, " +");
			size_t n = strcspn(p, " +");
			if (n)
				r = add_key(combo, sizeof(combo), p, n, e);
			p += n;
		}
		if (r == 0 && !combo[0])
			r = err_set(e, ERR_INVALID, EINVAL, "'keys' names no key");
	}
	if (r == 0 && combo[0])
		cJSON_AddStringToObject(a, "keys", combo);
	cJSON_Delete(b);
	if (r == 0)
		r = act(req, action, a, &out, e);
	else
		cJSON_Delete(a);
	cJSON_Delete(out);
	return r < 0 ? r : http_reply_json(res, 200, cJSON_CreateObject(), e);
}

/* ---- display, windows, the desktop's processes ---- */

int dt_display_info(struct http_request *req, struct http_response *res, struct err *e)
{
	struct desk d;
	struct sandbox *sb;
	if (desk_enter(req, &d, &sb, e) < 0)
		return err_code(e);
	compat_release(sb);
	cJSON *j = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(j, "displays");
	cJSON *one = xy(0, 0);
	cJSON_AddNumberToObject(one, "id", 0);
	cJSON_AddNumberToObject(one, "width", d.aw);
	cJSON_AddNumberToObject(one, "height", d.ah);
	cJSON_AddBoolToObject(one, "isActive", 1);
	cJSON_AddItemToArray(list, one);
	cJSON_AddNumberToObject(j, "count", 1);
	return http_reply_json(res, 200, j, e);
}

int dt_windows(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *out;
	if (act(req, "windows", cJSON_CreateObject(), &out, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(j, "windows");
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(out, "windows"))
	{
		cJSON *w = cJSON_CreateObject();
		static const char *const copy[] = {"id", "title", "x", "y", "width", "height"};
		for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++) {
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, copy[i]);
			cJSON_AddItemToObject(w, copy[i],
					      v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
		}
		cJSON_AddBoolToObject(
		    w, "isActive", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "focused")));
		cJSON_AddItemToArray(list, w);
	}
	cJSON_AddNumberToObject(j, "count", cJSON_GetArraySize(list));
	cJSON_Delete(out);
	return http_reply_json(res, 200, j, e);
}

/* start / status: deskbox's desktop always runs while the sandbox does
 * (Xvfb, the window manager and the VNC server are its init's). */
int dt_computer_status(struct http_request *req, struct http_response *res, struct err *e)
{
	struct desk d;
	struct sandbox *sb;
	if (desk_enter(req, &d, &sb, e) < 0)
		return err_code(e);
	compat_release(sb);
	cJSON *j = cJSON_CreateObject();
	if (strstr(req->path, "/computeruse/start")) {
		cJSON_AddStringToObject(j, "message", "Computer use processes started");
		cJSON *st = cJSON_AddObjectToObject(j, "status");
		static const char *const procs[] = {"xvfb", "xfce4", "x11vnc", "novnc"};
		for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
			cJSON *p = cJSON_AddObjectToObject(st, procs[i]);
			cJSON_AddBoolToObject(p, "running", 1);
			cJSON_AddBoolToObject(p, "autoRestart", 1);
		}
	} else {
		cJSON_AddStringToObject(j, "status", "active");
	}
	return http_reply_json(res, 200, j, e);
}
