#include "websocket.h"

#include <stdlib.h>
#include <string.h>

#include <nettle/sha1.h>

#include "text.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static int b64_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

int ws_accept_key(const char *key, char *out)
{
	/* 16 bytes in base64: 22 characters and "==". */
	if (strlen(key) != 24 || key[22] != '=' || key[23] != '=')
		return -1;
	for (int i = 0; i < 22; i++)
		if (!b64_char(key[i]))
			return -1;
	struct sha1_ctx s;
	uint8_t digest[SHA1_DIGEST_SIZE];
	sha1_init(&s);
	sha1_update(&s, 24, (const uint8_t *)key);
	sha1_update(&s, strlen(WS_GUID), (const uint8_t *)WS_GUID);
	sha1_digest(&s, sizeof(digest), digest);
	char *b = base64_encode(digest, sizeof(digest));
	if (!b)
		return -1;
	memcpy(out, b, WS_ACCEPT_LEN + 1);
	free(b);
	return 0;
}

void ws_parser_init(struct ws_parser *ps)
{
	memset(ps, 0, sizeof(*ps));
}

size_t ws_frame_header(unsigned char *hdr, int opcode, uint64_t len)
{
	hdr[0] = (unsigned char)(0x80 | opcode);
	if (len < 126) {
		hdr[1] = (unsigned char)len;
		return 2;
	}
	if (len <= 0xffff) {
		hdr[1] = 126;
		hdr[2] = (unsigned char)(len >> 8);
		hdr[3] = (unsigned char)len;
		return 4;
	}
	hdr[1] = 127;
	for (int i = 0; i < 8; i++)
		hdr[2 + i] = (unsigned char)(len >> (56 - 8 * i));
	return 10;
}

static int fail(int *close_code, int code)
{
	*close_code = code;
	return WS_ERR_PROTOCOL;
}

/* The header is complete once its fixed part says how long it is. */
static size_t header_size(const struct ws_parser *ps)
{
	if (ps->hdr_len < 2)
		return 2;
	if (!(ps->hdr[1] & 0x80))
		return 2; /* unmasked: refused by begin_frame() at once */
	unsigned l7 = ps->hdr[1] & 0x7f;
	return 2 + (l7 == 126 ? 2 : l7 == 127 ? 8 : 0) + 4;
}

/* Checks a complete header and starts its frame. */
static int begin_frame(struct ws_parser *ps, const struct ws_handler *hd, int *close_code)
{
	const unsigned char *h = ps->hdr;
	int fin = h[0] & 0x80, opcode = h[0] & 0x0f;
	if (h[0] & 0x70) /* RSV1-3: no extension was negotiated */
		return fail(close_code, WS_CLOSE_PROTOCOL);
	if (!(h[1] & 0x80)) /* RFC 6455 5.1: client frames must be masked */
		return fail(close_code, WS_CLOSE_PROTOCOL);
	unsigned l7 = h[1] & 0x7f;
	uint64_t len = l7;
	size_t off = 2;
	if (l7 == 126) {
		len = (uint64_t)h[2] << 8 | h[3];
		off = 4;
	} else if (l7 == 127) {
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | h[2 + i];
		if (len >> 63) /* the most significant bit must be 0 */
			return fail(close_code, WS_CLOSE_PROTOCOL);
		off = 10;
	}
	memcpy(ps->mask, h + off, 4);
	switch (opcode) {
	case WS_OP_CLOSE:
	case WS_OP_PING:
	case WS_OP_PONG:
		/* Control frames: short, never fragmented (5.5). */
		if (!fin || len > WS_MAX_CONTROL)
			return fail(close_code, WS_CLOSE_PROTOCOL);
		ps->ctl_len = 0;
		break;
	case WS_OP_BINARY:
	case WS_OP_TEXT:
		/* RFB is binary; the "base64" text subprotocol of old
		 * websockify is not offered.  Terminals take text. */
		if (opcode == WS_OP_TEXT && !hd->text)
			return fail(close_code, WS_CLOSE_UNSUPPORTED);
		if (ps->in_message)
			return fail(close_code, WS_CLOSE_PROTOCOL);
		ps->in_message = !fin;
		ps->msg_text = opcode == WS_OP_TEXT;
		break;
	case WS_OP_CONT:
		if (!ps->in_message)
			return fail(close_code, WS_CLOSE_PROTOCOL);
		ps->in_message = !fin;
		break;
	default:
		return fail(close_code, WS_CLOSE_PROTOCOL);
	}
	ps->opcode = opcode;
	ps->fin = fin;
	ps->remaining = len;
	ps->mask_pos = 0;
	ps->in_frame = 1;
	ps->hdr_len = 0;
	return 0;
}

static int end_frame(struct ws_parser *ps, const struct ws_handler *h)
{
	ps->in_frame = 0;
	if (ps->opcode == WS_OP_CLOSE || ps->opcode == WS_OP_PING || ps->opcode == WS_OP_PONG)
		return h->control(h->cls, ps->opcode, ps->ctl, ps->ctl_len);
	if (ps->msg_text && ps->fin)
		return h->text(h->cls, NULL, 0, 1);
	if (ps->fin && h->data_end)
		return h->data_end(h->cls);
	return 0;
}

int ws_parse(struct ws_parser *ps, unsigned char *buf, size_t n, const struct ws_handler *h,
	     int *close_code)
{
	size_t i = 0;
	for (;;) {
		if (!ps->in_frame) {
			if (i == n)
				return 0;
			while (i < n && ps->hdr_len < header_size(ps))
				ps->hdr[ps->hdr_len++] = buf[i++];
			if (ps->hdr_len < header_size(ps))
				return 0;
			int r = begin_frame(ps, h, close_code);
			if (r < 0)
				return r;
		}
		size_t take = n - i;
		if ((uint64_t)take > ps->remaining)
			take = (size_t)ps->remaining;
		unsigned char *p = buf + i;
		for (size_t k = 0; k < take; k++)
			p[k] ^= ps->mask[(ps->mask_pos + k) & 3];
		ps->mask_pos = (unsigned)((ps->mask_pos + take) & 3);
		ps->remaining -= take;
		i += take;
		if (ps->opcode == WS_OP_BINARY || ps->opcode == WS_OP_CONT ||
		    ps->opcode == WS_OP_TEXT) {
			if (take) {
				int r = ps->msg_text ? h->text(h->cls, p, take, 0)
						     : h->data(h->cls, p, take);
				if (r < 0)
					return r;
			}
		} else {
			memcpy(ps->ctl + ps->ctl_len, p, take);
			ps->ctl_len += take;
		}
		if (ps->remaining == 0) {
			int r = end_frame(ps, h);
			if (r < 0)
				return r;
		} else {
			return 0; /* i == n: the rest of the payload comes later */
		}
	}
}
