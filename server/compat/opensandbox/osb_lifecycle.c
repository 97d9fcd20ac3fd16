/* OpenSandbox's lifecycle API (`domain` = HOST:PORT/opensandbox, so its
 * base is http://HOST:PORT/opensandbox/v1) onto deskbox's sandboxes.  A
 * sandbox's execd (port 44772) is served by deskboxd itself under
 * /opensandbox/execd/{id}; other ports resolve to deskbox's port proxy.
 * Errors are {"code","message"}. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/text.h"
#include "common/args.h"
#include "common/clock.h"
#include "internal.h"

#define EXECD_PORT  44772
#define EGRESS_PORT 18080

void opensandbox_error(struct http_response *res, int status, const struct err *e)
{
	char code[48];
	snprintf(code, sizeof(code), "%s", err_kind_name(e->kind));
	for (char *p = code; *p; p++)
		if (*p >= 'a' && *p <= 'z')
			*p = (char)(*p - 'a' + 'A');
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "code", code);
	cJSON_AddStringToObject(j, "message", e->msg[0] ? e->msg : "internal error");
	if (http_reply_json(res, status, j, NULL) < 0)
		http_reply_empty(res, 500);
}

int osb_auth(struct http_request *req, struct err *e)
{
	const char *key = http_header(req, "OPEN-SANDBOX-API-KEY");
	if (!key && http_header(req, "Authorization"))
		return http_check_token(req, e);
	return http_check_secret(http_of(req), key, e);
}

int osb_unsupported(struct http_request *req, struct http_response *res, struct err *e)
{
	if (osb_auth(req, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "code", "NOT_SUPPORTED");
	char msg[256];
	snprintf(msg, sizeof(msg), "%s %.*s is not supported by deskbox", req->method,
		 UTF8_CUT(req->path, 160));
	cJSON_AddStringToObject(j, "message", msg);
	return http_reply_json(res, 501, j, e);
}

static const char *str(const cJSON *j, const char *name)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, name));
}

static const char *state_of(const char *status)
{
	static const char *const map[][2] = {
	    {"creating", "Pending"}, {"running", "Running"}, {"stopped", "Terminated"},
	    {"failed", "Failed"},    {"paused", "Paused"},   {"deleting", "Stopping"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (status && strcmp(status, map[i][0]) == 0)
			return map[i][1];
	return "Unknown";
}

/* OpenSandbox's view of deskbox's view `s` of a sandbox. */
static cJSON *sandbox_info(const cJSON *s)
{
	cJSON *j = cJSON_CreateObject();
	const char *id = str(s, "id"), *image = str(s, "image");
	cJSON_AddStringToObject(j, "id", id ? id : "");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(j, "image"), "uri",
				image ? image : "default");
	cJSON *st = cJSON_AddObjectToObject(j, "status");
	cJSON_AddStringToObject(st, "state", state_of(str(s, "status")));
	const char *reason = str(s, "reason");
	if (reason)
		cJSON_AddStringToObject(st, "reason", reason);
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(s, "metadata");
	cJSON_AddItemToObject(j, "metadata",
			      meta ? cJSON_Duplicate(meta, 1) : cJSON_CreateObject());
	cJSON *ep = cJSON_AddArrayToObject(j, "entrypoint");
	cJSON_AddItemToArray(ep, cJSON_CreateString("tail"));
	cJSON_AddItemToArray(ep, cJSON_CreateString("-f"));
	cJSON_AddItemToArray(ep, cJSON_CreateString("/dev/null"));
	char when[40];
	const cJSON *ca = cJSON_GetObjectItemCaseSensitive(s, "created_at");
	clock_rfc3339(cJSON_IsNumber(ca) ? (long long)ca->valuedouble * 1000 : 0, when,
		      sizeof(when));
	cJSON_AddStringToObject(j, "createdAt", when);
	const char *exp = str(s, "expires_at");
	if (exp)
		cJSON_AddStringToObject(j, "expiresAt", exp);
	else
		cJSON_AddNullToObject(j, "expiresAt");
	return j;
}

static int reply_sandbox(struct http_response *res, int status, struct sandbox *sb, struct err *e)
{
	cJSON *s = sandbox_json(sb);
	sandbox_put(sb);
	cJSON *j = sandbox_info(s);
	cJSON_Delete(s);
	return http_reply_json(res, status, j, e);
}

