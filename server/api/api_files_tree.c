/* The files API for whole trees: a directory as an archive (download and
 * upload, libarchive in files_archive.c / files_unpack.c) and many files
 * in one multipart request (docs/files.md). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"
#include "common/text.h"
#include "internal_files.h"

/* Files of one batch at most. */
#define BATCH_MAX_FILES 10000

/* ---- disk reservations (internal_files.h) ---- */

int apif_hold_reserve(struct hold *h, uint64_t bytes, struct err *e)
{
	if (sandbox_disk_reserve(h->sb, bytes, e) < 0)
		return err_code(e);
	h->held += bytes;
	return 0;
}

/* Before writing `len` bytes: enough is held. */
int apif_hold_before(struct hold *h, size_t len, struct err *e)
{
	return len > h->held ? apif_hold_reserve(h, len - h->held, e) : 0;
}

/* After writing them: the filesystem counts them now. */
void apif_hold_after(struct hold *h, size_t len)
{
	size_t n = len < h->held ? len : (size_t)h->held;
	sandbox_disk_release(h->sb, n);
	h->held -= n;
}

void apif_hold_free(struct hold *h)
{
	if (!h->sb)
		return;
	sandbox_disk_release(h->sb, h->held);
	sandbox_put(h->sb);
	h->sb = NULL;
}

int apif_hold_declared(struct hold *h, const struct http_request *req, struct err *e)
{
	const char *cl = http_header(req, "Content-Length");
	return cl ? apif_hold_reserve(h, strtoull(cl, NULL, 10), e) : 0;
}

/* ---- archive download ---- */

struct archive_dl {
	struct files_archive_out *a;
	uint64_t sent;
};

static long archive_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct archive_dl *d = cls;
	long n = files_archive_out_read(d->a, buf, max);
	if (n > 0)
		d->sent += (uint64_t)n;
	return n > 0 ? n : n == 0 ? HTTP_STREAM_END : HTTP_STREAM_ERROR;
}

static void archive_release(void *cls)
{
	struct archive_dl *d = cls;
	metrics_count("deskbox_download_bytes_total", "", (double)d->sent);
	files_archive_out_free(d->a);
	free(d);
}

/* Content-Disposition: attachment named after the directory ("NAME.tar");
 * a name that is not plain ASCII goes in filename* (RFC 6266), percent-
 * encoded, with "archive.EXT" as the plain fallback. */
static int add_disposition(struct http_response *res, const char *path,
			   enum files_archive_format f, struct err *e)
{
	const char *ext = f == FILES_ARCHIVE_ZIP ? "zip" : f == FILES_ARCHIVE_TGZ ? "tar.gz" : "tar";
	const char *slash = strrchr(path, '/');
	const char *name = slash && slash[1] ? slash + 1 : "root";
	int plain = 1;
	for (const char *c = name; *c; c++)
		plain &= *c > 0x20 && *c < 0x7f && *c != '"' && *c != '\\' && *c != '%';
	char v[NAME_MAX * 3 + 128];
	if (plain) {
		snprintf(v, sizeof(v), "attachment; filename=\"%s.%s\"", name, ext);
	} else {
		int o = snprintf(v, sizeof(v), "attachment; filename=\"archive.%s\"; filename*=UTF-8''",
				 ext);
		for (const unsigned char *c = (const unsigned char *)name; *c; c++)
			o += snprintf(v + o, sizeof(v) - (size_t)o,
				      isalnum(*c) || strchr("-._~", *c) ? "%c" : "%%%02X", *c);
		snprintf(v + o, sizeof(v) - (size_t)o, ".%s", ext);
	}
	return http_add_header(res, "Content-Disposition", v, e);
}

int api_files_archive_get(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	enum files_archive_format f;
	if (apif_query_path(req, "path", NULL, path, e) < 0 ||
	    files_archive_format_parse(http_query(req, "format"), &f, e) < 0)
		return err_code(e);
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0 || add_disposition(res, path, f, e) < 0)
		return err_code(e);
	struct archive_dl *d = calloc(1, sizeof(*d));
	if (!d)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (files_archive_out_begin(&root, path, f, &d->a, e) < 0) {
		free(d);
		return err_code(e);
	}
	http_reply_stream(res, 200, files_archive_mime(f), HTTP_SIZE_UNKNOWN, archive_read, d,
			  archive_release);
	return 0;
}

