/* compat/e2b: E2B's control plane (sandboxes) onto server/sandbox.
 *
 * A create is a deskbox create: timeout → timeout_s with on_timeout
 * "delete" (E2B kills a sandbox at its end; "pause" with autoPause),
 * envVars → env, metadata → metadata, allow_internet_access → network.
 * The template's name is kept in the metadata key TEMPLATE_KEY (not shown
 * back as metadata).  "paused" is E2B's name for both of deskbox's
 * paused and stopped states; connect resumes or starts either. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "common/args.h"
#include "server/api/api.h"
#include "server/compat/internal.h"
#include "server/sandbox/sandbox.h"

/* The envd protocol version deskbox speaks: 0.4.0 or later (no default
 * user "user" forced on every call), before 0.5.7 (which makes the SDK
 * upload with raw octet-stream bodies instead of multipart). */
#define ENVD_VERSION	    "0.5.2"
#define TEMPLATE_KEY	    "e2b.template"
#define DEFAULT_TEMPLATE    "base"
#define E2B_TIMEOUT_MAX	    (30 * 86400)
#define E2B_TIMEOUT_DEFAULT 300

static int template_ok(const char *t)
{
	size_t n = strlen(t);
	if (n == 0 || n > 128)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)t[i]) && !strchr("-_.:/", t[i]))
			return 0;
	return 1;
}

static void iso_time(long long secs, char *buf, size_t size)
{
	time_t t = (time_t)secs;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *state_of(const char *status)
{
	return status && strcmp(status, "running") == 0 ? "running" : "paused";
}

/* The E2B form of a sandbox (sandbox_json's view `d`); `token`, when not
 * NULL, is handed back as the in-sandbox planes' access tokens. */
static cJSON *e2b_view(const cJSON *d, const char *token)
{
	cJSON *j = cJSON_CreateObject();
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "id"));
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(d, "metadata");
	const char *tpl =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, TEMPLATE_KEY));
	cJSON_AddStringToObject(j, "sandboxID", id ? id : "");
	cJSON_AddStringToObject(j, "templateID", tpl ? tpl : DEFAULT_TEMPLATE);
	cJSON_AddStringToObject(j, "alias", tpl ? tpl : DEFAULT_TEMPLATE);
	cJSON_AddStringToObject(j, "clientID", "deskbox");
	cJSON_AddStringToObject(j, "envdVersion", ENVD_VERSION);
	if (token) {
		cJSON_AddStringToObject(j, "envdAccessToken", token);
		cJSON_AddStringToObject(j, "trafficAccessToken", token);
	}
	cJSON_AddNullToObject(j, "domain");
	cJSON *m = cJSON_AddObjectToObject(j, "metadata");
	const cJSON *kv;
	cJSON_ArrayForEach(kv, meta)
	{
		if (cJSON_IsString(kv) && strcmp(kv->string, TEMPLATE_KEY) != 0)
			cJSON_AddStringToObject(m, kv->string, kv->valuestring);
	}
	char when[40];
	const cJSON *created = cJSON_GetObjectItemCaseSensitive(d, "created_at");
	long long t0 = cJSON_IsNumber(created) ? (long long)created->valuedouble : 0;
	iso_time(t0, when, sizeof(when));
	cJSON_AddStringToObject(j, "startedAt", when);
	const char *end = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "expires_at"));
	if (!end) /* no deadline: E2B always has one, show a far one */
		iso_time(t0 + 10LL * 365 * 86400, when, sizeof(when));
	cJSON_AddStringToObject(j, "endAt", end ? end : when);
	cJSON_AddStringToObject(
	    j, "state",
	    state_of(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "status"))));
	const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(d, "cpu_millis");
	int cpus =
	    cJSON_IsNumber(cpu) && cpu->valuedouble >= 1000 ? (int)(cpu->valuedouble / 1000) : 2;
	cJSON_AddNumberToObject(j, "cpuCount", cpus);
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(d, "memory_mb");
	cJSON_AddNumberToObject(j, "memoryMB", cJSON_IsNumber(mem) ? mem->valuedouble : 0);
	const cJSON *disk = cJSON_GetObjectItemCaseSensitive(d, "disk_mb");
	cJSON_AddNumberToObject(j, "diskSizeMB", cJSON_IsNumber(disk) ? disk->valuedouble : 0);
	return j;
}

