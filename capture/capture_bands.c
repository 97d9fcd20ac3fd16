/* Banded, incremental PNG encoding.
 *
 * The image's rows are cut into bands of CAPTURE_BAND_ROWS rows.  Each band
 * is filtered on its own (its first row with SUB, which needs no row above)
 * and compressed as its own raw deflate stream that ends in a full flush, so
 * the streams concatenate into one valid deflate stream, which an empty
 * final block closes.  Within a flat band, runs of rows equal to the row
 * above (UP zeros) are not deflated at all: their deflate bytes depend only
 * on the run's length and are made once.  The zlib Adler-32 and the IDAT CRC-32 of the whole are
 * combined from the bands' (adler32_combine, crc32_combine).  A band's
 * compressed bytes are kept, so the next encode redoes only the bands whose
 * rows changed: a one-word change on a 1280x800 screen recompresses one or
 * two of its 25 bands.
 *
 * A screen of at most 256 colours (a terminal, most dialogs and editors)
 * is written as a palette PNG: one index byte per pixel instead of three
 * R,G,B bytes, so deflate sees a third of the data (1280x800 text: ~8 ->
 * ~3 ms).  The palette only grows while its bands are kept, so a band
 * encoded earlier stays right; a colour past the 256th makes every band
 * go back to R,G,B.  Which of the two an image is written as is decided
 * when every band is redone, from a sample of its rows (every 8th).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "capture.h"
#include "internal.h"

/* Bands redone by each extra thread at least: below this a thread's start
 * costs more than it saves. */
#define BANDS_PER_THREAD 4
#define MAX_THREADS	 8

struct band {
	uint8_t *z; /* raw deflate bytes */
	size_t len, cap;
	uLong raw_len; /* filtered bytes it holds */
	uLong adler;   /* Adler-32 of those */
	uLong crc;     /* CRC-32 of z */
};

/* How a band is compressed. */
enum band_kind {
	BAND_FLAT,   /* UP filter, zlib's default matching */
	BAND_BUSY,   /* SUB filter, Z_RLE: matching finds little in photo-like content */
	BAND_STORED, /* SUB filter, stored (level 0): looks like noise, deflate would not shrink it */
	BAND_KINDS
};

/* What one thread needs to compress bands: a deflate stream per kind and
 * the filtered bytes. */
struct band_worker {
	z_stream zs[BAND_KINDS];
	int init[BAND_KINDS];
	uint8_t *raw;
	size_t raw_cap;
	/* Colours this thread has looked up in the palette (direct-mapped
	 * by a hash; key 0: empty). */
	uint32_t ckey[256];
	uint8_t cidx[256];
	uint32_t *head; /* capture_deflate_fast's hash (level 1) */
};

/* The deflate bytes of `k` rows that are all UP zeros (a row equal to the
 * one above), the same in every band of an image shape: made once. */
struct zrun {
	uint8_t *z;
	size_t len;
};

/* Runs of at least this many zero rows are copied from the zrun cache
 * instead of deflated (each split costs a flush, ~5 bytes). */
#define ZRUN_MIN 4

/* Open addressing over the palette's colours (twice its size). */
#define PAL_SLOTS 512u
#define PAL_USED  0x1000000u /* in a slot's key: taken (colours are 24-bit) */

/* The colours of an indexed image, in index order.  Shared by the threads
 * of an encode: a colour not yet seen is added under the lock. */
struct palette {
	pthread_mutex_t lock;
	uint32_t n;
	uint32_t rgb[256]; /* 0xRRGGBB */
	uint32_t key[PAL_SLOTS];
	uint8_t idx[PAL_SLOTS];
};

