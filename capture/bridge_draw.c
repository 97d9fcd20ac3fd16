/* deskbox-bridge: the pixel writes of libvncclient's decoders.
 *
 * With the raw and copyrect encodings (all the bridge asks for) every
 * pixel libvncclient decodes passes through these three hooks.  In direct
 * mode its framebuffer is the shared mirror itself, so each write
 *  - compares first, writes only rows that differ and marks their strips
 *    in b->changed (servers resend unchanged areas; only real changes may
 *    become frames, and the encoder redoes only stamped strips);
 *  - runs under the seqlock, so deskboxd never copies a half-written row.
 * The frame counter and strip stamps follow at the end of the update
 * (bridge.c, mirror_direct).  Outside direct mode (the server's size is
 * not deskboxd's) they write the private framebuffer that mirror()
 * copies from.
 */
#include <stdatomic.h>
#include <string.h>

#include "bridge.h"

static void write_begin(struct bridge *b)
{
	if (!b->direct)
		return;
	uint64_t seq = atomic_load_explicit(&b->hdr->seq, memory_order_relaxed);
	atomic_store_explicit(&b->hdr->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static void write_end(struct bridge *b)
{
	if (!b->direct)
		return;
	uint64_t seq = atomic_load_explicit(&b->hdr->seq, memory_order_relaxed);
	atomic_store_explicit(&b->hdr->seq, seq + 1, memory_order_release);
}

/* SECURITY: rectangles come from the VNC server.  libvncclient checks them
 * against its framebuffer; clip here anyway.  Returns 0 when nothing is
 * left, else the clipped width and height in *cw, *ch. */
static int clip(rfbClient *cl, int x, int y, int w, int h, int *cw, int *ch)
{
	if (!cl->frameBuffer || w <= 0 || h <= 0 || x < 0 || y < 0 || x >= cl->width ||
	    y >= cl->height)
		return 0;
	*cw = w < cl->width - x ? w : cl->width - x;
	*ch = h < cl->height - y ? h : cl->height - y;
	return 1;
}

/* Writes one row of `len` bytes at `dst` from `src` (memmove: copyrect
 * rows may overlap); in direct mode only when it differs, marking row y's
 * strip. */
static void put_row(struct bridge *b, uint8_t *dst, const uint8_t *src, size_t len, int y)
{
	if (b->direct) {
		if (memcmp(dst, src, len) == 0)
			return;
		b->changed[(unsigned)y / CAPTURE_STRIP_ROWS] = 1;
	}
	memmove(dst, src, len);
}

static void got_bitmap(rfbClient *cl, const uint8_t *buf, int x, int y, int w, int h)
{
	struct bridge *b = bridge_of(cl);
	int cw, ch;
	if (cl->format.bitsPerPixel != 32 || !clip(cl, x, y, w, h, &cw, &ch))
		return;
	size_t fstride = (size_t)cl->width * 4, bstride = (size_t)w * 4;
	uint8_t *dst = cl->frameBuffer + (size_t)y * fstride + (size_t)x * 4;
	write_begin(b);
	for (int r = 0; r < ch; r++)
		put_row(b, dst + (size_t)r * fstride, buf + (size_t)r * bstride, (size_t)cw * 4,
			y + r);
	write_end(b);
}

static void got_copy_rect(rfbClient *cl, int sx, int sy, int w, int h, int dx, int dy)
{
	struct bridge *b = bridge_of(cl);
	int sw, sh, dw, dh;
	if (cl->format.bitsPerPixel != 32 || !clip(cl, sx, sy, w, h, &sw, &sh) ||
	    !clip(cl, dx, dy, w, h, &dw, &dh))
		return;
	int cw = sw < dw ? sw : dw, ch = sh < dh ? sh : dh;
	size_t fstride = (size_t)cl->width * 4;
	uint8_t *fb = cl->frameBuffer;
	write_begin(b);
	/* Overlapping areas: copy rows away from the destination first. */
	for (int i = 0; i < ch; i++) {
		int r = dy > sy ? ch - 1 - i : i;
		put_row(b, fb + (size_t)(dy + r) * fstride + (size_t)dx * 4,
			fb + (size_t)(sy + r) * fstride + (size_t)sx * 4, (size_t)cw * 4, dy + r);
	}
	write_end(b);
}

static void got_fill_rect(rfbClient *cl, int x, int y, int w, int h, uint32_t colour)
{
	struct bridge *b = bridge_of(cl);
	int cw, ch;
	if (cl->format.bitsPerPixel != 32 || !clip(cl, x, y, w, h, &cw, &ch))
		return;
	size_t fstride = (size_t)cl->width * 4;
	write_begin(b);
	for (int r = 0; r < ch; r++) {
		uint32_t *row = (uint32_t *)(void *)(cl->frameBuffer + (size_t)(y + r) * fstride +
						     (size_t)x * 4);
		int same = 1;
		for (int i = 0; same && i < cw; i++)
			same = row[i] == colour;
		if (same && b->direct)
			continue;
		for (int i = 0; i < cw; i++)
			row[i] = colour;
		if (b->direct)
			b->changed[(unsigned)(y + r) / CAPTURE_STRIP_ROWS] = 1;
	}
	write_end(b);
}

void bridge_draw_install(rfbClient *cl)
{
	cl->GotBitmap = got_bitmap;
	cl->GotCopyRect = got_copy_rect;
	cl->GotFillRect = got_fill_rect;
}
