#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/desktop/desktop.h"
#include "common/text.h"
#include "api.h"
#include "common/args.h"
#include "server/sandbox/sandbox.h"
#include "server/cluster/cluster.h"

int api_enter(struct http_request *req, int need_capture, struct sandbox **sb, struct capture **cap,
	      struct err *e)
{
	struct api *api = req->app;
	if (sandbox_get(api->sandboxes, req->captures[0], sb, e) < 0)
		return err_code(e);
	if (sandbox_use(*sb, need_capture, cap, e) < 0) {
		sandbox_put(*sb);
		*sb = NULL;
		return err_code(e);
	}
	return 0;
}

void api_release(struct sandbox *sb)
{
	sandbox_unuse(sb);
	sandbox_put(sb);
}

/* A sandbox as the API shows it: its JSON view plus the viewer URLs
 * (docs/vnc.md), added to `j` (an element of sandbox_json's form). */
static cJSON *with_urls(cJSON *j)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
	if (!cJSON_IsString(id))
		return j;
	cJSON *vnc = cJSON_AddObjectToObject(j, "vnc");
	char url[160];
	snprintf(url, sizeof(url), "/v1/sandboxes/%s/vnc/tokens", id->valuestring);
	cJSON_AddStringToObject(vnc, "tokens_url", url);
	snprintf(url, sizeof(url), "/v1/sandboxes/%s/vnc/", id->valuestring);
	cJSON_AddStringToObject(vnc, "page", url);
	return j;
}

cJSON *api_sandbox_view(struct sandbox *sb)
{
	return with_urls(sandbox_json(sb));
}

int api_health(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "status", "ok");
	return http_reply_json(res, 200, j, e);
}

/* A warm desktop for the create `spec`: 1 with *sb (from_template: the
 * template's files and startup are already in it), 0 for none (a cold
 * create), negative on error. */
static int take_warm(struct api *api, const char *tmpl, const struct sandbox_spec *spec,
		     struct sandbox **sb, int *from_template, struct err *e)
{
	*from_template = 0;
	int r = tmpl ? pool_take_template(api->pool, tmpl, spec, sb, e) : 0;
	if (r != 0) {
		*from_template = r > 0;
		return r;
	}
	return pool_take(api->pool, spec, sb, e);
}

/* A template's own fields in a create that names none (after the
 * expansion, a create naming one holds none of them). */
static const char *const template_fields[] = {"resources", "files", "startup", NULL};

static int template_only(const cJSON *body, struct err *e)
{
	for (size_t i = 0; template_fields[i]; i++)
		if (cJSON_GetObjectItemCaseSensitive(body, template_fields[i]))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field '%s' belongs to a template: give it with 'template' "
				       "(POST /v1/templates)",
				       template_fields[i]);
	return 0;
}

int api_sandbox_create_json(struct api *api, cJSON *body, cJSON **out, struct err *e)
{
	/* A template's own pool serves a create that changes only what a
	 * claim can set (docs/lifecycle.md). */
	char tmpl[SANDBOX_TEMPLATE_NAME_MAX + 1] = "";
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "template"));
	if (name && strlen(name) < sizeof(tmpl) && pool_template_claimable(body))
		snprintf(tmpl, sizeof(tmpl), "%s", name);
	struct sandbox_spec spec;
	struct sandbox_template_extra extra;
	int r = api_template_expand(api, &body, &extra, e);
	if (r == 0)
		r = args_only2(body, NULL, sandbox_create_fields, template_fields, e);
	if (r == 0)
		r = template_only(body, e);
	if (r == 0)
		r = sandbox_spec_parse(body, &spec, e);
	cJSON_Delete(body);
	if (r < 0)
		return sandbox_template_extra_release(&extra), r;
	struct sandbox *sb;
	int from_template;
	r = take_warm(api, tmpl[0] ? tmpl : NULL, &spec, &sb, &from_template, e);
	if (r != 0) {
		sandbox_spec_release(&spec);
		if (r < 0)
			return sandbox_template_extra_release(&extra), r;
	} else if (sandbox_create(api->sandboxes, &spec, &sb, e) < 0) {
		return sandbox_template_extra_release(&extra), err_code(e);
	}
	/* A template's files and startup commands; failing, no sandbox. */
	r = from_template ? 0 : sandbox_template_apply(sb, &extra, e);
	sandbox_template_extra_release(&extra);
	if (r < 0) {
		struct err e2 = ERR_INIT;
		sandbox_delete(api->sandboxes, sandbox_id(sb), &e2);
		sandbox_put(sb);
		return r;
	}
	*out = api_sandbox_view(sb);
	sandbox_put(sb);
	return 0;
}

