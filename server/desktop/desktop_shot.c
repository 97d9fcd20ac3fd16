/* Screenshots: region, scaling, cursor, PNG or JPEG, ETags. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/args.h"
#include "desktop.h"
#include "common/clock.h"
#include "common/metrics.h"

#define JPEG_DEFAULT_QUALITY 80

/* Agent-space span [a, a + n) to real pixels, covering every real pixel any
 * part of it touches. */
static void span_to_real(uint32_t a, uint32_t n, uint32_t from, uint32_t to, uint32_t *x,
			 uint32_t *len)
{
	uint64_t x0 = (uint64_t)a * to / from;
	uint64_t x1 = ((uint64_t)(a + n) * to + from - 1) / from;
	if (x1 > to)
		x1 = to;
	if (x1 <= x0)
		x1 = x0 + 1;
	*x = (uint32_t)x0;
	*len = (uint32_t)(x1 - x0);
}

const char *desk_shot_mime(int format)
{
	return format == CAPTURE_JPEG ? "image/jpeg"
	       : format == CAPTURE_WEBP ? "image/webp"
					: "image/png";
}

int desk_shot_parse(const struct desk *d, const cJSON *o, struct shot_opts *so, struct err *e)
{
	static const char *const formats[] = {"png", "jpeg", "jpg", "webp", NULL};
	static const int format_of[] = {CAPTURE_PNG, CAPTURE_JPEG, CAPTURE_JPEG, CAPTURE_WEBP};
	memset(so, 0, sizeof(*so));
	int64_t x, y, w, h, ow, oh, q;
	double scale;
	int fmt, cursor, lossless;
	if (args_int(o, "x", 0, (int64_t)d->aw - 1, 0, 0, &x, e) < 0 ||
	    args_int(o, "y", 0, (int64_t)d->ah - 1, 0, 0, &y, e) < 0 ||
	    args_int(o, "w", 1, (int64_t)d->aw - x, (int64_t)d->aw - x, 0, &w, e) < 0 ||
	    args_int(o, "h", 1, (int64_t)d->ah - y, (int64_t)d->ah - y, 0, &h, e) < 0 ||
	    args_double(o, "scale", 0.01, 4.0, 1.0, 0, &scale, e) < 0 ||
	    args_int(o, "width", 0, CAPTURE_MAX_DIM, 0, 0, &ow, e) < 0 ||
	    args_int(o, "height", 0, CAPTURE_MAX_DIM, 0, 0, &oh, e) < 0 ||
	    args_enum(o, "format", formats, 0, 0, &fmt, e) < 0 ||
	    args_int(o, "quality", 1, 100, JPEG_DEFAULT_QUALITY, 0, &q, e) < 0 ||
	    args_bool(o, "cursor", 0, &cursor, e) < 0 ||
	    args_bool(o, "lossless", 1, &lossless, e) < 0)
		return err_code(e);
	span_to_real((uint32_t)x, (uint32_t)w, d->aw, d->w, &so->r.x, &so->r.w);
	span_to_real((uint32_t)y, (uint32_t)h, d->ah, d->h, &so->r.y, &so->r.h);
	/* The output is the region as the agent sees it (its own size in
	 * agent pixels), times `scale`, unless a target size is given; a
	 * single target side keeps the aspect ratio, two are fitted inside. */
	double fw = (double)w * scale, fh = (double)h * scale;
	if (ow && oh) {
		double kw = (double)ow / (double)w, kh = (double)oh / (double)h;
		double k = kw < kh ? kw : kh;
		fw = (double)w * k;
		fh = (double)h * k;
	} else if (ow) {
		fw = (double)ow;
		fh = (double)h * (double)ow / (double)w;
	} else if (oh) {
		fh = (double)oh;
		fw = (double)w * (double)oh / (double)h;
	}
	/* Rounded; both are positive and bounded by 4 * 8192 here. */
	fw = (double)(int64_t)(fw + 0.5);
	fh = (double)(int64_t)(fh + 0.5);
	if (fw < 1 || fh < 1 || fw > CAPTURE_MAX_DIM || fh > CAPTURE_MAX_DIM)
		return err_set(e, ERR_INVALID, EINVAL, "output size %.0fx%.0f out of range 1-%u",
			       fw, fh, CAPTURE_MAX_DIM);
	so->ow = (uint32_t)fw;
	so->oh = (uint32_t)fh;
	so->format = format_of[fmt];
	so->lossless = so->format == CAPTURE_WEBP && lossless;
	so->quality = (int)q;
	so->cursor = cursor;
	return 0;
}

