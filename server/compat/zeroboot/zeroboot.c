/* Zeroboot's REST shape (docs/compat.md): POST /v1/exec runs a
 * piece of code in a fresh sandbox that is deleted afterwards, the way
 * Zeroboot forks a VM per request; a warm desktop (--warm-pool) makes the
 * "fork" a claim.  Errors are {"error":"..."}. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/clock.h"
#include "server/compat/internal.h"

#define ZB_TIMEOUT_DEFAULT_S 30
#define ZB_TIMEOUT_MAX_S     300
#define ZB_CODE_MAX	     (128u * 1024 - 1)
#define ZB_BATCH_MAX	     16

void zeroboot_error(struct http_response *res, int status, const char *message)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "error", message);
	if (http_reply_json(res, status, j, NULL) < 0)
		http_reply_empty(res, 500);
}

/* A sandbox of the server's defaults: a warm one when there is one. */
static int fresh_sandbox(struct api *api, struct sandbox **sb, struct err *e)
{
	cJSON *none = cJSON_CreateObject();
	int r = none ? compat_create(api, none, sb, e)
		     : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_Delete(none);
	return r;
}

static double ms_since(long long t0_ns)
{
	return (double)((long long)clock_mono_ns() - t0_ns) / 1e6;
}

static double round2(double v)
{
	return (double)(long long)(v * 100.0 + 0.5) / 100.0;
}

/* One execution: {"code", "language"?, "timeout_seconds"?} into its
 * result object. */
static int exec_one(struct api *api, const cJSON *req, cJSON **out, struct err *e)
{
	const char *code, *lang_name;
	int64_t timeout_s;
	if (args_string(req, "code", ZB_CODE_MAX, ARGS_REQUIRED, &code, e) < 0 ||
	    args_string(req, "language", 32, 0, &lang_name, e) < 0 ||
	    args_int(req, "timeout_seconds", 1, INT64_MAX, ZB_TIMEOUT_DEFAULT_S, 0, &timeout_s, e) <
		0)
		return err_code(e);
	/* Zeroboot's templates: python (the default), node. */
	int lang = compat_language(lang_name ? lang_name : "python");
	if (lang < 0 || strcmp(process_languages[lang], "bash") == 0)
		return err_set(e, ERR_INVALID, EINVAL, "No template for language: %s", lang_name);
	if (timeout_s > ZB_TIMEOUT_MAX_S)
		timeout_s = ZB_TIMEOUT_MAX_S;
	long long t0 = (long long)clock_mono_ns();
	struct sandbox *sb;
	if (fresh_sandbox(api, &sb, e) < 0)
		return err_code(e);
	double fork_ms = ms_since(t0);
	char id[128];
	snprintf(id, sizeof(id), "%s", sandbox_id(sb));
	sandbox_put(sb);
	long long t1 = (long long)clock_mono_ns();
	struct process_result pr;
	struct compat_run run = {
	    .language = lang, .code = code, .timeout_ms = (int)timeout_s * 1000};
	int r = compat_run(api, id, &run, &pr, e);
	double exec_ms = ms_since(t1);
	struct err e2 = ERR_INIT;
	sandbox_delete(api->sandboxes, id, &e2);
	if (r < 0)
		return r;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", id);
	char msg[64];
	if (pr.timed_out) {
		snprintf(msg, sizeof(msg), "Execution timed out after %llds", (long long)timeout_s);
		cJSON_AddStringToObject(j, "stdout", "");
		cJSON_AddStringToObject(j, "stderr", msg);
	} else {
		cJSON_AddStringToObject(j, "stdout", pr.out ? pr.out : "");
		cJSON_AddStringToObject(j, "stderr", pr.err ? pr.err : "");
	}
	cJSON_AddNumberToObject(j, "exit_code", pr.timed_out ? -1 : pr.exit_code);
	cJSON_AddNumberToObject(j, "fork_time_ms", round2(fork_ms));
	cJSON_AddNumberToObject(j, "exec_time_ms", round2(exec_ms));
	cJSON_AddNumberToObject(j, "total_time_ms", round2(ms_since(t0)));
	process_result_release(&pr);
	*out = j;
	return 0;
}

static int zb_exec(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body, *out = NULL;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	int r = exec_one(req->app, body, &out, e);
	cJSON_Delete(body);
	return r < 0 ? r : http_reply_json(res, 200, out, e);
}

/* {"executions":[...]}: one after the other (each in its own sandbox). */
static int zb_batch(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const cJSON *ex = cJSON_GetObjectItemCaseSensitive(body, "executions");
	int r = 0;
	if (!cJSON_IsArray(ex) || cJSON_GetArraySize(ex) > ZB_BATCH_MAX)
		r = err_set(e, ERR_INVALID, EINVAL,
			    "field 'executions' must be an array of at most %d", ZB_BATCH_MAX);
	cJSON *j = cJSON_CreateObject(), *results = cJSON_AddArrayToObject(j, "results");
	const cJSON *it;
	cJSON_ArrayForEach(it, ex)
	{
		cJSON *one = NULL;
		if (r == 0 && (r = exec_one(req->app, it, &one, e)) == 0)
			cJSON_AddItemToArray(results, one);
	}
	cJSON_Delete(body);
	if (r < 0) {
		cJSON_Delete(j);
		return r;
	}
	return http_reply_json(res, 200, j, e);
}

static int zb_health(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "status", "ok");
	cJSON *t = cJSON_AddObjectToObject(j, "templates");
	const char *names[] = {"python", "node"};
	for (size_t i = 0; i < 2; i++) {
		cJSON *one = cJSON_AddObjectToObject(t, names[i]);
		cJSON_AddBoolToObject(one, "ready", 1);
	}
	return http_reply_json(res, 200, j, e);
}

const struct http_route zeroboot_routes[] = {
    {"POST", "/zeroboot/v1/exec", zb_exec, 0, NULL, NULL, NULL},
    {"POST", "/zeroboot/v1/exec/batch", zb_batch, 0, NULL, NULL, NULL},
    {"GET", "/zeroboot/v1/health", zb_health, 0, NULL, NULL, NULL},
};
const size_t zeroboot_n_routes = sizeof(zeroboot_routes) / sizeof(zeroboot_routes[0]);
