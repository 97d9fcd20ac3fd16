#include "internal.h"

#include <string.h>

enum {
	ST_VERSION,  /* collecting the 12-byte ProtocolVersion */
	ST_SECURITY, /* the security type choice */
	ST_INIT,     /* ClientInit */
	ST_TYPE,     /* waiting for a message type */
	ST_HEADER,   /* collecting a message's fixed part */
	ST_PASS,     /* forwarding a body (SetEncodings' list) */
	ST_SKIP,     /* dropping a body (ClientCutText's text) */
	ST_BROKEN,
};

void rfb_filter_init(struct rfb_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->state = ST_VERSION;
	f->need = 12;
	f->refused_type = -1;
}

/* The fixed size of client message `type`, 0 for a type that is refused. */
static size_t msg_size(unsigned char type)
{
	switch (type) {
	case 0: /* SetPixelFormat */
		return 20;
	case 2: /* SetEncodings */
		return 4;
	case 3: /* FramebufferUpdateRequest */
		return 10;
	case 4: /* KeyEvent */
		return 8;
	case 5: /* PointerEvent */
		return 6;
	case 6: /* ClientCutText */
		return 8;
	default:
		return 0;
	}
}

/* A complete header in f->hdr: decides what happens to it and what follows. */
static int header_done(struct rfb_filter *f, unsigned char *out, size_t *o)
{
	const unsigned char *h = f->hdr;
	switch (f->state) {
	case ST_VERSION:
		if (memcmp(h, "RFB 003.00", 10) != 0 || (h[10] != '7' && h[10] != '8') ||
		    h[11] != '\n')
			return -1;
		memcpy(out + *o, h, 12);
		*o += 12;
		f->state = ST_SECURITY;
		f->need = 1;
		break;
	case ST_SECURITY:
		if (h[0] != 1)
			return -1;
		out[(*o)++] = h[0];
		f->state = ST_INIT;
		f->need = 1;
		break;
	case ST_INIT:
		out[(*o)++] = h[0];
		f->state = ST_TYPE;
		f->need = 1;
		break;
	case ST_HEADER:
		switch (h[0]) {
		case 2:
			memcpy(out + *o, h, 4);
			*o += 4;
			f->left = 4ull * ((uint64_t)h[2] << 8 | h[3]);
			f->state = f->left ? ST_PASS : ST_TYPE;
			break;
		case 6: {
			/* SECURITY: peer-supplied length, bounded before skipping.
			 * A negative length is the ExtendedClipboard form
			 * (noVNC announces its capabilities that way at
			 * connect): |length| bytes follow. */
			uint32_t raw = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 |
				       (uint32_t)h[6] << 8 | h[7];
			uint32_t len = raw >> 31 ? (uint32_t)0 - raw : raw;
			if (len > RFB_CUTTEXT_MAX)
				return -1;
			f->dropped++;
			f->left = len;
			f->state = len ? ST_SKIP : ST_TYPE;
			break;
		}
		case 4:
		case 5:
			f->dropped++;
			f->state = ST_TYPE;
			break;
		default:
			memcpy(out + *o, h, f->need);
			*o += f->need;
			f->state = ST_TYPE;
			break;
		}
		f->need = 1;
		break;
	default:
		return -1;
	}
	f->have = 0;
	return 0;
}

long rfb_filter_feed(struct rfb_filter *f, const unsigned char *in, size_t n, unsigned char *out)
{
	size_t i = 0, o = 0;
	while (i < n) {
		switch (f->state) {
		case ST_BROKEN:
			return -1;
		case ST_PASS:
		case ST_SKIP: {
			size_t take = n - i;
			if ((uint64_t)take > f->left)
				take = (size_t)f->left;
			if (f->state == ST_PASS) {
				memcpy(out + o, in + i, take);
				o += take;
			}
			i += take;
			f->left -= take;
			if (!f->left) {
				f->state = ST_TYPE;
				f->need = 1;
			}
			continue;
		}
		case ST_TYPE: {
			size_t size = msg_size(in[i]);
			if (!size) {
				f->refused_type = in[i];
				f->state = ST_BROKEN;
				return -1;
			}
			f->state = ST_HEADER;
			f->need = size;
			f->have = 0;
			break;
		}
		default:
			break;
		}
		while (i < n && f->have < f->need)
			f->hdr[f->have++] = in[i++];
		if (f->have == f->need && header_done(f, out, &o) < 0) {
			f->state = ST_BROKEN;
			return -1;
		}
	}
	return (long)o;
}
