/* capture: the per-sandbox framebuffer mirror and its PNG encoding.
 *
 * A bridge process (build/deskbox-bridge, capture/bridge.c) holds the one
 * libvncclient connection to a sandbox's VNC server and mirrors the
 * framebuffer into shared memory; deskboxd reads that memory and sends input
 * events to the bridge over a socket.  The RFB parser therefore never runs in
 * deskboxd: the bridge runs unprivileged under seccomp, and a crash there
 * costs one sandbox's mirror.
 *
 * Trust: deskboxd treats the shared memory as written by an attacker.  It
 * uses only the dimensions it fixed itself (struct capture keeps its own
 * copy), bounds every retry loop, and reads only fixed-format messages.
 */
#ifndef DESKBOX_CAPTURE_H
#define DESKBOX_CAPTURE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "input/input.h"

#define CAPTURE_MAGIC	 0x46584244u /* "DBXF" */
#define CAPTURE_VERSION	 3u
#define CAPTURE_HDR_SIZE 4096u /* pixels start here, page aligned */
#define CAPTURE_MAX_DIM	 8192u /* widest/tallest display accepted */
/* The cursor shape area follows the pixels: CAPTURE_CURSOR_MAX squared
 * 32-bit B,G,R,A values (A is 0 or 255, from the RFB cursor mask), rows
 * `cursor_w * 4` bytes apart.  Larger cursors are not mirrored. */
#define CAPTURE_CURSOR_MAX  64u
#define CAPTURE_CURSOR_SIZE (CAPTURE_CURSOR_MAX * CAPTURE_CURSOR_MAX * 4u)
/* The bridge records, per strip of CAPTURE_STRIP_ROWS rows, the frame that
 * last changed a pixel in it, so that an encoder can redo only the strips
 * changed since the frame it encoded last (one damage box per frame is too
 * coarse once several frames passed). */
#define CAPTURE_STRIP_ROWS 16u
#define CAPTURE_STRIPS	   (CAPTURE_MAX_DIM / CAPTURE_STRIP_ROWS)

enum capture_state {
	CAPTURE_CONNECTING = 0,
	CAPTURE_READY = 1, /* first full frame mirrored */
	CAPTURE_FAILED = 2,
};

/* The shared memory's header.  Pixels follow at CAPTURE_HDR_SIZE: `height`
 * rows of `width` 32-bit little-endian 0x00RRGGBB values (bytes B, G, R, X),
 * rows `width * 4` bytes apart; then the cursor area (CAPTURE_CURSOR_SIZE). */
struct capture_hdr {
	uint32_t magic, version;
	uint32_t width, height; /* written by deskboxd before the bridge starts */
	_Atomic uint32_t state; /* enum capture_state */
	/* Low 32 bits of `frame`: a futex word the bridge wakes on every change
	 * (FUTEX_WAKE, shared mapping, so not FUTEX_PRIVATE). */
	_Atomic uint32_t frame_futex;
	/* Seqlock around pixel writes: odd while the bridge copies pixels in. */
	_Atomic uint64_t seq;
	/* Completed framebuffer updates that changed pixels; 1 after the first
	 * full frame. */
	_Atomic uint64_t frame;
	_Atomic uint64_t last_change_ns; /* CLOCK_MONOTONIC of the last change */
	/* Bounding box of the last change. */
	_Atomic int32_t damage_x, damage_y, damage_w, damage_h;
	/* Pointer position as last sent by the bridge. */
	_Atomic int32_t pointer_x, pointer_y;
	/* Cursor shape, under its own seqlock (odd while the bridge writes):
	 * size and hot spot as the VNC server sent them, 0x0 when none. */
	_Atomic uint64_t cursor_seq;
	_Atomic uint32_t cursor_w, cursor_h;
	_Atomic int32_t cursor_hot_x, cursor_hot_y;
	/* Low 32 bits of the frame that last changed strip i (rows i * 16 to
	 * i * 16 + 15), written under `seq` together with the pixels. */
	_Atomic uint32_t strip_frame[CAPTURE_STRIPS];
};
_Static_assert(sizeof(struct capture_hdr) <= CAPTURE_HDR_SIZE, "capture header too big");

/* deskboxd's handle on one bridge: process, shared memory, control socket.
 * Thread-safe: input from several threads is serialised inside. */
struct capture;

struct capture_opts {
	const char *bridge_path; /* the deskbox-bridge binary */
	uint32_t width, height;	 /* the display size deskboxd configured */
};

