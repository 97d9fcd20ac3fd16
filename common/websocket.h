/* websocket: the server side of RFC 6455, enough for a byte pipe.
 *
 * ws_accept_key() computes the handshake's Sec-WebSocket-Accept.  A
 * `struct ws_parser` takes the client's bytes as they arrive, in any split,
 * checks the framing (client frames masked, no reserved bits, control frames
 * short and unfragmented, continuation only inside a fragmented message) and
 * hands data payloads out unmasked as they come: a data frame's payload is
 * never buffered, so its size needs no cap here.  Control frames (at most
 * 125 bytes) are collected whole.  Server frames are built with
 * ws_frame_header(): unmasked, FIN set, never fragmented.
 */
#ifndef DESKBOX_COMMON_WEBSOCKET_H
#define DESKBOX_COMMON_WEBSOCKET_H

#include <stddef.h>
#include <stdint.h>

enum ws_opcode {
	WS_OP_CONT = 0x0,
	WS_OP_TEXT = 0x1,
	WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8,
	WS_OP_PING = 0x9,
	WS_OP_PONG = 0xa,
};

/* Close codes (RFC 6455 7.4.1). */
#define WS_CLOSE_NORMAL	     1000
#define WS_CLOSE_GOING_AWAY  1001
#define WS_CLOSE_PROTOCOL    1002
#define WS_CLOSE_UNSUPPORTED 1003
#define WS_CLOSE_POLICY	     1008
#define WS_CLOSE_INTERNAL    1011

#define WS_ACCEPT_LEN  28 /* base64 of a SHA-1 */
#define WS_MAX_HEADER  10 /* a server frame's header: no mask */
#define WS_MAX_CONTROL 125

/* Sec-WebSocket-Accept for a client's Sec-WebSocket-Key into `out`
 * (WS_ACCEPT_LEN + 1 bytes).  -1 unless the key is the base64 of 16 bytes
 * (24 characters), as RFC 6455 4.1 requires. */
int ws_accept_key(const char *key, char *out);

/* What the parser found; the callbacks return 0, or a negative value that
 * stops parsing and is returned by ws_parse(). */
struct ws_handler {
	/* Payload bytes of a binary message (in order, unmasked, across
	 * fragments and frames). */
	int (*data)(void *cls, const unsigned char *p, size_t n);
	/* A whole ping, pong or close frame. */
	int (*control)(void *cls, int opcode, const unsigned char *p, size_t n);
	void *cls;
	/* Payload bytes of a text message as they come, then a call with
	 * `end` set once it is complete.  NULL: text messages are refused
	 * (close code 1003). */
	int (*text)(void *cls, const unsigned char *p, size_t n, int end);
	/* A binary message is complete (its last frame's payload was passed to
	 * data()): for protocols that frame by message.  NULL: not told. */
	int (*data_end)(void *cls);
};

struct ws_parser {
	unsigned char hdr[14]; /* the frame header being collected */
	size_t hdr_len;
	int in_frame; /* header complete, payload being read */
	int opcode, fin;
	uint64_t remaining; /* payload bytes still to come */
	unsigned char mask[4];
	unsigned mask_pos;
	int in_message; /* a fragmented data message is open */
	int msg_text;	/* the data message being read is text */
	unsigned char ctl[WS_MAX_CONTROL];
	size_t ctl_len;
};

void ws_parser_init(struct ws_parser *ps);

/* Feeds `n` bytes from the client (unmasked in place, hence not const).
 * Returns 0; WS_ERR_PROTOCOL (with *close_code set to the close code to
 * send) when the client broke the protocol; or a callback's negative value. */
#define WS_ERR_PROTOCOL (-1000)
int ws_parse(struct ws_parser *ps, unsigned char *buf, size_t n, const struct ws_handler *h,
	     int *close_code);

/* Writes the header of an unmasked, final server frame carrying `len`
 * payload bytes into `hdr` (WS_MAX_HEADER bytes); returns its length. */
size_t ws_frame_header(unsigned char *hdr, int opcode, uint64_t len);

#endif
