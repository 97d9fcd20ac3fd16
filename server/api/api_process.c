/* The process routes: exec, code_run (optionally streamed as Server-Sent
 * Events, optionally in a Python context), background status, kill and
 * logs.  Contexts' own routes are in api_process_ctx.c. */
#include "common/clock.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"
#include "common/args.h"
#include "server/files/files.h"

void exec_args_release(struct exec_args *a)
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

int api_parse_env(const cJSON *body, struct exec_args *a, struct err *e)
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
			return err_set(e, ERR_INVALID, EINVAL, "env '%.*s' must be a string",
				       UTF8_CUT(it->string, 64));
		if (!it->string[0] || strchr(it->string, '='))
			return err_set(e, ERR_INVALID, EINVAL, "bad env variable name '%.*s'",
				       UTF8_CUT(it->string, 64));
		char *kv;
		if (asprintf(&kv, "%s=%s", it->string, it->valuestring) < 0)
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		a->env_owned[a->n_env] = kv;
		a->env_kv[a->n_env++] = kv;
	}
	a->env_kv[a->n_env] = NULL;
	return 0;
}

/* Adds K=V unless the request set K. */
static int env_default(struct exec_args *a, const char *kv, struct err *e)
{
	size_t kl = strcspn(kv, "=");
	for (size_t i = 0; i < a->n_env; i++)
		if (strncmp(a->env_kv[i], kv, kl + 1) == 0)
			return 0;
	if (a->n_env >= EXEC_MAX_ENV + EXEC_EXTRA_ENV)
		return err_set(e, ERR_INVALID, E2BIG, "too many env variables");
	char *copy = strdup(kv);
	if (!copy)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	a->env_owned[a->n_env] = copy;
	a->env_kv[a->n_env++] = copy;
	a->env_kv[a->n_env] = NULL;
	return 0;
}

/* What exec and code_run share: env, cwd, stdin, timeout_s, user. */
static const char *const common_fields[] = {"env", "cwd", "stdin", "timeout_s", "user", NULL};

int api_parse_user(const cJSON *body, struct exec_args *a, int *root, struct err *e)
{
	static const char *const users[] = {"user", "root", NULL};
	int which;
	if (args_enum(body, "user", users, 0, 0, &which, e) < 0)
		return err_code(e);
	*root = which == 1;
	if (!*root)
		return 0;
	/* Root's own home, as a login would give it (the request's env wins). */
	return env_default(a, "HOME=/root", e) ?: env_default(a, "USER=root", e);
}

int api_root_check(struct sandbox *sb, int root, struct err *e)
{
	return root ? sandbox_root_check(sb, e) : 0;
}

static int parse_common(struct http_request *req, const cJSON *body, struct exec_args *a,
			struct process_opts *o, int background, struct err *e)
{
	struct api *api = req->app;
	const char *cwd, *stdin_data = NULL;
	double timeout_s;
	int root;
	/* Background runs have no timeout unless one is asked for. */
	double def = background ? 0 : api->exec_timeout_default_s;
	/* "stdin": true keeps a background run's stdin open for
	 * POST …/process/{pid}/stdin; a string is fed to it whole. */
	const cJSON *sj = cJSON_GetObjectItemCaseSensitive(body, "stdin");
	int keep_stdin = cJSON_IsTrue(sj);
	if (cJSON_IsBool(sj) && keep_stdin && !background)
		return err_set(e, ERR_INVALID, EINVAL,
			       "\"stdin\": true needs \"background\": true (give the input as a "
			       "string otherwise)");
	if (api_parse_env(body, a, e) < 0 || api_parse_user(body, a, &root, e) < 0 ||
	    args_string(body, "cwd", 4096, 0, &cwd, e) < 0 ||
	    (!cJSON_IsBool(sj) &&
	     args_string(body, "stdin", EXEC_MAX_STDIN, 0, &stdin_data, e) < 0) ||
	    args_double(body, "timeout_s", 0.001, api->exec_timeout_max_s, def, 0, &timeout_s, e) <
		0)
		return err_code(e);
	if (cwd && cwd[0] != '/')
		return err_set(e, ERR_INVALID, EINVAL, "field 'cwd' must be an absolute path");
	memset(o, 0, sizeof(*o));
	o->max_output = api->exec_max_output;
	o->argv = a->argv;
	o->env = a->env_kv;
	o->cwd = cwd;
	o->stdin_data = stdin_data;
	o->stdin_len = stdin_data ? strlen(stdin_data) : 0;
	o->keep_stdin_open = keep_stdin;
	o->timeout_ms = (int)(timeout_s * 1000.0);
	o->root = root;
	return 0;
}

