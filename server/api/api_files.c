/* The files API: upload (streamed to disk), download (streamed, ranges),
 * list, stat, mkdir, move, delete.  Path safety lives in files.c; this file
 * is HTTP: arguments, quota, multipart bodies, ranges. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/text.h"
#include "api.h"
#include "internal.h"
#include "internal_files.h"
#include "common/args.h"
#include "server/files/files.h"
#include "common/metrics.h"

/* ---- arguments ---- */

int apif_query_path(const struct http_request *req, const char *name, const char *def, char *out,
		      struct err *e)
{
	size_t len = 0;
	const char *v = http_query_n(req, name, &len);
	if (!v && def) {
		v = def;
		len = strlen(def);
	}
	if (!v)
		return err_set(e, ERR_INVALID, EINVAL, "missing query parameter '%s'", name);
	if (files_path_normalize(v, len, out, PATH_MAX, e) < 0)
		return err_wrap(e, "query parameter '%s'", name);
	return 0;
}

int apif_query_flag(const struct http_request *req, const char *name, int *out, struct err *e)
{
	const char *v = http_query(req, name);
	*out = 0;
	if (!v || !*v || strcmp(v, "0") == 0 || strcmp(v, "false") == 0)
		return 0;
	if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0) {
		*out = 1;
		return 0;
	}
	return err_set(e, ERR_INVALID, EINVAL, "query parameter '%s' must be 1 or 0", name);
}

/* `mode=0644`: octal permission bits; -1 when absent. */
int apif_query_mode(const struct http_request *req, int *out, struct err *e)
{
	const char *v = http_query(req, "mode");
	*out = -1;
	if (!v)
		return 0;
	char *end;
	errno = 0;
	unsigned long m = strtoul(v, &end, 8);
	if (!*v || *end || errno || m > 0777 || strspn(v, "01234567") != strlen(v))
		return err_set(e, ERR_INVALID, EINVAL,
			       "query parameter 'mode' must be octal permission bits (0 to 0777)");
	*out = (int)m;
	return 0;
}

int apif_body_path(const cJSON *body, const char *name, int required, char *out, struct err *e)
{
	const char *v;
	if (args_string(body, name, PATH_MAX - 1, required ? ARGS_REQUIRED : 0, &v, e) < 0)
		return err_code(e);
	if (!v)
		return 1;
	if (files_path_normalize(v, strlen(v), out, PATH_MAX, e) < 0)
		return err_wrap(e, "field '%s'", name);
	return 0;
}

void apif_root_close(struct files_root *r)
{
	if (r->fd >= 0)
		close(r->fd);
}

/* The request's sandbox and an fd of its "/"; the reference is dropped
 * here (the fd outlives it safely: see sandbox_open_root). */
int apif_open_root(struct http_request *req, struct files_root *root, struct sandbox **keep,
		     struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	int r = sandbox_open_root(sb, root, e);
	if (r < 0 || !keep)
		sandbox_put(sb);
	else
		*keep = sb;
	return r;
}

int apif_reply_stat(struct http_response *res, int status, const struct files_root *root,
		      const char *path, struct err *e)
{
	struct stat st;
	if (files_stat(root, path, &st, e) < 0)
		return err_code(e);
	const char *slash = strrchr(path, '/');
	const char *name = slash && slash[1] ? slash + 1 : "/";
	cJSON *j = files_stat_json(path, name, &st);
	if (!j)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	return http_reply_json(res, status, j, e);
}

/* ---- upload ---- */

struct upload {
	struct files_upload *fu;
	struct sha256_ctx sha;
	uint64_t size;
	/* Reserved on the sandbox's disk and not written yet: the declared
	 * Content-Length up front, else chunk by chunk (sandbox.h). */
	struct sandbox *sb;
	uint64_t held;
	char path[PATH_MAX];
	/* multipart/form-data (POST) */
	struct http_multipart *mp;
	int part_started, part_done;
};

