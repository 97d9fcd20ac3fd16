/* Daytona's control plane (`DAYTONA_API_URL` = http://HOST:PORT/daytona/api)
 * onto deskbox's sandboxes: a Daytona sandbox is a deskbox sandbox, its
 * labels are the sandbox's metadata, its autostop interval the sandbox's
 * timeout.  Every answer that carries a sandbox carries all of it (the SDK
 * replaces its copy, id included, with each one). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/text.h"
#include "common/args.h"
#include "internal.h"

static const char *reason_phrase(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 409:
		return "Conflict";
	case 413:
		return "Payload Too Large";
	case 429:
		return "Too Many Requests";
	case 501:
		return "Not Implemented";
	case 503:
		return "Service Unavailable";
	}
	return status < 500 ? "Bad Request" : "Internal Server Error";
}

static void error_body(struct http_response *res, int status, const char *code, const char *msg,
		       const char *source)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "statusCode", status);
	cJSON_AddStringToObject(j, "message", msg);
	cJSON_AddStringToObject(j, "error", reason_phrase(status));
	cJSON_AddStringToObject(j, "code", code);
	if (source)
		cJSON_AddStringToObject(j, "source", source);
	if (http_reply_json(res, status, j, NULL) < 0)
		http_reply_empty(res, 500);
}

/* Daytona's API (NestJS) answers {"statusCode","message","error"}; the
 * toolbox's daemon {"statusCode","message","code"}: both in one. */
void daytona_error(struct http_response *res, int status, const struct err *e)
{
	char code[48];
	snprintf(code, sizeof(code), "%s", err_kind_name(e->kind));
	for (char *p = code; *p; p++)
		if (*p >= 'a' && *p <= 'z')
			*p = (char)(*p - 'a' + 'A');
	error_body(res, status, code, e->msg[0] ? e->msg : "internal error", NULL);
}

int daytona_daemon_error(struct http_response *res, int status, const char *code,
			 const char *message, struct err *e)
{
	error_body(res, status, code, message, "DAYTONA_DAEMON");
	return 0;
}

int dt_unsupported(struct http_request *req, struct http_response *res, struct err *e)
{
	char msg[256];
	snprintf(msg, sizeof(msg), "%s %.*s is not supported by deskbox", req->method,
		 UTF8_CUT(req->path, 160));
	error_body(res, 501, "NOT_SUPPORTED", msg, NULL);
	return 0;
}

/* deskbox's status as a Daytona state. */
static const char *state_of(const char *status)
{
	static const char *const map[][2] = {
	    {"creating", "creating"}, {"running", "started"}, {"stopped", "stopped"},
	    {"failed", "error"},      {"paused", "paused"},   {"deleting", "destroying"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (status && strcmp(status, map[i][0]) == 0)
			return map[i][1];
	return "unknown";
}

static double num(const cJSON *j, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *str(const cJSON *j, const char *name)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, name));
}

/* Where the SDK finds the toolbox: this server, as the client reached it. */
static void toolbox_url(struct http_request *req, char *buf, size_t size)
{
	const char *host = http_header(req, "Host");
	snprintf(buf, size, "%s://%s%s", http_request_tls(req) ? "https" : "http",
		 host && host[0] ? host : "localhost", DAYTONA_TOOLBOX);
}

static void add_dup(cJSON *to, const char *name, const cJSON *from)
{
	cJSON *c = from ? cJSON_Duplicate(from, 1) : cJSON_CreateObject();
	cJSON_AddItemToObject(to, name, c ? c : cJSON_CreateObject());
}

/* The sandbox's metadata but the keys deskbox keeps for itself. */
static cJSON *labels_of(const cJSON *s)
{
	cJSON *l = cJSON_CreateObject();
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(s, "metadata"))
	{
		if (strncmp(it->string, DT_SESSION_KEY, strlen(DT_SESSION_KEY)) != 0)
			cJSON_AddItemToObject(l, it->string, cJSON_Duplicate(it, 1));
	}
	return l;
}