/* Starts a bridge speaking RFB over `vnc_fd` (a connected stream socket to the
 * sandbox's VNC server; ownership passes to the capture, also on failure).
 * Returns at once; use capture_wait_ready().  Caller frees with
 * capture_free(). */
int capture_start(struct capture **out, const struct capture_opts *o, int vnc_fd, struct err *e);

/* Waits until the first full frame is mirrored.  ERR_TIMEOUT after
 * `timeout_ms`, ERR_UNAVAILABLE if the bridge died. */
int capture_wait_ready(struct capture *c, int timeout_ms, struct err *e);

/* Kills and reaps the bridge and unmaps the memory.  NULL is fine. */
void capture_free(struct capture *c);

/* 1 while the bridge runs and is connected, 0 otherwise (it exits when the
 * VNC connection drops; the owner may start a new one). */
int capture_alive(struct capture *c);

/* The bridge's pid (for tests and accounting), -1 once gone. */
pid_t capture_pid(const struct capture *c);

uint32_t capture_width(const struct capture *c);
uint32_t capture_height(const struct capture *c);

/* The current frame counter and the CLOCK_MONOTONIC ns of the last change. */
uint64_t capture_frame(const struct capture *c);
uint64_t capture_last_change_ns(const struct capture *c);

/* Pointer position as last sent. */
void capture_pointer(const struct capture *c, int32_t *x, int32_t *y);

/* Waits until the frame counter differs from `since` or `timeout_ms` passes.
 * Returns 1 on a change, 0 on timeout, negative on error (bridge gone). */
int capture_wait_frame(struct capture *c, uint64_t since, int timeout_ms, struct err *e);

struct capture_rect {
	uint32_t x, y, w, h;
};
/* What changed after frame `since`: the last change's box, widened to the
 * full width of every strip changed since then when more than one frame
 * passed (the bridge keeps one box, but a frame per strip).  Clipped to
 * the display; 0x0 when nothing changed. */
void capture_damage(const struct capture *c, uint64_t since, struct capture_rect *r);

/* Copies a consistent (not torn) copy of `r` into `dst` (rows `dst_stride`
 * bytes apart, same B,G,R,X layout) and reports its frame number.  `r` must
 * lie inside the display (ERR_INVALID otherwise).  Retries a bounded number
 * of times while the bridge is writing; ERR_UNAVAILABLE if it never settles. */
int capture_snapshot(struct capture *c, struct capture_rect r, uint8_t *dst, size_t dst_stride,
		     uint64_t *frame, struct err *e);

/* Like capture_snapshot, but copies only the bands of CAPTURE_BAND_ROWS
 * rows (counted from the top of `r`) that hold a row changed after frame
 * `since` (every band when `since` is 0) or marked in `rows` on entry
 * (r.h bytes, non-zero: copy anyway).  On return `rows` marks the rows
 * copied; the others of `dst` are left as they were. */
int capture_snapshot_since(struct capture *c, struct capture_rect r, uint8_t *dst,
			   size_t dst_stride, uint64_t since, uint8_t *rows, uint64_t *frame,
			   struct err *e);

/* Sends `n` events and returns once the bridge has written them to the VNC
 * connection, in order.  INPUT_PAUSE events are not sent: the sender sleeps
 * there (holding the input order for other senders).  ERR_UNAVAILABLE if
 * the bridge is gone. */
int capture_send(struct capture *c, const struct input_event *ev, size_t n, struct err *e);

/* The cursor shape: copies it (B,G,R,A, rows `*w * 4` bytes apart) into
 * `dst` (CAPTURE_CURSOR_SIZE bytes) with its size and hot spot, and a serial
 * that changes with the shape.  Returns 1, or 0 when there is no (valid)
 * shape.  Sizes written by the bridge are bounded here. */
int capture_cursor(struct capture *c, uint8_t *dst, uint32_t *w, uint32_t *h, int32_t *hot_x,
		   int32_t *hot_y, uint64_t *serial);

/* Draws a B,G,R,A cursor (`cw` x `ch`, rows `cw * 4` apart) with its top
 * left at (`x`, `y`) onto a B,G,R,X image, clipped to it. */
void capture_draw_cursor(uint8_t *img, uint32_t w, uint32_t h, size_t stride, const uint8_t *cur,
			 uint32_t cw, uint32_t ch, int32_t x, int32_t y);

/* Resamples a B,G,R,X image to `dw` x `dh` (box filter when shrinking,
 * nearest pixel when enlarging).  Pure; both images are caller-owned. */
void capture_scale(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride, uint8_t *dst,
		   uint32_t dw, uint32_t dh, size_t dstride);