struct capture_bands {
	uint32_t w, h;
	int level;
	pthread_mutex_t zlock; /* zruns, filled by any worker thread */
	struct zrun zruns[CAPTURE_BAND_ROWS + 1];
	int valid; /* the bands hold the last encode of w x h at level */
	uint32_t nbands;
	struct band *bands;
	struct band_worker self; /* the caller's thread, during an encode */
	long ncpu;
	int indexed; /* the bands hold palette indices (pal), not R,G,B */
	struct palette pal;
	/* A palette image was tried and overflowed with this many colours in
	 * the sample (a gradient's colours fall between sampled rows): tried
	 * again only once the sample shows fewer.  UINT32_MAX: no veto. */
	uint32_t pal_veto;
};

/* One encode's shared work list, for the threads. */
struct band_job {
	struct capture_bands *b;
	const uint8_t *bgrx;
	size_t stride;
	const uint32_t *todo; /* band indices */
	uint32_t ntodo;
	atomic_uint next;
	atomic_int failed;   /* out of memory or a zlib error */
	atomic_int overflow; /* an indexed band met a 257th colour */
};

int capture_bands_new(struct capture_bands **out, struct err *e)
{
	struct capture_bands *b = calloc(1, sizeof(*b));
	if (!b)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_init(&b->zlock, NULL);
	pthread_mutex_init(&b->pal.lock, NULL);
	b->pal_veto = UINT32_MAX;
	b->ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (b->ncpu < 1)
		b->ncpu = 1;
	*out = b;
	return 0;
}

static void worker_release(struct band_worker *wk)
{
	for (int i = 0; i < BAND_KINDS; i++)
		if (wk->init[i])
			deflateEnd(&wk->zs[i]);
	free(wk->raw);
	free(wk->head);
	memset(wk, 0, sizeof(*wk));
}

/* The zero-run cache holds rows of one length: dropped when it changes. */
static void zruns_drop(struct capture_bands *b)
{
	for (uint32_t k = 0; k <= CAPTURE_BAND_ROWS; k++) {
		free(b->zruns[k].z);
		b->zruns[k].z = NULL;
	}
}

static void bands_drop(struct capture_bands *b)
{
	for (uint32_t i = 0; i < b->nbands; i++)
		free(b->bands[i].z);
	free(b->bands);
	b->bands = NULL;
	b->nbands = 0;
	b->valid = 0;
	zruns_drop(b);
}

void capture_bands_free(struct capture_bands *b)
{
	if (!b)
		return;
	bands_drop(b);
	worker_release(&b->self);
	pthread_mutex_destroy(&b->zlock);
	pthread_mutex_destroy(&b->pal.lock);
	free(b);
}

/* Whether at least half of a sample of the band's pixels equal the pixel
 * above them (every 4th row), the same test the one-shot encoder makes for
 * the whole image. */
static int band_flat(const uint8_t *bgrx, size_t stride, uint32_t w, uint32_t y0, uint32_t y1)
{
	uint64_t same = 0, total = 0;
	for (uint32_t y = y0 + 1; y < y1; y += 4) {
		const uint32_t *row = (const uint32_t *)(const void *)(bgrx + (size_t)y * stride);
		const uint32_t *up =
		    (const uint32_t *)(const void *)(bgrx + (size_t)(y - 1) * stride);
		for (uint32_t x = 0; x < w; x++)
			same += ((row[x] ^ up[x]) & 0xffffffu) == 0;
		total += w;
	}
	return total == 0 || same * 2 >= total;
}

static uint32_t colour_hash(uint32_t v)
{
	return (v * 2654435761u) >> 23; /* 9 bits: PAL_SLOTS */
}

/* The index of colour `v` (0xRRGGBB) in `pal`, added when new; -1 when the
 * palette is full.  Under the palette's lock. */
static int pal_index(struct palette *pal, uint32_t v)
{
	int r = -1;
	pthread_mutex_lock(&pal->lock);
	for (uint32_t s = colour_hash(v);; s = (s + 1) % PAL_SLOTS) {
		if (pal->key[s] == (v | PAL_USED)) {
			r = pal->idx[s];
			break;
		}
		if (pal->key[s])
			continue;
		if (pal->n < 256) {
			pal->key[s] = v | PAL_USED;
			pal->idx[s] = (uint8_t)pal->n;
			pal->rgb[pal->n] = v;
			r = (int)pal->n++;
		}
		break;
	}
	pthread_mutex_unlock(&pal->lock);
	return r;
}