/* A Kubernetes quantity: CPU ("500m", "1", "1.5") in millicores, memory
 * ("512Mi", "1Gi", "1G", "1048576") in MiB.  -1 when malformed. */
static double quantity(const char *q, int cpu)
{
	static const struct {
		const char *suffix;
		double factor;
	} units[] = {
	    {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
	    {"k", 1e3},	    {"K", 1e3},	       {"M", 1e6},	     {"G", 1e9},
	    {"T", 1e12},    {"m", 1e-3}};
	char *end;
	errno = 0;
	double v = q ? strtod(q, &end) : -1;
	if (!q || end == q || errno || v < 0 || !isfinite(v))
		return -1;
	double f = 1;
	if (*end) {
		size_t i;
		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (strcmp(end, units[i].suffix) == 0)
				break;
		if (i == sizeof(units) / sizeof(units[0]))
			return -1;
		f = units[i].factor;
	}
	return cpu ? v * f * 1000.0 : v * f / 1048576.0;
}

/* resourceLimits {"cpu":"500m","memory":"512Mi"} into `spec`. */
static int map_resources(const cJSON *rl, cJSON *spec, struct err *e)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, rl)
	{
		int cpu = strcmp(it->string, "cpu") == 0;
		if (!cpu && strcmp(it->string, "memory") != 0)
			return err_set(e, ERR_INVALID, ENOTSUP,
				       "resource '%.*s' is not supported by deskbox (cpu, memory)",
				       UTF8_CUT(it->string, 32));
		double v = cJSON_IsString(it) ? quantity(it->valuestring, cpu) : -1;
		if (v < (cpu ? 10 : 64) || v > (cpu ? 256000 : 1 << 20))
			return err_set(e, ERR_INVALID, EINVAL, "bad %s quantity", it->string);
		cJSON_AddNumberToObject(spec, cpu ? "cpu_millis" : "memory_mb", floor(v));
	}
	return 0;
}

/* networkPolicy {defaultAction, egress:[{action, target}]}: a deny-by-default
 * allow list (FQDNs, "*." wildcards) or plain internet access. */
static int map_network(const cJSON *np, cJSON *spec, struct err *e)
{
	const char *def = str(np, "defaultAction");
	const cJSON *egress = cJSON_GetObjectItemCaseSensitive(np, "egress"), *it;
	int deny = !def || strcmp(def, "deny") == 0;
	if (!deny && strcmp(def, "allow") != 0)
		return err_set(e, ERR_INVALID, EINVAL, "'defaultAction' must be allow or deny");
	cJSON *allow = cJSON_CreateArray();
	if (!cJSON_IsArray(egress))
		egress = NULL;
	cJSON_ArrayForEach(it, egress)
	{
		const char *action = str(it, "action"), *target = str(it, "target");
		int allows = action && strcmp(action, "allow") == 0;
		if (!target || !allows || !deny) {
			cJSON_Delete(allow);
			return err_set(
			    e, ERR_INVALID, ENOTSUP,
			    "egress rules must be 'allow' rules under defaultAction deny "
			    "(deskbox has no deny list)");
		}
		cJSON_AddItemToArray(allow, cJSON_CreateString(target));
	}
	if (deny && !cJSON_GetArraySize(allow)) { /* deny with no rule: no network */
		cJSON_Delete(allow);
		cJSON_AddStringToObject(spec, "network", "none");
	} else if (deny)
		cJSON_AddItemToObject(cJSON_AddObjectToObject(spec, "network"), "allow", allow);
	else {
		cJSON_Delete(allow);
		cJSON_AddStringToObject(spec, "network", "internet");
	}
	return 0;
}

/* A stored image's name for an image URI ("python:3.12" is
 * "python-3.12"). */
