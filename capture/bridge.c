/* deskbox-bridge: one per sandbox.  Speaks RFB (libvncclient) to the
 * sandbox's VNC server and mirrors its framebuffer into the shared memory
 * deskboxd created; turns deskboxd's input events into RFB messages.
 *
 * Started by capture_start() with exactly these fds:
 *   3  a connected stream socket to the VNC server
 *   4  the memfd (struct capture_hdr, then pixels)
 *   5  the control socket (SOCK_SEQPACKET, capture/internal.h)
 * It exits non-zero when the VNC connection drops or deskboxd goes away.
 * Everything the VNC server sends is hostile, the handshake included: the
 * bridge drops privileges and confines itself with seccomp before it reads
 * the first byte from fd 3.
 */
#include <errno.h>
#include <grp.h>
#include <malloc.h>
#include <linux/futex.h>
#include <poll.h>
#include <rfb/rfbclient.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "bridge.h"
#include "capture.h"
#include "common/clock.h"
#include "internal.h"

/* After this long without a message from the server, the scratch memory
 * its last updates dirtied is given back (release_idle). */
#define IDLE_RELEASE_MS 1000

#define FD_VNC 3
#define FD_MEM 4
#define FD_CTL 5

/* Exit statuses, for whoever reads the bridge's wait status. */
enum {
	EXIT_SETUP = 2,	  /* bad fds or shared memory */
	EXIT_RFB = 3,	  /* handshake failed or the VNC connection dropped */
	EXIT_CONTROL = 4, /* deskboxd closed the control socket */
	EXIT_SANDBOX = 5, /* could not drop privileges or install seccomp */
};

static int client_tag; /* address used as the rfbClientGetClientData key */

static void log_nothing(const char *fmt, ...)
{
}

/* Refuses VNC authentication if a server asks for it regardless (RFB 3.3
 * lets the server choose): the default would read a password from stdin. */
static char *no_password(rfbClient *cl)
{
	return NULL;
}

struct bridge *bridge_of(rfbClient *cl)
{
	return rfbClientGetClientData(cl, &client_tag);
}

static rfbBool malloc_fb(rfbClient *cl)
{
	/* SECURITY: width and height come from the VNC server. */
	if (cl->width <= 0 || cl->height <= 0 || (unsigned)cl->width > CAPTURE_MAX_DIM ||
	    (unsigned)cl->height > CAPTURE_MAX_DIM)
		return FALSE;
	size_t sz;
	if (__builtin_mul_overflow((size_t)cl->width, (size_t)cl->height, &sz) ||
	    __builtin_mul_overflow(sz, (size_t)4, &sz))
		return FALSE;
	struct bridge *b = bridge_of(cl);
	if (!b->direct)
		free(cl->frameBuffer);
	cl->frameBuffer = NULL;
	/* The server's size is the one deskboxd fixed (the usual case):
	 * decode straight into the mirror and save a private copy
	 * (4 MB at 1280x800). */
	b->direct = (unsigned)cl->width == b->width && (unsigned)cl->height == b->height;
	if (b->direct) {
		cl->frameBuffer = b->pixels;
		return TRUE;
	}
	/* Zeroed: after a resize libvncclient requests a full update, which
	 * overwrites all of it before anything is mirrored as ready. */
	cl->frameBuffer = calloc(1, sz);
	return cl->frameBuffer != NULL;
}

