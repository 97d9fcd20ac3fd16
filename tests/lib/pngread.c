/* pngread: see pngread.h. */
#include "pngread.h"

#include <png.h>
#include <string.h>

struct reader {
	const uint8_t *p;
	size_t len, off;
};

static void read_fn(png_structp png, png_bytep out, png_size_t n)
{
	struct reader *r = png_get_io_ptr(png);
	if (n > r->len - r->off)
		png_error(png, "short read");
	memcpy(out, r->p + r->off, n);
	r->off += n;
}

int png_test_decode(const uint8_t *data, size_t len, uint32_t w, uint32_t h, uint8_t *rgb)
{
	struct reader r = {data, len, 0};
	png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_read_struct(&png, &info, NULL);
		return -1;
	}
	png_set_read_fn(png, &r, read_fn);
	png_read_info(png, info);
	int ctype = png_get_color_type(png, info);
	if (png_get_image_width(png, info) != w || png_get_image_height(png, info) != h ||
	    (ctype != PNG_COLOR_TYPE_RGB && ctype != PNG_COLOR_TYPE_PALETTE) ||
	    png_get_bit_depth(png, info) != 8) {
		png_destroy_read_struct(&png, &info, NULL);
		return -1;
	}
	if (ctype == PNG_COLOR_TYPE_PALETTE) {
		png_set_palette_to_rgb(png);
		png_read_update_info(png, info);
	}
	for (uint32_t y = 0; y < h; y++)
		png_read_row(png, rgb + (size_t)y * w * 3, NULL);
	png_read_end(png, NULL);
	png_destroy_read_struct(&png, &info, NULL);
	return r.off == len ? 0 : -1;
}
