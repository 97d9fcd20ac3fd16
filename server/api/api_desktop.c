/* The /desktop routes: screenshots, info, the actions (desktop_*.c), the
 * actions batch and the tool-format adapters. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/args.h"
#include "server/desktop/desktop.h"

/* Actions one batch may hold, and how long a batch may run before the
 * remaining actions are refused. */
#define BATCH_MAX_ACTIONS 64
#define BATCH_MAX_MS	  120000

/* Enters the desktop for a request with a JSON body: *body is the parsed
 * body on success (caller frees). */
static int enter_json(struct http_request *req, cJSON **body, struct desk *d, struct err *e)
{
	if (http_json_body(req, body, e) < 0)
		return err_code(e);
	if (desk_enter(req, *body, d, e) < 0) {
		cJSON_Delete(*body);
		*body = NULL;
		return err_code(e);
	}
	return 0;
}

/* agent_width/agent_height in a GET's query string as an "agent_display". */
static int query_agent_display(struct http_request *req, cJSON *o, struct err *e)
{
	const char *w = http_query(req, "agent_width"), *h = http_query(req, "agent_height");
	if (!w && !h)
		return 0;
	int64_t vw, vh;
	if (!w || !h || args_parse_int(w, 64, 8192, &vw) < 0 ||
	    args_parse_int(h, 64, 8192, &vh) < 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "queries 'agent_width' and 'agent_height' must both be 64-8192");
	cJSON *ad = cJSON_AddObjectToObject(o, "agent_display");
	cJSON_AddNumberToObject(ad, "width", (double)vw);
	cJSON_AddNumberToObject(ad, "height", (double)vh);
	return 0;
}

static int enter_query(struct http_request *req, struct desk *d, struct err *e)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r = query_agent_display(req, o, e);
	if (r == 0)
		r = desk_enter(req, o, d, e);
	cJSON_Delete(o);
	return r;
}

static void add_frame_header(struct http_response *res, uint64_t frame)
{
	char fbuf[32];
	snprintf(fbuf, sizeof(fbuf), "%llu", (unsigned long long)frame);
	http_add_header(res, "X-Frame", fbuf, NULL);
}

/* 1 when the If-None-Match header lists `etag` (or is "*"). */
static int etag_matches(struct http_request *req, const char *etag)
{
	const char *inm = http_header(req, "If-None-Match");
	if (!inm)
		return 0;
	if (strcmp(inm, "*") == 0)
		return 1;
	size_t n = strlen(etag);
	for (const char *p = inm; (p = strstr(p, etag)); p += n) {
		char before = p == inm ? ' ' : p[-1], after = p[n];
		if ((before == ' ' || before == ',' || before == '/') &&
		    (after == '\0' || after == ',' || after == ' '))
			return 1;
	}
	return 0;
}

int api_desktop_screenshot(struct http_request *req, struct http_response *res, struct err *e)
{
	struct desk d;
	if (enter_query(req, &d, e) < 0)
		return err_code(e);
	struct shot_opts so;
	struct shot s;
	int r = desk_shot_query(&d, req, &so, e);
	if (r == 0) {
		char etag[48];
		uint64_t frame = capture_frame(d.cap);
		desk_shot_etag(&d, &so, frame, etag, sizeof(etag));
		if (etag_matches(req, etag)) {
			desk_leave(&d);
			http_reply_empty(res, 304);
			http_add_header(res, "ETag", etag, NULL);
			add_frame_header(res, frame);
			return 0;
		}
		r = desk_shot_take(&d, &so, &s, e);
	}
	desk_leave(&d);
	if (r < 0)
		return r;
	http_reply_data(res, 200, s.mime, s.data, s.len);
	add_frame_header(res, s.frame);
	http_add_header(res, "ETag", s.etag, NULL);
	/* Revalidate every time: the ETag makes an unchanged screen cheap. */
	http_add_header(res, "Cache-Control", "no-cache", NULL);
	return 0;
}

