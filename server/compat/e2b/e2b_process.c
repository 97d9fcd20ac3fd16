/* compat/e2b: envd's process.Process service over Connect JSON, onto
 * server/process.
 *
 * Start is a server stream: {"event":{"start":{"pid"}}}, then
 * {"event":{"data":{"stdout"|"stderr":base64}}} as output comes (and
 * {"event":{"keepalive":{}}} when idle), {"event":{"end":{"exitCode",
 * "exited","status"}}}, and the end-of-stream envelope.  The run is a
 * deskbox foreground run: its deadline is the Connect-Timeout-Ms header
 * (else --exec-timeout-max), and it ends when the client goes away. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "common/args.h"
#include "common/clock.h"
#include "common/text.h"
#include "server/process/process.h"
#include "server/sandbox/sandbox.h"

#define START_MAX_ARGS 256
#define START_MAX_ENV  128
#define KEEPALIVE_MS   30000

struct pstream {
	struct compat *c;
	int slot;     /* in c->procs once started, else -1 */
	char *config; /* the request's "process", until registered */
	char sandbox[40];
	struct process_run *run;
	struct http_frames out, early; /* early: output before the start event */
	int started, finished;
	long long last_ms;
};

static void event(struct http_frames *f, const char *kind, cJSON *body)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(cJSON_AddObjectToObject(j, "event"), kind, body);
	http_frames_connect(f, 0, j);
	cJSON_Delete(j);
}

static void output(void *cls, enum process_stream id, const char *data, size_t n)
{
	struct pstream *s = cls;
	char *b64 = base64_encode(data, n);
	if (!b64) {
		s->out.failed = 1;
		return;
	}
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, id == PROCESS_STDOUT ? "stdout" : "stderr", b64);
	free(b64);
	event(s->started ? &s->out : &s->early, "data", d);
}

/* Listed (List, SendSignal) while it streams. */
static void register_proc(struct pstream *s, pid_t pid)
{
	if (pid <= 0 || !s->sandbox[0])
		return;
	pthread_mutex_lock(&s->c->mu);
	for (int i = 0; i < COMPAT_MAX_PROCS; i++) {
		struct compat_proc *p = &s->c->procs[i];
		if (p->sandbox[0])
			continue;
		memcpy(p->sandbox, s->sandbox, sizeof(p->sandbox));
		p->pid = pid;
		p->config = s->config;
		s->config = NULL;
		s->slot = i;
		break;
	}
	pthread_mutex_unlock(&s->c->mu);
}

static void unregister_proc(struct pstream *s)
{
	if (s->slot < 0)
		return;
	pthread_mutex_lock(&s->c->mu);
	struct compat_proc *p = &s->c->procs[s->slot];
	free(p->config);
	*p = (struct compat_proc){0};
	pthread_mutex_unlock(&s->c->mu);
	s->slot = -1;
}

static void start_event(struct pstream *s)
{
	cJSON *st = cJSON_CreateObject();
	pid_t pid = process_pid(s->run);
	cJSON_AddNumberToObject(st, "pid", pid > 0 ? pid : 0);
	event(&s->out, "start", st);
	register_proc(s, pid);
	if (s->early.len > s->early.off)
		http_frames_add(&s->out, s->early.buf + s->early.off, s->early.len - s->early.off);
	http_frames_release(&s->early);
	s->started = 1;
}

static void end_events(struct pstream *s)
{
	struct process_result pr;
	struct err e = ERR_INIT;
	cJSON *end = cJSON_CreateObject();
	cJSON *tail = cJSON_CreateObject();
	if (process_finish(s->run, &pr, &e) == 0) {
		char status[64];
		if (pr.killed || pr.timed_out || pr.exit_code < 0)
			snprintf(status, sizeof(status), "signal: killed");
		else
			snprintf(status, sizeof(status), "exit status %d", pr.exit_code);
		cJSON_AddNumberToObject(end, "exitCode", pr.exit_code);
		cJSON_AddBoolToObject(end, "exited", !(pr.killed || pr.timed_out));
		cJSON_AddStringToObject(end, "status", status);
		if (pr.timed_out)
			cJSON_AddStringToObject(end, "error", "deadline exceeded");
		else if (pr.oom_killed)
			cJSON_AddStringToObject(end, "error", "out of memory");
		process_result_release(&pr);
		event(&s->out, "end", end);
	} else {
		cJSON_Delete(end);
		cJSON *er = cJSON_AddObjectToObject(tail, "error");
		cJSON_AddStringToObject(er, "code", "internal");
		cJSON_AddStringToObject(er, "message", e.msg);
	}
	http_frames_connect(&s->out, HTTP_CONNECT_END_STREAM, tail);
	cJSON_Delete(tail);
	s->finished = 1;
}

