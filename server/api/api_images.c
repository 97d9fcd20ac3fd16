/* api_images: /v1/images (docs/images.md): list, import an OCI image
 * (synchronous, 201), build the Debian desktop image (background, 202 and
 * a status to GET), get and delete. */
#include "common/text.h"
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/args.h"
#include "server/http/http.h"
#include "server/sandbox/sandbox.h"

int api_image_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "images", sandbox_images_json(api->sandboxes));
	return http_reply_json(res, 200, j, e);
}

/* Every field of the body must be one of these. */
static const char *const image_fields[] = {"name",  "oci_layout", "oci_archive", "ref",
					   "build", "mirror",	  "dockerfile",	 "context",
					   "args",  "timeout_s",  NULL};

#define BUILD_ARGS_MAX 64

/* "args": {"K": "V"} as "K=V" strings (NULL-terminated, *out freed with
 * free_args), NULL without it. */
static int build_args(const cJSON *body, char ***out, struct err *e)
{
	*out = NULL;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(body, "args");
	if (!a)
		return 0;
	if (!cJSON_IsObject(a) || cJSON_GetArraySize(a) > BUILD_ARGS_MAX)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'args' must be an object of at most %d strings",
			       BUILD_ARGS_MAX);
	char **v = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(*v));
	size_t n = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, a)
	{
		const char *k = it->string;
		size_t kl =
		    strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
		if (!v || !cJSON_IsString(it) || !k[0] || k[kl] || kl > 128 ||
		    (k[0] >= '0' && k[0] <= '9') || strlen(it->valuestring) > 4096 ||
		    asprintf(&v[n], "%s=%s", k, it->valuestring) < 0) {
			int oom = !v;
			for (size_t i = 0; v && i < n; i++)
				free(v[i]);
			free(v);
			return !oom
				   ? err_set(e, ERR_INVALID, EINVAL,
					     "field 'args': '%.64s' must be a variable name with a "
					     "string "
					     "value (at most 4096 bytes)",
					     k)
				   : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		}
		n++;
	}
	*out = v;
	return 0;
}

static void free_args(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* {"name","dockerfile","context"?,"args"?}: a build from a Dockerfile (202). */
static int create_from_dockerfile(struct api *api, const cJSON *body, const char *name,
				  struct http_response *res, struct err *e)
{
	const char *text = NULL, *context = NULL;
	if (args_string(body, "dockerfile", DOCKERFILE_MAX_BYTES, ARGS_REQUIRED, &text, e) < 0 ||
	    args_string(body, "context", 4000, 0, &context, e) < 0)
		return err_code(e);
	static const char *const others[] = {"oci_layout", "oci_archive", "ref", "build", "mirror"};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		if (cJSON_GetObjectItemCaseSensitive(body, others[i]))
			return err_set(e, ERR_INVALID, EINVAL, "'dockerfile' takes no '%s'",
				       others[i]);
	if (context && context[0] != '/')
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'context' must be an absolute host path (a directory or a "
			       "tar); or upload one with PUT /v1/images/%s/context",
			       name);
	char **args;
	int64_t timeout_s;
	if (args_int(body, "timeout_s", 1, IMAGE_BUILD_TIMEOUT_S, IMAGE_BUILD_TIMEOUT_S, 0,
		     &timeout_s, e) < 0 ||
	    build_args(body, &args, e) < 0)
		return err_code(e);
	int r = sandbox_image_dockerfile(api->sandboxes, name, text, strlen(text), context,
					 (const char *const *)args, (unsigned)timeout_s, e);
	free_args(args);
	if (r < 0)
		return r;
	cJSON *j;
	if (sandbox_image_get(api->sandboxes, name, &j, e) < 0)
		return err_code(e);
	char log[200];
	snprintf(log, sizeof(log), "/v1/images/%s/build", name);
	cJSON_AddStringToObject(j, "log", log);
	return http_reply_json(res, 202, j, e);
}

static int create_image(struct api *api, const cJSON *body, struct http_response *res,
			struct err *e)
{
	struct image_import im = {0};
	const char *build = NULL, *mirror = NULL;
	if (args_only(body, NULL, image_fields, e) < 0 ||
	    args_string(body, "name", IMAGE_NAME_MAX, ARGS_REQUIRED, &im.name, e) < 0 ||
	    args_string(body, "oci_layout", 4000, 0, &im.layout, e) < 0 ||
	    args_string(body, "oci_archive", 4000, 0, &im.archive, e) < 0 ||
	    args_string(body, "ref", 128, 0, &im.ref, e) < 0 ||
	    args_string(body, "build", 32, 0, &build, e) < 0 ||
	    args_string(body, "mirror", 400, 0, &mirror, e) < 0)
		return err_code(e);
	if (cJSON_GetObjectItemCaseSensitive(body, "dockerfile"))
		return create_from_dockerfile(api, body, im.name, res, e);
	if (cJSON_GetObjectItemCaseSensitive(body, "context") ||
	    cJSON_GetObjectItemCaseSensitive(body, "args") ||
	    cJSON_GetObjectItemCaseSensitive(body, "timeout_s"))
		return err_set(e, ERR_INVALID, EINVAL,
			       "'context', 'args' and 'timeout_s' go with 'dockerfile'");
	if (build) {
		if (strcmp(build, "debian") != 0)
			return err_set(e, ERR_INVALID, EINVAL, "field 'build' must be \"debian\"");
		if (im.layout || im.archive || im.ref)
			return err_set(e, ERR_INVALID, EINVAL,
				       "'build' takes no 'oci_layout', 'oci_archive' or 'ref'");
		if (sandbox_image_build(api->sandboxes, im.name, mirror, e) < 0)
			return err_code(e);
		cJSON *j;
		if (sandbox_image_get(api->sandboxes, im.name, &j, e) < 0)
			return err_code(e);
		return http_reply_json(res, 202, j, e);
	}
	if (mirror)
		return err_set(e, ERR_INVALID, EINVAL, "'mirror' goes with 'build'");
	cJSON *j;
	if (sandbox_image_import(api->sandboxes, &im, &j, e) < 0)
		return err_code(e);
	return http_reply_json(res, 201, j, e);
}

int api_image_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	int r = cJSON_IsObject(body)
		    ? create_image(api, body, res, e)
		    : err_set(e, ERR_INVALID, EINVAL, "the body must be a JSON object");
	cJSON_Delete(body);
	return r;
}

