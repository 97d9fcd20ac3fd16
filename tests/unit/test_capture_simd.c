/* The PNG encoder's byte loops (capture/capture_simd.c, SSSE3 where the
 * CPU has it) against plain references: zlib's adler32 and the UP filter
 * written out byte by byte, over random data of many lengths and
 * alignments, so that every tail and block boundary is crossed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "capture/internal.h"
#include "tests/harness.h"

static uint32_t rng = 1515;
static uint32_t rnd(void)
{
	rng = rng * 1103515245u + 12345u;
	return rng >> 8;
}

/* Adler-32 of random bytes: lengths 0..600 one by one, then around the
 * 32-byte blocks and zlib's NMAX (5552), up to 3 MB; odd offsets. */
static int adler_same(void)
{
	size_t cap = 3u << 20;
	uint8_t *buf = malloc(cap + 64);
	for (size_t i = 0; i < cap + 64; i++)
		buf[i] = (uint8_t)rnd();
	static const size_t big[] = {5551, 5552, 5553, 5552 * 2 + 31, 65536, 100003, 3u << 20};
	int good = 1;
	for (size_t k = 0; good && k < 600 + sizeof(big) / sizeof(big[0]); k++) {
		size_t n = k < 600 ? k : big[k - 600], off = rnd() % 33;
		uLong start = k % 3 == 0 ? 1 : (uLong)rnd() % 65521 << 16 | rnd() % 65521;
		good = capture_adler32(start, buf + off, n) == adler32_z(start, buf + off, n);
		if (!good)
			printf("#   length %zu offset %zu\n", n, off);
	}
	/* All 0xff: the largest sums. */
	memset(buf, 0xff, cap);
	good = good && capture_adler32(1, buf, cap) == adler32_z(1, buf, cap);
	free(buf);
	return good;
}

static int up_same(void)
{
	int good = 1;
	for (uint32_t n = 1; good && n <= 1300; n += n < 40 ? 1 : 97) {
		uint8_t *p = malloc((size_t)n * 4), *q = malloc((size_t)n * 4);
		uint8_t *out = malloc((size_t)n * 3 + 1);
		for (uint32_t i = 0; i < n * 4; i++)
			p[i] = (uint8_t)rnd(), q[i] = (uint8_t)rnd();
		out[n * 3] = 0xa5; /* nothing past the row is written */
		capture_up_row(p, q, n, out);
		for (uint32_t x = 0; good && x < n; x++)
			good = out[3 * x] == (uint8_t)(p[4 * x + 2] - q[4 * x + 2]) &&
			       out[3 * x + 1] == (uint8_t)(p[4 * x + 1] - q[4 * x + 1]) &&
			       out[3 * x + 2] == (uint8_t)(p[4 * x] - q[4 * x]);
		good = good && out[n * 3] == 0xa5;
		if (!good)
			printf("#   %u pixels\n", n);
		free(p), free(q), free(out);
	}
	return good;
}

int main(void)
{
	ok(adler_same(), "Adler-32 equals zlib's for every length, offset and start");
	ok(up_same(), "UP filter equals the byte-wise one and stays within the row");
	return done();
}
