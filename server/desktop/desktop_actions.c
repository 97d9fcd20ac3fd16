/* The pointer, keyboard and wait actions and what they share: entering a
 * sandbox's desktop, coordinate mapping, sending paced input. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/clock.h"
#include "input/input.h"
#include "common/args.h"
#include "desktop.h"
#include "internal.h"

#define TYPE_TEXT_MAX	  (256u * 1024u)
#define MAX_MODIFIERS	  8
#define DRAG_MAX_POINTS	  1024
#define DRAG_STEP_PX	  8
#define HOLD_MAX_MS	  DESK_MAX_WAIT_MS
#define TYPE_MAX_DELAY_MS 1000
/* Where key and pointer events meet (input_seq_ordered). */
#define ORDER_PAUSE_MS 20

int desk_parse_agent_display(const cJSON *obj, uint32_t *w, uint32_t *h, struct err *e)
{
	*w = *h = 0;
	const cJSON *ad = cJSON_GetObjectItemCaseSensitive(obj, "agent_display");
	if (!ad || cJSON_IsNull(ad))
		return 0;
	if (!cJSON_IsObject(ad))
		return err_set(e, ERR_INVALID, EINVAL, "field 'agent_display' must be an object");
	static const char *const fields[] = {"width", "height", NULL};
	if (args_only(ad, "agent_display", fields, e) < 0)
		return err_code(e);
	int64_t vw, vh;
	if (args_int(ad, "width", 64, 8192, 0, ARGS_REQUIRED, &vw, e) < 0 ||
	    args_int(ad, "height", 64, 8192, 0, ARGS_REQUIRED, &vh, e) < 0)
		return err_wrap(e, "agent_display");
	*w = (uint32_t)vw;
	*h = (uint32_t)vh;
	return 0;
}

void desk_init(struct desk *d, struct capture *cap, struct process_table *procs, uint32_t aw,
	       uint32_t ah, int png_level)
{
	memset(d, 0, sizeof(*d));
	d->cap = cap;
	d->procs = procs;
	d->png_level = png_level;
	d->w = capture_width(cap);
	d->h = capture_height(cap);
	d->aw = aw ? aw : d->w;
	d->ah = ah ? ah : d->h;
}

void desk_to_real(const struct desk *d, int32_t ax, int32_t ay, int32_t *x, int32_t *y)
{
	*x = input_map_coord(ax, d->aw, d->w);
	*y = input_map_coord(ay, d->ah, d->h);
}

void desk_to_agent(const struct desk *d, int32_t x, int32_t y, int32_t *ax, int32_t *ay)
{
	*ax = input_map_coord(x, d->w, d->aw);
	*ay = input_map_coord(y, d->h, d->ah);
}

int desk_send(struct desk *d, const struct input_seq *seq, struct err *e)
{
	int64_t paused = 0;
	for (size_t i = 0; i < seq->n; i++)
		if (seq->ev[i].type == INPUT_PAUSE)
			paused += seq->ev[i].x;
	if (paused > DESK_MAX_WAIT_MS)
		return err_set(e, ERR_INVALID, EINVAL,
			       "the requested pacing takes %lld ms, more than the %d ms an action "
			       "may take",
			       (long long)paused, DESK_MAX_WAIT_MS);
	struct input_seq ordered = {0};
	int r = input_seq_ordered(seq, &ordered, ORDER_PAUSE_MS, e);
	if (r == 0)
		r = capture_send(d->cap, ordered.ev, ordered.n, e);
	input_seq_release(&ordered);
	return r;
}

/* A point in agent space, mapped to the real screen.  With `optional` and
 * neither field given, where the pointer really is (*given = 0). */
static int parse_point(struct desk *d, const cJSON *a, int optional, int32_t *x, int32_t *y,
		       int *given, struct err *e)
{
	const cJSON *jx = cJSON_GetObjectItemCaseSensitive(a, "x");
	const cJSON *jy = cJSON_GetObjectItemCaseSensitive(a, "y");
	if (optional && !jx && !jy) {
		if (desk_x_pointer(d, x, y, e) < 0)
			return err_code(e);
		if (given)
			*given = 0;
		return 0;
	}
	int64_t vx, vy;
	if (args_int(a, "x", 0, (int64_t)d->aw - 1, 0, ARGS_REQUIRED, &vx, e) < 0 ||
	    args_int(a, "y", 0, (int64_t)d->ah - 1, 0, ARGS_REQUIRED, &vy, e) < 0)
		return err_code(e);
	desk_to_real(d, (int32_t)vx, (int32_t)vy, x, y);
	if (given)
		*given = 1;
	return 0;
}