/* With --ports-domain D, the create and connect answers name D as the
 * sandbox's domain: the SDK then reaches envd (49983), the code
 * interpreter (49999) and getHost(port) at https://{port}-{id}.D, with the
 * port the request came to when its Host has one (D:PORT), since the SDK
 * builds those URLs without a port. */
static void set_domain(struct http_request *req, cJSON *j)
{
	const struct compat *c = req->app;
	const char *host = http_header(req, "Host");
	const char *colon = host ? strrchr(host, ':') : NULL;
	if (!c->ports_domain)
		return;
	if (colon && strchr(colon, ']'))
		colon = NULL; /* an IPv6 literal without a port */
	char d[320];
	snprintf(d, sizeof(d), "%s%.8s", c->ports_domain, colon ? colon : "");
	cJSON_ReplaceItemInObjectCaseSensitive(j, "domain", cJSON_CreateString(d));
}

static cJSON *view_of(struct sandbox *sb, const char *token)
{
	cJSON *d = sandbox_json(sb);
	cJSON *j = e2b_view(d, token);
	cJSON_Delete(d);
	return j;
}

/* Copies the string object `name` of `from` to `to` as `as` (ERR_INVALID
 * for a value that is not an object). */
static int copy_object(const cJSON *from, const char *name, cJSON *to, const char *as,
		       struct err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, name);
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsObject(v))
		return err_set(e, ERR_INVALID, EINVAL, "'%s' must be an object of strings", name);
	cJSON_AddItemToObject(to, as, cJSON_Duplicate(v, 1));
	return 0;
}

/* The deskbox create request for E2B's create body `b`. */
static int create_spec(const cJSON *b, cJSON *spec, struct err *e)
{
	const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(b, "templateID");
	if (tpl && !(cJSON_IsString(tpl) && template_ok(tpl->valuestring)))
		return err_set(e, ERR_INVALID, EINVAL,
			       "'templateID' must be 1-128 of A-Z a-z 0-9 - _ . : /");
	int64_t t;
	int pause = 0, net = -1;
	if (args_int(b, "timeout", 1, E2B_TIMEOUT_MAX, E2B_TIMEOUT_DEFAULT, 0, &t, e) < 0 ||
	    args_bool(b, "autoPause", 0, &pause, e) < 0)
		return err_code(e);
	const cJSON *inet = cJSON_GetObjectItemCaseSensitive(b, "allow_internet_access");
	if (inet && !cJSON_IsBool(inet))
		return err_set(e, ERR_INVALID, EINVAL, "'allow_internet_access' must be a boolean");
	if (inet)
		net = cJSON_IsTrue(inet);
	static const char *const cloud[] = {"mcp", "volumeMounts", "network", "iam", NULL};
	for (size_t i = 0; cloud[i]; i++)
		if (cJSON_GetObjectItemCaseSensitive(b, cloud[i]))
			return err_set(e, ERR_INVALID, ENOTSUP,
				       "'%s' is an E2B cloud feature deskbox does not offer",
				       cloud[i]);
	cJSON_AddNumberToObject(spec, "timeout_s", (double)t);
	cJSON_AddStringToObject(spec, "on_timeout", pause ? "pause" : "delete");
	if (net >= 0)
		cJSON_AddStringToObject(spec, "network", net ? "internet" : "none");
	if (copy_object(b, "envVars", spec, "env", e) < 0 ||
	    copy_object(b, "metadata", spec, "metadata", e) < 0)
		return err_code(e);
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(spec, "metadata");
	if (!meta)
		meta = cJSON_AddObjectToObject(spec, "metadata");
	cJSON_DeleteItemFromObjectCaseSensitive(meta, TEMPLATE_KEY);
	cJSON_AddStringToObject(meta, TEMPLATE_KEY, tpl ? tpl->valuestring : DEFAULT_TEMPLATE);
	return 0;
}

/* A deskbox template named like the E2B template: the create is that
 * template's (its image, display, env, files, startup commands), with the
 * E2B body's own fields on top. */
static int with_template(struct compat *c, const cJSON *body, cJSON **spec,
			 struct sandbox_template_extra *extra, struct err *e)
{
	extra->files = extra->startup = NULL;
	const char *tpl =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "templateID"));
	cJSON *known = NULL;
	struct err none = ERR_INIT;
	if (!c->api || !tpl || !sandbox_template_name_ok(tpl) ||
	    sandbox_template_get(c->api->templates, tpl, &known, &none) < 0)
		return 0;
	cJSON_Delete(known);
	cJSON_AddStringToObject(*spec, "template", tpl);
	return api_template_expand(c->api, spec, extra, e);
}