static void pal_reset(struct palette *pal)
{
	pal->n = 0;
	memset(pal->key, 0, sizeof(pal->key));
}

/* The colours in a sample of the image (every 8th row), 257 meaning more
 * than 256.  Runs of one colour cost a compare; noise stops after ~257
 * pixels. */
static uint32_t sample_colours(const uint8_t *bgrx, size_t stride, uint32_t w, uint32_t h)
{
	uint32_t key[PAL_SLOTS] = {0}, n = 0;
	for (uint32_t y = 0; y < h; y += 8) {
		const uint32_t *row = (const uint32_t *)(const void *)(bgrx + (size_t)y * stride);
		uint32_t last = PAL_USED; /* no colour */
		for (uint32_t x = 0; x < w; x++) {
			uint32_t v = row[x] & 0xffffffu;
			if (v == last)
				continue;
			last = v;
			uint32_t s = colour_hash(v);
			while (key[s] && key[s] != (v | PAL_USED))
				s = (s + 1) % PAL_SLOTS;
			if (key[s])
				continue;
			if (++n > 256)
				return n;
			key[s] = v | PAL_USED;
		}
	}
	return n;
}

/* Row `y` as palette indices into `out` (filter byte 0, then one byte a
 * pixel).  -1 when a colour does not fit in the palette. */
static int index_row(struct capture_bands *b, struct band_worker *wk, const uint8_t *bgrx,
		     size_t stride, uint32_t y, uint8_t *out)
{
	const uint32_t *row = (const uint32_t *)(const void *)(bgrx + (size_t)y * stride);
	*out++ = 0;
	uint32_t last = PAL_USED;
	uint8_t li = 0;
	for (uint32_t x = 0; x < b->w; x++) {
		uint32_t v = row[x] & 0xffffffu;
		if (v != last) {
			uint32_t h = colour_hash(v) & 255;
			if (wk->ckey[h] != (v | PAL_USED)) {
				int k = pal_index(&b->pal, v);
				if (k < 0)
					return -1;
				wk->ckey[h] = v | PAL_USED;
				wk->cidx[h] = (uint8_t)k;
			}
			last = v;
			li = wk->cidx[h];
		}
		out[x] = li;
	}
	return 0;
}

/* Filters row `y` (B,G,R,X) into `out` (filter byte, then R,G,B): UP
 * against row y - 1 when `up`, else SUB. */
static void filter_row(const uint8_t *bgrx, size_t stride, uint32_t w, uint32_t y, int up,
		       uint8_t *out)
{
	const uint8_t *p = bgrx + (size_t)y * stride;
	if (up) {
		*out++ = 2;
		capture_up_row(p, p - stride, w, out);
		return;
	}
	*out++ = 1;
	uint8_t lr = 0, lg = 0, lb = 0;
	for (uint32_t x = 0; x < w; x++, p += 4, out += 3) {
		out[0] = (uint8_t)(p[2] - lr);
		out[1] = (uint8_t)(p[1] - lg);
		out[2] = (uint8_t)(p[0] - lb);
		lr = p[2], lg = p[1], lb = p[0];
	}
}

/* Adler-32 `adler` continued over `n` zero bytes: the byte sum stays, the
 * sum of sums grows by n times it (RFC 1950). */
static uLong adler_zeros(uLong adler, size_t n)
{
	uint64_t a = adler & 0xffff, sb = adler >> 16;
	sb = (sb + (uint64_t)(n % 65521) * a) % 65521;
	return (uLong)(sb << 16 | a);
}

