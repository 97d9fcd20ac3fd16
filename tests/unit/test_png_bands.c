/* The banded incremental PNG encoder: random damage on a synthetic
 * framebuffer, encoded incrementally, decoded by libpng and compared pixel
 * by pixel with the framebuffer and with a fresh full encode; both as R,G,B
 * and as palette images (at most 256 colours), and across the switches
 * between the two. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture/capture.h"
#include "tests/harness.h"
#include "tests/lib/pngread.h"

static uint32_t rng = 4242;
static uint32_t rnd(void)
{
	rng = rng * 1103515245u + 12345u;
	return rng >> 8;
}

static int same_pixels(const uint8_t *img, size_t stride, uint32_t w, uint32_t h,
		       const uint8_t *rgb)
{
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++) {
			const uint8_t *s = img + (size_t)y * stride + (size_t)x * 4;
			const uint8_t *d = rgb + ((size_t)y * w + x) * 3;
			if (d[0] != s[2] || d[1] != s[1] || d[2] != s[0])
				return 0;
		}
	return 1;
}

/* A desktop-like picture: flat areas, a window with "text". */
static void paint(uint8_t *img, size_t stride, uint32_t w, uint32_t h)
{
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++) {
			uint8_t *p = img + (size_t)y * stride + (size_t)x * 4;
			int win = x > w / 6 && x < w * 3 / 4 && y > h / 8 && y < h * 3 / 4;
			int text = win && (y % 16) < 10 && ((x * 31 + y * 17) % 11) < 4;
			uint8_t v = text ? 0x10 : win ? 0xf0 : 0x5a;
			p[0] = v, p[1] = (uint8_t)(v + (win ? 0 : 0x20)), p[2] = v, p[3] = 0x77;
		}
}

/* Colour type of a PNG (IHDR byte 9): 2 R,G,B, 3 palette. */
static int png_ctype(const uint8_t *png, size_t len)
{
	return len > 25 ? png[25] : -1;
}

/* Damage colours: `few` draws flat rectangles from 12 colours, which keeps
 * the picture within a palette; else half are noise. */
static int few;

/* Changes a random rectangle (flat colour or noise) and marks its rows. */
static void damage(uint8_t *img, size_t stride, uint32_t w, uint32_t h, uint8_t *dirty)
{
	uint32_t rw = 1 + rnd() % (rnd() % 4 ? 60 : w), rh = 1 + rnd() % (rnd() % 4 ? 20 : h);
	rw = rw > w ? w : rw, rh = rh > h ? h : rh;
	uint32_t x0 = rnd() % (w - rw + 1), y0 = rnd() % (h - rh + 1);
	int noise = !few && rnd() % 2;
	uint32_t c = few ? 0x10305070u * (1 + rnd() % 12) : rnd();
	for (uint32_t y = y0; y < y0 + rh; y++) {
		dirty[y] = 1;
		for (uint32_t x = x0; x < x0 + rw; x++) {
			uint8_t *p = img + (size_t)y * stride + (size_t)x * 4;
			uint32_t v = noise ? rnd() : c;
			p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16);
		}
	}
}

/* What the encodes of incremental() were: palette or R,G,B images, and
 * partial encodes refused for a colour new to the palette. */
static int n_palette, n_rgb, n_refused;

/* `rounds` encodes of w x h under random damage.  Each encode gets a copy in
 * which the rows of unchanged bands are garbage, which proves they are
 * neither read nor needed (a refused partial encode is done again from the
 * whole picture, as capture_shot does).  Returns 1 when all decoded right. */
