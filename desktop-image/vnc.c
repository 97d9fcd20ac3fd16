/* deskbox-vnc: the sandbox's VNC server (the default; x11vnc is the other), built on
 * libvncserver (see README.md).
 *
 *   deskbox-vnc [-display DPY] [-fbfile FILE] SOCKET
 *
 * Mirrors the X display's root window into the RFB framebuffer and serves
 * it on the unix socket SOCKET only (no TCP, no WebSocket, no HTTP).  With
 * -fbfile (Xvfb's -fbdir screen file) the framebuffer is Xvfb's screen
 * itself, mapped read-only: no copy, no read after a change (vnc_fb.h).  Why it
 * beats x11vnc here (measured numbers in README.md):
 * - Changes are found through XDamage, not by polling the screen: an idle
 *   desktop costs no CPU, and a change is read (XShmGetImage of the damaged
 *   rows, straight into the framebuffer, which is the SHM segment itself)
 *   and sent within ~1 ms instead of x11vnc's 20-40 ms pacing.
 * - A new connection gets the RFB banner at once, not after libvncserver's
 *   100 ms wait for a WebSocket request (see webSocketsCheck below).
 * - The cursor goes to clients as a shape (XFixes), never into the pixels.
 * Single-threaded: one poll() loop over the X connection, the listening
 * socket and the clients; Xlib and libvncserver are used from it only.
 * Runs as the sandbox's unprivileged user; its clients (deskboxd's bridge)
 * treat it as hostile anyway.
 */
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/extensions/XShm.h>
#include <X11/extensions/Xdamage.h>
#include <X11/extensions/Xfixes.h>
#include <X11/extensions/XTest.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <rfb/rfb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "vnc_fb.h"
#include "vnc_input.h"
#include "vnc_sync.h"
#include "vnc_util.h"

/* Damage is collected this long after the first report before the screen
 * is read: an xterm echo is several drawing requests (glyph, cursor) within
 * ~0.3 ms, which then go out as one update. */
#define COALESCE_NS 1000000u
/* Damaged row ranges closer than this are read as one band: a row of 1280
 * pixels is 5 KB, cheaper than another XShmGetImage round trip. */
#define BAND_GAP 32
/* More rectangles than this are marked per band instead (libvncserver's
 * region code is quadratic in the worst case). */
#define MAX_MARK_RECTS 64
/* Connections at once: deskboxd's bridge, browser viewers, a spare. */
#define MAX_CLIENTS 16
/* How long libvncserver waits for the rest of a message a client started:
 * single-threaded, so a stalled client stalls every client this long. */
#define CLIENT_WAIT_MS 5000
#define MAX_CURSOR     256

struct vnc {
	Display *dpy;
	Window root;
	int width, height;
	rfbScreenInfoPtr rfb;
	/* width * height * 4: Xvfb's own screen (xfb mapped), else the SHM
	 * segment, else malloc'd */
	uint8_t *fb;
	const char *fb_file; /* Xvfb's screen file (-fbfile), or NULL */
	struct vnc_fb xfb;
	rfbCursorPtr held_cursor; /* see hide_cursor_from() */
	XShmSegmentInfo shm;
	XImage *img; /* SHM image header, pointed at the rows to read */
	int have_shm;
	int damage_base, fixes_base;
	Damage damage;
	XserverRegion parts;
	int damage_pending;
	uint64_t flush_at;
	int listen_fd, sig_fd;
	char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	ino_t sock_ino; /* the socket file's inode, to remove only our own */
	struct vnc_input in;
	struct vnc_sync sync;
	int n_clients;
	unsigned flushes;
};

/* Xlib's error handler takes no context argument: the one place a global
 * is needed.  Holds the last X error code (0 none). */
static int x_error;

/* libvncserver's log: chatty ("Client ... gone", encodings); only with
 * DESKBOX_VNC_DEBUG.  Its errors always. */
