/* A fast deflate for the PNG bands of flat screens (level 1): one pass of
 * greedy LZ77 matching (a 4-byte hash, one candidate, the match extended
 * 8 bytes at a time) written straight out with the fixed Huffman codes of
 * RFC 1951 3.2.6.  No symbol buffer, no trees: on the filtered rows of a
 * 1280x800 text screen it takes ~a third of zlib's level-1 time for ~1.3x
 * the bytes.  The output is one non-final fixed block and an empty stored
 * block (as zlib's Z_FULL_FLUSH ends a segment), so segments concatenate;
 * no match reaches before the segment. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define HASH_BITS 14
#define MIN_MATCH 4
#define MAX_MATCH 258
#define WINDOW	  32768

/* A code: its bits in the order they are written (LSB first) and count. */
struct code {
	uint32_t bits;
	uint32_t n;
};

static struct code lit[256], len_code[MAX_MATCH + 1], eob;
static uint8_t dist_small[512]; /* distance code of d-1 < 256, then of (d-1) >> 7 */
static uint8_t dist_rev[30];	/* the 5-bit codes, bit-reversed */
static const uint16_t dist_base[30] = {1,    2,	   3,	 4,    5,    7,	    9,	   13,	  17,  25,
				       33,   49,   65,	 97,   129,  193,   257,   385,	  513, 769,
				       1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t reverse(uint32_t v, uint32_t n)
{
	uint32_t r = 0;
	for (uint32_t i = 0; i < n; i++, v >>= 1)
		r = r << 1 | (v & 1);
	return r;
}

/* The fixed literal/length code of symbol s (0..287). */
static struct code fixed(uint32_t s)
{
	if (s < 144)
		return (struct code){reverse(0x30 + s, 8), 8};
	if (s < 256)
		return (struct code){reverse(0x190 + s - 144, 9), 9};
	if (s < 280)
		return (struct code){reverse(s - 256, 7), 7};
	return (struct code){reverse(0xc0 + s - 280, 8), 8};
}

static uint32_t dist_extra(uint32_t c)
{
	return c < 4 ? 0 : (c - 2) / 2;
}

static void tables(void)
{
	static const uint16_t base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,	15,  17,  19,  23, 27,
					  31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
	for (uint32_t v = 0; v < 256; v++)
		lit[v] = fixed(v);
	eob = fixed(256);
	for (uint32_t c = 0; c < 29; c++) {
		uint32_t extra = c < 8 || c == 28 ? 0 : (c - 4) / 4;
		uint32_t end = c == 28 ? 259 : base[c] + (1u << extra);
		for (uint32_t l = base[c]; l < end && l <= MAX_MATCH; l++) {
			struct code k = fixed(257 + c);
			len_code[l] = (struct code){k.bits | (l - base[c]) << k.n, k.n + extra};
		}
	}
	for (uint32_t c = 0; c < 30; c++) {
		dist_rev[c] = (uint8_t)reverse(c, 5);
		uint32_t span = 1u << dist_extra(c);
		for (uint32_t d = dist_base[c]; d < dist_base[c] + span; d++) {
			if (d - 1 < 256)
				dist_small[d - 1] = (uint8_t)c;
			else
				dist_small[256 + ((d - 1) >> 7)] = (uint8_t)c;
		}
	}
}

struct bitw {
	uint8_t *o;
	uint64_t bb;
	uint32_t bn;
};

static inline void put(struct bitw *w, uint32_t bits, uint32_t n)
{
	w->bb |= (uint64_t)bits << w->bn;
	w->bn += n;
	if (w->bn >= 32) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		uint32_t v = (uint32_t)w->bb;
		memcpy(w->o, &v, 4);
#else
		for (int k = 0; k < 4; k++)
			w->o[k] = (uint8_t)(w->bb >> (8 * k));
#endif
		w->o += 4;
		w->bb >>= 32;
		w->bn -= 32;
	}
}

static inline void put_dist(struct bitw *w, uint32_t d)
{
	uint32_t c = d <= 256 ? dist_small[d - 1] : dist_small[256 + ((d - 1) >> 7)];
	put(w, dist_rev[c] | (d - dist_base[c]) << 5, 5 + dist_extra(c));
}

static inline uint32_t hash4(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return (v * 2654435761u) >> (32 - HASH_BITS);
}

/* Length of the common prefix of a and b, at most max. */
static inline uint32_t common(const uint8_t *a, const uint8_t *b, uint32_t max)
{
	uint32_t n = 0;
	while (n + 8 <= max) {
		uint64_t x, y;
		memcpy(&x, a + n, 8);
		memcpy(&y, b + n, 8);
		if (x != y)
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return n + (uint32_t)(__builtin_ctzll(x ^ y) >> 3);
#else
			return n + (uint32_t)(__builtin_clzll(x ^ y) >> 3);
#endif
		n += 8;
	}
	while (n < max && a[n] == b[n])
		n++;
	return n;
}

size_t capture_deflate_bound(size_t n)
{
	return n + n / 8 + 32;
}

size_t capture_deflate_fast(const uint8_t *in, size_t n, uint8_t *out, uint32_t *head)
{
	pthread_once(&once, tables);
	struct bitw w = {out, 0, 0};
	put(&w, 2, 3); /* BFINAL 0, BTYPE 01 (fixed codes), LSB first */
	size_t i = 0;
	while (i + MIN_MATCH <= n) {
		uint32_t h = hash4(in + i);
		size_t cand = head[h];
		head[h] = (uint32_t)i;
		/* A slot from an earlier segment may hold anything: only a
		 * position before this one counts, and the bytes decide. */
		uint32_t a, c = 0;
		memcpy(&a, in + i, 4);
		if (cand < i && i - cand <= WINDOW)
			memcpy(&c, in + cand, 4);
		if (cand < i && i - cand <= WINDOW && a == c) {
			size_t left = n - i;
			uint32_t max = left < MAX_MATCH ? (uint32_t)left : MAX_MATCH;
			uint32_t l = MIN_MATCH + common(in + cand + MIN_MATCH, in + i + MIN_MATCH,
							max - MIN_MATCH);
			put(&w, len_code[l].bits, len_code[l].n);
			put_dist(&w, (uint32_t)(i - cand));
			i += l;
			continue;
		}
		put(&w, lit[in[i]].bits, lit[in[i]].n);
		i++;
	}
	for (; i < n; i++)
		put(&w, lit[in[i]].bits, lit[in[i]].n);
	put(&w, eob.bits, eob.n);
	/* An empty stored block: 3 header bits, then to the byte boundary,
	 * then LEN 0 and NLEN 0xffff. */
	put(&w, 0, 3);
	if (w.bn & 7)
		put(&w, 0, 8 - (w.bn & 7));
	while (w.bn) {
		*w.o++ = (uint8_t)w.bb;
		w.bb >>= 8;
		w.bn -= 8;
	}
	memcpy(w.o, "\x00\x00\xff\xff", 4);
	return (size_t)(w.o + 4 - out);
}
