/* compat/e2b: envd's /files route.  GET ?path= answers the file's bytes;
 * POST ?path= with multipart/form-data writes one file per part (field
 * "file", the part's filename the target path when there is no ?path=,
 * as the SDK's multi-file write sends), answering
 * [{"name","type":"file","path"}]. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "server/files/files.h"
#include "server/sandbox/sandbox.h"

struct fread {
	int fd;
	uint64_t size;
};

static long fread_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct fread *f = cls;
	if (pos >= f->size)
		return HTTP_STREAM_END;
	ssize_t n = pread(f->fd, buf, max, (off_t)pos);
	return n > 0 ? (long)n : HTTP_STREAM_ERROR;
}

static void fread_release(void *cls)
{
	struct fread *f = cls;
	close(f->fd);
	free(f);
}

static int query_path(struct http_request *req, char *out, struct err *e)
{
	size_t len;
	const char *v = http_query_n(req, "path", &len);
	if (!v)
		return 1;
	if (files_path_normalize(v, len, out, PATH_MAX, e) < 0)
		return err_wrap(e, "query parameter 'path'");
	return 0;
}

int e2b_files_get(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	if (e2b_files_auth(req, "read", e) < 0)
		return err_code(e);
	int r = query_path(req, path, e);
	if (r > 0)
		return err_set(e, ERR_INVALID, EINVAL, "missing query parameter 'path'");
	struct sandbox *sb;
	if (r < 0 || e2b_sandbox_of(req, &sb, e) < 0)
		return err_code(e);
	struct files_root root = {.fd = -1};
	r = sandbox_open_root(sb, &root, e);
	sandbox_put(sb);
	int fd;
	struct stat st;
	if (r == 0)
		r = files_open_read(&root, path, &fd, &st, e);
	if (root.fd >= 0)
		close(root.fd);
	if (r < 0)
		return r;
	struct fread *f = malloc(sizeof(*f));
	if (!f) {
		close(fd);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	*f = (struct fread){fd, (uint64_t)st.st_size};
	http_reply_stream(res, 200, "application/octet-stream", f->size, fread_read, f,
			  fread_release);
	return 0;
}

#define MAX_PARTS 64

struct upload {
	struct sandbox *sb;
	struct files_root root;
	struct http_multipart *mp;
	int has_path;
	char path[PATH_MAX];
	struct files_upload *fu; /* the part being written */
	char cur[PATH_MAX];
	char cur_name[PATH_MAX]; /* its filename */
	uint64_t cur_len;	 /* bytes written into it */
	cJSON *done;		 /* the answer's entries */
};

static int commit_part(struct upload *u, struct err *e)
{
	if (!u->fu)
		return 0;
	int r = files_upload_commit(u->fu, e);
	files_upload_free(u->fu);
	u->fu = NULL;
	if (r < 0)
		return r;
	if (cJSON_GetArraySize(u->done) >= MAX_PARTS)
		return err_set(e, ERR_INVALID, E2BIG, "more than %d files in one request",
			       MAX_PARTS);
	cJSON *j = cJSON_CreateObject();
	const char *slash = strrchr(u->cur, '/');
	cJSON_AddStringToObject(j, "name", slash ? slash + 1 : u->cur);
	cJSON_AddStringToObject(j, "type", "file");
	cJSON_AddStringToObject(j, "path", u->cur);
	cJSON_AddItemToArray(u->done, j);
	return 0;
}

static int begin_part(struct upload *u, const char *filename, struct err *e)
{
	if (commit_part(u, e) < 0)
		return err_code(e);
	if (u->has_path)
		memcpy(u->cur, u->path, sizeof(u->cur));
	else if (files_path_normalize(filename, strlen(filename), u->cur, PATH_MAX, e) < 0)
		return err_wrap(e, "a part's filename");
	return files_upload_begin(&u->root, u->cur, 1, -1, &u->fu, e);
}

static int on_part(void *cls, const char *name, const char *filename, const char *data,
		   uint64_t off, size_t size, struct err *e)
{
	struct upload *u = cls;
	if (!filename)
		return 0;
	/* A part's first call may carry no bytes yet: a new part is one whose
	 * offset is back at 0 after bytes, or whose filename changed. */
	if (off == 0 && (!u->fu || u->cur_len || strcmp(filename, u->cur_name) != 0)) {
		if (begin_part(u, filename, e) < 0)
			return err_code(e);
		snprintf(u->cur_name, sizeof(u->cur_name), "%s", filename);
		u->cur_len = 0;
	}
	if (!size)
		return 0;
	if (sandbox_disk_reserve(u->sb, size, e) < 0)
		return err_code(e);
	int r = files_upload_write(u->fu, data, size, e);
	sandbox_disk_release(u->sb, size);
	u->cur_len += size;
	return r;
}

static void upload_free(void *cls)
{
	struct upload *u = cls;
	http_multipart_free(u->mp);
	files_upload_free(u->fu);
	if (u->root.fd >= 0)
		close(u->root.fd);
	if (u->sb)
		sandbox_put(u->sb);
	cJSON_Delete(u->done);
	free(u);
}

static int upload_write(void *cls, const char *data, size_t len, struct err *e)
{
	struct upload *u = cls;
	return http_multipart_feed(u->mp, data, len, e);
}

int e2b_files_post_begin(struct http_request *req, struct http_body_sink *sink, struct err *e)
{
	if (e2b_files_auth(req, "write", e) < 0)
		return err_code(e);
	struct upload *u = calloc(1, sizeof(*u));
	if (!u)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	u->root.fd = -1;
	u->done = cJSON_CreateArray();
	int r = query_path(req, u->path, e);
	u->has_path = r == 0;
	if (r >= 0)
		r = e2b_sandbox_of(req, &u->sb, e);
	if (r >= 0)
		r = sandbox_open_root(u->sb, &u->root, e);
	if (r >= 0)
		r = http_multipart_new(req, on_part, u, &u->mp, e);
	if (r < 0) {
		upload_free(u);
		return err_code(e);
	}
	*sink = (struct http_body_sink){upload_write, upload_free, u};
	return 0;
}

int e2b_files_post(struct http_request *req, struct http_response *res, struct err *e)
{
	struct upload *u = req->stream;
	int r = http_multipart_finish(u->mp, e);
	if (r == 0)
		r = commit_part(u, e);
	if (r == 0 && cJSON_GetArraySize(u->done) == 0)
		r = err_set(e, ERR_INVALID, EINVAL, "no file part in the form");
	if (r < 0)
		return r; /* the http layer aborts the sink: upload_free() */
	cJSON *j = u->done;
	u->done = NULL;
	upload_free(u);
	return http_reply_json(res, 200, j, e);
}