static void got_update(rfbClient *cl, int x, int y, int w, int h)
{
	struct bridge *b = bridge_of(cl);
	if (w <= 0 || h <= 0)
		return;
	/* SECURITY: the rectangle comes from the VNC server; libvncclient
	 * checked it against its framebuffer, clip it to ours anyway. */
	if (y >= 0 && y < (int)b->height) {
		int y1 = y + h > (int)b->height ? (int)b->height : y + h;
		for (int s = y / (int)CAPTURE_STRIP_ROWS; s <= (y1 - 1) / (int)CAPTURE_STRIP_ROWS;
		     s++)
			b->strips[s] = 1;
	}
	if (!b->ready) {
		if (b->cx1 == 0) {
			b->cx0 = x, b->cy0 = y, b->cx1 = x + w, b->cy1 = y + h;
		} else {
			b->cx0 = x < b->cx0 ? x : b->cx0;
			b->cy0 = y < b->cy0 ? y : b->cy0;
			b->cx1 = x + w > b->cx1 ? x + w : b->cx1;
			b->cy1 = y + h > b->cy1 ? y + h : b->cy1;
		}
	}
	if (!b->have_damage) {
		b->have_damage = 1;
		b->dx0 = x, b->dy0 = y, b->dx1 = x + w, b->dy1 = y + h;
		return;
	}
	if (x < b->dx0)
		b->dx0 = x;
	if (y < b->dy0)
		b->dy0 = y;
	if (x + w > b->dx1)
		b->dx1 = x + w;
	if (y + h > b->dy1)
		b->dy1 = y + h;
}

