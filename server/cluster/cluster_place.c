/* Placement and the sandbox → node map (cluster.h, "placement"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "common/log.h"
#include "common/text.h"

#define PLACE_ATTEMPTS 8

/* The slot counter of `node`: its value and revision (0, 0 when absent). */
static int count_read(struct cluster *c, const char *node, int64_t *n, int64_t *rev, struct err *e)
{
	char key[256];
	cluster_key(key, sizeof(key), "count/", node);
	struct etcd_kv kv;
	int r = etcd_get(c->etcd, key, &kv, e);
	if (r < 0)
		return r;
	*n = r ? strtoll(kv.value, NULL, 10) : 0;
	*rev = r ? kv.mod_revision : 0;
	if (r)
		etcd_kv_release(&kv);
	return 0;
}

/* Adds `delta` to node's counter (compare-and-swap, retried). */
static int count_add(struct cluster *c, const char *node, int64_t delta, struct err *e)
{
	char key[256], val[24];
	cluster_key(key, sizeof(key), "count/", node);
	for (int i = 0; i < PLACE_ATTEMPTS; i++) {
		int64_t n, rev;
		if (count_read(c, node, &n, &rev, e) < 0)
			return err_code(e);
		n += delta;
		snprintf(val, sizeof(val), "%lld", (long long)(n < 0 ? 0 : n));
		struct etcd_cmp cmp = {key, ETCD_CMP_MOD, ETCD_EQUAL, rev, NULL};
		struct etcd_op put = {ETCD_OP_PUT, key, val, 0, 0, 0};
		int won;
		if (etcd_txn(c->etcd, &cmp, 1, &put, 1, NULL, 0, &won, e) < 0)
			return err_code(e);
		if (won)
			return 0;
	}
	return err_set(e, ERR_UNAVAILABLE, EAGAIN, "slot counter of '%s' kept changing", node);
}

/* A candidate node as placement sees it. */
struct cand {
	char name[CLUSTER_NAME_MAX + 1];
	char advertise[CLUSTER_URL_MAX];
	int64_t count, rev, max;
	double free_mb;
	int warm; /* a ready desktop of the template (or of the plain pool) */
};

static int warm_of(const cJSON *cap, const char *tmpl)
{
	const cJSON *wp = cJSON_GetObjectItemCaseSensitive(cap, "warm_pool");
	if (tmpl) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(wp, "templates"), tmpl);
		return cJSON_IsNumber(t) && t->valuedouble > 0;
	}
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(wp, "ready");
	return cJSON_IsNumber(r) && r->valuedouble > 0;
}

/* The live nodes (read from etcd now: placement needs quorum) with their
 * counters; drained ones are left out unless pinned. */
static int candidates(struct cluster *c, const char *pin, const char *tmpl, struct cand *out,
		      size_t max, size_t *n, int *pin_state, struct err *e)
{
	char key[128];
	struct etcd_kvs nodes, drains;
	cluster_key(key, sizeof(key), "nodes/", NULL);
	if (etcd_range(c->etcd, key, ETCD_PREFIX, &nodes, e) < 0)
		return err_code(e);
	cluster_key(key, sizeof(key), "drain/", NULL);
	if (etcd_range(c->etcd, key, ETCD_PREFIX, &drains, e) < 0) {
		etcd_kvs_free(&nodes);
		return err_code(e);
	}
	*n = 0;
	*pin_state = 0; /* 0 not seen, 1 live, 2 drained */
	int r = 0;
	size_t pl = strlen(CLUSTER_PREFIX "nodes/");
	for (size_t i = 0; i < nodes.n && *n < max && r == 0; i++) {
		const char *name = nodes.kv[i].key + pl;
		int drained = 0;
		for (size_t k = 0; k < drains.n; k++)
			drained |=
			    strcmp(drains.kv[k].key + strlen(CLUSTER_PREFIX "drain/"), name) == 0;
		if (pin && strcmp(pin, name) != 0)
			continue;
		if (pin)
			*pin_state = drained ? 2 : 1;
		cJSON *rec = cJSON_ParseWithLength(nodes.kv[i].value, nodes.kv[i].value_len);
		const cJSON *cap = cJSON_GetObjectItemCaseSensitive(rec, "capacity");
		const char *adv =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "advertise"));
		if (rec && adv && !drained && strlen(name) <= CLUSTER_NAME_MAX) {
			struct cand *cd = &out[*n];
			*cd = (struct cand){0};
			snprintf(cd->name, sizeof(cd->name), "%s", name);
			snprintf(cd->advertise, sizeof(cd->advertise), "%s", adv);
			cd->max = (int64_t)cJSON_GetNumberValue(
			    cJSON_GetObjectItemCaseSensitive(cap, "max_sandboxes"));
			cd->free_mb = cJSON_GetNumberValue(
			    cJSON_GetObjectItemCaseSensitive(cap, "free_memory_mb"));
			cd->warm = warm_of(cap, tmpl);
			r = count_read(c, name, &cd->count, &cd->rev, e);
			(*n)++;
		}
		cJSON_Delete(rec);
	}
	etcd_kvs_free(&nodes);
	etcd_kvs_free(&drains);
	return r;
}

