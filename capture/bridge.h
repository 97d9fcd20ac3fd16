/* deskbox-bridge internals (capture/bridge*.c, linked only into the bridge). */
#ifndef DESKBOX_CAPTURE_BRIDGE_H
#define DESKBOX_CAPTURE_BRIDGE_H

#include <rfb/rfbclient.h>
#include <stdint.h>

#include "capture.h"

/* Unwritten bytes the bridge holds for the VNC server at most: one control
 * message of events (at most 8 bytes each) and libvncclient's update
 * requests, with room to spare. */
#define BRIDGE_OUT_SIZE 65536u

/* Per-connection state, attached to the rfbClient (no globals). */
struct bridge {
	struct capture_hdr *hdr;
	uint8_t *pixels;	/* shared, hdr->width x hdr->height */
	uint8_t *cursor;	/* shared, CAPTURE_CURSOR_SIZE bytes */
	uint32_t width, height; /* read once from the header and validated */
	/* libvncclient's framebuffer is the shared one (the server's size is
	 * ours): it decodes straight into the mirror, no private copy. */
	int direct;
	int have_damage;
	int dx0, dy0, dx1, dy1;		 /* damage bounding box of the current update */
	uint8_t strips[CAPTURE_STRIPS];	 /* strips the current update's rectangles touch */
	uint8_t changed[CAPTURE_STRIPS]; /* direct: strips whose pixels really changed */
	int ready;
	int cx0, cy0, cx1, cy1; /* bounding box of all pixels received before ready */
	int buttons;		/* RFB button mask */
	int px, py;		/* pointer position */
	/* Bytes for the VNC server not yet written (capture/bridge_out.c):
	 * out[out_off, out_len).  `queued` and `sent` count all bytes ever
	 * queued and written; `writes` counts libvncclient's calls. */
	int queue; /* main loop: queue instead of blocking writes */
	int batch; /* queue without writing (send_events) */
	size_t out_off, out_len;
	uint64_t queued, sent, writes;
	/* The control message whose ack waits until `sent` reaches ack_at;
	 * the VNC socket's unread bytes (SIOCOUTQ) when last looked at, at
	 * progress_ms, for the progress notes (capture/internal.h). */
	int ack_pending;
	uint32_t ack_seq;
	uint64_t ack_at;
	int outq;
	long long progress_ms;
	uint8_t out[BRIDGE_OUT_SIZE];
};

struct bridge *bridge_of(rfbClient *cl);

/* Installs the pixel-writing hooks (GotBitmap, GotCopyRect, GotFillRect,
 * capture/bridge_draw.c) through which libvncclient writes every pixel of
 * the raw and copyrect encodings: with b->direct they write into shared
 * memory under the seqlock, compare before writing and mark
 * b->changed. */
void bridge_draw_install(rfbClient *cl);

/* The output queue (capture/bridge_out.c), which also replaces
 * libvncclient's WriteToRFBServer.  bridge_out_push appends `n` bytes
 * (-1 when the queue is full); bridge_out_flush writes what the socket
 * takes without blocking (-1 when the connection failed);
 * bridge_out_pending says whether bytes wait; bridge_out_took_over whether
 * libvncclient's writes came through the queue's function (checked after
 * the handshake: a libvncclient that binds its calls internally would
 * write around the queue). */
int bridge_out_push(struct bridge *b, const void *data, size_t n);
int bridge_out_flush(struct bridge *b, int fd);
int bridge_out_pending(const struct bridge *b);
int bridge_out_took_over(const struct bridge *b);

/* Drops to nobody/nogroup (65534, no supplementary groups) when any of its
 * ids is root, makes the process non-dumpable, sets no_new_privs and
 * installs the seccomp allowlist for the handshake and the main loop.  Call
 * before the first read from the VNC socket.  Returns 0 or -1. */
int bridge_sandbox(void);

#endif