static int parse_button(const cJSON *a, enum input_button *b, struct err *e)
{
	const char *name;
	*b = INPUT_BUTTON_LEFT;
	if (args_string(a, "button", 32, 0, &name, e) < 0)
		return err_code(e);
	return name ? input_button_parse(name, b, e) : 0;
}

/* "modifiers": a list of key names or one combination "ctrl+shift". */
static int parse_mods(const cJSON *a, uint32_t *mods, size_t *n, struct err *e)
{
	*n = 0;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(a, "modifiers");
	if (!m || cJSON_IsNull(m))
		return 0;
	if (cJSON_IsString(m)) {
		struct input_seq tmp = {0};
		int r = m->valuestring[0] ? input_seq_keys_dir(&tmp, m->valuestring, 1, e) : 0;
		for (size_t i = 0; r == 0 && i < tmp.n; i++) {
			if (*n >= MAX_MODIFIERS) {
				r = err_set(e, ERR_INVALID, E2BIG, "more than %d modifiers",
					    MAX_MODIFIERS);
				break;
			}
			mods[(*n)++] = tmp.ev[i].keysym;
		}
		input_seq_release(&tmp);
		return r < 0 ? err_wrap(e, "modifiers") : 0;
	}
	if (!cJSON_IsArray(m))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'modifiers' must be an array of key names");
	const cJSON *it;
	cJSON_ArrayForEach(it, m)
	{
		if (*n >= MAX_MODIFIERS)
			return err_set(e, ERR_INVALID, E2BIG, "more than %d modifiers",
				       MAX_MODIFIERS);
		if (!cJSON_IsString(it))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'modifiers' must hold strings");
		if (input_keysym_parse(it->valuestring, &mods[*n], e) < 0)
			return err_wrap(e, "modifiers");
		(*n)++;
	}
	return 0;
}

static int push_mods(struct input_seq *s, const uint32_t *mods, size_t n, int down, struct err *e)
{
	int r = 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct input_event ev = {.type = INPUT_KEY,
					 .down = (uint8_t)down,
					 .keysym = down ? mods[i] : mods[n - 1 - i]};
		r = input_seq_push(s, &ev, e);
	}
	return r;
}

static int build_move(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	int32_t x, y;
	uint32_t mods[MAX_MODIFIERS];
	size_t nmods;
	if (parse_point(d, a, 0, &x, &y, NULL, e) < 0 || parse_mods(a, mods, &nmods, e) < 0)
		return err_code(e);
	struct input_event ev = {.type = INPUT_MOVE, .x = x, .y = y};
	int r = push_mods(s, mods, nmods, 1, e);
	if (r == 0)
		r = input_seq_push(s, &ev, e);
	if (r == 0)
		r = push_mods(s, mods, nmods, 0, e);
	return r;
}

static int build_click(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	int32_t x, y;
	enum input_button b;
	int64_t count;
	uint32_t mods[MAX_MODIFIERS];
	size_t nmods;
	if (parse_point(d, a, 1, &x, &y, NULL, e) < 0 || parse_button(a, &b, e) < 0 ||
	    args_int(a, "count", 1, 3, 1, 0, &count, e) < 0 || parse_mods(a, mods, &nmods, e) < 0)
		return err_code(e);
	return input_seq_click(s, x, y, b, (int)count, mods, nmods, e);
}

static int build_button(struct desk *d, const cJSON *a, struct input_seq *s, int down,
			struct err *e)
{
	int32_t x, y;
	int given;
	enum input_button b;
	if (parse_point(d, a, 1, &x, &y, &given, e) < 0 || parse_button(a, &b, e) < 0)
		return err_code(e);
	struct input_event mv = {.type = INPUT_MOVE, .x = x, .y = y};
	if (given && input_seq_push(s, &mv, e) < 0)
		return err_code(e);
	struct input_event ev = {.type = INPUT_BUTTON, .down = (uint8_t)down, .button = (uint8_t)b};
	return input_seq_push(s, &ev, e);
}

static int build_mouse_down(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	return build_button(d, a, s, 1, e);
}

static int build_mouse_up(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	return build_button(d, a, s, 0, e);
}

