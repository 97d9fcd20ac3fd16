/* input: event lists, buttons, clicks.  Key names live in keys.c, UTF-8 text
 * in text.c. */
#include "common/text.h"
#include "input.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <X11/keysym.h>

#include "internal.h"

void input_seq_release(struct input_seq *s)
{
	if (!s)
		return;
	free(s->ev);
	s->ev = NULL;
	s->n = s->cap = 0;
}

int input_seq_push(struct input_seq *s, const struct input_event *ev, struct err *e)
{
	if (s->n >= INPUT_SEQ_MAX)
		return err_set(e, ERR_TOO_LARGE, E2BIG, "more than %u input events in one request",
			       INPUT_SEQ_MAX);
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		if (cap > INPUT_SEQ_MAX)
			cap = INPUT_SEQ_MAX;
		struct input_event *p = reallocarray(s->ev, cap, sizeof(*p));
		if (!p)
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory for input events");
		s->ev = p;
		s->cap = cap;
	}
	s->ev[s->n++] = *ev;
	return 0;
}

int input_push_key(struct input_seq *s, uint32_t keysym, int down, struct err *e)
{
	struct input_event ev = {.type = INPUT_KEY, .down = down ? 1 : 0, .keysym = keysym};
	return input_seq_push(s, &ev, e);
}

static const struct {
	const char *name;
	enum input_button button;
} button_names[] = {
    {"left", INPUT_BUTTON_LEFT},
    {"middle", INPUT_BUTTON_MIDDLE},
    {"wheel", INPUT_BUTTON_MIDDLE},
    {"right", INPUT_BUTTON_RIGHT},
    {"wheel_up", INPUT_BUTTON_WHEEL_UP},
    {"wheel_down", INPUT_BUTTON_WHEEL_DOWN},
    {"wheel_left", INPUT_BUTTON_WHEEL_LEFT},
    {"wheel_right", INPUT_BUTTON_WHEEL_RIGHT},
    /* X11 button 8 is "back".  "forward" is button 9, which an RFB button
     * mask (8 bits, buttons 1..8) cannot carry, so it is not accepted. */
    {"back", INPUT_BUTTON_MAX},
};

int input_button_parse(const char *name, enum input_button *out, struct err *e)
{
	if (!name)
		return err_set(e, ERR_INVALID, EINVAL, "missing button name");
	for (size_t i = 0; i < sizeof(button_names) / sizeof(button_names[0]); i++) {
		if (strcasecmp(name, button_names[i].name) == 0) {
			*out = button_names[i].button;
			return 0;
		}
	}
	if (name[0] >= '1' && name[0] <= '8' && name[1] == '\0') {
		*out = (enum input_button)(name[0] - '0');
		return 0;
	}
	if (strcasecmp(name, "forward") == 0)
		return err_set(
		    e, ERR_INVALID, EINVAL,
		    "button 'forward' (9) cannot be sent over rfb, which carries buttons 1-8");
	return err_set(e, ERR_INVALID, EINVAL, "unknown button '%.*s'", UTF8_CUT(name, 64));
}

/* Between the clicks of a double or triple click. */
#define CLICK_REPEAT_PAUSE_MS 50

/* More modifiers than this in one click is a malformed request, not a chord. */
#define CLICK_MODS_MAX 16