static void rfb_log(const char *fmt, ...)
{
	if (!vnc_debug_enabled)
		return;
	char buf[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	vnc_say("%s", buf);
}

static void rfb_err(const char *fmt, ...)
{
	char buf[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* Said for every connection: our sockets are unix sockets. */
	if (strstr(buf, "TCP_NODELAY") && !vnc_debug_enabled)
		return;
	vnc_say("%s", buf);
}

static int on_x_error(Display *dpy, XErrorEvent *ev)
{
	char text[128];
	XGetErrorText(dpy, ev->error_code, text, sizeof(text));
	vnc_debug("X error: %s (request %d.%d)", text, ev->request_code, ev->minor_code);
	x_error = ev->error_code;
	return 0;
}

static int on_x_io_error(Display *dpy)
{
	(void)dpy;
	vnc_say("lost the connection to the X server");
	_exit(1);
}

/* libvncserver (Debian's is built with WebSocket support) calls this for
 * every new client and waits up to 100 ms for the client to send a
 * WebSocket request first; a plain RFB client never speaks first, so each
 * connection would pay the whole 100 ms before the banner.  Our clients
 * speak plain RFB (deskboxd terminates browser WebSockets itself), so this
 * definition replaces the library's through ELF symbol interposition:
 * libvncserver 0.9.14 calls it through its PLT.  A library that binds the
 * call internally runs its own check, which costs 100 ms per connection and
 * changes nothing else. */
rfbBool webSocketsCheck(rfbClientPtr cl)
{
	(void)cl;
	return TRUE;
}

static struct vnc *vnc_of(rfbClientPtr cl)
{
	return cl->screen->screenData;
}

/* Reads rows [y0, y1) of the root window into the framebuffer. */
static void read_rows(struct vnc *v, int y0, int y1)
{
	if (y0 < 0)
		y0 = 0;
	if (y1 > v->height)
		y1 = v->height;
	if (y0 >= y1 || v->xfb.map)
		return; /* Xvfb's own pixels: already in place */
	size_t stride = (size_t)v->width * 4;
	if (v->have_shm) {
		/* Full-width rows are contiguous in the framebuffer, so the X
		 * server writes them in place: no copy on our side. */
		v->img->height = y1 - y0;
		v->img->data = (char *)v->fb + (size_t)y0 * stride;
		if (!XShmGetImage(v->dpy, v->root, v->img, 0, y0, AllPlanes))
			vnc_debug("XShmGetImage of rows %d-%d failed", y0, y1);
		return;
	}
	XImage *im = XGetImage(v->dpy, v->root, 0, y0, (unsigned)v->width, (unsigned)(y1 - y0),
			       AllPlanes, ZPixmap);
	if (!im)
		return;
	if (im->bits_per_pixel == 32 && im->bytes_per_line >= (int)stride)
		for (int y = 0; y < y1 - y0; y++)
			memcpy(v->fb + (size_t)(y0 + y) * stride,
			       im->data + (size_t)y * (size_t)im->bytes_per_line, stride);
	XDestroyImage(im);
}

static int cmp_rect_y(const void *a, const void *b)
{
	const XRectangle *p = a, *q = b;
	return (p->y > q->y) - (p->y < q->y);
}

/* Takes the damage the X server collected (XDamageSubtract into a region:
 * no damage between reading and clearing is lost), reads the damaged rows
 * and marks the damaged rectangles for the clients.  On Xvfb's own screen
 * nothing is read: XFixesFetchRegion waits for its reply, and the X server,
 * single-threaded, finished drawing what it reported before it answers. */
static void flush_damage(struct vnc *v)
{
	v->damage_pending = 0;
	XDamageSubtract(v->dpy, v->damage, None, v->parts);
	int n = 0;
	XRectangle *r = XFixesFetchRegion(v->dpy, v->parts, &n);
	if (!r)
		return;
	if (n <= 0) {
		XFree(r);
		return;
	}
	v->flushes++;
	qsort(r, (size_t)n, sizeof(r[0]), cmp_rect_y);
	int b0 = -1, b1 = -1, bx0 = 0, bx1 = 0;
	for (int i = 0; i <= n; i++) {
		int end = i == n;
		int y0 = end ? 0 : r[i].y, y1 = end ? 0 : r[i].y + r[i].height;
		int x0 = end ? 0 : r[i].x, x1 = end ? 0 : r[i].x + r[i].width;
		if (!end && b0 >= 0 && y0 <= b1 + BAND_GAP) {
			b1 = y1 > b1 ? y1 : b1;
			bx0 = x0 < bx0 ? x0 : bx0;
			bx1 = x1 > bx1 ? x1 : bx1;
			continue;
		}
		if (b0 >= 0) {
			read_rows(v, b0, b1);
			if (n > MAX_MARK_RECTS)
				rfbMarkRectAsModified(v->rfb, bx0 < 0 ? 0 : bx0, b0,
						      bx1 > v->width ? v->width : bx1,
						      b1 > v->height ? v->height : b1);
		}
		b0 = y0, b1 = y1, bx0 = x0, bx1 = x1;
	}
	if (n <= MAX_MARK_RECTS)
		for (int i = 0; i < n; i++) {
			/* rfbMarkRectAsModified clips to the screen. */
			rfbMarkRectAsModified(v->rfb, r[i].x, r[i].y, r[i].x + r[i].width,
					      r[i].y + r[i].height);
		}
	XFree(r);
}

/* The cursor image from XFixes (ARGB, premultiplied, in longs) as a rich
 * cursor: colour in the framebuffer's format, a mask where alpha >= 50 %,
 * and the alpha channel for clients that let libvncserver draw it. */
static void update_cursor(struct vnc *v)
{
	XFixesCursorImage *ci = XFixesGetCursorImage(v->dpy);
	if (!ci)
		return;
	unsigned w = ci->width, h = ci->height;
	if (w == 0 || h == 0 || w > MAX_CURSOR || h > MAX_CURSOR) {
		XFree(ci);
		return;
	}
	size_t mask_row = (w + 7) / 8;
	rfbCursorPtr c = calloc(1, sizeof(*c));
	uint8_t *rich = calloc((size_t)w * h, 4);
	uint8_t *alpha = calloc((size_t)w * h, 1);
	uint8_t *mask = calloc(mask_row * h, 1);
	uint8_t *source = calloc(mask_row * h, 1);
	if (!c || !rich || !alpha || !mask || !source) {
		free(c), free(rich), free(alpha), free(mask), free(source);
		XFree(ci);
		return;
	}
	for (unsigned y = 0; y < h; y++)
		for (unsigned x = 0; x < w; x++) {
			uint32_t p = (uint32_t)ci->pixels[(size_t)y * w + x];
			uint32_t a = p >> 24, r = (p >> 16) & 0xff, g = (p >> 8) & 0xff,
				 b = p & 0xff;
			if (a && a < 255) { /* un-premultiply */
				r = r * 255 / a, g = g * 255 / a, b = b * 255 / a;
				r = r > 255 ? 255 : r, g = g > 255 ? 255 : g, b = b > 255 ? 255 : b;
			}
			uint8_t *d = rich + ((size_t)y * w + x) * 4;
			d[0] = (uint8_t)b, d[1] = (uint8_t)g, d[2] = (uint8_t)r, d[3] = 0;
			alpha[(size_t)y * w + x] = (uint8_t)a;
			if (a >= 128) {
				mask[y * mask_row + x / 8] |= (uint8_t)(0x80 >> (x % 8));
				/* X-cursor fallback: light pixels as the
				 * foreground colour (white), dark as black. */
				if (r + g + b >= 384)
					source[y * mask_row + x / 8] |= (uint8_t)(0x80 >> (x % 8));
			}
		}
	c->width = (unsigned short)w;
	c->height = (unsigned short)h;
	c->xhot = (unsigned short)(ci->xhot < w ? ci->xhot : 0);
	c->yhot = (unsigned short)(ci->yhot < h ? ci->yhot : 0);
	c->richSource = rich;
	c->alphaSource = alpha;
	c->mask = mask;
	c->source = source;
	c->foreRed = c->foreGreen = c->foreBlue = 0xffff;
	c->backRed = c->backGreen = c->backBlue = 0;
	c->cleanup = c->cleanupSource = c->cleanupMask = c->cleanupRichSource = TRUE;
	XFree(ci);
	/* Frees the previous cursor (cleanup set) and tells every client. */
	rfbSetCursor(v->rfb, c);
}

static void on_key(rfbBool down, rfbKeySym keysym, rfbClientPtr cl)
{
	struct vnc *v = vnc_of(cl);
	/* After a click, the key waits until the WM handled it (vnc_sync.c). */
	if (down)
		vnc_sync_before_key(&v->sync);
	vnc_input_key(&v->in, down ? 1 : 0, keysym);
}

static void on_pointer(int mask, int x, int y, rfbClientPtr cl)
{
	struct vnc *v = vnc_of(cl);
	/* Buttons 1-3 focus windows; the wheel does not. */
	if ((mask ^ v->in.buttons) & 7)
		vnc_sync_button(&v->sync);
	vnc_input_pointer(&v->in, mask, x, y);
	/* Records the position and sends it to the other clients that asked
	 * for pointer positions. */
	rfbDefaultPtrAddEvent(mask, v->in.px, v->in.py, cl);
}

/* libvncserver draws the cursor into the framebuffer for a client that
 * cannot take it as a shape, and restores the pixels after the update:
 * into Xvfb's own screen that would be a write to a read-only mapping (and
 * a race with the X server).  Around such a client's update the screen
 * has no cursor, so those clients see the pixels without the pointer;
 * clients with cursor shapes (deskboxd's bridge, noVNC) are unchanged. */
static void hide_cursor_from(rfbClientPtr cl)
{
	struct vnc *v = vnc_of(cl);
	if (!v->xfb.map || cl->enableCursorShapeUpdates || v->held_cursor)
		return;
	v->held_cursor = v->rfb->cursor;
	v->rfb->cursor = NULL;
}

static void show_cursor_again(rfbClientPtr cl, int result)
{
	(void)result;
	struct vnc *v = vnc_of(cl);
	if (!v->held_cursor)
		return;
	v->rfb->cursor = v->held_cursor;
	v->held_cursor = NULL;
}

static void on_client_gone(rfbClientPtr cl)
{
	struct vnc *v = vnc_of(cl);
	v->n_clients--;
	vnc_debug("client gone (%d left)", v->n_clients);
}

static void accept_client(struct vnc *v)
{
	int fd = accept4(v->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (v->n_clients >= MAX_CLIENTS || fd >= FD_SETSIZE) {
		/* libvncserver keeps its clients in an fd_set. */
		vnc_say("refusing a connection: %d clients", v->n_clients);
		close(fd);
		return;
	}
	/* Sends the banner at once (webSocketsCheck above). */
	rfbClientPtr cl = rfbNewClient(v->rfb, fd);
	if (!cl)
		return; /* closed by libvncserver */
	v->n_clients++;
	cl->clientGoneHook = on_client_gone;
	vnc_debug("client connected (%d)", v->n_clients);
}

/* Creates the listening socket under a temporary name and renames it into
 * place once it listens: the path appearing means connections succeed
 * (deskbox-init treats it as the server being ready). */
static int listen_unix(struct vnc *v, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char tmp[sizeof(sa.sun_path)];
	if (strlen(path) >= sizeof(sa.sun_path) ||
	    snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid()) >= (int)sizeof(tmp)) {
		vnc_say("socket path '%s' is too long", path);
		return -1;
	}
	snprintf(v->sock_path, sizeof(v->sock_path), "%s", path);
	memcpy(sa.sun_path, tmp, strlen(tmp) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		vnc_say("socket: %s", strerror(errno));
		return -1;
	}
	unlink(tmp);
	/* Only our user (and root, i.e. deskboxd) may connect. */
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 16) < 0 || rename(tmp, path) < 0) {
		vnc_say("cannot listen on '%s': %s", path, strerror(errno));
		unlink(tmp);
		close(fd);
		return -1;
	}
	struct stat st;
	v->sock_ino = stat(path, &st) == 0 ? st.st_ino : 0;
	v->listen_fd = fd;
	return 0;
}

