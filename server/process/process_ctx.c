/* Python contexts: a persistent interpreter per context running the driver
 * desktop-image/deskbox-pyctx.py (embedded below), one request at a time
 * over its stdin and stdout.  The interpreter is a run like any other (its
 * own cgroup), so a request past its timeout kills it, with everything it
 * started, and a fresh one takes its place. */
#include "common/text.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/fs.h"

#define CTX_MAX_PER_SANDBOX 16
#define CTX_HEADER_MAX	    65536
/* How long a fresh interpreter may take to answer its first request on
 * top of the request's own timeout. */
#define CTX_START_MS 10000

/* The driver's source, NUL-terminated (make runs from the top directory). */
__asm__(".section .rodata\n"
	".global deskbox_pyctx_src\n"
	"deskbox_pyctx_src:\n"
	".incbin \"desktop-image/deskbox-pyctx.py\"\n"
	".byte 0\n"
	".previous\n");
extern const char deskbox_pyctx_src[];

struct process_ctx {
	char id[PROCESS_CTX_ID_LEN + 1];
	struct process_ctx *next; /* in the table, under table->mu */
	int refs;		  /* under table->mu */
	int gone;		  /* deleted: requests fail */
	pthread_mutex_t busy;	  /* one request (or restart) at a time */
	struct process_run *run;  /* the interpreter, under busy */
	long long created_at_ms;
	uint64_t runs;
};

static void ctx_unref(struct process_table *t, struct process_ctx *c)
{
	pthread_mutex_lock(&t->mu);
	int last = --c->refs == 0;
	pthread_mutex_unlock(&t->mu);
	if (!last)
		return;
	process_run_free(c->run);
	pthread_mutex_destroy(&c->busy);
	free(c);
}

static struct process_ctx *ctx_find(struct process_table *t, const char *id)
{
	pthread_mutex_lock(&t->mu);
	struct process_ctx *c = t->ctxs;
	while (c && strcmp(c->id, id) != 0)
		c = c->next;
	if (c)
		c->refs++;
	pthread_mutex_unlock(&t->mu);
	return c;
}

/* Starts the interpreter; `use`: enter the sandbox for it through the
 * host's hooks (callers that are not inside an operation on it already). */
static int start_driver(struct process_table *t, struct process_ctx *c, int use, struct err *e)
{
	const char *argv[] = {"/usr/bin/python3", "-c", deskbox_pyctx_src, NULL};
	const char *env[] = {"PYTHONDONTWRITEBYTECODE=1", NULL};
	struct process_opts o = {
	    .argv = argv,
	    .env = env,
	    .max_output = 4096,
	    .keep_stdin_open = 1,
	};
	process_run_free(c->run);
	c->run = NULL;
	if (use && t->host.enter && t->host.enter(t->host.cls, e) < 0)
		return err_code(e);
	int r = process_start(t, &o, &c->run, e);
	if (use && t->host.leave)
		t->host.leave(t->host.cls);
	return r;
}

int process_ctx_create(struct process_table *t, struct process_ctx_info *out, struct err *e)
{
	pthread_mutex_lock(&t->mu);
	size_t n = 0;
	for (struct process_ctx *c = t->ctxs; c; c = c->next)
		n++;
	pthread_mutex_unlock(&t->mu);
	if (n >= CTX_MAX_PER_SANDBOX)
		return err_set(e, ERR_LIMIT, EAGAIN, "a sandbox has at most %d contexts",
			       CTX_MAX_PER_SANDBOX);
	struct process_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (fs_random_hex(c->id, PROCESS_CTX_ID_LEN / 2, e) < 0) {
		free(c);
		return err_code(e);
	}
	pthread_mutex_init(&c->busy, NULL);
	c->refs = 1;
	c->created_at_ms = clock_wall_ms();
	if (start_driver(t, c, 0, e) < 0) {
		pthread_mutex_destroy(&c->busy);
		free(c);
		return err_wrap(e, "starting the python context");
	}
	pthread_mutex_lock(&t->mu);
	c->next = t->ctxs;
	t->ctxs = c;
	pthread_mutex_unlock(&t->mu);
	memcpy(out->id, c->id, sizeof(c->id));
	out->created_at_ms = c->created_at_ms;
	return 0;
}

