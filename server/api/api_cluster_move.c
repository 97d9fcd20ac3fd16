/* Drain with "migrate" (docs/cluster.md, "Draining and moving sandboxes"):
 * the drained node sends each stopped sandbox's files to another node,
 * placed as a create is, which takes it in and records it as its own. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "api.h"
#include "common/clock.h"
#include "common/text.h"
#include "server/cluster/cluster.h"

/* One sandbox's transfer may take this long (a few GB of disk). */
#define MOVE_MS (600 * 1000)
/* The node asked to drain itself answers once all moves are done. */
#define DRAIN_MS (3600 * 1000)

static void left(cJSON *a, const char *id, const char *name, const char *reason)
{
	cJSON *x = cJSON_CreateObject();
	cJSON_AddStringToObject(x, "id", id);
	cJSON_AddStringToObject(x, "name", name ? name : "");
	cJSON_AddStringToObject(x, "reason", reason);
	cJSON_AddItemToArray(a, x);
}

/* Streams the files to the slot's node; 0 when it took the sandbox in. */
static int send_to(struct api *api, const char *id, const char *cmd,
		   const struct cluster_slot *slot, struct err *e)
{
	FILE *p = popen(cmd, "re");
	if (!p)
		return err_sys(e, ERR_INTERNAL, errno, "starting tar");
	char path[128];
	snprintf(path, sizeof(path), "/v1/internal/sandboxes/%s/move-in", id);
	long status = 0;
	char *answer = NULL;
	size_t len = 0;
	int r = cluster_send(api->cluster, slot->advertise, path, p, MOVE_MS, &status, &answer,
			     &len, e);
	int rc = pclose(p);
	if (r == 0 && status != 201) {
		cJSON *j = cJSON_ParseWithLength(answer, len);
		const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(j, "error"), "message"));
		r = err_set(e, ERR_BAD_GATEWAY, EIO, "node '%s' answered %ld: %s", slot->node,
			    status, m ? m : "(no message)");
		cJSON_Delete(j);
	} else if (r == 0 && rc != 0) {
		/* It checked what came and took it: the tar only warned. */
		fprintf(stderr, "deskboxd: sandbox %s: tar exited %d\n", id, rc);
	}
	free(answer);
	return r;
}

/* Moves sandbox `id` away, or says in `lefts` why it stays. */
static void move_one(struct api *api, const char *id, cJSON *moved, cJSON *lefts)
{
	struct err e = ERR_INIT;
	struct sandbox *sb;
	char cmd[3 * PATH_MAX + 512], name[64] = "", why[600];
	cluster_moving(api->cluster, id, 1);
	if (sandbox_move_out_begin(api->sandboxes, id, &sb, cmd, sizeof(cmd), name, &e) < 0) {
		left(lefts, id, name, e.msg);
		cluster_moving(api->cluster, id, 0);
		return;
	}
	long long t0 = clock_mono_ms();
	struct cluster_slot slot;
	int r = cluster_place(api->cluster, NULL, NULL, NULL, &slot, &e);
	if (r == 0 && (r = send_to(api, id, cmd, &slot, &e)) < 0)
		cluster_unplace(api->cluster, &slot);
	if (r < 0) {
		snprintf(why, sizeof(why), "not moved, kept here: %s", e.msg);
		sandbox_move_out_end(api->sandboxes, sb, 0, &e);
		left(lefts, id, name, why);
		cluster_moving(api->cluster, id, 0);
		return;
	}
	cluster_moved(api->cluster, id, slot.node, name);
	err_clear(&e);
	if (sandbox_move_out_end(api->sandboxes, sb, 1, &e) < 0)
		fprintf(stderr, "deskboxd: moved sandbox %s: removing it here: %s\n", id, e.msg);
	cluster_moving(api->cluster, id, 0);
	cJSON *x = cJSON_CreateObject();
	cJSON_AddStringToObject(x, "id", id);
	cJSON_AddStringToObject(x, "name", name);
	cJSON_AddStringToObject(x, "node", slot.node);
	cJSON_AddNumberToObject(x, "ms", (double)(clock_mono_ms() - t0));
	cJSON_AddItemToArray(moved, x);
}

/* This node drains itself: every sandbox it holds, stopped ones moved. */
static cJSON *migrate_here(struct api *api, const char *node)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", node);
	cJSON_AddBoolToObject(j, "draining", 1);
	cJSON *moved = cJSON_AddArrayToObject(j, "moved");
	cJSON *lefts = cJSON_AddArrayToObject(j, "left");
	cJSON *all = sandboxes_json(api->sandboxes);
	const cJSON *it;
	cJSON_ArrayForEach(it, all)
	{
		const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "id"));
		const char *st =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "status"));
		const char *nm = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
		if (!id)
			continue;
		if (st && strcmp(st, "stopped") != 0) {
			char why[128];
			snprintf(why, sizeof(why),
				 "%s: only stopped sandboxes move; stop it and "
				 "drain again",
				 st);
			left(lefts, id, nm, why);
			continue;
		}
		move_one(api, id, moved, lefts);
	}
	cJSON_Delete(all);
	return j;
}

