/* deskbox-xtool: window and clipboard operations, run inside a sandbox
 * (bind-mounted read-only at /.deskbox/xtool) so that deskboxd never speaks
 * X11 to the sandbox's (hostile) X server.  Prints one JSON object on
 * stdout; on failure {"error":"..."} and exit status 1.
 *
 *   windows                 {"windows":[{"id","title","x","y","width","height","focused"}]}
 *   activate WID            {"id":WID,"focused":true}
 *   close WID               {"id":WID}
 *   wait-new-window MS      {"window":{...}} once a window not among the ids
 *                           given in DESKBOX_XTOOL_KNOWN (comma separated) shows
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

/* Bounds: the JSON stays well under deskboxd's output cap. */
#define MAX_WINDOWS  256
#define MAX_TITLE    512
#define MAX_CLIP     (1u << 20)
#define SELECTION_MS 2000
#define ACTIVATE_MS  2000

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	printf("{\"error\":\"");
	for (const char *p = msg; *p; p++)
		putchar(*p == '"' || *p == '\\' ? '\'' : *p);
	printf("\"}\n");
	exit(1);
}

/* Writes `s` (`len` bytes) as a JSON string.  Bytes that are not valid
 * UTF-8 are replaced by U+FFFD; control characters are escaped. */
static void json_str(const unsigned char *s, size_t len)
{
	putchar('"');
	for (size_t i = 0; i < len;) {
		unsigned char c = s[i];
		size_t n = c < 0x80		    ? 1
			   : c >= 0xc2 && c <= 0xdf ? 2
			   : c >= 0xe0 && c <= 0xef ? 3
			   : c >= 0xf0 && c <= 0xf4 ? 4
						    : 0;
		int ok = n > 0 && i + n <= len;
		for (size_t k = 1; ok && k < n; k++)
			ok = (s[i + k] & 0xc0) == 0x80;
		if (ok && n == 3) {
			unsigned v = (c & 0x0fu) << 12 | (s[i + 1] & 0x3fu) << 6;
			ok = v >= 0x800 && (v < 0xd800 || v > 0xdfff);
		}
		if (ok && n == 4) {
			unsigned v = (c & 0x07u) << 18 | (s[i + 1] & 0x3fu) << 12;
			ok = v >= 0x10000 && v <= 0x10ffff;
		}
		if (!ok) {
			fputs("\\ufffd", stdout);
			i++;
			continue;
		}
		if (n > 1) {
			fwrite(s + i, 1, n, stdout);
		} else if (c == '"' || c == '\\') {
			printf("\\%c", c);
		} else if (c < 0x20 || c == 0x7f) {
			printf("\\u%04x", c);
		} else {
			putchar(c);
		}
		i += n;
	}
	putchar('"');
}

/* The one connection, closed at exit (a process-wide handle keeps it
 * reachable for leak checkers on the die() paths too). */
static Display *dpy;

static void close_display(void)
{
	if (dpy)
		XCloseDisplay(dpy);
	dpy = NULL;
}

static Display *open_display(void)
{
	dpy = XOpenDisplay(NULL);
	if (!dpy)
		die("cannot open display '%s'", getenv("DISPLAY") ? getenv("DISPLAY") : "");
	atexit(close_display);
	return dpy;
}

/* A window property's data (caller XFree()s), or NULL. */
static unsigned char *get_prop(Display *d, Window w, Atom prop, Atom type, unsigned long *n)
{
	Atom actual;
	int fmt;
	unsigned long after;
	unsigned char *data = NULL;
	*n = 0;
	if (XGetWindowProperty(d, w, prop, 0, 1 << 16, False, type, &actual, &fmt, n, &after,
			       &data) != Success ||
	    !data)
		return NULL;
	return data;
}

static Window active_window(Display *d)
{
	unsigned long n;
	unsigned char *p = get_prop(d, DefaultRootWindow(d),
				    XInternAtom(d, "_NET_ACTIVE_WINDOW", False), XA_WINDOW, &n);
	Window w = p && n ? ((Window *)(void *)p)[0] : 0;
	if (p)
		XFree(p);
	return w;
}

/* The managed top-level windows (_NET_CLIENT_LIST, which openbox keeps). */
static size_t client_list(Display *d, Window *out, size_t max)
{
	unsigned long n;
	unsigned char *p = get_prop(d, DefaultRootWindow(d),
				    XInternAtom(d, "_NET_CLIENT_LIST", False), XA_WINDOW, &n);
	size_t k = 0;
	for (unsigned long i = 0; p && i < n && k < max; i++)
		out[k++] = ((Window *)(void *)p)[i];
	if (p)
		XFree(p);
	return k;
}

static int ignore_errors(Display *d, XErrorEvent *ev)
{
	return 0;
}

static void print_window(Display *d, Window w, Window active)
{
	unsigned long n = 0;
	unsigned char *title = get_prop(d, w, XInternAtom(d, "_NET_WM_NAME", False),
					XInternAtom(d, "UTF8_STRING", False), &n);
	if (!title)
		title = get_prop(d, w, XA_WM_NAME, XA_STRING, &n);
	XWindowAttributes wa = {0};
	int x = 0, y = 0;
	Window child;
	if (XGetWindowAttributes(d, w, &wa))
		XTranslateCoordinates(d, w, DefaultRootWindow(d), 0, 0, &x, &y, &child);
	printf("{\"id\":%lu,\"title\":", (unsigned long)w);
	json_str(title ? title : (const unsigned char *)"", n > MAX_TITLE ? MAX_TITLE : n);
	printf(",\"x\":%d,\"y\":%d,\"width\":%d,\"height\":%d,\"focused\":%s,\"visible\":%s}", x, y,
	       wa.width, wa.height, w == active ? "true" : "false",
	       wa.map_state == IsViewable ? "true" : "false");
	if (title)
		XFree(title);
}

