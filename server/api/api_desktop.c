/* The /desktop routes: screenshots, info, the actions (desktop_*.c), the
 * actions batch and the tool-format adapters. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/clock.h"
#include "common/args.h"
#include "server/desktop/desktop.h"
#include "api.h"
#include "internal.h"

/* Enters the {id} sandbox's desktop (api_enter) and sets `d` up for it; the
 * agent display comes from `body`'s "agent_display" (may be NULL) or else
 * the sandbox's.  On success the caller must leave(d, *sb). */
static int enter(struct http_request *req, const cJSON *body, struct desk *d, struct sandbox **sb,
		 struct err *e)
{
	uint32_t aw = 0, ah = 0;
	if (body && desk_parse_agent_display(body, &aw, &ah, e) < 0)
		return err_code(e);
	struct capture *cap;
	if (api_enter(req, 1, sb, &cap, e) < 0)
		return err_code(e);
	if (!aw)
		sandbox_agent_display(*sb, &aw, &ah);
	struct api *api = req->app;
	desk_init(d, cap, sandbox_procs(*sb), aw, ah, api->png_level);
	api_desk_observe(req, *sb, d,
			 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "sensitive")));
	return 0;
}

/* What every desktop body may carry beside its action's arguments. */
static const char *const body_fields[] = {"agent_display", "sensitive", NULL};

/* Ends what enter() began. */
static void leave(struct desk *d, struct sandbox *sb)
{
	desk_obs_put(d->obs);
	d->obs = NULL;
	api_release(sb);
}

/* Enters the desktop for a request with a JSON body: *body is the parsed
 * body on success (caller frees).  With `action`, the body is that
 * action's arguments and holds nothing else (desk_action_check), or with
 * "actions" a batch (desk_batch_check). */