static int incremental(uint32_t w, uint32_t h, size_t stride, int level, int rounds,
		       uint32_t *max_redone_small)
{
	struct err e = ERR_INIT;
	struct capture_bands *b = NULL, *full = NULL;
	uint8_t *img = malloc(stride * h), *part = malloc(stride * h);
	uint8_t *rgb = malloc((size_t)w * h * 3), *rgb2 = malloc((size_t)w * h * 3);
	uint8_t *dirty = calloc(h, 1);
	int good = capture_bands_new(&b, &e) == 0 && capture_bands_new(&full, &e) == 0;
	paint(img, stride, w, h);
	*max_redone_small = 0;
	for (int i = 0; good && i < rounds; i++) {
		memset(dirty, 0, h);
		int nrect = i == 0 ? 0 : (int)(rnd() % 4);
		for (int k = 0; k < nrect; k++)
			damage(img, stride, w, h, dirty);
		for (size_t j = 0; j < stride * h; j++)
			part[j] = (uint8_t)rnd();
		for (uint32_t y0 = 0; y0 < h; y0 += CAPTURE_BAND_ROWS) {
			uint32_t y1 = y0 + CAPTURE_BAND_ROWS > h ? h : y0 + CAPTURE_BAND_ROWS;
			int any = i == 0;
			for (uint32_t y = y0; y < y1; y++)
				any |= dirty[y];
			if (any)
				memcpy(part + y0 * stride, img + y0 * stride, (y1 - y0) * stride);
		}
		uint8_t *out = NULL, *out2 = NULL;
		size_t len = 0, len2 = 0;
		uint32_t redone = 0;
		int r = capture_bands_encode(b, part, w, h, stride, level, i ? dirty : NULL, &out,
					     &len, &redone, &e);
		if (r == 1) {
			n_refused++;
			good = out == NULL;
			r = capture_bands_encode(b, img, w, h, stride, level, NULL, &out, &len,
						 &redone, &e);
		}
		good = good && r == 0 && png_test_decode(out, len, w, h, rgb) == 0 &&
		       same_pixels(img, stride, w, h, rgb);
		n_palette += png_ctype(out, len) == 3;
		n_rgb += png_ctype(out, len) == 2;
		if (good && nrect == 1 && redone > *max_redone_small)
			*max_redone_small = redone;
		/* A fresh encode of the whole picture decodes to the same. */
		capture_bands_free(full);
		full = NULL;
		good = good && capture_bands_new(&full, &e) == 0 &&
		       capture_bands_encode(full, img, w, h, stride, level, NULL, &out2, &len2,
					    NULL, &e) == 0 &&
		       png_test_decode(out2, len2, w, h, rgb2) == 0 &&
		       memcmp(rgb, rgb2, (size_t)w * h * 3) == 0;
		if (!good)
			printf("#   round %d failed: %s\n", i, e.msg);
		free(out);
		free(out2);
	}
	capture_bands_free(b);
	capture_bands_free(full);
	free(img), free(part), free(rgb), free(rgb2), free(dirty);
	return good;
}

/* One encode of `img` (dirty rows or NULL): its colour type when it
 * decodes to `img`, 1 when refused, -1 when wrong. */
static int encode_check(struct capture_bands *b, const uint8_t *img, uint32_t w, uint32_t h,
			const uint8_t *dirty, uint8_t *rgb)
{
	struct err e = ERR_INIT;
	uint8_t *out = NULL;
	size_t len = 0;
	int r = capture_bands_encode(b, img, w, h, (size_t)w * 4, 1, dirty, &out, &len, NULL, &e);
	if (r == 0)
		r = png_test_decode(out, len, w, h, rgb) == 0 &&
			    same_pixels(img, (size_t)w * 4, w, h, rgb)
			? png_ctype(out, len)
			: -1;
	else if (r != 1 || out)
		r = -1;
	free(out);
	return r;
}

/* The switches between palette and R,G,B: a 257th colour in a partial
 * encode is refused, in a full one (on a row the colour sample skips) it
 * makes an R,G,B image; a full change of few colours is a palette again. */