static int build_drag(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	const cJSON *path = cJSON_GetObjectItemCaseSensitive(a, "path");
	int n = cJSON_IsArray(path) ? cJSON_GetArraySize(path) : 0;
	if (n < 2 || n > DRAG_MAX_POINTS)
		return err_set(
		    e, ERR_INVALID, EINVAL,
		    "field 'path' must be an array of 2-%d points [x,y] or {\"x\",\"y\"}",
		    DRAG_MAX_POINTS);
	enum input_button b;
	uint32_t mods[MAX_MODIFIERS];
	size_t nmods;
	if (parse_button(a, &b, e) < 0 || parse_mods(a, mods, &nmods, e) < 0)
		return err_code(e);
	int32_t xy[2 * DRAG_MAX_POINTS];
	int i = 0;
	const cJSON *p;
	cJSON_ArrayForEach(p, path)
	{
		const cJSON *jx, *jy;
		if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 2) {
			jx = cJSON_GetArrayItem(p, 0);
			jy = cJSON_GetArrayItem(p, 1);
		} else if (cJSON_IsObject(p)) {
			static const char *const point[] = {"x", "y", NULL};
			char where[32];
			snprintf(where, sizeof(where), "path[%d]", i);
			if (args_only(p, where, point, e) < 0)
				return err_code(e);
			jx = cJSON_GetObjectItemCaseSensitive(p, "x");
			jy = cJSON_GetObjectItemCaseSensitive(p, "y");
		} else {
			return err_set(e, ERR_INVALID, EINVAL, "path[%d] must be [x,y] or {x,y}",
				       i);
		}
		if (!cJSON_IsNumber(jx) || !cJSON_IsNumber(jy) || jx->valuedouble < 0 ||
		    jy->valuedouble < 0 || jx->valuedouble > d->aw - 1 ||
		    jy->valuedouble > d->ah - 1 ||
		    jx->valuedouble != (double)(int)jx->valuedouble ||
		    jy->valuedouble != (double)(int)jy->valuedouble)
			return err_set(e, ERR_INVALID, EINVAL,
				       "path[%d] must be integers within 0-%u, 0-%u", i, d->aw - 1,
				       d->ah - 1);
		desk_to_real(d, (int32_t)jx->valuedouble, (int32_t)jy->valuedouble, &xy[2 * i],
			     &xy[2 * i + 1]);
		i++;
	}
	int r = push_mods(s, mods, nmods, 1, e);
	if (r == 0)
		r = input_seq_drag(s, xy, (size_t)n, b, DRAG_STEP_PX, e);
	if (r == 0)
		r = push_mods(s, mods, nmods, 0, e);
	return r;
}

static int build_scroll(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	static const char *const dirs[] = {"up", "down", "left", "right", NULL};
	int32_t x, y;
	int dir;
	int64_t dx, dy, amount;
	uint32_t mods[MAX_MODIFIERS];
	size_t nmods;
	if (parse_point(d, a, 1, &x, &y, NULL, e) < 0 ||
	    args_enum(a, "direction", dirs, -1, 0, &dir, e) < 0 ||
	    args_int(a, "amount", 0, INPUT_SCROLL_MAX, 3, 0, &amount, e) < 0 ||
	    args_int(a, "dx", -INPUT_SCROLL_MAX, INPUT_SCROLL_MAX, 0, 0, &dx, e) < 0 ||
	    args_int(a, "dy", -INPUT_SCROLL_MAX, INPUT_SCROLL_MAX, 0, 0, &dy, e) < 0 ||
	    parse_mods(a, mods, &nmods, e) < 0)
		return err_code(e);
	if (dir >= 0) {
		if (cJSON_GetObjectItemCaseSensitive(a, "dx") ||
		    cJSON_GetObjectItemCaseSensitive(a, "dy"))
			return err_set(e, ERR_INVALID, EINVAL,
				       "give either 'direction' and 'amount' or 'dx'/'dy'");
		dx = dir == 2 ? -amount : dir == 3 ? amount : 0;
		dy = dir == 0 ? -amount : dir == 1 ? amount : 0;
	}
	int r = push_mods(s, mods, nmods, 1, e);
	if (r == 0)
		r = input_seq_scroll(s, x, y, (int32_t)dx, (int32_t)dy, e);
	if (r == 0)
		r = push_mods(s, mods, nmods, 0, e);
	return r;
}

