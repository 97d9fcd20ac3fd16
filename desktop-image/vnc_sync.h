/* deskbox-vnc: keys typed after a click wait until the window manager has
 * handled the click (vnc_sync.c).  Not a public interface. */
#ifndef DESKBOX_VNC_SYNC_H
#define DESKBOX_VNC_SYNC_H

#include <X11/Xlib.h>

struct vnc_sync {
	Display *dpy;
	Window root;
	Window win; /* ours, never mapped: the window the WM answers about */
	Atom request, extents, supported, check;
	int pending;	      /* a button changed since the last key press */
	unsigned syncs, lost; /* statistics: round trips, unanswered ones */
};

/* Creates the window the round trips use.  Returns 0 or -1. */
int vnc_sync_init(struct vnc_sync *s, Display *dpy);

/* A button (1-3) was pressed or released through us. */
void vnc_sync_button(struct vnc_sync *s);

/* Before a key press: when a click came before it, returns once the
 * window manager answered a request sent after the click (so it has
 * handled the click, its focus change included), or after a bound when it
 * does not answer.  Otherwise returns at once. */
void vnc_sync_before_key(struct vnc_sync *s);

#endif
