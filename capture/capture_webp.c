/* WebP encoding of the mirrored framebuffer with libwebp, lossless or
 * lossy.  libwebp reads the B,G,R,X layout directly
 * (WebPPictureImportBGRX): the X byte is taken as opaque. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <webp/encode.h>

#include "capture.h"
#include "internal.h"

/* WebP's own limit per side. */
#define WEBP_MAX_SIDE 16383u

int capture_webp_encode(const uint8_t *bgrx, uint32_t w, uint32_t h, size_t stride, int lossless,
			int quality, uint8_t **out, size_t *out_len, struct err *e)
{
	*out = NULL;
	*out_len = 0;
	if (capture_check_image(w, h, stride, e) < 0)
		return err_code(e);
	if (quality < 0 || quality > 100)
		return err_set(e, ERR_INVALID, EINVAL, "webp quality %d out of range 0-100",
			       quality);
	if (w > WEBP_MAX_SIDE || h > WEBP_MAX_SIDE || stride > (size_t)INT32_MAX)
		return err_set(e, ERR_INVALID, EINVAL, "image %ux%u too big for webp", w, h);
	WebPConfig cfg;
	if (!WebPConfigInit(&cfg))
		return err_set(e, ERR_INTERNAL, EINVAL, "libwebp version mismatch");
	if (lossless) {
		/* Preset 1 of 0..9: the fast end (desktops are flat; the
		 * slower presets gain a few percent for several times the
		 * time). */
		WebPConfigLosslessPreset(&cfg, 1);
	} else {
		cfg.quality = (float)quality;
		cfg.method = 2; /* 0..6 speed/size trade-off; 4, the default, is ~2x slower */
	}
	cfg.thread_level = 1;
	WebPPicture pic;
	if (!WebPPictureInit(&pic))
		return err_set(e, ERR_INTERNAL, EINVAL, "libwebp version mismatch");
	pic.width = (int)w;
	pic.height = (int)h;
	pic.use_argb = lossless;
	WebPMemoryWriter wr;
	WebPMemoryWriterInit(&wr);
	pic.writer = WebPMemoryWrite;
	pic.custom_ptr = &wr;
	int r = 0;
	if (!WebPPictureImportBGRX(&pic, bgrx, (int)stride))
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory importing into webp");
	else if (!WebPEncode(&cfg, &pic))
		r = err_set(e, ERR_INTERNAL, pic.error_code == VP8_ENC_ERROR_OUT_OF_MEMORY ? ENOMEM : EIO,
			    "encoding webp failed (libwebp error %d)", (int)pic.error_code);
	WebPPictureFree(&pic);
	if (r == 0) {
		/* Ours to free with free(): copy out of libwebp's allocator. */
		*out = malloc(wr.size ? wr.size : 1);
		if (!*out)
			r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		else
			memcpy(*out, wr.mem, wr.size), *out_len = wr.size;
	}
	WebPMemoryWriterClear(&wr);
	return r;
}