/* ---- archive upload ---- */

struct archive_ul {
	struct files_archive_in *a;
	enum files_archive_format f;
	struct hold hold;
	uint64_t size;
	char path[PATH_MAX];
};

static void archive_ul_free(struct archive_ul *u)
{
	if (!u)
		return;
	metrics_count("deskbox_upload_bytes_total", "", (double)u->size);
	files_archive_in_free(u->a);
	apif_hold_free(&u->hold);
	free(u);
}

static void archive_ul_abort(void *cls)
{
	archive_ul_free(cls);
}

static int archive_ul_write(void *cls, const char *data, size_t len, struct err *e)
{
	struct archive_ul *u = cls;
	if (apif_hold_before(&u->hold, len, e) < 0)
		return err_wrap(e, "archive upload into '%s' (nothing was changed)", u->path);
	if (files_archive_in_write(u->a, data, len, e) < 0)
		return err_code(e);
	apif_hold_after(&u->hold, len);
	u->size += len;
	return 0;
}

int api_files_archive_put_begin(struct http_request *req, struct http_body_sink *sink,
				struct err *e)
{
	struct archive_ul *u = calloc(1, sizeof(*u));
	if (!u)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int parents, r;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if ((r = apif_query_path(req, "path", NULL, u->path, e)) < 0 ||
	    (r = files_archive_format_parse(http_query(req, "format"), &u->f, e)) < 0 ||
	    (r = apif_query_flag(req, "parents", &parents, e)) < 0 ||
	    (r = apif_open_root(req, &root, &u->hold.sb, e)) < 0 ||
	    (r = apif_hold_declared(&u->hold, req, e)) < 0 ||
	    (r = files_archive_in_begin(&root, u->path, parents, &u->a, e)) < 0) {
		archive_ul_free(u);
		return r;
	}
	sink->write = archive_ul_write;
	sink->abort = archive_ul_abort;
	sink->cls = u;
	return 0;
}

static int space_reserve(void *cls, uint64_t bytes, struct err *e)
{
	return sandbox_disk_reserve(cls, bytes, e);
}

static void space_release(void *cls, uint64_t bytes)
{
	sandbox_disk_release(cls, bytes);
}