static int cmd_windows(void)
{
	Display *d = open_display();
	XSetErrorHandler(ignore_errors);
	Window ws[MAX_WINDOWS];
	size_t n = client_list(d, ws, MAX_WINDOWS);
	Window active = active_window(d);
	printf("{\"windows\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			putchar(',');
		print_window(d, ws[i], active);
	}
	printf("]}\n");
	return 0;
}

static Window parse_wid(const char *s)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 0);
	if (errno || !*s || *end || v == 0)
		die("bad window id '%.32s'", s);
	return (Window)v;
}

static int is_client(Display *d, Window w)
{
	Window ws[MAX_WINDOWS];
	size_t n = client_list(d, ws, MAX_WINDOWS);
	for (size_t i = 0; i < n; i++)
		if (ws[i] == w)
			return 1;
	return 0;
}

/* Sends an EWMH request about `w` to the window manager. */
static void wm_request(Display *d, Window w, const char *type, long l0, long l1)
{
	XEvent ev = {0};
	ev.xclient.type = ClientMessage;
	ev.xclient.window = w;
	ev.xclient.message_type = XInternAtom(d, type, False);
	ev.xclient.format = 32;
	ev.xclient.data.l[0] = l0;
	ev.xclient.data.l[1] = l1;
	XSendEvent(d, DefaultRootWindow(d), False,
		   SubstructureRedirectMask | SubstructureNotifyMask, &ev);
	XSync(d, False);
}

static int cmd_activate(const char *arg)
{
	Window w = parse_wid(arg);
	Display *d = open_display();
	XSetErrorHandler(ignore_errors);
	if (!is_client(d, w))
		die("no window %lu", (unsigned long)w);
	/* What xdo_activate_window does: _NET_ACTIVE_WINDOW with source 2
	 * (a pager or tool, which window managers obey), done here directly
	 * because libxdo's handle leaks memory that leak checkers report. */
	wm_request(d, w, "_NET_ACTIVE_WINDOW", 2, CurrentTime);
	long long end = clock_mono_ms() + ACTIVATE_MS;
	while (active_window(d) != w && clock_mono_ms() < end)
		clock_sleep_ms(10);
	int ok = active_window(d) == w;
	printf("{\"id\":%lu,\"focused\":%s}\n", (unsigned long)w, ok ? "true" : "false");
	return ok ? 0 : 1;
}

static int cmd_close(const char *arg)
{
	Window w = parse_wid(arg);
	Display *d = open_display();
	XSetErrorHandler(ignore_errors);
	if (!is_client(d, w))
		die("no window %lu", (unsigned long)w);
	/* EWMH: ask the window manager, which sends WM_DELETE_WINDOW (a
	 * polite close the application may answer with a dialog). */
	wm_request(d, w, "_NET_CLOSE_WINDOW", CurrentTime, 2);
	printf("{\"id\":%lu}\n", (unsigned long)w);
	return 0;
}

static int known(const char *list, Window w)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%lu", (unsigned long)w);
	size_t n = strlen(buf);
	for (const char *p = list; p && *p;) {
		if (strncmp(p, buf, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return 1;
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	return 0;
}

/* Waits for a managed, viewable window whose id is not in
 * $DESKBOX_XTOOL_KNOWN. */
static int cmd_wait_new(const char *ms_arg)
{
	long ms = strtol(ms_arg, NULL, 10);
	if (ms < 0 || ms > 120000)
		die("bad timeout");
	const char *list = getenv("DESKBOX_XTOOL_KNOWN");
	Display *d = open_display();
	XSetErrorHandler(ignore_errors);
	long long end = clock_mono_ms() + ms;
	do {
		Window ws[MAX_WINDOWS];
		size_t n = client_list(d, ws, MAX_WINDOWS);
		for (size_t i = 0; i < n; i++) {
			XWindowAttributes wa;
			if (known(list, ws[i]) || !XGetWindowAttributes(d, ws[i], &wa) ||
			    wa.map_state != IsViewable)
				continue;
			printf("{\"window\":");
			print_window(d, ws[i], active_window(d));
			printf("}\n");
			return 0;
		}
		clock_sleep_ms(20);
	} while (clock_mono_ms() < end);
	printf("{\"window\":null}\n");
	return 0;
}

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

static long number(const char *s, long min, long max, const char *what)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || *end || end == s || v < min || v > max)
		die("bad %s '%.32s'", what, s);
	return v;
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
		return cmd_windows();
	if (strcmp(cmd, "activate") == 0 && argc == 3)
		return cmd_activate(argv[2]);
	if (strcmp(cmd, "close") == 0 && argc == 3)
		return cmd_close(argv[2]);
	if (strcmp(cmd, "wait-new-window") == 0 && argc == 3)
		return cmd_wait_new(argv[2]);
	if (strcmp(cmd, "pointer") == 0)
		return cmd_pointer();
	if (strcmp(cmd, "click") == 0 && (argc == 6 || argc == 7))
		return cmd_click(argc, argv);
	if (strcmp(cmd, "clipboard-get") == 0)
		return cmd_clipboard_get();
	if (strcmp(cmd, "clipboard-own") == 0)
		return cmd_clipboard_own();
	die("usage: deskbox-xtool windows | activate WID | close WID | wait-new-window MS | "
	    "pointer | click X Y BUTTON COUNT [KEYSYMS] | clipboard-get | clipboard-own");
}