/* Checks that the root window's pixels are what the RFB pixel format below
 * says: 32 bits, 0x00RRGGBB, little-endian (Xvfb -screen WxHx24). */
static int check_visual(struct vnc *v)
{
	Visual *vis = DefaultVisual(v->dpy, DefaultScreen(v->dpy));
	XImage *probe = XCreateImage(v->dpy, vis, 24, ZPixmap, 0, NULL, 1, 1, 32, 0);
	int ok = DefaultDepth(v->dpy, DefaultScreen(v->dpy)) == 24 && vis->red_mask == 0xff0000 &&
		 vis->green_mask == 0xff00 && vis->blue_mask == 0xff && probe &&
		 probe->bits_per_pixel == 32 && ImageByteOrder(v->dpy) == LSBFirst;
	if (probe)
		XDestroyImage(probe);
	if (!ok)
		vnc_say("the display is not 24-bit TrueColor 0x00RRGGBB, little-endian");
	return ok ? 0 : -1;
}

/* The framebuffer: Xvfb's own screen when it keeps it in a file (-fbfile,
 * vnc_fb.h), read in place; else a SysV SHM segment the X server writes
 * into (MIT-SHM), removed at once so that it goes away with both
 * processes; malloc'd (and read with XGetImage, ~30x slower) when MIT-SHM
 * is unavailable. */