/* The drained node is another one: it does the moves, asked with the
 * cluster secret; its answer is passed on. */
static int migrate_there(struct api *api, const char *node, struct http_response *res,
			 struct err *e)
{
	cJSON *nodes = cluster_nodes_json(api->cluster);
	const char *adv = NULL, *health = NULL;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(nodes, "nodes"))
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
		if (n && strcmp(n, node) == 0) {
			adv =
			    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "advertise"));
			health =
			    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "health"));
		}
	}
	int r;
	long status = 0;
	char *answer = NULL;
	size_t len = 0;
	if (!adv || !health || strcmp(health, "ok") != 0)
		r = err_set(e, ERR_CONFLICT, EHOSTDOWN,
			    "node '%.*s' is drained but lost: its sandboxes' disks move once it "
			    "is back",
			    UTF8_CUT(node, 64));
	else {
		char path[128];
		snprintf(path, sizeof(path), "/v1/nodes/%s/drain", node);
		r = cluster_call(api->cluster, adv, "POST", path, NULL, "{\"migrate\":true}",
				 DRAIN_MS, &status, &answer, &len, e);
	}
	cJSON_Delete(nodes);
	if (r < 0)
		return r;
	cJSON *j = cJSON_ParseWithLength(answer, len);
	free(answer);
	if (!j)
		return err_set(e, ERR_BAD_GATEWAY, EPROTO, "node '%s' answered %ld", node, status);
	return http_reply_json(res, (int)status, j, e);
}

int api_node_migrate(struct api *api, const char *node, struct http_response *res, struct err *e)
{
	if (strcmp(node, cluster_self(api->cluster)) == 0)
		return http_reply_json(res, 200, migrate_here(api, node), e);
	return migrate_there(api, node, res, e);
}

/* ---- POST /v1/internal/sandboxes/{id}/move-in (from another node) ---- */

struct move_in {
	FILE *tar; /* tar -x reading the body */
	char tmp[PATH_MAX];
	char id[SANDBOX_ID_LEN + 1];
};

static int move_in_write(void *cls, const char *data, size_t len, struct err *e)
{
	struct move_in *m = cls;
	if (fwrite(data, 1, len, m->tar) != len)
		return err_sys(e, ERR_INTERNAL, errno ? errno : EIO, "unpacking sandbox %s", m->id);
	return 0;
}

static void move_in_abort(void *cls)
{
	struct move_in *m = cls;
	if (m->tar)
		pclose(m->tar);
	sandbox_move_in_abort(m->tmp);
	free(m);
}

int api_move_in_begin(struct http_request *req, struct http_body_sink *sink, struct err *e)
{
	struct api *api = req->app;
	if (!api->cluster || !req->from_peer)
		return err_set(e, ERR_FORBIDDEN, EPERM,
			       "only another node of the cluster (with the cluster secret) moves "
			       "a sandbox in");
	struct move_in *m = calloc(1, sizeof(*m));
	if (!m)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	char cmd[PATH_MAX + 256];
	if (sandbox_move_in_begin(api->sandboxes, req->captures[0], m->tmp, sizeof(m->tmp), cmd,
				  sizeof(cmd), e) < 0) {
		free(m);
		return err_code(e);
	}
	snprintf(m->id, sizeof(m->id), "%s", req->captures[0]);
	m->tar = popen(cmd, "we");
	if (!m->tar) {
		err_sys(e, ERR_INTERNAL, errno, "starting tar");
		move_in_abort(m);
		return err_code(e);
	}
	*sink = (struct http_body_sink){move_in_write, move_in_abort, m};
	return 0;
}

int api_move_in(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct move_in *m = req->stream;
	int rc = pclose(m->tar);
	m->tar = NULL;
	if (rc != 0)
		return err_set(e, ERR_INVALID, EIO, "unpacking sandbox %s: tar exited %d", m->id,
			       WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
	char name[64] = "";
	if (sandbox_move_in_end(api->sandboxes, m->id, m->tmp, name, e) < 0)
		return err_code(e);
	/* Ours now: routed here from every node. */
	struct cluster_slot slot = {0};
	snprintf(slot.node, sizeof(slot.node), "%s", cluster_self(api->cluster));
	snprintf(slot.name, sizeof(slot.name), "%s", name);
	struct err e2 = ERR_INIT;
	if (cluster_placed(api->cluster, &slot, m->id, &e2) < 0)
		fprintf(stderr,
			"deskboxd: recording moved sandbox %s (the reconcile retries): %s\n", m->id,
			e2.msg);
	struct sandbox *sb;
	cJSON *j = NULL;
	if (sandbox_get(api->sandboxes, m->id, &sb, &e2) == 0) {
		j = sandbox_json(sb);
		sandbox_put(sb);
	}
	free(m);
	if (!j)
		j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "node", slot.node);
	return http_reply_json(res, 201, j, e);
}