/* A Daytona Sandbox DTO for deskbox's view `s` of a sandbox. */
static cJSON *dto(struct http_request *req, const cJSON *s)
{
	cJSON *j = cJSON_CreateObject();
	const char *id = str(s, "id"), *name = str(s, "name"), *status = str(s, "status");
	cJSON_AddStringToObject(j, "id", id ? id : "");
	cJSON_AddStringToObject(j, "name", name ? name : id ? id : "");
	cJSON_AddStringToObject(j, "organizationId", "deskbox");
	cJSON_AddStringToObject(j, "user", "user");
	add_dup(j, "env", cJSON_GetObjectItemCaseSensitive(s, "env"));
	cJSON_AddItemToObject(j, "labels", labels_of(s));
	cJSON_AddBoolToObject(j, "public", 0);
	cJSON_AddStringToObject(j, "target", "local");
	double cpu = num(s, "cpu_millis") / 1000.0;
	cJSON_AddNumberToObject(j, "cpu", cpu > 0 ? cpu : 1);
	cJSON_AddNumberToObject(j, "gpu", 0);
	cJSON_AddNumberToObject(j, "memory", num(s, "memory_mb") / 1024.0);
	cJSON_AddNumberToObject(j, "disk", num(s, "disk_mb") / 1024.0);
	const char *state = state_of(status);
	cJSON_AddStringToObject(j, "state", state);
	cJSON_AddStringToObject(j, "desiredState",
				strcmp(state, "stopped") == 0 ? "stopped" : "started");
	const char *reason = str(s, "reason");
	if (strcmp(state, "error") == 0)
		cJSON_AddStringToObject(j, "errorReason", reason ? reason : "failed");
	cJSON_AddNumberToObject(j, "autoStopInterval", floor(num(s, "timeout_s") / 60.0));
	cJSON_AddNumberToObject(j, "autoArchiveInterval", 0);
	cJSON_AddNumberToObject(j, "autoDeleteInterval", -1);
	cJSON_AddItemToObject(j, "volumes", cJSON_CreateArray());
	const cJSON *net = cJSON_GetObjectItemCaseSensitive(s, "network");
	cJSON_AddBoolToObject(j, "networkBlockAll",
			      cJSON_IsString(net) && strcmp(net->valuestring, "none") == 0);
	char when[40], url[320];
	clock_rfc3339((long long)num(s, "created_at") * 1000, when, sizeof(when));
	cJSON_AddStringToObject(j, "createdAt", when);
	cJSON_AddStringToObject(j, "updatedAt", when);
	toolbox_url(req, url, sizeof(url));
	cJSON_AddStringToObject(j, "toolboxProxyUrl", url);
	return j;
}

static int reply_sandbox(struct http_request *req, struct http_response *res, int status,
			 struct sandbox *sb, struct err *e)
{
	cJSON *s = sandbox_json(sb);
	sandbox_put(sb);
	cJSON *j = dto(req, s);
	cJSON_Delete(s);
	return http_reply_json(res, status, j, e);
}

/* Create fields deskbox cannot honour: refused, never ignored. */
static int refuse_unsupported(const cJSON *body, struct err *e)
{
	static const char *const fields[] = {"buildInfo", "volumes",	     "gpuType",
					     "secrets",	  "linkedSandbox",   "kvm",
					     "spot",	  "outboundProxyUrl"};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, fields[i]);
		if (v && !cJSON_IsNull(v) && !cJSON_IsFalse(v) &&
		    !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0))
			return err_set(e, ERR_INVALID, ENOTSUP, "'%s' is not supported by deskbox",
				       fields[i]);
	}
	if (num(body, "gpu") > 0)
		return err_set(e, ERR_INVALID, ENOTSUP, "GPUs are not supported by deskbox");
	return 0;
}

/* Daytona's resources (cores, GiB) and intervals (minutes) in deskbox's
 * spec `spec`. */
static int map_resources(const cJSON *body, cJSON *spec, struct err *e)
{
	int64_t cpu, mem, disk, stop, del;
	if (args_int(body, "cpu", 1, 64, 0, 0, &cpu, e) < 0 ||
	    args_int(body, "memory", 1, 1024, 0, 0, &mem, e) < 0 ||
	    args_int(body, "disk", 1, 4096, 0, 0, &disk, e) < 0 ||
	    args_int(body, "autoStopInterval", 0, 10LL * 365 * 24 * 60, -1, 0, &stop, e) < 0 ||
	    args_int(body, "autoDeleteInterval", -1, 10LL * 365 * 24 * 60, -1, 0, &del, e) < 0)
		return err_code(e);
	if (cpu)
		cJSON_AddNumberToObject(spec, "cpu_millis", (double)cpu * 1000);
	if (mem)
		cJSON_AddNumberToObject(spec, "memory_mb", (double)mem * 1024);
	if (disk)
		cJSON_AddNumberToObject(spec, "disk_mb", (double)disk * 1024);
	/* Daytona stops an idle sandbox after autoStopInterval minutes (0:
	 * never) and deletes a stopped one after autoDeleteInterval (0: at
	 * once, "ephemeral"); deskbox's timeout counts from the create. */
	if (stop >= 0)
		cJSON_AddNumberToObject(spec, "timeout_s", (double)stop * 60);
	if (del > 0)
		return err_set(
		    e, ERR_INVALID, ENOTSUP,
		    "'autoDeleteInterval' other than 0 or -1 is not supported by deskbox");
	cJSON_AddStringToObject(spec, "on_timeout", del == 0 ? "delete" : "stop");
	return 0;
}

