/* Sprites' REST (`new SpritesClient(token, {baseURL: "http://HOST:PORT/sprites"})`)
 * onto deskbox's sandboxes: a sprite is a sandbox named after it, its
 * checkpoints are the sandbox's (ids v0, v1, ... with the comment kept in
 * the sandbox's metadata), its URL the port proxy's address of port 8080.
 * Errors are {"error":"<code>","message"}. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/args.h"
#include "common/clock.h"
#include "internal.h"

#define SP "/sprites/v1/sprites"
/* Metadata keys deskbox keeps a sprite's labels and checkpoint comments
 * under. */
#define LABELS_KEY  "sprites/labels"
#define COMMENT_KEY "sprites/checkpoint/"

void sprites_error(struct http_response *res, int status, const struct err *e)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "error", err_kind_name(e->kind));
	cJSON_AddStringToObject(j, "message", e->msg[0] ? e->msg : "internal error");
	if (http_reply_json(res, status, j, NULL) < 0)
		http_reply_empty(res, 500);
}

static const char *str(const cJSON *j, const char *name)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, name));
}

static double num(const cJSON *j, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* The sprite object for deskbox's view `s` of a sandbox. */
static cJSON *sprite_json(struct http_request *req, const cJSON *s)
{
	cJSON *j = cJSON_CreateObject();
	const char *id = str(s, "id"), *name = str(s, "name"), *st = str(s, "status");
	cJSON_AddStringToObject(j, "id", id ? id : "");
	cJSON_AddStringToObject(j, "name", name ? name : id ? id : "");
	cJSON_AddStringToObject(j, "organization", "deskbox");
	/* Fly's cold / warm / running: stopped, paused, running. */
	const char *status = !st || strcmp(st, "running") == 0 ? "running"
			     : strcmp(st, "paused") == 0       ? "warm"
							       : "cold";
	cJSON_AddStringToObject(j, "status", status);
	cJSON *cfg = cJSON_AddObjectToObject(j, "config");
	cJSON_AddNumberToObject(cfg, "ram_mb", num(s, "memory_mb"));
	cJSON_AddNumberToObject(cfg, "cpus", num(s, "cpu_millis") / 1000.0);
	cJSON_AddNumberToObject(cfg, "storage_gb", num(s, "disk_mb") / 1024.0);
	cJSON_AddStringToObject(cfg, "region", "local");
	cJSON_AddItemToObject(j, "environment", cJSON_CreateObject());
	char when[40], url[320];
	clock_rfc3339((long long)num(s, "created_at") * 1000, when, sizeof(when));
	cJSON_AddStringToObject(j, "created_at", when);
	cJSON_AddStringToObject(j, "updated_at", when);
	const char *host = http_header(req, "Host");
	snprintf(url, sizeof(url), "%s://%s/v1/sandboxes/%s/ports/8080/",
		 http_request_tls(req) ? "https" : "http", host ? host : "localhost", id ? id : "");
	cJSON_AddStringToObject(j, "url", url);
	cJSON *us = cJSON_AddObjectToObject(j, "url_settings");
	cJSON_AddStringToObject(us, "auth", "sprite");
	cJSON *labels = cJSON_AddArrayToObject(j, "labels");
	const char *l = str(cJSON_GetObjectItemCaseSensitive(s, "metadata"), LABELS_KEY);
	char *copy = l ? strdup(l) : NULL, *save = NULL;
	for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
		cJSON_AddItemToArray(labels, cJSON_CreateString(t));
	free(copy);
	return j;
}

static int reply_sprite(struct http_request *req, struct http_response *res, int status,
			struct sandbox *sb, struct err *e)
{
	cJSON *s = sandbox_json(sb);
	sandbox_put(sb);
	cJSON *j = sprite_json(req, s);
	cJSON_Delete(s);
	return http_reply_json(res, status, j, e);
}

/* {name, config:{ram_mb,cpus,storage_gb}, environment, labels[]} as
 * deskbox's create spec. */
static int create_spec(const cJSON *body, cJSON **out, struct err *e)
{
	const char *name = str(body, "name");
	if (!name || !sandbox_name_ok(name))
		return err_set(e, ERR_INVALID, EINVAL,
			       "'name' must be 1-%d of a-z 0-9 '-', starting with a letter",
			       SANDBOX_NAME_MAX);
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(body, "config");
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(body, "environment");
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(body, "labels"), *it;
	int64_t ram = 0, disk = 0;
	double cpus = 0;
	if (cfg && (args_int(cfg, "ram_mb", 64, 1 << 20, 0, 0, &ram, e) < 0 ||
		    args_double(cfg, "cpus", 0.01, 256, 0, 0, &cpus, e) < 0 ||
		    args_int(cfg, "storage_gb", 1, 4096, 0, 0, &disk, e) < 0))
		return err_code(e);
	if (env && !cJSON_IsObject(env))
		return err_set(e, ERR_INVALID, EINVAL, "'environment' must be an object");
	char joined[SANDBOX_META_VALUE_MAX + 1] = "";
	if (!cJSON_IsArray(labels))
		labels = NULL;
	cJSON_ArrayForEach(it, labels)
	{
		size_t len = strlen(joined);
		if (!cJSON_IsString(it) || strchr(it->valuestring, ',') ||
		    snprintf(joined + len, sizeof(joined) - len, "%s%s", len ? "," : "",
			     it->valuestring) >= (int)(sizeof(joined) - len))
			return err_set(e, ERR_INVALID, EINVAL,
				       "'labels' must be strings without ',' (%d bytes in all)",
				       SANDBOX_META_VALUE_MAX);
	}
	cJSON *spec = cJSON_CreateObject();
	cJSON_AddStringToObject(spec, "name", name);
	if (ram)
		cJSON_AddNumberToObject(spec, "memory_mb", (double)ram);
	if (cpus > 0)
		cJSON_AddNumberToObject(spec, "cpu_millis", cpus * 1000 < 10 ? 10 : cpus * 1000);
	if (disk)
		cJSON_AddNumberToObject(spec, "disk_mb", (double)disk * 1024);
	if (env)
		cJSON_AddItemToObject(spec, "env", cJSON_Duplicate(env, 1));
	if (joined[0])
		cJSON_AddStringToObject(cJSON_AddObjectToObject(spec, "metadata"), LABELS_KEY,
					joined);
	*out = spec;
	return 0;
}

static int sp_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body, *spec_json = NULL;
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
	return reply_sprite(req, res, 201, sb, e);
}