/* The best candidate with a free slot, or NULL: a warm one first, then
 * the most free slots, then the most free memory. */
static struct cand *best(struct cand *cs, size_t n)
{
	struct cand *b = NULL;
	for (size_t i = 0; i < n; i++) {
		struct cand *x = &cs[i];
		if (x->count >= x->max)
			continue;
		if (!b || x->warm > b->warm ||
		    (x->warm == b->warm &&
		     (x->max - x->count > b->max - b->count ||
		      (x->max - x->count == b->max - b->count && x->free_mb > b->free_mb))))
			b = x;
	}
	return b;
}

static int name_taken(struct cluster *c, const char *name, struct err *e)
{
	char key[256];
	cluster_key(key, sizeof(key), "names/", name);
	struct etcd_kv kv;
	int r = etcd_get(c->etcd, key, &kv, e);
	if (r > 0)
		etcd_kv_release(&kv);
	return r;
}

/* The one transaction: the node's counter unchanged since read → bumped,
 * and the name's key absent → reserved.  1 won, 0 lost the race. */
static int take_slot(struct cluster *c, const struct cand *b, const char *name, struct err *e)
{
	char ckey[256], nkey[256], val[24];
	cluster_key(ckey, sizeof(ckey), "count/", b->name);
	cluster_key(nkey, sizeof(nkey), "names/", name ? name : "");
	snprintf(val, sizeof(val), "%lld", (long long)b->count + 1);
	struct etcd_cmp cmps[2] = {{ckey, ETCD_CMP_MOD, ETCD_EQUAL, b->rev, NULL},
				   {nkey, ETCD_CMP_CREATE, ETCD_EQUAL, 0, NULL}};
	struct etcd_op ops[2] = {{ETCD_OP_PUT, ckey, val, 0, 0, 0},
				 {ETCD_OP_PUT, nkey, "", 0, 0, 0}};
	size_t n = name ? 2 : 1;
	int won;
	if (etcd_txn(c->etcd, cmps, n, ops, n, NULL, 0, &won, e) < 0)
		return err_code(e);
	return won;
}

static int no_room(const char *pin, int pin_state, struct err *e)
{
	if (pin && pin_state == 0)
		return err_set(e, ERR_INVALID, ENOENT, "no live node '%.*s' in the cluster",
			       UTF8_CUT(pin, 64));
	if (pin && pin_state == 2)
		return err_set(e, ERR_CONFLICT, EBUSY, "node '%.*s' is drained", UTF8_CUT(pin, 64));
	if (pin)
		return err_set(e, ERR_LIMIT, ENOSPC, "node '%.*s' has no free slot",
			       UTF8_CUT(pin, 64));
	return err_set(e, ERR_LIMIT, ENOSPC, "no node of the cluster has a free slot");
}

int cluster_place(struct cluster *c, const char *pin, const char *name, const char *tmpl,
		  struct cluster_slot *out, struct err *e)
{
	struct cand cs[64];
	for (int attempt = 0; attempt < PLACE_ATTEMPTS; attempt++) {
		size_t n = 0;
		int pin_state = 0;
		if (candidates(c, pin, tmpl, cs, 64, &n, &pin_state, e) < 0)
			return err_code(e);
		if (name) {
			int t = name_taken(c, name, e);
			if (t < 0)
				return t;
			if (t)
				return err_set(e, ERR_NAME_TAKEN, EEXIST,
					       "a sandbox of the cluster is named '%s'", name);
		}
		struct cand *b = best(cs, n);
		if (!b)
			return no_room(pin, pin_state, e);
		int won = take_slot(c, b, name, e);
		if (won < 0)
			return won;
		if (won) {
			*out = (struct cluster_slot){0};
			snprintf(out->node, sizeof(out->node), "%s", b->name);
			snprintf(out->advertise, sizeof(out->advertise), "%s", b->advertise);
			snprintf(out->name, sizeof(out->name), "%s", name ? name : "");
			out->local = strcmp(b->name, c->name) == 0;
			return 0;
		}
	}
	return err_set(e, ERR_UNAVAILABLE, EAGAIN, "placement lost %d races in a row; try again",
		       PLACE_ATTEMPTS);
}