static void upload_free(struct upload *u)
{
	if (!u)
		return;
	/* Counted once per upload, not per chunk: the registry takes a lock. */
	metrics_count("deskbox_upload_bytes_total", "", (double)u->size);
	http_multipart_free(u->mp);
	files_upload_free(u->fu);
	if (u->sb) {
		sandbox_disk_release(u->sb, u->held);
		sandbox_put(u->sb);
	}
	free(u);
}

static void upload_abort(void *cls)
{
	upload_free(cls);
}

static int upload_reserve(struct upload *u, uint64_t bytes, struct err *e)
{
	if (sandbox_disk_reserve(u->sb, bytes, e) < 0)
		return err_wrap(e, "upload of '%s' (existing files are unchanged)", u->path);
	u->held += bytes;
	return 0;
}

static int upload_data(struct upload *u, const char *data, size_t len, struct err *e)
{
	if (len > u->held && upload_reserve(u, len - u->held, e) < 0)
		return err_code(e);
	if (files_upload_write(u->fu, data, len, e) < 0)
		return err_code(e);
	/* Written: the sandbox's filesystem counts these bytes now. */
	sandbox_disk_release(u->sb, len);
	u->held -= len;
	sha256_update(&u->sha, len, (const uint8_t *)data);
	u->size += len;
	return 0;
}

/* The first part carrying a file is the upload; the others are ignored. */
static int multipart_part(void *cls, const char *name, const char *filename, const char *data,
			  uint64_t off, size_t size, struct err *e)
{
	struct upload *u = cls;
	if (!filename || u->part_done)
		return 0;
	if (u->part_started && off == 0 && size > 0) {
		u->part_done = 1; /* a second file part */
		return 0;
	}
	u->part_started = 1;
	if (size && upload_data(u, data, size, e) < 0)
		return err_code(e);
	return 0;
}

static int upload_write(void *cls, const char *data, size_t len, struct err *e)
{
	struct upload *u = cls;
	if (!u->mp)
		return upload_data(u, data, len, e);
	return http_multipart_feed(u->mp, data, len, e);
}

int api_files_upload_begin(struct http_request *req, struct http_body_sink *sink, struct err *e)
{
	/* A piece of a resumable upload (api_files_resume.c). */
	if (http_header(req, "Content-Range"))
		return api_files_resume_begin(req, sink, e);
	struct upload *u = calloc(1, sizeof(*u));
	if (!u)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int parents, mode, r;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if ((r = apif_query_path(req, "path", NULL, u->path, e)) < 0 ||
	    (r = apif_query_flag(req, "parents", &parents, e)) < 0 ||
	    (r = apif_query_mode(req, &mode, e)) < 0)
		goto fail;
	if (strcmp(req->method, "POST") == 0) {
		if ((r = http_multipart_new(req, multipart_part, u, &u->mp, e)) < 0) {
			if (e->kind == ERR_UNSUPPORTED)
				err_wrap(e,
					 "POST uploads (or use PUT with the raw file as the body)");
			goto fail;
		}
	}
	if ((r = apif_open_root(req, &root, &u->sb, e)) < 0)
		goto fail;
	/* The declared size is reserved before any byte is read: one that
	 * does not fit is refused at once (and a client sending Expect:
	 * 100-continue never sends the body).  A multipart body's length
	 * bounds its file's. */
	const char *cl = http_header(req, "Content-Length");
	if (cl && (r = upload_reserve(u, strtoull(cl, NULL, 10), e)) < 0)
		goto fail;
	if ((r = files_upload_begin(&root, u->path, parents, mode, &u->fu, e)) < 0)
		goto fail;
	sha256_init(&u->sha);
	sink->write = upload_write;
	sink->abort = upload_abort;
	sink->cls = u;
	return 0;
fail:
	upload_free(u);
	return r;
}