static int sp_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	return reply_sprite(req, res, 200, sb, e);
}

static int sp_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	if (sandbox_delete(api->sandboxes, req->captures[0], e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}

/* GET /v1/sprites?prefix=&max_results=: every sprite in one page. */
static int sp_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	const char *prefix = http_query(req, "prefix");
	cJSON *list = sandboxes_json(api->sandboxes);
	cJSON *j = cJSON_CreateObject(), *sprites = cJSON_AddArrayToObject(j, "sprites");
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		cJSON *sp = sprite_json(req, it);
		const char *name = str(sp, "name");
		if (prefix && strncmp(name, prefix, strlen(prefix)) != 0)
			cJSON_Delete(sp);
		else
			cJSON_AddItemToArray(sprites, sp);
	}
	cJSON_Delete(list);
	cJSON_AddBoolToObject(j, "has_more", 0);
	cJSON_AddNullToObject(j, "next_continuation_token");
	return http_reply_json(res, 200, j, e);
}

/* ---- checkpoints ---- */

static cJSON *checkpoint_json(const cJSON *cp, const cJSON *meta)
{
	const char *id = str(cp, "name"), *when = str(cp, "created_at");
	char key[SANDBOX_META_KEY_MAX + 1];
	snprintf(key, sizeof(key), COMMENT_KEY "%s", id ? id : "");
	const char *comment = str(meta, key);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", id ? id : "");
	cJSON_AddStringToObject(j, "create_time", when ? when : "");
	cJSON_AddStringToObject(j, "comment", comment ? comment : "");
	cJSON_AddItemToObject(j, "history", cJSON_CreateArray());
	cJSON_AddBoolToObject(j, "is_auto", 0);
	cJSON_AddStringToObject(j, "source_id", "");
	cJSON_AddStringToObject(j, "health", "ok");
	return j;
}

/* The sandbox's checkpoints (*list) and metadata (*meta), the caller's. */
static int checkpoints(struct api *api, const char *id, cJSON **list, cJSON **meta, struct err *e)
{
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, id, &sb, e) < 0)
		return err_code(e);
	cJSON *s = sandbox_json(sb);
	sandbox_put(sb);
	*meta = cJSON_DetachItemFromObjectCaseSensitive(s, "metadata");
	cJSON_Delete(s);
	if (sandbox_checkpoints_list(api->sandboxes, id, list, e) < 0) {
		cJSON_Delete(*meta);
		return err_code(e);
	}
	return 0;
}