int api_desktop_info(struct http_request *req, struct http_response *res, struct err *e)
{
	struct desk d;
	if (enter_query(req, &d, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "width", d.w);
	cJSON_AddNumberToObject(j, "height", d.h);
	cJSON_AddNumberToObject(j, "frame", (double)capture_frame(d.cap));
	int32_t px, py, ax, ay;
	capture_pointer(d.cap, &px, &py);
	cJSON *p = cJSON_AddObjectToObject(j, "pointer");
	cJSON_AddNumberToObject(p, "x", px);
	cJSON_AddNumberToObject(p, "y", py);
	if (d.aw != d.w || d.ah != d.h) {
		cJSON *ad = cJSON_AddObjectToObject(j, "agent_display");
		cJSON_AddNumberToObject(ad, "width", d.aw);
		cJSON_AddNumberToObject(ad, "height", d.ah);
		desk_to_agent(&d, px, py, &ax, &ay);
		cJSON *ap = cJSON_AddObjectToObject(j, "agent_pointer");
		cJSON_AddNumberToObject(ap, "x", ax);
		cJSON_AddNumberToObject(ap, "y", ay);
	}
	desk_leave(&d);
	return http_reply_json(res, 200, j, e);
}

/* GET routes that are actions without arguments: cursor, windows,
 * clipboard. */
static int get_action(struct http_request *req, struct http_response *res, const char *name,
		      struct err *e)
{
	struct desk d;
	if (enter_query(req, &d, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON *none = cJSON_CreateObject();
	int r = desk_action(&d, name, none, j, e);
	cJSON_Delete(none);
	desk_leave(&d);
	if (r < 0) {
		cJSON_Delete(j);
		return r;
	}
	return http_reply_json(res, 200, j, e);
}

int api_desktop_cursor(struct http_request *req, struct http_response *res, struct err *e)
{
	return get_action(req, res, "cursor", e);
}

int api_desktop_windows(struct http_request *req, struct http_response *res, struct err *e)
{
	return get_action(req, res, "windows", e);
}

int api_desktop_clipboard(struct http_request *req, struct http_response *res, struct err *e)
{
	return get_action(req, res, "get_clipboard", e);
}

/* POST …/desktop/{action}. */
int api_desktop_action(struct http_request *req, struct http_response *res, struct err *e)
{
	const char *name = req->captures[1];
	cJSON *body;
	struct desk d;
	if (enter_json(req, &body, &d, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	int r =
	    desk_action(&d, strcmp(name, "clipboard") == 0 ? "set_clipboard" : name, body, j, e);
	desk_leave(&d);
	cJSON_Delete(body);
	if (r < 0) {
		cJSON_Delete(j);
		return r;
	}
	return http_reply_json(res, 200, j, e);
}

/* POST …/desktop/windows/{wid}/{op}. */
int api_desktop_window_op(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	struct desk d;
	if (enter_json(req, &body, &d, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	char name[32];
	snprintf(name, sizeof(name), "window_%s", req->captures[2]);
	int r = desk_x_action(&d, name, req->captures[1], body, j, e);
	desk_leave(&d);
	cJSON_Delete(body);
	if (r < 0) {
		cJSON_Delete(j);
		return r;
	}
	return http_reply_json(res, 200, j, e);
}

/* The "then" part of a batch: an optional wait, then an optional
 * screenshot (true, or an object of screenshot options). */
static int batch_then(struct desk *d, const cJSON *then, cJSON *out, struct err *e)
{
	if (!then || cJSON_IsNull(then))
		return 0;
	if (!cJSON_IsObject(then))
		return err_set(e, ERR_INVALID, EINVAL, "field 'then' must be an object");
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(then, "wait");
	if (w && !cJSON_IsNull(w)) {
		if (!cJSON_IsObject(w))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'then.wait' must be an object");
		cJSON *wo = cJSON_AddObjectToObject(out, "wait");
		if (desk_wait(d, w, wo, e) < 0)
			return err_wrap(e, "then.wait");
	}
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(then, "screenshot");
	if (!s || cJSON_IsNull(s) || cJSON_IsFalse(s))
		return 0;
	cJSON *empty = NULL;
	if (cJSON_IsTrue(s))
		s = empty = cJSON_CreateObject();
	else if (!cJSON_IsObject(s))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'then.screenshot' must be true or an object of options");
	struct shot_opts so;
	struct shot shot;
	int r = desk_shot_parse(d, s, &so, e);
	cJSON_Delete(empty);
	if (r == 0)
		r = desk_shot_take(d, &so, &shot, e);
	if (r < 0)
		return err_wrap(e, "then.screenshot");
	cJSON *sj = desk_shot_json(&shot);
	desk_shot_release(&shot);
	if (!sj)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_AddItemToObject(out, "screenshot", sj);
	return 0;
}

int api_desktop_actions(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	struct desk d;
	if (enter_json(req, &body, &d, e) < 0)
		return err_code(e);
	long long start = clock_mono_ms();
	cJSON *j = cJSON_CreateObject();
	cJSON *results = cJSON_AddArrayToObject(j, "results");
	const cJSON *acts = cJSON_GetObjectItemCaseSensitive(body, "actions");
	int r = 0;
	if (!cJSON_IsArray(acts) || cJSON_GetArraySize(acts) > BATCH_MAX_ACTIONS)
		r = err_set(e, ERR_INVALID, EINVAL,
			    "field 'actions' must be an array of at most %d actions",
			    BATCH_MAX_ACTIONS);
	int i = 0;
	const cJSON *a;
	const cJSON *list = r == 0 ? acts : NULL;
	cJSON_ArrayForEach(a, list)
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(a, "action");
		if (!cJSON_IsObject(a) || !cJSON_IsString(name)) {
			r = err_set(e, ERR_INVALID, EINVAL,
				    "actions[%d] must be an object with an 'action' name", i);
			break;
		}
		if (clock_mono_ms() - start > BATCH_MAX_MS) {
			r = err_set(e, ERR_TIMEOUT, ETIMEDOUT,
				    "actions[%d]: the batch ran past %d ms", i, BATCH_MAX_MS);
			break;
		}
		cJSON *one = cJSON_CreateObject();
		cJSON_AddItemToArray(results, one);
		cJSON_AddStringToObject(one, "action", name->valuestring);
		r = desk_action(&d, name->valuestring, a, one, e);
		if (r < 0) {
			err_wrap(e, "actions[%d] (%.32s)", i, name->valuestring);
			break;
		}
		i++;
	}
	if (r == 0)
		r = batch_then(&d, cJSON_GetObjectItemCaseSensitive(body, "then"), j, e);
	if (r == 0)
		cJSON_AddNumberToObject(j, "frame", (double)capture_frame(d.cap));
	desk_leave(&d);
	cJSON_Delete(body);
	if (r < 0) {
		cJSON_Delete(j);
		return r;
	}
	return http_reply_json(res, 200, j, e);
}

static int adapter(struct http_request *req, struct http_response *res,
		   int (*run)(struct desk *, const cJSON *, cJSON *, struct err *), struct err *e)
{
	cJSON *body;
	struct desk d;
	if (enter_json(req, &body, &d, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	int r = run(&d, body, j, e);
	desk_leave(&d);
	cJSON_Delete(body);
	if (r < 0) {
		cJSON_Delete(j);
		return r;
	}
	return http_reply_json(res, 200, j, e);
}

int api_desktop_anthropic(struct http_request *req, struct http_response *res, struct err *e)
{
	return adapter(req, res, desk_anthropic, e);
}

int api_desktop_openai(struct http_request *req, struct http_response *res, struct err *e)
{
	return adapter(req, res, desk_openai, e);
}