int api_files_upload(struct http_request *req, struct http_response *res, struct err *e)
{
	if (http_header(req, "Content-Range"))
		return api_files_resume(req, res, e);
	struct upload *u = req->stream;
	int r = 0;
	if (u->mp) {
		r = http_multipart_finish(u->mp, e);
		if (r == 0 && !u->part_started)
			r = err_set(e, ERR_INVALID, EINVAL,
				    "no file part in the multipart/form-data body");
	}
	/* On failure the http layer calls upload_abort(), which frees. */
	if (r == 0)
		r = files_upload_commit(u->fu, e);
	if (r < 0)
		return r;
	uint8_t digest[SHA256_DIGEST_SIZE];
	char hex[2 * SHA256_DIGEST_SIZE + 1];
	sha256_digest(&u->sha, sizeof(digest), digest);
	hex_encode(digest, sizeof(digest), hex);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", u->path);
	cJSON_AddNumberToObject(j, "size", (double)u->size);
	cJSON_AddStringToObject(j, "sha256", hex);
	upload_free(u);
	return http_reply_json(res, 201, j, e);
}

/* ---- download ---- */

struct download {
	int fd;
	uint64_t start;
	uint64_t sent; /* counted in the metrics once, at the end */
};

static long download_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct download *d = cls;
	for (;;) {
		ssize_t n = pread(d->fd, buf, max, (off_t)(d->start + pos));
		if (n < 0 && errno == EINTR)
			continue;
		/* 0: the file shrank under us; cut the connection rather than
		 * send fewer bytes than Content-Length promised. */
		if (n > 0)
			d->sent += (uint64_t)n;
		return n > 0 ? (long)n : HTTP_STREAM_ERROR;
	}
}

static void download_release(void *cls)
{
	struct download *d = cls;
	metrics_count("deskbox_download_bytes_total", "", (double)d->sent);
	close(d->fd);
	free(d);
}

/* Parses a single "bytes=A-B" / "bytes=A-" / "bytes=-N" range against
 * `size`: 1 with [*from, *to] filled, 0 to ignore the header (absent,
 * malformed or several ranges: the whole file is sent), -1 unsatisfiable. */
static int parse_range(const char *h, uint64_t size, uint64_t *from, uint64_t *to)
{
	if (!h || strncmp(h, "bytes=", 6) != 0 || strchr(h, ','))
		return 0;
	const char *p = h + 6;
	while (*p == ' ')
		p++;
	char *end;
	if (*p == '-') {
		if (p[1] < '0' || p[1] > '9')
			return 0;
		errno = 0;
		unsigned long long n = strtoull(p + 1, &end, 10);
		if (errno || *end)
			return 0;
		if (n == 0 || size == 0)
			return -1;
		*from = n >= size ? 0 : size - n;
		*to = size - 1;
		return 1;
	}
	if (*p < '0' || *p > '9')
		return 0;
	errno = 0;
	unsigned long long a = strtoull(p, &end, 10);
	if (errno || *end != '-')
		return 0;
	p = end + 1;
	unsigned long long b = UINT64_MAX;
	if (*p) {
		if (*p < '0' || *p > '9')
			return 0;
		b = strtoull(p, &end, 10);
		if (errno || *end || b < a)
			return 0;
	}
	if (a >= size)
		return -1;
	*from = a;
	*to = b >= size ? size - 1 : b;
	return 1;
}