static int map_image(const cJSON *body, cJSON *spec, struct err *e)
{
	const cJSON *image = cJSON_GetObjectItemCaseSensitive(body, "image");
	const char *uri = cJSON_IsString(image) ? image->valuestring : str(image, "uri");
	if (str(body, "snapshotId"))
		return err_set(e, ERR_INVALID, ENOTSUP, "'snapshotId' is not supported by deskbox");
	if (cJSON_GetObjectItemCaseSensitive(image, "auth"))
		return err_set(e, ERR_INVALID, ENOTSUP,
			       "registry credentials are not supported by deskbox: import the "
			       "image (docs/images.md)");
	if (!uri || !uri[0])
		return err_set(e, ERR_INVALID, EINVAL, "'image.uri' is required");
	char name[128];
	size_t n = 0;
	for (const char *p = uri; *p && n + 1 < sizeof(name); p++)
		name[n++] = *p == ':' || *p == '/' || *p == '@' ? '-' : *p;
	name[n] = '\0';
	cJSON_AddStringToObject(spec, "image", name);
	return 0;
}

static int create_spec(const cJSON *body, cJSON **out, struct err *e)
{
	static const char *const refused[] = {"volumes", "credentialProxy", "platform",
					      "resourceRequests"};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, refused[i]);
		if (v && !cJSON_IsNull(v) && !(cJSON_IsArray(v) && !cJSON_GetArraySize(v)))
			return err_set(e, ERR_INVALID, ENOTSUP, "'%s' is not supported by deskbox",
				       refused[i]);
	}
	cJSON *spec = cJSON_CreateObject();
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(body, "env");
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(body, "metadata");
	const cJSON *np = cJSON_GetObjectItemCaseSensitive(body, "networkPolicy");
	int64_t timeout;
	int r = map_image(body, spec, e);
	if (r == 0)
		r = map_resources(cJSON_GetObjectItemCaseSensitive(body, "resourceLimits"), spec,
				  e);
	if (r == 0 && np && !cJSON_IsNull(np))
		r = map_network(np, spec, e);
	if (r == 0)
		r = args_int(body, "timeout", 0, SANDBOX_TIMEOUT_MAX, 0, 0, &timeout, e);
	if (r < 0) {
		cJSON_Delete(spec);
		return r;
	}
	/* OpenSandbox's expiry ends the sandbox. */
	cJSON_AddNumberToObject(spec, "timeout_s", (double)timeout);
	cJSON_AddStringToObject(spec, "on_timeout", "delete");
	if (env && cJSON_GetArraySize(env))
		cJSON_AddItemToObject(spec, "env", cJSON_Duplicate(env, 1));
	if (meta && cJSON_GetArraySize(meta))
		cJSON_AddItemToObject(spec, "metadata", cJSON_Duplicate(meta, 1));
	*out = spec;
	return 0;
}

static int osb_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body, *spec_json = NULL;
	if (osb_auth(req, e) < 0 || http_json_body(req, &body, e) < 0)
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
	return reply_sandbox(res, 202, sb, e);
}

static int osb_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (osb_auth(req, e) < 0 || sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	return reply_sandbox(res, 200, sb, e);
}

/* Lifecycle verbs answered with no body: delete 204, pause and resume 202. */
static int osb_verb(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb = NULL;
	const char *id = req->captures[0];
	int r = osb_auth(req, e);
	if (r == 0 && strcmp(req->method, "DELETE") == 0) {
		if ((r = sandbox_delete(api->sandboxes, id, e)) == 0)
			http_reply_empty(res, 204);
		return r;
	}
	if (r == 0)
		r = strstr(req->path, "/pause") ? sandbox_pause(api->sandboxes, id, &sb, e)
						: sandbox_resume(api->sandboxes, id, &sb, e);
	if (r < 0)
		return r;
	sandbox_put(sb);
	http_reply_empty(res, 202);
	return 0;
}