static int worker_stream(struct band_worker *wk, enum band_kind k, int level, z_stream **zs)
{
	if (!wk->init[k]) {
		memset(&wk->zs[k], 0, sizeof(wk->zs[k]));
		/* Raw deflate (-15): the zlib header and checksum are written
		 * once for the whole image. */
		if (deflateInit2(&wk->zs[k], k == BAND_STORED ? 0 : level, Z_DEFLATED, -15, 8,
				 k == BAND_BUSY ? Z_RLE : Z_DEFAULT_STRATEGY) != Z_OK)
			return -1;
		wk->init[k] = 1;
	} else if (deflateReset(&wk->zs[k]) != Z_OK) {
		return -1;
	}
	*zs = &wk->zs[k];
	return 0;
}

/* Whether filtered bytes look like noise: the collision entropy of a
 * sample's bytes, -log2(sum of p^2), at least 7 bits (uniform noise is 8;
 * real pictures under SUB score far lower).  Deflate spends ~10 ms per MB
 * on such bytes to gain a few percent, storing them costs a copy.  Unlike
 * a test for a uniform histogram it also stores a band of noise that a
 * word was typed over (2% zeros: 7.9 bits). */
static int looks_random(const uint8_t *p, size_t n)
{
	uint32_t hist[256] = {0}, k = 0;
	for (size_t i = 0; i < n; i += 7, k++)
		hist[p[i]]++;
	if (k < 4096)
		return 0;
	uint64_t sq = 0;
	for (int i = 0; i < 256; i++)
		sq += (uint64_t)hist[i] * hist[i];
	return sq * 128 <= (uint64_t)k * k;
}

/* Appends the raw deflate of `in` to bd->z, ending in a full flush (byte
 * aligned, not final: the segments concatenate). */
static int seg_deflate(z_stream *zs, const uint8_t *in, size_t n, struct band *bd)
{
	if (deflateReset(zs) != Z_OK)
		return -1;
	/* deflateBound covers a finished stream; a full flush adds an empty
	 * stored block (5 bytes) at most. */
	size_t need = bd->len + deflateBound(zs, (uLong)n) + 16;
	if (bd->cap < need) {
		uint8_t *p = realloc(bd->z, need);
		if (!p)
			return -1;
		bd->z = p;
		bd->cap = need;
	}
	zs->next_in = (Bytef *)(uintptr_t)in;
	zs->avail_in = (uInt)n;
	zs->next_out = bd->z + bd->len;
	zs->avail_out = (uInt)(bd->cap - bd->len);
	if (deflate(zs, Z_FULL_FLUSH) != Z_OK || zs->avail_in != 0 || zs->avail_out == 0)
		return -1;
	bd->len = bd->cap - zs->avail_out;
	return 0;
}

/* The deflate bytes of `k` zero rows (filter byte 2, then zeros), made on
 * first use with the band's stream settings. */
static const struct zrun *zrun_get(struct capture_bands *b, z_stream *zs, size_t rowlen,
				   uint32_t k)
{
	pthread_mutex_lock(&b->zlock);
	struct zrun *zr = &b->zruns[k];
	if (!zr->z) {
		uint8_t *raw = calloc(k, rowlen);
		struct band tmp = {0};
		for (uint32_t r = 0; raw && r < k; r++)
			raw[r * rowlen] = 2;
		if (raw && seg_deflate(zs, raw, k * rowlen, &tmp) == 0) {
			zr->z = tmp.z;
			zr->len = tmp.len;
		} else {
			free(tmp.z);
		}
		free(raw);
	}
	pthread_mutex_unlock(&b->zlock);
	return zr->z ? zr : NULL;
}

/* Appends the deflate of `in` to bd->z: at level 1 with the fast fixed-code
 * deflate, which on a flat screen's rows takes a third of zlib's time for
 * ~1.3x the bytes; else with zlib. */
