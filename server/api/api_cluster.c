/* Cluster mode at the API's edge (docs/cluster.md): GET /v1/nodes, drain,
 * creates placed on a node, lists over every node, and the forward hook
 * that sends a sandbox's requests to the node holding it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "common/args.h"
#include "common/text.h"
#include "server/cluster/cluster.h"
#include "server/runtime/runtime.h"

/* How long a list waits for each other node's own list. */
#define LIST_MS 5000

/* MemAvailable of /proc/meminfo in MiB (-1 when unknown). */
static double free_memory_mb(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return -1;
	char line[256];
	double kb = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb / 1024;
}

static cJSON *names_of(cJSON *list)
{
	cJSON *a = cJSON_CreateArray();
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
		if (n)
			cJSON_AddItemToArray(a, cJSON_CreateString(n));
	}
	return a;
}

/* The warm pool: ready plain desktops and each template's ready ones. */
static cJSON *warm_pool_json(struct api *api)
{
	cJSON *wp = cJSON_CreateObject();
	cJSON_AddNumberToObject(wp, "ready", pool_ready(api->pool));
	cJSON *t = cJSON_AddObjectToObject(wp, "templates");
	cJSON *list = sandbox_templates_json(api->templates);
	cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
		if (!n)
			continue;
		pool_template_json(api->pool, n, it);
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(it, "warm_pool_ready");
		cJSON_AddNumberToObject(t, n, cJSON_IsNumber(r) ? r->valuedouble : 0);
	}
	cJSON_Delete(list);
	return wp;
}

cJSON *api_cluster_capacity(void *cls)
{
	struct api *api = cls;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "free_memory_mb", free_memory_mb());
	unsigned counts[SANDBOX_DELETING + 1] = {0};
	sandboxes_count(api->sandboxes, counts);
	unsigned n = 0;
	for (size_t i = 0; i <= SANDBOX_DELETING; i++)
		n += counts[i];
	cJSON_AddNumberToObject(j, "sandboxes", n);
	cJSON_AddNumberToObject(j, "running", counts[SANDBOX_RUNNING]);
	cJSON_AddNumberToObject(j, "max_sandboxes", api->max_sandboxes);
	cJSON *iso = cJSON_AddArrayToObject(j, "isolation");
	cJSON_AddItemToArray(iso, cJSON_CreateString("container"));
	struct err e = ERR_INIT;
	if (runtime_kvm_probe(&e) == 0)
		cJSON_AddItemToArray(iso, cJSON_CreateString("vm"));
	cJSON *images = sandbox_images_json(api->sandboxes);
	cJSON_AddItemToObject(j, "images", names_of(images));
	cJSON_Delete(images);
	cJSON *tmpl = sandbox_templates_json(api->templates);
	cJSON_AddItemToObject(j, "templates", names_of(tmpl));
	cJSON_Delete(tmpl);
	cJSON_AddItemToObject(j, "warm_pool", warm_pool_json(api));
	return j;
}

cJSON *api_cluster_local(void *cls)
{
	struct api *api = cls;
	cJSON *all = sandboxes_json(api->sandboxes);
	cJSON *a = cJSON_CreateArray();
	const cJSON *it;
	cJSON_ArrayForEach(it, all)
	{
		cJSON *x = cJSON_CreateObject();
		const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "id"));
		const char *nm = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
		cJSON_AddStringToObject(x, "id", id ? id : "");
		cJSON_AddStringToObject(x, "name", nm ? nm : "");
		cJSON_AddItemToArray(a, x);
	}
	cJSON_Delete(all);
	return a;
}

/* ---- GET /v1/nodes, POST /v1/nodes/{name}/drain ---- */

static int need_cluster(struct api *api, struct err *e)
{
	if (!api->cluster)
		return err_set(e, ERR_NOT_FOUND, ENOENT,
			       "this server is a single node: start deskboxd with --cluster "
			       "(docs/cluster.md)");
	return 0;
}

int api_nodes_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	if (need_cluster(api, e) < 0)
		return err_code(e);
	return http_reply_json(res, 200, cluster_nodes_json(api->cluster), e);
}