/* POST …/renew-expiration {"expiresAt":"2026-12-02T08:10:00.000Z"}. */
static int osb_renew(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (osb_auth(req, e) < 0 || http_json_body(req, &body, e) < 0)
		return err_code(e);
	const char *at = str(body, "expiresAt");
	struct tm tm = {0};
	const char *rest = at ? strptime(at, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	int r = 0;
	if (!rest || (*rest == '.' && !(rest += 1 + strspn(rest + 1, "0123456789"))) ||
	    (strcmp(rest, "Z") != 0 && strcmp(rest, "+00:00") != 0))
		r = err_set(e, ERR_INVALID, EINVAL, "'expiresAt' must be an RFC 3339 UTC time");
	long long left = r == 0 ? (long long)timegm(&tm) - clock_wall_ms() / 1000 : 0;
	if (r == 0 && left < 1)
		r = err_set(e, ERR_INVALID, EINVAL, "'expiresAt' must be in the future");
	struct sandbox *sb;
	if (r == 0)
		r = sandbox_set_timeout(api->sandboxes, req->captures[0], left, &sb, e);
	if (r < 0) {
		cJSON_Delete(body);
		return r;
	}
	cJSON *s = sandbox_json(sb);
	sandbox_put(sb);
	cJSON *j = cJSON_CreateObject();
	const char *exp = str(s, "expires_at");
	cJSON_AddStringToObject(j, "expiresAt", exp ? exp : at);
	cJSON_Delete(s);
	cJSON_Delete(body);
	return http_reply_json(res, 200, j, e);
}

struct list_q {
	const char *states[8];
	size_t n_states;
	const char *metadata;
};

static int list_arg(void *cls, const char *name, const char *value)
{
	struct list_q *q = cls;
	if (strcmp(name, "state") == 0 && q->n_states < 8)
		q->states[q->n_states++] = value;
	else if (strcmp(name, "metadata") == 0)
		q->metadata = value;
	return 0;
}

/* ?metadata=k%3Dv%26k2%3Dv2 as conditions (pointing into `buf`). */
static int meta_filter(const char *m, char *buf, size_t size, struct sandbox_filter *f, size_t *n,
		       struct err *e)
{
	*n = 0;
	if (!m)
		return 0;
	if (snprintf(buf, size, "%s", m) >= (int)size)
		return err_set(e, ERR_INVALID, E2BIG, "'metadata' too long");
	char *save = NULL;
	for (char *t = strtok_r(buf, "&", &save); t; t = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(t, '=');
		if (!eq || *n >= SANDBOX_META_MAX_KEYS)
			return err_set(e, ERR_INVALID, EINVAL, "'metadata' must be k=v&k2=v2");
		*eq = '\0';
		f[(*n)++] = (struct sandbox_filter){t, eq + 1};
	}
	return 0;
}

static int osb_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct list_q q = {0};
	struct sandbox_filter f[SANDBOX_META_MAX_KEYS];
	size_t n;
	char buf[4096];
	int64_t page, size;
	if (osb_auth(req, e) < 0 || http_query_int(req, "page", 1, 1 << 20, 1, 0, &page, e) < 0 ||
	    http_query_int(req, "pageSize", 1, 1000, 20, 0, &size, e) < 0)
		return err_code(e);
	http_each_query(req, list_arg, &q);
	if (meta_filter(q.metadata, buf, sizeof(buf), f, &n, e) < 0)
		return err_code(e);
	cJSON *list = sandboxes_json_where(api->sandboxes, f, n);
	cJSON *j = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(j, "items");
	const cJSON *it;
	int64_t total = 0;
	cJSON_ArrayForEach(it, list)
	{
		cJSON *info = sandbox_info(it);
		const char *state = str(cJSON_GetObjectItemCaseSensitive(info, "status"), "state");
		int want = q.n_states == 0;
		for (size_t i = 0; i < q.n_states; i++)
			want |= strcmp(q.states[i], state) == 0;
		if (want && total >= (page - 1) * size && total < page * size)
			cJSON_AddItemToArray(items, info);
		else
			cJSON_Delete(info);
		total += want;
	}
	cJSON_Delete(list);
	cJSON *p = cJSON_AddObjectToObject(j, "pagination");
	cJSON_AddNumberToObject(p, "page", (double)page);
	cJSON_AddNumberToObject(p, "pageSize", (double)size);
	cJSON_AddNumberToObject(p, "totalItems", (double)total);
	cJSON_AddNumberToObject(p, "totalPages", (double)((total + size - 1) / size));
	cJSON_AddBoolToObject(p, "hasNextPage", page * size < total);
	return http_reply_json(res, 200, j, e);
}

/* GET …/endpoints/{port}: execd is deskboxd's own /opensandbox/execd/{id};
 * other ports are deskbox's port proxy (the endpoint carries the header
 * it wants).  No scheme: the SDK puts its own in front. */
