/* compat/e2b: envd's process.Process service over Connect JSON, onto
 * server/process.
 *
 * Start runs the program as a deskbox background run (or, with "pty", on a
 * deskbox terminal), so that it outlives its stream as in E2B's envd: its
 * deadline is the Connect-Timeout-Ms header (none without it, at most
 * --exec-timeout-max), and Connect, SendInput, CloseStdin, Update and
 * SendSignal reach it later by pid or tag.  The stream itself is
 * e2b_pstream.c; the programs started here are listed in compat's table
 * (c->procs) until they end. */
#include <errno.h>
#include <nettle/base64.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "common/args.h"
#include "server/process/process.h"
#include "server/sandbox/sandbox.h"

#define START_MAX_ARGS 256
#define START_MAX_ENV  128
#define INPUT_WAIT_MS  10000
#define PTY_SIZE_MAX   1000

static int decode_b64(const char *s, char **out, size_t *len, struct err *e);

/* ---- the table of programs started here ---- */

/* Whether the program of slot `p` still runs (the caller holds c->mu). */
static int proc_alive(struct sandbox *sb, const struct compat_proc *p)
{
	struct err e = ERR_INIT;
	if (p->term[0]) {
		struct process_term_info ti;
		return process_term_get(sandbox_procs(sb), p->term, &ti, &e) == 0 && ti.running;
	}
	struct process_info in;
	return process_bg_info(sandbox_procs(sb), p->pid, &in, &e) == 0 && in.running;
}

static void proc_drop_locked(struct sandbox *sb, struct compat_proc *p)
{
	if (p->term[0]) {
		struct err e = ERR_INIT;
		struct process_term_info ti;
		process_term_delete(sandbox_procs(sb), p->term, &ti, &e);
	}
	free(p->config);
	*p = (struct compat_proc){0};
}

/* Forgets the programs of `sb` that ended. */
static void proc_prune(struct compat *c, struct sandbox *sb)
{
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < COMPAT_MAX_PROCS; i++) {
		struct compat_proc *p = &c->procs[i];
		if (strcmp(p->sandbox, sandbox_id(sb)) == 0 && !proc_alive(sb, p))
			proc_drop_locked(sb, p);
	}
	pthread_mutex_unlock(&c->mu);
}

static int proc_add(struct compat *c, struct sandbox *sb, const struct compat_proc *in,
		    struct err *e)
{
	proc_prune(c, sb);
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < COMPAT_MAX_PROCS; i++) {
		if (c->procs[i].sandbox[0])
			continue;
		c->procs[i] = *in;
		snprintf(c->procs[i].sandbox, sizeof(c->procs[i].sandbox), "%s", sandbox_id(sb));
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	pthread_mutex_unlock(&c->mu);
	return err_set(e, ERR_LIMIT, EAGAIN, "%d processes run already", COMPAT_MAX_PROCS);
}

/* The program a ProcessSelector ({"pid"} or {"tag"}) names: its pid and
 * terminal (term: room for compat_proc.term). */
static int proc_find(struct compat *c, struct sandbox *sb, const cJSON *msg, pid_t *pid,
		     char *term, struct err *e)
{
	const cJSON *sel = cJSON_GetObjectItemCaseSensitive(msg, "process");
	static const char *const fields[] = {"pid", "tag", NULL};
	const char *tag = NULL;
	int64_t want = 0;
	if (!cJSON_IsObject(sel))
		return err_set(e, ERR_INVALID, EINVAL, "'process' must be an object");
	if (args_only(sel, "process", fields, e) < 0 ||
	    args_int(sel, "pid", 1, INT32_MAX, 0, 0, &want, e) < 0 ||
	    args_string(sel, "tag", 63, 0, &tag, e) < 0)
		return err_code(e);
	if (!want && !tag)
		return err_set(e, ERR_INVALID, EINVAL, "'process' names neither a pid nor a tag");
	int found = 0;
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < COMPAT_MAX_PROCS && !found; i++) {
		const struct compat_proc *p = &c->procs[i];
		if (strcmp(p->sandbox, sandbox_id(sb)) != 0 ||
		    (want ? p->pid != want : strcmp(p->tag, tag) != 0))
			continue;
		found = 1;
		*pid = p->pid;
		memcpy(term, p->term, sizeof(p->term));
	}
	pthread_mutex_unlock(&c->mu);
	if (!found && tag)
		return err_set(e, ERR_NOT_FOUND, ESRCH, "no process tagged '%s'", tag);
	if (!found)
		return err_set(e, ERR_NOT_FOUND, ESRCH, "no process %lld started here",
			       (long long)want);
	return 0;
}