static int make_framebuffer(struct vnc *v)
{
	size_t size = (size_t)v->width * (size_t)v->height * 4;
	Visual *vis = DefaultVisual(v->dpy, DefaultScreen(v->dpy));
	if (v->fb_file) {
		if (vnc_fb_map(&v->xfb, v->fb_file, v->width, v->height) == 0) {
			/* Read only (vnc_fb.h); libvncserver's one write, the
			 * cursor for clients without cursor shapes, is kept
			 * out by hide_cursor_from(). */
			v->fb = (uint8_t *)v->xfb.pixels;
			return 0;
		}
		vnc_say("copying the screen instead");
	}
	if (XShmQueryExtension(v->dpy)) {
		v->shm.shmid = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
		if (v->shm.shmid >= 0) {
			v->shm.shmaddr = shmat(v->shm.shmid, NULL, 0);
			v->shm.readOnly = False;
			if (v->shm.shmaddr != (char *)-1) {
				x_error = 0;
				XShmAttach(v->dpy, &v->shm);
				XSync(v->dpy, False);
				v->have_shm = x_error == 0;
			}
			shmctl(v->shm.shmid, IPC_RMID, NULL);
		}
	}
	if (v->have_shm) {
		v->img = XShmCreateImage(v->dpy, vis, 24, ZPixmap, NULL, &v->shm,
					 (unsigned)v->width, (unsigned)v->height);
		if (!v->img || v->img->bytes_per_line != v->width * 4) {
			vnc_say("unexpected SHM image layout");
			return -1;
		}
		v->fb = (uint8_t *)v->shm.shmaddr;
	} else {
		vnc_say("MIT-SHM unavailable, reading the screen with XGetImage");
		if (v->shm.shmaddr && v->shm.shmaddr != (char *)-1)
			shmdt(v->shm.shmaddr);
		v->fb = calloc(1, size);
		if (!v->fb)
			return -1;
	}
	return 0;
}