static int enter_json(struct http_request *req, const char *action, cJSON **body, struct desk *d,
		      struct sandbox **sb, struct err *e)
{
	if (http_json_body(req, body, e) < 0)
		return err_code(e);
	int r = !action ? 0
		: strcmp(action, "actions") == 0
		    ? desk_batch_check(*body, e)
		    : desk_action_check(action, *body, body_fields, NULL, e);
	if (r < 0 || enter(req, *body, d, sb, e) < 0) {
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

static int enter_query(struct http_request *req, struct desk *d, struct sandbox **sb, struct err *e)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r = query_agent_display(req, o, e);
	if (r == 0)
		r = enter(req, o, d, sb, e);
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

/* Screenshot options from a GET's query string (the numbers, "format" and
 * "cursor=1") through desk_shot_parse(). */
/* The image format an Accept header asks for when the query names none:
 * the first of image/png, image/jpeg and image/webp it lists (q-values
 * aside: clients list what they prefer first); NULL (PNG) for none. */
static const char *accept_format(const char *accept)
{
	static const char *const types[][2] = {
	    {"image/png", "png"}, {"image/jpeg", "jpeg"}, {"image/webp", "webp"}};
	const char *best = NULL, *at = NULL;
	for (size_t i = 0; accept && i < sizeof(types) / sizeof(types[0]); i++) {
		const char *p = strstr(accept, types[i][0]);
		if (p && (!at || p < at))
			at = p, best = types[i][1];
	}
	return best;
}

static int shot_query(const struct desk *d, struct http_request *req, struct shot_opts *so,
		      struct err *e)
{
	static const char *const nums[] = {"x",	    "y",     "w",      "h",
					   "scale", "width", "height", "quality"};
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r = 0;
	for (size_t i = 0; r == 0 && i < sizeof(nums) / sizeof(nums[0]); i++) {
		const char *v = http_query(req, nums[i]);
		if (!v)
			continue;
		char *end;
		errno = 0;
		double dv = strtod(v, &end);
		if (!*v || *end || errno || !(dv > -1e9 && dv < 1e9))
			r = err_set(e, ERR_INVALID, EINVAL, "query '%s' must be a number", nums[i]);
		else
			cJSON_AddNumberToObject(o, nums[i], dv);
	}
	const char *f = http_query(req, "format");
	if (!f)
		f = accept_format(http_header(req, "Accept"));
	if (r == 0 && f)
		cJSON_AddStringToObject(o, "format", f);
	static const char *const flags[] = {"cursor", "lossless"};
	for (size_t i = 0; r == 0 && i < sizeof(flags) / sizeof(flags[0]); i++) {
		const char *c = http_query(req, flags[i]);
		if (!c)
			continue;
		if (strcmp(c, "1") == 0 || strcmp(c, "true") == 0)
			cJSON_AddTrueToObject(o, flags[i]);
		else if (strcmp(c, "0") == 0 || strcmp(c, "false") == 0)
			cJSON_AddFalseToObject(o, flags[i]);
		else
			r = err_set(e, ERR_INVALID, EINVAL, "query '%s' must be 1 or 0", flags[i]);
	}
	if (r == 0)
		r = desk_shot_parse(d, o, so, e);
	cJSON_Delete(o);
	return r;
}

static void shot_put(void *img)
{
	capture_image_put(img);
}

int api_desktop_screenshot(struct http_request *req, struct http_response *res, struct err *e)
{
	struct desk d;
	struct sandbox *sb;
	if (enter_query(req, &d, &sb, e) < 0)
		return err_code(e);
	struct shot_opts so;
	struct shot s;
	int r = shot_query(&d, req, &so, e);
	if (r == 0) {
		char etag[48];
		uint64_t frame = capture_frame(d.cap);
		desk_shot_etag(&d, &so, frame, etag, sizeof(etag));
		if (etag_matches(req, etag)) {
			leave(&d, sb);
			http_reply_empty(res, 304);
			http_add_header(res, "ETag", etag, NULL);
			add_frame_header(res, frame);
			return 0;
		}
		r = desk_shot_take(&d, &so, &s, e);
	}
	leave(&d, sb);
	if (r < 0)
		return r;
	/* Sent from the mirror's cached image itself. */
	http_reply_shared(res, 200, s.mime, s.data, s.len, shot_put, s.img);
	add_frame_header(res, s.frame);
	http_add_header(res, "ETag", s.etag, NULL);
	/* Revalidate every time: the ETag makes an unchanged screen cheap. */
	http_add_header(res, "Cache-Control", "no-cache", NULL);
	/* Without format= the Accept header chose the image type. */
	http_add_header(res, "Vary", "Accept", NULL);
	return 0;
}

int api_desktop_info(struct http_request *req, struct http_response *res, struct err *e)
{
	struct desk d;
	struct sandbox *sb;
	if (enter_query(req, &d, &sb, e) < 0)
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
	if (d.obs)
		cJSON_AddItemToObject(j, "takeover", desk_obs_takeover_json(d.obs));
	leave(&d, sb);
	return http_reply_json(res, 200, j, e);
}

/* Answers `j` (200) when the action succeeded (r == 0), else frees it and
 * passes the failure on. */
static int reply(struct http_response *res, int r, cJSON *j, struct err *e)
{
	if (r < 0) {
		cJSON_Delete(j);
		return r;
	}
	return http_reply_json(res, 200, j, e);
}

/* GET routes that are actions: cursor, windows, clipboard, apps; `a` (the
 * action's arguments, from the query; NULL for none) is freed here. */
static int get_action(struct http_request *req, struct http_response *res, const char *name,
		      cJSON *a, struct err *e)
{
	struct desk d;
	struct sandbox *sb;
	if (!a)
		a = cJSON_CreateObject();
	if (!a)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (enter_query(req, &d, &sb, e) < 0) {
		cJSON_Delete(a);
		return err_code(e);
	}
	cJSON *j = cJSON_CreateObject();
	int r = desk_action(&d, name, a, j, e);
	cJSON_Delete(a);
	leave(&d, sb);
	return reply(res, r, j, e);
}

int api_desktop_cursor(struct http_request *req, struct http_response *res, struct err *e)
{
	return get_action(req, res, "cursor", NULL, e);
}

/* GET windows?title=RE&class=RE&pid=N: a search when any is given. */
int api_desktop_windows(struct http_request *req, struct http_response *res, struct err *e)
{
	int64_t pid;
	if (http_query_int(req, "pid", 1, INT32_MAX, 0, 0, &pid, e) < 0)
		return err_code(e);
	cJSON *a = cJSON_CreateObject();
	const char *title = http_query(req, "title"), *cls = http_query(req, "class");
	if (a && title)
		cJSON_AddStringToObject(a, "title", title);
	if (a && cls)
		cJSON_AddStringToObject(a, "class", cls);
	if (a && pid)
		cJSON_AddNumberToObject(a, "pid", (double)pid);
	return get_action(req, res, "windows", a, e);
}

int api_desktop_clipboard(struct http_request *req, struct http_response *res, struct err *e)
{
	return get_action(req, res, "get_clipboard", NULL, e);
}

int api_desktop_apps(struct http_request *req, struct http_response *res, struct err *e)
{
	return get_action(req, res, "apps", NULL, e);
}

/* POST routes whose body is the action's arguments. */
static int post_action(struct http_request *req, struct http_response *res, const char *name,
		       struct err *e)
{
	cJSON *body;
	struct desk d;
	struct sandbox *sb;
	if (enter_json(req, name, &body, &d, &sb, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	int r = desk_action(&d, name, body, j, e);
	leave(&d, sb);
	cJSON_Delete(body);
	return reply(res, r, j, e);
}

/* POST …/desktop/{action}. */
int api_desktop_action(struct http_request *req, struct http_response *res, struct err *e)
{
	const char *name = req->captures[1];
	return post_action(req, res, strcmp(name, "clipboard") == 0 ? "set_clipboard" : name, e);
}

/* POST …/desktop/windows/wait. */
int api_desktop_windows_wait(struct http_request *req, struct http_response *res, struct err *e)
{
	return post_action(req, res, "wait_window", e);
}

/* POST …/desktop/windows/{wid}/{op}. */
int api_desktop_window_op(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	struct desk d;
	struct sandbox *sb;
	char name[32];
	snprintf(name, sizeof(name), "window_%.*s", UTF8_CUT(req->captures[2], 24));
	if (enter_json(req, name, &body, &d, &sb, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	int r = desk_x_action(&d, name, req->captures[1], body, j, e);
	leave(&d, sb);
	cJSON_Delete(body);
	return reply(res, r, j, e);
}

int api_desktop_actions(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	struct desk d;
	struct sandbox *sb;
	if (enter_json(req, "actions", &body, &d, &sb, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	int r = j ? desk_batch(&d, body, j, e) : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	leave(&d, sb);
	cJSON_Delete(body);
	return reply(res, r, j, e);
}

/* OpenAI's ?items=true: the answer is the list of input items to append,
 * the computer_call_output and, after a failed action, a user message that
 * tells the model why. */
static int as_items(cJSON **j, const struct desk_tool *t, struct err *e)
{
	cJSON *list = cJSON_CreateArray();
	cJSON *why = t->failed ? desk_openai_reason_item(t->error) : NULL;
	if (!list || (t->failed && !why)) {
		cJSON_Delete(list);
		cJSON_Delete(why);
		cJSON_Delete(*j);
		*j = NULL;
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	cJSON_AddItemToArray(list, *j);
	if (why)
		cJSON_AddItemToArray(list, why);
	*j = list;
	return 0;
}

/* A true/false query parameter; absent is false. */
static int query_flag(struct http_request *req, const char *name, int *out, struct err *e)
{
	const char *v = http_query(req, name);
	*out = v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
	if (v && !*out && strcmp(v, "false") != 0 && strcmp(v, "0") != 0)
		return err_set(e, ERR_INVALID, EINVAL, "query '%s' must be true or false", name);
	return 0;
}

/* The browser's page URL, where the formats carry one: OpenAI's
 * output.current_url, Gemini's response.url. */
static void add_url(struct http_request *req, cJSON *j, int openai)
{
	/* The browser first (nothing listening answers at once), then
	 * whether its window is the focused one (a deskbox-xtool run). */
	char url[8192];
	if (api_cdp_page_url(req, url, sizeof(url)) < 0)
		return;
	struct desk d;
	struct sandbox *sb;
	struct err e = ERR_INIT;
	if (enter(req, NULL, &d, &sb, &e) < 0)
		return;
	int front = desk_browser_in_front(&d);
	leave(&d, sb);
	if (!front)
		return;
	cJSON *at = cJSON_GetObjectItemCaseSensitive(j, openai ? "output" : "response");
	if (cJSON_IsObject(at))
		cJSON_AddStringToObject(at, openai ? "current_url" : "url", url);
}

/* Anthropic's adapter without a declared agent_display: screenshots at the
 * recommended size for Claude, coordinates mapped back exactly
 * (?fit=false: the real screen). */
static void fit_vendor(struct desk *d, const cJSON *body, const struct sandbox *sb)
{
	uint32_t sw = 0, sh = 0, aw, ah;
	sandbox_agent_display(sb, &sw, &sh);
	if (sw || cJSON_GetObjectItemCaseSensitive(body, "agent_display"))
		return;
	desk_fit(d->w, d->h, DESK_ANTHROPIC_MAX_SIDE, DESK_ANTHROPIC_MAX_PIXELS, &aw, &ah);
	if (aw != d->w || ah != d->h)
		desk_init(d, d->cap, d->procs, aw, ah, d->png_level);
}

/* The tool-format adapters answer with the format's own result, also when
 * the action failed (desktop.h); the frame of its screenshot goes in
 * X-Frame and a failure's reason in X-Action-Error. */
static int adapter(struct http_request *req, struct http_response *res,
		   int (*run)(struct desk *, const cJSON *, cJSON *, struct desk_tool *,
			      struct err *),
		   int items, int ack, int fit, int url, struct err *e)
{
	cJSON *body;
	struct desk d;
	struct sandbox *sb;
	if (enter_json(req, NULL, &body, &d, &sb, e) < 0)
		return err_code(e);
	if (fit)
		fit_vendor(&d, body, sb);
	cJSON *j = cJSON_CreateObject();
	struct desk_tool t = {0};
	t.ack = ack;
	int r = j ? run(&d, body, j, &t, e) : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	leave(&d, sb);
	cJSON_Delete(body);
	if (r == 0 && url)
		add_url(req, j, run == desk_openai);
	if (r == 0 && items)
		r = as_items(&j, &t, e);
	if (reply(res, r, j, e) < 0)
		return err_code(e);
	if (t.frame)
		add_frame_header(res, t.frame);
	if (t.failed) {
		/* Header values are one line of printable text. */
		for (char *p = t.error; *p; p++)
			if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
				*p = ' ';
		http_add_header(res, "X-Action-Error", t.error, NULL);
	}
	return 0;
}

int api_desktop_anthropic(struct http_request *req, struct http_response *res, struct err *e)
{
	int nofit, handled;
	if (api_anthropic_bash(req, res, &handled, e) < 0)
		return err_code(e);
	if (handled)
		return 0;
	const char *f = http_query(req, "fit");
	if (query_flag(req, "fit", &nofit, e) < 0)
		return err_code(e);
	nofit = f && !nofit;
	return adapter(req, res, desk_anthropic, 0, 0, !nofit, 0, e);
}

int api_desktop_openai(struct http_request *req, struct http_response *res, struct err *e)
{
	int items, ack;
	if (query_flag(req, "items", &items, e) < 0 ||
	    query_flag(req, "acknowledge_safety_checks", &ack, e) < 0)
		return err_code(e);
	return adapter(req, res, desk_openai, items, ack, 0, 1, e);
}

int api_desktop_gemini(struct http_request *req, struct http_response *res, struct err *e)
{
	return adapter(req, res, desk_gemini, 0, 0, 0, 1, e);
}

/* GET …/desktop/accessibility?window=&max_depth=&max_nodes=&find=. */
int api_desktop_accessibility(struct http_request *req, struct http_response *res, struct err *e)
{
	int64_t depth, nodes;
	if (http_query_int(req, "max_depth", 0, 1000, 64, 0, &depth, e) < 0 ||
	    http_query_int(req, "max_nodes", 1, 20000, 5000, 0, &nodes, e) < 0)
		return err_code(e);
	struct desk_a11y_query q = {
	    .window = http_query(req, "window"),
	    .find = http_query(req, "find"),
	    .max_depth = (int)depth,
	    .max_nodes = (int)nodes,
	};
	if ((q.window && strlen(q.window) > 500) || (q.find && strlen(q.find) > 500))
		return err_set(e, ERR_INVALID, EINVAL,
			       "queries 'window' and 'find' hold 500 bytes");
	struct desk d;
	struct sandbox *sb;
	if (enter_query(req, &d, &sb, e) < 0)
		return err_code(e);
	cJSON *j = NULL;
	int r = desk_a11y_tree(&d, &q, &j, e);
	leave(&d, sb);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, j, e);
}

/* POST …/desktop/accessibility/{node}/action {"name":"click"}. */
int api_desktop_accessibility_action(struct http_request *req, struct http_response *res,
				     struct err *e)
{
	cJSON *body;
	struct desk d;
	struct sandbox *sb;
	static const char *const fields[] = {"name", "sensitive", "agent_display", NULL};
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	if (args_only(body, NULL, fields, e) < 0) {
		cJSON_Delete(body);
		return err_code(e);
	}
	cJSON_Delete(body);
	if (enter_json(req, NULL, &body, &d, &sb, e) < 0)
		return err_code(e);
	const char *name;
	cJSON *j = NULL;
	int r = args_string(body, "name", 64, 0, &name, e);
	if (r == 0)
		r = desk_a11y_action(&d, req->captures[1], name ? name : "click", &j, e);
	leave(&d, sb);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, j, e);
}