/* ---- Start ---- */

/* argv/env of a Start request, pointing into its JSON. */
struct start_args {
	const char *argv[START_MAX_ARGS + 2];
	const char *env[START_MAX_ENV + 1];
	char *env_owned[START_MAX_ENV];
	size_t n_env;
	struct process_opts o;
	const char *tag;
};

static void start_args_release(struct start_args *a)
{
	for (size_t i = 0; i < a->n_env; i++)
		free(a->env_owned[i]);
}

static int parse_envs(const cJSON *p, struct start_args *a, struct err *e)
{
	const cJSON *envs = cJSON_GetObjectItemCaseSensitive(p, "envs"), *v;
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
	return 0;
}

static int parse_process(const cJSON *p, struct start_args *a, struct err *e)
{
	static const char *const fields[] = {"cmd", "args", "envs", "cwd", NULL};
	if (!cJSON_IsObject(p))
		return err_set(e, ERR_INVALID, EINVAL, "'process' must be an object");
	if (args_only(p, "process", fields, e) < 0 ||
	    args_string(p, "cmd", 4096, ARGS_REQUIRED, &a->argv[0], e) < 0 ||
	    args_string(p, "cwd", 4096, 0, &a->o.cwd, e) < 0)
		return err_code(e);
	if (!a->argv[0][0])
		return err_set(e, ERR_INVALID, EINVAL, "'process.cmd' is empty");
	if (a->o.cwd && !a->o.cwd[0])
		a->o.cwd = NULL;
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(p, "args"), *v;
	size_t n = 1;
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
	return parse_envs(p, a, e);
}

static int parse_pty(const cJSON *req, struct start_args *a, struct err *e)
{
	const cJSON *pty = cJSON_GetObjectItemCaseSensitive(req, "pty");
	if (!pty || cJSON_IsNull(pty))
		return 0;
	const cJSON *size = cJSON_GetObjectItemCaseSensitive(pty, "size");
	int64_t cols, rows;
	if (!cJSON_IsObject(pty) || (size && !cJSON_IsObject(size)))
		return err_set(e, ERR_INVALID, EINVAL, "'pty' must be {\"size\":{\"cols\",\"rows\"}}");
	if (args_int(size, "cols", 1, PTY_SIZE_MAX, 80, 0, &cols, e) < 0 ||
	    args_int(size, "rows", 1, PTY_SIZE_MAX, 24, 0, &rows, e) < 0)
		return err_wrap(e, "pty.size");
	a->o.pty = 1;
	a->o.cols = (unsigned short)cols;
	a->o.rows = (unsigned short)rows;
	return 0;
}

static int parse_start(const cJSON *req, struct start_args *a, struct err *e)
{
	static const char *const fields[] = {"process", "pty", "tag", "stdin", NULL};
	int stdin_on = 1;
	if (args_only(req, NULL, fields, e) < 0 ||
	    parse_process(cJSON_GetObjectItemCaseSensitive(req, "process"), a, e) < 0 ||
	    parse_pty(req, a, e) < 0 || args_string(req, "tag", 63, 0, &a->tag, e) < 0 ||
	    args_bool(req, "stdin", 1, &stdin_on, e) < 0)
		return err_code(e);
	a->o.argv = a->argv;
	a->o.env = a->env;
	/* envd: without "stdin" the pipe is kept, with false it is /dev/null */
	a->o.keep_stdin_open = stdin_on && !a->o.pty;
	a->o.keep_orphans = 1; /* envd: `cmd &`, `x11vnc -bg` outlive cmd */
	return 0;
}

/* The user the SDK asks for (its `user` option): Authorization: Basic
 * base64("<user>:").  "root" is the container's root (the sandbox must
 * allow it), "user" or none the sandbox's user; another is refused. */
