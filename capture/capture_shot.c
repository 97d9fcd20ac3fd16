/* Screenshots of one mirror: region, cursor, scaling, encoding, with a
 * small cache of encoded images per frame and an incremental PNG encoder.
 *
 * Agents ask for the same screenshot many times per task (once per step,
 * and again from other tools), and between two steps little of the screen
 * changes.  A repeat for an unchanged frame is served from the cache; a new
 * frame re-encodes only the PNG bands it changed (capture_bands.c), using
 * the per-strip frame stamps the bridge keeps in the shared header.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "internal.h"

/* The cache holds at most this many images and bytes; a bigger image is
 * not kept.  Four covers an agent's usual mix (full PNG, a region, a
 * scaled copy); 4 MB holds one 1280x800 noise frame. */
#define CACHE_ENTRIES 4
#define CACHE_BYTES   (4u << 20)

/* Everything the encoded bytes depend on. */
struct shot_key {
	struct capture_shot_req q;
	uint64_t frame;
	int32_t px, py;	  /* pointer, when drawn */
	uint64_t cserial; /* cursor shape, when drawn */
};

/* An encoded image, shared by the cache and whoever is sending it: the
 * bytes are never copied after the encode. */
struct capture_image {
	atomic_int refs;
	size_t len;
	uint8_t *data;
};

struct cache_entry {
	struct shot_key k;
	struct capture_image *img; /* NULL: empty slot */
	uint64_t used;		   /* LRU tick */
};

struct capture_shots {
	pthread_mutex_t lock; /* everything below; held while encoding */
	struct cache_entry cache[CACHE_ENTRIES];
	uint64_t tick;
	/* The incremental PNG encoder and what its bands show: the request
	 * (region, level, cursor) and frame, and the rows (region-relative)
	 * the cursor was drawn on. */
	struct capture_bands *bands;
	int inc_valid;
	struct capture_shot_req inc_q;
	uint64_t inc_frame;
	uint32_t cur_y0, cur_y1;
	uint8_t cur[CAPTURE_CURSOR_SIZE];
};

