/* compat/e2b: the code interpreter's /execute and /contexts onto deskbox's
 * Python contexts (server/process, process_ctx_*).
 *
 * /execute answers NDJSON once the run is over: "stdout" and "stderr"
 * lines, a "result" (is_main_result, "text": the repr() of the last
 * expression), an "error" {name, value, traceback} when the code raised,
 * "number_of_executions" and "end_of_execution".  A run without a
 * context_id goes to the sandbox's default context, made at its first use
 * and remembered in struct compat. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "common/args.h"
#include "server/process/process.h"
#include "server/sandbox/sandbox.h"

#define CODE_MAX (1u << 20)

static void line(struct http_frames *f, const char *type, cJSON *j);

/* Run once in a context made here: figures are drawn off screen, as in
 * E2B's Jupyter (the sandbox has a DISPLAY, where they would open windows). */
static const char SETUP[] = "import os as __o\n"
			    "__o.environ.setdefault('MPLBACKEND', 'Agg')\n"
			    "del __o\n";
/* Run after each run: the open matplotlib figures as base64 PNGs, one per
 * line, then closed.  Only when the code used pyplot. */
static const char FIGURES[] = "def __dbx_figures():\n"
			      "    import sys\n"
			      "    plt = sys.modules.get('matplotlib.pyplot')\n"
			      "    if plt is None:\n"
			      "        return\n"
			      "    import io, base64\n"
			      "    for n in plt.get_fignums():\n"
			      "        b = io.BytesIO()\n"
			      "        plt.figure(n).savefig(b, format='png')\n"
			      "        print(base64.b64encode(b.getvalue()).decode())\n"
			      "    plt.close('all')\n"
			      "__dbx_figures()\n"
			      "del __dbx_figures\n";

/* Runs one of the snippets above in context `id`; its stdout (malloc'd,
 * or NULL). */
static char *snippet(struct compat *c, struct sandbox *sb, const char *id, const char *code)
{
	struct process_opts o = {.timeout_ms = 30000, .max_output = c->exec_max_output};
	struct process_result pr;
	struct err e = ERR_INIT;
	char *result = NULL, *out = NULL;
	int restarted;
	if (process_ctx_run(sandbox_procs(sb), id, code, &o, &pr, &result, &restarted, &e) < 0)
		return NULL;
	if (pr.exit_code == 0) {
		out = pr.out;
		pr.out = NULL;
	}
	free(result);
	process_result_release(&pr);
	return out;
}

/* One "result" line per figure the code left open. */
static void figure_lines(struct compat *c, struct sandbox *sb, const char *id,
			 struct http_frames *f)
{
	char *out = snippet(c, sb, id, FIGURES);
	for (char *save = NULL, *p = out ? strtok_r(out, "\n", &save) : NULL; p;
	     p = strtok_r(NULL, "\n", &save)) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddBoolToObject(j, "is_main_result", 0);
		cJSON_AddStringToObject(j, "text", "<Figure>");
		cJSON_AddStringToObject(j, "png", p);
		line(f, "result", j);
	}
	free(out);
}

static void line(struct http_frames *f, const char *type, cJSON *j)
{
	cJSON_AddStringToObject(j, "type", type);
	http_frames_ndjson(f, j);
	cJSON_Delete(j);
}

static void text_line(struct http_frames *f, const char *type, const char *text, size_t len)
{
	if (!len)
		return;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "text", text);
	line(f, type, j);
}

/* Python's traceback's last line, "Name: value" (or "Name"). */
static void error_line(struct http_frames *f, const char *tb)
{
	size_t n = strlen(tb);
	while (n && (tb[n - 1] == '\n' || tb[n - 1] == ' '))
		n--;
	size_t start = n;
	while (start && tb[start - 1] != '\n')
		start--;
	char last[512];
	snprintf(last, sizeof(last), "%.*s", (int)(n - start), tb + start);
	char *colon = strstr(last, ": ");
	cJSON *j = cJSON_CreateObject();
	if (colon)
		*colon = '\0';
	cJSON_AddStringToObject(j, "name", last[0] ? last : "Error");
	cJSON_AddStringToObject(j, "value", colon ? colon + 2 : "");
	cJSON_AddStringToObject(j, "traceback", tb);
	line(f, "error", j);
}

