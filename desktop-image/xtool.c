/* deskbox-xtool: window, clipboard and application operations, run inside
 * a sandbox (bind-mounted read-only at /.deskbox/xtool) so that deskboxd
 * never speaks X11 to the sandbox's (hostile) X server nor parses its
 * files.  Prints one JSON object on stdout; on failure {"error":"..."} and
 * exit status 1.  Windows: xtool_win.c; applications: xtool_apps.c.
 *
 *   pointer                 {"x":X,"y":Y}: where the pointer really is
 *   click X Y BUTTON COUNT [KEYSYMS]
 *                           {"x":X,"y":Y,"button":B}: moves, holds the
 *                           modifier keysyms (comma-separated hex), clicks
 *                           BUTTON (1-9, 9 is "forward", which RFB cannot
 *                           carry) COUNT times and releases, through XTEST
 *                           in one client so the X server keeps the order
 *   clipboard-get           {"text":"..."}
 *   clipboard-own           reads UTF-8 text on stdin and serves it as the
 *                           CLIPBOARD and PRIMARY selections until another
 *                           client takes them over (run it in the background)
 */
#include <X11/Xatom.h>
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/extensions/XTest.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "xtool.h"

/* Bounds: the JSON stays well under deskboxd's output cap. */
#define MAX_CLIP     (1u << 20)
#define SELECTION_MS 2000

/* Waits for an event of `type` on `w` for up to `ms`. */
static int wait_event(Display *d, Window w, int type, XEvent *ev, int ms)
{
	long long end = clock_mono_ms() + ms;
	for (;;) {
		if (XCheckTypedWindowEvent(d, w, type, ev))
			return 1;
		long long left = end - clock_mono_ms();
		if (left <= 0)
			return 0;
		struct pollfd p = {.fd = ConnectionNumber(d), .events = POLLIN};
		poll(&p, 1, left > 50 ? 50 : (int)left);
	}
}

static int cmd_clipboard_get(void)
{
	Display *d = open_display();
	XSetErrorHandler(ignore_errors);
	Window w = XCreateSimpleWindow(d, DefaultRootWindow(d), 0, 0, 1, 1, 0, 0, 0);
	Atom clip = XInternAtom(d, "CLIPBOARD", False);
	Atom utf8 = XInternAtom(d, "UTF8_STRING", False);
	Atom prop = XInternAtom(d, "DESKBOX_CLIP", False);
	if (XGetSelectionOwner(d, clip) == None) {
		printf("{\"text\":\"\",\"owner\":false}\n");
		return 0;
	}
	XConvertSelection(d, clip, utf8, prop, w, CurrentTime);
	XFlush(d);
	XEvent ev;
	if (!wait_event(d, w, SelectionNotify, &ev, SELECTION_MS))
		die("the clipboard owner did not answer in %d ms", SELECTION_MS);
	if (ev.xselection.property == None)
		die("the clipboard owner cannot give UTF-8 text");
	unsigned long n;
	unsigned char *data = get_prop(d, w, prop, AnyPropertyType, &n);
	printf("{\"text\":");
	json_str(data ? data : (const unsigned char *)"", n > MAX_CLIP ? MAX_CLIP : n);
	printf(",\"owner\":true}\n");
	if (data)
		XFree(data);
	return 0;
}

/* Answers one SelectionRequest with `text`. */
static void serve(Display *d, XSelectionRequestEvent *rq, const char *text, size_t len)
{
	Atom utf8 = XInternAtom(d, "UTF8_STRING", False);
	Atom targets = XInternAtom(d, "TARGETS", False);
	Atom textatom = XInternAtom(d, "TEXT", False);
	XSelectionEvent reply = {.type = SelectionNotify,
				 .requestor = rq->requestor,
				 .selection = rq->selection,
				 .target = rq->target,
				 .property = rq->property ? rq->property : rq->target,
				 .time = rq->time};
	if (rq->target == targets) {
		Atom list[] = {targets, utf8, XA_STRING, textatom};
		XChangeProperty(d, rq->requestor, reply.property, XA_ATOM, 32, PropModeReplace,
				(unsigned char *)list, 4);
	} else if (rq->target == utf8 || rq->target == XA_STRING || rq->target == textatom) {
		/* STRING is Latin-1 by the ICCCM; clients asking for it get the
		 * UTF-8 bytes anyway, which is what xclip does too. */
		XChangeProperty(d, rq->requestor, reply.property,
				rq->target == XA_STRING ? XA_STRING : utf8, 8, PropModeReplace,
				(const unsigned char *)text, (int)len);
	} else {
		reply.property = None;
	}
	XSendEvent(d, rq->requestor, False, 0, (XEvent *)&reply);
	XFlush(d);
}

static char *clip_text;

static void free_clip(void)
{
	free(clip_text);
}