int api_reply_file(struct http_request *req, struct http_response *res, int fd, uint64_t size,
		   const char *mime, struct err *e)
{
	_cleanup_fd_ int owned = fd;
	uint64_t from = 0, to = size ? size - 1 : 0;
	const char *rh = http_header(req, "Range");
	int rr = parse_range(rh, size, &from, &to);
	char cr[96];
	if (rr < 0) {
		/* The error answer carries the headers added before it. */
		snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
		if (http_add_header(res, "Content-Range", cr, e) < 0)
			return err_code(e);
		return err_set(e, ERR_RANGE, ERANGE, "the requested range is past the file's end");
	}
	if (http_add_header(res, "Accept-Ranges", "bytes", e) < 0)
		return err_code(e);
	if (size == 0) {
		http_reply_data(res, 200, mime, NULL, 0);
		return 0;
	}
	if (rr > 0) {
		snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, from, to, size);
		if (http_add_header(res, "Content-Range", cr, e) < 0)
			return err_code(e);
	}
	struct download *d = malloc(sizeof(*d));
	if (!d)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	d->fd = TAKE_FD(owned);
	d->start = from;
	d->sent = 0;
	http_reply_stream(res, rr > 0 ? 206 : 200, mime, to - from + 1, download_read, d,
			  download_release);
	return 0;
}

int api_files_download(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	if (apif_query_path(req, "path", NULL, path, e) < 0)
		return err_code(e);
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0)
		return err_code(e);
	struct stat st;
	_cleanup_fd_ int fd = -1;
	if (files_open_read(&root, path, &fd, &st, e) < 0)
		return err_code(e);
	return api_reply_file(req, res, TAKE_FD(fd), (uint64_t)st.st_size,
			      "application/octet-stream", e);
}

/* ---- list, stat, mkdir, move, delete ---- */

int api_files_list(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	if (apif_query_path(req, "path", FILES_HOME, path, e) < 0)
		return err_code(e);
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0)
		return err_code(e);
	cJSON *entries;
	int truncated;
	if (files_list(&root, path, &entries, &truncated, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", path);
	cJSON_AddItemToObject(j, "entries", entries);
	if (truncated)
		cJSON_AddTrueToObject(j, "truncated");
	return http_reply_json(res, 200, j, e);
}

int api_files_stat(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	if (apif_query_path(req, "path", NULL, path, e) < 0)
		return err_code(e);
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0)
		return err_code(e);
	return apif_reply_stat(res, 200, &root, path, e);
}

/* cJSON turns "\u0000" into a string that ends early: refuse it rather
 * than act on a shorter path than the client meant. */
int apif_json_body(const struct http_request *req, const char *const *fields, cJSON **out,
		   struct err *e)
{
	if (memmem(req->body, req->body_len, "\\u0000", 6))
		return err_set(e, ERR_INVALID, EINVAL, "path contains a NUL byte");
	if (http_json_body(req, out, e) < 0)
		return err_code(e);
	if (args_only(*out, NULL, fields, e) < 0) {
		cJSON_Delete(*out);
		*out = NULL;
		return err_code(e);
	}
	return 0;
}

int api_files_mkdir(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (apif_json_body(req, (const char *const[]){"path", "parents", NULL}, &body, e) < 0)
		return err_code(e);
	char path[PATH_MAX];
	int parents = 0, created = 0;
	int r = apif_body_path(body, "path", 1, path, e);
	if (r == 0)
		r = args_bool(body, "parents", 0, &parents, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0 ||
	    files_mkdir(&root, path, parents, &created, e) < 0)
		return err_code(e);
	return apif_reply_stat(res, created ? 201 : 200, &root, path, e);
}

int api_files_move(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (apif_json_body(req, (const char *const[]){"from", "to", NULL}, &body, e) < 0)
		return err_code(e);
	char from[PATH_MAX], to[PATH_MAX];
	int r = apif_body_path(body, "from", 1, from, e);
	if (r == 0)
		r = apif_body_path(body, "to", 1, to, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0 || files_move(&root, from, to, e) < 0)
		return err_code(e);
	return apif_reply_stat(res, 200, &root, to, e);
}

int api_files_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	int recursive;
	if (apif_query_path(req, "path", NULL, path, e) < 0 ||
	    apif_query_flag(req, "recursive", &recursive, e) < 0)
		return err_code(e);
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0 || files_remove(&root, path, recursive, e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}
