/* input: event lists, buttons, clicks.  Key names live in keys.c, UTF-8 text
 * in text.c. */
#include "input.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
	return err_set(e, ERR_INVALID, EINVAL, "unknown button '%.64s'", name);
}

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
		r = input_seq_push(s, &b, e);
		b.down = 0;
		if (r == 0)
			r = input_seq_push(s, &b, e);
	}
	for (size_t i = nmods; r == 0 && i > 0; i--)
		r = input_push_key(s, mods[i - 1], 0, e);
	return r;
}