static int reply_ndjson(struct http_response *res, const char *type, const char *msg, struct err *e)
{
	char when[40];
	clock_rfc3339(clock_wall_ms(), when, sizeof(when));
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "type", type);
	cJSON_AddStringToObject(j, "data", msg);
	cJSON_AddStringToObject(j, "time", when);
	char *line = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	char *body = line ? malloc(strlen(line) + 2) : NULL;
	if (!body) {
		free(line);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	sprintf(body, "%s\n", line);
	free(line);
	http_reply_data(res, 200, "application/x-ndjson", body, strlen(body));
	return 0;
}

/* POST …/checkpoint {"comment"?}: checkpoint "vN" (the first N free). */
static int sp_checkpoint(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body, *list, *meta, *made = NULL;
	const char *comment;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	int r = args_string(body, "comment", SANDBOX_META_VALUE_MAX, 0, &comment, e);
	if (r == 0)
		r = checkpoints(api, req->captures[0], &list, &meta, e);
	if (r < 0) {
		cJSON_Delete(body);
		return r;
	}
	char id[16];
	for (int n = cJSON_GetArraySize(list);; n++) {
		snprintf(id, sizeof(id), "v%d", n);
		int taken = 0;
		const cJSON *it;
		cJSON_ArrayForEach(it, list) taken |= strcmp(str(it, "name"), id) == 0;
		if (!taken)
			break;
	}
	cJSON_Delete(list);
	cJSON_Delete(meta);
	struct sandbox *sb;
	r = sandbox_checkpoint_create(api->sandboxes, req->captures[0], id, &made, e);
	cJSON_Delete(made);
	if (r == 0 && comment && comment[0]) {
		char key[SANDBOX_META_KEY_MAX + 1];
		snprintf(key, sizeof(key), COMMENT_KEY "%s", id);
		struct sandbox_patch p = {.metadata = cJSON_CreateObject()};
		cJSON_AddStringToObject(p.metadata, key, comment);
		r = sandbox_patch_apply(api->sandboxes, req->captures[0], &p, &sb, e);
		sandbox_patch_release(&p);
		if (r == 0)
			sandbox_put(sb);
	}
	cJSON_Delete(body);
	if (r < 0)
		return r;
	char msg[64];
	snprintf(msg, sizeof(msg), "Checkpoint %s created", id);
	return reply_ndjson(res, "complete", msg, e);
}

static int sp_checkpoints(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *list, *meta;
	if (checkpoints(req->app, req->captures[0], &list, &meta, e) < 0)
		return err_code(e);
	const char *want = req->n_captures > 1 ? req->captures[1] : NULL;
	cJSON *j = want ? NULL : cJSON_CreateArray();
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		if (!want)
			cJSON_AddItemToArray(j, checkpoint_json(it, meta));
		else if (!j && strcmp(str(it, "name"), want) == 0)
			j = checkpoint_json(it, meta);
	}
	cJSON_Delete(list);
	cJSON_Delete(meta);
	if (!j)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no checkpoint '%.*s'",
			       UTF8_CUT(want, 64));
	return http_reply_json(res, 200, j, e);
}

/* POST …/checkpoints/{id}/restore: the filesystem rewound in place, the
 * processes restarted (as Fly does). */
static int sp_restore(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_checkpoint_restore(api->sandboxes, req->captures[0], req->captures[1], &sb, e) <
	    0)
		return err_code(e);
	sandbox_put(sb);
	char msg[96];
	snprintf(msg, sizeof(msg), "Restored checkpoint %.*s", UTF8_CUT(req->captures[1], 64));
	return reply_ndjson(res, "complete", msg, e);
}

/* ---- network policy ---- */

/* GET …/policy/network: deskbox's network as rules by domain. */
static int sp_policy_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	cJSON *s = sandbox_json(sb);
	sandbox_put(sb);
	const cJSON *net = cJSON_GetObjectItemCaseSensitive(s, "network"), *it;
	cJSON *j = cJSON_CreateObject(), *rules = cJSON_AddArrayToObject(j, "rules");
	if (cJSON_IsString(net) && strcmp(net->valuestring, "internet") == 0) {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddStringToObject(r, "domain", "*");
		cJSON_AddStringToObject(r, "action", "allow");
		cJSON_AddItemToArray(rules, r);
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(net, "allow"))
	{
		cJSON *r = cJSON_CreateObject();
		cJSON_AddStringToObject(r, "domain", cJSON_IsString(it) ? it->valuestring : "");
		cJSON_AddStringToObject(r, "action", "allow");
		cJSON_AddItemToArray(rules, r);
	}
	cJSON_Delete(s);
	return http_reply_json(res, 200, j, e);
}

/* POST …/policy/network {"rules":[{"domain","action":"allow"}...]}: the
 * allowed domains become deskbox's allow list (no rules: no network; "*":
 * the internet); deskbox has no deny rules.  Answers exactly 204. */