static int not_found(struct err *e, const char *id)
{
	return err_set(e, ERR_NOT_FOUND, ENOENT, "no context '%.*s'", UTF8_CUT(id, 64));
}

/* The request: {"code","cwd","env","max_output"} framed by its length. */
static char *request(const char *code, const struct process_opts *o, size_t *len)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "code", code);
	if (o->cwd)
		cJSON_AddStringToObject(j, "cwd", o->cwd);
	cJSON *env = cJSON_AddObjectToObject(j, "env");
	for (size_t i = 0; o->env && o->env[i]; i++) {
		const char *eq = strchr(o->env[i], '=');
		char *k = eq ? strndup(o->env[i], (size_t)(eq - o->env[i])) : NULL;
		if (k)
			cJSON_AddStringToObject(env, k, eq + 1);
		free(k);
	}
	cJSON_AddNumberToObject(j, "max_output", (double)o->max_output);
	char *text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (!text)
		return NULL;
	size_t n = strlen(text);
	char *framed = malloc(n + 4);
	if (framed) {
		framed[0] = (char)(n >> 24);
		framed[1] = (char)(n >> 16);
		framed[2] = (char)(n >> 8);
		framed[3] = (char)n;
		memcpy(framed + 4, text, n);
		*len = n + 4;
	}
	free(text);
	return framed;
}

static int json_size(const cJSON *j, const char *name, size_t max, size_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)max)
		return -1;
	*out = (size_t)v->valuedouble;
	return 0;
}

/* Reads one answer; -1 when the interpreter died, hung or lied. */
static int answer(struct process_run *run, long long deadline, size_t max,
		  struct process_result *res, char **result)
{
	unsigned char hl[4];
	if (process_read_exact(run, hl, 4, deadline) < 0)
		return -1;
	size_t n = (size_t)hl[0] << 24 | (size_t)hl[1] << 16 | (size_t)hl[2] << 8 | hl[3];
	if (n == 0 || n > CTX_HEADER_MAX)
		return -1;
	char *head = malloc(n + 1);
	if (!head || process_read_exact(run, head, n, deadline) < 0) {
		free(head);
		return -1;
	}
	head[n] = '\0';
	cJSON *j = cJSON_ParseWithLength(head, n);
	free(head);
	const cJSON *ec = cJSON_GetObjectItemCaseSensitive(j, "exit_code");
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(j, "result");
	size_t ol, el, ot, et;
	/* SECURITY: the sizes come from inside the sandbox. */
	if (!cJSON_IsNumber(ec) || json_size(j, "out_len", max, &ol) < 0 ||
	    json_size(j, "err_len", max, &el) < 0 || json_size(j, "out_total", SIZE_MAX, &ot) < 0 ||
	    json_size(j, "err_total", SIZE_MAX, &et) < 0) {
		cJSON_Delete(j);
		return -1;
	}
	res->exit_code = (int)ec->valuedouble;
	res->out_truncated = ot > ol;
	res->err_truncated = et > el;
	if (cJSON_IsString(rv))
		*result = strdup(rv->valuestring);
	cJSON_Delete(j);
	res->out = malloc(ol + 1);
	res->err = malloc(el + 1);
	if (!res->out || !res->err || process_read_exact(run, res->out, ol, deadline) < 0 ||
	    process_read_exact(run, res->err, el, deadline) < 0)
		return -1;
	res->out[ol] = res->err[el] = '\0';
	res->out_len = ol;
	res->err_len = el;
	return 0;
}

static int driver_alive(struct process_run *r)
{
	return r && !process_client_exited(r);
}