int api_sandbox_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body, *j;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	/* In a cluster a create is placed first, unless a node placed it. */
	if (api->cluster && !req->from_peer)
		return api_cluster_create(req, body, res, e);
	if (api_sandbox_create_json(api, body, &j, e) < 0)
		return err_code(e);
	return http_reply_json(res, 201, j, e);
}

void api_canon_captures(void *app, const char *pattern, const char **captures, size_t n, char *buf,
			size_t size)
{
	static const char sb[] = "/v1/sandboxes/{id}";
	const size_t len = sizeof(sb) - 1;
	struct api *api = app;
	if (n < 1 || strncmp(pattern, sb, len) != 0 || (pattern[len] && pattern[len] != '/'))
		return;
	if (sandbox_resolve(api->sandboxes, captures[0], buf, size) == 0)
		captures[0] = buf;
}

/* The "metadata.KEY=VALUE" conditions of a list; other parameters are
 * not the list's and are ignored, as before. */
struct list_query {
	struct sandbox_filter f[SANDBOX_META_MAX_KEYS];
	size_t n;
	struct err *e;
};

static int list_arg(void *cls, const char *name, const char *value)
{
	struct list_query *q = cls;
	static const char prefix[] = "metadata.";
	if (strncmp(name, prefix, sizeof(prefix) - 1) != 0)
		return 0;
	const char *key = name + sizeof(prefix) - 1;
	if (!sandbox_metadata_key_ok(key))
		return err_set(q->e, ERR_INVALID, EINVAL,
			       "query parameter '%.*s': bad metadata key (1-%d of A-Z a-z 0-9 . _ "
			       "- /)",
			       UTF8_CUT(name, 80), SANDBOX_META_KEY_MAX);
	if (q->n >= SANDBOX_META_MAX_KEYS)
		return err_set(q->e, ERR_INVALID, E2BIG, "more than %d metadata.* parameters",
			       SANDBOX_META_MAX_KEYS);
	q->f[q->n++] = (struct sandbox_filter){key, value};
	return 0;
}

int api_sandbox_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct list_query q = {.e = e};
	if (http_each_query(req, list_arg, &q) != 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON *list = sandboxes_json_where(api->sandboxes, q.f, q.n);
	cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		with_urls(it);
		if (api->cluster)
			cJSON_AddStringToObject(it, "node", cluster_self(api->cluster));
	}
	if (api->cluster && !req->from_peer)
		api_cluster_list(req, list);
	cJSON_AddItemToObject(j, "sandboxes", list);
	return http_reply_json(res, 200, j, e);
}

int api_sandbox_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	cJSON *j;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return api_cluster_lost_view(api, req->captures[0], &j) == 1
			   ? http_reply_json(res, 200, j, e)
			   : err_code(e);
	j = with_urls(sandbox_json(sb));
	sandbox_put(sb);
	if (api->cluster)
		cJSON_AddStringToObject(j, "node", cluster_self(api->cluster));
	return http_reply_json(res, 200, j, e);
}

int api_sandbox_stop(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_stop(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	cJSON *j = with_urls(sandbox_json(sb));
	sandbox_put(sb);
	return http_reply_json(res, 200, j, e);
}

int api_sandbox_start(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_start(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	cJSON *j = with_urls(sandbox_json(sb));
	sandbox_put(sb);
	return http_reply_json(res, 200, j, e);
}

int api_sandbox_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	char id[SANDBOX_ID_LEN + 1];
	if (sandbox_resolve(api->sandboxes, req->captures[0], id, sizeof(id)) < 0)
		snprintf(id, sizeof(id), "%s", req->captures[0]);
	/* Its recordings end first: their files are on the disk that goes. */
	if (api->observers)
		desk_observers_forget(api->observers, id);
	char name[SANDBOX_NAME_MAX + 1] = "";
	struct sandbox *sb;
	if (api->cluster && sandbox_get(api->sandboxes, id, &sb, e) == 0) {
		cJSON *v = sandbox_json(sb);
		snprintf(name, sizeof(name), "%s",
			 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "name")) ?: "");
		cJSON_Delete(v);
		sandbox_put(sb);
	}
	err_clear(e);
	if (sandbox_delete(api->sandboxes, req->captures[0], e) < 0)
		return err_code(e);
	if (api->cluster)
		cluster_release(api->cluster, id, name);
	http_reply_empty(res, 204);
	return 0;
}

/* PUT /v1/sandboxes/{id}/network {"network": ...} (docs/network.md). */
int api_sandbox_network(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	static const char *const fields[] = {"network", NULL};
	struct sandbox *sb;
	int r = args_only(body, NULL, fields, e);
	if (r == 0)
		r = sandbox_set_network(api->sandboxes, req->captures[0],
					cJSON_GetObjectItemCaseSensitive(body, "network"), &sb, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	cJSON *j = with_urls(sandbox_json(sb));
	sandbox_put(sb);
	return http_reply_json(res, 200, j, e);
}
