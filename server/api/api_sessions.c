/* Sessions (docs/terminals.md, "Sessions"): persistent shells in which
 * commands keep cwd and exported variables (server/process/process_session.c). */
#include "common/clock.h"
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"

#define SESSION_COMMAND_MAX (256u << 10)

static cJSON *session_json(const struct process_session_info *in)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", in->id);
	char t_s[CLOCK_RFC3339_MAX];
	clock_rfc3339(in->created_at_ms, t_s, sizeof(t_s));
	cJSON_AddStringToObject(j, "created_at", t_s);
	cJSON_AddNumberToObject(j, "commands", (double)in->commands);
	cJSON_AddBoolToObject(j, "busy", in->busy);
	cJSON_AddStringToObject(j, "user", in->root ? "root" : "user");
	return j;
}

int api_session_create(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct exec_args *a = calloc(1, sizeof(*a));
	if (!a) {
		cJSON_Delete(body);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	const char *cwd = NULL;
	int r = 0, root = 0;
	static const char *const fields[] = {"cwd", "env", "user", NULL};
	if (args_only(body, NULL, fields, e) < 0 ||
	    args_string(body, "cwd", 4096, 0, &cwd, e) < 0 || api_parse_env(body, a, e) < 0 ||
	    api_parse_user(body, a, &root, e) < 0)
		r = err_code(e);
	else if (cwd && cwd[0] != '/')
		r = err_set(e, ERR_INVALID, EINVAL, "field 'cwd' must be an absolute path");
	struct process_session_info in = {0};
	struct sandbox *sb;
	if (r == 0 && (r = api_enter(req, 0, &sb, NULL, e)) == 0) {
		struct process_opts o = {
		    .env = a->env_kv, .cwd = cwd ? cwd : "/workspace", .root = root};
		r = api_root_check(sb, root, e)
			?: process_session_create(sandbox_procs(sb), &o, &in, e);
		api_release(sb);
	}
	exec_args_release(a);
	free(a);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	return http_reply_json(res, 201, session_json(&in), e);
}

int api_session_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	struct process_session_info list[PROCESS_SESSION_MAX];
	size_t n = process_session_list(sandbox_procs(sb), list, PROCESS_SESSION_MAX);
	sandbox_put(sb);
	cJSON *j = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(j, "sessions");
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, session_json(&list[i]));
	return http_reply_json(res, 200, j, e);
}

int api_session_exec(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const char *command;
	double timeout_s;
	int r = 0;
	static const char *const fields[] = {"command", "timeout_s", NULL};
	if (args_only(body, NULL, fields, e) < 0 ||
	    args_string(body, "command", SESSION_COMMAND_MAX, ARGS_REQUIRED, &command, e) < 0 ||
	    args_double(body, "timeout_s", 0.001, api->exec_timeout_max_s,
			api->exec_timeout_default_s, 0, &timeout_s, e) < 0)
		r = err_code(e);
	else if (!command[0])
		r = err_set(e, ERR_INVALID, EINVAL, "field 'command' must be a non-empty string");
	struct sandbox *sb = NULL;
	if (r == 0 && sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		r = err_code(e);
	struct process_result pr;
	int restarted = 0;
	if (r == 0) {
		struct process_opts o = {.timeout_ms = (int)(timeout_s * 1000.0),
					 .max_output = api->exec_max_output};
		r = process_session_exec(sandbox_procs(sb), req->captures[1], command, &o, &pr,
					 &restarted, e);
		sandbox_put(sb);
	}
	cJSON_Delete(body);
	if (r < 0)
		return r;
	cJSON *j = api_result_json(&pr, 1);
	cJSON_AddBoolToObject(j, "session_restarted", restarted);
	process_result_release(&pr);
	return http_reply_json(res, 200, j, e);
}

int api_session_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	int r = process_session_delete(sandbox_procs(sb), req->captures[1], e);
	sandbox_put(sb);
	if (r < 0)
		return r;
	http_reply_empty(res, 204);
	return 0;
}