int e2b_sandbox_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	cJSON *spec = cJSON_CreateObject();
	struct sandbox_spec sp;
	struct sandbox_template_extra extra;
	int r = create_spec(body, spec, e);
	if (r == 0)
		r = with_template(c, body, &spec, &extra, e);
	else
		extra.files = extra.startup = NULL;
	cJSON_Delete(body);
	struct sandbox *sb = NULL;
	if (r == 0 && c->api) {
		r = compat_create(c->api, spec, &sb, e); /* a warm one when it fits */
	} else if (r == 0 && (r = sandbox_spec_parse(spec, &sp, e)) == 0) {
		r = sandbox_create(c->sandboxes, &sp, &sb, e);
	}
	cJSON_Delete(spec);
	/* A template's files and startup commands; failing, no sandbox. */
	if (r == 0 && (r = sandbox_template_apply(sb, &extra, e)) < 0) {
		struct err e2 = ERR_INIT;
		sandbox_delete(c->sandboxes, sandbox_id(sb), &e2);
		sandbox_put(sb);
	}
	sandbox_template_extra_release(&extra);
	if (r < 0)
		return err_code(e);
	cJSON *j = view_of(sb, http_header(req, "X-API-KEY"));
	set_domain(req, j);
	sandbox_put(sb);
	return http_reply_json(res, 201, j, e);
}