int input_seq_click(struct input_seq *s, int32_t x, int32_t y, enum input_button button, int count,
		    const uint32_t *mods, size_t nmods, struct err *e)
{
	if (button < INPUT_BUTTON_LEFT || button > INPUT_BUTTON_MAX)
		return err_set(e, ERR_INVALID, EINVAL, "button %d out of range 1-%d", (int)button,
			       INPUT_BUTTON_MAX);
	if (count < 1 || count > 3)
		return err_set(e, ERR_INVALID, EINVAL, "click count %d out of range 1-3", count);
	if (nmods > CLICK_MODS_MAX)
		return err_set(e, ERR_INVALID, EINVAL, "more than %d modifiers", CLICK_MODS_MAX);
	if (x < 0 || y < 0)
		return err_set(e, ERR_INVALID, EINVAL, "negative coordinates (%d, %d)", x, y);

	struct input_event mv = {.type = INPUT_MOVE, .x = x, .y = y};
	int r = input_seq_push(s, &mv, e);
	for (size_t i = 0; r == 0 && i < nmods; i++)
		r = input_push_key(s, mods[i], 1, e);
	for (int i = 0; r == 0 && i < count; i++) {
		struct input_event b = {.type = INPUT_BUTTON, .down = 1, .button = (uint8_t)button};
		/* x11vnc drops some of several button changes that arrive at
		 * once (measured: a triple click registered as a double); a
		 * short gap keeps each, well inside every toolkit's
		 * double-click interval (xterm 250 ms, GTK and Qt 400 ms). */
		if (i > 0)
			r = input_seq_pause(s, CLICK_REPEAT_PAUSE_MS, e);
		if (r == 0)
			r = input_seq_push(s, &b, e);
		b.down = 0;
		if (r == 0)
			r = input_seq_push(s, &b, e);
	}
	for (size_t i = nmods; r == 0 && i > 0; i--)
		r = input_push_key(s, mods[i - 1], 0, e);
	return r;
}

int input_seq_pause(struct input_seq *s, int32_t ms, struct err *e)
{
	if (ms < 1 || ms > INPUT_PAUSE_MAX_MS)
		return err_set(e, ERR_INVALID, EINVAL, "pause of %d ms out of range 1-%d", ms,
			       INPUT_PAUSE_MAX_MS);
	struct input_event ev = {.type = INPUT_PAUSE, .x = ms};
	return input_seq_push(s, &ev, e);
}

/* Pointer moves one drag may produce; past it the step grows. */
#define DRAG_MAX_MOVES 2000
/* Pauses inside a drag: after the press (toolkits start a drag only once the
 * press was handled), every few moves, and before the release (drop targets
 * need a motion event to settle on). */
#define DRAG_PRESS_PAUSE_MS   40
#define DRAG_MOVE_PAUSE_MS    4
#define DRAG_MOVES_PER_PAUSE  2
#define DRAG_RELEASE_PAUSE_MS 40

static int64_t iabs64(int64_t v)
{
	return v < 0 ? -v : v;
}

int input_seq_drag(struct input_seq *s, const int32_t *xy, size_t npts, enum input_button button,
		   int32_t step, struct err *e)
{
	if (npts < 2)
		return err_set(e, ERR_INVALID, EINVAL, "a drag needs at least 2 points");
	if (button < INPUT_BUTTON_LEFT || button > INPUT_BUTTON_MAX)
		return err_set(e, ERR_INVALID, EINVAL, "button %d out of range 1-%d", (int)button,
			       INPUT_BUTTON_MAX);
	if (step < 1)
		step = 1;
	int64_t total = 0;
	for (size_t i = 0; i < npts; i++) {
		if (xy[2 * i] < 0 || xy[2 * i + 1] < 0)
			return err_set(e, ERR_INVALID, EINVAL, "negative coordinates in point %zu",
				       i);
		if (i > 0) {
			int64_t dx = iabs64((int64_t)xy[2 * i] - xy[2 * i - 2]);
			int64_t dy = iabs64((int64_t)xy[2 * i + 1] - xy[2 * i - 1]);
			total += dx > dy ? dx : dy;
		}
	}
	if (total / step > DRAG_MAX_MOVES)
		step = (int32_t)(total / DRAG_MAX_MOVES + 1);

	struct input_event mv = {.type = INPUT_MOVE, .x = xy[0], .y = xy[1]};
	struct input_event b = {.type = INPUT_BUTTON, .down = 1, .button = (uint8_t)button};
	int r = input_seq_push(s, &mv, e);
	if (r == 0)
		r = input_seq_push(s, &b, e);
	if (r == 0)
		r = input_seq_pause(s, DRAG_PRESS_PAUSE_MS, e);
	int moves = 0;
	for (size_t i = 1; r == 0 && i < npts; i++) {
		int64_t x0 = xy[2 * i - 2], y0 = xy[2 * i - 1];
		int64_t x1 = xy[2 * i], y1 = xy[2 * i + 1];
		int64_t dx = x1 - x0, dy = y1 - y0;
		int64_t len = iabs64(dx) > iabs64(dy) ? iabs64(dx) : iabs64(dy);
		int64_t n = (len + step - 1) / step;
		if (n < 1)
			n = 1;
		for (int64_t k = 1; r == 0 && k <= n; k++) {
			mv.x = (int32_t)(x0 + dx * k / n);
			mv.y = (int32_t)(y0 + dy * k / n);
			r = input_seq_push(s, &mv, e);
			if (r == 0 && ++moves % DRAG_MOVES_PER_PAUSE == 0)
				r = input_seq_pause(s, DRAG_MOVE_PAUSE_MS, e);
		}
	}
	if (r == 0)
		r = input_seq_pause(s, DRAG_RELEASE_PAUSE_MS, e);
	b.down = 0;
	if (r == 0)
		r = input_seq_push(s, &b, e);
	return r;
}

