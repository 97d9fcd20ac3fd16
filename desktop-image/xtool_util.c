/* deskbox-xtool: its JSON output and its X connection. */
#include <X11/Xatom.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "xtool.h"

void die(const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	printf("{\"error\":\"");
	for (const char *p = msg; *p; p++)
		putchar(*p == '"' || *p == '\\' ? '\'' : (unsigned char)*p < 0x20 ? ' ' : *p);
	printf("\"}\n");
	exit(1);
}

void json_str(const unsigned char *s, size_t len)
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

void json_cstr(const char *s)
{
	json_str((const unsigned char *)s, strlen(s));
}

long number(const char *s, long min, long max, const char *what)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || *end || end == s || v < min || v > max)
		die("bad %s '%.*s'", what, UTF8_CUT(s, 32));
	return v;
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

Display *open_display(void)
{
	if (dpy)
		return dpy;
	dpy = XOpenDisplay(NULL);
	if (!dpy)
		die("cannot open display '%s'", getenv("DISPLAY") ? getenv("DISPLAY") : "");
	atexit(close_display);
	return dpy;
}

int ignore_errors(Display *d, XErrorEvent *ev)
{
	return 0;
}

unsigned char *get_prop(Display *d, Window w, Atom prop, Atom type, unsigned long *n)
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

void wm_request(Display *d, Window w, const char *type, long l0, long l1, long l2, long l3)
{
	XEvent ev = {0};
	ev.xclient.type = ClientMessage;
	ev.xclient.window = w;
	ev.xclient.message_type = XInternAtom(d, type, False);
	ev.xclient.format = 32;
	ev.xclient.data.l[0] = l0;
	ev.xclient.data.l[1] = l1;
	ev.xclient.data.l[2] = l2;
	ev.xclient.data.l[3] = l3;
	XSendEvent(d, DefaultRootWindow(d), False,
		   SubstructureRedirectMask | SubstructureNotifyMask, &ev);
	XSync(d, False);
}