static void futex_wake(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Announces frame `frame` (changed rows [y0, y1), columns [x0, x1)):
 * damage box, time, ready state, futex wake-up. */
static void publish(struct bridge *b, uint64_t frame, int x0, int y0, int x1, int y1)
{
	struct capture_hdr *h = b->hdr;
	atomic_store(&h->damage_x, x0);
	atomic_store(&h->damage_y, y0);
	atomic_store(&h->damage_w, x1 - x0);
	atomic_store(&h->damage_h, y1 - y0);
	atomic_store(&h->last_change_ns, clock_mono_ns());
	if (!b->ready) {
		b->ready = 1;
		atomic_store(&h->state, CAPTURE_READY);
	}
	atomic_store(&h->frame_futex, (uint32_t)frame);
	futex_wake(&h->frame_futex);
}

/* Marks in b->strips the strips in [y0, y1) whose rows differ between the
 * libvncclient framebuffer and the mirror within columns [x0, x1): servers
 * resend unchanged areas (x11vnc's pointer-driven updates, full refreshes)
 * and only real changes count, so agents can wait for the screen to settle
 * and encoders redo only what changed.  Returns how many strips changed. */
static int changed_strips(struct bridge *b, rfbClient *cl, int x0, int y0, int x1, int y1)
{
	size_t row = (size_t)(x1 - x0) * 4;
	size_t src_stride = (size_t)cl->width * 4, dst_stride = (size_t)b->width * 4;
	int n = 0;
	for (int s = y0 / (int)CAPTURE_STRIP_ROWS; s * (int)CAPTURE_STRIP_ROWS < y1; s++) {
		if (!b->strips[s])
			continue;
		int changed = !b->ready;
		int ys = s * (int)CAPTURE_STRIP_ROWS, ye = ys + (int)CAPTURE_STRIP_ROWS;
		ys = ys < y0 ? y0 : ys;
		ye = ye > y1 ? y1 : ye;
		for (int y = ys; !changed && y < ye; y++)
			changed = memcmp(b->pixels + (size_t)y * dst_stride + (size_t)x0 * 4,
					 cl->frameBuffer + (size_t)y * src_stride + (size_t)x0 * 4,
					 row) != 0;
		b->strips[s] = (uint8_t)changed;
		n += changed;
	}
	return n;
}

/* Copies the changed strips of the damaged box, clipped to both
 * framebuffers, into shared memory under the seqlock, and stamps them with
 * the new frame.  Returns whether any pixel changed. */
static int mirror(struct bridge *b, rfbClient *cl, int x0, int y0, int x1, int y1)
{
	int maxw = cl->width < (int)b->width ? cl->width : (int)b->width;
	int maxh = cl->height < (int)b->height ? cl->height : (int)b->height;
	if (x0 < 0)
		x0 = 0;
	if (y0 < 0)
		y0 = 0;
	if (x1 > maxw)
		x1 = maxw;
	if (y1 > maxh)
		y1 = maxh;
	if (x0 >= x1 || y0 >= y1)
		return 0;
	if (!b->ready)
		memset(b->strips, 1, sizeof(b->strips));
	if (changed_strips(b, cl, x0, y0, x1, y1) == 0)
		return 0;
	size_t row = (size_t)(x1 - x0) * 4;
	size_t src_stride = (size_t)cl->width * 4, dst_stride = (size_t)b->width * 4;
	const uint8_t *src = cl->frameBuffer + (size_t)x0 * 4;
	uint8_t *dst = b->pixels + (size_t)x0 * 4;

	struct capture_hdr *h = b->hdr;
	uint64_t seq = atomic_load_explicit(&h->seq, memory_order_relaxed);
	atomic_store_explicit(&h->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	uint64_t frame = atomic_load_explicit(&h->frame, memory_order_relaxed) + 1;
	int cy0 = y1, cy1 = y0; /* rows of the changed strips */
	for (int s = y0 / (int)CAPTURE_STRIP_ROWS; s * (int)CAPTURE_STRIP_ROWS < y1; s++) {
		if (!b->strips[s])
			continue;
		int ys = s * (int)CAPTURE_STRIP_ROWS, ye = ys + (int)CAPTURE_STRIP_ROWS;
		ys = ys < y0 ? y0 : ys;
		ye = ye > y1 ? y1 : ye;
		cy0 = ys < cy0 ? ys : cy0;
		cy1 = ye > cy1 ? ye : cy1;
		for (int y = ys; y < ye; y++)
			memcpy(dst + (size_t)y * dst_stride, src + (size_t)y * src_stride, row);
		atomic_store_explicit(&h->strip_frame[s], (uint32_t)frame, memory_order_relaxed);
	}
	atomic_store_explicit(&h->frame, frame, memory_order_relaxed);
	atomic_store_explicit(&h->seq, seq + 2, memory_order_release);
	publish(b, frame, x0, cy0, x1, cy1);
	return 1;
}

/* Direct mode: the pixels are in place already; stamps the strips that
 * really changed with the new frame.  Returns whether any did. */
static int mirror_direct(struct bridge *b)
{
	if (!b->ready)
		memset(b->changed, 1, sizeof(b->changed));
	struct capture_hdr *h = b->hdr;
	uint32_t nstrips = (b->height + CAPTURE_STRIP_ROWS - 1) / CAPTURE_STRIP_ROWS;
	uint32_t s0 = nstrips, s1 = 0;
	for (uint32_t s = 0; s < nstrips; s++)
		if (b->changed[s]) {
			s0 = s < s0 ? s : s0;
			s1 = s + 1;
		}
	if (s0 >= s1)
		return 0;
	uint64_t seq = atomic_load_explicit(&h->seq, memory_order_relaxed);
	atomic_store_explicit(&h->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	uint64_t frame = atomic_load_explicit(&h->frame, memory_order_relaxed) + 1;
	for (uint32_t s = s0; s < s1; s++)
		if (b->changed[s])
			atomic_store_explicit(&h->strip_frame[s], (uint32_t)frame,
					      memory_order_relaxed);
	atomic_store_explicit(&h->frame, frame, memory_order_relaxed);
	atomic_store_explicit(&h->seq, seq + 2, memory_order_release);
	uint32_t y1 = s1 * CAPTURE_STRIP_ROWS > b->height ? b->height : s1 * CAPTURE_STRIP_ROWS;
	publish(b, frame, 0, (int)(s0 * CAPTURE_STRIP_ROWS), (int)b->width, (int)y1);
	return 1;
}

static void finished_update(rfbClient *cl)
{
	struct bridge *b = bridge_of(cl);
	if (!b->ready) {
		/* Ready once pixels for the whole screen arrived (the answer to
		 * the handshake's non-incremental request).  x11vnc first
		 * answers with a NewFBSize rectangle and no pixels, so the first
		 * finished update alone proves nothing. */
		if (b->cx0 <= 0 && b->cy0 <= 0 && b->cx1 >= cl->width && b->cy1 >= cl->height) {
			if (b->direct)
				mirror_direct(b);
			else
				mirror(b, cl, 0, 0, cl->width, cl->height);
		}
	} else if (b->have_damage) {
		if (b->direct)
			mirror_direct(b);
		else
			mirror(b, cl, b->dx0, b->dy0, b->dx1, b->dy1);
	}
	b->have_damage = 0;
	memset(b->strips, 0, sizeof(b->strips));
	memset(b->changed, 0, sizeof(b->changed));
}

/* libvncclient decoded a cursor shape (RichCursor/XCursor) into rcSource
 * (pixels in our 32-bit format) and rcMask (one byte per pixel, non-zero
 * where the cursor is opaque).  Mirror it, with its own seqlock, for
 * screenshots that show the pointer. */
static void got_cursor(rfbClient *cl, int xhot, int yhot, int width, int height, int bpp)
{
	struct bridge *b = bridge_of(cl);
	struct capture_hdr *h = b->hdr;
	int ok = bpp == 4 && cl->rcSource && cl->rcMask && width > 0 && height > 0 &&
		 (unsigned)width <= CAPTURE_CURSOR_MAX && (unsigned)height <= CAPTURE_CURSOR_MAX;
	uint64_t seq = atomic_load_explicit(&h->cursor_seq, memory_order_relaxed);
	atomic_store_explicit(&h->cursor_seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	if (ok) {
		size_t n = (size_t)width * (size_t)height;
		for (size_t i = 0; i < n; i++) {
			memcpy(b->cursor + i * 4, cl->rcSource + i * 4, 3);
			b->cursor[i * 4 + 3] = cl->rcMask[i] ? 255 : 0;
		}
	}
	atomic_store_explicit(&h->cursor_w, ok ? (uint32_t)width : 0, memory_order_relaxed);
	atomic_store_explicit(&h->cursor_h, ok ? (uint32_t)height : 0, memory_order_relaxed);
	atomic_store_explicit(&h->cursor_hot_x, xhot, memory_order_relaxed);
	atomic_store_explicit(&h->cursor_hot_y, yhot, memory_order_relaxed);
	atomic_store_explicit(&h->cursor_seq, seq + 2, memory_order_release);
}

static int send_events(struct bridge *b, rfbClient *cl, const struct input_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		rfbBool ok = TRUE;
		switch (ev[i].type) {
		case INPUT_MOVE: {
			/* RFB coordinates are 16-bit; keep them on the screen. */
			int x = ev[i].x, y = ev[i].y;
			int maxx = cl->width > 0 ? cl->width - 1 : 0;
			int maxy = cl->height > 0 ? cl->height - 1 : 0;
			b->px = x < 0 ? 0 : x > maxx ? maxx : x;
			b->py = y < 0 ? 0 : y > maxy ? maxy : y;
			ok = SendPointerEvent(cl, b->px, b->py, b->buttons);
			atomic_store(&b->hdr->pointer_x, b->px);
			atomic_store(&b->hdr->pointer_y, b->py);
			break;
		}
		case INPUT_BUTTON:
			if (ev[i].button < 1 || ev[i].button > 8)
				break;
			if (ev[i].down)
				b->buttons |= 1 << (ev[i].button - 1);
			else
				b->buttons &= ~(1 << (ev[i].button - 1));
			ok = SendPointerEvent(cl, b->px, b->py, b->buttons);
			break;
		case INPUT_KEY:
			ok = SendKeyEvent(cl, ev[i].keysym, ev[i].down ? TRUE : FALSE);
			break;
		default:
			break;
		}
		if (!ok)
			return -1;
	}
	return 0;
}

/* Sends the pending ack once its message's bytes were all written to the
 * VNC socket.  Returns 0, or the exit status. */
static int send_ack(struct bridge *b)
{
	if (!b->ack_pending || b->sent < b->ack_at)
		return 0;
	b->ack_pending = 0;
	struct capture_ack ack = {.magic = CAPTURE_ACK_MAGIC, .seq = b->ack_seq, .status = 0};
	if (send(FD_CTL, &ack, sizeof(ack), MSG_NOSIGNAL) != (ssize_t)sizeof(ack))
		return EXIT_CONTROL;
	return 0;
}

/* The VNC socket's bytes not yet read by the server (-1 when unknown). */
static int unread(int fd)
{
	int q = -1;
	return ioctl(fd, SIOCOUTQ, &q) == 0 ? q : -1;
}

/* While an ack waits: every CAPTURE_PROGRESS_MS, tells deskboxd when the
 * server read some of the socket's bytes since the last look.  Returns 0,
 * or the exit status. */
static int note_progress(struct bridge *b, int fd)
{
	long long now = clock_mono_ms();
	if (!b->ack_pending || now < b->progress_ms + CAPTURE_PROGRESS_MS)
		return 0;
	int q = unread(fd);
	int moved = q >= 0 && b->outq >= 0 && q < b->outq;
	b->outq = q;
	b->progress_ms = now;
	if (!moved)
		return 0;
	struct capture_ack note = {
	    .magic = CAPTURE_ACK_MAGIC, .seq = b->ack_seq, .status = CAPTURE_ACK_PROGRESS};
	if (send(FD_CTL, &note, sizeof(note), MSG_NOSIGNAL) != (ssize_t)sizeof(note))
		return EXIT_CONTROL;
	return 0;
}

/* Handles one control datagram: queues its events as RFB messages and
 * writes what the socket takes; the ack follows when all of them are
 * written (send_ack).  Returns 0, or the exit status. */
static int handle_control(struct bridge *b, rfbClient *cl)
{
	static union {
		struct capture_msg m;
		uint8_t raw[sizeof(struct capture_msg) +
			    CAPTURE_MSG_EVENTS * sizeof(struct input_event) + 1];
	} buf;
	ssize_t n = recv(FD_CTL, buf.raw, sizeof(buf.raw), MSG_DONTWAIT);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : EXIT_CONTROL;
	if (n == 0)
		return EXIT_CONTROL;
	/* deskboxd is trusted, but a size check costs nothing. */
	size_t len = (size_t)n;
	if (len < sizeof(buf.m) || buf.m.magic != CAPTURE_MSG_MAGIC ||
	    buf.m.n > CAPTURE_MSG_EVENTS ||
	    len != sizeof(buf.m) + (size_t)buf.m.n * sizeof(struct input_event))
		return EXIT_CONTROL;
	struct input_event ev[CAPTURE_MSG_EVENTS];
	memcpy(ev, buf.raw + sizeof(buf.m), (size_t)buf.m.n * sizeof(ev[0]));
	b->batch = 1;
	int st = send_events(b, cl, ev, buf.m.n);
	b->batch = 0;
	if (st == 0)
		st = bridge_out_flush(b, cl->sock);
	if (st < 0) {
		struct capture_ack ack = {
		    .magic = CAPTURE_ACK_MAGIC, .seq = buf.m.seq, .status = -1};
		send(FD_CTL, &ack, sizeof(ack), MSG_NOSIGNAL);
		return EXIT_RFB;
	}
	b->ack_pending = 1;
	b->ack_seq = buf.m.seq;
	b->ack_at = b->queued;
	b->outq = unread(cl->sock);
	b->progress_ms = clock_mono_ms();
	return send_ack(b);
}

/* Reads the server's ProtocolVersion and accepts RFB 3.7 and later only:
 * in 3.3 (and the 3.4-3.6 variants treated like it) the server imposes the
 * security type, and libvncclient follows it into TLS, SASL or VeNCrypt
 * whatever SetClientAuthSchemes() said.  The 12 bytes are left in the
 * client's read buffer, where ReadFromRFBServer() takes them first.
 * Returns 0, or -1 to refuse. */
static int check_version(rfbClient *cl)
{
	char v[13];
	size_t got = 0;
	while (got < 12) {
		ssize_t n = read(cl->sock, v + got, 12 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	v[12] = '\0';
	unsigned major, minor;
	if (memcmp(v, "RFB ", 4) != 0 || v[7] != '.' || v[11] != '\n' ||
	    sscanf(v + 4, "%3u.%3u", &major, &minor) != 2)
		return -1;
	if (major < 3 || (major == 3 && minor < 7))
		return -1;
	memcpy(cl->buf, v, 12);
	cl->bufoutptr = cl->buf;
	cl->buffered = 12;
	return 0;
}

static int map_shared(struct bridge *b)
{
	struct stat st;
	if (fstat(FD_MEM, &st) < 0 || st.st_size < (off_t)CAPTURE_HDR_SIZE)
		return -1;
	size_t len = (size_t)st.st_size;
	uint8_t *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, FD_MEM, 0);
	if (map == MAP_FAILED)
		return -1;
	close(FD_MEM);
	struct capture_hdr *h = (struct capture_hdr *)map;
	if (h->magic != CAPTURE_MAGIC || h->version != CAPTURE_VERSION || h->width == 0 ||
	    h->height == 0 || h->width > CAPTURE_MAX_DIM || h->height > CAPTURE_MAX_DIM)
		return -1;
	b->width = h->width;
	b->height = h->height;
	/* Never write past the mapping, whatever the header says. */
	if ((size_t)b->width * b->height * 4 + CAPTURE_CURSOR_SIZE > len - CAPTURE_HDR_SIZE)
		return -1;
	b->hdr = h;
	b->pixels = map + CAPTURE_HDR_SIZE;
	b->cursor = map + len - CAPTURE_CURSOR_SIZE;
	return 0;
}

static void fail(struct bridge *b, int status)
{
	if (b->hdr) {
		atomic_store(&b->hdr->state, CAPTURE_FAILED);
		atomic_fetch_add(&b->hdr->frame_futex, 1);
		futex_wake(&b->hdr->frame_futex);
	}
	_exit(status);
}

/* A libvncclient client for the connection on FD_VNC, set up for
 * mirroring into `b`. */
static rfbClient *new_client(struct bridge *b)
{
	rfbClient *cl = rfbGetClient(8, 3, 4);
	if (!cl)
		return NULL;
	rfbClientSetClientData(cl, &client_tag, b);
	/* The sandbox's VNC server has no password (deskboxd's token is the
	 * authentication): accepting only None keeps a hostile server from
	 * steering libvncclient into its TLS, SASL or DES code. */
	static const uint32_t auth_none[] = {rfbNoAuth};
	SetClientAuthSchemes(cl, auth_none, 1);
	cl->GetPassword = no_password;
	/* Xvfb's own layout, so x11vnc sends pixels without translating them:
	 * 0x00RRGGBB little-endian, bytes B, G, R, X. */
	cl->format.bitsPerPixel = 32;
	cl->format.depth = 24;
	cl->format.bigEndian = FALSE;
	cl->format.trueColour = TRUE;
	cl->format.redMax = cl->format.greenMax = cl->format.blueMax = 255;
	cl->format.redShift = 16;
	cl->format.greenShift = 8;
	cl->format.blueShift = 0;
	/* Over a local socket, decoding costs more than the bytes: raw plus
	 * copyrect for scrolling and window moves. */
	cl->appData.encodingsString = "copyrect raw";
	/* Ask for the cursor as a separate shape (pseudo-encodings) so the
	 * server does not paint it into the framebuffer: screenshots show the
	 * screen, not a pointer sprite, and do not change when only the
	 * pointer moves. */
	cl->appData.useRemoteCursor = TRUE;
	cl->canHandleNewFBSize = TRUE;
	cl->MallocFrameBuffer = malloc_fb;
	cl->GotFrameBufferUpdate = got_update;
	cl->FinishedFrameBufferUpdate = finished_update;
	cl->GotCursorShape = got_cursor;
	bridge_draw_install(cl);
	/* The connection is already open: with listenSpecified set,
	 * rfbInitClient skips its own connect and handshakes on `sock`. */
	cl->sock = FD_VNC;
	cl->listenSpecified = TRUE;
	/* Bounds how long a server that stops mid-message can stall us. */
	cl->readTimeout = 30;
	return cl;
}

/* An idle desktop's bridge keeps only what it needs: libvncclient decodes
 * raw rectangles through its 300 KB `buffer` (RFB_BUFFER_SIZE, part of the
 * rfbClient), dead between messages, and a full-screen update dirties all
 * of it; its pages and malloc's free ones go back to the kernel and come
 * back zeroed with the next large update.  cl->buf, which holds bytes
 * read ahead, is not touched. */
static void release_idle(rfbClient *cl)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)cl->buffer + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)cl->buffer + sizeof(cl->buffer)) & ~(page - 1);
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
	malloc_trim(0);
}