int process_ctx_run(struct process_table *t, const char *id, const char *code,
		    const struct process_opts *o, struct process_result *res, char **result,
		    int *restarted, struct err *e)
{
	memset(res, 0, sizeof(*res));
	*result = NULL;
	*restarted = 0;
	struct process_ctx *c = ctx_find(t, id);
	if (!c)
		return not_found(e, id);
	size_t len;
	char *req = request(code, o, &len);
	if (!req) {
		ctx_unref(t, c);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&c->busy);
	int r = 0;
	long long start = clock_mono_ms();
	if (c->gone) {
		r = not_found(e, id);
		goto out;
	}
	/* An interpreter killed with its sandbox, or by an earlier OOM. */
	if (!driver_alive(c->run)) {
		if (start_driver(t, c, 1, e) < 0) {
			r = err_wrap(e, "restarting python context '%s'", id);
			goto out;
		}
		*restarted = 1;
	}
	long long deadline = start + o->timeout_ms;
	c->runs++;
	if (process_write(c->run, req, len, deadline) == 0 &&
	    answer(c->run, deadline, o->max_output, res, result) == 0)
		goto out;
	/* Hung past the deadline, or died (OOM, os._exit, a crash): report
	 * it and start over fresh. */
	process_result_release(res);
	free(*result);
	*result = NULL;
	int alive = driver_alive(c->run);
	pthread_mutex_lock(&t->mu);
	if (c->run->cg_live)
		run_cgroup_kill(&c->run->cg);
	pthread_mutex_unlock(&t->mu);
	res->oom_killed = run_cgroup_oom_kills(&c->run->cg) > 0;
	res->timed_out = alive && clock_mono_ms() >= deadline;
	res->exit_code = -1;
	res->out = strdup("");
	res->err = strdup(res->timed_out    ? "context timed out; it was restarted\n"
			  : res->oom_killed ? "context ran out of memory; it was restarted\n"
					    : "context's interpreter died; it was restarted\n");
	res->err_len = res->err ? strlen(res->err) : 0;
	if (start_driver(t, c, 1, e) < 0)
		r = err_wrap(e, "restarting python context '%s'", id);
	*restarted = 1;
out:
	res->duration_ms = clock_mono_ms() - start;
	pthread_mutex_unlock(&c->busy);
	ctx_unref(t, c);
	free(req);
	if (r == 0 && (!res->out || !res->err)) {
		process_result_release(res);
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	return r;
}

int process_ctx_restart(struct process_table *t, const char *id, struct err *e)
{
	struct process_ctx *c = ctx_find(t, id);
	if (!c)
		return not_found(e, id);
	/* Kill first: a request that is running ends now rather than at its
	 * timeout. */
	pthread_mutex_lock(&t->mu);
	if (c->run && c->run->cg_live)
		run_cgroup_kill(&c->run->cg);
	pthread_mutex_unlock(&t->mu);
	pthread_mutex_lock(&c->busy);
	int r = c->gone ? not_found(e, id) : start_driver(t, c, 1, e);
	pthread_mutex_unlock(&c->busy);
	ctx_unref(t, c);
	return r;
}

/* Unlinks `c` (under t->mu) and kills its interpreter. */
static void unlink_locked(struct process_table *t, struct process_ctx *c)
{
	for (struct process_ctx **pp = &t->ctxs; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	c->gone = 1;
	if (c->run && c->run->cg_live)
		run_cgroup_kill(&c->run->cg);
}

int process_ctx_delete(struct process_table *t, const char *id, struct err *e)
{
	pthread_mutex_lock(&t->mu);
	struct process_ctx *c = t->ctxs;
	while (c && strcmp(c->id, id) != 0)
		c = c->next;
	if (c)
		unlink_locked(t, c);
	pthread_mutex_unlock(&t->mu);
	if (!c)
		return not_found(e, id);
	ctx_unref(t, c); /* the table's */
	return 0;
}

void process_ctx_drop_all(struct process_table *t)
{
	for (;;) {
		pthread_mutex_lock(&t->mu);
		struct process_ctx *c = t->ctxs;
		if (c)
			unlink_locked(t, c);
		pthread_mutex_unlock(&t->mu);
		if (!c)
			return;
		ctx_unref(t, c);
	}
}

size_t process_ctx_list(struct process_table *t, struct process_ctx_info *out, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&t->mu);
	for (struct process_ctx *c = t->ctxs; c && n < max; c = c->next, n++) {
		memcpy(out[n].id, c->id, sizeof(c->id));
		out[n].created_at_ms = c->created_at_ms;
		out[n].runs = c->runs;
		out[n].busy = pthread_mutex_trylock(&c->busy) != 0;
		if (!out[n].busy)
			pthread_mutex_unlock(&c->busy);
	}
	pthread_mutex_unlock(&t->mu);
	return n;
}