int api_wants_stream(struct http_request *req)
{
	const char *s = http_query(req, "stream");
	if (s && (strcmp(s, "1") == 0 || strcmp(s, "true") == 0))
		return 1;
	const char *accept = http_header(req, "Accept");
	return accept && strstr(accept, "text/event-stream") != NULL;
}

/* code_run's piece of code: its interpreter is looked up in the sandbox's
 * own tree once it is entered (a stored image has its own /usr). */
struct code_src {
	int lang;
	const char *code;
	const char **argv; /* filled in: the run's argv */
};

static int code_interpreter(struct sandbox *sb, const struct code_src *c, struct err *e)
{
	struct files_root root;
	if (sandbox_open_root(sb, &root, e) < 0)
		return err_code(e);
	int r = process_code_argv(c->lang, c->code, root.fd, c->argv, e);
	close(root.fd);
	return r;
}

/* Runs `o` in the sandbox of the request: streamed, in the background, or
 * to the end (for code_run, `code`'s interpreter with it).  The sandbox is
 * "in use" only while the run starts: a delete kills the run rather than
 * waiting for it. */
static int run_request(struct http_request *req, struct http_response *res,
		       const struct process_opts *o, int background, const struct code_src *code,
		       struct err *e)
{
	struct sandbox *sb;
	if (api_enter(req, 0, &sb, NULL, e) < 0)
		return err_code(e);
	if (api_root_check(sb, o->root, e) < 0 || (code && code_interpreter(sb, code, e) < 0)) {
		api_release(sb);
		return err_code(e);
	}
	int r;
	cJSON *j = NULL;
	if (background) {
		pid_t pid;
		r = process_spawn(sandbox_procs(sb), o, &pid, e);
		api_release(sb);
		if (r == 0) {
			j = cJSON_CreateObject();
			cJSON_AddNumberToObject(j, "pid", pid);
		}
	} else {
		struct process_run *run;
		r = process_start(sandbox_procs(sb), o, &run, e);
		api_release(sb);
		if (r < 0)
			return r;
		if (api_wants_stream(req))
			return api_stream_run(res, run, e);
		while (!process_step(run, 1000, NULL, NULL))
			;
		struct process_result pr;
		r = process_finish(run, &pr, e);
		process_run_free(run);
		if (r == 0) {
			j = api_result_json(&pr, 1);
			process_result_release(&pr);
		}
	}
	if (r < 0)
		return r;
	return http_reply_json(res, 200, j, e);
}

int api_process_exec(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct exec_args *a = calloc(1, sizeof(*a));
	if (!a) {
		cJSON_Delete(body);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	struct process_opts o;
	int background;
	int r = 0;
	static const char *const fields[] = {"argv", "command", "background", NULL};
	if (args_only2(body, NULL, fields, common_fields, e) < 0 || parse_argv(body, a, e) < 0 ||
	    args_bool(body, "background", 0, &background, e) < 0 ||
	    parse_common(req, body, a, &o, background, e) < 0)
		r = err_code(e);
	if (r == 0)
		r = run_request(req, res, &o, background, NULL, e);
	exec_args_release(a);
	free(a);
	cJSON_Delete(body);
	return r;
}

int api_process_code_run(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct exec_args *a = calloc(1, sizeof(*a));
	if (!a) {
		cJSON_Delete(body);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	struct process_opts o;
	const char *code, *ctx;
	int lang, background;
	int r = 0;
	static const char *const fields[] = {"code", "language", "context", "background", NULL};
	if (args_only2(body, NULL, fields, common_fields, e) < 0 ||
	    args_string(body, "code", CODE_MAX, ARGS_REQUIRED, &code, e) < 0 ||
	    args_enum(body, "language", process_languages, 0, 0, &lang, e) < 0 ||
	    args_string(body, "context", 64, 0, &ctx, e) < 0 ||
	    args_bool(body, "background", 0, &background, e) < 0 ||
	    parse_common(req, body, a, &o, background, e) < 0)
		r = err_code(e);
	if (r == 0 && ctx) {
		if (lang != 0)
			r = err_set(e, ERR_INVALID, EINVAL, "contexts run python only");
		else if (o.root)
			r = err_set(
			    e, ERR_INVALID, EINVAL,
			    "contexts run as the user: 'context' and \"user\": \"root\" do not "
			    "go together");
		else if (background)
			r = err_set(e, ERR_INVALID, EINVAL,
				    "'context' and 'background' do not go together");
		else
			r = api_context_run(req, res, ctx, code, &o, e);
		goto out;
	}
	if (r == 0 && lang == 0)
		/* Output reaches streams and logs as it is printed. */
		r = env_default(a, "PYTHONUNBUFFERED=1", e);
	struct code_src src = {lang, code, a->argv};
	if (r == 0)
		r = run_request(req, res, &o, background, &src, e);
out:
	exec_args_release(a);
	free(a);
	cJSON_Delete(body);
	return r;
}

/* The {pid} capture (the second one). */
static int parse_pid(struct http_request *req, pid_t *pid, struct err *e)
{
	int64_t v;
	if (req->n_captures < 2 || args_parse_int(req->captures[1], 1, 4194304, &v) < 0)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no process '%.*s'",
			       UTF8_CUT(req->n_captures < 2 ? "" : req->captures[1], 32));
	*pid = (pid_t)v;
	return 0;
}

static cJSON *info_json(const struct process_info *in)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", in->pid);
	cJSON_AddStringToObject(j, "status", in->running ? "running" : "exited");
	if (in->running)
		cJSON_AddNullToObject(j, "exit_code");
	else
		cJSON_AddNumberToObject(j, "exit_code", in->exit_code);
	cJSON_AddBoolToObject(j, "timed_out", in->timed_out);
	cJSON_AddBoolToObject(j, "oom_killed", in->oom_killed);
	cJSON_AddBoolToObject(j, "killed", in->killed);
	char t_s[CLOCK_RFC3339_MAX];
	clock_rfc3339(in->started_at_ms, t_s, sizeof(t_s));
	cJSON_AddStringToObject(j, "started_at", t_s);
	cJSON_AddNumberToObject(j, "duration_ms", (double)in->duration_ms);
	return j;
}