int api_node_drain(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	static const char *const fields[] = {"migrate", NULL};
	int migrate = 0;
	int r = args_only(body, NULL, fields, e);
	if (r == 0)
		r = args_bool(body, "migrate", 0, &migrate, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	if (need_cluster(api, e) < 0)
		return err_code(e);
	if (cluster_drain(api->cluster, req->captures[0], e) < 0)
		return err_code(e);
	if (migrate)
		return api_node_migrate(api, req->captures[0], res, e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", req->captures[0]);
	cJSON_AddBoolToObject(j, "draining", 1);
	return http_reply_json(res, 200, j, e);
}

/* ---- forwarding ---- */

int api_cluster_forward(void *app, struct http_request *req, const char *pattern,
			struct http_forward *out, struct err *e)
{
	struct api *api = app;
	static const char sb[] = "/v1/sandboxes/{id}";
	const size_t len = sizeof(sb) - 1;
	if (!api->cluster || req->n_captures < 1 || strncmp(pattern, sb, len) != 0 ||
	    (pattern[len] && pattern[len] != '/'))
		return 0;
	char id[SANDBOX_ID_LEN + 1];
	if (sandbox_resolve(api->sandboxes, req->captures[0], id, sizeof(id)) == 0)
		return 0;
	char sid[64], node[CLUSTER_NAME_MAX + 1], adv[CLUSTER_URL_MAX];
	/* Another node's cache may still send a sandbox this node moved
	 * away here: passed on once, to where it went. */
	if (req->from_peer && !cluster_moved_to(api->cluster, req->captures[0], node))
		return 0;
	enum cluster_where w = cluster_locate(api->cluster, req->captures[0], sid, node, adv);
	if (w == CLUSTER_HERE)
		return 0;
	if (w == CLUSTER_LOST) {
		/* GET of the sandbox itself answers here: {"state":"lost"}. */
		if (!pattern[len] && strcmp(req->method, "GET") == 0)
			return 0;
		return err_set(e, ERR_UNAVAILABLE, EHOSTDOWN,
			       "sandbox '%.*s' is on node '%s', which is lost (its lease "
			       "expired); it answers again when that node comes back",
			       UTF8_CUT(req->captures[0], 64), node);
	}
	int fd = cluster_connect(adv, e);
	if (fd < 0)
		return err_wrap(e, "sandbox '%.*s' is on node '%s'", UTF8_CUT(req->captures[0], 64),
				node);
	out->fd = fd;
	snprintf(out->what, sizeof(out->what), "node '%s'", node);
	if (req->host_routed)
		snprintf(out->host, sizeof(out->host), "%s", adv + strlen("http://"));
	out->extra_name = CLUSTER_SECRET_HEADER;
	out->extra_value = cluster_secret(api->cluster);
	return 1;
}

/* ---- creates and lists over the cluster ---- */

/* The answer of another node passed on as it came (JSON or empty). */
static int relay(struct http_response *res, long status, char *answer, size_t len)
{
	if (!len) {
		free(answer);
		http_reply_empty(res, (int)status);
		return 0;
	}
	http_reply_data(res, (int)status, "application/json", answer, len);
	return 0;
}

/* The create placed on another node: POSTed there (with the secret, so it
 * is created there and not placed again). */
static int create_remote(struct http_request *req, const struct cluster_slot *slot, cJSON *body,
			 struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	char *text = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	long status = 0;
	char *answer = NULL;
	size_t len = 0;
	int r = text ? cluster_call(api->cluster, slot->advertise, "POST", "/v1/sandboxes",
				    http_header(req, "Authorization"), text, 0, &status, &answer,
				    &len, e)
		     : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	free(text);
	if (r < 0 || status != 201) {
		cluster_unplace(api->cluster, slot);
		if (r < 0)
			return err_wrap(e, "creating on node '%s'", slot->node);
		return relay(res, status, answer, len);
	}
	cJSON *j = cJSON_ParseWithLength(answer, len);
	free(answer);
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "id"));
	if (!id || cluster_placed(api->cluster, slot, id, e) < 0) {
		cJSON_Delete(j);
		return id ? err_wrap(e, "recording the sandbox made on node '%s'", slot->node)
			  : err_set(e, ERR_BAD_GATEWAY, EPROTO,
				    "node '%s' answered a create without an id", slot->node);
	}
	cJSON_AddStringToObject(j, "node", slot->node);
	return http_reply_json(res, 201, j, e);
}

