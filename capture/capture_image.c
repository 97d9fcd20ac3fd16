/* Pure image operations on B,G,R,X buffers: resampling for scaled
 * screenshots and drawing the cursor into them. */
#include <stdint.h>
#include <string.h>

#include "capture.h"

/* Source columns [x0[i], x1[i]) average into destination column i. */
static void spans(uint32_t src, uint32_t dst, uint32_t *lo, uint32_t *hi)
{
	for (uint32_t i = 0; i < dst; i++) {
		uint64_t a = (uint64_t)i * src / dst;
		uint64_t b = (uint64_t)(i + 1) * src / dst;
		if (b <= a)
			b = a + 1;
		if (b > src)
			b = src;
		lo[i] = (uint32_t)a;
		hi[i] = (uint32_t)b;
	}
}

void capture_scale(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride, uint8_t *dst,
		   uint32_t dw, uint32_t dh, size_t dstride)
{
	if (!sw || !sh || !dw || !dh || sw > CAPTURE_MAX_DIM || sh > CAPTURE_MAX_DIM ||
	    dw > CAPTURE_MAX_DIM || dh > CAPTURE_MAX_DIM)
		return;
	/* Small fixed tables: at most CAPTURE_MAX_DIM entries each. */
	static _Thread_local uint32_t xlo[CAPTURE_MAX_DIM], xhi[CAPTURE_MAX_DIM];
	spans(sw, dw, xlo, xhi);
	uint32_t ylo, yhi;
	for (uint32_t y = 0; y < dh; y++) {
		ylo = (uint32_t)((uint64_t)y * sh / dh);
		yhi = (uint32_t)((uint64_t)(y + 1) * sh / dh);
		if (yhi <= ylo)
			yhi = ylo + 1;
		if (yhi > sh)
			yhi = sh;
		uint8_t *out = dst + (size_t)y * dstride;
		for (uint32_t x = 0; x < dw; x++) {
			uint64_t sb = 0, sg = 0, sr = 0;
			for (uint32_t yy = ylo; yy < yhi; yy++) {
				const uint8_t *p = src + (size_t)yy * sstride + (size_t)xlo[x] * 4;
				for (uint32_t xx = xlo[x]; xx < xhi[x]; xx++, p += 4) {
					sb += p[0];
					sg += p[1];
					sr += p[2];
				}
			}
			/* Up to 2^26 pixels per box (8192^2 shrunk to 1x1):
			 * 64-bit sums. */
			uint64_t n = (uint64_t)(yhi - ylo) * (xhi[x] - xlo[x]);
			out[x * 4 + 0] = (uint8_t)((sb + n / 2) / n);
			out[x * 4 + 1] = (uint8_t)((sg + n / 2) / n);
			out[x * 4 + 2] = (uint8_t)((sr + n / 2) / n);
			out[x * 4 + 3] = 0;
		}
	}
}

void capture_draw_cursor(uint8_t *img, uint32_t w, uint32_t h, size_t stride, const uint8_t *cur,
			 uint32_t cw, uint32_t ch, int32_t x, int32_t y)
{
	for (uint32_t cy = 0; cy < ch; cy++) {
		int64_t iy = (int64_t)y + cy;
		if (iy < 0 || iy >= (int64_t)h)
			continue;
		for (uint32_t cx = 0; cx < cw; cx++) {
			int64_t ix = (int64_t)x + cx;
			const uint8_t *c = cur + ((size_t)cy * cw + cx) * 4;
			if (ix < 0 || ix >= (int64_t)w || c[3] == 0)
				continue;
			memcpy(img + (size_t)iy * stride + (size_t)ix * 4, c, 3);
		}
	}
}
