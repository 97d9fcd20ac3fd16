/* The toolbox's bulk file transfers as Daytona's SDK writes and reads them:
 * POST files/bulk-upload, multipart/form-data (chunked), parts
 * "files[i].path" (the destination, a text field) then "files[i].file" (its
 * bytes; the part's filename is only the base name); POST
 * files/bulk-download {"paths":[...]}, answered as multipart/form-data with
 * one part per path: name="file" and filename = the path exactly as asked,
 * or name="error" with the daemon's JSON error. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text.h"
#include "internal.h"
#include "server/files/files.h"

#define DT_DOWNLOAD_MAX 256

/* ---- upload ---- */

struct dt_upload {
	struct compat_upload up; /* first: the sandbox, its root, the parser, the file */
	char part[64];		 /* the name of the part being read */
	char dest[PATH_MAX];	 /* the last ".path" field's value */
	size_t dest_len;
	cJSON *done; /* [{"path","bytes"}] */
	uint64_t bytes;
};

static void upload_free_extra(struct compat_upload *up)
{
	cJSON_Delete(((struct dt_upload *)up)->done);
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && strcmp(s + n - t, tail) == 0;
}

/* The file being written is complete: renamed into place. */
static int upload_commit(struct dt_upload *u, struct err *e)
{
	if (!u->up.fu)
		return 0;
	if (compat_upload_commit(&u->up, e) < 0)
		return err_code(e);
	cJSON *f = cJSON_CreateObject();
	cJSON_AddStringToObject(f, "path", u->dest);
	cJSON_AddNumberToObject(f, "bytes", (double)u->bytes);
	cJSON_AddItemToArray(u->done, f);
	return 0;
}

/* A new part named `name` begins. */
static int part_begin(struct dt_upload *u, const char *name, struct err *e)
{
	if (upload_commit(u, e) < 0)
		return err_code(e);
	snprintf(u->part, sizeof(u->part), "%s", name);
	if (ends_with(name, ".path")) {
		u->dest_len = 0;
		u->dest[0] = '\0';
		return 0;
	}
	if (!ends_with(name, ".file"))
		return 0;
	if (!u->dest[0])
		return err_set(e, ERR_INVALID, EINVAL, "part '%.*s' has no '.path' before it",
			       UTF8_CUT(name, 40));
	char canon[PATH_MAX];
	const char *d = u->dest;
	char joined[PATH_MAX];
	if (d[0] != '/' &&
	    snprintf(joined, sizeof(joined), "/workspace/%s", d) < (int)sizeof(joined))
		d = joined;
	if (files_path_normalize(d, strlen(d), canon, sizeof(canon), e) < 0)
		return err_code(e);
	snprintf(u->dest, sizeof(u->dest), "%s", canon);
	u->bytes = 0;
	return compat_upload_open(&u->up, canon, -1, e);
}

static int upload_part(void *cls, const char *name, const char *filename, const char *data,
		       uint64_t off, size_t size, struct err *e)
{
	struct dt_upload *u = cls;
	if (!name)
		return 0;
	if (strcmp(name, u->part) != 0 && part_begin(u, name, e) < 0)
		return err_code(e);
	if (ends_with(name, ".path")) {
		if (u->dest_len + size >= sizeof(u->dest))
			return err_set(e, ERR_INVALID, ENAMETOOLONG, "destination path too long");
		memcpy(u->dest + u->dest_len, data, size);
		u->dest_len += size;
		u->dest[u->dest_len] = '\0';
		return 0;
	}
	if (compat_upload_write(&u->up, data, size, e) < 0)
		return err_wrap(e, "upload of '%s'", u->dest);
	u->bytes += size;
	return 0;
}

int dt_upload_begin(struct http_request *req, struct http_body_sink *sink, struct err *e)
{
	struct dt_upload *u = calloc(1, sizeof(*u));
	if (!u)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	u->up.free_extra = upload_free_extra;
	u->done = cJSON_CreateArray();
	return compat_upload_begin(req, &u->up, upload_part, sink, e);
}

