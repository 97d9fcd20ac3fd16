/* capture module internals: the control protocol between deskboxd
 * (capture.c) and the bridge (bridge.c) over a SOCK_SEQPACKET socketpair. */
#ifndef DESKBOX_CAPTURE_INTERNAL_H
#define DESKBOX_CAPTURE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "input/input.h"

/* Checks an encoder's input image: 1..CAPTURE_MAX_DIM per side and rows at
 * least w * 4 bytes apart.  0, or -EINVAL with ERR_INVALID in `e`. */
int capture_check_image(uint32_t w, uint32_t h, size_t stride, struct err *e);

/* The PNG encoder's byte loops (capture_simd.c), SSSE3 where the CPU has
 * it.  capture_up_row: the UP filter of `n` B,G,R,X pixels `p` against the
 * row above `q`, as R,G,B bytes (3n) into `out`.  capture_adler32: zlib's
 * adler32 of `n` bytes. */
void capture_up_row(const uint8_t *p, const uint8_t *q, uint32_t n, uint8_t *out);
unsigned long capture_adler32(unsigned long adler, const uint8_t *p, size_t n);

/* A fast fixed-Huffman deflate (capture_deflate.c): the raw deflate of
 * `n` bytes into `out` (capture_deflate_bound(n) bytes of room), as a
 * non-final block and an empty stored block, so that segments
 * concatenate.  `head` is 1 << 14 positions of scratch the caller keeps
 * (zeroed once; stale contents are harmless).  Returns the bytes written. */
size_t capture_deflate_bound(size_t n);
size_t capture_deflate_fast(const uint8_t *in, size_t n, uint8_t *out, uint32_t *head);
#define CAPTURE_DEFLATE_HEAD (1u << 14)

/* Per-mirror screenshot state (capture_shot.c): the encoded-image cache and
 * the incremental PNG encoder.  Owned by struct capture. */
struct capture;
struct capture_shots;
int capture_shots_new(struct capture_shots **out, struct err *e);
void capture_shots_free(struct capture_shots *s);
struct capture_shots *capture_shots_of(struct capture *c);

#define CAPTURE_MSG_MAGIC 0x4e495844u /* "DXIN" */
#define CAPTURE_ACK_MAGIC 0x4b415844u /* "DXAK" */

/* Events per message: 256 * 16 bytes keeps a message within one page, and
 * an ack per message bounds how far deskboxd runs ahead of the VNC socket. */
#define CAPTURE_MSG_EVENTS 256u

/* deskboxd -> bridge: this header, then `n` struct input_event, as one
 * datagram. */
struct capture_msg {
	uint32_t magic;
	uint32_t seq; /* echoed in the ack */
	uint32_t n;
	uint32_t pad;
};

/* bridge -> deskboxd, once the message's events were written to the VNC
 * socket (status 0) or that failed (status -1, the bridge then exits).
 * While they wait for room in the socket, every CAPTURE_PROGRESS_MS in
 * which the VNC server read some of the input before them brings a note
 * (status CAPTURE_ACK_PROGRESS): a busy server is slow, not stuck, and
 * deskboxd's deadline is for a server that stopped reading. */
#define CAPTURE_ACK_PROGRESS 1
#define CAPTURE_PROGRESS_MS  250
struct capture_ack {
	uint32_t magic;
	uint32_t seq;
	int32_t status;
	uint32_t pad;
};

#endif
