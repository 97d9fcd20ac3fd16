/* vnc_rfb: the view-only filter on a viewer's client-to-server RFB stream.
 *
 * deskboxd does not parse RFB except here: for a view-only viewer it follows
 * the client side of the protocol (RFC 6143) just far enough to drop the
 * messages that act on the desktop (KeyEvent 4, PointerEvent 5,
 * ClientCutText 6) and to refuse anything it does not know.  The client's
 * stream alone decides the framing, so the server's bytes are never looked
 * at:
 *
 *   ProtocolVersion   12 bytes, "RFB 003.007\n" or "RFB 003.008\n" (3.3 lets
 *                     the server pick the security type, which this side
 *                     cannot see, so it is refused)
 *   security type     1 byte, must be 1 (None: the sandbox's VNC server has
 *                     no password; deskboxd's token is the authentication)
 *   ClientInit        1 byte
 *   then messages:    SetPixelFormat(0) 20, SetEncodings(2) 4+4n,
 *                     FramebufferUpdateRequest(3) 10 are forwarded;
 *                     KeyEvent(4) 8, PointerEvent(5) 6, ClientCutText(6)
 *                     8+len are dropped (|len| at most RFB_CUTTEXT_MAX, a
 *                     negative len being the ExtendedClipboard form; the
 *                     payload skipped, never buffered); any other type
 *                     ends the connection.
 *
 * Messages may arrive split anywhere (across WebSocket frames); at most one
 * message header (20 bytes) is held back between calls.
 */
#ifndef DESKBOX_SERVER_VNC_RFB_H
#define DESKBOX_SERVER_VNC_RFB_H

#include <stddef.h>
#include <stdint.h>

/* SECURITY: a peer-chosen length; the text is dropped unread, the bound only
 * keeps a view-only viewer from streaming unbounded junk as "clipboard". */
#define RFB_CUTTEXT_MAX (1u << 20)
/* The most rfb_filter_feed() may emit beyond its input: a held-back header. */
#define RFB_FILTER_SLACK 20

struct rfb_filter {
	int state;
	unsigned char hdr[RFB_FILTER_SLACK]; /* the part of a header seen so far */
	size_t have, need;
	uint64_t left;	  /* bytes of a body still to pass (SetEncodings) or skip (cut text) */
	uint64_t dropped; /* messages dropped */
	int refused_type; /* the message type that broke the stream, -1: none */
};

void rfb_filter_init(struct rfb_filter *f);

/* Feeds `n` client bytes and writes those to forward, in order, to `out`
 * (capacity n + RFB_FILTER_SLACK).  Returns how many, or -1 when the stream
 * is not RFB as described above (the connection must end). */
long rfb_filter_feed(struct rfb_filter *f, const unsigned char *in, size_t n, unsigned char *out);

#endif