static char *record(const char *node, const char *name)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "node", node);
	cJSON_AddStringToObject(j, "name", name ? name : "");
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

static void cache_put(struct cluster *c, const char *id, const char *node, const char *name)
{
	pthread_mutex_lock(&c->mu);
	if (c->map) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "node", node);
		cJSON_AddStringToObject(j, "name", name);
		cJSON_DeleteItemFromObjectCaseSensitive(c->map, id);
		cJSON_AddItemToObject(c->map, id, j);
	}
	if (c->names && name[0]) {
		cJSON_DeleteItemFromObjectCaseSensitive(c->names, name);
		cJSON_AddStringToObject(c->names, name, id);
	}
	pthread_mutex_unlock(&c->mu);
}

/* sandboxes/<id> → node and names/<name> → id, together. */
static int register_sandbox(struct cluster *c, const char *id, const char *node, const char *name,
			    struct err *e)
{
	char skey[256], nkey[256];
	cluster_key(skey, sizeof(skey), "sandboxes/", id);
	cluster_key(nkey, sizeof(nkey), "names/", name);
	char *rec = record(node, name);
	if (!rec)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	struct etcd_op ops[2] = {{ETCD_OP_PUT, skey, rec, 0, 0, 0},
				 {ETCD_OP_PUT, nkey, id, 0, 0, 0}};
	int won;
	int r = etcd_txn(c->etcd, NULL, 0, ops, name[0] ? 2 : 1, NULL, 0, &won, e);
	free(rec);
	if (r == 0)
		cache_put(c, id, node, name);
	return r;
}

int cluster_placed(struct cluster *c, const struct cluster_slot *s, const char *id, struct err *e)
{
	return register_sandbox(c, id, s->node, s->name, e);
}

void cluster_unplace(struct cluster *c, const struct cluster_slot *s)
{
	struct err e = ERR_INIT;
	if (count_add(c, s->node, -1, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "cluster: giving back a slot of '%s': %s", s->node, e.msg);
	if (s->name[0]) {
		char key[256];
		cluster_key(key, sizeof(key), "names/", s->name);
		struct etcd_cmp pending = {key, ETCD_CMP_VALUE, ETCD_EQUAL, 0, ""};
		struct etcd_op del = {ETCD_OP_DELETE, key, NULL, 0, 0, 0};
		int won;
		etcd_txn(c->etcd, &pending, 1, &del, 1, NULL, 0, &won, &e);
	}
}

void cluster_release(struct cluster *c, const char *id, const char *name)
{
	struct err e = ERR_INIT;
	char skey[256], nkey[256];
	cluster_key(skey, sizeof(skey), "sandboxes/", id);
	cluster_key(nkey, sizeof(nkey), "names/", name ? name : "");
	int64_t gone = 0;
	if (etcd_delete(c->etcd, skey, 0, &gone, &e) < 0) {
		log_msg(LOG_LEVEL_WARN, "cluster: forgetting sandbox %s: %s", id, e.msg);
		return;
	}
	if (name && name[0]) {
		struct etcd_cmp same = {nkey, ETCD_CMP_VALUE, ETCD_EQUAL, 0, id};
		struct etcd_op del = {ETCD_OP_DELETE, nkey, NULL, 0, 0, 0};
		int won;
		etcd_txn(c->etcd, &same, 1, &del, 1, NULL, 0, &won, &e);
	}
	if (gone && count_add(c, c->name, -1, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "cluster: freeing a slot: %s", e.msg);
	pthread_mutex_lock(&c->mu);
	cJSON_DeleteItemFromObjectCaseSensitive(c->map, id);
	if (name && name[0])
		cJSON_DeleteItemFromObjectCaseSensitive(c->names, name);
	pthread_mutex_unlock(&c->mu);
}

/* Whether `id` is in the array of {"id","name"} `local`. */
static int holds(const cJSON *local, const char *id)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, local)
	{
		const char *x = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "id"));
		if (x && strcmp(x, id) == 0)
			return 1;
	}
	return 0;
}