/* Encodes a B,G,R,X image as baseline JPEG (libjpeg-turbo) at `quality`
 * 1..100.  *out is malloc'd, owned by the caller. */
int capture_jpeg_encode(const uint8_t *bgrx, uint32_t w, uint32_t h, size_t stride, int quality,
			uint8_t **out, size_t *out_len, struct err *e);

/* Encodes a B,G,R,X image as WebP (libwebp), lossless or lossy at
 * `quality` 0..100; at most 16383 pixels a side.  *out is malloc'd, owned
 * by the caller. */
int capture_webp_encode(const uint8_t *bgrx, uint32_t w, uint32_t h, size_t stride, int lossless,
			int quality, uint8_t **out, size_t *out_len, struct err *e);

/* Encodes a B,G,R,X image as an RGB PNG with zlib `level` (0..9; 1 is the
 * fast default) and SUB filtering.  On success *out is malloc'd, owned by the
 * caller. */
int capture_png_encode(const uint8_t *bgrx, uint32_t w, uint32_t h, size_t stride, int level,
		       uint8_t **out, size_t *out_len, struct err *e);

enum capture_format {
	CAPTURE_PNG = 0,
	CAPTURE_JPEG = 1,
	CAPTURE_WEBP = 2,
};

/* A screenshot request, in real pixels. */
struct capture_shot_req {
	struct capture_rect r; /* region of the display */
	uint32_t ow, oh;       /* output size (scaled when it differs from r's) */
	int format;	       /* enum capture_format */
	int quality;	       /* JPEG 1..100, lossy WebP 0..100 */
	int lossless;	       /* WebP: lossless (quality unused) */
	int level;	       /* PNG zlib level 0..9 */
	int cursor;	       /* draw the pointer */
};

/* Encodes the current screen as `q` asks into *out (malloc'd, owned by the
 * caller) and reports the frame it shows.  Each mirror keeps its latest few
 * encoded images (bounded in count and bytes): asking again for the same
 * frame with the same request (and pointer, when drawn) costs a copy.  An
 * unscaled PNG is encoded incrementally: only the bands changed since the
 * previous such encode are recompressed.  Thread-safe; requests on one
 * mirror are encoded one at a time. */
int capture_shot(struct capture *c, const struct capture_shot_req *q, uint8_t **out,
		 size_t *out_len, uint64_t *frame, struct err *e);

/* The same as one shared, read-only image: a repeat for the same frame
 * costs a reference, not a copy.  Release it with capture_image_put. */
struct capture_image;
int capture_shot_image(struct capture *c, const struct capture_shot_req *q,
		       struct capture_image **out, uint64_t *frame, struct err *e);
const uint8_t *capture_image_data(const struct capture_image *im, size_t *len);
/* Drops a reference (NULL: nothing); thread-safe. */
void capture_image_put(struct capture_image *im);

/* Incremental banded PNG encoder (capture_bands.c): keeps the compressed
 * bands of its last image so that the next encode of an image of the same
 * size and level recompresses only the bands with a changed row.  Bands
 * are CAPTURE_BAND_ROWS rows (a multiple of CAPTURE_STRIP_ROWS), each an
 * independent deflate segment; the output is one standard PNG: 8-bit
 * palette when the image has at most 256 colours, else 8-bit RGB.  Not
 * thread-safe: one encode at a time per encoder (it uses the machine's
 * other cores itself when many bands changed). */
#define CAPTURE_BAND_ROWS 32u
struct capture_bands;
int capture_bands_new(struct capture_bands **out, struct err *e);
void capture_bands_free(struct capture_bands *b);

/* Encodes a B,G,R,X image as a PNG (zlib `level` 0..9).  `dirty` has one
 * byte per row (non-zero: changed since the previous encode) or is NULL
 * (all changed).  Rows of bands that are not redone are not read.  Every
 * band is redone after a change of size or level or a failed encode.
 * *out is malloc'd, owned by the caller; *redone (may be NULL) is the
 * number of bands recompressed.  Returns 0, or 1 with no image when a
 * partial encode of a palette image met a colour the palette cannot take:
 * the bands not redone change too, so call again with every row of the
 * image and `dirty` NULL.  Negative on errors. */
int capture_bands_encode(struct capture_bands *b, const uint8_t *bgrx, uint32_t w, uint32_t h,
			 size_t stride, int level, const uint8_t *dirty, uint8_t **out,
			 size_t *out_len, uint32_t *redone, struct err *e);

#endif