int api_image_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *j;
	if (sandbox_image_get(api->sandboxes, req->captures[0], &j, e) < 0)
		return err_code(e);
	return http_reply_json(res, 200, j, e);
}

int api_image_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	if (sandbox_image_delete(api->sandboxes, req->captures[0], e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}

/* ---- PUT /v1/images/{name}/context: a build context tar ---- */

struct context_upload {
	struct api *api;
	char name[IMAGE_NAME_MAX + 1], tmp[4096];
	int fd;
	uint64_t size;
};

static void context_abort(void *cls)
{
	struct context_upload *u = cls;
	if (u->fd >= 0)
		close(u->fd);
	unlink(u->tmp);
	free(u);
}

static int context_write(void *cls, const char *data, size_t len, struct err *e)
{
	struct context_upload *u = cls;
	if (u->size + len > IMAGE_CONTEXT_MAX)
		return err_set(e, ERR_TOO_LARGE, EFBIG, "a build context is at most %llu MiB",
			       IMAGE_CONTEXT_MAX >> 20);
	for (size_t off = 0; off < len;) {
		ssize_t n = write(u->fd, data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return err_sys(e, ERR_NO_SPACE, n < 0 ? errno : EIO, "storing the context");
		off += (size_t)n;
	}
	u->size += len;
	return 0;
}

int api_image_context_begin(struct http_request *req, struct http_body_sink *sink, struct err *e)
{
	struct api *api = req->app;
	const char *cl = http_header(req, "Content-Length");
	if (cl && strtoull(cl, NULL, 10) > IMAGE_CONTEXT_MAX)
		return err_set(e, ERR_TOO_LARGE, EFBIG, "a build context is at most %llu MiB",
			       IMAGE_CONTEXT_MAX >> 20);
	struct context_upload *u = calloc(1, sizeof(*u));
	if (!u)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	u->api = api;
	snprintf(u->name, sizeof(u->name), "%s", req->captures[0]);
	if (sandbox_image_context_begin(api->sandboxes, req->captures[0], u->tmp, sizeof(u->tmp),
					&u->fd, e) < 0) {
		free(u);
		return err_code(e);
	}
	sink->write = context_write;
	sink->abort = context_abort;
	sink->cls = u;
	return 0;
}

int api_image_context(struct http_request *req, struct http_response *res, struct err *e)
{
	struct context_upload *u = req->stream;
	int r = fsync(u->fd) < 0 ? err_sys(e, ERR_INTERNAL, errno, "storing the context") : 0;
	close(u->fd);
	u->fd = -1;
	r = r ?: sandbox_image_context_commit(u->api->sandboxes, u->name, u->tmp, e);
	if (r < 0)
		return r; /* context_abort() frees */
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", u->name);
	cJSON_AddNumberToObject(j, "context_bytes", (double)u->size);
	free(u);
	return http_reply_json(res, 201, j, e);
}

/* ---- GET /v1/images/{name}/build: the build log, followed to its end ---- */

struct log_reader {
	struct api *api;
	char name[IMAGE_NAME_MAX + 1];
	int fd;
};

static long log_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct log_reader *l = cls;
	for (;;) {
		/* Building first: the log is whole before the status changes. */
		int building = sandbox_image_building(l->api->sandboxes, l->name);
		ssize_t n = pread(l->fd, buf, max, (off_t)pos);
		if (n > 0)
			return (long)n;
		if (n < 0)
			return HTTP_STREAM_ERROR;
		if (!building)
			return HTTP_STREAM_END;
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

static void log_release(void *cls)
{
	struct log_reader *l = cls;
	close(l->fd);
	free(l);
}

int api_image_build_log(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct log_reader *l = calloc(1, sizeof(*l));
	if (!l)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	l->api = api;
	snprintf(l->name, sizeof(l->name), "%s", req->captures[0]);
	if (sandbox_image_build_log(api->sandboxes, req->captures[0], &l->fd, e) < 0) {
		free(l);
		return err_code(e);
	}
	http_reply_stream(res, 200, "text/plain; charset=utf-8", HTTP_SIZE_UNKNOWN, log_read, l,
			  log_release);
	return 0;
}
