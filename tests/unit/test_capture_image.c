/* Pure image code for screenshots: resampling, cursor drawing, JPEG. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "tests/harness.h"

static void fill(uint8_t *img, uint32_t w, uint32_t h, uint8_t b, uint8_t g, uint8_t r)
{
	for (size_t i = 0; i < (size_t)w * h; i++) {
		img[i * 4] = b;
		img[i * 4 + 1] = g;
		img[i * 4 + 2] = r;
		img[i * 4 + 3] = 0;
	}
}

int main(void)
{
	struct err e = ERR_INIT;
	uint8_t *src = malloc(64 * 32 * 4), *dst = malloc(64 * 64 * 4);

	/* A 2x2 checkerboard of 0 and 200 shrinks to its average. */
	for (uint32_t y = 0; y < 32; y++)
		for (uint32_t x = 0; x < 64; x++) {
			uint8_t v = ((x ^ y) & 1) ? 200 : 0;
			memset(src + ((size_t)y * 64 + x) * 4, v, 3);
			src[((size_t)y * 64 + x) * 4 + 3] = 0;
		}
	capture_scale(src, 64, 32, 64 * 4, dst, 32, 16, 32 * 4);
	int avg = 1;
	for (size_t i = 0; i < 32 * 16; i++)
		avg &= dst[i * 4] == 100 && dst[i * 4 + 1] == 100 && dst[i * 4 + 2] == 100;
	ok(avg, "halving averages 2x2 boxes");

	/* Enlarging repeats pixels; left half red, right half blue. */
	fill(src, 4, 2, 0, 0, 255);
	for (uint32_t y = 0; y < 2; y++)
		for (uint32_t x = 2; x < 4; x++)
			memcpy(src + ((size_t)y * 4 + x) * 4, "\xff\x00\x00\x00", 4);
	capture_scale(src, 4, 2, 16, dst, 8, 4, 32);
	ok(dst[2] == 255 && dst[3 * 4 + 2] == 255 && dst[4 * 4] == 255 && dst[7 * 4] == 255,
	   "doubling keeps the halves");

	/* Odd ratios cover every source pixel once per axis. */
	fill(src, 64, 32, 10, 20, 30);
	capture_scale(src, 64, 32, 64 * 4, dst, 50, 7, 50 * 4);
	int same = 1;
	for (size_t i = 0; i < 50 * 7; i++)
		same &= dst[i * 4] == 10 && dst[i * 4 + 1] == 20 && dst[i * 4 + 2] == 30;
	ok(same, "a flat image stays flat at 64x32 -> 50x7");
	capture_scale(src, 64, 32, 64 * 4, dst, 1, 1, 4);
	ok(dst[0] == 10 && dst[2] == 30, "down to one pixel");

	/* Cursor drawing is clipped and honours the mask. */
	uint8_t cur[4 * 4 * 4];
	for (int i = 0; i < 16; i++) {
		cur[i * 4] = 1;
		cur[i * 4 + 1] = 2;
		cur[i * 4 + 2] = 3;
		cur[i * 4 + 3] = (i % 4 == 3) ? 0 : 255; /* last column transparent */
	}
	fill(dst, 8, 8, 0, 0, 0);
	capture_draw_cursor(dst, 8, 8, 32, cur, 4, 4, 6, -2);
	ok(dst[(0 * 8 + 6) * 4 + 2] == 3 && dst[(1 * 8 + 7) * 4 + 2] == 3, "drawn at the edge");
	ok(dst[(2 * 8 + 6) * 4 + 2] == 0, "clipped above the image");
	fill(dst, 8, 8, 0, 0, 0);
	capture_draw_cursor(dst, 8, 8, 32, cur, 4, 4, 0, 0);
	ok(dst[(0 * 8 + 2) * 4 + 2] == 3 && dst[(0 * 8 + 3) * 4 + 2] == 0, "mask respected");
	/* Entirely outside: not a pixel of the image, nor a byte past it (the
	 * rest of the 64x64 buffer), changes. */
	uint8_t *before = malloc(64 * 64 * 4);
	memcpy(before, dst, 64 * 64 * 4);
	capture_draw_cursor(dst, 8, 8, 32, cur, 4, 4, -100, 1000);
	capture_draw_cursor(dst, 8, 8, 32, cur, 4, 4, 8, 0);
	capture_draw_cursor(dst, 8, 8, 32, cur, 4, 4, 0, 8);
	capture_draw_cursor(dst, 8, 8, 32, cur, 4, 4, -4, -4);
	ok(memcmp(before, dst, 64 * 64 * 4) == 0, "a cursor off the image draws nothing");
	free(before);

	/* JPEG */
	uint8_t *jpg = NULL;
	size_t len = 0;
	fill(src, 64, 32, 0, 128, 255);
	ok(capture_jpeg_encode(src, 64, 32, 64 * 4, 80, &jpg, &len, &e) == 0, "jpeg encode");
	ok(len > 100 && jpg[0] == 0xff && jpg[1] == 0xd8 && jpg[len - 2] == 0xff &&
	       jpg[len - 1] == 0xd9,
	   "SOI ... EOI");
	int sof = 0;
	for (size_t i = 2; i + 9 < len; i++)
		if (jpg[i] == 0xff && jpg[i + 1] == 0xc0) {
			sof = (jpg[i + 5] << 8 | jpg[i + 6]) == 32 &&
			      (jpg[i + 7] << 8 | jpg[i + 8]) == 64;
			break;
		}
	ok(sof, "frame header says 64x32");
	free(jpg);
	ok(capture_jpeg_encode(src, 64, 32, 64 * 4, 0, &jpg, &len, &e) < 0 && e.kind == ERR_INVALID,
	   "quality 0 rejected");
	ok(capture_jpeg_encode(src, 64, 32, 10, 50, &jpg, &len, &e) < 0, "short stride rejected");
	ok(capture_jpeg_encode(src, 0, 32, 256, 50, &jpg, &len, &e) < 0, "empty image rejected");
	free(src);
	free(dst);
	return done();
}