void desk_shot_etag(const struct desk *d, const struct shot_opts *so, uint64_t frame, char *buf,
		    size_t size)
{
	/* What the bytes depend on besides the frame: the options, and with
	 * the cursor drawn its position and shape (which move without a new
	 * frame).  FNV-1a over them. */
	uint64_t v[13] = {so->r.x,
			  so->r.y,
			  so->r.w,
			  so->r.h,
			  so->ow,
			  so->oh,
			  (uint64_t)so->format,
			  (uint64_t)so->quality,
			  (uint64_t)so->cursor,
			  0,
			  0,
			  (uint64_t)so->lossless};
	if (so->cursor) {
		int32_t px, py;
		capture_pointer(d->cap, &px, &py);
		uint8_t tmp[CAPTURE_CURSOR_SIZE];
		uint32_t cw = 0, ch = 0;
		int32_t hx, hy;
		uint64_t serial = 0;
		capture_cursor(d->cap, tmp, &cw, &ch, &hx, &hy, &serial);
		v[9] = (uint64_t)(uint32_t)px << 32 | (uint32_t)py;
		v[10] = serial;
	}
	uint64_t hsh = 1469598103934665603ull;
	const uint8_t *p = (const uint8_t *)v;
	for (size_t i = 0; i < sizeof(v); i++)
		hsh = (hsh ^ p[i]) * 1099511628211ull;
	snprintf(buf, size, "\"f%llu-%08llx\"", (unsigned long long)frame,
		 (unsigned long long)(hsh & 0xffffffffu));
}

int desk_shot_take(const struct desk *d, const struct shot_opts *so, struct shot *s, struct err *e)
{
	long long t0 = clock_mono_ns();
	memset(s, 0, sizeof(*s));
	struct capture_shot_req q = {.r = so->r,
				     .ow = so->ow,
				     .oh = so->oh,
				     .format = so->format,
				     .quality = so->quality,
				     .lossless = so->lossless,
				     .level = d->png_level,
				     .cursor = so->cursor};
	int r = capture_shot_image(d->cap, &q, &s->img, &s->frame, e);
	if (r < 0)
		return r;
	s->data = capture_image_data(s->img, &s->len);
	s->w = so->ow;
	s->h = so->oh;
	s->mime = desk_shot_mime(so->format);
	desk_shot_etag(d, so, s->frame, s->etag, sizeof(s->etag));
	metrics_observe("deskbox_screenshot_encode_seconds",
			so->format == CAPTURE_JPEG   ? "format=\"jpeg\""
			: so->format == CAPTURE_WEBP ? "format=\"webp\""
						     : "format=\"png\"",
			(double)(clock_mono_ns() - t0) / 1e9);
	return 0;
}

void desk_shot_release(struct shot *s)
{
	capture_image_put(s->img);
	s->img = NULL;
	s->data = NULL;
}

cJSON *desk_shot_json(const struct shot *s)
{
	char *b64 = base64_encode(s->data, s->len);
	if (!b64)
		return NULL;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "format", s->mime + strlen("image/"));
	cJSON_AddStringToObject(j, "media_type", s->mime);
	cJSON_AddNumberToObject(j, "width", s->w);
	cJSON_AddNumberToObject(j, "height", s->h);
	cJSON_AddNumberToObject(j, "frame", (double)s->frame);
	cJSON_AddStringToObject(j, "data", b64);
	free(b64);
	return j;
}
