/* A PNG decoder for the unit tests (libpng): what every decoder must read
 * from deskbox's encoders. */
#ifndef DESKBOX_TESTS_PNGREAD_H
#define DESKBOX_TESTS_PNGREAD_H

#include <stddef.h>
#include <stdint.h>

/* Decodes an 8-bit RGB or palette PNG of exactly w x h into `rgb` (w*h*3
 * bytes, palette indices looked up);
 * libpng checks every CRC and the zlib Adler-32, and nothing may follow
 * the image.  0 on success, -1 otherwise. */
int png_test_decode(const uint8_t *data, size_t len, uint32_t w, uint32_t h, uint8_t *rgb);

#endif
