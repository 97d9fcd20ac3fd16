#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../input/input.h"
#include "api.h"
#include "args.h"

/* The most bytes type_text accepts in one request. */
#define TYPE_TEXT_MAX (256u * 1024u)

int api_desktop_screenshot(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	struct capture *cap;
	if (api_enter(req, 1, &sb, &cap, e) < 0)
		return err_code(e);
	int64_t W = capture_width(cap), H = capture_height(cap);
	int64_t x, y, w, h;
	int r = 0;
	if (args_query_int(req, "x", 0, W - 1, 0, 0, &x, e) < 0 ||
	    args_query_int(req, "y", 0, H - 1, 0, 0, &y, e) < 0 ||
	    args_query_int(req, "w", 1, W - x, W - x, 0, &w, e) < 0 ||
	    args_query_int(req, "h", 1, H - y, H - y, 0, &h, e) < 0) {
		api_release(sb);
		return err_code(e);
	}
	/* SECURITY: w, h are bounded by the display size deskboxd chose
	 * (<= 4096 each), so w * h * 4 cannot overflow. */
	size_t stride = (size_t)w * 4;
	uint8_t *pix = malloc(stride * (size_t)h);
	if (!pix) {
		api_release(sb);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	uint64_t frame = 0;
	struct capture_rect rect = {(uint32_t)x, (uint32_t)y, (uint32_t)w, (uint32_t)h};
	r = capture_snapshot(cap, rect, pix, stride, &frame, e);
	api_release(sb);
	if (r < 0) {
		free(pix);
		return r;
	}
	uint8_t *png;
	size_t len;
	r = capture_png_encode(pix, (uint32_t)w, (uint32_t)h, stride, api->png_level, &png, &len,
			       e);
	free(pix);
	if (r < 0)
		return r;
	http_reply_data(res, 200, "image/png", png, len);
	char fbuf[32];
	snprintf(fbuf, sizeof(fbuf), "%llu", (unsigned long long)frame);
	http_add_header(res, "X-Frame", fbuf, NULL);
	http_add_header(res, "Cache-Control", "no-store", NULL);
	return 0;
}

int api_desktop_info(struct http_request *req, struct http_response *res, struct err *e)
{
	struct sandbox *sb;
	struct capture *cap;
	if (api_enter(req, 1, &sb, &cap, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "width", capture_width(cap));
	cJSON_AddNumberToObject(j, "height", capture_height(cap));
	cJSON_AddNumberToObject(j, "frame", (double)capture_frame(cap));
	int32_t px, py;
	capture_pointer(cap, &px, &py);
	cJSON *p = cJSON_AddObjectToObject(j, "pointer");
	cJSON_AddNumberToObject(p, "x", px);
	cJSON_AddNumberToObject(p, "y", py);
	api_release(sb);
	return http_reply_json(res, 200, j, e);
}

/* Parses the body, enters the sandbox, builds events with `build` and sends
 * them: the shape shared by every input action. */
typedef int (*build_fn)(const cJSON *body, struct capture *cap, struct input_seq *seq,
			struct err *e);

static int run_input(struct http_request *req, struct http_response *res, build_fn build,
		     struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct sandbox *sb;
	struct capture *cap;
	if (api_enter(req, 1, &sb, &cap, e) < 0) {
		cJSON_Delete(body);
		return err_code(e);
	}
	struct input_seq seq = {0};
	int r = build(body, cap, &seq, e);
	cJSON_Delete(body);
	if (r == 0)
		r = capture_send(cap, seq.ev, seq.n, e);
	cJSON *j = NULL;
	if (r == 0) {
		j = cJSON_CreateObject();
		cJSON_AddNumberToObject(j, "events", (double)seq.n);
		cJSON_AddNumberToObject(j, "frame", (double)capture_frame(cap));
	}
	input_seq_release(&seq);
	api_release(sb);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, j, e);
}

static int parse_point(const cJSON *body, struct capture *cap, int32_t *x, int32_t *y,
		       struct err *e)
{
	int64_t vx, vy;
	if (args_int(body, "x", 0, (int64_t)capture_width(cap) - 1, 0, ARGS_REQUIRED, &vx, e) < 0 ||
	    args_int(body, "y", 0, (int64_t)capture_height(cap) - 1, 0, ARGS_REQUIRED, &vy, e) < 0)
		return err_code(e);
	*x = (int32_t)vx;
	*y = (int32_t)vy;
	return 0;
}

#define MAX_MODIFIERS 8

static int build_click(const cJSON *body, struct capture *cap, struct input_seq *seq, struct err *e)
{
	int32_t x, y;
	if (parse_point(body, cap, &x, &y, e) < 0)
		return err_code(e);
	enum input_button button = INPUT_BUTTON_LEFT;
	const char *bname;
	if (args_string(body, "button", 32, 0, &bname, e) < 0)
		return err_code(e);
	if (bname && input_button_parse(bname, &button, e) < 0)
		return err_code(e);
	int64_t count;
	if (args_int(body, "count", 1, 3, 1, 0, &count, e) < 0)
		return err_code(e);
	uint32_t mods[MAX_MODIFIERS];
	size_t nmods = 0;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(body, "modifiers");
	if (m && !cJSON_IsNull(m)) {
		if (!cJSON_IsArray(m))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'modifiers' must be an array of key names");
		const cJSON *it;
		cJSON_ArrayForEach(it, m)
		{
			if (nmods >= MAX_MODIFIERS)
				return err_set(e, ERR_INVALID, E2BIG, "more than %d modifiers",
					       MAX_MODIFIERS);
			if (!cJSON_IsString(it))
				return err_set(e, ERR_INVALID, EINVAL,
					       "field 'modifiers' must hold strings");
			if (input_keysym_parse(it->valuestring, &mods[nmods], e) < 0)
				return err_wrap(e, "modifiers");
			nmods++;
		}
	}
	return input_seq_click(seq, x, y, button, (int)count, mods, nmods, e);
}

static int build_move(const cJSON *body, struct capture *cap, struct input_seq *seq, struct err *e)
{
	int32_t x, y;
	if (parse_point(body, cap, &x, &y, e) < 0)
		return err_code(e);
	struct input_event ev = {.type = INPUT_MOVE, .x = x, .y = y};
	return input_seq_push(seq, &ev, e);
}

static int build_type_text(const cJSON *body, struct capture *cap, struct input_seq *seq,
			   struct err *e)
{
	const char *text;
	if (args_string(body, "text", TYPE_TEXT_MAX, ARGS_REQUIRED, &text, e) < 0)
		return err_code(e);
	return input_seq_text(seq, text, strlen(text), e);
}

static int build_key(const cJSON *body, struct capture *cap, struct input_seq *seq, struct err *e)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(body, "keys");
	if (cJSON_IsString(k))
		return input_seq_keys(seq, k->valuestring, e);
	if (cJSON_IsArray(k) && cJSON_GetArraySize(k) > 0) {
		const cJSON *it;
		cJSON_ArrayForEach(it, k)
		{
			if (!cJSON_IsString(it))
				return err_set(e, ERR_INVALID, EINVAL,
					       "field 'keys' must hold strings");
			if (input_seq_keys(seq, it->valuestring, e) < 0)
				return err_code(e);
		}
		return 0;
	}
	return err_set(e, ERR_INVALID, EINVAL,
		       "field 'keys' must be a key combination like \"ctrl+shift+t\" or a "
		       "non-empty list of them");
}

int api_desktop_click(struct http_request *req, struct http_response *res, struct err *e)
{
	return run_input(req, res, build_click, e);
}

int api_desktop_move(struct http_request *req, struct http_response *res, struct err *e)
{
	return run_input(req, res, build_move, e);
}

int api_desktop_type_text(struct http_request *req, struct http_response *res, struct err *e)
{
	return run_input(req, res, build_type_text, e);
}

int api_desktop_key(struct http_request *req, struct http_response *res, struct err *e)
{
	return run_input(req, res, build_key, e);
}
