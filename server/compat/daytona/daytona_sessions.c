/* Daytona's sessions (toolbox /process/session...) onto deskbox's shell
 * sessions (persistent bash: cd, export and functions carry over).  The
 * client names its sessions; which deskbox session a name stands for is
 * kept in the sandbox's metadata under DT_SESSION_KEY (hidden from the
 * labels).  Commands run to their end: runAsync and the logs of earlier
 * commands are refused as not supported. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/args.h"
#include "common/clock.h"
#include "internal.h"

#define DT_SESSION_NAME_MAX (SANDBOX_META_KEY_MAX - (int)sizeof(DT_SESSION_KEY) + 1)

static int name_ok(const char *n)
{
	size_t len = n ? strlen(n) : 0;
	if (!len || len > (size_t)DT_SESSION_NAME_MAX)
		return 0;
	for (const char *p = n; *p; p++)
		if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
		    !(*p >= '0' && *p <= '9') && !strchr("._-", *p))
			return 0;
	return 1;
}

/* Sets (deskbox id) or removes (NULL) the key of session `name`. */
static int set_key(struct api *api, const char *sid, const char *name, const char *id,
		   struct err *e)
{
	char key[SANDBOX_META_KEY_MAX + 1];
	snprintf(key, sizeof(key), DT_SESSION_KEY "%s", name);
	struct sandbox_patch p = {.metadata = cJSON_CreateObject()};
	if (id)
		cJSON_AddStringToObject(p.metadata, key, id);
	else
		cJSON_AddNullToObject(p.metadata, key);
	struct sandbox *sb;
	int r = sandbox_patch_apply(api->sandboxes, sid, &p, &sb, e);
	sandbox_patch_release(&p);
	if (r == 0)
		sandbox_put(sb);
	return r;
}

/* The deskbox session of `name` into `id`. */
static int lookup(struct api *api, const char *sid, const char *name, char *id, size_t size,
		  struct err *e)
{
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, sid, &sb, e) < 0)
		return err_code(e);
	cJSON *s = sandbox_json(sb);
	sandbox_put(sb);
	char key[SANDBOX_META_KEY_MAX + 1];
	snprintf(key, sizeof(key), DT_SESSION_KEY "%s", name);
	const char *v = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "metadata"), key));
	int r = v ? 0 : err_set(e, ERR_NOT_FOUND, ENOENT, "no session '%.*s'", UTF8_CUT(name, 64));
	if (v)
		snprintf(id, size, "%s", v);
	cJSON_Delete(s);
	return r;
}

/* POST process/session {"sessionId"}. */
int dt_session_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const char *name;
	char id[64];
	int r = args_string(body, "sessionId", 64, ARGS_REQUIRED, &name, e);
	if (r == 0 && !name_ok(name))
		r = err_set(e, ERR_INVALID, EINVAL, "'sessionId' must be 1-%d of A-Z a-z 0-9 . _ -",
			    DT_SESSION_NAME_MAX);
	if (r == 0 && lookup(api, req->captures[0], name, id, sizeof(id), e) == 0)
		r = err_set(e, ERR_CONFLICT, EEXIST, "session '%s' exists", name);
	else if (r == 0)
		err_clear(e);
	struct sandbox *sb;
	struct process_session_info info;
	if (r == 0 && (r = compat_enter(api, req->captures[0], &sb, e)) == 0) {
		struct process_opts o = {0};
		r = process_session_create(sandbox_procs(sb), &o, &info, e);
		compat_release(sb);
	}
	if (r == 0 && (r = set_key(api, req->captures[0], name, info.id, e)) < 0 &&
	    compat_enter(api, req->captures[0], &sb, NULL) == 0) {
		process_session_delete(sandbox_procs(sb), info.id, NULL);
		compat_release(sb);
	}
	cJSON_Delete(body);
	if (r < 0)
		return r;
	http_reply_empty(res, 201);
	return 0;
}

/* POST process/session/{name}/exec {"command","runAsync"?}. */
int dt_session_exec(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const char *cmd;
	char id[64];
	int r = args_string(body, "command", 128u * 1024, ARGS_REQUIRED, &cmd, e);
	if (r == 0 && (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "runAsync")) ||
		       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "async"))))
		r = err_set(e, ERR_INVALID, ENOTSUP, "runAsync is not supported by deskbox");
	if (r == 0)
		r = lookup(api, req->captures[0], req->captures[1], id, sizeof(id), e);
	struct sandbox *sb;
	struct process_result pr;
	int restarted = 0;
	if (r == 0 && (r = sandbox_get(api->sandboxes, req->captures[0], &sb, e)) == 0) {
		struct process_opts o = {.timeout_ms = api->exec_timeout_default_s * 1000,
					 .max_output = api->exec_max_output};
		r = process_session_exec(sandbox_procs(sb), id, cmd, &o, &pr, &restarted, e);
		sandbox_put(sb);
	}
	cJSON_Delete(body);
	if (r < 0)
		return r;
	char cmd_id[32];
	snprintf(cmd_id, sizeof(cmd_id), "cmd-%lld", clock_wall_ms());
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "cmdId", cmd_id);
	cJSON_AddNumberToObject(j, "exitCode", pr.timed_out ? -1 : pr.exit_code);
	size_t ol = pr.out_len, el = pr.err_len;
	char *both = malloc(ol + el + 1);
	if (both) {
		memcpy(both, pr.out ? pr.out : "", ol);
		memcpy(both + ol, pr.err ? pr.err : "", el);
		both[ol + el] = '\0';
	}
	cJSON_AddStringToObject(j, "output", both ? both : "");
	cJSON_AddStringToObject(j, "stdout", pr.out ? pr.out : "");
	cJSON_AddStringToObject(j, "stderr", pr.err ? pr.err : "");
	free(both);
	process_result_release(&pr);
	return http_reply_json(res, 200, j, e);
}

/* GET process/session[/{name}]: the named sessions ({sessionId,
 * commands:[]}: deskbox keeps no history of them). */
int dt_session_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	cJSON *s = sandbox_json(sb);
	sandbox_put(sb);
	const char *want = req->n_captures > 1 ? req->captures[1] : NULL;
	cJSON *list = cJSON_CreateArray(), *one = NULL;
	const cJSON *it;
	size_t kl = strlen(DT_SESSION_KEY);
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(s, "metadata"))
	{
		if (strncmp(it->string, DT_SESSION_KEY, kl) != 0)
			continue;
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "sessionId", it->string + kl);
		cJSON_AddItemToObject(j, "commands", cJSON_CreateArray());
		if (want && strcmp(it->string + kl, want) == 0 && !one)
			one = j;
		else if (want)
			cJSON_Delete(j);
		else
			cJSON_AddItemToArray(list, j);
	}
	cJSON_Delete(s);
	if (want) {
		cJSON_Delete(list);
		if (!one)
			return err_set(e, ERR_NOT_FOUND, ENOENT, "no session '%.*s'",
				       UTF8_CUT(want, 64));
		return http_reply_json(res, 200, one, e);
	}
	return http_reply_json(res, 200, list, e);
}

int dt_session_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	char id[64];
	struct sandbox *sb;
	if (lookup(api, req->captures[0], req->captures[1], id, sizeof(id), e) < 0)
		return err_code(e);
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) == 0) {
		struct err ignore = ERR_INIT; /* a shell gone with a restart */
		process_session_delete(sandbox_procs(sb), id, &ignore);
		sandbox_put(sb);
	}
	if (set_key(api, req->captures[0], req->captures[1], NULL, e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}