static int sp_policy_set(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const cJSON *rules = cJSON_GetObjectItemCaseSensitive(body, "rules"), *it;
	cJSON *v = cJSON_CreateObject(), *allow = cJSON_AddArrayToObject(v, "allow");
	int r =
	    cJSON_IsArray(rules) ? 0 : err_set(e, ERR_INVALID, EINVAL, "'rules' must be an array");
	int internet = 0;
	if (r < 0)
		rules = NULL;
	cJSON_ArrayForEach(it, rules)
	{
		const char *domain = str(it, "domain"), *action = str(it, "action");
		if (!domain || !action || strcmp(action, "allow") != 0) {
			r = err_set(e, ERR_INVALID, ENOTSUP,
				    "only {\"domain\",\"action\":\"allow\"} rules are supported by "
				    "deskbox (no deny rules, no includes)");
			break;
		}
		if (strcmp(domain, "*") == 0)
			internet = 1;
		else
			cJSON_AddItemToArray(allow, cJSON_CreateString(domain));
	}
	cJSON_Delete(body);
	cJSON *net = internet			 ? cJSON_CreateString("internet")
		     : cJSON_GetArraySize(allow) ? cJSON_Duplicate(v, 1)
						 : cJSON_CreateString("none");
	cJSON_Delete(v);
	struct sandbox *sb;
	if (r == 0 && sandbox_set_network(api->sandboxes, req->captures[0], net, &sb, e) < 0)
		r = err_code(e);
	cJSON_Delete(net);
	if (r < 0)
		return r;
	sandbox_put(sb);
	http_reply_empty(res, 204);
	return 0;
}

/* What deskbox has no counterpart for. */
static int sp_unsupported(struct http_request *req, struct http_response *res, struct err *e)
{
	char msg[256];
	snprintf(msg, sizeof(msg), "%s %.*s is not supported by deskbox", req->method,
		 UTF8_CUT(req->path, 160));
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "error", "not_supported");
	cJSON_AddStringToObject(j, "message", msg);
	return http_reply_json(res, 501, j, e);
}

const struct http_route sprites_routes[] = {
    {"POST", SP, sp_create, 0, NULL, NULL, NULL},
    {"GET", SP, sp_list, 0, NULL, NULL, NULL},
    {"GET", SP "/{name}", sp_get, 0, NULL, NULL, NULL},
    {"DELETE", SP "/{name}", sp_delete, 0, NULL, NULL, NULL},
    {"GET", SP "/{name}/exec", sp_exec, 0, NULL, NULL, NULL},
    {"POST", SP "/{name}/checkpoint", sp_checkpoint, 0, NULL, NULL, NULL},
    {"GET", SP "/{name}/checkpoints", sp_checkpoints, 0, NULL, NULL, NULL},
    {"GET", SP "/{name}/checkpoints/{cp}", sp_checkpoints, 0, NULL, NULL, NULL},
    {"POST", SP "/{name}/checkpoints/{cp}/restore", sp_restore, 0, NULL, NULL, NULL},
    {"*", SP "/{name}/exec/{path*}", sp_unsupported, 0, NULL, NULL, NULL},
    {"*", SP "/{name}/proxy", sp_unsupported, 0, NULL, NULL, NULL},
    {"*", SP "/{name}/control", sp_unsupported, 0, NULL, NULL, NULL},
    {"*", SP "/{name}/fs/{path*}", sp_unsupported, 0, NULL, NULL, NULL},
    {"GET", SP "/{name}/policy/network", sp_policy_get, 0, NULL, NULL, NULL},
    {"POST", SP "/{name}/policy/network", sp_policy_set, 0, NULL, NULL, NULL},
    {"*", SP "/{name}/policy/{path*}", sp_unsupported, 0, NULL, NULL, NULL},
    {"*", SP "/{name}/services", sp_unsupported, 0, NULL, NULL, NULL},
    {"*", SP "/{name}/services/{path*}", sp_unsupported, 0, NULL, NULL, NULL},
    {"*", SP "/{name}/ports/watch", sp_unsupported, 0, NULL, NULL, NULL},
    {"PUT", SP "/{name}", sp_unsupported, 0, NULL, NULL, NULL},
    {"POST", SP "/{name}/upgrade", sp_unsupported, 0, NULL, NULL, NULL},
    {"POST", SP "/{name}/restart", sp_unsupported, 0, NULL, NULL, NULL},
};
const size_t sprites_n_routes = sizeof(sprites_routes) / sizeof(sprites_routes[0]);