/* networkBlockAll / domainAllowList ("a.com,b.org") as deskbox's network. */
static int map_network(const cJSON *body, cJSON *spec, struct err *e)
{
	const char *allow = str(body, "domainAllowList");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "networkBlockAll"))) {
		cJSON_AddStringToObject(spec, "network", "none");
	} else if (allow && allow[0]) {
		cJSON *net = cJSON_AddObjectToObject(spec, "network");
		cJSON *list = cJSON_AddArrayToObject(net, "allow");
		char *copy = strdup(allow), *save = NULL;
		if (!copy)
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
			cJSON_AddItemToArray(list, cJSON_CreateString(t));
		free(copy);
	}
	const char *cidrs = str(body, "networkAllowList");
	if (cidrs && cidrs[0])
		return err_set(e, ERR_INVALID, ENOTSUP,
			       "'networkAllowList' (CIDRs) is not supported by deskbox: use "
			       "'domainAllowList'");
	return 0;
}

/* A Daytona create body as deskbox's create spec (the caller's). */
static int create_spec(const cJSON *body, cJSON **out, struct err *e)
{
	cJSON *spec = cJSON_CreateObject();
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(body, "env");
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(body, "labels");
	const char *name = str(body, "name"), *snapshot = str(body, "snapshot");
	int r = refuse_unsupported(body, e);
	if (r == 0 && env && !cJSON_IsObject(env))
		r = err_set(e, ERR_INVALID, EINVAL, "'env' must be an object");
	if (r == 0 && labels && !cJSON_IsObject(labels))
		r = err_set(e, ERR_INVALID, EINVAL, "'labels' must be an object");
	if (r == 0)
		r = map_resources(body, spec, e);
	if (r == 0)
		r = map_network(body, spec, e);
	if (r < 0) {
		cJSON_Delete(spec);
		return r;
	}
	if (env)
		add_dup(spec, "env", env);
	cJSON *meta = labels ? cJSON_Duplicate(labels, 1) : cJSON_CreateObject();
	if (!cJSON_GetObjectItemCaseSensitive(meta, DAYTONA_LANGUAGE_LABEL))
		cJSON_AddStringToObject(meta, DAYTONA_LANGUAGE_LABEL, "python");
	cJSON_AddItemToObject(spec, "metadata", meta);
	if (name && name[0])
		cJSON_AddStringToObject(spec, "name", name);
	/* A Daytona snapshot is the image a sandbox starts from. */
	if (snapshot && snapshot[0])
		cJSON_AddStringToObject(spec, "image", snapshot);
	*out = spec;
	return 0;
}

int dt_sandbox_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body, *spec_json;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	int r = create_spec(body, &spec_json, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	struct sandbox *sb;
	r = compat_create(api, spec_json, &sb, e);
	cJSON_Delete(spec_json);
	if (r < 0)
		return r;
	/* deskbox's create returns a running desktop: "started" at once. */
	return reply_sandbox(req, res, 200, sb, e);
}

int dt_sandbox_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	return reply_sandbox(req, res, 200, sb, e);
}

/* ?labels={"k":"v"} (JSON) as metadata conditions. */
static int label_filter(const cJSON *labels, struct sandbox_filter *f, size_t *n, struct err *e)
{
	*n = 0;
	if (!labels)
		return 0;
	if (!cJSON_IsObject(labels))
		return err_set(e, ERR_INVALID, EINVAL, "'labels' must be a JSON object");
	const cJSON *it;
	cJSON_ArrayForEach(it, labels)
	{
		if (*n >= SANDBOX_META_MAX_KEYS || !cJSON_IsString(it))
			return err_set(e, ERR_INVALID, EINVAL,
				       "'labels' must hold at most %d string values",
				       SANDBOX_META_MAX_KEYS);
		f[(*n)++] = (struct sandbox_filter){it->string, it->valuestring};
	}
	return 0;
}

static int state_arg(void *cls, const char *name, const char *value)
{
	const char **want = cls;
	if (strcmp(name, "states") != 0)
		return 0;
	want[1] = "";
	return strcmp(value, want[0]) == 0;
}

/* ?states=started&states=stopped: one of them (none asked: all). */
static int state_wanted(struct http_request *req, const cJSON *d)
{
	const char *want[2] = {str(d, "state"), NULL};
	return http_each_query(req, state_arg, want) == 1 || !want[1];
}