/* "keys": one string or a non-empty list of strings. */
static int for_each_keys(const cJSON *a, struct input_seq *s, int dir, struct err *e)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(a, "keys");
	if (cJSON_IsString(k))
		return dir < 0 ? input_seq_keys(s, k->valuestring, e)
			       : input_seq_keys_dir(s, k->valuestring, dir, e);
	if (cJSON_IsArray(k) && cJSON_GetArraySize(k) > 0) {
		const cJSON *it;
		cJSON_ArrayForEach(it, k)
		{
			if (!cJSON_IsString(it))
				return err_set(e, ERR_INVALID, EINVAL,
					       "field 'keys' must hold strings");
			int r = dir < 0 ? input_seq_keys(s, it->valuestring, e)
					: input_seq_keys_dir(s, it->valuestring, dir, e);
			if (r < 0)
				return r;
		}
		return 0;
	}
	return err_set(e, ERR_INVALID, EINVAL,
		       "field 'keys' must be a key combination like \"ctrl+shift+t\" or a "
		       "non-empty list of them");
}

static int build_key(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	return for_each_keys(a, s, -1, e);
}

static int build_key_down(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	return for_each_keys(a, s, 1, e);
}

static int build_key_up(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	return for_each_keys(a, s, 0, e);
}

static int build_hold_key(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	int64_t ms;
	if (args_int(a, "duration_ms", 0, HOLD_MAX_MS, 0, ARGS_REQUIRED, &ms, e) < 0)
		return err_code(e);
	int r = for_each_keys(a, s, 1, e);
	if (r == 0 && ms > 0)
		r = input_seq_pause(s, (int32_t)ms, e);
	if (r == 0)
		r = for_each_keys(a, s, 0, e);
	return r;
}

static int build_type_text(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e)
{
	const char *text;
	int64_t delay;
	if (args_string(a, "text", TYPE_TEXT_MAX, ARGS_REQUIRED, &text, e) < 0 ||
	    args_int(a, "delay_ms", 0, TYPE_MAX_DELAY_MS, 0, 0, &delay, e) < 0)
		return err_code(e);
	return input_seq_text_paced(s, text, strlen(text), (int32_t)delay, e);
}

typedef int (*build_fn)(struct desk *d, const cJSON *a, struct input_seq *s, struct err *e);

static const struct {
	const char *name;
	build_fn build;
} input_actions[] = {
    {"move", build_move},	  {"click", build_click},	  {"mouse_down", build_mouse_down},
    {"mouse_up", build_mouse_up}, {"drag", build_drag},		  {"scroll", build_scroll},
    {"key", build_key},		  {"hold_key", build_hold_key},	  {"key_down", build_key_down},
    {"key_up", build_key_up},	  {"type_text", build_type_text},
};

/* The pointer where it really is (programs and viewers move it too). */
static int add_pointer(struct desk *d, cJSON *out, struct err *e)
{
	int32_t x, y, ax, ay;
	if (desk_x_pointer(d, &x, &y, e) < 0)
		return err_code(e);
	desk_to_agent(d, x, y, &ax, &ay);
	cJSON_AddNumberToObject(out, "x", ax);
	cJSON_AddNumberToObject(out, "y", ay);
	return 0;
}

/* A click with button "forward" (X button 9), which RFB cannot carry. */
static int click_forward(struct desk *d, const cJSON *a, cJSON *out, struct err *e)
{
	int32_t x, y;
	int64_t count;
	uint32_t mods[MAX_MODIFIERS];
	size_t nmods;
	if (parse_point(d, a, 1, &x, &y, NULL, e) < 0 ||
	    args_int(a, "count", 1, 3, 1, 0, &count, e) < 0 || parse_mods(a, mods, &nmods, e) < 0)
		return err_code(e);
	if (desk_x_click(d, x, y, DESK_BUTTON_FORWARD, (int)count, mods, nmods, e) < 0)
		return err_code(e);
	cJSON_AddNumberToObject(out, "events", (double)(2 * count + 1 + 2 * nmods));
	cJSON_AddNumberToObject(out, "frame", (double)capture_frame(d->cap));
	return 0;
}

static int is_forward(const cJSON *a)
{
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(a, "button");
	return cJSON_IsString(b) && strcasecmp(b->valuestring, "forward") == 0;
}