static int user_of(struct http_request *req, struct start_args *a, struct err *e)
{
	const char *h = http_header(req, "Authorization");
	if (!h || strncasecmp(h, "Basic ", 6) != 0)
		return 0;
	char *dec;
	size_t len;
	if (decode_b64(h + 6, &dec, &len, e) < 0)
		return err_set(e, ERR_INVALID, EINVAL, "the Authorization header is not Basic base64");
	dec[len] = '\0';
	char *colon = strchr(dec, ':');
	if (colon)
		*colon = '\0';
	int r = 0;
	if (strcmp(dec, "root") == 0)
		a->o.root = 1;
	else if (dec[0] && strcmp(dec, "user") != 0)
		r = err_set(e, ERR_INVALID, EINVAL,
			    "user '%.64s' does not exist here: the sandbox has 'user' and 'root'", dec);
	free(dec);
	if (r < 0 || !a->o.root)
		return r;
	/* HOME and USER as root's, unless the request sets them */
	static const char *const root_env[] = {"HOME=/root", "USER=root", "LOGNAME=root"};
	for (size_t i = 0; i < 3 && a->n_env < START_MAX_ENV; i++) {
		size_t k = strcspn(root_env[i], "=") + 1, j = 0;
		while (j < a->n_env && strncmp(a->env[j], root_env[i], k) != 0)
			j++;
		if (j == a->n_env)
			a->env[a->n_env++] = root_env[i];
	}
	return 0;
}

/* The deadline: Connect-Timeout-Ms, at most the server's longest run;
 * none without the header (envd's programs live until they end). */
static int timeout_of(struct http_request *req, const struct compat *c, int *ms, struct err *e)
{
	int64_t max = (int64_t)c->exec_timeout_max_s * 1000, t = 0;
	const char *h = http_header(req, "Connect-Timeout-Ms");
	if (h && args_parse_int(h, 1, INT32_MAX, &t) < 0)
		return err_set(e, ERR_INVALID, EINVAL, "bad Connect-Timeout-Ms header");
	*ms = (int)(t < max ? t : max);
	return 0;
}

/* Starts the program of `a` in `sb` (entered): fills p->pid, p->term. */
static int start_in(struct sandbox *sb, struct start_args *a, struct compat_proc *p,
		    struct err *e)
{
	if (!a->o.pty) {
		pid_t pid;
		int r = process_spawn(sandbox_procs(sb), &a->o, &pid, e);
		p->pid = (int)pid;
		return r;
	}
	struct process_term_info ti;
	if (process_term_create(sandbox_procs(sb), &a->o, &ti, e) < 0)
		return err_code(e);
	p->pid = (int)ti.pid;
	snprintf(p->term, sizeof(p->term), "%s", ti.id);
	return 0;
}

static int start_request(struct http_request *req, struct http_response *res, struct err *e);

/* Start: its errors go in the stream's end (e2b_pstream_error). */
int e2b_process_start(struct http_request *req, struct http_response *res, struct err *e)
{
	if (start_request(req, res, e) == 0)
		return 0;
	struct err why = *e;
	*e = (struct err)ERR_INIT;
	return e2b_pstream_error(res, &why, e);
}

static int start_request(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	cJSON *j;
	if (e2b_connect_message(req, &j, e) < 0)
		return err_code(e);
	struct start_args *a = calloc(1, sizeof(*a));
	struct compat_proc p = {0};
	struct sandbox *sb = NULL;
	int r = a ? parse_start(j, a, e) : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r == 0)
		r = timeout_of(req, c, &a->o.timeout_ms, e);
	if (r == 0)
		r = user_of(req, a, e);
	if (r == 0 && a->tag)
		snprintf(p.tag, sizeof(p.tag), "%s", a->tag);
	if (r == 0)
		a->o.max_output = c->exec_max_output;
	if (r == 0 && (r = e2b_enter(req, &sb, e)) == 0) {
		r = a->o.root ? sandbox_root_check(sb, e) : 0;
		if (r == 0)
			r = start_in(sb, a, &p, e);
		sandbox_unuse(sb);
	}
	if (r == 0) {
		p.config = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "process"));
		if ((r = proc_add(c, sb, &p, e)) < 0)
			free(p.config);
	}
	if (a)
		start_args_release(a);
	free(a);
	cJSON_Delete(j);
	if (r < 0) {
		if (sb)
			sandbox_put(sb);
		return r;
	}
	return e2b_pstream_reply(res, sb, p.pid, p.term[0] ? p.term : NULL, 0, e);
}

/* ---- Connect, List ---- */

static int connect_request(struct http_request *req, struct http_response *res, struct err *e);

/* Connect: its errors go in the stream's end too. */
int e2b_process_connect(struct http_request *req, struct http_response *res, struct err *e)
{
	if (connect_request(req, res, e) == 0)
		return 0;
	struct err why = *e;
	*e = (struct err)ERR_INIT;
	return e2b_pstream_error(res, &why, e);
}

