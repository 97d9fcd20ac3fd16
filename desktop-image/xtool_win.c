/* deskbox-xtool: windows, through libxdo where it has the operation.
 *
 *   windows [TITLE CLASS PID]   {"windows":[WINDOW...]}: the managed
 *                               top-level windows, or those matching all
 *                               of the non-empty criteria
 *   wait-window MS TITLE CLASS PID
 *                               {"window":WINDOW|null}: the first visible
 *                               window that matches, waiting up to MS
 *   wait-new-window MS          {"window":WINDOW|null}: the first visible
 *                               window not among the ids given in
 *                               DESKBOX_XTOOL_KNOWN (comma separated)
 *   activate|close|minimize|maximize WID, move WID X Y, resize WID W H
 *                               WINDOW once the window manager applied it
 *
 * WINDOW is {"id","title","class","instance","pid","desktop","x","y",
 * "width","height","focused","visible","minimized","maximized"}: client-area
 * geometry on the root window; pid and desktop are null when the client
 * did not set _NET_WM_PID or the window manager _NET_WM_DESKTOP.  TITLE and
 * CLASS are POSIX extended regular expressions matched case-insensitively,
 * as xdo's search does.
 *
 * libxdo 3.2016 leaks: xdo_new's keyboard map (XkbGetMap) outlives
 * xdo_free, and every call that checks _NET_SUPPORTED first
 * (xdo_activate_window, xdo_get_desktop_for_window) leaks that property.
 * The handle is freed at exit (xdo_free) and the keyboard map left to the
 * process's end, which comes within milliseconds (and is suppressed for
 * LeakSanitizer); the two EWMH calls are done here instead. */
#include <X11/Xatom.h>
#include <X11/Xutil.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xdo.h>

#include "common/text.h"
#include "common/clock.h"
#include "xtool.h"

/* Bounds: the JSON stays well under deskboxd's output cap. */
#define MAX_WINDOWS 256
#define MAX_TITLE   512
#define APPLY_MS    2000
/* How long a geometry must hold still to count as the window manager's
 * final answer when it is not the one asked for (size increments,
 * constraints to the screen). */
#define SETTLE_MS 200
#define STABLE_MS 50

#ifdef DBX_SANITIZE
/* LeakSanitizer: see the header comment on libxdo's allocations (the
 * stacks end in libX11, which has no frame pointers; this tool never calls
 * XkbGetMap itself). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:XkbGetMap\n";
}
#endif

static xdo_t *xdo;

static void free_xdo(void)
{
	if (xdo)
		xdo_free(xdo);
	xdo = NULL;
}

static Display *open_xdo(void)
{
	Display *d = open_display();
	XSetErrorHandler(ignore_errors);
	/* The display stays ours (closed after xdo_free: atexit runs in
	 * reverse order). */
	xdo = xdo_new_with_opened_display(d, NULL, 0);
	if (!xdo)
		die("libxdo could not start");
	atexit(free_xdo);
	return d;
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

struct wstate {
	int x, y, w, h, viewable, minimized, maximized;
};

static void window_state(Display *d, Window w, struct wstate *s)
{
	memset(s, 0, sizeof(*s));
	XWindowAttributes wa;
	Window child;
	if (XGetWindowAttributes(d, w, &wa)) {
		XTranslateCoordinates(d, w, DefaultRootWindow(d), 0, 0, &s->x, &s->y, &child);
		s->w = wa.width;
		s->h = wa.height;
		s->viewable = wa.map_state == IsViewable;
	}
	unsigned long n;
	unsigned char *p = get_prop(d, w, XInternAtom(d, "_NET_WM_STATE", False), XA_ATOM, &n);
	Atom hidden = XInternAtom(d, "_NET_WM_STATE_HIDDEN", False);
	Atom vert = XInternAtom(d, "_NET_WM_STATE_MAXIMIZED_VERT", False);
	Atom horz = XInternAtom(d, "_NET_WM_STATE_MAXIMIZED_HORZ", False);
	int maxed = 0;
	for (unsigned long i = 0; p && i < n; i++) {
		Atom a = ((Atom *)(void *)p)[i];
		s->minimized |= a == hidden;
		maxed |= a == vert ? 1 : a == horz ? 2 : 0;
	}
	s->maximized = maxed == 3;
	if (p)
		XFree(p);
}