/* What poll() reported: a control message, room in the VNC socket,
 * messages from the server.  Returns 0, or the exit status. */
static int handle_ready(struct bridge *b, rfbClient *cl, const struct pollfd *p)
{
	if (p[1].revents) {
		int st = handle_control(b, cl);
		if (st)
			return st;
	}
	if ((p[0].revents & POLLOUT) && bridge_out_flush(b, cl->sock) < 0)
		return EXIT_RFB;
	if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
		/* One read may buffer several messages; poll() would not
		 * report those again. */
		do {
			if (!HandleRFBServerMessage(cl))
				return EXIT_RFB;
		} while (cl->buffered > 0);
		/* A unix socket says POLLOUT only once three quarters of its
		 * buffer were read; a write may fit before that. */
		if (bridge_out_pending(b) && bridge_out_flush(b, cl->sock) < 0)
			return EXIT_RFB;
	}
	int st = send_ack(b);
	return st ? st : note_progress(b, cl->sock);
}

/* The main loop; returns only through fail(). */
static void serve(struct bridge *b, rfbClient *cl)
{
	int used = 1; /* messages handled since release_idle() */
	for (;;) {
		/* While a message's events wait for the socket, the next one
		 * waits in the control socket (deskboxd sends it after the
		 * ack anyway); the server's messages are read all along. */
		short vnc_ev = POLLIN | (bridge_out_pending(b) ? POLLOUT : 0);
		struct pollfd p[2] = {{.fd = cl->sock, .events = vnc_ev},
				      {.fd = b->ack_pending ? -1 : FD_CTL, .events = POLLIN}};
		int n = poll(p, 2,
			     b->ack_pending ? CAPTURE_PROGRESS_MS
			     : used	    ? IDLE_RELEASE_MS
					    : -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail(b, EXIT_SETUP);
		int st = 0;
		if (n == 0 && b->ack_pending) {
			st = note_progress(b, cl->sock);
		} else if (n == 0) {
			release_idle(cl);
			used = 0;
		} else {
			st = handle_ready(b, cl, p);
			used |= (p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
		}
		if (st)
			fail(b, st);
	}
}

int main(void)
{
	struct bridge b = {0};
	rfbClientLog = log_nothing;
	rfbClientErr = log_nothing;
	if (map_shared(&b) < 0)
		fail(&b, EXIT_SETUP);
	/* Before any byte of the sandbox's: the handshake (version, security
	 * types, ServerInit) is parsed by the same library as the rest. */
	if (bridge_sandbox() < 0)
		fail(&b, EXIT_SANDBOX);

	rfbClient *cl = new_client(&b);
	if (!cl)
		fail(&b, EXIT_SETUP);
	if (check_version(cl) < 0 || !rfbInitClient(cl, NULL, NULL)) /* frees cl on failure */
		fail(&b, EXIT_RFB);

	/* Every write of libvncclient's must go through the queue
	 * (bridge_out.c), or it could block the loop below again. */
	if (!bridge_out_took_over(&b))
		fail(&b, EXIT_SETUP);
	/* Non-blocking from here, so that readTimeout applies: libvncclient
	 * then waits in select() and gives up on a server that stalls mid
	 * message instead of blocking input forever.  Writes are queued. */
	if (!SetNonBlocking(cl->sock))
		fail(&b, EXIT_SETUP);
	b.queue = 1;

	serve(&b, cl);
}