void cluster_reconcile(struct cluster *c, const cJSON *map)
{
	cJSON *local = c->cfg.local ? c->cfg.local(c->cfg.cls) : NULL;
	if (!local)
		return;
	struct err e = ERR_INIT;
	const cJSON *it;
	cJSON_ArrayForEach(it, local)
	{
		const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "id"));
		const char *name =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
		const cJSON *rec = cJSON_GetObjectItemCaseSensitive(map, id ? id : "");
		const char *node =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "node"));
		pthread_mutex_lock(&c->mu);
		int moving = id && cJSON_GetObjectItemCaseSensitive(c->moving, id) != NULL;
		pthread_mutex_unlock(&c->mu);
		if (id && !moving && (!node || strcmp(node, c->name) != 0)) {
			if (register_sandbox(c, id, c->name, name ? name : "", &e) == 0)
				log_msg(LOG_LEVEL_INFO, "cluster: sandbox %s registered on '%s'",
					id, c->name);
		}
	}
	cJSON_ArrayForEach(it, map)
	{
		const char *node =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "node"));
		const char *name =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
		pthread_mutex_lock(&c->mu);
		int moving = cJSON_GetObjectItemCaseSensitive(c->moving, it->string) != NULL;
		pthread_mutex_unlock(&c->mu);
		if (node && !moving && strcmp(node, c->name) == 0 && !holds(local, it->string))
			cluster_release(c, it->string, name);
	}
	/* The counter says what this node holds now (a restart may have
	 * found fewer than were placed). */
	int64_t n, rev;
	if (count_read(c, c->name, &n, &rev, &e) == 0 && n < cJSON_GetArraySize(local))
		count_add(c, c->name, cJSON_GetArraySize(local) - n, &e);
	cJSON_Delete(local);
}

/* One key from the member's own copy (answers without quorum too): 1
 * with *kv, 0 when absent or unreachable. */
static int get_local(struct cluster *c, const char *key, struct etcd_kv *kv)
{
	struct err e = ERR_INIT;
	struct etcd_kvs r;
	if (etcd_range(c->etcd, key, ETCD_SERIALIZABLE, &r, &e) < 0)
		return 0;
	if (!r.n)
		return 0;
	*kv = r.kv[0];
	r.kv[0] = (struct etcd_kv){0};
	etcd_kvs_free(&r);
	return 1;
}

/* A miss of the caches: the name's id and the id's record, from etcd. */
static void locate_miss(struct cluster *c, const char *ref)
{
	char key[256];
	struct etcd_kv kv;
	char id[128];
	snprintf(id, sizeof(id), "%s", ref);
	cluster_key(key, sizeof(key), "names/", ref);
	if (get_local(c, key, &kv) == 1) {
		if (kv.value[0] && strlen(kv.value) < sizeof(id))
			snprintf(id, sizeof(id), "%s", kv.value);
		etcd_kv_release(&kv);
	}
	cluster_key(key, sizeof(key), "sandboxes/", id);
	if (get_local(c, key, &kv) != 1)
		return;
	cJSON *rec = cJSON_ParseWithLength(kv.value, kv.value_len);
	const char *node = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "node"));
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "name"));
	if (node)
		cache_put(c, id, node, name ? name : "");
	cJSON_Delete(rec);
	etcd_kv_release(&kv);
}

/* The cached answer (under mu): -1 when the caches do not know `ref`. */
static int locate_cached(struct cluster *c, const char *ref, char id[64],
			 char node[CLUSTER_NAME_MAX + 1], char advertise[CLUSTER_URL_MAX])
{
	const char *nid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c->names, ref));
	snprintf(id, 64, "%s", nid && nid[0] ? nid : ref);
	const cJSON *rec = cJSON_GetObjectItemCaseSensitive(c->map, id);
	const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "node"));
	if (!n)
		return -1;
	snprintf(node, CLUSTER_NAME_MAX + 1, "%s", n);
	if (strcmp(n, c->name) == 0)
		return CLUSTER_HERE;
	if (!cJSON_GetObjectItemCaseSensitive(c->nodes, n))
		return CLUSTER_LOST;
	const char *adv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c->members, n));
	snprintf(advertise, CLUSTER_URL_MAX, "%s", adv ? adv : "");
	return adv ? CLUSTER_REMOTE : CLUSTER_LOST;
}

/* The cache says `node` is lost: whether etcd still holds its record (the
 * cache is a tick old, or older while ticks fail); then it is put back. */