static void print_class(Display *d, Window w)
{
	XClassHint ch = {0};
	int ok = XGetClassHint(d, w, &ch);
	printf(",\"class\":");
	json_cstr(ok && ch.res_class ? ch.res_class : "");
	printf(",\"instance\":");
	json_cstr(ok && ch.res_name ? ch.res_name : "");
	if (ch.res_class)
		XFree(ch.res_class);
	if (ch.res_name)
		XFree(ch.res_name);
}

/* _NET_WM_PID, or -1.  Not xdo_get_pid_window, nor xdo's SEARCH_PID: on a
 * window that went away meanwhile they read an item count libxdo never
 * set and dereference NULL (libxdo 3.2016: "XGetWindowProperty failed!",
 * then SIGSEGV). */
static int window_pid(Display *d, Window w)
{
	int pid = -1;
	unsigned long n;
	unsigned char *p = get_prop(d, w, XInternAtom(d, "_NET_WM_PID", False), XA_CARDINAL, &n);
	if (p && n == 1)
		pid = (int)((long *)(void *)p)[0];
	if (p)
		XFree(p);
	return pid;
}

static void print_window(Display *d, Window w, Window active)
{
	unsigned long n = 0;
	unsigned char *title = get_prop(d, w, XInternAtom(d, "_NET_WM_NAME", False),
					XInternAtom(d, "UTF8_STRING", False), &n);
	if (!title)
		title = get_prop(d, w, XA_WM_NAME, XA_STRING, &n);
	printf("{\"id\":%lu,\"title\":", (unsigned long)w);
	json_str(title ? title : (const unsigned char *)"", n > MAX_TITLE ? MAX_TITLE : n);
	if (title)
		XFree(title);
	print_class(d, w);
	int pid = window_pid(d, w);
	long desk = -1;
	unsigned long nd;
	unsigned char *p =
	    get_prop(d, w, XInternAtom(d, "_NET_WM_DESKTOP", False), XA_CARDINAL, &nd);
	if (p && nd == 1)
		desk = ((long *)(void *)p)[0];
	if (p)
		XFree(p);
	printf(pid > 0 ? ",\"pid\":%d" : ",\"pid\":null", pid);
	printf(desk >= 0 ? ",\"desktop\":%ld" : ",\"desktop\":null", desk);
	struct wstate s;
	window_state(d, w, &s);
	printf(",\"x\":%d,\"y\":%d,\"width\":%d,\"height\":%d,\"focused\":%s,\"visible\":%s,"
	       "\"minimized\":%s,\"maximized\":%s}",
	       s.x, s.y, s.w, s.h, w == active ? "true" : "false", s.viewable ? "true" : "false",
	       s.minimized ? "true" : "false", s.maximized ? "true" : "false");
}

/* What a search asks for; NULL or 0 where it asks nothing. */
struct query {
	const char *title, *cls;
	int pid;
};

static const char *regex_arg(const char *s, const char *what)
{
	if (!*s)
		return NULL;
	regex_t re;
	/* xdo compiles the same way and only prints when it cannot. */
	int r = regcomp(&re, s, REG_EXTENDED | REG_ICASE | REG_NOSUB);
	if (r != 0)
		die("bad regular expression for %s '%.*s'", what, UTF8_CUT(s, 64));
	regfree(&re);
	return s;
}

static void query_parse(char **argv, struct query *q)
{
	q->title = regex_arg(argv[0], "title");
	q->cls = regex_arg(argv[1], "class");
	q->pid = *argv[2] ? (int)number(argv[2], 1, 0x7fffffff, "pid") : 0;
}

/* The managed windows matching `q` (all without criteria), in
 * _NET_CLIENT_LIST order; only viewable ones with `visible`. */