static int connect_request(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	cJSON *j;
	if (e2b_connect_message(req, &j, e) < 0)
		return err_code(e);
	struct sandbox *sb;
	pid_t pid = 0;
	char term[sizeof(((struct compat_proc *)0)->term)];
	static const char *const fields[] = {"process", NULL};
	int r = args_only(j, NULL, fields, e);
	if (r == 0 && (r = e2b_sandbox_of(req, &sb, e)) == 0)
		proc_prune(c, sb); /* as envd: an ended program is not found */
	int found = r == 0 ? proc_find(c, sb, j, &pid, term, e) : -1;
	cJSON_Delete(j);
	if (r < 0)
		return r;
	if (found < 0) {
		sandbox_put(sb);
		return found;
	}
	return e2b_pstream_reply(res, sb, pid, term[0] ? term : NULL, 1, e);
}

int e2b_process_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	struct sandbox *sb;
	if (e2b_sandbox_of(req, &sb, e) < 0)
		return err_code(e);
	proc_prune(c, sb);
	cJSON *j = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(j, "processes");
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < COMPAT_MAX_PROCS; i++) {
		const struct compat_proc *p = &c->procs[i];
		if (strcmp(p->sandbox, sandbox_id(sb)) != 0)
			continue;
		cJSON *it = cJSON_CreateObject();
		cJSON_AddNumberToObject(it, "pid", p->pid);
		if (p->tag[0])
			cJSON_AddStringToObject(it, "tag", p->tag);
		cJSON *cfg = p->config ? cJSON_Parse(p->config) : NULL;
		cJSON_AddItemToObject(it, "config", cfg ? cfg : cJSON_CreateObject());
		cJSON_AddItemToArray(list, it);
	}
	pthread_mutex_unlock(&c->mu);
	sandbox_put(sb);
	return http_reply_json(res, 200, j, e);
}

/* ---- unary calls on a program started here ---- */

/* The request's message, its sandbox (entered) and the program it names. */
struct target {
	cJSON *msg;
	struct sandbox *sb;
	pid_t pid;
	char term[sizeof(((struct compat_proc *)0)->term)];
};

static int target_open(struct http_request *req, const char *const *fields,
		       int (*check)(const cJSON *msg, struct err *e), struct target *t,
		       struct err *e)
{
	memset(t, 0, sizeof(*t));
	if (http_json_body(req, &t->msg, e) < 0)
		return err_code(e);
	int r = args_only(t->msg, NULL, fields, e);
	if (r == 0 && check)
		r = check(t->msg, e);
	if (r == 0 && (r = e2b_enter(req, &t->sb, e)) == 0)
		proc_prune(req->app, t->sb);
	if (r == 0 &&
	    (r = proc_find(req->app, t->sb, t->msg, &t->pid, t->term, e)) < 0) {
		sandbox_unuse(t->sb);
		sandbox_put(t->sb);
		t->sb = NULL;
	}
	if (r < 0) {
		cJSON_Delete(t->msg);
		t->msg = NULL;
	}
	return r;
}

static int target_close(struct target *t, struct http_response *res, int r, struct err *e)
{
	if (t->sb) {
		sandbox_unuse(t->sb);
		sandbox_put(t->sb);
	}
	cJSON_Delete(t->msg);
	return r < 0 ? r : http_reply_json(res, 200, cJSON_CreateObject(), e);
}

/* A PTY's input or size, through a client of its terminal. */
static int term_input(struct target *t, const char *data, size_t len, unsigned cols,
		      unsigned rows, struct err *e)
{
	struct process_term_client *tc;
	if (process_term_attach(sandbox_procs(t->sb), t->term, &tc, e) < 0)
		return err_code(e);
	int r = len ? process_term_write(tc, data, len, INPUT_WAIT_MS, e)
		    : process_term_resize(tc, cols, rows, e);
	process_term_detach(tc);
	return r;
}

static int decode_b64(const char *s, char **out, size_t *len, struct err *e)
{
	size_t sl = strlen(s);
	struct base64_decode_ctx bc;
	*out = malloc(BASE64_DECODE_LENGTH(sl) + 1);
	if (!*out)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	base64_decode_init(&bc);
	*len = BASE64_DECODE_LENGTH(sl);
	if (!base64_decode_update(&bc, len, (uint8_t *)*out, sl, s) ||
	    !base64_decode_final(&bc)) {
		free(*out);
		*out = NULL;
		return err_set(e, ERR_INVALID, EINVAL, "'input' is not valid base64");
	}
	return 0;
}

