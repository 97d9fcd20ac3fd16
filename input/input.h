/* input: turning agent intents into pointer and keyboard events.
 *
 * Pure functions, no I/O: key names and combinations ("ctrl+shift+t") become
 * keysyms, UTF-8 text becomes key presses with Unicode keysyms, clicks become
 * move/press/release sequences.  The events are carried to the sandbox's VNC
 * server by the capture bridge (capture/capture.h), which keeps the pointer
 * position and button mask and turns them into RFB PointerEvent / KeyEvent.
 */
#ifndef DESKBOX_INPUT_H
#define DESKBOX_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

enum input_type {
	INPUT_MOVE = 1,	  /* pointer to (x, y) */
	INPUT_BUTTON = 2, /* button `button` pressed (down=1) or released (down=0) at the pointer */
	INPUT_KEY = 3,	  /* key `keysym` pressed (down=1) or released (down=0) */
	/* Not sent to the VNC server: whoever sends the sequence waits `x`
	 * milliseconds before the events that follow (pacing for typing,
	 * held keys and drags).  The bridge ignores it. */
	INPUT_PAUSE = 4,
};

/* X11/RFB button numbers: 1 left, 2 middle, 3 right, 4/5 wheel up/down,
 * 6/7 wheel left/right, 8/9 back/forward (RFB masks carry buttons 1..8). */
enum input_button {
	INPUT_BUTTON_LEFT = 1,
	INPUT_BUTTON_MIDDLE = 2,
	INPUT_BUTTON_RIGHT = 3,
	INPUT_BUTTON_WHEEL_UP = 4,
	INPUT_BUTTON_WHEEL_DOWN = 5,
	INPUT_BUTTON_WHEEL_LEFT = 6,
	INPUT_BUTTON_WHEEL_RIGHT = 7,
	INPUT_BUTTON_MAX = 8,
};

/* One event; fixed size so it can cross the bridge's socket as is. */
struct input_event {
	uint8_t type; /* enum input_type */
	uint8_t down;
	uint8_t button; /* enum input_button, for INPUT_BUTTON */
	uint8_t pad;
	int32_t x, y;	 /* for INPUT_MOVE */
	uint32_t keysym; /* for INPUT_KEY */
};

/* A growable list of events.  Zero-initialise; free with input_seq_release(). */
struct input_seq {
	struct input_event *ev;
	size_t n, cap;
};

/* Upper bound on events one request may produce (type_text of a long text is
 * two events per character); past it the builders fail with ERR_TOO_LARGE. */
#define INPUT_SEQ_MAX (1u << 20)

void input_seq_release(struct input_seq *s);

/* Appends one event.  Returns 0 or a negative code (ENOMEM, or the cap). */
int input_seq_push(struct input_seq *s, const struct input_event *ev, struct err *e);

/* Parses a button name: "left", "middle", "right" (also "wheel"/"back"/
 * "forward" aliases).  Returns 0 or -EINVAL with ERR_INVALID in `e`. */
int input_button_parse(const char *name, enum input_button *out, struct err *e);

/* Resolves one key name to a keysym: xdotool/X11 names ("Return", "a",
 * "F5", "KP_Enter", "XF86AudioMute", "0xff0d"), common aliases ("ctrl",
 * "alt", "shift", "super"/"win"/"cmd"/"meta", "enter", "esc", "del", "bksp",
 * "pgup", "pagedown", "up", ...) case-insensitively for aliases, and a single
 * UTF-8 character ("é", "你").  Returns 0 or -EINVAL with ERR_INVALID. */
int input_keysym_parse(const char *name, uint32_t *keysym, struct err *e);

/* Appends presses and releases for a key combination or a sequence of them:
 * "ctrl+shift+t" presses ctrl, shift, t then releases t, shift, ctrl;
 * "ctrl+a Delete" (space separated) does two combinations one after the
 * other.  A literal "+" key is written "plus". */
int input_seq_keys(struct input_seq *s, const char *keys, struct err *e);

/* Appends only the presses (down=1) or only the releases (down=0, reverse
 * order) of one combination, for key_down/key_up/hold_key. */
int input_seq_keys_dir(struct input_seq *s, const char *combo, int down, struct err *e);

/* Appends a press and release per character of UTF-8 `text` (`len` bytes):
 * Latin-1 characters use their own keysym, "\n" and "\r\n" Return, "\t" Tab,
 * anything else the Unicode keysym 0x01000000 + code point.  Invalid UTF-8,
 * NUL and other control characters fail with ERR_INVALID naming the byte
 * offset. */
int input_seq_text(struct input_seq *s, const char *text, size_t len, struct err *e);

/* Appends a move to (x, y) followed by `count` (1..3) press/release pairs of
 * `button` (50 ms apart), with the keysyms in `mods` held down around them. */
int input_seq_click(struct input_seq *s, int32_t x, int32_t y, enum input_button button, int count,
		    const uint32_t *mods, size_t nmods, struct err *e);

/* Appends a pause of `ms` (1..INPUT_PAUSE_MAX_MS) milliseconds. */
#define INPUT_PAUSE_MAX_MS 100000
int input_seq_pause(struct input_seq *s, int32_t ms, struct err *e);

/* input_seq_text() with a pause of `pause_ms` (0: none) after every
 * character. */
int input_seq_text_paced(struct input_seq *s, const char *text, size_t len, int32_t pause_ms,
			 struct err *e);

/* Appends a drag along `npts` (>= 2) points (`xy` holds x0,y0,x1,y1,...):
 * move to the first, press `button`, then pointer moves at most `step`
 * pixels apart along each segment (toolkits recognise a drag by a stream of
 * motion events, not a jump) with short pauses, and release at the last.
 * The total event count is capped; long paths get coarser steps. */
int input_seq_drag(struct input_seq *s, const int32_t *xy, size_t npts, enum input_button button,
		   int32_t step, struct err *e);

/* Appends a move to (x, y) and |dy| wheel clicks down (dy > 0) or up, then
 * |dx| clicks right (dx > 0) or left as buttons 7 / 6 (deskbox-vnc passes
 * them on; x11vnc drops them).  |dx|, |dy| <= INPUT_SCROLL_MAX. */
#define INPUT_SCROLL_MAX 1000
int input_seq_scroll(struct input_seq *s, int32_t x, int32_t y, int32_t dx, int32_t dy,
		     struct err *e);

/* Copies `in` to `out` (appending), adding a pause of `ms` where keyboard
 * and pointer events meet and before a button release that follows pointer
 * motion.  VNC servers handle the two kinds on different paths and may
 * coalesce motion (x11vnc: a shift pressed around a wheel click arrived
 * after it; a drag's release landed before its last moves), so the order an
 * application sees is kept by giving each kind time to land. */
int input_seq_ordered(const struct input_seq *in, struct input_seq *out, int32_t ms, struct err *e);

/* Maps a coordinate on an axis `from` pixels long onto one `to` pixels
 * long: the centre of pixel `v` lands in the pixel that contains it, so a
 * click on a scaled screenshot hits what was drawn there.  The result is
 * clamped to [0, to - 1]; `from` and `to` must be > 0. */
int32_t input_map_coord(int32_t v, uint32_t from, uint32_t to);

#endif