static int seg_flat(struct band_worker *wk, int level, z_stream *zs, const uint8_t *in,
		    size_t n, struct band *bd)
{
	if (level != 1)
		return seg_deflate(zs, in, n, bd);
	if (!wk->head && !(wk->head = calloc(CAPTURE_DEFLATE_HEAD, sizeof(*wk->head))))
		return -1;
	size_t need = bd->len + capture_deflate_bound(n);
	if (bd->cap < need) {
		uint8_t *p = realloc(bd->z, need);
		if (!p)
			return -1;
		bd->z = p;
		bd->cap = need;
	}
	bd->len += capture_deflate_fast(in, n, bd->z + bd->len, wk->head);
	return 0;
}

/* A flat band as segments: runs of ZRUN_MIN or more zero rows from the
 * zrun cache, the rows between deflated. */
static int band_segments(struct capture_bands *b, struct band_worker *wk, z_stream *zs,
			 const uint8_t *raw, size_t rowlen, uint32_t n, const uint8_t *zero,
			 struct band *bd)
{
	uint32_t run[CAPTURE_BAND_ROWS + 1]; /* zero rows from each row on */
	run[n] = 0;
	for (uint32_t r = n; r-- > 0;)
		run[r] = zero[r] ? run[r + 1] + 1 : 0;
	for (uint32_t r = 0; r < n;) {
		if (run[r] >= ZRUN_MIN) {
			const struct zrun *zr = zrun_get(b, zs, rowlen, run[r]);
			if (!zr)
				return -1;
			if (bd->cap < bd->len + zr->len) {
				uint8_t *p = realloc(bd->z, bd->len + zr->len);
				if (!p)
					return -1;
				bd->z = p;
				bd->cap = bd->len + zr->len;
			}
			memcpy(bd->z + bd->len, zr->z, zr->len);
			bd->len += zr->len;
			r += run[r];
			continue;
		}
		uint32_t e = r + 1;
		while (e < n && run[e] < ZRUN_MIN)
			e++;
		if (seg_flat(wk, b->level, zs, raw + r * rowlen, (e - r) * rowlen, bd) < 0)
			return -1;
		r = e;
	}
	return 0;
}

/* Band `i` as palette indices, rows equal to the one above as UP zeros,
 * compressed into b->bands[i].  1 when the palette overflowed. */
static int band_encode_indexed(struct capture_bands *b, struct band_worker *wk,
			       const uint8_t *bgrx, size_t stride, uint32_t i)
{
	uint32_t y0 = i * CAPTURE_BAND_ROWS;
	uint32_t y1 = y0 + CAPTURE_BAND_ROWS > b->h ? b->h : y0 + CAPTURE_BAND_ROWS;
	size_t rowlen = 1 + (size_t)b->w, raw = rowlen * (y1 - y0);
	if (wk->raw_cap < raw) {
		uint8_t *p = realloc(wk->raw, raw);
		if (!p)
			return -1;
		wk->raw = p;
		wk->raw_cap = raw;
	}
	uLong adler = adler32(0, NULL, 0);
	uint8_t zero[CAPTURE_BAND_ROWS] = {0};
	for (uint32_t y = y0; y < y1; y++) {
		uint8_t *o = wk->raw + (y - y0) * rowlen;
		if (y > y0 && memcmp(bgrx + (size_t)y * stride, bgrx + (size_t)(y - 1) * stride,
				     (size_t)b->w * 4) == 0) {
			o[0] = 2;
			memset(o + 1, 0, rowlen - 1);
			adler = adler_zeros(adler32(adler, o, 1), rowlen - 1);
			zero[y - y0] = 1;
			continue;
		}
		if (index_row(b, wk, bgrx, stride, y, o) < 0)
			return 1;
		adler = capture_adler32(adler, o, rowlen);
	}
	z_stream *zs;
	if (worker_stream(wk, BAND_FLAT, b->level, &zs) < 0)
		return -1;
	struct band *bd = &b->bands[i];
	bd->len = 0;
	if (band_segments(b, wk, zs, wk->raw, rowlen, y1 - y0, zero, bd) < 0)
		return -1;
	bd->raw_len = (uLong)raw;
	bd->adler = adler;
	bd->crc = crc32(crc32(0, NULL, 0), bd->z, (uInt)bd->len);
	return 0;
}