static size_t matching(Display *d, const struct query *q, int visible, Window *out)
{
	Window ws[MAX_WINDOWS];
	size_t n = client_list(d, ws, MAX_WINDOWS), k = 0;
	Window *found = NULL;
	unsigned nfound = 0;
	int all = !q->title && !q->cls;
	if (!all) {
		/* xdo walks the whole tree (clients sit below openbox's
		 * frames); what it finds is then kept to managed windows. */
		xdo_search_t s = {.max_depth = -1, .require = SEARCH_ALL};
		s.winname = q->title;
		s.winclass = q->cls;
		s.searchmask = (q->title ? SEARCH_NAME : 0) | (q->cls ? SEARCH_CLASS : 0);
		xdo_search_windows(xdo, &s, &found, &nfound);
	}
	for (size_t i = 0; i < n; i++) {
		int hit = all;
		for (unsigned j = 0; !hit && j < nfound; j++)
			hit = found[j] == ws[i];
		if (hit && q->pid)
			hit = window_pid(d, ws[i]) == q->pid;
		XWindowAttributes wa;
		if (hit && visible)
			hit = XGetWindowAttributes(d, ws[i], &wa) && wa.map_state == IsViewable;
		if (hit)
			out[k++] = ws[i];
	}
	free(found);
	return k;
}