int input_seq_scroll(struct input_seq *s, int32_t x, int32_t y, int32_t dx, int32_t dy,
		     struct err *e)
{
	if (x < 0 || y < 0)
		return err_set(e, ERR_INVALID, EINVAL, "negative coordinates (%d, %d)", x, y);
	if (dx < -INPUT_SCROLL_MAX || dx > INPUT_SCROLL_MAX || dy < -INPUT_SCROLL_MAX ||
	    dy > INPUT_SCROLL_MAX)
		return err_set(e, ERR_INVALID, EINVAL, "scroll amount out of range -%d-%d",
			       INPUT_SCROLL_MAX, INPUT_SCROLL_MAX);
	struct input_event mv = {.type = INPUT_MOVE, .x = x, .y = y};
	int r = input_seq_push(s, &mv, e);
	int32_t counts[2] = {dy, dx};
	for (int axis = 0; axis < 2; axis++) {
		int32_t c = counts[axis];
		if (c == 0)
			continue;
		/* Buttons 6/7 sideways, as xdotool and X11 applications
		 * know them (the default deskbox-vnc passes them on). */
		struct input_event b = {.type = INPUT_BUTTON};
		if (axis == 0)
			b.button =
			    (uint8_t)(c < 0 ? INPUT_BUTTON_WHEEL_UP : INPUT_BUTTON_WHEEL_DOWN);
		else
			b.button =
			    (uint8_t)(c < 0 ? INPUT_BUTTON_WHEEL_LEFT : INPUT_BUTTON_WHEEL_RIGHT);
		for (int32_t i = 0; r == 0 && i < (c < 0 ? -c : c); i++) {
			b.down = 1;
			r = input_seq_push(s, &b, e);
			b.down = 0;
			if (r == 0)
				r = input_seq_push(s, &b, e);
		}
	}
	return r;
}

static int is_pointer(const struct input_event *ev)
{
	return ev->type == INPUT_MOVE || ev->type == INPUT_BUTTON;
}

int input_seq_ordered(const struct input_seq *in, struct input_seq *out, int32_t ms, struct err *e)
{
	const struct input_event *prev = NULL;
	for (size_t i = 0; i < in->n; i++) {
		const struct input_event *ev = &in->ev[i];
		if (ev->type == INPUT_PAUSE) {
			prev = NULL; /* already separated */
		} else if (prev && ms > 0 &&
			   (is_pointer(prev) != is_pointer(ev) ||
			    (prev->type == INPUT_MOVE && ev->type == INPUT_BUTTON && !ev->down))) {
			int r = input_seq_pause(out, ms, e);
			if (r < 0)
				return r;
		}
		int r = input_seq_push(out, ev, e);
		if (r < 0)
			return r;
		if (ev->type != INPUT_PAUSE)
			prev = ev;
	}
	return 0;
}

int32_t input_map_coord(int32_t v, uint32_t from, uint32_t to)
{
	if (from == 0 || to == 0 || v < 0)
		return 0;
	if (from == to)
		return v < (int64_t)to ? v : (int32_t)(to - 1);
	/* floor((v + 0.5) * to / from) in integers. */
	int64_t r = ((int64_t)2 * v + 1) * (int64_t)to / ((int64_t)2 * from);
	if (r > (int64_t)to - 1)
		r = (int64_t)to - 1;
	return (int32_t)r;
}