static int osb_endpoint(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (osb_auth(req, e) < 0 || sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	char id[128];
	snprintf(id, sizeof(id), "%s", sandbox_id(sb));
	sandbox_put(sb);
	char *end;
	long port = strtol(req->captures[1], &end, 10);
	if (*end || port < 1 || port > 65535)
		return err_set(e, ERR_INVALID, EINVAL, "bad port '%.*s'",
			       UTF8_CUT(req->captures[1], 16));
	const char *host = http_header(req, "Host");
	char ep[512];
	cJSON *j = cJSON_CreateObject();
	if (port == EXECD_PORT || port == EGRESS_PORT) {
		snprintf(ep, sizeof(ep), "%s" OSB "/%s/%s", host ? host : "localhost",
			 port == EXECD_PORT ? "execd" : "egress", id);
	} else {
		snprintf(ep, sizeof(ep), "%s/v1/sandboxes/%s/ports/%ld", host ? host : "localhost",
			 id, port);
		const char *key = http_header(req, "OPEN-SANDBOX-API-KEY");
		char bearer[300];
		snprintf(bearer, sizeof(bearer), "Bearer %s", key ? key : "");
		if (key)
			cJSON_AddStringToObject(cJSON_AddObjectToObject(j, "headers"),
						"Authorization", bearer);
	}
	cJSON_AddStringToObject(j, "endpoint", ep);
	return http_reply_json(res, 200, j, e);
}

/* The SDK's telemetry after a create: nothing to keep. */
static int osb_metrics_event(struct http_request *req, struct http_response *res, struct err *e)
{
	if (osb_auth(req, e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}

#define SBX OSB "/v1/sandboxes/{id}"
#define NA  HTTP_NO_AUTH

const struct http_route opensandbox_routes[] = {
    {"POST", OSB "/v1/sandboxes", osb_create, NA, NULL, NULL, NULL},
    {"GET", OSB "/v1/sandboxes", osb_list, NA, NULL, NULL, NULL},
    {"GET", SBX, osb_get, NA, NULL, NULL, NULL},
    {"DELETE", SBX, osb_verb, NA, NULL, NULL, NULL},
    {"POST", SBX "/pause", osb_verb, NA, NULL, NULL, NULL},
    {"POST", SBX "/resume", osb_verb, NA, NULL, NULL, NULL},
    {"POST", SBX "/renew-expiration", osb_renew, NA, NULL, NULL, NULL},
    {"GET", SBX "/endpoints/{port}", osb_endpoint, NA, NULL, NULL, NULL},
    {"POST", OSB "/v1/metrics/events", osb_metrics_event, NA, NULL, NULL, NULL},
    {"PATCH", SBX "/metadata", osb_unsupported, NA, NULL, NULL, NULL},
    {"*", SBX "/snapshots", osb_unsupported, NA, NULL, NULL, NULL},
    {"*", OSB "/v1/snapshots", osb_unsupported, NA, NULL, NULL, NULL},
    {"*", OSB "/v1/snapshots/{sid}", osb_unsupported, NA, NULL, NULL, NULL},

    {"GET", OSB_EXECD "/ping", osb_ping, NA, NULL, NULL, NULL},
    {"POST", OSB_EXECD "/command", osb_command, NA, NULL, NULL, NULL},
    {"POST", OSB_EXECD "/files/upload", osb_upload, NA | HTTP_STREAM_BODY, osb_upload_begin, NULL,
     NULL},
    {"GET", OSB_EXECD "/files/download", osb_download, NA, NULL, NULL, NULL},
    {"GET", OSB_EXECD "/files/info", osb_file_info, NA, NULL, NULL, NULL},
    {"DELETE", OSB_EXECD "/files", osb_remove, NA, NULL, NULL, NULL},
    {"DELETE", OSB_EXECD "/directories", osb_remove, NA, NULL, NULL, NULL},
    {"POST", OSB_EXECD "/directories", osb_mkdirs, NA, NULL, NULL, NULL},
    {"POST", OSB_EXECD "/files/mv", osb_move, NA, NULL, NULL, NULL},
    {"*", OSB_EXECD "/{path*}", osb_unsupported, NA, NULL, NULL, NULL},
    {"*", OSB "/egress/{id}/{path*}", osb_unsupported, NA, NULL, NULL, NULL},
};
const size_t opensandbox_n_routes = sizeof(opensandbox_routes) / sizeof(opensandbox_routes[0]);
