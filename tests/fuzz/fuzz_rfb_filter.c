/* Fuzzes the view-only RFB filter (server/viewer/viewer_rfb.c).  The first
 * input byte seeds how the rest is split; the rest is a client's stream.
 * Invariants: a call never writes more than its input + RFB_FILTER_SLACK
 * (the output buffer is exactly that big, so ASan catches an overflow); the
 * result does not depend on the split (one call, byte by byte, random
 * pieces); what passed holds no KeyEvent, PointerEvent, ClientCutText or
 * unknown message (checked by an independent walk of the bytes), and,
 * filtered again, passes unchanged with nothing dropped. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/viewer/internal.h"
#include "tests/fuzz/split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
	unsigned char *out; /* what was forwarded by the calls that succeeded */
	size_t len;
	int failed;
	uint64_t dropped;
	int refused_type;
};

/* Feeds `in` in pieces from `sp` (every piece when sp is NULL: one call). */
static void filter(const unsigned char *in, size_t n, struct split *sp, struct run *r)
{
	struct rfb_filter f;
	rfb_filter_init(&f);
	r->out = malloc(n + RFB_FILTER_SLACK);
	r->len = 0;
	r->failed = 0;
	for (size_t off = 0; off < n && !r->failed;) {
		size_t k = sp ? split_next(sp, n - off) : n;
		unsigned char *buf = malloc(k + RFB_FILTER_SLACK);
		long got = rfb_filter_feed(&f, in + off, k, buf);
		if (got < 0) {
			r->failed = 1;
		} else {
			if ((size_t)got > k + RFB_FILTER_SLACK || r->len + (size_t)got > n)
				abort();
			memcpy(r->out + r->len, buf, (size_t)got);
			r->len += (size_t)got;
		}
		free(buf);
		off += k;
	}
	r->dropped = f.dropped;
	r->refused_type = f.refused_type;
}

/* Walks forwarded bytes by RFC 6143, independently of the filter: the
 * handshake (3.7 or 3.8, security type None, ClientInit), then only
 * SetPixelFormat, SetEncodings and FramebufferUpdateRequest.  The last
 * message may be cut short: the input may end anywhere. */
static void check_view_only(const unsigned char *p, size_t n)
{
	if (n == 0)
		return;
	if (n < 12 ||
	    (memcmp(p, "RFB 003.007\n", 12) != 0 && memcmp(p, "RFB 003.008\n", 12) != 0) ||
	    (n > 12 && p[12] != 1))
		abort();
	for (size_t i = 14; i < n;) {
		switch (p[i]) {
		case 0:
			i += 20;
			break;
		case 3:
			i += 10;
			break;
		case 2:
			if (i + 4 > n)
				return;
			i += 4 + 4 * ((size_t)p[i + 2] << 8 | p[i + 3]);
			break;
		default:
			abort(); /* an input message, or junk, got through */
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct split sp;
	split_init(&sp, data[0]);
	const unsigned char *in = data + 1;
	size_t n = size - 1;
	struct run whole, bytes, pieces;
	struct split one = {.max = 1};
	filter(in, n, NULL, &whole);
	filter(in, n, &one, &bytes);
	filter(in, n, &sp, &pieces);
	if (whole.failed != bytes.failed || whole.failed != pieces.failed)
		abort();
	if (whole.refused_type != bytes.refused_type || whole.refused_type != pieces.refused_type)
		abort();
	if (!whole.failed) {
		if (whole.len != bytes.len || whole.len != pieces.len ||
		    memcmp(whole.out, bytes.out, whole.len) != 0 ||
		    memcmp(whole.out, pieces.out, whole.len) != 0 ||
		    whole.dropped != bytes.dropped || whole.dropped != pieces.dropped)
			abort();
		check_view_only(whole.out, whole.len);
		/* What passed is a view-only stream already. */
		struct run again;
		filter(whole.out, whole.len, NULL, &again);
		if (again.failed || again.dropped || again.len != whole.len ||
		    memcmp(again.out, whole.out, whole.len) != 0)
			abort();
		free(again.out);
	} else {
		/* A failing call forwards nothing, so a split run forwards a
		 * prefix of what byte-by-byte feeding forwarded. */
		if (pieces.len > bytes.len || memcmp(pieces.out, bytes.out, pieces.len) != 0)
			abort();
		check_view_only(bytes.out, bytes.len);
	}
	free(whole.out);
	free(bytes.out);
	free(pieces.out);
	return 0;
}