int cmd_windows(int argc, char **argv)
{
	struct query q = {0};
	if (argc == 4)
		query_parse(argv + 1, &q);
	else if (argc != 1)
		die("usage: windows [TITLE CLASS PID]");
	Display *d = open_xdo();
	Window ws[MAX_WINDOWS];
	size_t n = matching(d, &q, 0, ws);
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

static long wait_ms(const char *arg)
{
	return number(arg, 0, 120000, "timeout");
}

int cmd_wait_window(int argc, char **argv)
{
	if (argc != 5)
		die("usage: wait-window MS TITLE CLASS PID");
	long ms = wait_ms(argv[1]);
	struct query q;
	query_parse(argv + 2, &q);
	Display *d = open_xdo();
	long long end = clock_mono_ms() + ms;
	for (;;) {
		Window ws[MAX_WINDOWS];
		if (matching(d, &q, 1, ws) > 0) {
			printf("{\"window\":");
			print_window(d, ws[0], active_window(d));
			printf("}\n");
			return 0;
		}
		if (clock_mono_ms() >= end)
			break;
		clock_sleep_ms(50);
	}
	printf("{\"window\":null}\n");
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

int cmd_wait_new(const char *ms_arg)
{
	long ms = wait_ms(ms_arg);
	const char *list = getenv("DESKBOX_XTOOL_KNOWN");
	Display *d = open_xdo();
	long long end = clock_mono_ms() + ms;
	do {
		Window ws[MAX_WINDOWS];
		struct query all = {0};
		size_t n = matching(d, &all, 1, ws);
		for (size_t i = 0; i < n; i++) {
			if (known(list, ws[i]))
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

static Window parse_wid(Display *d, const char *s)
{
	Window w = (Window)number(s, 1, 0x7fffffff, "window id");
	Window ws[MAX_WINDOWS];
	size_t n = client_list(d, ws, MAX_WINDOWS);
	for (size_t i = 0; i < n; i++)
		if (ws[i] == w)
			return w;
	die("no window %lu", (unsigned long)w);
}

/* What an operation waits for: the state it asked for (`want`), or failing
 * that any change from `before` that held still for SETTLE_MS. */
struct goal {
	int op;
	int a, b;
	struct wstate before;
};

enum { OP_ACTIVATE, OP_CLOSE, OP_MOVE, OP_RESIZE, OP_MINIMIZE, OP_MAXIMIZE };

static int reached(Display *d, Window w, const struct goal *g, const struct wstate *s)
{
	switch (g->op) {
	case OP_ACTIVATE:
		return active_window(d) == w;
	case OP_MOVE:
		return s->x == g->a && s->y == g->b;
	case OP_RESIZE:
		return s->w == g->a && s->h == g->b;
	case OP_MINIMIZE:
		return s->minimized || !s->viewable;
	case OP_MAXIMIZE:
		return s->maximized;
	}
	return 1;
}

/* Polls until the window manager applied `g` and the window held still
 * for STABLE_MS (openbox animates un-minimizing), or gave its own answer;
 * 1 when it did what was asked. */
static int await(Display *d, Window w, const struct goal *g)
{
	long long start = clock_mono_ms(), end = start + APPLY_MS, still = start;
	struct wstate last = g->before;
	for (;;) {
		struct wstate s;
		window_state(d, w, &s);
		long long now = clock_mono_ms();
		if (memcmp(&s, &last, sizeof(s)) != 0) {
			last = s;
			still = now;
		}
		int ok = reached(d, w, g, &s);
		if (ok && now - still >= STABLE_MS)
			return 1;
		if ((!ok && still > start && now - still >= SETTLE_MS) || now >= end)
			return ok;
		clock_sleep_ms(10);
	}
}

/* Moves the client area's top-left corner to (x, y).  The window manager
 * places the frame there (ICCCM, NorthWest gravity), so the request is
 * shifted by the frame's left and top extents. */
static void move(Display *d, Window w, int x, int y)
{
	unsigned long n;
	unsigned char *p =
	    get_prop(d, w, XInternAtom(d, "_NET_FRAME_EXTENTS", False), XA_CARDINAL, &n);
	long left = p && n == 4 ? ((long *)(void *)p)[0] : 0;
	long top = p && n == 4 ? ((long *)(void *)p)[2] : 0;
	if (p)
		XFree(p);
	xdo_move_window(xdo, w, x - (int)left, y - (int)top);
}

static int op_code(const char *op, int argc)
{
	static const char *const names[] = {"activate", "close",    "move",
					    "resize",	"minimize", "maximize"};
	for (int i = 0; i < 6; i++)
		if (strcmp(op, names[i]) == 0)
			return argc == (i == OP_MOVE || i == OP_RESIZE ? 4 : 2) ? i : -1;
	return -1;
}

int cmd_window_op(int argc, char **argv)
{
	int op = op_code(argv[0], argc);
	if (op < 0)
		die("usage: activate|close|minimize|maximize WID, move WID X Y, resize WID W H");
	Display *d = open_xdo();
	Window w = parse_wid(d, argv[1]);
	struct goal g = {.op = op};
	if (op == OP_MOVE || op == OP_RESIZE) {
		int min = op == OP_MOVE ? -32768 : 1;
		g.a = (int)number(argv[2], min, 32767, op == OP_MOVE ? "x" : "width");
		g.b = (int)number(argv[3], min, 32767, op == OP_MOVE ? "y" : "height");
	}
	window_state(d, w, &g.before);
	if (op == OP_CLOSE) {
		/* EWMH: ask the window manager, which sends WM_DELETE_WINDOW (a
		 * polite close the application may answer with a dialog);
		 * xdo_close_window would destroy the window under its client. */
		wm_request(d, w, "_NET_CLOSE_WINDOW", CurrentTime, 2, 0, 0);
		printf("{\"id\":%lu}\n", (unsigned long)w);
		return 0;
	}
	if (op == OP_ACTIVATE) /* what xdo_activate_window sends: from a tool (2) */
		wm_request(d, w, "_NET_ACTIVE_WINDOW", 2, CurrentTime, 0, 0);
	else if (op == OP_MOVE)
		move(d, w, g.a, g.b);
	else if (op == OP_RESIZE)
		xdo_set_window_size(xdo, w, g.a, g.b, 0);
	else if (op == OP_MINIMIZE)
		xdo_minimize_window(xdo, w);
	else /* libxdo 3.2016 has no maximize: EWMH _NET_WM_STATE, add (1) both
	      * maximized states, from a pager or tool (2). */
		wm_request(d, w, "_NET_WM_STATE", 1,
			   (long)XInternAtom(d, "_NET_WM_STATE_MAXIMIZED_VERT", False),
			   (long)XInternAtom(d, "_NET_WM_STATE_MAXIMIZED_HORZ", False), 2);
	XSync(d, False);
	int ok = await(d, w, &g);
	print_window(d, w, active_window(d));
	putchar('\n');
	/* activate keeps its exit status: 1 when the window is not focused. */
	return op == OP_ACTIVATE && !ok;
}
