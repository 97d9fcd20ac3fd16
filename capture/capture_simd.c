/* The PNG encoder's per-byte loops with SSSE3 where the CPU has it: the
 * UP filter of B,G,R,X rows and the zlib Adler-32.  On a 1280x800 text
 * screen they were a fifth of the encode's CPU time, as scalar loops
 * (zlib's own adler32 is scalar).  Each falls back to plain C elsewhere;
 * the tests compare the results with libpng's decoding (which checks the
 * Adler-32) on every machine that runs them. */
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* Byte-wise a - b of whole pixels (no borrow between bytes), R,G,B out. */
static void up_scalar(const uint8_t *p, const uint8_t *q, uint32_t n, uint8_t *out)
{
	for (uint32_t x = 0; x < n; x++, p += 4, q += 4, out += 3) {
		uint32_t a, c;
		memcpy(&a, p, 4);
		memcpy(&c, q, 4);
		uint32_t d = ((a | 0x80808080u) - (c & 0x7f7f7f7fu)) ^ ((a ^ ~c) & 0x80808080u);
		out[0] = (uint8_t)(d >> 16);
		out[1] = (uint8_t)(d >> 8);
		out[2] = (uint8_t)d;
	}
}

#define BASE 65521u /* largest prime below 65536 */
#define NMAX 5552u  /* most bytes before the sums must be reduced */

static uLong adler_scalar(uLong adler, const uint8_t *p, size_t n)
{
	return adler32_z(adler, p, n);
}

#ifdef HAVE_X86
__attribute__((target("ssse3"))) static void up_ssse3(const uint8_t *p, const uint8_t *q,
						       uint32_t n, uint8_t *out)
{
	/* 4 pixels in, 12 bytes out; the 16-byte store's last 4 are
	 * overwritten by the next one, so stop 2 pixels early. */
	const __m128i shuf = _mm_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
	uint32_t x = 0;
	for (; x + 6 <= n; x += 4) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(p + 4 * x));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(q + 4 * x));
		__m128i d = _mm_shuffle_epi8(_mm_sub_epi8(a, c), shuf);
		_mm_storeu_si128((__m128i *)(void *)(out + 3 * x), d);
	}
	up_scalar(p + 4 * x, q + 4 * x, n - x, out + 3 * x);
}

/* 32 bytes a step: the byte sum with SAD, the weighted sum (32..1) with
 * multiply-adds; reduced every NMAX bytes like zlib's. */
__attribute__((target("ssse3"))) static uLong adler_ssse3(uLong adler, const uint8_t *p,
							  size_t n)
{
	uint32_t s1 = adler & 0xffff, s2 = adler >> 16;
	const __m128i tap1 =
	    _mm_setr_epi8(32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17);
	const __m128i tap2 = _mm_setr_epi8(16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
	const __m128i zero = _mm_setzero_si128(), ones = _mm_set1_epi16(1);
	while (n >= 32) {
		size_t blocks = n / 32;
		if (blocks > NMAX / 32)
			blocks = NMAX / 32;
		n -= blocks * 32;
		__m128i ps = _mm_setr_epi32((int)(s1 * blocks), 0, 0, 0);
		__m128i v2 = _mm_setr_epi32((int)s2, 0, 0, 0);
		__m128i v1 = zero;
		do {
			__m128i b1 = _mm_loadu_si128((const __m128i *)(const void *)p);
			__m128i b2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
			ps = _mm_add_epi32(ps, v1);
			v1 = _mm_add_epi32(v1, _mm_sad_epu8(b1, zero));
			v1 = _mm_add_epi32(v1, _mm_sad_epu8(b2, zero));
			v2 = _mm_add_epi32(v2, _mm_madd_epi16(_mm_maddubs_epi16(b1, tap1), ones));
			v2 = _mm_add_epi32(v2, _mm_madd_epi16(_mm_maddubs_epi16(b2, tap2), ones));
			p += 32;
		} while (--blocks);
		v2 = _mm_add_epi32(v2, _mm_slli_epi32(ps, 5));
		/* Horizontal sums of the four 32-bit lanes. */
		v1 = _mm_add_epi32(v1, _mm_shuffle_epi32(v1, _MM_SHUFFLE(1, 0, 3, 2)));
		v1 = _mm_add_epi32(v1, _mm_shuffle_epi32(v1, _MM_SHUFFLE(2, 3, 0, 1)));
		v2 = _mm_add_epi32(v2, _mm_shuffle_epi32(v2, _MM_SHUFFLE(1, 0, 3, 2)));
		v2 = _mm_add_epi32(v2, _mm_shuffle_epi32(v2, _MM_SHUFFLE(2, 3, 0, 1)));
		s1 = (s1 + (uint32_t)_mm_cvtsi128_si32(v1)) % BASE;
		s2 = (uint32_t)_mm_cvtsi128_si32(v2) % BASE;
	}
	return adler_scalar((uLong)s2 << 16 | s1, p, n);
}

static int have_ssse3(void)
{
	static int v = -1;
	if (v < 0)
		v = __builtin_cpu_supports("ssse3") ? 1 : 0;
	return v;
}
#endif

void capture_up_row(const uint8_t *p, const uint8_t *q, uint32_t n, uint8_t *out)
{
#ifdef HAVE_X86
	if (have_ssse3()) {
		up_ssse3(p, q, n, out);
		return;
	}
#endif
	up_scalar(p, q, n, out);
}

uLong capture_adler32(uLong adler, const uint8_t *p, size_t n)
{
#ifdef HAVE_X86
	if (have_ssse3())
		return adler_ssse3(adler, p, n);
#endif
	return adler_scalar(adler, p, n);
}