int api_files_archive_put(struct http_request *req, struct http_response *res, struct err *e)
{
	struct archive_ul *u = req->stream;
	/* What was held for the spool is written: give it back first. */
	sandbox_disk_release(u->hold.sb, u->hold.held);
	u->hold.held = 0;
	struct files_space space = {space_reserve, space_release, u->hold.sb,
				    sandbox_disk_bytes(u->hold.sb)};
	unsigned members = 0;
	uint64_t bytes = 0;
	/* On failure the http layer calls archive_ul_abort(), which frees. */
	if (files_archive_in_commit(u->a, u->f, &space, &members, &bytes, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", u->path);
	cJSON_AddNumberToObject(j, "members", members);
	cJSON_AddNumberToObject(j, "bytes", (double)bytes);
	archive_ul_free(u);
	return http_reply_json(res, 201, j, e);
}

/* ---- batch upload ---- */

struct batch {
	struct http_multipart *mp;
	struct hold hold;
	struct files_root root;
	int parents;
	/* The part being written. */
	struct files_upload *cur;
	char cur_key[PATH_MAX];
	char cur_path[PATH_MAX];
	uint64_t cur_size;
	struct sha256_ctx sha;
	unsigned done;
	uint64_t size;
	cJSON *files; /* one {"path","size","sha256"} per file written */
};

static void batch_free(struct batch *b)
{
	if (!b)
		return;
	metrics_count("deskbox_upload_bytes_total", "", (double)b->size);
	http_multipart_free(b->mp);
	files_upload_free(b->cur);
	apif_root_close(&b->root);
	apif_hold_free(&b->hold);
	cJSON_Delete(b->files);
	free(b);
}

static void batch_abort(void *cls)
{
	batch_free(cls);
}

/* The part being written is complete: renamed into place. */
static int batch_commit(struct batch *b, struct err *e)
{
	if (!b->cur)
		return 0;
	int r = files_upload_commit(b->cur, e);
	files_upload_free(b->cur);
	b->cur = NULL;
	if (r < 0)
		return r;
	uint8_t digest[SHA256_DIGEST_SIZE];
	char hex[2 * SHA256_DIGEST_SIZE + 1];
	sha256_digest(&b->sha, sizeof(digest), digest);
	hex_encode(digest, sizeof(digest), hex);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", b->cur_path);
	cJSON_AddNumberToObject(j, "size", (double)b->cur_size);
	cJSON_AddStringToObject(j, "sha256", hex);
	cJSON_AddItemToArray(b->files, j);
	b->done++;
	return 0;
}

static int batch_start(struct batch *b, const char *name, struct err *e)
{
	if (b->done >= BATCH_MAX_FILES)
		return err_set(e, ERR_TOO_LARGE, E2BIG, "a batch holds at most %d files",
			       BATCH_MAX_FILES);
	if (!name || !*name)
		return err_set(e, ERR_INVALID, EINVAL,
			       "a part without a field name (the name is the file's path)");
	snprintf(b->cur_key, sizeof(b->cur_key), "%s", name);
	if (files_path_normalize(name, strlen(name), b->cur_path, sizeof(b->cur_path), e) < 0)
		return err_wrap(e, "part '%s'", name);
	b->cur_size = 0;
	sha256_init(&b->sha);
	return files_upload_begin(&b->root, b->cur_path, b->parents, -1, &b->cur, e);
}

static int batch_part(void *cls, const char *name, const char *filename, const char *data,
		      uint64_t off, size_t size, struct err *e)
{
	struct batch *b = cls;
	/* A new part: another field name, or offset 0 again after data. */
	int fresh = !b->cur || strcmp(name ? name : "", b->cur_key) != 0 ||
		    (off == 0 && b->cur_size > 0);
	if (fresh && (batch_commit(b, e) < 0 || batch_start(b, name, e) < 0))
		goto fail;
	if (!size)
		return 0;
	if (apif_hold_before(&b->hold, size, e) < 0 || files_upload_write(b->cur, data, size, e) < 0)
		goto fail;
	apif_hold_after(&b->hold, size);
	sha256_update(&b->sha, size, (const uint8_t *)data);
	b->cur_size += size;
	b->size += size;
	return 0;
fail:
	return err_wrap(e, "batch file %u ('%s'; the %u before it were written)", b->done + 1,
			name ? name : "", b->done);
}

static int batch_write(void *cls, const char *data, size_t len, struct err *e)
{
	struct batch *b = cls;
	return http_multipart_feed(b->mp, data, len, e);
}

int api_files_batch_begin(struct http_request *req, struct http_body_sink *sink, struct err *e)
{
	struct batch *b = calloc(1, sizeof(*b));
	if (!b || !(b->files = cJSON_CreateArray())) {
		free(b);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	b->root.fd = -1;
	int r;
	if ((r = apif_query_flag(req, "parents", &b->parents, e)) < 0 ||
	    (r = http_multipart_new(req, batch_part, b, &b->mp, e)) < 0 ||
	    (r = apif_open_root(req, &b->root, &b->hold.sb, e)) < 0 ||
	    (r = apif_hold_declared(&b->hold, req, e)) < 0) {
		batch_free(b);
		return r;
	}
	sink->write = batch_write;
	sink->abort = batch_abort;
	sink->cls = b;
	return 0;
}

int api_files_batch(struct http_request *req, struct http_response *res, struct err *e)
{
	struct batch *b = req->stream;
	/* On failure the http layer calls batch_abort(), which frees. */
	if (http_multipart_finish(b->mp, e) < 0 || batch_commit(b, e) < 0)
		return err_code(e);
	if (!b->done)
		return err_set(e, ERR_INVALID, EINVAL, "no file part in the multipart/form-data body");
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "files", b->files);
	b->files = NULL;
	batch_free(b);
	return http_reply_json(res, 201, j, e);
}
