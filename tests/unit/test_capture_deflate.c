/* The fast fixed-code deflate of the PNG bands (capture/capture_deflate.c):
 * its segments, concatenated and closed with an empty final block, must
 * inflate (zlib) to exactly the input, for inputs that exercise every
 * length and distance code: zeros, noise, short and long periods, runs
 * past 258 bytes, matches 32768 bytes back, and a hash table full of
 * junk from "earlier segments". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "capture/internal.h"
#include "tests/harness.h"

static uint32_t rng = 777;
static uint32_t rnd(void)
{
	rng = rng * 1103515245u + 12345u;
	return rng >> 8;
}

/* Deflates `in` as `nseg` consecutive segments and inflates the whole. */
static int roundtrip(const uint8_t *in, size_t n, int nseg, uint32_t *head)
{
	size_t cap = capture_deflate_bound(n) * 2 + 64 * (size_t)nseg, len = 0;
	uint8_t *z = malloc(cap), *back = malloc(n + 1);
	for (int s = 0; s < nseg; s++) {
		size_t a = n * (size_t)s / (size_t)nseg, b = n * (size_t)(s + 1) / (size_t)nseg;
		len += capture_deflate_fast(in + a, b - a, z + len, head);
	}
	z[len++] = 0x03, z[len++] = 0x00; /* an empty final fixed block */
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	int good = inflateInit2(&zs, -15) == Z_OK;
	zs.next_in = z;
	zs.avail_in = (uInt)len;
	zs.next_out = back;
	zs.avail_out = (uInt)n + 1;
	good = good && inflate(&zs, Z_FINISH) == Z_STREAM_END && zs.total_out == n &&
	       zs.avail_in == 0 && memcmp(back, in, n) == 0 && len <= cap;
	inflateEnd(&zs);
	free(z), free(back);
	return good;
}

int main(void)
{
	uint32_t *head = malloc(CAPTURE_DEFLATE_HEAD * sizeof(*head));
	for (uint32_t i = 0; i < CAPTURE_DEFLATE_HEAD; i++)
		head[i] = rnd() % 3 ? rnd() % 200000 : 0; /* junk, some of it in range */
	size_t n = 300000;
	uint8_t *buf = malloc(n);
	int good = 1;
	for (size_t k = 0; good && k <= 70; k++) {
		/* k 0..64: period k + 1 with a random byte now and then; then
		 * zeros, noise, a 40000-byte period, lengths 0..3. */
		size_t len = k == 69 ? k % 4 : n - rnd() % 1000;
		for (size_t i = 0; i < len; i++)
			buf[i] = k <= 64   ? (rnd() % 97 ? (uint8_t)(i % (k + 1) * 37) : (uint8_t)rnd())
				 : k == 65 ? 0
				 : k == 66 ? (uint8_t)rnd()
				 : k == 67 ? (uint8_t)((i % 40000) * 7 + (i % 40000) / 256)
					   : (uint8_t)(i / 300);
		good = roundtrip(buf, len, 1 + (int)(k % 3), head);
		if (!good)
			printf("#   case %zu, %zu bytes\n", k, len);
	}
	ok(good, "every segment inflates to its input (periods, runs, noise, far matches)");
	for (size_t len = 0; good && len < 40; len++) {
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)(rnd() % 3);
		good = roundtrip(buf, len, 1, head);
	}
	ok(good, "inputs of 0 to 39 bytes");
	/* Noise costs at most 9 bits a byte. */
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)rnd();
	uint8_t *z = malloc(capture_deflate_bound(n));
	size_t len = capture_deflate_fast(buf, n, z, head);
	ok(len <= capture_deflate_bound(n) && len > n, "noise stays within the bound");
	free(z), free(buf), free(head);
	return done();
}
