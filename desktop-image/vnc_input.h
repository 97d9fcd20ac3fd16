/* deskbox-vnc input (vnc_input.c): RFB pointer and key events as XTest
 * input, used by vnc.c (screen mirror, cursor, sockets, event loop).
 * Not a public interface: deskbox-vnc is a program, not a library. */
#ifndef DESKBOX_VNC_INPUT_H
#define DESKBOX_VNC_INPUT_H

#include <X11/Xlib.h>
#include <stdint.h>

/* Keycodes deskbox-vnc may bind keysyms to (see vnc_input.c). */
#define VNC_MAX_SPARE 256
/* Keys pressed through us and not yet released. */
#define VNC_MAX_HELD 64

struct vnc_spare {
	KeyCode code;
	KeySym bound;	  /* what we bound to it, NoSymbol when nothing yet */
	uint64_t used_ns; /* CLOCK_MONOTONIC of the last press; 0 never */
	int held;	  /* presses not yet released: never rebind while held */
};

struct vnc_held {
	uint32_t keysym;
	KeyCode code;
	int numlock; /* we locked Num Lock for it: unlock after the release */
};

/* Input state of one X display.  Owns `map`; borrows `dpy`. */
struct vnc_input {
	Display *dpy;
	Window root;
	int width, height; /* pointer coordinates are clamped to these */
	int min_code, max_code, per;
	KeySym *map;		       /* core keymap copy: (max_code - min_code + 1) * per */
	unsigned char shift_codes[32]; /* bitmap: keycodes in the Shift modifier */
	unsigned char mod_codes[32];   /* bitmap: keycodes in any modifier */
	KeyCode shift_code;	       /* pressed to add Shift; 0 when none */
	struct vnc_spare spare[VNC_MAX_SPARE];
	int n_spare;
	struct vnc_held held[VNC_MAX_HELD];
	int n_held;
	int buttons;	  /* last RFB button mask */
	int px, py;	  /* last pointer position sent */
	unsigned rebinds; /* statistics for the debug log */
	unsigned rebind_waits;
};

/* Reads the keymap and modifier map, picks the spare keycodes (recorded on
 * the root window so that a restarted deskbox-vnc reuses them).  Returns 0,
 * or -1 when the keymap cannot be read. */
int vnc_input_init(struct vnc_input *in, Display *dpy, int width, int height);

/* Releases every key and button still down and frees the keymap copy. */
void vnc_input_release(struct vnc_input *in);

/* A MappingNotify arrived (ours or another client's): re-reads the maps. */
void vnc_input_mapping_changed(struct vnc_input *in);

/* An RFB KeyEvent: types `keysym` exactly (see vnc_input.c). */
void vnc_input_key(struct vnc_input *in, int down, uint32_t keysym);

/* An RFB PointerEvent: moves to (x, y), clamped to the screen, then presses
 * and releases buttons 1-8 as the mask changed. */
void vnc_input_pointer(struct vnc_input *in, int mask, int x, int y);

#endif