static long pstream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct pstream *s = cls;
	size_t n;
	while ((n = http_frames_take(&s->out, buf, max)) == 0) {
		if (s->out.failed || s->early.failed)
			return HTTP_STREAM_ERROR;
		if (s->finished)
			return HTTP_STREAM_END;
		if (!s->started && process_pid(s->run) > 0) {
			start_event(s);
			continue;
		}
		if (process_step(s->run, s->started ? 1000 : 10, output, s)) {
			if (!s->started)
				start_event(s);
			end_events(s);
		} else if (s->started && clock_mono_ms() - s->last_ms > KEEPALIVE_MS) {
			event(&s->out, "keepalive", cJSON_CreateObject());
		}
	}
	s->last_ms = clock_mono_ms();
	return (long)n;
}

static void pstream_release(void *cls)
{
	struct pstream *s = cls;
	unregister_proc(s);
	free(s->config);
	process_run_free(s->run);
	http_frames_release(&s->out);
	http_frames_release(&s->early);
	free(s);
}

/* argv/env of a Start request, pointing into its JSON. */
struct start_args {
	const char *argv[START_MAX_ARGS + 2];
	const char *env[START_MAX_ENV + 1];
	char *env_owned[START_MAX_ENV];
	size_t n_env;
	const char *cwd;
};

static void start_args_release(struct start_args *a)
{
	for (size_t i = 0; i < a->n_env; i++)
		free(a->env_owned[i]);
}

static int parse_start(const cJSON *req, struct start_args *a, struct err *e)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(req, "process");
	if (!cJSON_IsObject(p))
		return err_set(e, ERR_INVALID, EINVAL, "'process' must be an object");
	if (cJSON_GetObjectItemCaseSensitive(req, "pty"))
		return err_set(e, ERR_INVALID, ENOTSUP, "PTY processes are not offered here");
	if (args_string(p, "cmd", 4096, ARGS_REQUIRED, &a->argv[0], e) < 0)
		return err_wrap(e, "process");
	if (!a->argv[0][0])
		return err_set(e, ERR_INVALID, EINVAL, "'process.cmd' is empty");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(p, "args");
	size_t n = 1;
	const cJSON *v;
	if (args && !cJSON_IsArray(args))
		return err_set(e, ERR_INVALID, EINVAL,
			       "'process.args' must be an array of strings");
	cJSON_ArrayForEach(v, args)
	{
		if (!cJSON_IsString(v) || n > START_MAX_ARGS)
			return err_set(e, ERR_INVALID, EINVAL,
				       "'process.args' must be up to %d strings", START_MAX_ARGS);
		a->argv[n++] = v->valuestring;
	}
	const cJSON *envs = cJSON_GetObjectItemCaseSensitive(p, "envs");
	if (envs && !cJSON_IsObject(envs))
		return err_set(e, ERR_INVALID, EINVAL,
			       "'process.envs' must be an object of strings");
	cJSON_ArrayForEach(v, envs)
	{
		if (!cJSON_IsString(v) || a->n_env >= START_MAX_ENV || !v->string[0] ||
		    strchr(v->string, '='))
			return err_set(e, ERR_INVALID, EINVAL,
				       "'process.envs' must be up to %d NAME: string pairs",
				       START_MAX_ENV);
		if (asprintf(&a->env_owned[a->n_env], "%s=%s", v->string, v->valuestring) < 0)
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		a->env[a->n_env] = a->env_owned[a->n_env];
		a->n_env++;
	}
	if (args_string(p, "cwd", 4096, 0, &a->cwd, e) < 0)
		return err_wrap(e, "process");
	if (a->cwd && !a->cwd[0])
		a->cwd = NULL;
	return 0;
}

/* The deadline: Connect-Timeout-Ms, at most the server's longest run. */
static int timeout_of(struct http_request *req, const struct compat *c, int *ms, struct err *e)
{
	int64_t max = (int64_t)c->exec_timeout_max_s * 1000, t = max;
	const char *h = http_header(req, "Connect-Timeout-Ms");
	if (h && args_parse_int(h, 1, INT32_MAX, &t) < 0)
		return err_set(e, ERR_INVALID, EINVAL, "bad Connect-Timeout-Ms header");
	*ms = (int)(t < max ? t : max);
	return 0;
}