static int run_action(struct desk *d, const char *name, const cJSON *args, cJSON *out,
		      struct err *e)
{
	if (strcmp(name, "click") == 0 && is_forward(args))
		return click_forward(d, args, out, e);
	for (size_t i = 0; i < sizeof(input_actions) / sizeof(input_actions[0]); i++) {
		if (strcmp(name, input_actions[i].name) != 0)
			continue;
		struct input_seq seq = {0};
		int r = input_actions[i].build(d, args, &seq, e);
		if (r == 0)
			r = desk_send(d, &seq, e);
		if (r == 0) {
			size_t n = 0;
			for (size_t k = 0; k < seq.n; k++)
				n += seq.ev[k].type != INPUT_PAUSE;
			cJSON_AddNumberToObject(out, "events", (double)n);
			cJSON_AddNumberToObject(out, "frame", (double)capture_frame(d->cap));
		}
		input_seq_release(&seq);
		return r;
	}
	if (strcmp(name, "wait") == 0)
		return desk_wait(d, args, out, e);
	if (strcmp(name, "cursor") == 0)
		return add_pointer(d, out, e);
	return desk_x_action(d, name, NULL, args, out, e);
}

/* The one place every action passes (desktop.h: observation). */
int desk_action(struct desk *d, const char *name, const cJSON *args, cJSON *out, struct err *e)
{
	struct desk_obs_act a;
	if (desk_obs_begin(d, name, &a, e) < 0)
		return err_code(e);
	int r = run_action(d, name, args, out, e);
	desk_obs_end(d, &a, args, r, e);
	return r;
}

/* ---- waiting on the screen ---- */

int desk_wait(struct desk *d, const cJSON *a, cJSON *out, struct err *e)
{
	static const char *const untils[] = {"stable", "change", NULL};
	int until;
	int64_t ms, quiet, timeout, since;
	uint64_t t0 = clock_mono_ns();
	if (args_enum(a, "until", untils, -1, 0, &until, e) < 0 ||
	    args_int(a, "ms", 0, DESK_MAX_WAIT_MS, 0, 0, &ms, e) < 0 ||
	    args_int(a, "quiet_ms", 1, DESK_MAX_WAIT_MS, 300, 0, &quiet, e) < 0 ||
	    args_int(a, "timeout_ms", 0, DESK_MAX_WAIT_MS, 10000, 0, &timeout, e) < 0 ||
	    args_int(a, "since_frame", 0, INT64_MAX / 2, (int64_t)capture_frame(d->cap), 0, &since,
		     e) < 0)
		return err_code(e);
	int timed_out = 0;
	if (until < 0) {
		if (!cJSON_GetObjectItemCaseSensitive(a, "ms"))
			return err_set(e, ERR_INVALID, EINVAL,
				       "give 'until' (\"stable\" or \"change\") or 'ms'");
		clock_sleep_ms(ms);
	} else if (until == 1) {
		int r = capture_wait_frame(d->cap, (uint64_t)since, (int)timeout, e);
		if (r < 0)
			return err_wrap(e, "waiting for a change");
		timed_out = r == 0;
	} else {
		/* Quiet is counted from the later of the last change and the
		 * start of the wait: an action just sent has not drawn yet,
		 * so an earlier quiet spell proves nothing about it. */
		uint64_t deadline = t0 + (uint64_t)timeout * 1000000u;
		uint64_t qns = (uint64_t)quiet * 1000000u;
		for (;;) {
			uint64_t frame = capture_frame(d->cap);
			uint64_t now = clock_mono_ns();
			/* Written by the bridge: never in the future. */
			uint64_t last = capture_last_change_ns(d->cap);
			if (last > now)
				last = now;
			uint64_t from = last > t0 ? last : t0;
			if (now - from >= qns)
				break;
			if (now >= deadline) {
				timed_out = 1;
				break;
			}
			uint64_t left = qns - (now - from);
			if (left > deadline - now)
				left = deadline - now;
			int r = capture_wait_frame(d->cap, frame, (int)(left / 1000000u) + 1, e);
			if (r < 0)
				return err_wrap(e, "waiting for the screen to settle");
		}
	}
	cJSON_AddNumberToObject(out, "frame", (double)capture_frame(d->cap));
	cJSON_AddNumberToObject(out, "waited_ms", (double)((clock_mono_ns() - t0) / 1000000u));
	cJSON_AddBoolToObject(out, "timed_out", timed_out);
	return 0;
}
