/* JPEG encoding of the mirrored framebuffer with libjpeg-turbo, which reads
 * the B,G,R,X layout directly (JCS_EXT_BGRX): no conversion pass. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

#include "capture.h"
#include "internal.h"

struct jerr {
	struct jpeg_error_mgr mgr;
	jmp_buf jmp;
	char msg[JMSG_LENGTH_MAX];
};

/* libjpeg's default error_exit calls exit(): long-jump back instead. */
static void jerr_exit(j_common_ptr cinfo)
{
	struct jerr *je = (struct jerr *)cinfo->err;
	(*cinfo->err->format_message)(cinfo, je->msg);
	longjmp(je->jmp, 1);
}

static void jerr_output(j_common_ptr cinfo)
{
}

int capture_jpeg_encode(const uint8_t *bgrx, uint32_t w, uint32_t h, size_t stride, int quality,
			uint8_t **out, size_t *out_len, struct err *e)
{
	*out = NULL;
	*out_len = 0;
	if (capture_check_image(w, h, stride, e) < 0)
		return err_code(e);
	if (quality < 1 || quality > 100)
		return err_set(e, ERR_INVALID, EINVAL, "jpeg quality %d out of range 1-100",
			       quality);

	/* On the heap and volatile where they cross setjmp/longjmp. */
	struct jpeg_compress_struct *const cinfo = calloc(1, sizeof(*cinfo));
	struct jerr *const je = calloc(1, sizeof(*je));
	unsigned char *volatile buf = NULL;
	unsigned long volatile len = 0;
	if (!cinfo || !je) {
		free(cinfo);
		free(je);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory encoding jpeg");
	}
	cinfo->err = jpeg_std_error(&je->mgr);
	je->mgr.error_exit = jerr_exit;
	je->mgr.output_message = jerr_output;
	if (setjmp(je->jmp)) {
		jpeg_destroy_compress(cinfo);
		int r = err_set(e, ERR_INTERNAL, EIO, "encoding jpeg: %s", je->msg);
		free(buf);
		free(cinfo);
		free(je);
		return r;
	}
	jpeg_create_compress(cinfo);
	jpeg_mem_dest(cinfo, (unsigned char **)&buf, (unsigned long *)&len);
	cinfo->image_width = w;
	cinfo->image_height = h;
	cinfo->input_components = 4;
	cinfo->in_color_space = JCS_EXT_BGRX;
	jpeg_set_defaults(cinfo);
	jpeg_set_quality(cinfo, quality, TRUE);
	/* Fast integer DCT: the accurate one costs ~15 % for no visible gain
	 * on screen content. */
	cinfo->dct_method = JDCT_IFAST;
	jpeg_start_compress(cinfo, TRUE);
	while (cinfo->next_scanline < cinfo->image_height) {
		JSAMPROW row = (JSAMPROW)(bgrx + (size_t)cinfo->next_scanline * stride);
		jpeg_write_scanlines(cinfo, &row, 1);
	}
	jpeg_finish_compress(cinfo);
	jpeg_destroy_compress(cinfo);
	free(cinfo);
	free(je);
	*out = buf;
	*out_len = len;
	return 0;
}