static int still_alive(struct cluster *c, const char *node, char advertise[CLUSTER_URL_MAX])
{
	char key[256];
	cluster_key(key, sizeof(key), "nodes/", node);
	struct etcd_kv kv;
	if (get_local(c, key, &kv) != 1)
		return 0;
	cJSON *rec = cJSON_ParseWithLength(kv.value, kv.value_len);
	etcd_kv_release(&kv);
	const char *adv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "advertise"));
	int ok = adv && strlen(adv) < CLUSTER_URL_MAX;
	if (ok) {
		snprintf(advertise, CLUSTER_URL_MAX, "%s", adv);
		pthread_mutex_lock(&c->mu);
		if (c->nodes && !cJSON_GetObjectItemCaseSensitive(c->nodes, node)) {
			cJSON_AddItemToObject(c->nodes, node, rec);
			rec = NULL;
		}
		if (c->members && !cJSON_GetObjectItemCaseSensitive(c->members, node))
			cJSON_AddStringToObject(c->members, node, advertise);
		pthread_mutex_unlock(&c->mu);
	}
	cJSON_Delete(rec);
	return ok;
}

enum cluster_where cluster_locate(struct cluster *c, const char *ref, char id[64],
				  char node[CLUSTER_NAME_MAX + 1], char advertise[CLUSTER_URL_MAX])
{
	node[0] = advertise[0] = '\0';
	for (int pass = 0; pass < 2; pass++) {
		pthread_mutex_lock(&c->mu);
		int r = locate_cached(c, ref, id, node, advertise);
		pthread_mutex_unlock(&c->mu);
		if (r == CLUSTER_LOST && still_alive(c, node, advertise))
			return CLUSTER_REMOTE;
		if (r >= 0)
			return (enum cluster_where)r;
		if (pass == 0)
			locate_miss(c, ref);
	}
	return CLUSTER_HERE;
}

cJSON *cluster_remote_sandboxes(struct cluster *c)
{
	/* The view as etcd has it now, when it answers (a list is rare;
	 * the tick's view may be a few seconds old while ticks fail). */
	struct err e = ERR_INIT;
	cluster_refresh(c, &e);
	cJSON *a = cJSON_CreateArray();
	pthread_mutex_lock(&c->mu);
	const cJSON *it;
	cJSON_ArrayForEach(it, c->map)
	{
		const char *node =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "node"));
		const char *name =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
		if (!node || strcmp(node, c->name) == 0)
			continue;
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "id", it->string);
		cJSON_AddStringToObject(j, "name", name ? name : "");
		cJSON_AddStringToObject(j, "node", node);
		const char *adv =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c->members, node));
		cJSON_AddStringToObject(j, "advertise", adv ? adv : "");
		cJSON_AddStringToObject(
		    j, "health", cJSON_GetObjectItemCaseSensitive(c->nodes, node) ? "ok" : "lost");
		cJSON_AddItemToArray(a, j);
	}
	pthread_mutex_unlock(&c->mu);
	return a;
}

void cluster_moving(struct cluster *c, const char *id, int on)
{
	pthread_mutex_lock(&c->mu);
	if (!c->moving)
		c->moving = cJSON_CreateObject();
	cJSON_DeleteItemFromObjectCaseSensitive(c->moving, id);
	if (on)
		cJSON_AddTrueToObject(c->moving, id);
	pthread_mutex_unlock(&c->mu);
}

void cluster_moved(struct cluster *c, const char *id, const char *node, const char *name)
{
	struct err e = ERR_INIT;
	cache_put(c, id, node, name ? name : "");
	pthread_mutex_lock(&c->mu);
	if (!c->moved)
		c->moved = cJSON_CreateObject();
	const char *keys[2] = {id, name};
	for (int i = 0; i < 2; i++) {
		if (!keys[i] || !keys[i][0])
			continue;
		cJSON_DeleteItemFromObjectCaseSensitive(c->moved, keys[i]);
		cJSON_AddStringToObject(c->moved, keys[i], node);
	}
	pthread_mutex_unlock(&c->mu);
	if (count_add(c, c->name, -1, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "cluster: freeing the slot of moved sandbox %s: %s", id,
			e.msg);
}

int cluster_moved_to(struct cluster *c, const char *ref, char node[CLUSTER_NAME_MAX + 1])
{
	pthread_mutex_lock(&c->mu);
	const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c->moved, ref));
	if (n)
		snprintf(node, CLUSTER_NAME_MAX + 1, "%s", n);
	pthread_mutex_unlock(&c->mu);
	return n != NULL;
}
