/* The bridge's bytes to the VNC server: one ordered queue, never a
 * blocking write in the main loop.
 *
 * Why: the VNC servers deskbox runs (deskbox-vnc, x11vnc) are
 * single-threaded.  While one writes a framebuffer update to the bridge it
 * reads nothing, for up to its client timeout (5 s for deskbox-vnc,
 * libvncserver's rfbWriteExact).  libvncclient's own WriteToRFBServer
 * waits in select() with no timeout when the socket is full.  A bridge
 * that wrote a message of key events that way, not reading the update the
 * server was writing at the same time (an echoing terminal that scrolls
 * makes updates of hundreds of KB, and 278 separate 8-byte writes fill a
 * unix socket's 208 KB of buffer accounting), waited for the server while
 * the server waited for it, until the server dropped the connection: the
 * type_text 504 "the capture bridge did not take input in 5000 ms".
 *
 * So every byte libvncclient sends goes through WriteToRFBServer below
 * (libvncclient calls it through its PLT: this definition in the
 * executable takes the place of the library's, ELF symbol interposition,
 * checked once in main() by bridge_out_took_over()), into b->out; the main
 * loop writes it out non-blocking whenever the socket takes bytes and goes
 * on reading the server's messages meanwhile.  The queue keeps the byte
 * order of everything sent, libvncclient's FramebufferUpdateRequests
 * included, so a partial write never splits a message.  Key and pointer
 * events of one control message are written together: one write, not one
 * per event. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "bridge.h"

/* Writes all of `buf` to the still blocking socket (the handshake, before
 * the main loop).  Returns 0 or -1. */
static int write_all(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return -1;
			continue;
		}
		if (w <= 0)
			return -1;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

int bridge_out_push(struct bridge *b, const void *data, size_t n)
{
	if (n > sizeof(b->out) - b->out_len) {
		/* Room at the front first (written bytes). */
		memmove(b->out, b->out + b->out_off, b->out_len - b->out_off);
		b->out_len -= b->out_off;
		b->out_off = 0;
	}
	/* More than BRIDGE_OUT_SIZE unwritten bytes: the server has not read
	 * a whole message of events nor its update requests; treated as a
	 * dead connection. */
	if (n > sizeof(b->out) - b->out_len)
		return -1;
	memcpy(b->out + b->out_len, data, n);
	b->out_len += n;
	b->queued += n;
	return 0;
}

int bridge_out_flush(struct bridge *b, int fd)
{
	while (b->out_off < b->out_len) {
		ssize_t w = send(fd, b->out + b->out_off, b->out_len - b->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (w <= 0)
			return -1;
		b->out_off += (size_t)w;
		b->sent += (uint64_t)w;
	}
	b->out_off = b->out_len = 0;
	return 0;
}

int bridge_out_pending(const struct bridge *b)
{
	return b->out_off < b->out_len;
}

int bridge_out_took_over(const struct bridge *b)
{
	return b->writes > 0;
}

/* Replaces libvncclient's function of the same name (see the top): called
 * for every message it sends, key and pointer events included. */
rfbBool WriteToRFBServer(rfbClient *cl, const char *buf, unsigned int n)
{
	struct bridge *b = bridge_of(cl);
	if (!b)
		return FALSE;
	b->writes++;
	if (!b->queue)
		return write_all(cl->sock, buf, n) == 0 ? TRUE : FALSE;
	if (bridge_out_push(b, buf, n) < 0)
		return FALSE;
	/* A control message's events go out together (send_events flushes). */
	if (!b->batch && bridge_out_flush(b, cl->sock) < 0)
		return FALSE;
	return TRUE;
}