static int open_x(struct vnc *v, const char *display)
{
	XSetErrorHandler(on_x_error);
	XSetIOErrorHandler(on_x_io_error);
	v->dpy = XOpenDisplay(display);
	if (!v->dpy) {
		vnc_say("cannot open display '%s'", display ? display : "");
		return -1;
	}
	v->root = DefaultRootWindow(v->dpy);
	v->width = DisplayWidth(v->dpy, DefaultScreen(v->dpy));
	v->height = DisplayHeight(v->dpy, DefaultScreen(v->dpy));
	int err, major, minor;
	if (v->width <= 0 || v->height <= 0 || v->width > 8192 || v->height > 8192) {
		vnc_say("unsupported screen size %dx%d", v->width, v->height);
		return -1;
	}
	if (!XDamageQueryExtension(v->dpy, &v->damage_base, &err) ||
	    !XDamageQueryVersion(v->dpy, &major, &minor) ||
	    !XFixesQueryExtension(v->dpy, &v->fixes_base, &err) ||
	    !XFixesQueryVersion(v->dpy, &major, &minor) || major < 2 ||
	    !XTestQueryExtension(v->dpy, &err, &err, &major, &minor)) {
		vnc_say("the X server lacks DAMAGE, XFIXES 2 or XTEST");
		return -1;
	}
	if (check_visual(v) < 0 || make_framebuffer(v) < 0)
		return -1;
	if (vnc_input_init(&v->in, v->dpy, v->width, v->height) < 0) {
		vnc_say("cannot read the keymap");
		return -1;
	}
	if (vnc_sync_init(&v->sync, v->dpy) < 0) {
		vnc_say("cannot create a window");
		return -1;
	}
	/* NonEmpty: one event until we take the damage (flush_damage), however
	 * much is drawn meanwhile; the region then says exactly what. */
	v->damage = XDamageCreate(v->dpy, v->root, XDamageReportNonEmpty);
	v->parts = XFixesCreateRegion(v->dpy, NULL, 0);
	XFixesSelectCursorInput(v->dpy, v->root, XFixesDisplayCursorNotifyMask);
	/* Xvfb draws its (software) cursor into the screen, which its
	 * GetImage hides but its screen file shows: hidden on the screen
	 * while we are connected, it still comes to us as a shape. */
	if (v->xfb.map) {
		/* Gone from the screen before anything is served from it. */
		XFixesHideCursor(v->dpy, v->root);
		XSync(v->dpy, False);
	}
	/* The damage object exists before this first read, so nothing drawn
	 * in between is missed. */
	read_rows(v, 0, v->height);
	return 0;
}

