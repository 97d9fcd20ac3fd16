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

#include "../common/error.h"
#include "../input/input.h"

#define CAPTURE_MAGIC	 0x46584244u /* "DBXF" */
#define CAPTURE_VERSION	 1u
#define CAPTURE_HDR_SIZE 4096u /* pixels start here, page aligned */
#define CAPTURE_MAX_DIM	 8192u /* widest/tallest display accepted */

enum capture_state {
	CAPTURE_CONNECTING = 0,
	CAPTURE_READY = 1, /* first full frame mirrored */
	CAPTURE_FAILED = 2,
};

/* The shared memory's header.  Pixels follow at CAPTURE_HDR_SIZE: `height`
 * rows of `width` 32-bit little-endian 0x00RRGGBB values (bytes B, G, R, X),
 * rows `width * 4` bytes apart. */
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
};

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

/* Copies a consistent (not torn) copy of `r` into `dst` (rows `dst_stride`
 * bytes apart, same B,G,R,X layout) and reports its frame number.  `r` must
 * lie inside the display (ERR_INVALID otherwise).  Retries a bounded number
 * of times while the bridge is writing; ERR_UNAVAILABLE if it never settles. */
int capture_snapshot(struct capture *c, struct capture_rect r, uint8_t *dst, size_t dst_stride,
		     uint64_t *frame, struct err *e);

/* Sends `n` events and returns once the bridge has written them to the VNC
 * connection, in order.  ERR_UNAVAILABLE if the bridge is gone. */
int capture_send(struct capture *c, const struct input_event *ev, size_t n, struct err *e);

/* Encodes a B,G,R,X image as an RGB PNG with zlib `level` (0..9; 1 is the
 * fast default) and SUB filtering.  On success *out is malloc'd, owned by the
 * caller. */
int capture_png_encode(const uint8_t *bgrx, uint32_t w, uint32_t h, size_t stride, int level,
		       uint8_t **out, size_t *out_len, struct err *e);

#endif