static int create_here(struct http_request *req, const struct cluster_slot *slot, cJSON *body,
		       struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *j;
	if (api_sandbox_create_json(api, body, &j, e) < 0) {
		cluster_unplace(api->cluster, slot);
		return err_code(e);
	}
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "id"));
	if (cluster_placed(api->cluster, slot, id ? id : "", e) < 0) {
		struct err e2 = ERR_INIT;
		if (id)
			sandbox_delete(api->sandboxes, id, &e2);
		cluster_unplace(api->cluster, slot);
		cJSON_Delete(j);
		return err_wrap(e, "recording the sandbox");
	}
	cJSON_AddStringToObject(j, "node", slot->node);
	return http_reply_json(res, 201, j, e);
}

int api_cluster_create(struct http_request *req, cJSON *body, struct http_response *res,
		       struct err *e)
{
	struct api *api = req->app;
	const cJSON *pin = cJSON_GetObjectItemCaseSensitive(body, "node");
	if (pin && (!cJSON_IsString(pin) || !pin->valuestring[0])) {
		cJSON_Delete(body);
		return err_set(e, ERR_INVALID, EINVAL, "'node' must be a node's name");
	}
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "name"));
	if (name && !sandbox_name_ok(name)) {
		cJSON_Delete(body);
		return err_set(e, ERR_INVALID, EINVAL, "bad sandbox name '%.*s'",
			       UTF8_CUT(name, 64));
	}
	const char *tmpl = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "template"));
	struct cluster_slot slot;
	if (cluster_place(api->cluster, pin ? pin->valuestring : NULL, name, tmpl, &slot, e) < 0) {
		cJSON_Delete(body);
		if (e->kind == ERR_UNAVAILABLE)
			e->kind = ERR_NO_QUORUM;
		return err_code(e);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(body, "node");
	if (slot.local)
		return create_here(req, &slot, body, res, e);
	return create_remote(req, &slot, body, res, e);
}

/* The other live nodes' own lists, and the sandboxes of lost ones. */
void api_cluster_list(struct http_request *req, cJSON *list)
{
	struct api *api = req->app;
	cJSON *remote = cluster_remote_sandboxes(api->cluster);
	cJSON *asked = cJSON_CreateObject();
	const char *q = http_raw_query(req);
	char path[2048];
	snprintf(path, sizeof(path), "/v1/sandboxes%s%s", q[0] ? "?" : "", q);
	const cJSON *it;
	cJSON_ArrayForEach(it, remote)
	{
		const char *node =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "node"));
		const char *health =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "health"));
		if (!node || !health)
			continue;
		if (strcmp(health, "lost") == 0) {
			if (q[0])
				continue; /* its metadata is not known here */
			cJSON *x = cJSON_CreateObject();
			cJSON_AddStringToObject(
			    x, "id",
			    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "id")));
			cJSON_AddStringToObject(
			    x, "name",
			    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name")));
			cJSON_AddStringToObject(x, "node", node);
			cJSON_AddStringToObject(x, "state", "lost");
			cJSON_AddItemToArray(list, x);
			continue;
		}
		if (cJSON_GetObjectItemCaseSensitive(asked, node))
			continue;
		cJSON_AddTrueToObject(asked, node);
		long status = 0;
		char *answer = NULL;
		size_t len = 0;
		struct err e = ERR_INIT;
		const char *adv =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "advertise"));
		if (!adv ||
		    cluster_call(api->cluster, adv, "GET", path, NULL, NULL, LIST_MS, &status,
				 &answer, &len, &e) < 0 ||
		    status != 200) {
			free(answer);
			continue;
		}
		cJSON *j = cJSON_ParseWithLength(answer, len);
		free(answer);
		cJSON *sbs = cJSON_GetObjectItemCaseSensitive(j, "sandboxes");
		cJSON *s;
		while ((s = cJSON_DetachItemFromArray(sbs, 0)))
			cJSON_AddItemToArray(list, s);
		cJSON_Delete(j);
	}
	cJSON_Delete(asked);
	cJSON_Delete(remote);
}

int api_cluster_lost_view(struct api *api, const char *ref, cJSON **out)
{
	char sid[64], node[CLUSTER_NAME_MAX + 1], adv[CLUSTER_URL_MAX];
	if (!api->cluster || cluster_locate(api->cluster, ref, sid, node, adv) != CLUSTER_LOST)
		return 0;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", sid);
	cJSON_AddStringToObject(j, "node", node);
	cJSON_AddStringToObject(j, "state", "lost");
	*out = j;
	return 1;
}