static int default_context(struct compat *c, struct sandbox *sb, char *id, int fresh, struct err *e)
{
	pthread_mutex_lock(&c->mu);
	size_t i, free_slot = COMPAT_MAX_DEFAULT_CTX;
	for (i = 0; i < COMPAT_MAX_DEFAULT_CTX; i++) {
		if (strcmp(c->default_ctx[i].sandbox, sandbox_id(sb)) == 0)
			break;
		if (!c->default_ctx[i].sandbox[0] && free_slot == COMPAT_MAX_DEFAULT_CTX)
			free_slot = i;
	}
	if (i < COMPAT_MAX_DEFAULT_CTX && !fresh) {
		memcpy(id, c->default_ctx[i].ctx, PROCESS_CTX_ID_LEN + 1);
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	pthread_mutex_unlock(&c->mu);
	if (sandbox_use(sb, 0, NULL, e) < 0)
		return err_code(e);
	struct process_ctx_info info;
	int r = process_ctx_create(sandbox_procs(sb), &info, e);
	sandbox_unuse(sb);
	if (r < 0)
		return r;
	memcpy(id, info.id, PROCESS_CTX_ID_LEN + 1);
	free(snippet(c, sb, id, SETUP));
	pthread_mutex_lock(&c->mu);
	if (i == COMPAT_MAX_DEFAULT_CTX)
		i = free_slot < COMPAT_MAX_DEFAULT_CTX ? free_slot
						       : c->next_evict++ % COMPAT_MAX_DEFAULT_CTX;
	snprintf(c->default_ctx[i].sandbox, sizeof(c->default_ctx[i].sandbox), "%s",
		 sandbox_id(sb));
	memcpy(c->default_ctx[i].ctx, id, PROCESS_CTX_ID_LEN + 1);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static int execute_args(const cJSON *body, const char **code, const char **cid, struct err *e)
{
	const char *lang;
	if (args_string(body, "code", CODE_MAX, ARGS_REQUIRED, code, e) < 0 ||
	    args_string(body, "context_id", 64, 0, cid, e) < 0 ||
	    args_string(body, "language", 32, 0, &lang, e) < 0)
		return err_code(e);
	if (lang && strcmp(lang, "python") != 0 && strcmp(lang, "python3") != 0)
		return err_set(e, ERR_INVALID, ENOTSUP,
			       "language '%s': deskbox runs only python here", lang);
	if (cJSON_GetObjectItemCaseSensitive(body, "env_vars"))
		return err_set(e, ERR_INVALID, ENOTSUP, "'env_vars' per run is not offered here");
	return 0;
}

static int run_code(struct http_request *req, struct sandbox *sb, const char *code, const char *cid,
		    struct http_frames *f, struct err *e)
{
	struct compat *c = req->app;
	char id[PROCESS_CTX_ID_LEN + 1];
	if (!cid && default_context(c, sb, id, 0, e) < 0)
		return err_code(e);
	struct process_opts o = {.timeout_ms = c->exec_timeout_max_s * 1000,
				 .max_output = c->exec_max_output};
	struct process_result pr;
	char *result = NULL;
	int restarted;
	int r = process_ctx_run(sandbox_procs(sb), cid ? cid : id, code, &o, &pr, &result,
				&restarted, e);
	if (r < 0 && !cid && e->kind == ERR_NOT_FOUND) { /* the default one went away */
		*e = (struct err)ERR_INIT;
		r = default_context(c, sb, id, 1, e);
		if (r == 0)
			r = process_ctx_run(sandbox_procs(sb), id, code, &o, &pr, &result,
					    &restarted, e);
	}
	if (r < 0)
		return r;
	text_line(f, "stdout", pr.out, pr.out_len);
	if (pr.exit_code != 0 && pr.err_len)
		error_line(f, pr.err);
	else
		text_line(f, "stderr", pr.err, pr.err_len);
	figure_lines(c, sb, cid ? cid : id, f);
	if (result) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddBoolToObject(j, "is_main_result", 1);
		cJSON_AddStringToObject(j, "text", result);
		line(f, "result", j);
	}
	line(f, "end_of_execution", cJSON_CreateObject());
	free(result);
	process_result_release(&pr);
	return 0;
}

int e2b_execute(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const char *code, *cid;
	struct sandbox *sb = NULL;
	int r = execute_args(body, &code, &cid, e);
	if (r == 0)
		r = e2b_sandbox_of(req, &sb, e);
	struct http_frames f = {0};
	if (r == 0)
		r = run_code(req, sb, code, cid, &f, e);
	if (sb)
		sandbox_put(sb);
	cJSON_Delete(body);
	if (r == 0 && f.failed)
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r < 0) {
		http_frames_release(&f);
		return r;
	}
	http_reply_data(res, 200, "application/x-ndjson", f.buf, f.len);
	return 0;
}

static cJSON *context_json(const char *id)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", id);
	cJSON_AddStringToObject(j, "language", "python");
	cJSON_AddStringToObject(j, "cwd", "/workspace");
	return j;
}

int e2b_context_create(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const char *lang, *cwd;
	int r = args_string(body, "language", 32, 0, &lang, e);
	if (r == 0)
		r = args_string(body, "cwd", 4096, 0, &cwd, e);
	if (r == 0 && lang && strcmp(lang, "python") != 0 && strcmp(lang, "python3") != 0)
		r = err_set(e, ERR_INVALID, ENOTSUP, "language '%s': deskbox runs only python here",
			    lang);
	cJSON_Delete(body);
	struct sandbox *sb;
	if (r < 0 || e2b_enter(req, &sb, e) < 0)
		return err_code(e);
	char id[PROCESS_CTX_ID_LEN + 1];
	struct process_ctx_info info;
	r = process_ctx_create(sandbox_procs(sb), &info, e);
	memcpy(id, info.id, sizeof(id));
	sandbox_unuse(sb);
	if (r == 0)
		free(snippet(req->app, sb, id, SETUP));
	sandbox_put(sb);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, context_json(id), e);
}

int e2b_context_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct sandbox *sb;
	if (e2b_sandbox_of(req, &sb, e) < 0)
		return err_code(e);
	struct process_ctx_info list[64];
	size_t n = process_ctx_list(sandbox_procs(sb), list, 64);
	sandbox_put(sb);
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(a, context_json(list[i].id));
	return http_reply_json(res, 200, a, e);
}

int e2b_context_restart(struct http_request *req, struct http_response *res, struct err *e)
{
	struct sandbox *sb;
	if (e2b_sandbox_of(req, &sb, e) < 0)
		return err_code(e);
	int r = process_ctx_restart(sandbox_procs(sb), req->captures[0], e);
	sandbox_put(sb);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, cJSON_CreateObject(), e);
}

int e2b_context_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct sandbox *sb;
	if (e2b_sandbox_of(req, &sb, e) < 0)
		return err_code(e);
	int r = process_ctx_delete(sandbox_procs(sb), req->captures[0], e);
	sandbox_put(sb);
	if (r < 0)
		return r;
	http_reply_empty(res, 204);
	return 0;
}