static int start_run(struct http_request *req, const cJSON *msg, struct process_run **run,
		     struct err *e)
{
	struct compat *c = req->app;
	struct start_args *a = calloc(1, sizeof(*a));
	if (!a)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	struct process_opts o = {.argv = a->argv, .env = a->env, .want_pid = 1};
	int r = parse_start(msg, a, e);
	if (r == 0)
		r = timeout_of(req, c, &o.timeout_ms, e);
	o.cwd = a->cwd;
	o.max_output = c->exec_max_output;
	struct sandbox *sb = NULL;
	if (r == 0)
		r = e2b_enter(req, &sb, e);
	if (r == 0) {
		r = process_start(sandbox_procs(sb), &o, run, e);
		sandbox_unuse(sb);
		sandbox_put(sb);
	}
	start_args_release(a);
	free(a);
	return r;
}

int e2b_process_start(struct http_request *req, struct http_response *res, struct err *e)
{
	const char *msg;
	size_t len;
	if (http_connect_unwrap(req->body, req->body_len, &msg, &len, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_ParseWithLength(msg, len);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return err_set(e, ERR_INVALID, EINVAL, "the message must be a JSON object");
	}
	struct process_run *run;
	int r = start_run(req, j, &run, e);
	char *config =
	    r == 0 ? cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "process")) : NULL;
	cJSON_Delete(j);
	if (r < 0)
		return r;
	struct pstream *s = calloc(1, sizeof(*s));
	if (!s) {
		free(config);
		process_run_free(run);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	s->c = req->app;
	s->slot = -1;
	s->config = config;
	if (sandbox_resolve(s->c->sandboxes, http_header(req, "E2b-Sandbox-Id"), s->sandbox,
			    sizeof(s->sandbox)) < 0)
		s->sandbox[0] = '\0'; /* deleted meanwhile: never listed */
	s->run = run;
	s->last_ms = clock_mono_ms();
	http_reply_stream(res, 200, "application/connect+json", HTTP_SIZE_UNKNOWN, pstream_read, s,
			  pstream_release);
	return 0;
}

int e2b_process_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	struct sandbox *sb;
	if (e2b_sandbox_of(req, &sb, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(j, "processes");
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < COMPAT_MAX_PROCS; i++) {
		const struct compat_proc *p = &c->procs[i];
		if (strcmp(p->sandbox, sandbox_id(sb)) != 0)
			continue;
		cJSON *it = cJSON_CreateObject();
		cJSON_AddNumberToObject(it, "pid", p->pid);
		cJSON *cfg = p->config ? cJSON_Parse(p->config) : NULL;
		cJSON_AddItemToObject(it, "config", cfg ? cfg : cJSON_CreateObject());
		cJSON_AddItemToArray(list, it);
	}
	pthread_mutex_unlock(&c->mu);
	sandbox_put(sb);
	return http_reply_json(res, 200, j, e);
}

static int listed(struct compat *c, const char *sandbox, int pid)
{
	int found = 0;
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < COMPAT_MAX_PROCS && !found; i++)
		found = c->procs[i].pid == pid && strcmp(c->procs[i].sandbox, sandbox) == 0;
	pthread_mutex_unlock(&c->mu);
	return found;
}

/* SendSignal {"process":{"pid"},"signal":"SIGNAL_SIGKILL"|"SIGNAL_SIGTERM"}:
 * kill(1) in the sandbox, as the program's own user, for a program
 * started here. */
int e2b_process_signal(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	static const char *const sigs[] = {"SIGNAL_SIGKILL", "SIGNAL_SIGTERM", NULL};
	int64_t pid;
	int sig;
	int r = args_int(cJSON_GetObjectItemCaseSensitive(body, "process"), "pid", 1, INT32_MAX, 0,
			 ARGS_REQUIRED, &pid, e);
	if (r == 0)
		r = args_enum(body, "signal", sigs, 0, ARGS_REQUIRED, &sig, e);
	cJSON_Delete(body);
	struct sandbox *sb;
	if (r < 0 || e2b_enter(req, &sb, e) < 0)
		return err_code(e);
	char num[24];
	snprintf(num, sizeof(num), "%lld", (long long)pid);
	const char *argv[] = {"kill", sig == 0 ? "-KILL" : "-TERM", num, NULL};
	struct process_opts o = {.argv = argv, .timeout_ms = 10000, .max_output = 4096};
	struct process_result pr;
	if (!listed(c, sandbox_id(sb), (int)pid))
		r = err_set(e, ERR_NOT_FOUND, ESRCH, "no process %lld started here",
			    (long long)pid);
	else
		r = process_run(sandbox_procs(sb), &o, &pr, e);
	sandbox_unuse(sb);
	sandbox_put(sb);
	if (r < 0)
		return r;
	int code = pr.exit_code;
	process_result_release(&pr);
	if (code != 0)
		return err_set(e, ERR_NOT_FOUND, ESRCH, "process %lld is gone", (long long)pid);
	return http_reply_json(res, 200, cJSON_CreateObject(), e);
}