static int cmd_clipboard_own(void)
{
	char *text = clip_text = malloc(MAX_CLIP + 1);
	atexit(free_clip);
	if (!text)
		die("out of memory");
	size_t len = 0;
	for (;;) {
		ssize_t n = read(0, text + len, MAX_CLIP - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == MAX_CLIP)
			die("clipboard text over %u bytes", MAX_CLIP);
	}
	text[len] = '\0';
	Display *d = open_display();
	XSetErrorHandler(ignore_errors);
	Window w = XCreateSimpleWindow(d, DefaultRootWindow(d), 0, 0, 1, 1, 0, 0, 0);
	Atom sels[2] = {XInternAtom(d, "CLIPBOARD", False), XA_PRIMARY};
	int owned = 0;
	for (int i = 0; i < 2; i++) {
		XSetSelectionOwner(d, sels[i], w, CurrentTime);
		if (XGetSelectionOwner(d, sels[i]) == w)
			owned++;
	}
	if (!owned)
		die("could not take the clipboard");
	XFlush(d);
	/* Serve until both selections were taken over by someone else. */
	while (owned > 0) {
		XEvent ev;
		XNextEvent(d, &ev);
		if (ev.type == SelectionRequest)
			serve(d, &ev.xselectionrequest, text, len);
		else if (ev.type == SelectionClear)
			owned--;
	}
	return 0;
}

static int cmd_pointer(void)
{
	Display *d = open_display();
	Window root, child;
	int x, y, wx, wy;
	unsigned mask;
	if (!XQueryPointer(d, DefaultRootWindow(d), &root, &child, &x, &y, &wx, &wy, &mask))
		die("the pointer is on another screen");
	printf("{\"x\":%d,\"y\":%d}\n", x, y);
	return 0;
}

/* Presses (down=1) or releases the keycodes of a comma-separated list of
 * keysyms; releases go in reverse order. */
static void fake_keys(Display *d, const char *list, int down)
{
	KeyCode codes[8];
	int n = 0;
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *tok = strtok(buf, ","); tok && n < 8; tok = strtok(NULL, ",")) {
		KeyCode c = XKeysymToKeycode(d, (KeySym)number(tok, 1, 0x1ffffff, "keysym"));
		if (!c)
			die("no keycode for keysym %s", tok);
		codes[n++] = c;
	}
	for (int i = 0; i < n; i++)
		XTestFakeKeyEvent(d, codes[down ? i : n - 1 - i], down ? True : False, 0);
}

static int cmd_click(int argc, char **argv)
{
	Display *d = open_display();
	int ev, er, maj, min;
	if (!XTestQueryExtension(d, &ev, &er, &maj, &min))
		die("the X server has no XTEST extension");
	long x = number(argv[2], 0, 65535, "x"), y = number(argv[3], 0, 65535, "y");
	unsigned button = (unsigned)number(argv[4], 1, 9, "button");
	long count = number(argv[5], 1, 3, "count");
	const char *mods = argc > 6 ? argv[6] : "";
	XTestFakeMotionEvent(d, DefaultScreen(d), (int)x, (int)y, 0);
	if (*mods)
		fake_keys(d, mods, 1);
	for (long i = 0; i < count; i++) {
		XTestFakeButtonEvent(d, button, True, 0);
		XTestFakeButtonEvent(d, button, False, 0);
		XSync(d, False);
		if (i + 1 < count)
			clock_sleep_ms(50);
	}
	if (*mods)
		fake_keys(d, mods, 0);
	XSync(d, False);
	printf("{\"x\":%ld,\"y\":%ld,\"button\":%u}\n", x, y, button);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";
	if (strcmp(cmd, "windows") == 0)
		return cmd_windows(argc - 1, argv + 1);
	if (strcmp(cmd, "wait-window") == 0)
		return cmd_wait_window(argc - 1, argv + 1);
	if (strcmp(cmd, "wait-new-window") == 0 && argc == 3)
		return cmd_wait_new(argv[2]);
	if (strcmp(cmd, "apps") == 0 && argc == 2)
		return cmd_apps();
	if (strcmp(cmd, "app-argv") == 0 && argc == 3)
		return cmd_app_argv(argv[2]);
	if (strcmp(cmd, "open-argv") == 0 && argc == 3)
		return cmd_open_argv(argv[2]);
	if (strcmp(cmd, "pointer") == 0)
		return cmd_pointer();
	if (strcmp(cmd, "click") == 0 && (argc == 6 || argc == 7))
		return cmd_click(argc, argv);
	if (strcmp(cmd, "clipboard-get") == 0)
		return cmd_clipboard_get();
	if (strcmp(cmd, "clipboard-own") == 0)
		return cmd_clipboard_own();
	if (argc >= 3)
		return cmd_window_op(argc - 1, argv + 1);
	die("usage: deskbox-xtool windows [TITLE CLASS PID] | wait-window MS TITLE CLASS PID | "
	    "wait-new-window MS | activate|close|minimize|maximize WID | move WID X Y | "
	    "resize WID W H | apps | app-argv ID | open-argv TARGET | pointer | "
	    "click X Y BUTTON COUNT [KEYSYMS] | clipboard-get | clipboard-own");
}
