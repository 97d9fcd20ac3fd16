/* The desktop recordings routes (docs/observation.md): start, stop, list,
 * download (Range), delete and the actions sidecar.  The recordings live
 * in sandbox_recordings_dir(); the recorder reaches the mirror through the
 * host callbacks here, holding a reference to the sandbox. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "server/desktop/desktop.h"
#include "internal.h"

static int host_use(void *cls, struct capture **cap, struct err *e)
{
	return sandbox_use(cls, 1, cap, e);
}

static void host_unuse(void *cls)
{
	sandbox_unuse(cls);
}

static void host_release(void *cls)
{
	sandbox_put(cls);
}

/* The {id} sandbox (put it), its observer (put it) and recordings dir. */
static int rec_enter(struct http_request *req, struct sandbox **sb, struct desk_obs **o, char *dir,
		     size_t size, struct err *e)
{
	struct api *api = req->app;
	if (sandbox_get(api->sandboxes, req->captures[0], sb, e) < 0)
		return err_code(e);
	*o =
	    api->observers ? desk_obs_get(api->observers, sandbox_id(*sb), sandbox_dir(*sb)) : NULL;
	if (!*o) {
		sandbox_put(*sb);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	sandbox_recordings_dir(*sb, dir, size);
	return 0;
}

static void rec_leave(struct sandbox *sb, struct desk_obs *o)
{
	desk_obs_put(o);
	sandbox_put(sb);
}

static int parse_opts(const cJSON *body, struct desk_rec_opts *ro, struct err *e)
{
	static const char *const formats[] = {"mp4", "webm", NULL};
	static const char *const fields[] = {"fps", "format", NULL};
	int64_t fps;
	int fmt;
	if (args_only(body, NULL, fields, e) < 0 ||
	    args_int(body, "fps", 1, DESK_REC_MAX_FPS, 10, 0, &fps, e) < 0 ||
	    args_enum(body, "format", formats, 0, 0, &fmt, e) < 0)
		return err_code(e);
	ro->fps = (int)fps;
	ro->webm = fmt == 1;
	return 0;
}

int api_recording_start(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct desk_rec_opts ro;
	int r = parse_opts(body, &ro, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	struct sandbox *sb;
	struct capture *cap;
	if (api_enter(req, 1, &sb, &cap, e) < 0)
		return err_code(e);
	uint32_t w = capture_width(cap), h = capture_height(cap);
	api_release(sb);
	struct desk_obs *o;
	char dir[PATH_MAX];
	if (rec_enter(req, &sb, &o, dir, sizeof(dir), e) < 0)
		return err_code(e);
	/* The recorder's own reference to the sandbox, put by release(). */
	struct sandbox *held;
	if (sandbox_get(((struct api *)req->app)->sandboxes, sandbox_id(sb), &held, e) < 0) {
		rec_leave(sb, o);
		return err_code(e);
	}
	struct desk_rec_host host = {host_use, host_unuse, host_release, held};
	cJSON *j = NULL;
	r = desk_rec_start(o, dir, &ro, w, h, &host, &j, e);
	rec_leave(sb, o);
	if (r < 0)
		return r;
	return http_reply_json(res, 201, j, e);
}

/* GET …/recordings, …/{rid}/stop, …/{rid}/actions: one JSON answer. */
static int one(struct http_request *req, struct http_response *res,
	       int (*fn)(struct desk_obs *, const char *, const char *, cJSON **, struct err *),
	       struct err *e)
{
	struct sandbox *sb;
	struct desk_obs *o;
	char dir[PATH_MAX];
	if (rec_enter(req, &sb, &o, dir, sizeof(dir), e) < 0)
		return err_code(e);
	cJSON *j = NULL;
	int r = fn(o, dir, req->n_captures > 1 ? req->captures[1] : NULL, &j, e);
	rec_leave(sb, o);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, j, e);
}

static int list(struct desk_obs *o, const char *dir, const char *unused, cJSON **out, struct err *e)
{
	cJSON *arr;
	if (desk_rec_list(o, dir, &arr, e) < 0)
		return err_code(e);
	*out = cJSON_CreateObject();
	cJSON_AddItemToObject(*out, "recordings", arr);
	return 0;
}

int api_recording_list(struct http_request *req, struct http_response *res, struct err *e)
{
	return one(req, res, list, e);
}

int api_recording_stop(struct http_request *req, struct http_response *res, struct err *e)
{
	return one(req, res, desk_rec_stop, e);
}

int api_recording_actions(struct http_request *req, struct http_response *res, struct err *e)
{
	return one(req, res, desk_rec_actions, e);
}

int api_recording_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct sandbox *sb;
	struct desk_obs *o;
	char dir[PATH_MAX];
	if (rec_enter(req, &sb, &o, dir, sizeof(dir), e) < 0)
		return err_code(e);
	int fd;
	uint64_t size;
	const char *mime;
	int r = desk_rec_open(o, dir, req->captures[1], &fd, &size, &mime, e);
	rec_leave(sb, o);
	if (r < 0)
		return r;
	return api_reply_file(req, res, fd, size, mime, e);
}

int api_recording_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct sandbox *sb;
	struct desk_obs *o;
	char dir[PATH_MAX];
	if (rec_enter(req, &sb, &o, dir, sizeof(dir), e) < 0)
		return err_code(e);
	int r = desk_rec_delete(o, dir, req->captures[1], e);
	rec_leave(sb, o);
	if (r < 0)
		return r;
	http_reply_empty(res, 204);
	return 0;
}