/* SendInput {"process":{"pid"|"tag"},"input":{"stdin"|"pty":base64}}. */
int e2b_process_input(struct http_request *req, struct http_response *res, struct err *e)
{
	static const char *const fields[] = {"process", "input", NULL};
	static const char *const kinds[] = {"stdin", "pty", NULL};
	struct target t;
	if (target_open(req, fields, NULL, &t, e) < 0)
		return err_code(e);
	const cJSON *in = cJSON_GetObjectItemCaseSensitive(t.msg, "input");
	const char *s = NULL, *key = "stdin";
	int r = cJSON_IsObject(in) ? args_only(in, "input", kinds, e)
				   : err_set(e, ERR_INVALID, EINVAL, "'input' must be an object");
	if (r == 0 && cJSON_GetObjectItemCaseSensitive(in, "pty"))
		key = "pty";
	if (r == 0)
		r = args_string(in, key, SIZE_MAX, 0, &s, e);
	char *data = NULL;
	size_t len = 0, written;
	if (r == 0 && s)
		r = decode_b64(s, &data, &len, e);
	if (r == 0 && len && t.term[0])
		r = term_input(&t, data, len, 0, 0, e);
	else if (r == 0 && len)
		r = process_bg_stdin(sandbox_procs(t.sb), t.pid, data, len, 0, INPUT_WAIT_MS,
				     &written, e);
	free(data);
	return target_close(&t, res, r, e);
}

/* CloseStdin {"process":{"pid"|"tag"}}: the program reads EOF. */
int e2b_process_close_stdin(struct http_request *req, struct http_response *res, struct err *e)
{
	static const char *const fields[] = {"process", NULL};
	struct target t;
	size_t none;
	if (target_open(req, fields, NULL, &t, e) < 0)
		return err_code(e);
	int r = t.term[0] ? err_set(e, ERR_INVALID, EINVAL, "a PTY has no stdin to close")
			  : process_bg_stdin(sandbox_procs(t.sb), t.pid, NULL, 0, 1, 0, &none, e);
	return target_close(&t, res, r, e);
}

static int check_pty(const cJSON *msg, struct err *e)
{
	struct start_args a = {0};
	return parse_pty(msg, &a, e);
}

/* Update {"process":{…},"pty":{"size":{"cols","rows"}}}: a PTY's size. */
int e2b_process_update(struct http_request *req, struct http_response *res, struct err *e)
{
	static const char *const fields[] = {"process", "pty", NULL};
	struct target t;
	if (target_open(req, fields, check_pty, &t, e) < 0)
		return err_code(e);
	struct start_args a = {0};
	int r = parse_pty(t.msg, &a, e);
	if (r == 0 && !a.o.pty)
		r = 0; /* nothing to change */
	else if (r == 0 && !t.term[0])
		r = err_set(e, ERR_INVALID, EINVAL, "process %d is not a PTY", (int)t.pid);
	else if (r == 0)
		r = term_input(&t, NULL, 0, a.o.cols, a.o.rows, e);
	return target_close(&t, res, r, e);
}

/* SendSignal {"process":{…},"signal":"SIGNAL_SIGKILL"|"SIGNAL_SIGTERM"}:
 * SIGKILL ends the program and everything it started (its cgroup);
 * SIGTERM is kill(1) in the sandbox, for the program alone. */
int e2b_process_signal(struct http_request *req, struct http_response *res, struct err *e)
{
	static const char *const fields[] = {"process", "signal", NULL};
	static const char *const sigs[] = {"SIGNAL_SIGKILL", "SIGNAL_SIGTERM", NULL};
	struct target t;
	int sig;
	if (target_open(req, fields, NULL, &t, e) < 0)
		return err_code(e);
	int r = args_enum(t.msg, "signal", sigs, 0, ARGS_REQUIRED, &sig, e);
	struct process_info in;
	struct process_term_info ti;
	if (r == 0 && sig == 0 && t.term[0]) {
		r = process_term_delete(sandbox_procs(t.sb), t.term, &ti, e);
	} else if (r == 0 && sig == 0) {
		r = process_bg_kill(sandbox_procs(t.sb), t.pid, &in, e);
	} else if (r == 0) {
		char num[24];
		snprintf(num, sizeof(num), "%d", (int)t.pid);
		const char *argv[] = {"kill", "-TERM", num, NULL};
		struct process_opts o = {.argv = argv, .timeout_ms = 10000, .max_output = 4096};
		struct process_result pr;
		if ((r = process_run(sandbox_procs(t.sb), &o, &pr, e)) == 0) {
			if (pr.exit_code != 0)
				r = err_set(e, ERR_NOT_FOUND, ESRCH, "process %d is gone",
					    (int)t.pid);
			process_result_release(&pr);
		}
	}
	return target_close(&t, res, r, e);
}
