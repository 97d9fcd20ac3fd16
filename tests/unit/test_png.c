#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture/capture.h"
#include "tests/harness.h"
#include "tests/lib/pngread.h"

static uint32_t rng = 12345;
static uint8_t rnd(void)
{
	rng = rng * 1103515245u + 12345u;
	return (uint8_t)(rng >> 16);
}

/* Encodes a w x h image with `stride`, decodes it, compares every pixel. */
static int roundtrip(uint32_t w, uint32_t h, size_t stride, int noise, int level)
{
	uint8_t *img = malloc(stride * h);
	for (size_t i = 0; i < stride * h; i++)
		img[i] = noise ? rnd() : (uint8_t)(i * 7 / 5);
	uint8_t *out = NULL;
	size_t len = 0;
	struct err e = ERR_INIT;
	int r = capture_png_encode(img, w, h, stride, level, &out, &len, &e);
	int ok = r == 0;
	uint8_t *rgb = malloc((size_t)w * h * 3);
	if (ok)
		ok = png_test_decode(out, len, w, h, rgb) == 0;
	for (uint32_t y = 0; ok && y < h; y++)
		for (uint32_t x = 0; ok && x < w; x++) {
			const uint8_t *s = img + (size_t)y * stride + (size_t)x * 4;
			const uint8_t *d = rgb + ((size_t)y * w + x) * 3;
			ok = d[0] == s[2] && d[1] == s[1] && d[2] == s[0];
		}
	free(img);
	free(rgb);
	free(out);
	return ok;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void bench(const char *what, const uint8_t *img, uint32_t w, uint32_t h)
{
	double best = 1e9;
	size_t len = 0;
	for (int i = 0; i < 5; i++) {
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		uint8_t *out = NULL;
		struct err e = ERR_INIT;
		capture_png_encode(img, w, h, (size_t)w * 4, 1, &out, &len, &e);
		double ms = ms_since(&t0);
		if (ms < best)
			best = ms;
		free(out);
	}
	printf("# png %ux%u %s: %.1f ms, %zu bytes\n", w, h, what, best, len);
}

int main(void)
{
	ok(roundtrip(1, 1, 4, 1, 1), "1x1");
	ok(roundtrip(3, 7, 12, 1, 1), "3x7");
	ok(roundtrip(3, 7, 64, 1, 6), "3x7 stride > w*4, level 6");
	ok(roundtrip(640, 480, 640 * 4, 0, 1), "640x480 gradient");
	ok(roundtrip(333, 17, 333 * 4 + 8, 1, 0), "333x17 level 0 padded stride");
	ok(roundtrip(100, 100, 400, 1, 9), "level 9");

	struct err e = ERR_INIT;
	uint8_t px[16] = {0}, *out = NULL;
	size_t len;
	ok(capture_png_encode(px, 0, 1, 4, 1, &out, &len, &e) < 0 && e.kind == ERR_INVALID,
	   "zero width");
	ok(capture_png_encode(px, 2, 1, 4, 1, &out, &len, &e) < 0, "stride too small");
	ok(capture_png_encode(px, 1, 1, 4, 10, &out, &len, &e) < 0, "level 10");
	ok(capture_png_encode(px, 9000, 1, 36000, 1, &out, &len, &e) < 0, "too wide");

	/* Figures for the report: a quiet desktop-like screen and noise. */
	uint32_t w = 1280, h = 800;
	uint8_t *img = malloc((size_t)w * h * 4);
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++) {
			uint8_t *p = img + ((size_t)y * w + x) * 4;
			int bar = y<30, win = x> 200 && x < 900 && y > 100 && y < 600;
			int text = win && (y % 16) < 10 && ((x / 7) % 5) != 0 &&
				   ((x * 31 + y * 17) % 11) < 4;
			uint8_t v = bar ? 0x30 : text ? 0x10 : win ? 0xf0 : 0x5a;
			p[0] = v, p[1] = bar ? 0x30 : (uint8_t)(v + (win ? 0 : 0x20)), p[2] = v,
			p[3] = 0;
		}
	bench("quiet desktop", img, w, h);
	for (size_t i = 0; i < (size_t)w * h * 4; i++)
		img[i] = rnd();
	bench("noise", img, w, h);
	free(img);
	return done();
}
