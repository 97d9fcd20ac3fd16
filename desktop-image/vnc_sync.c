/* deskbox-vnc: keys typed after a click wait for the window manager.
 *
 * openbox (like most window managers) focuses a window on the click into
 * it through a passive button grab in GrabModeSync: the X server freezes
 * the pointer at the ButtonPress and hands it to the WM, which sets the
 * focus and lets the click through (XAllowEvents).  The keyboard is not
 * frozen: keys injected right after the click reach the window focused
 * before it, for as long as the WM takes (seen: the first 1-3 characters
 * of a batch's click-then-type in the previous window, 2-3 times in 5).
 *
 * So the first key press after a click waits for a round trip through the
 * WM: a _NET_REQUEST_FRAME_EXTENTS client message (EWMH; openbox answers
 * by setting _NET_FRAME_EXTENTS on our window, in ~1 ms).  It is sent on
 * the connection that sent the click, so the X server delivered the
 * ButtonPress to the WM before the message; the WM handles its events in
 * order, so its answer, coming after the requests it made for the click
 * (SetInputFocus, AllowEvents) on its own connection, means the click is
 * handled.  Without a WM that supports the message, or when it does not
 * answer within SYNC_WAIT_MS, the key goes on (after an X round trip).
 */
#include "vnc_sync.h"

#include <X11/Xatom.h>
#include <poll.h>

#include "common/clock.h"
#include "vnc_util.h"

/* How long a key waits at most for the WM's answer. */
#define SYNC_WAIT_MS 250

int vnc_sync_init(struct vnc_sync *s, Display *dpy)
{
	*s = (struct vnc_sync){.dpy = dpy, .root = DefaultRootWindow(dpy)};
	s->request = XInternAtom(dpy, "_NET_REQUEST_FRAME_EXTENTS", False);
	s->extents = XInternAtom(dpy, "_NET_FRAME_EXTENTS", False);
	s->supported = XInternAtom(dpy, "_NET_SUPPORTED", False);
	s->check = XInternAtom(dpy, "_NET_SUPPORTING_WM_CHECK", False);
	s->win = XCreateSimpleWindow(dpy, s->root, -10, -10, 1, 1, 0, 0, 0);
	if (!s->win)
		return -1;
	XSelectInput(dpy, s->win, PropertyChangeMask);
	return 0;
}

void vnc_sync_button(struct vnc_sync *s)
{
	s->pending = 1;
}

/* The 32-bit items of property `prop` of `w` (NULL when none; XFree it). */
static unsigned char *prop32(struct vnc_sync *s, Window w, Atom prop, Atom type, unsigned long *n)
{
	Atom got;
	int format;
	unsigned long after;
	unsigned char *data = NULL;
	*n = 0;
	if (XGetWindowProperty(s->dpy, w, prop, 0, 4096, False, type, &got, &format, n, &after,
			       &data) != Success ||
	    !data || format != 32 || *n == 0) {
		if (data)
			XFree(data);
		*n = 0;
		return NULL;
	}
	return data;
}

/* Whether a WM runs (its _NET_SUPPORTING_WM_CHECK window exists: a dead
 * one leaves its root properties behind) and lists
 * _NET_REQUEST_FRAME_EXTENTS as supported.  Read each time: the WM may
 * have been restarted, or replaced. */
static int wm_answers(struct vnc_sync *s)
{
	unsigned long n;
	unsigned char *d = prop32(s, s->root, s->check, XA_WINDOW, &n);
	Window wm = d ? (Window)((unsigned long *)d)[0] : None;
	if (d)
		XFree(d);
	d = wm ? prop32(s, wm, s->check, XA_WINDOW, &n) : NULL;
	int alive = d && (Window)((unsigned long *)d)[0] == wm;
	if (d)
		XFree(d);
	d = alive ? prop32(s, s->root, s->supported, XA_ATOM, &n) : NULL;
	int found = 0;
	for (unsigned long i = 0; d && i < n && !found; i++)
		found = ((unsigned long *)d)[i] == s->request;
	if (d)
		XFree(d);
	return found;
}

/* Waits for the PropertyNotify of _NET_FRAME_EXTENTS on our window.
 * Other events stay queued for the main loop. */
static int wait_answer(struct vnc_sync *s, uint64_t end_ms)
{
	for (;;) {
		XEvent ev;
		while (XCheckTypedWindowEvent(s->dpy, s->win, PropertyNotify, &ev))
			if (ev.xproperty.atom == s->extents)
				return 1;
		uint64_t now = (uint64_t)clock_mono_ms();
		if (now >= end_ms)
			return 0;
		struct pollfd p = {.fd = ConnectionNumber(s->dpy), .events = POLLIN};
		poll(&p, 1, (int)(end_ms - now));
	}
}

void vnc_sync_before_key(struct vnc_sync *s)
{
	if (!s->pending)
		return;
	s->pending = 0;
	if (!s->win || !wm_answers(s)) {
		XSync(s->dpy, False);
		return;
	}
	XEvent ev = {
	    .xclient = {
		.type = ClientMessage, .window = s->win, .message_type = s->request, .format = 32}};
	XSendEvent(s->dpy, s->root, False, SubstructureRedirectMask | SubstructureNotifyMask, &ev);
	XFlush(s->dpy);
	uint64_t t0 = clock_mono_ns();
	s->syncs++;
	if (!wait_answer(s, (uint64_t)clock_mono_ms() + SYNC_WAIT_MS)) {
		s->lost++;
		vnc_debug("the window manager did not answer in %d ms", SYNC_WAIT_MS);
		return;
	}
	vnc_debug("window manager round trip after a click: %.2f ms",
		  (double)(clock_mono_ns() - t0) / 1e6);
}
