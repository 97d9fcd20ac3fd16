/* api_lifecycle: a sandbox's deadline, live changes, pause and resume
 * (docs/lifecycle.md). */
#include <errno.h>
#include <stdlib.h>

#include "api.h"
#include "common/args.h"
#include "common/clock.h"
#include "common/log.h"

#define FORK_COUNT_MAX 32 /* forks of one request */

/* Answers `sb` (a reference this consumes) with the time the operation took. */
static int reply_sandbox(struct http_response *res, struct sandbox *sb, uint64_t t0, struct err *e)
{
	cJSON *j = api_sandbox_view(sb);
	sandbox_put(sb);
	cJSON_AddNumberToObject(j, "duration_ms", (double)(clock_mono_ns() - t0) / 1e6);
	return http_reply_json(res, 200, j, e);
}

int api_sandbox_timeout(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	static const char *const fields[] = {"timeout_s", NULL};
	int64_t t;
	int r = args_only(body, NULL, fields, e);
	r = r ?: args_int(body, "timeout_s", 0, SANDBOX_TIMEOUT_MAX, 0, ARGS_REQUIRED, &t, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	struct sandbox *sb;
	uint64_t t0 = clock_mono_ns();
	if (sandbox_set_timeout(api->sandboxes, req->captures[0], t, &sb, e) < 0)
		return err_code(e);
	return reply_sandbox(res, sb, t0, e);
}

int api_sandbox_patch(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct sandbox_patch p;
	int r = sandbox_patch_parse(body, &p, e);
	cJSON_Delete(body);
	struct sandbox *sb;
	uint64_t t0 = clock_mono_ns();
	if (r == 0)
		r = sandbox_patch_apply(api->sandboxes, req->captures[0], &p, &sb, e);
	sandbox_patch_release(&p);
	if (r < 0)
		return r;
	return reply_sandbox(res, sb, t0, e);
}

int api_sandbox_pause(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	static const char *const fields[] = {"memory", NULL};
	int memory = 0;
	int r = args_only(body, NULL, fields, e);
	r = r ?: args_bool(body, "memory", 0, &memory, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	struct sandbox *sb;
	uint64_t t0 = clock_mono_ns();
	if ((memory ? sandbox_pause_memory : sandbox_pause)(api->sandboxes, req->captures[0], &sb,
							    e) < 0)
		return err_code(e);
	return reply_sandbox(res, sb, t0, e);
}

int api_sandbox_resume(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	uint64_t t0 = clock_mono_ns();
	if (sandbox_resume(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	return reply_sandbox(res, sb, t0, e);
}

int api_checkpoint_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const char *name;
	cJSON *j = NULL;
	uint64_t t0 = clock_mono_ns();
	static const char *const fields[] = {"name", "memory", NULL};
	int memory = 0;
	int r = args_only(body, NULL, fields, e);
	r = r ?: args_string(body, "name", 64, ARGS_REQUIRED, &name, e);
	r = r ?: args_bool(body, "memory", 0, &memory, e);
	if (r == 0 && memory)
		r = sandbox_checkpoint_memory(api->sandboxes, req->captures[0], e);
	else if (r == 0)
		r = sandbox_checkpoint_create(api->sandboxes, req->captures[0], name, &j, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	cJSON_AddNumberToObject(j, "duration_ms", (double)(clock_mono_ns() - t0) / 1e6);
	return http_reply_json(res, 201, j, e);
}

int api_checkpoint_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *arr;
	if (sandbox_checkpoints_list(api->sandboxes, req->captures[0], &arr, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "checkpoints", arr);
	return http_reply_json(res, 200, j, e);
}

int api_checkpoint_restore(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	uint64_t t0 = clock_mono_ns();
	if (sandbox_checkpoint_restore(api->sandboxes, req->captures[0], req->captures[1], &sb, e) <
	    0)
		return err_code(e);
	return reply_sandbox(res, sb, t0, e);
}

int api_checkpoint_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	if (sandbox_checkpoint_delete(api->sandboxes, req->captures[0], req->captures[1], e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}

/* `count` forks (1-32): all made, or none left.  Their views in `arr`. */
static int fork_many(struct api *api, const char *id, const char *cp, int64_t count, cJSON *arr,
		     struct err *e)
{
	for (int64_t i = 0; i < count; i++) {
		struct sandbox *sb = NULL;
		if (sandbox_fork(api->sandboxes, id, cp, NULL, &sb, e) == 0) {
			cJSON_AddItemToArray(arr, api_sandbox_view(sb));
			sandbox_put(sb);
			continue;
		}
		/* Those made go again: the answer is the failure alone. */
		const cJSON *v;
		cJSON_ArrayForEach(v, arr)
		{
			const cJSON *fid = cJSON_GetObjectItemCaseSensitive(v, "id");
			struct err de = ERR_INIT;
			if (cJSON_IsString(fid) && sandbox_delete(api->sandboxes, fid->valuestring, &de) < 0)
				log_msg(LOG_LEVEL_WARN, "fork %s: %s", fid->valuestring, de.msg);
		}
		return err_wrap(e, "fork %lld of %lld", (long long)i + 1, (long long)count);
	}
	return 0;
}

int api_sandbox_fork(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const char *name, *sbname;
	int64_t count = 0;
	struct sandbox *sb = NULL;
	uint64_t t0 = clock_mono_ns();
	static const char *const fields[] = {"checkpoint", "name", "count", NULL};
	int r = args_only(body, NULL, fields, e);
	r = r ?: args_string(body, "checkpoint", 64, 0, &name, e);
	r = r ?: args_string(body, "name", SANDBOX_NAME_MAX, 0, &sbname, e);
	r = r ?: args_int(body, "count", 1, FORK_COUNT_MAX, 0, 0, &count, e);
	if (r == 0 && count > 1 && sbname)
		r = err_set(e, ERR_INVALID, EINVAL, "'name' names one sandbox: not with 'count' %lld",
			    (long long)count);
	cJSON *arr = count ? cJSON_CreateArray() : NULL;
	if (r == 0 && count)
		r = fork_many(api, req->captures[0], name, count, arr, e);
	else if (r == 0)
		r = sandbox_fork(api->sandboxes, req->captures[0], name, sbname, &sb, e);
	cJSON_Delete(body);
	if (r < 0) {
		cJSON_Delete(arr);
		return r;
	}
	cJSON *j = arr ? cJSON_CreateObject() : api_sandbox_view(sb);
	if (arr)
		cJSON_AddItemToObject(j, "sandboxes", arr);
	else
		sandbox_put(sb);
	cJSON_AddNumberToObject(j, "duration_ms", (double)(clock_mono_ns() - t0) / 1e6);
	return http_reply_json(res, 201, j, e);
}