int capture_shots_new(struct capture_shots **out, struct err *e)
{
	struct capture_shots *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (capture_bands_new(&s->bands, e) < 0) {
		free(s);
		return err_code(e);
	}
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

void capture_shots_free(struct capture_shots *s)
{
	if (!s)
		return;
	for (int i = 0; i < CACHE_ENTRIES; i++)
		capture_image_put(s->cache[i].img);
	capture_bands_free(s->bands);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int key_eq(const struct shot_key *a, const struct shot_key *b)
{
	return a->frame == b->frame && a->px == b->px && a->py == b->py &&
	       a->cserial == b->cserial && a->q.r.x == b->q.r.x && a->q.r.y == b->q.r.y &&
	       a->q.r.w == b->q.r.w && a->q.r.h == b->q.r.h && a->q.ow == b->q.ow &&
	       a->q.oh == b->q.oh && a->q.format == b->q.format && a->q.quality == b->q.quality &&
	       a->q.level == b->q.level && a->q.cursor == b->q.cursor &&
	       a->q.lossless == b->q.lossless;
}

/* Takes ownership of `data` (malloc'd); NULL when out of memory (`data`
 * is freed then). */
static struct capture_image *image_new(uint8_t *data, size_t len)
{
	struct capture_image *im = malloc(sizeof(*im));
	if (!im) {
		free(data);
		return NULL;
	}
	atomic_init(&im->refs, 1);
	im->data = data;
	im->len = len;
	return im;
}

const uint8_t *capture_image_data(const struct capture_image *im, size_t *len)
{
	*len = im->len;
	return im->data;
}

void capture_image_put(struct capture_image *im)
{
	if (im && atomic_fetch_sub(&im->refs, 1) == 1) {
		free(im->data);
		free(im);
	}
}

/* A reference to the cached image for `k`, or NULL. */
static struct capture_image *cache_get(struct capture_shots *s, const struct shot_key *k)
{
	for (int i = 0; i < CACHE_ENTRIES; i++) {
		struct cache_entry *c = &s->cache[i];
		if (!c->img || !key_eq(&c->k, k))
			continue;
		c->used = ++s->tick;
		atomic_fetch_add(&c->img->refs, 1);
		return c->img;
	}
	return NULL;
}

/* Keeps a reference to `im` for `k`, evicting least recently used images
 * to stay within CACHE_ENTRIES and CACHE_BYTES. */
static void cache_put(struct capture_shots *s, const struct shot_key *k, struct capture_image *im)
{
	if (im->len > CACHE_BYTES)
		return;
	for (;;) {
		size_t total = im->len;
		int n = 0, lru = -1;
		for (int i = 0; i < CACHE_ENTRIES; i++) {
			if (!s->cache[i].img)
				continue;
			total += s->cache[i].img->len;
			n++;
			if (lru < 0 || s->cache[i].used < s->cache[lru].used)
				lru = i;
		}
		if (total <= CACHE_BYTES && n < CACHE_ENTRIES)
			break;
		capture_image_put(s->cache[lru].img);
		s->cache[lru].img = NULL;
	}
	for (int i = 0; i < CACHE_ENTRIES; i++) {
		struct cache_entry *c = &s->cache[i];
		if (c->img)
			continue;
		atomic_fetch_add(&im->refs, 1);
		c->img = im;
		c->k = *k;
		c->used = ++s->tick;
		return;
	}
}

/* Pointer position and cursor shape (into s->cur) for a drawn cursor. */
struct cursor_at {
	int have;
	uint32_t w, h;
	int32_t x, y; /* top left, region-relative */
};

static void cursor_read(struct capture *c, struct capture_shots *s, struct shot_key *k,
			struct cursor_at *ca)
{
	memset(ca, 0, sizeof(*ca));
	if (!k->q.cursor)
		return;
	int32_t hx, hy;
	capture_pointer(c, &k->px, &k->py);
	ca->have = capture_cursor(c, s->cur, &ca->w, &ca->h, &hx, &hy, &k->cserial);
	ca->x = k->px - hx - (int32_t)k->q.r.x;
	ca->y = k->py - hy - (int32_t)k->q.r.y;
}

/* Rows [y0, y1) of the region that the cursor covers (empty when none). */
static void cursor_rows(const struct cursor_at *ca, uint32_t h, uint32_t *y0, uint32_t *y1)
{
	int64_t a = ca->y, b = (int64_t)ca->y + ca->h;
	a = a < 0 ? 0 : a > h ? h : a;
	b = !ca->have ? a : b < a ? a : b > h ? h : b;
	*y0 = (uint32_t)a;
	*y1 = (uint32_t)b;
}

/* An unscaled PNG through the incremental encoder. */
static int shot_incremental(struct capture *c, struct capture_shots *s, struct shot_key *k,
			    const struct cursor_at *ca, uint8_t **out, size_t *len,
			    struct err *e)
{
	const struct capture_shot_req *q = &k->q;
	int same = s->inc_valid && s->inc_q.r.x == q->r.x && s->inc_q.r.y == q->r.y &&
		   s->inc_q.r.w == q->r.w && s->inc_q.r.h == q->r.h &&
		   s->inc_q.level == q->level && s->inc_q.cursor == q->cursor;
	uint64_t since = same ? s->inc_frame : 0;
	s->inc_valid = 0;
	size_t stride = (size_t)q->r.w * 4;
	/* SECURITY: r lies inside the display (<= CAPTURE_MAX_DIM a side):
	 * the product fits.  Untouched rows are never read, so the pages of
	 * unchanged bands are not even faulted in. */
	uint8_t *pix = malloc(stride * q->r.h), *rows = calloc(q->r.h, 1);
	if (!pix || !rows) {
		free(pix);
		free(rows);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	uint32_t y0, y1;
	cursor_rows(ca, q->r.h, &y0, &y1);
	if (same) {
		memset(rows + s->cur_y0, 1, s->cur_y1 - s->cur_y0);
		memset(rows + y0, 1, y1 - y0);
	}
	int r = capture_snapshot_since(c, q->r, pix, stride, since, rows, &k->frame, e);
	if (r == 0 && ca->have)
		capture_draw_cursor(pix, q->r.w, q->r.h, stride, s->cur, ca->w, ca->h, ca->x,
				    ca->y);
	if (r == 0)
		r = capture_bands_encode(s->bands, pix, q->r.w, q->r.h, stride, q->level,
					 since ? rows : NULL, out, len, NULL, e);
	if (r == 1) {
		/* A new colour for the palette: every row is needed now. */
		r = capture_snapshot_since(c, q->r, pix, stride, 0, rows, &k->frame, e);
		if (r == 0 && ca->have)
			capture_draw_cursor(pix, q->r.w, q->r.h, stride, s->cur, ca->w, ca->h,
					    ca->x, ca->y);
		if (r == 0)
			r = capture_bands_encode(s->bands, pix, q->r.w, q->r.h, stride, q->level,
						 NULL, out, len, NULL, e);
	}
	free(pix);
	free(rows);
	if (r < 0)
		return r;
	s->inc_valid = 1;
	s->inc_q = *q;
	s->inc_frame = k->frame;
	s->cur_y0 = y0, s->cur_y1 = y1;
	return 0;
}

/* Any other request: the whole region, scaled, encoded from scratch. */
static int shot_full(struct capture *c, struct capture_shots *s, struct shot_key *k,
		     const struct cursor_at *ca, uint8_t **out, size_t *len, struct err *e)
{
	const struct capture_shot_req *q = &k->q;
	size_t stride = (size_t)q->r.w * 4, ostride = (size_t)q->ow * 4;
	int scaled = q->ow != q->r.w || q->oh != q->r.h;
	uint8_t *pix = malloc(stride * q->r.h), *img = pix;
	if (!pix)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r = capture_snapshot(c, q->r, pix, stride, &k->frame, e);
	if (r == 0 && ca->have)
		capture_draw_cursor(pix, q->r.w, q->r.h, stride, s->cur, ca->w, ca->h, ca->x,
				    ca->y);
	if (r == 0 && scaled) {
		img = malloc(ostride * q->oh);
		if (!img)
			r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		else
			capture_scale(pix, q->r.w, q->r.h, stride, img, q->ow, q->oh, ostride);
	}
	if (!scaled)
		ostride = stride;
	struct capture_bands *once = NULL;
	if (r == 0 && q->format == CAPTURE_JPEG)
		r = capture_jpeg_encode(img, q->ow, q->oh, ostride, q->quality, out, len, e);
	else if (r == 0 && q->format == CAPTURE_WEBP)
		r = capture_webp_encode(img, q->ow, q->oh, ostride, q->lossless, q->quality, out,
					len, e);
	else if (r == 0 && (r = capture_bands_new(&once, e)) == 0)
		r = capture_bands_encode(once, img, q->ow, q->oh, ostride, q->level, NULL, out,
					 len, NULL, e);
	capture_bands_free(once);
	if (img != pix)
		free(img);
	free(pix);
	return r;
}

int capture_shot_image(struct capture *c, const struct capture_shot_req *q,
		       struct capture_image **out, uint64_t *frame, struct err *e)
{
	struct capture_shots *s = capture_shots_of(c);
	*out = NULL;
	if (q->format != CAPTURE_PNG && q->format != CAPTURE_JPEG && q->format != CAPTURE_WEBP)
		return err_set(e, ERR_INVALID, EINVAL, "unknown image format %d", q->format);
	/* Checked before anything is sized from them. */
	uint32_t w = capture_width(c), h = capture_height(c);
	if (q->r.w == 0 || q->r.h == 0 || q->r.x >= w || q->r.y >= h || q->r.w > w - q->r.x ||
	    q->r.h > h - q->r.y)
		return err_set(e, ERR_INVALID, EINVAL,
			       "region %ux%u+%u+%u outside the %ux%u display", q->r.w, q->r.h,
			       q->r.x, q->r.y, w, h);
	if (q->ow == 0 || q->oh == 0 || q->ow > CAPTURE_MAX_DIM || q->oh > CAPTURE_MAX_DIM)
		return err_set(e, ERR_INVALID, EINVAL, "output size %ux%u out of range 1-%u",
			       q->ow, q->oh, CAPTURE_MAX_DIM);
	struct shot_key k;
	memset(&k, 0, sizeof(k));
	k.q = *q;
	pthread_mutex_lock(&s->lock);
	struct cursor_at ca;
	cursor_read(c, s, &k, &ca);
	k.frame = capture_frame(c);
	int r = 0;
	*out = cache_get(s, &k);
	if (!*out) {
		uint8_t *data = NULL;
		size_t len = 0;
		int inc = q->format == CAPTURE_PNG && q->ow == q->r.w && q->oh == q->r.h;
		r = inc ? shot_incremental(c, s, &k, &ca, &data, &len, e)
			: shot_full(c, s, &k, &ca, &data, &len, e);
		if (r == 0 && !(*out = image_new(data, len)))
			r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		if (r == 0)
			cache_put(s, &k, *out);
	}
	pthread_mutex_unlock(&s->lock);
	if (r == 0 && frame)
		*frame = k.frame;
	return r;
}

int capture_shot(struct capture *c, const struct capture_shot_req *q, uint8_t **out,
		 size_t *out_len, uint64_t *frame, struct err *e)
{
	struct capture_image *im;
	*out = NULL;
	*out_len = 0;
	int r = capture_shot_image(c, q, &im, frame, e);
	if (r < 0)
		return r;
	*out = malloc(im->len ? im->len : 1);
	if (*out) {
		memcpy(*out, im->data, im->len);
		*out_len = im->len;
	}
	capture_image_put(im);
	return *out ? 0 : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
}
