/* WebP encoding: lossless round trips exactly, lossy stays close, bad
 * input is refused.  Decoded with libwebp's own decoder. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>

#include "capture/capture.h"
#include "tests/harness.h"

static uint32_t rng = 99;
static uint8_t rnd(void)
{
	rng = rng * 1103515245u + 12345u;
	return (uint8_t)(rng >> 16);
}

/* Largest per-channel difference between the B,G,R,X image and decoded
 * R,G,B, or -1 when it does not decode to w x h. */
static int max_diff(const uint8_t *img, size_t stride, uint32_t w, uint32_t h,
		    const uint8_t *data, size_t len)
{
	int dw = 0, dh = 0;
	uint8_t *rgb = WebPDecodeRGB(data, len, &dw, &dh);
	if (!rgb || dw != (int)w || dh != (int)h) {
		WebPFree(rgb);
		return -1;
	}
	int m = 0;
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++) {
			const uint8_t *s = img + (size_t)y * stride + (size_t)x * 4;
			const uint8_t *d = rgb + ((size_t)y * w + x) * 3;
			for (int c = 0; c < 3; c++) {
				int v = abs((int)d[c] - (int)s[2 - c]);
				m = v > m ? v : m;
			}
		}
	WebPFree(rgb);
	return m;
}

static int check(uint32_t w, uint32_t h, size_t stride, int noise, int lossless, int quality)
{
	uint8_t *img = malloc(stride * h);
	for (size_t i = 0; i < stride * h; i++)
		img[i] = noise ? rnd() : (uint8_t)((i / 4 / 37) * 9);
	uint8_t *out = NULL;
	size_t len = 0;
	struct err e = ERR_INIT;
	int m = -1;
	if (capture_webp_encode(img, w, h, stride, lossless, quality, &out, &len, &e) == 0 &&
	    len > 12 && memcmp(out, "RIFF", 4) == 0 && memcmp(out + 8, "WEBP", 4) == 0)
		m = max_diff(img, stride, w, h, out, len);
	free(out);
	free(img);
	return m;
}

int main(void)
{
	is_int(check(1, 1, 4, 1, 1, 0), 0, "1x1 lossless exact");
	is_int(check(333, 17, 333 * 4 + 8, 1, 1, 0), 0, "333x17 noise, padded stride, lossless");
	is_int(check(640, 400, 640 * 4, 0, 1, 0), 0, "640x400 flat, lossless exact");
	int m = check(640, 400, 640 * 4, 0, 0, 90);
	ok(m >= 0 && m < 64, "640x400 flat, lossy q90 decodes close to the picture");
	struct err e = ERR_INIT;
	uint8_t px[16] = {0}, *out = NULL;
	size_t len;
	ok(capture_webp_encode(px, 0, 1, 4, 1, 0, &out, &len, &e) < 0 && e.kind == ERR_INVALID,
	   "zero width refused");
	ok(capture_webp_encode(px, 2, 1, 4, 1, 0, &out, &len, &e) < 0, "stride too small refused");
	ok(capture_webp_encode(px, 1, 1, 4, 0, 101, &out, &len, &e) < 0, "quality 101 refused");
	return done();
}