int e2b_sandbox_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	struct sandbox *sb;
	if (sandbox_get(c->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	cJSON *j = view_of(sb, NULL);
	sandbox_put(sb);
	return http_reply_json(res, 200, j, e);
}

int e2b_sandbox_kill(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	if (sandbox_delete(c->sandboxes, req->captures[0], e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}

int e2b_sandbox_timeout(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	int64_t t;
	int r = args_int(body, "timeout", 0, E2B_TIMEOUT_MAX, 0, ARGS_REQUIRED, &t, e);
	cJSON_Delete(body);
	struct sandbox *sb;
	if (r < 0 || sandbox_set_timeout(c->sandboxes, req->captures[0], t, &sb, e) < 0)
		return err_code(e);
	sandbox_put(sb);
	http_reply_empty(res, 204);
	return 0;
}

/* The status of sandbox `id`, or -1 with `e` filled. */
static int status_of_sandbox(struct compat *c, const char *id, struct err *e)
{
	struct sandbox *sb;
	if (sandbox_get(c->sandboxes, id, &sb, e) < 0)
		return -1;
	int st = (int)sandbox_current_status(sb);
	sandbox_put(sb);
	return st;
}

int e2b_sandbox_pause(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	int st = status_of_sandbox(c, req->captures[0], e);
	if (st < 0)
		return err_code(e);
	if (st == SANDBOX_PAUSED || st == SANDBOX_STOPPED)
		return err_set(e, ERR_CONFLICT, 0, "sandbox '%s' is already paused",
			       req->captures[0]);
	struct sandbox *sb;
	if (sandbox_pause(c->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	sandbox_put(sb);
	http_reply_empty(res, 204);
	return 0;
}

/* Connect: 200 for a running sandbox, 201 once a paused one is resumed (a
 * stopped one started); {"timeout"} moves its deadline. */
int e2b_sandbox_connect(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	const char *id = req->captures[0];
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	int64_t t;
	int r = args_int(body, "timeout", 0, E2B_TIMEOUT_MAX, -1, 0, &t, e);
	cJSON_Delete(body);
	int st = r < 0 ? -1 : status_of_sandbox(c, id, e);
	if (st < 0)
		return err_code(e);
	struct sandbox *sb = NULL;
	if (st == SANDBOX_PAUSED)
		r = sandbox_resume(c->sandboxes, id, &sb, e);
	else if (st == SANDBOX_STOPPED || st == SANDBOX_FAILED)
		r = sandbox_start(c->sandboxes, id, &sb, e);
	if (sb)
		sandbox_put(sb);
	sb = NULL;
	if (r == 0 && t >= 0)
		r = sandbox_set_timeout(c->sandboxes, id, t, &sb, e);
	else if (r == 0)
		r = sandbox_get(c->sandboxes, id, &sb, e);
	if (r < 0)
		return err_code(e);
	cJSON *j = view_of(sb, http_header(req, "X-API-KEY"));
	set_domain(req, j);
	sandbox_put(sb);
	return http_reply_json(res, st == SANDBOX_RUNNING ? 200 : 201, j, e);
}

/* Decodes the URL-encoded `s` (n bytes; '+' is a space) in place into a
 * NUL-terminated string; -1 for a bad escape or an embedded NUL. */
static int url_decode(char *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (ch == '+') {
			ch = ' ';
		} else if (ch == '%') {
			unsigned v;
			if (i + 2 >= n)
				return -1;
			if (!isxdigit((unsigned char)s[i + 1]) ||
			    !isxdigit((unsigned char)s[i + 2]) ||
			    sscanf(s + i + 1, "%2x", &v) != 1 || v == 0)
				return -1;
			ch = (char)v;
			i += 2;
		}
		s[o++] = ch;
	}
	s[o] = '\0';
	return 0;
}

#define LIST_META_MAX 1024

struct list_filter {
	char buf[LIST_META_MAX + 1];
	struct sandbox_filter f[SANDBOX_META_MAX_KEYS];
	size_t n;
	int running, paused; /* the states asked for */
};

/* ?metadata=<urlencoded "k=v&k2=v2"> into f->f. */
static int parse_metadata(struct list_filter *f, const char *q, struct err *e)
{
	size_t len = strlen(q);
	if (len > LIST_META_MAX)
		return err_set(e, ERR_INVALID, E2BIG, "'metadata' over %d bytes", LIST_META_MAX);
	memcpy(f->buf, q, len + 1);
	for (char *save = NULL, *p = strtok_r(f->buf, "&", &save); p;
	     p = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(p, '=');
		if (!eq)
			return err_set(e, ERR_INVALID, EINVAL, "'metadata' must be k=v pairs");
		*eq = '\0';
		if (url_decode(p, strlen(p)) < 0 || url_decode(eq + 1, strlen(eq + 1)) < 0 ||
		    !sandbox_metadata_key_ok(p))
			return err_set(e, ERR_INVALID, EINVAL, "bad 'metadata' key or value");
		if (f->n >= SANDBOX_META_MAX_KEYS)
			return err_set(e, ERR_INVALID, E2BIG, "more than %d metadata conditions",
				       SANDBOX_META_MAX_KEYS);
		f->f[f->n++] = (struct sandbox_filter){p, eq + 1};
	}
	return 0;
}

static int parse_states(struct list_filter *f, const char *q, struct err *e)
{
	f->running = f->paused = 0;
	char buf[64];
	if (snprintf(buf, sizeof(buf), "%s", q) >= (int)sizeof(buf))
		return err_set(e, ERR_INVALID, EINVAL, "bad 'state'");
	for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (strcmp(p, "running") == 0)
			f->running = 1;
		else if (strcmp(p, "paused") == 0)
			f->paused = 1;
		else
			return err_set(e, ERR_INVALID, EINVAL,
				       "'state' must be running and/or paused");
	}
	return 0;
}

/* GET /v2/sandboxes?metadata&state&limit: one page holding them all (no
 * X-Next-Token). */
int e2b_sandbox_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct compat *c = req->app;
	struct list_filter *f = calloc(1, sizeof(*f));
	if (!f)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	f->running = f->paused = 1;
	const char *meta = http_query(req, "metadata"), *state = http_query(req, "state");
	int64_t limit;
	int r = http_query_int(req, "limit", 1, 100000, 100000, 0, &limit, e);
	if (r == 0 && meta)
		r = parse_metadata(f, meta, e);
	if (r == 0 && state)
		r = parse_states(f, state, e);
	if (r < 0) {
		free(f);
		return r;
	}
	cJSON *all = sandboxes_json_where(c->sandboxes, f->f, f->n);
	cJSON *out = cJSON_CreateArray();
	const cJSON *d;
	cJSON_ArrayForEach(d, all)
	{
		const char *s =
		    state_of(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "status")));
		int want = strcmp(s, "running") == 0 ? f->running : f->paused;
		if (want && cJSON_GetArraySize(out) < limit)
			cJSON_AddItemToArray(out, e2b_view(d, NULL));
	}
	cJSON_Delete(all);
	free(f);
	return http_reply_json(res, 200, out, e);
}