/* Filters and compresses band `i` of the image into b->bands[i]. */
static int band_encode(struct capture_bands *b, struct band_worker *wk, const uint8_t *bgrx,
		       size_t stride, uint32_t i)
{
	uint32_t y0 = i * CAPTURE_BAND_ROWS;
	uint32_t y1 = y0 + CAPTURE_BAND_ROWS > b->h ? b->h : y0 + CAPTURE_BAND_ROWS;
	size_t rowlen = 1 + (size_t)b->w * 3, raw = rowlen * (y1 - y0);
	if (wk->raw_cap < raw) {
		uint8_t *p = realloc(wk->raw, raw);
		if (!p)
			return -1;
		wk->raw = p;
		wk->raw_cap = raw;
	}
	int flat = band_flat(bgrx, stride, b->w, y0, y1);
	uLong adler = adler32(0, NULL, 0);
	uint8_t zero[CAPTURE_BAND_ROWS] = {0};
	for (uint32_t y = y0; y < y1; y++) {
		uint8_t *o = wk->raw + (y - y0) * rowlen;
		/* A row equal to the one above (most of a desktop) filters to
		 * zeros under UP: no per-pixel work, and the checksum of a
		 * zero run is arithmetic. */
		if (flat && y > y0 &&
		    memcmp(bgrx + (size_t)y * stride, bgrx + (size_t)(y - 1) * stride,
			   (size_t)b->w * 4) == 0) {
			o[0] = 2;
			memset(o + 1, 0, rowlen - 1);
			adler = adler_zeros(adler32(adler, o, 1), rowlen - 1);
			zero[y - y0] = 1;
			continue;
		}
		filter_row(bgrx, stride, b->w, y, flat && y > y0, o);
		adler = capture_adler32(adler, o, rowlen);
	}

	enum band_kind kind = flat ? BAND_FLAT : looks_random(wk->raw, raw) ? BAND_STORED : BAND_BUSY;
	z_stream *zs;
	if (worker_stream(wk, kind, b->level, &zs) < 0)
		return -1;
	struct band *bd = &b->bands[i];
	bd->len = 0;
	int r = flat ? band_segments(b, wk, zs, wk->raw, rowlen, y1 - y0, zero, bd)
		     : seg_deflate(zs, wk->raw, raw, bd);
	if (r < 0)
		return -1;
	bd->raw_len = (uLong)raw;
	bd->adler = adler;
	bd->crc = crc32(crc32(0, NULL, 0), bd->z, (uInt)bd->len);
	return 0;
}

static void job_run(struct band_job *j, struct band_worker *wk)
{
	for (;;) {
		unsigned k = atomic_fetch_add(&j->next, 1);
		if (k >= j->ntodo || atomic_load(&j->failed) || atomic_load(&j->overflow))
			return;
		int r = j->b->indexed ? band_encode_indexed(j->b, wk, j->bgrx, j->stride, j->todo[k])
				      : band_encode(j->b, wk, j->bgrx, j->stride, j->todo[k]);
		if (r < 0)
			atomic_store(&j->failed, 1);
		else if (r > 0)
			atomic_store(&j->overflow, 1);
	}
}

static void *job_thread(void *arg)
{
	struct band_worker wk = {0};
	job_run(arg, &wk);
	worker_release(&wk);
	return NULL;
}

/* Compresses the listed bands, on extra threads too when there are many:
 * 0, -1 on failure, 1 when an indexed band's colours overflowed the
 * palette (bands already done are then left as they are). */