static int palette_switches(void)
{
	struct err e = ERR_INIT;
	uint32_t w = 320, h = 96;
	struct capture_bands *b = NULL;
	uint8_t *img = calloc((size_t)w * h, 4), *rgb = malloc((size_t)w * h * 3);
	uint8_t *dirty = calloc(h, 1);
	int good = capture_bands_new(&b, &e) == 0;
	good = good && encode_check(b, img, w, h, NULL, rgb) == 3;
	/* 300 colours on row 40 (band 1): refused, then R,G,B. */
	for (uint32_t x = 0; x < 300; x++)
		memcpy(img + (40 * w + x) * 4, &(uint32_t){x * 0x10101u + 1}, 4);
	dirty[40] = 1;
	good = good && encode_check(b, img, w, h, dirty, rgb) == 1;
	good = good && encode_check(b, img, w, h, NULL, rgb) == 2;
	/* Gone again, in a partial encode: stays R,G,B. */
	memset(img + 40 * w * 4, 0, (size_t)w * 4);
	good = good && encode_check(b, img, w, h, dirty, rgb) == 2;
	/* Exactly 256 colours, then 257 on row 41, which the sample skips. */
	for (uint32_t x = 0; x < 255; x++)
		memcpy(img + (40 * w + x) * 4, &(uint32_t){x * 0x10101u + 1}, 4);
	good = good && encode_check(b, img, w, h, NULL, rgb) == 3;
	memcpy(img + (41 * w) * 4, &(uint32_t){0xabcdefu}, 4);
	good = good && encode_check(b, img, w, h, NULL, rgb) == 2;
	capture_bands_free(b);
	free(img), free(rgb), free(dirty);
	return good;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Noise is stored rather than deflated: it must still decode exactly and
 * stay within a few bytes per 64 KB of its raw size. */
static int noise_roundtrip(uint32_t w, uint32_t h)
{
	struct err e = ERR_INIT;
	struct capture_bands *b = NULL;
	size_t stride = (size_t)w * 4, raw = ((size_t)w * 3 + 1) * h;
	uint8_t *img = malloc(stride * h), *rgb = malloc((size_t)w * h * 3), *out = NULL;
	for (size_t i = 0; i < stride * h; i++)
		img[i] = (uint8_t)rnd();
	size_t len = 0;
	int good = capture_bands_new(&b, &e) == 0 &&
		   capture_bands_encode(b, img, w, h, stride, 1, NULL, &out, &len, NULL, &e) == 0 &&
		   png_test_decode(out, len, w, h, rgb) == 0 && same_pixels(img, stride, w, h, rgb) &&
		   len < raw + raw / 1000 + 1024;
	/* A word typed over it (a flat 60x13 patch): still exact. */
	uint8_t *dirty = calloc(h, 1);
	for (uint32_t y = h / 2; y < h / 2 + 13; y++) {
		dirty[y] = 1;
		memset(img + (size_t)y * stride + (size_t)(w / 3) * 4, 0x30, 60 * 4);
	}
	free(out);
	out = NULL;
	good = good &&
	       capture_bands_encode(b, img, w, h, stride, 1, dirty, &out, &len, NULL, &e) == 0 &&
	       png_test_decode(out, len, w, h, rgb) == 0 && same_pixels(img, stride, w, h, rgb) &&
	       len < raw + raw / 1000 + 1024;
	free(dirty);
	if (!good)
		printf("#   noise %ux%u: %zu bytes for %zu raw\n", w, h, len, raw);
	capture_bands_free(b);
	free(img), free(rgb), free(out);
	return good;
}

int main(void)
{
	uint32_t mr;
	ok(incremental(1, 1, 4, 1, 5, &mr), "1x1");
	ok(incremental(3, 33, 12, 1, 20, &mr), "3x33 (a one-row last band)");
	ok(incremental(97, 64, 97 * 4 + 12, 6, 30, &mr), "97x64 padded stride, level 6");
	ok(incremental(200, 131, 800, 0, 30, &mr), "200x131 level 0");
	ok(incremental(640, 480, 640 * 4, 1, 60, &mr), "640x480 level 1, random damage");
	ok(incremental(1280, 800, 1280 * 4, 1, 12, &mr), "1280x800 level 1");
	ok(mr > 0 && mr <= 25, "a single rectangle redoes only the bands it touches");
	ok(noise_roundtrip(1280, 800), "1280x800 noise decodes exactly, stored at raw size, also with a word on it");
	printf("# palette %d, rgb %d, refused %d\n", n_palette, n_rgb, n_refused);
	ok(n_palette > 0 && n_rgb > 0 && n_refused > 0,
	   "palette and R,G,B images both made, partial encodes refused for a new colour");
	few = 1;
	n_palette = n_rgb = n_refused = 0;
	ok(incremental(640, 480, 640 * 4, 1, 60, &mr), "640x480 few colours, random damage");
	ok(incremental(1280, 800, 1280 * 4, 1, 12, &mr), "1280x800 few colours");
	ok(incremental(97, 64, 97 * 4 + 12, 6, 30, &mr), "97x64 few colours, padded, level 6");
	printf("# palette %d, rgb %d, refused %d\n", n_palette, n_rgb, n_refused);
	ok(n_rgb == 0 && n_refused == 0 && n_palette == 102,
	   "a picture of few colours stays a palette image");
	few = 0;
	ok(palette_switches(), "palette -> R,G,B at a 257th colour -> palette again");

	struct err e = ERR_INIT;
	struct capture_bands *b;
	uint8_t px[16] = {0}, *out = NULL;
	size_t len;
	ok(capture_bands_new(&b, &e) == 0, "new");
	ok(capture_bands_encode(b, px, 0, 1, 4, 1, NULL, &out, &len, NULL, &e) < 0 &&
	       e.kind == ERR_INVALID,
	   "zero width refused");
	ok(capture_bands_encode(b, px, 2, 1, 4, 1, NULL, &out, &len, NULL, &e) < 0,
	   "stride too small refused");
	ok(capture_bands_encode(b, px, 1, 1, 4, 10, NULL, &out, &len, NULL, &e) < 0,
	   "level 10 refused");

	/* Figures: full and one-band encodes of a 1280x800 desktop. */
	uint32_t w = 1280, h = 800;
	uint8_t *img = malloc((size_t)w * h * 4), *dirty = calloc(h, 1);
	paint(img, (size_t)w * 4, w, h);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	capture_bands_encode(b, img, w, h, (size_t)w * 4, 1, NULL, &out, &len, NULL, &e);
	double full = ms_since(&t0);
	free(out);
	dirty[400] = 1;
	img[400 * w * 4 + 40] ^= 0xff;
	uint32_t redone = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = capture_bands_encode(b, img, w, h, (size_t)w * 4, 1, dirty, &out, &len, &redone,
				     &e);
	double one = ms_since(&t0);
	ok(r == 0 && redone == 1, "one changed row redoes one band");
	printf("# bands 1280x800 desktop: full %.2f ms, one band %.2f ms, %zu bytes\n", full, one,
	       len);
	free(out);
	free(img), free(dirty);
	capture_bands_free(b);
	return done();
}
