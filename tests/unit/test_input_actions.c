/* The action builders added for the computer-use set: pauses, paced text,
 * drags, scrolling, coordinate mapping. */
#include <X11/keysym.h>
#include <stdlib.h>
#include <string.h>

#include "input/input.h"
#include "tests/harness.h"

static size_t count(const struct input_seq *s, int type)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n; i++)
		n += s->ev[i].type == type;
	return n;
}

int main(void)
{
	struct err e = ERR_INIT;
	struct input_seq s = {0};

	/* pauses */
	ok(input_seq_pause(&s, 10, &e) == 0 && s.n == 1 && s.ev[0].type == INPUT_PAUSE &&
	       s.ev[0].x == 10,
	   "pause event");
	ok(input_seq_pause(&s, 0, &e) < 0 && e.kind == ERR_INVALID, "zero pause rejected");
	ok(input_seq_pause(&s, INPUT_PAUSE_MAX_MS + 1, &e) < 0, "huge pause rejected");
	input_seq_release(&s);

	/* paced text: one pause after each character, none without delay */
	ok(input_seq_text_paced(&s, "aé\n", 4, 7, &e) == 0, "paced text");
	is_int(count(&s, INPUT_KEY), 6, "three characters, six key events");
	is_int(count(&s, INPUT_PAUSE), 3, "a pause after each");
	ok(s.ev[2].type == INPUT_PAUSE && s.ev[2].x == 7, "pause follows the release");
	input_seq_release(&s);
	ok(input_seq_text_paced(&s, "ab", 2, 0, &e) == 0 && count(&s, INPUT_PAUSE) == 0,
	   "no delay, no pauses");
	input_seq_release(&s);

	/* drags: move, press, interpolated moves no more than `step` apart,
	 * release at the end point */
	int32_t path[] = {10, 10, 110, 10, 110, 60};
	ok(input_seq_drag(&s, path, 3, INPUT_BUTTON_LEFT, 10, &e) == 0, "drag");
	ok(s.ev[0].type == INPUT_MOVE && s.ev[0].x == 10 && s.ev[0].y == 10, "starts with a move");
	ok(s.ev[1].type == INPUT_BUTTON && s.ev[1].down && s.ev[1].button == 1, "then a press");
	ok(s.ev[s.n - 1].type == INPUT_BUTTON && !s.ev[s.n - 1].down, "ends with the release");
	int32_t px = 10, py = 10, maxstep = 0, lastx = 0, lasty = 0;
	for (size_t i = 1; i < s.n; i++) {
		if (s.ev[i].type != INPUT_MOVE)
			continue;
		int32_t dx = abs(s.ev[i].x - px), dy = abs(s.ev[i].y - py);
		maxstep = dx > maxstep ? dx : maxstep;
		maxstep = dy > maxstep ? dy : maxstep;
		px = lastx = s.ev[i].x;
		py = lasty = s.ev[i].y;
	}
	ok(maxstep <= 10, "moves are at most one step apart");
	ok(lastx == 110 && lasty == 60, "the last move is the end point");
	is_int(count(&s, INPUT_MOVE), 1 + 10 + 5, "100 + 50 pixels in steps of 10");
	ok(count(&s, INPUT_PAUSE) > 3, "paced");
	input_seq_release(&s);
	int32_t one[] = {1, 1};
	ok(input_seq_drag(&s, one, 1, INPUT_BUTTON_LEFT, 8, &e) < 0, "one point is no drag");
	int32_t neg[] = {1, 1, -1, 5};
	ok(input_seq_drag(&s, neg, 2, INPUT_BUTTON_LEFT, 8, &e) < 0, "negative point rejected");
	int32_t far[] = {0, 0, 1000000, 0};
	ok(input_seq_drag(&s, far, 2, INPUT_BUTTON_LEFT, 1, &e) == 0 &&
	       count(&s, INPUT_MOVE) <= 2002,
	   "long drags are capped in events");
	input_seq_release(&s);
	int32_t same[] = {5, 5, 5, 5};
	ok(input_seq_drag(&s, same, 2, INPUT_BUTTON_RIGHT, 8, &e) == 0 &&
	       s.ev[1].button == INPUT_BUTTON_RIGHT,
	   "zero-length drag with the right button");
	input_seq_release(&s);

	/* scrolling: vertical wheel clicks; sideways buttons 6/7 */
	ok(input_seq_scroll(&s, 3, 4, 0, 2, &e) == 0, "scroll down 2");
	ok(s.n == 5 && s.ev[1].button == INPUT_BUTTON_WHEEL_DOWN && s.ev[1].down && !s.ev[2].down,
	   "two wheel-down clicks");
	input_seq_release(&s);
	ok(input_seq_scroll(&s, 3, 4, -1, -1, &e) == 0, "scroll up-left");
	ok(s.n == 5 && s.ev[1].button == INPUT_BUTTON_WHEEL_UP &&
	       s.ev[3].button == INPUT_BUTTON_WHEEL_LEFT && s.ev[3].down && !s.ev[4].down,
	   "left is button 6, no key");
	input_seq_release(&s);
	ok(input_seq_scroll(&s, 3, 4, 2, 0, &e) == 0 && s.n == 5 &&
	       s.ev[1].button == INPUT_BUTTON_WHEEL_RIGHT &&
	       s.ev[3].button == INPUT_BUTTON_WHEEL_RIGHT,
	   "right is button 7");
	input_seq_release(&s);
	ok(input_seq_scroll(&s, 0, 0, 0, INPUT_SCROLL_MAX + 1, &e) < 0, "scroll amount capped");
	ok(input_seq_scroll(&s, -1, 0, 0, 1, &e) < 0, "negative position rejected");
	input_seq_release(&s);

	/* ordering pauses: key <-> pointer, and move -> release */
	struct input_seq o = {0};
	uint32_t mods[] = {XK_Control_L};
	ok(input_seq_click(&s, 1, 2, INPUT_BUTTON_LEFT, 1, mods, 1, &e) == 0 &&
	       input_seq_ordered(&s, &o, 9, &e) == 0,
	   "ordered click");
	/* move, +ctrl, press, release, -ctrl: pauses after the move (pointer ->
	 * key), after +ctrl and after the release. */
	is_int(count(&o, INPUT_PAUSE), 3, "three boundaries");
	ok(o.ev[1].type == INPUT_PAUSE && o.ev[1].x == 9, "pause value");
	input_seq_release(&s);
	input_seq_release(&o);
	int32_t dp[] = {0, 0, 20, 0};
	ok(input_seq_drag(&s, dp, 2, INPUT_BUTTON_LEFT, 10, &e) == 0 &&
	       input_seq_ordered(&s, &o, 9, &e) == 0,
	   "ordered drag");
	ok(o.ev[o.n - 1].type == INPUT_BUTTON && !o.ev[o.n - 1].down &&
	       o.ev[o.n - 2].type == INPUT_PAUSE,
	   "the release comes after a pause");
	is_int(count(&o, INPUT_MOVE), count(&s, INPUT_MOVE), "nothing lost");
	input_seq_release(&s);
	input_seq_release(&o);
	ok(input_seq_text(&s, "ab", 2, &e) == 0 && input_seq_ordered(&s, &o, 9, &e) == 0 &&
	       count(&o, INPUT_PAUSE) == 0,
	   "typing alone gets no pauses");
	input_seq_release(&s);
	input_seq_release(&o);

	/* coordinate mapping */
	is_int(input_map_coord(0, 640, 1280), 1, "a 2x2 block maps to its centre");
	is_int(input_map_coord(320, 640, 1280), 641, "middle to middle");
	is_int(input_map_coord(0, 1280, 640), 0, "origin to origin when shrinking");
	is_int(input_map_coord(639, 640, 1280), 1279, "last to last (pixel centre)");
	is_int(input_map_coord(1279, 1280, 640), 639, "and back");
	is_int(input_map_coord(100, 1024, 1280), 125, "1024 -> 1280");
	is_int(input_map_coord(5000, 1280, 1280), 1279, "clamped");
	is_int(input_map_coord(-3, 100, 200), 0, "negative clamped");
	is_int(input_map_coord(7, 0, 200), 0, "zero-size axis is safe");
	int32_t first_bad = -1;
	for (int32_t v = 0; v < 800 && first_bad < 0; v++)
		if (input_map_coord(input_map_coord(v, 800, 1600), 1600, 800) != v)
			first_bad = v;
	is_int(first_bad, -1, "round trip through a 2x larger screen");
	return done();
}