int dt_upload(struct http_request *req, struct http_response *res, struct err *e)
{
	struct dt_upload *u = req->stream;
	/* On failure the http layer calls upload_abort(), which frees. */
	if (http_multipart_finish(u->up.mp, e) < 0 || upload_commit(u, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "files", u->done);
	u->done = NULL;
	compat_upload_free(&u->up);
	return http_reply_json(res, 200, j, e);
}

/* ---- download ---- */

struct dl_entry {
	char *path; /* as asked */
	int fd;	    /* -1: an error part */
	uint64_t size;
	char *error; /* the error part's JSON */
};

struct dl {
	struct dl_entry ents[DT_DOWNLOAD_MAX];
	size_t n, at; /* entries; the one being sent */
	int phase;    /* 0 head, 1 bytes, 2 tail; n: the closing line */
	char buf[PATH_MAX + 512];
	size_t buf_len, buf_off;
	uint64_t sent; /* of the entry's bytes */
	char boundary[40];
	char type[80]; /* the answer's Content-Type, which must outlive the handler */
};

static void dl_free(void *cls)
{
	struct dl *d = cls;
	for (size_t i = 0; i < d->n; i++) {
		free(d->ents[i].path);
		free(d->ents[i].error);
		if (d->ents[i].fd >= 0)
			close(d->ents[i].fd);
	}
	free(d);
}

/* A quoted-string for Content-Disposition (busboy undoes the escapes). */
static void quote(const char *s, char *out, size_t size)
{
	size_t o = 0;
	for (; *s && o + 3 < size; s++) {
		if (*s == '"' || *s == '\\')
			out[o++] = '\\';
		out[o++] = *s == '\r' || *s == '\n' ? ' ' : *s;
	}
	out[o] = '\0';
}

static void dl_head(struct dl *d)
{
	struct dl_entry *en = &d->ents[d->at];
	char q[PATH_MAX + 16];
	quote(en->path, q, sizeof(q));
	int n;
	if (en->fd >= 0)
		n = snprintf(d->buf, sizeof(d->buf),
			     "--%s\r\nContent-Disposition: form-data; name=\"file\"; "
			     "filename=\"%s\"\r\nContent-Type: application/octet-stream\r\n"
			     "Content-Length: %llu\r\n\r\n",
			     d->boundary, q, (unsigned long long)en->size);
	else
		n = snprintf(d->buf, sizeof(d->buf),
			     "--%s\r\nContent-Disposition: form-data; name=\"error\"; "
			     "filename=\"%s\"\r\nContent-Type: application/json\r\n\r\n%s",
			     d->boundary, q, en->error);
	d->buf_len = n > 0 && (size_t)n < sizeof(d->buf) ? (size_t)n : 0;
	d->buf_off = 0;
	d->sent = 0;
}

static long dl_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct dl *d = cls;
	for (;;) {
		if (d->buf_off < d->buf_len) {
			size_t n = d->buf_len - d->buf_off < max ? d->buf_len - d->buf_off : max;
			memcpy(buf, d->buf + d->buf_off, n);
			d->buf_off += n;
			return (long)n;
		}
		if (d->at >= d->n) {
			if (d->phase == 3)
				return HTTP_STREAM_END;
			d->phase = 3;
			d->buf_len =
			    (size_t)snprintf(d->buf, sizeof(d->buf), "--%s--\r\n", d->boundary);
			d->buf_off = 0;
			continue;
		}
		struct dl_entry *en = &d->ents[d->at];
		if (d->phase == 0) {
			dl_head(d);
			d->phase = en->fd >= 0 ? 1 : 2;
			continue;
		}
		if (d->phase == 1 && d->sent < en->size) {
			size_t want = en->size - d->sent < max ? (size_t)(en->size - d->sent) : max;
			ssize_t n = pread(en->fd, buf, want, (off_t)d->sent);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) /* the file shrank: cut rather than lie */
				return HTTP_STREAM_ERROR;
			d->sent += (uint64_t)n;
			return (long)n;
		}
		d->buf_len = (size_t)snprintf(d->buf, sizeof(d->buf), "\r\n");
		d->buf_off = 0;
		d->at++;
		d->phase = 0;
	}
}

/* Opens the file `path` asks for, or makes its error part. */
static int dl_open(struct dl_entry *en, const struct files_root *root, const char *path)
{
	struct err fe = ERR_INIT;
	char canon[PATH_MAX], joined[PATH_MAX];
	struct stat st;
	en->fd = -1;
	en->path = strdup(path);
	const char *p = path;
	if (p[0] != '/' &&
	    snprintf(joined, sizeof(joined), "/workspace/%s", p) < (int)sizeof(joined))
		p = joined;
	int r = files_path_normalize(p, strlen(p), canon, sizeof(canon), &fe);
	if (r == 0)
		r = files_open_read(root, canon, &en->fd, &st, &fe);
	if (r == 0 && !S_ISREG(st.st_mode)) {
		close(en->fd);
		en->fd = -1;
		r = err_set(&fe, ERR_INVALID, EISDIR, "'%s' is not a file", canon);
	}
	if (r == 0) {
		en->size = (uint64_t)st.st_size;
		return en->path ? 0 : -ENOMEM;
	}
	int status = fe.kind == ERR_NOT_FOUND ? 404 : fe.kind == ERR_FORBIDDEN ? 403 : 400;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "message", fe.msg);
	cJSON_AddNumberToObject(j, "statusCode", status);
	cJSON_AddStringToObject(j, "code", status == 404 ? "FILE_NOT_FOUND" : "BAD_REQUEST");
	en->error = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return en->path && en->error ? 0 : -ENOMEM;
}

static int dl_paths(struct dl *d, const cJSON *paths, const struct files_root *root, struct err *e)
{
	if (!cJSON_IsArray(paths) || cJSON_GetArraySize(paths) > DT_DOWNLOAD_MAX)
		return err_set(e, ERR_INVALID, EINVAL,
			       "'paths' must be an array of at most %d paths", DT_DOWNLOAD_MAX);
	const cJSON *it;
	cJSON_ArrayForEach(it, paths)
	{
		if (!cJSON_IsString(it) || !it->valuestring[0] ||
		    strlen(it->valuestring) >= PATH_MAX)
			return err_set(e, ERR_INVALID, EINVAL, "'paths' must hold paths");
		if (dl_open(&d->ents[d->n++], root, it->valuestring) < 0)
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

int dt_download(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct dl *d = calloc(1, sizeof(*d));
	struct sandbox *sb = NULL;
	struct files_root root = {.fd = -1};
	int r = d ? sandbox_get(api->sandboxes, req->captures[0], &sb, e)
		  : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r == 0) {
		r = sandbox_open_root(sb, &root, e);
		sandbox_put(sb);
	}
	if (r == 0)
		r = dl_paths(d, cJSON_GetObjectItemCaseSensitive(body, "paths"), &root, e);
	cJSON_Delete(body);
	if (root.fd >= 0)
		close(root.fd);
	if (r < 0) {
		if (d)
			dl_free(d);
		return r;
	}
	snprintf(d->boundary, sizeof(d->boundary), "deskbox-%08lx%08lx", random(), random());
	snprintf(d->type, sizeof(d->type), "multipart/form-data; boundary=%s", d->boundary);
	http_reply_stream(res, 200, d->type, HTTP_SIZE_UNKNOWN, dl_read, d, dl_free);
	return 0;
}
