/* Python contexts' routes (the contexts themselves are in process_ctx.c). */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/clock.h"
#include "internal.h"
#include "common/args.h"

int api_context_run(struct http_request *req, struct http_response *res, const char *cid,
		    const char *code, const struct process_opts *o, struct err *e)
{
	if (o->stdin_len)
		return err_set(e, ERR_INVALID, EINVAL, "a context run takes no 'stdin'");
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	struct process_result pr;
	char *result;
	int restarted;
	int r = process_ctx_run(sandbox_procs(sb), cid, code, o, &pr, &result, &restarted, e);
	sandbox_put(sb);
	if (r < 0)
		return r;
	cJSON *j = api_result_json(&pr, 1);
	if (result)
		cJSON_AddStringToObject(j, "result", result);
	else
		cJSON_AddNullToObject(j, "result");
	cJSON_AddStringToObject(j, "context", cid);
	if (restarted)
		cJSON_AddBoolToObject(j, "context_restarted", 1);
	free(result);
	process_result_release(&pr);
	return http_reply_json(res, 200, j, e);
}

static cJSON *ctx_json(const struct process_ctx_info *c)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", c->id);
	cJSON_AddStringToObject(j, "language", "python");
	char t_s[CLOCK_RFC3339_MAX];
	clock_rfc3339(c->created_at_ms, t_s, sizeof(t_s));
	cJSON_AddStringToObject(j, "created_at", t_s);
	cJSON_AddNumberToObject(j, "runs", (double)c->runs);
	cJSON_AddBoolToObject(j, "busy", c->busy);
	return j;
}

int api_context_create(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	static const char *const langs[] = {"python", NULL};
	int lang;
	static const char *const fields[] = {"language", NULL};
	int r = args_only(body, NULL, fields, e);
	r = r ?: args_enum(body, "language", langs, 0, 0, &lang, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	/* The default image's /usr is the host's. */
	if (access("/usr/bin/python3", X_OK) != 0)
		return err_set(e, ERR_INVALID, ENOENT,
			       "language 'python' is not available in this sandbox");
	struct sandbox *sb;
	if (api_enter(req, 0, &sb, NULL, e) < 0)
		return err_code(e);
	struct process_ctx_info c = {0};
	r = process_ctx_create(sandbox_procs(sb), &c, e);
	api_release(sb);
	if (r < 0)
		return r;
	return http_reply_json(res, 201, ctx_json(&c), e);
}

int api_context_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	struct process_ctx_info list[64];
	size_t n = process_ctx_list(sandbox_procs(sb), list, 64);
	sandbox_put(sb);
	cJSON *j = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(j, "contexts");
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(a, ctx_json(&list[i]));
	return http_reply_json(res, 200, j, e);
}

int api_context_restart(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	int r = process_ctx_restart(sandbox_procs(sb), req->captures[1], e);
	sandbox_put(sb);
	if (r < 0)
		return r;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", req->captures[1]);
	cJSON_AddBoolToObject(j, "restarted", 1);
	return http_reply_json(res, 200, j, e);
}

int api_context_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	int r = process_ctx_delete(sandbox_procs(sb), req->captures[1], e);
	sandbox_put(sb);
	if (r < 0)
		return r;
	http_reply_empty(res, 204);
	return 0;
}
