/* deskbox-bridge internals (capture/bridge*.c, linked only into the bridge). */
#ifndef DESKBOX_CAPTURE_BRIDGE_H
#define DESKBOX_CAPTURE_BRIDGE_H

#include <rfb/rfbclient.h>
#include <stdint.h>

#include "capture.h"

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
	int dx0, dy0, dx1, dy1; /* damage bounding box of the current update */
	uint8_t strips[CAPTURE_STRIPS];	 /* strips the current update's rectangles touch */
	uint8_t changed[CAPTURE_STRIPS]; /* direct: strips whose pixels really changed */
	int ready;
	int cx0, cy0, cx1, cy1; /* bounding box of all pixels received before ready */
	int buttons;		/* RFB button mask */
	int px, py;		/* pointer position */
};

struct bridge *bridge_of(rfbClient *cl);

/* Installs the pixel-writing hooks (GotBitmap, GotCopyRect, GotFillRect,
 * capture/bridge_draw.c) through which libvncclient writes every pixel of
 * the raw and copyrect encodings: with b->direct they write into shared
 * memory under the seqlock, compare before writing and mark
 * b->changed. */
void bridge_draw_install(rfbClient *cl);

/* Drops to nobody/nogroup (65534, no supplementary groups) when any of its
 * ids is root, makes the process non-dumpable, sets no_new_privs and
 * installs the seccomp allowlist for the handshake and the main loop.  Call
 * before the first read from the VNC socket.  Returns 0 or -1. */
int bridge_sandbox(void);

#endif