static int open_rfb(struct vnc *v)
{
	int argc = 1;
	char *argv[] = {"deskbox-vnc", NULL};
	v->rfb = rfbGetScreen(&argc, argv, v->width, v->height, 8, 3, 4);
	if (!v->rfb)
		return -1;
	rfbScreenInfoPtr s = v->rfb;
	s->screenData = v;
	s->desktopName = "deskbox";
	s->frameBuffer = (char *)v->fb;
	/* Xvfb's layout, which deskboxd's bridge asks for too: no translation. */
	s->serverFormat.bitsPerPixel = 32;
	s->serverFormat.depth = 24;
	s->serverFormat.bigEndian = FALSE;
	s->serverFormat.trueColour = TRUE;
	s->serverFormat.redMax = s->serverFormat.greenMax = s->serverFormat.blueMax = 255;
	s->serverFormat.redShift = 16;
	s->serverFormat.greenShift = 8;
	s->serverFormat.blueShift = 0;
	/* No listening sockets of libvncserver's own: we accept on the unix
	 * socket and hand the connections over with rfbNewClient(). */
	s->autoPort = FALSE;
	s->port = -1;
	s->ipv6port = -1;
	s->httpPort = -1;
	s->http6Port = -1;
	s->httpDir = NULL;
	s->udpPort = 0;
	/* Send a change as soon as a client has asked for one. */
	s->deferUpdateTime = 0;
	s->deferPtrUpdateTime = 0;
	s->alwaysShared = TRUE;
	s->handleEventsEagerly = TRUE;
	s->permitFileTransfer = FALSE;
	s->displayHook = hide_cursor_from;
	s->displayFinishedHook = show_cursor_again;
	s->kbdAddEvent = on_key;
	s->ptrAddEvent = on_pointer;
	s->cursor = NULL;
	rfbMaxClientWait = CLIENT_WAIT_MS;
	rfbInitServer(s);
	int x = 0, y = 0, wx, wy;
	Window r, c;
	unsigned mask;
	if (XQueryPointer(v->dpy, v->root, &r, &c, &x, &y, &wx, &wy, &mask)) {
		s->cursorX = x;
		s->cursorY = y;
	}
	update_cursor(v);
	return 0;
}

static void handle_x_events(struct vnc *v)
{
	while (XPending(v->dpy)) {
		XEvent ev;
		XNextEvent(v->dpy, &ev);
		if (ev.type == v->damage_base + XDamageNotify) {
			if (!v->damage_pending) {
				v->damage_pending = 1;
				v->flush_at = clock_mono_ns() + COALESCE_NS;
			}
		} else if (ev.type == v->fixes_base + XFixesCursorNotify) {
			update_cursor(v);
		} else if (ev.type == MappingNotify) {
			XRefreshKeyboardMapping(&ev.xmapping);
			if (ev.xmapping.request != MappingPointer)
				vnc_input_mapping_changed(&v->in);
		}
	}
}