int dt_sandbox_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	const char *q = http_query(req, "labels");
	cJSON *labels = q ? cJSON_Parse(q) : NULL;
	if (q && !labels)
		return err_set(e, ERR_INVALID, EINVAL, "'labels' is not JSON");
	struct sandbox_filter f[SANDBOX_META_MAX_KEYS];
	size_t n;
	if (label_filter(labels, f, &n, e) < 0) {
		cJSON_Delete(labels);
		return err_code(e);
	}
	cJSON *list = sandboxes_json_where(api->sandboxes, f, n);
	cJSON_Delete(labels);
	cJSON *j = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(j, "items");
	const char *want_id = http_query(req, "id"), *want_name = http_query(req, "name");
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		cJSON *d = dto(req, it);
		if ((want_id && strcmp(str(d, "id"), want_id) != 0) ||
		    (want_name && strcmp(str(d, "name"), want_name) != 0) || !state_wanted(req, d))
			cJSON_Delete(d);
		else
			cJSON_AddItemToArray(items, d);
	}
	cJSON_Delete(list);
	cJSON_AddNullToObject(j, "nextCursor");
	cJSON_AddNumberToObject(j, "total", cJSON_GetArraySize(items));
	return http_reply_json(res, 200, j, e);
}

int dt_sandbox_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	cJSON *s = sandbox_json(sb);
	char id[128];
	snprintf(id, sizeof(id), "%s", sandbox_id(sb));
	sandbox_put(sb);
	if (sandbox_delete(api->sandboxes, id, e) < 0) {
		cJSON_Delete(s);
		return err_code(e);
	}
	cJSON *j = dto(req, s);
	cJSON_Delete(s);
	cJSON_ReplaceItemInObjectCaseSensitive(j, "state", cJSON_CreateString("destroyed"));
	return http_reply_json(res, 200, j, e);
}

int dt_sandbox_start(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_start(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	return reply_sandbox(req, res, 200, sb, e);
}

int dt_sandbox_stop(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_stop(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	return reply_sandbox(req, res, 200, sb, e);
}

/* PUT …/labels {"labels":{...}}: replaces them (a merge patch removing
 * the others); the code language stays unless the new labels name one. */
int dt_sandbox_labels(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(body, "labels");
	struct sandbox *sb;
	int r = cJSON_IsObject(labels)
		    ? sandbox_get(api->sandboxes, req->captures[0], &sb, e)
		    : err_set(e, ERR_INVALID, EINVAL, "'labels' must be an object");
	if (r < 0) {
		cJSON_Delete(body);
		return r;
	}
	cJSON *s = sandbox_json(sb);
	sandbox_put(sb);
	struct sandbox_patch p = {.metadata = cJSON_Duplicate(labels, 1)};
	const cJSON *old = cJSON_GetObjectItemCaseSensitive(s, "metadata"), *it;
	cJSON_ArrayForEach(it, old)
	{
		if (cJSON_GetObjectItemCaseSensitive(labels, it->string))
			continue;
		if (strcmp(it->string, DAYTONA_LANGUAGE_LABEL) == 0 ||
		    strncmp(it->string, DT_SESSION_KEY, strlen(DT_SESSION_KEY)) == 0)
			continue;
		cJSON_AddNullToObject(p.metadata, it->string);
	}
	cJSON_Delete(s);
	cJSON_Delete(body);
	r = sandbox_patch_apply(api->sandboxes, req->captures[0], &p, &sb, e);
	sandbox_patch_release(&p);
	if (r < 0)
		return r;
	s = sandbox_json(sb);
	sandbox_put(sb);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "labels", labels_of(s));
	cJSON_Delete(s);
	return http_reply_json(res, 200, j, e);
}

/* POST …/autostop/{minutes}: the sandbox stops that long from now (0:
 * never). */
int dt_sandbox_autostop(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	char *end;
	errno = 0;
	long long m = strtoll(req->captures[1], &end, 10);
	if (!req->captures[1][0] || *end || errno || m < 0 || m > 10LL * 365 * 24 * 60)
		return err_set(e, ERR_INVALID, EINVAL, "the interval must be a number of minutes");
	struct sandbox *sb;
	if (sandbox_set_timeout(api->sandboxes, req->captures[0], m * 60, &sb, e) < 0)
		return err_code(e);
	sandbox_put(sb);
	http_reply_empty(res, 200);
	return 0;
}

int dt_sandbox_proxy_url(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	sandbox_put(sb);
	char url[320];
	toolbox_url(req, url, sizeof(url));
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "url", url);
	return http_reply_json(res, 200, j, e);
}
