/* PNG encoding of the mirrored framebuffer with libpng into memory. */
#include <errno.h>
#include <png.h>
#include <zlib.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "internal.h"

struct membuf {
	uint8_t *data;
	size_t len, cap;
	int failed;    /* out of memory: reported after png_write_end */
	char msg[128]; /* libpng's error message */
};

static void membuf_write(png_structp png, png_bytep data, png_size_t len)
{
	struct membuf *b = png_get_io_ptr(png);
	if (b->failed)
		return;
	if (len > b->cap - b->len) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap - b->len < len) {
			if (cap > SIZE_MAX / 2) {
				b->failed = 1;
				return;
			}
			cap *= 2;
		}
		uint8_t *p = realloc(b->data, cap);
		if (!p) {
			b->failed = 1;
			return;
		}
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
}

static void membuf_flush(png_structp png)
{
}

/* libpng reports errors by longjmp; the message is kept for the caller. */
static void png_error_fn(png_structp png, png_const_charp msg)
{
	struct membuf *b = png_get_error_ptr(png);
	snprintf(b->msg, sizeof(b->msg), "%s", msg);
	png_longjmp(png, 1);
}

static void png_warning_fn(png_structp png, png_const_charp msg)
{
}

/* Whether at least half of a sample of pixels equal the pixel above them:
 * 64 rows at most, so ~0.1 ms on a 1280x800 screen. */
static int png_looks_flat(const uint8_t *bgrx, uint32_t w, uint32_t h, size_t stride)
{
	if (h < 2)
		return 1;
	uint32_t step = h / 64 ? h / 64 : 1;
	uint64_t same = 0, total = 0;
	for (uint32_t y = 1; y < h; y += step) {
		const uint32_t *row = (const uint32_t *)(const void *)(bgrx + (size_t)y * stride);
		const uint32_t *up =
		    (const uint32_t *)(const void *)(bgrx + (size_t)(y - 1) * stride);
		for (uint32_t x = 0; x < w; x++)
			same += ((row[x] ^ up[x]) & 0xffffffu) == 0;
		total += w;
	}
	return same * 2 >= total;
}

int capture_check_image(uint32_t w, uint32_t h, size_t stride, struct err *e)
{
	if (w == 0 || h == 0 || w > CAPTURE_MAX_DIM || h > CAPTURE_MAX_DIM)
		return err_set(e, ERR_INVALID, EINVAL, "image size %ux%u out of range 1-%u", w, h,
			       CAPTURE_MAX_DIM);
	if (stride < (size_t)w * 4)
		return err_set(e, ERR_INVALID, EINVAL, "stride %zu below %zu", stride,
			       (size_t)w * 4);
	return 0;
}

int capture_png_encode(const uint8_t *bgrx, uint32_t w, uint32_t h, size_t stride, int level,
		       uint8_t **out, size_t *out_len, struct err *e)
{
	*out = NULL;
	*out_len = 0;
	if (capture_check_image(w, h, stride, e) < 0)
		return err_code(e);
	if (level < 0 || level > 9)
		return err_set(e, ERR_INVALID, EINVAL, "png compression level %d out of range 0-9",
			       level);

	/* The output buffer lives on the heap: automatic objects changed
	 * between setjmp and longjmp are indeterminate afterwards, and the
	 * pointers below are volatile for the same reason. */
	struct membuf *const buf = calloc(1, sizeof(*buf));
	if (!buf)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory encoding png");
	png_structp volatile png = NULL;
	png_infop volatile info = NULL;

	png = png_create_write_struct(PNG_LIBPNG_VER_STRING, buf, png_error_fn, png_warning_fn);
	if (!png) {
		free(buf);
		return err_set(e, ERR_INTERNAL, ENOMEM, "png_create_write_struct failed");
	}
	info = png_create_info_struct(png);
	if (!info) {
		png_destroy_write_struct((png_structpp)&png, NULL);
		free(buf);
		return err_set(e, ERR_INTERNAL, ENOMEM, "png_create_info_struct failed");
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct((png_structpp)&png, (png_infopp)&info);
		int r = err_set(e, ERR_INTERNAL, EIO, "encoding png: %s", buf->msg);
		free(buf->data);
		free(buf);
		return r;
	}
	png_set_write_fn(png, buf, membuf_write, membuf_flush);
	png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	/* One fixed filter: the adaptive choice costs ~5x for ~10% size.
	 * Flat screens (most desktops) compress best with UP and zlib's
	 * default matching; photo-like ones spend most of their time in
	 * zlib's match search for little gain, where SUB + Z_RLE is ~3x
	 * faster (1280x800 noise: 66 -> 20 ms; desktop: 6 ms either way). */
	if (png_looks_flat(bgrx, w, h, stride)) {
		png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_UP);
	} else {
		png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
		png_set_compression_strategy(png, Z_RLE);
	}
	png_set_compression_level(png, level);
	png_write_info(png, info);
	/* Input rows are B,G,R,X: swap to RGB order and drop the filler byte. */
	png_set_bgr(png);
	png_set_filler(png, 0, PNG_FILLER_AFTER);
	for (uint32_t y = 0; y < h; y++)
		png_write_row(png, (png_const_bytep)(bgrx + (size_t)y * stride));
	png_write_end(png, NULL);
	png_destroy_write_struct((png_structpp)&png, (png_infopp)&info);

	if (buf->failed) {
		free(buf->data);
		free(buf);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory encoding png");
	}
	*out = buf->data;
	*out_len = buf->len;
	free(buf);
	return 0;
}