static int run(struct vnc *v)
{
	for (;;) {
		handle_x_events(v);
		uint64_t now = clock_mono_ns();
		/* With nobody connected the damage waits: a client's first
		 * update comes after the first loop turn that accepted it. */
		if (v->damage_pending && v->n_clients > 0 && now >= v->flush_at) {
			flush_damage(v);
			handle_x_events(v);
		}
		XFlush(v->dpy);

		struct pollfd p[3 + MAX_CLIENTS];
		int np = 0;
		p[np++] = (struct pollfd){.fd = v->sig_fd, .events = POLLIN};
		p[np++] = (struct pollfd){.fd = ConnectionNumber(v->dpy), .events = POLLIN};
		p[np++] = (struct pollfd){.fd = v->listen_fd, .events = POLLIN};
		rfbClientIteratorPtr it = rfbGetClientIterator(v->rfb);
		for (rfbClientPtr cl; (cl = rfbClientIteratorNext(it)) && np < 3 + MAX_CLIENTS;)
			if (cl->sock != RFB_INVALID_SOCKET)
				p[np++] = (struct pollfd){.fd = cl->sock, .events = POLLIN};
		rfbReleaseClientIterator(it);
		struct timespec ts, *tsp = NULL;
		if (v->damage_pending && v->n_clients > 0) {
			uint64_t wait = v->flush_at > now ? v->flush_at - now : 0;
			ts = (struct timespec){.tv_sec = 0, .tv_nsec = (long)wait};
			tsp = &ts;
		}
		if (ppoll(p, (nfds_t)np, tsp, NULL) < 0 && errno != EINTR) {
			vnc_say("poll: %s", strerror(errno));
			return 1;
		}
		if (p[0].revents) {
			struct signalfd_siginfo si;
			if (read(v->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				vnc_debug("%s", strsignal((int)si.ssi_signo));
				return 0;
			}
		}
		if (p[2].revents)
			accept_client(v);
		int client_input = 0;
		for (int i = 3; i < np; i++)
			client_input |= p[i].revents != 0;
		if (client_input || p[2].revents) {
			/* Reads every complete message (handleEventsEagerly),
			 * sends what clients asked for and drops closed ones. */
			rfbProcessEvents(v->rfb, 0);
		}
		handle_x_events(v);
		if (v->damage_pending && v->n_clients > 0 && clock_mono_ns() >= v->flush_at)
			flush_damage(v);
		/* Updates for damage just read (no-op when nothing changed). */
		rfbProcessEvents(v->rfb, 0);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: deskbox-vnc [-display DISPLAY] [-fbfile FILE] SOCKET\n"
			"Serves the X display (default $DISPLAY) over RFB on the unix "
			"socket SOCKET only;\nwith -fbfile, straight from Xvfb's screen "
			"file (Xvfb -fbdir) instead of a copy.\n");
}

int main(int argc, char **argv)
{
	const char *display = NULL, *sock = NULL, *fb_file = NULL;
	for (int i = 1; i < argc; i++) {
		if ((!strcmp(argv[i], "-display") || !strcmp(argv[i], "--display")) &&
		    i + 1 < argc) {
			display = argv[++i];
		} else if (!strcmp(argv[i], "-fbfile") && i + 1 < argc) {
			fb_file = argv[++i];
		} else if (argv[i][0] == '-' || sock) {
			usage();
			return 2;
		} else {
			sock = argv[i];
		}
	}
	if (!sock) {
		usage();
		return 2;
	}
	vnc_debug_enabled = getenv("DESKBOX_VNC_DEBUG") != NULL;
	rfbLog = rfb_log;
	rfbErr = rfb_err;
	uint64_t t0 = clock_mono_ns();

	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct vnc v = {.listen_fd = -1, .fb_file = fb_file};
	v.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (v.sig_fd < 0) {
		vnc_say("signalfd: %s", strerror(errno));
		return 1;
	}
	if (open_x(&v, display) < 0 || open_rfb(&v) < 0 || listen_unix(&v, sock) < 0)
		return 1;
	vnc_debug("serving %dx%d on %s after %.1f ms (%s)", v.width, v.height, sock,
		  (double)(clock_mono_ns() - t0) / 1e6,
		  v.xfb.map    ? "Xvfb's screen in place"
		  : v.have_shm ? "MIT-SHM"
			       : "XGetImage");
	int rc = run(&v);

	vnc_debug("%u damage flushes, %u keycode rebinds (%u waited), %u window manager round "
		  "trips (%u unanswered)",
		  v.flushes, v.in.rebinds, v.in.rebind_waits, v.sync.syncs, v.sync.lost);
	/* Remove the socket file only if it is still ours (another instance
	 * may have replaced it). */
	struct stat st;
	if (stat(v.sock_path, &st) == 0 && st.st_ino == v.sock_ino)
		unlink(v.sock_path);
	rfbShutdownServer(v.rfb, TRUE);
	vnc_input_release(&v.in);
	if (v.xfb.map) {
		vnc_fb_unmap(&v.xfb);
	} else if (v.have_shm) {
		XShmDetach(v.dpy, &v.shm);
		v.img->data = NULL;
		XDestroyImage(v.img);
		XSync(v.dpy, False);
		shmdt(v.shm.shmaddr);
	} else {
		free(v.fb);
	}
	rfbScreenCleanup(v.rfb);
	XCloseDisplay(v.dpy);
	close(v.listen_fd);
	close(v.sig_fd);
	return rc;
}
