#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/text.h"
#include "api.h"
#include "args.h"
#include "process.h"

#define EXEC_MAX_ARGS  4096
#define EXEC_MAX_ENV   256
#define EXEC_MAX_STDIN (1u << 20)

/* argv and env as C arrays pointing into the request's JSON. */
struct exec_args {
	const char *argv[EXEC_MAX_ARGS + 1];
	const char *env_kv[EXEC_MAX_ENV + 1];
	char *env_owned[EXEC_MAX_ENV];
	size_t n_env;
};

static void exec_args_release(struct exec_args *a)
{
	for (size_t i = 0; i < a->n_env; i++)
		free(a->env_owned[i]);
	a->n_env = 0;
}

static int parse_argv(const cJSON *body, struct exec_args *a, struct err *e)
{
	const cJSON *argv = cJSON_GetObjectItemCaseSensitive(body, "argv");
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(body, "command");
	if (argv && cmd)
		return err_set(e, ERR_INVALID, EINVAL, "give either 'argv' or 'command', not both");
	if (cmd) {
		if (!cJSON_IsString(cmd) || !cmd->valuestring[0])
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'command' must be a non-empty string");
		a->argv[0] = "/bin/sh";
		a->argv[1] = "-c";
		a->argv[2] = cmd->valuestring;
		a->argv[3] = NULL;
		return 0;
	}
	if (!cJSON_IsArray(argv) || cJSON_GetArraySize(argv) == 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'argv' must be a non-empty array of strings (or give "
			       "'command')");
	size_t n = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, argv)
	{
		if (n >= EXEC_MAX_ARGS)
			return err_set(e, ERR_INVALID, E2BIG, "more than %d arguments",
				       EXEC_MAX_ARGS);
		if (!cJSON_IsString(it))
			return err_set(e, ERR_INVALID, EINVAL, "argv[%zu] must be a string", n);
		a->argv[n++] = it->valuestring;
	}
	if (!a->argv[0][0])
		return err_set(e, ERR_INVALID, EINVAL, "argv[0] must not be empty");
	a->argv[n] = NULL;
	return 0;
}

static int parse_env(const cJSON *body, struct exec_args *a, struct err *e)
{
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(body, "env");
	a->env_kv[0] = NULL;
	if (!env || cJSON_IsNull(env))
		return 0;
	if (!cJSON_IsObject(env))
		return err_set(e, ERR_INVALID, EINVAL, "field 'env' must be an object of strings");
	const cJSON *it;
	cJSON_ArrayForEach(it, env)
	{
		if (a->n_env >= EXEC_MAX_ENV)
			return err_set(e, ERR_INVALID, E2BIG, "more than %d env variables",
				       EXEC_MAX_ENV);
		if (!cJSON_IsString(it))
			return err_set(e, ERR_INVALID, EINVAL, "env '%.64s' must be a string",
				       it->string);
		if (!it->string[0] || strchr(it->string, '='))
			return err_set(e, ERR_INVALID, EINVAL, "bad env variable name '%.64s'",
				       it->string);
		char *kv;
		if (asprintf(&kv, "%s=%s", it->string, it->valuestring) < 0)
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		a->env_owned[a->n_env] = kv;
		a->env_kv[a->n_env++] = kv;
	}
	a->env_kv[a->n_env] = NULL;
	return 0;
}

/* Adds `name` (and `name`_b64 when the bytes are not UTF-8, with the text
 * made valid by U+FFFD replacement) to `j`. */
static void add_output(cJSON *j, const char *name, const char *data, size_t len)
{
	if (utf8_valid(data, len)) {
		cJSON_AddStringToObject(j, name, data);
		return;
	}
	char *clean = utf8_sanitize(data, len);
	char *b64 = base64_encode(data, len);
	char key[32];
	snprintf(key, sizeof(key), "%s_b64", name);
	cJSON_AddStringToObject(j, name, clean ? clean : "");
	cJSON_AddStringToObject(j, key, b64 ? b64 : "");
	free(clean);
	free(b64);
}

int api_process_exec(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct exec_args *a = calloc(1, sizeof(*a));
	if (!a) {
		cJSON_Delete(body);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	struct process_opts o = {.max_output = api->exec_max_output};
	const char *cwd, *stdin_data;
	int background;
	double timeout_s;
	int r = 0;
	if (parse_argv(body, a, e) < 0 || parse_env(body, a, e) < 0 ||
	    args_string(body, "cwd", 4096, 0, &cwd, e) < 0 ||
	    args_string(body, "stdin", EXEC_MAX_STDIN, 0, &stdin_data, e) < 0 ||
	    args_bool(body, "background", 0, &background, e) < 0 ||
	    args_double(body, "timeout_s", 0.001, api->exec_timeout_max_s,
			api->exec_timeout_default_s, 0, &timeout_s, e) < 0)
		r = err_code(e);
	if (r == 0 && cwd && cwd[0] != '/')
		r = err_set(e, ERR_INVALID, EINVAL, "field 'cwd' must be an absolute path");
	if (r < 0) {
		exec_args_release(a);
		free(a);
		cJSON_Delete(body);
		return r;
	}
	o.argv = a->argv;
	o.env = a->env_kv;
	o.cwd = cwd;
	o.stdin_data = stdin_data;
	o.stdin_len = stdin_data ? strlen(stdin_data) : 0;
	o.timeout_ms = (int)(timeout_s * 1000.0);

	struct sandbox *sb;
	struct capture *cap;
	cJSON *j = NULL;
	if (api_enter(req, 0, &sb, &cap, e) < 0) {
		r = err_code(e);
	} else if (background) {
		pid_t pid;
		r = process_spawn(sb, &o, &pid, e);
		api_release(sb);
		if (r == 0) {
			j = cJSON_CreateObject();
			cJSON_AddNumberToObject(j, "pid", pid);
		}
	} else {
		struct process_result pr;
		r = process_run(sb, &o, &pr, e);
		api_release(sb);
		if (r == 0) {
			j = cJSON_CreateObject();
			cJSON_AddNumberToObject(j, "exit_code", pr.exit_code);
			add_output(j, "stdout", pr.out, pr.out_len);
			add_output(j, "stderr", pr.err, pr.err_len);
			cJSON_AddBoolToObject(j, "timed_out", pr.timed_out);
			cJSON_AddBoolToObject(j, "truncated", pr.out_truncated || pr.err_truncated);
			cJSON_AddNumberToObject(j, "duration_ms", (double)pr.duration_ms);
			process_result_release(&pr);
		}
	}
	exec_args_release(a);
	free(a);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, j, e);
}