static int bands_run(struct capture_bands *b, const uint8_t *bgrx, size_t stride,
		     const uint32_t *todo, uint32_t ntodo)
{
	struct band_job j = {.b = b, .bgrx = bgrx, .stride = stride, .todo = todo, .ntodo = ntodo};
	atomic_init(&j.next, 0);
	atomic_init(&j.failed, 0);
	atomic_init(&j.overflow, 0);
	long extra = (long)(ntodo / BANDS_PER_THREAD) - 1;
	if (extra > b->ncpu - 1)
		extra = b->ncpu - 1;
	if (extra > MAX_THREADS)
		extra = MAX_THREADS;
	pthread_t th[MAX_THREADS];
	long started = 0;
	for (; started < extra; started++)
		if (pthread_create(&th[started], NULL, job_thread, &j) != 0)
			break; /* fewer threads is fine: this one does the rest */
	job_run(&j, &b->self);
	for (long t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	return atomic_load(&j.failed) ? -1 : atomic_load(&j.overflow) ? 1 : 0;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Signature, IHDR, PLTE when indexed, one IDAT of the zlib header + bands
 * + Adler-32, IEND. */
static int bands_assemble(const struct capture_bands *b, uint8_t **out, size_t *out_len)
{
	size_t body = 2 + 2 + 4;
	uLong adler = adler32(0, NULL, 0);
	for (uint32_t i = 0; i < b->nbands; i++) {
		body += b->bands[i].len;
		adler = adler32_combine(adler, b->bands[i].adler, (z_off_t)b->bands[i].raw_len);
	}
	/* SECURITY: PNG chunk lengths are 31-bit; an 8192x8192 image's
	 * worst case is ~200 MB, but check rather than wrap. */
	if (body > 0x7fffffffu)
		return -1;
	size_t plte = b->indexed ? 12 + 3 * (size_t)b->pal.n : 0;
	size_t total = 8 + 25 + plte + 8 + body + 4 + 12;
	uint8_t *o = malloc(total), *p = o;
	if (!o)
		return -1;
	static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	memcpy(p, sig, 8), p += 8;
	put32(p, 13), memcpy(p + 4, "IHDR", 4);
	put32(p + 8, b->w), put32(p + 12, b->h);
	/* 8-bit RGB, or 8-bit indices into PLTE */
	p[16] = 8, p[17] = b->indexed ? 3 : 2, p[18] = 0, p[19] = 0, p[20] = 0;
	put32(p + 21, (uint32_t)crc32(0, p + 4, 17)), p += 25;
	if (plte) {
		put32(p, (uint32_t)(plte - 12)), memcpy(p + 4, "PLTE", 4);
		for (uint32_t i = 0; i < b->pal.n; i++) {
			uint32_t v = b->pal.rgb[i];
			p[8 + 3 * i] = (uint8_t)(v >> 16), p[9 + 3 * i] = (uint8_t)(v >> 8);
			p[10 + 3 * i] = (uint8_t)v;
		}
		put32(p + plte - 4, (uint32_t)crc32(0, p + 4, (uInt)(plte - 8)));
		p += plte;
	}
	put32(p, (uint32_t)body), memcpy(p + 4, "IDAT", 4);
	/* 0x78 0x01: deflate, 32 KB window, no dictionary (31 divides it). */
	p[8] = 0x78, p[9] = 0x01;
	uLong crc = crc32(0, p + 4, 6);
	p += 10;
	for (uint32_t i = 0; i < b->nbands; i++) {
		memcpy(p, b->bands[i].z, b->bands[i].len);
		p += b->bands[i].len;
		crc = crc32_combine(crc, b->bands[i].crc, (z_off_t)b->bands[i].len);
	}
	/* Every band ends in a full flush: close the stream with an empty
	 * final block (fixed Huffman, just the end-of-block code). */
	p[0] = 0x03, p[1] = 0x00;
	crc = crc32(crc, p, 2), p += 2;
	put32(p, (uint32_t)adler);
	crc = crc32(crc, p, 4), p += 4;
	put32(p, (uint32_t)crc), p += 4;
	put32(p, 0), memcpy(p + 4, "IEND", 4), put32(p + 8, (uint32_t)crc32(0, p + 4, 4)), p += 12;
	*out = o;
	*out_len = (size_t)(p - o);
	return 0;
}

/* Makes room for the bands of w x h at `level`, forgetting the kept ones
 * when either differs. */
static int bands_shape(struct capture_bands *b, uint32_t w, uint32_t h, int level)
{
	if (b->valid && b->w == w && b->h == h && b->level == level)
		return 0;
	bands_drop(b);
	worker_release(&b->self); /* its streams carry the old level */
	uint32_t n = (h + CAPTURE_BAND_ROWS - 1) / CAPTURE_BAND_ROWS;
	b->bands = calloc(n, sizeof(*b->bands));
	if (!b->bands)
		return -1;
	b->nbands = n;
	b->w = w, b->h = h, b->level = level;
	return 1;
}

/* Sets up every band to be written as palette indices (a fresh palette) or
 * as R,G,B. */
static void bands_mode(struct capture_bands *b, int indexed)
{
	if (indexed != b->indexed)
		zruns_drop(b); /* their rows have the other length */
	b->indexed = indexed;
	pal_reset(&b->pal);
}

int capture_bands_encode(struct capture_bands *b, const uint8_t *bgrx, uint32_t w, uint32_t h,
			 size_t stride, int level, const uint8_t *dirty, uint8_t **out,
			 size_t *out_len, uint32_t *redone, struct err *e)
{
	*out = NULL;
	*out_len = 0;
	if (capture_check_image(w, h, stride, e) < 0)
		return err_code(e);
	if (level < 0 || level > 9)
		return err_set(e, ERR_INVALID, EINVAL, "png compression level %d out of range 0-9",
			       level);
	int fresh = bands_shape(b, w, h, level);
	if (fresh < 0)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory encoding png");
	uint32_t *todo = malloc(b->nbands * sizeof(*todo)), n = 0;
	if (!todo)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory encoding png");
	for (uint32_t i = 0; i < b->nbands; i++) {
		int redo = fresh || !b->valid || !dirty;
		uint32_t y1 = (i + 1) * CAPTURE_BAND_ROWS > h ? h : (i + 1) * CAPTURE_BAND_ROWS;
		for (uint32_t y = i * CAPTURE_BAND_ROWS; !redo && y < y1; y++)
			redo = dirty[y] != 0;
		if (redo)
			todo[n++] = i;
	}
	/* Until every band is redone the kept ones are a mix: invalid. */
	b->valid = 0;
	int all = n == b->nbands;
	uint32_t nc = all ? sample_colours(bgrx, stride, w, h) : 0;
	if (all)
		bands_mode(b, nc <= 256 && nc < b->pal_veto);
	int r = bands_run(b, bgrx, stride, todo, n);
	if (r > 0 && all) {
		/* More colours than the sample showed: all of it as R,G,B. */
		b->pal_veto = nc;
		bands_mode(b, 0);
		r = bands_run(b, bgrx, stride, todo, n);
	} else if (r == 0 && all && b->indexed) {
		b->pal_veto = UINT32_MAX;
	}
	free(todo);
	/* The deflate streams (~270 KB each at level 1) and the filter buffer
	 * are not kept between encodes: with a hundred idle desktops they
	 * would cost deskboxd tens of MB, for ~0.1 ms saved per encode. */
	worker_release(&b->self);
	if (r < 0)
		return err_set(e, ERR_INTERNAL, EIO, "compressing png bands failed");
	if (r > 0) {
		/* A new colour in a partial encode of an indexed image: the
		 * bands not redone would have to change too. */
		bands_mode(b, 0);
		return 1;
	}
	b->valid = 1;
	if (redone)
		*redone = n;
	if (bands_assemble(b, out, out_len) < 0)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory encoding png");
	return 0;
}