/* Looks the sandbox up (it need not be running: records outlive it). */
static int bg_lookup(struct http_request *req, struct sandbox **sb, pid_t *pid, struct err *e)
{
	struct api *api = req->app;
	if (sandbox_get(api->sandboxes, req->captures[0], sb, e) < 0)
		return err_code(e);
	if (parse_pid(req, pid, e) < 0) {
		sandbox_put(*sb);
		return err_code(e);
	}
	return 0;
}

/* Status and kill: `op` on the run, its info as the answer. */
static int bg_answer(struct http_request *req, struct http_response *res,
		     int (*op)(struct process_table *, pid_t, struct process_info *, struct err *),
		     struct err *e)
{
	struct sandbox *sb;
	pid_t pid;
	if (bg_lookup(req, &sb, &pid, e) < 0)
		return err_code(e);
	struct process_info in;
	int r = op(sandbox_procs(sb), pid, &in, e);
	sandbox_put(sb);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, info_json(&in), e);
}

int api_process_status(struct http_request *req, struct http_response *res, struct err *e)
{
	return bg_answer(req, res, process_bg_info, e);
}

int api_process_kill(struct http_request *req, struct http_response *res, struct err *e)
{
	return bg_answer(req, res, process_bg_kill, e);
}

int api_process_logs(struct http_request *req, struct http_response *res, struct err *e)
{
	struct sandbox *sb;
	pid_t pid;
	if (bg_lookup(req, &sb, &pid, e) < 0)
		return err_code(e);
	struct process_info in;
	struct process_logs l;
	int r = process_bg_logs(sandbox_procs(sb), pid, &l, &in, e);
	sandbox_put(sb);
	if (r < 0)
		return r;
	cJSON *j = info_json(&in);
	api_add_output(j, "stdout", l.out, l.out_len);
	api_add_output(j, "stderr", l.err, l.err_len);
	cJSON_AddNumberToObject(j, "stdout_bytes", (double)l.out_total);
	cJSON_AddNumberToObject(j, "stderr_bytes", (double)l.err_total);
	cJSON_AddBoolToObject(j, "truncated", l.out_total > l.out_len || l.err_total > l.err_len);
	process_logs_release(&l);
	return http_reply_json(res, 200, j, e);
}

/* POST …/process/{pid}/stdin: the raw body goes to the run's stdin;
 * ?close=1 then closes it (EOF), an empty body with ?close=1 only closes. */
int api_process_stdin(struct http_request *req, struct http_response *res, struct err *e)
{
	struct sandbox *sb;
	pid_t pid;
	int64_t close_after, timeout_ms;
	if (http_query_int(req, "close", 0, 1, 0, 0, &close_after, e) < 0 ||
	    http_query_int(req, "timeout_ms", 1, 600000, 30000, 0, &timeout_ms, e) < 0)
		return err_code(e);
	if (bg_lookup(req, &sb, &pid, e) < 0)
		return err_code(e);
	size_t written = 0;
	int r = process_bg_stdin(sandbox_procs(sb), pid, req->body, req->body_len, (int)close_after,
				 (int)timeout_ms, &written, e);
	sandbox_put(sb);
	if (r < 0)
		return r;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", pid);
	cJSON_AddNumberToObject(j, "written", (double)written);
	cJSON_AddBoolToObject(j, "closed", close_after != 0);
	return http_reply_json(res, 200, j, e);
}
