/* The node's membership: its lease, kept alive by a thread that also
 * republishes its capacity and refreshes the cached view of the cluster
 * (cluster.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/text.h"

void cluster_key(char *out, size_t size, const char *a, const char *b)
{
	snprintf(out, size, CLUSTER_PREFIX "%s%s", a, b ? b : "");
}

static int name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > CLUSTER_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* "host:port" or "http://host:port" into "http://host:port". */
static int advertise_url(const char *in, char *out, size_t size, struct err *e)
{
	const char *hp = in;
	if (strncmp(in, "http://", 7) == 0)
		hp = in + 7;
	else if (strstr(in, "://"))
		return err_set(e, ERR_INVALID, EINVAL,
			       "--advertise: only http:// (node-to-node calls carry the "
			       "cluster secret; see docs/cluster.md)");
	size_t n = strlen(hp);
	while (n && hp[n - 1] == '/')
		n--;
	if (!n || n > 200 || !memchr(hp, ':', n) || memchr(hp, '/', n))
		return err_set(e, ERR_INVALID, EINVAL,
			       "--advertise: want http://HOST:PORT, not '%s'", in);
	snprintf(out, size, "http://%.*s", (int)n, hp);
	return 0;
}

static int config_check(struct cluster *c, const struct cluster_config *cfg, struct err *e)
{
	if (!cfg->name || !name_ok(cfg->name))
		return err_set(e, ERR_INVALID, EINVAL,
			       "--node-name: 1-%d of a-z 0-9 '-' (required with --cluster)",
			       CLUSTER_NAME_MAX);
	if (!cfg->advertise)
		return err_set(e, ERR_INVALID, EINVAL,
			       "--advertise URL is required with --cluster (the address other "
			       "nodes reach this one at)");
	if (advertise_url(cfg->advertise, c->advertise, sizeof(c->advertise), e) < 0)
		return err_code(e);
	if (!cfg->secret || strlen(cfg->secret) < 16)
		return err_set(e, ERR_INVALID, EINVAL,
			       "--cluster-secret-file must hold a secret of at least 16 characters "
			       "(the same on every node)");
	if (cfg->ttl_s < 2 || cfg->ttl_s > 60)
		return err_set(e, ERR_INVALID, EINVAL, "--cluster-ttl: 2 to 60 seconds");
	snprintf(c->name, sizeof(c->name), "%s", cfg->name);
	c->secret = strdup(cfg->secret);
	if (!c->secret)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	c->ttl_s = cfg->ttl_s;
	c->cfg = *cfg;
	c->cfg.name = c->name;
	c->cfg.advertise = c->advertise;
	c->cfg.secret = c->secret;
	return 0;
}

/* The node's record: its capacity and what the others need to reach it. */
static char *node_record(struct cluster *c)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", c->name);
	cJSON_AddStringToObject(j, "advertise", c->advertise);
	cJSON *cap = c->cfg.capacity ? c->cfg.capacity(c->cfg.cls) : NULL;
	if (!cap)
		cap = cJSON_CreateObject();
	if (!cJSON_GetObjectItemCaseSensitive(cap, "max_sandboxes"))
		cJSON_AddNumberToObject(cap, "max_sandboxes", c->cfg.max_sandboxes);
	cJSON_AddItemToObject(j, "capacity", cap);
	cJSON_AddNumberToObject(j, "updated_ms", (double)clock_wall_ms());
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

static int publish(struct cluster *c, struct err *e)
{
	char *rec = node_record(c);
	if (!rec)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	char key[256];
	cluster_key(key, sizeof(key), "nodes/", c->name);
	int r = etcd_put(c->etcd, key, rec, strlen(rec), c->lease, e);
	free(rec);
	return r;
}

/* A new lease, the node's keys on it, its sandboxes registered again. */
static int join(struct cluster *c, struct err *e)
{
	int64_t lease;
	if (etcd_lease_grant(c->etcd, c->ttl_s, &lease, e) < 0)
		return err_wrap(e, "cluster lease");
	pthread_mutex_lock(&c->mu);
	c->lease = lease;
	pthread_mutex_unlock(&c->mu);
	char key[256];
	cluster_key(key, sizeof(key), "members/", c->name);
	if (etcd_put(c->etcd, key, c->advertise, strlen(c->advertise), 0, e) < 0)
		return err_code(e);
	if (cluster_refresh(c, e) < 0)
		return err_code(e);
	pthread_mutex_lock(&c->mu);
	cJSON *map = cJSON_Duplicate(c->map, 1);
	pthread_mutex_unlock(&c->mu);
	cluster_reconcile(c, map);
	cJSON_Delete(map);
	return publish(c, e);
}

/* kv's value parsed as JSON (NULL when it is not). */
static cJSON *kv_json(const struct etcd_kv *kv)
{
	return cJSON_ParseWithLength(kv->value, kv->value_len);
}

/* The key's last part (after the prefix `under`). */
static const char *tail_of(const char *key, const char *under)
{
	size_t n = strlen(CLUSTER_PREFIX) + strlen(under);
	return strlen(key) > n ? key + n : "";
}

/* Reads prefix `under` into an object name → (JSON value, or the string). */
static cJSON *read_prefix(struct cluster *c, const char *under, int as_json, struct err *e)
{
	char key[128];
	cluster_key(key, sizeof(key), under, NULL);
	struct etcd_kvs r;
	if (etcd_range(c->etcd, key, ETCD_PREFIX | ETCD_SERIALIZABLE, &r, e) < 0)
		return NULL;
	cJSON *o = cJSON_CreateObject();
	for (size_t i = 0; i < r.n; i++) {
		cJSON *v = as_json ? kv_json(&r.kv[i]) : cJSON_CreateString(r.kv[i].value);
		if (v)
			cJSON_AddItemToObject(o, tail_of(r.kv[i].key, under), v);
	}
	etcd_kvs_free(&r);
	return o;
}

int cluster_refresh(struct cluster *c, struct err *e)
{
	cJSON *parts[5] = {0};
	static const char *const under[5] = {"nodes/", "members/", "drain/", "sandboxes/",
					     "names/"};
	static const int as_json[5] = {1, 0, 0, 1, 0};
	for (int i = 0; i < 5; i++) {
		parts[i] = read_prefix(c, under[i], as_json[i], e);
		if (!parts[i]) {
			for (int k = 0; k < i; k++)
				cJSON_Delete(parts[k]);
			return err_code(e);
		}
	}
	pthread_mutex_lock(&c->mu);
	cJSON *old[5] = {c->nodes, c->members, c->drains, c->map, c->names};
	c->nodes = parts[0];
	c->members = parts[1];
	c->drains = parts[2];
	c->map = parts[3];
	c->names = parts[4];
	c->refreshed_ms = clock_mono_ms();
	pthread_mutex_unlock(&c->mu);
	for (int i = 0; i < 5; i++)
		cJSON_Delete(old[i]);
	return 0;
}

/* One tick: keep the lease (a new one when it went), publish, refresh,
 * reconcile. */
static void tick(struct cluster *c)
{
	struct err e = ERR_INIT;
	int64_t ttl = 0;
	pthread_mutex_lock(&c->mu);
	int64_t lease = c->lease;
	pthread_mutex_unlock(&c->mu);
	int r = lease ? etcd_lease_keepalive(c->etcd, lease, &ttl, &e) : -1;
	if (r == 0 && ttl == 0) {
		log_msg(LOG_LEVEL_WARN, "cluster: the lease of node '%s' expired; joining again",
			c->name);
		r = join(c, &e);
	} else if (r < 0 && !lease) {
		r = join(c, &e);
	} else if (r == 0) {
		r = publish(c, &e);
		if (r == 0)
			r = cluster_refresh(c, &e);
		if (r == 0) {
			pthread_mutex_lock(&c->mu);
			cJSON *map = cJSON_Duplicate(c->map, 1);
			pthread_mutex_unlock(&c->mu);
			cluster_reconcile(c, map);
			cJSON_Delete(map);
		}
	}
	pthread_mutex_lock(&c->mu);
	if (c->etcd_ok != (r == 0))
		log_msg(r == 0 ? LOG_LEVEL_INFO : LOG_LEVEL_WARN, "cluster: etcd %s%s%s",
			r == 0 ? "reachable again" : "unreachable: ", r == 0 ? "" : e.msg,
			r == 0 ? "" : "; serving the sandboxes held here");
	c->etcd_ok = r == 0;
	pthread_mutex_unlock(&c->mu);
}

static void *cluster_thread(void *arg)
{
	struct cluster *c = arg;
	/* A third of the TTL: two keepalives may fail before the lease ends. */
	long long period = c->ttl_s * 1000LL / 3;
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		struct timespec until = clock_wall_after(period);
		pthread_cond_timedwait(&c->cond, &c->mu, &until);
		if (c->stop)
			break;
		pthread_mutex_unlock(&c->mu);
		tick(c);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* How long one etcd member gets per call: a third of the TTL, but at
 * least what electing a new leader takes (etcd's default election timeout
 * is 1 s), so that a call while the leader changes waits for the next one
 * instead of failing. */
static int member_timeout_ms(int ttl_s)
{
	int ms = ttl_s * 1000 / 3;
	return ms < 2000 ? 2000 : ms;
}

int cluster_open(struct cluster **out, const struct cluster_config *cfg, struct err *e)
{
	struct cluster *c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cond, NULL);
	if (config_check(c, cfg, e) < 0 ||
	    etcd_open(&c->etcd, cfg->endpoints, member_timeout_ms(c->ttl_s), e) < 0) {
		cluster_close(c);
		return err_wrap(e, "cluster");
	}
	/* etcd may be without quorum while this node (re)starts: it serves
	 * its sandboxes meanwhile and joins on a later tick. */
	struct err je = ERR_INIT;
	c->etcd_ok = join(c, &je) == 0;
	if (!c->etcd_ok) {
		log_msg(LOG_LEVEL_WARN, "cluster: cannot join yet (%s); retrying every %d ms",
			je.msg, c->ttl_s * 1000 / 3);
		pthread_mutex_lock(&c->mu);
		c->lease = 0; /* not joined: the next tick joins */
		pthread_mutex_unlock(&c->mu);
	}
	if (pthread_create(&c->thread, NULL, cluster_thread, c) != 0) {
		cluster_close(c);
		return err_set(e, ERR_INTERNAL, EAGAIN, "cluster: cannot start its thread");
	}
	c->started = 1;
	*out = c;
	return 0;
}

void cluster_close(struct cluster *c)
{
	if (!c)
		return;
	if (c->started) {
		pthread_mutex_lock(&c->mu);
		c->stop = 1;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thread, NULL);
	}
	struct err e = ERR_INIT;
	if (c->lease && c->etcd)
		etcd_lease_revoke(c->etcd, c->lease, &e);
	etcd_close(c->etcd);
	cJSON_Delete(c->nodes);
	cJSON_Delete(c->members);
	cJSON_Delete(c->drains);
	cJSON_Delete(c->map);
	cJSON_Delete(c->names);
	cJSON_Delete(c->moving);
	cJSON_Delete(c->moved);
	free(c->secret);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

const char *cluster_self(const struct cluster *c)
{
	return c->name;
}

const char *cluster_secret(const struct cluster *c)
{
	return c->secret;
}

int cluster_secret_ok(const struct cluster *c, const char *presented)
{
	return presented && text_equal_secret(presented, c->secret);
}

/* One entry of GET /v1/nodes (under mu). */
static cJSON *node_entry(struct cluster *c, const char *name, const char *advertise)
{
	cJSON *rec = cJSON_GetObjectItemCaseSensitive(c->nodes, name);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", name);
	cJSON_AddStringToObject(j, "advertise", advertise);
	cJSON_AddStringToObject(j, "health", rec ? "ok" : "lost");
	cJSON_AddBoolToObject(j, "draining",
			      cJSON_GetObjectItemCaseSensitive(c->drains, name) != NULL);
	cJSON_AddBoolToObject(j, "self", strcmp(name, c->name) == 0);
	const cJSON *cap = cJSON_GetObjectItemCaseSensitive(rec, "capacity");
	cJSON_AddItemToObject(j, "capacity", cap ? cJSON_Duplicate(cap, 1) : cJSON_CreateNull());
	return j;
}

cJSON *cluster_nodes_json(struct cluster *c)
{
	struct err e = ERR_INIT;
	int fresh = cluster_refresh(c, &e) == 0;
	pthread_mutex_lock(&c->mu);
	cJSON *list = cJSON_CreateArray();
	const cJSON *m;
	cJSON_ArrayForEach(m, c->members)
	{
		cJSON_AddItemToArray(list, node_entry(c, m->string, m->valuestring));
	}
	pthread_mutex_unlock(&c->mu);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "nodes", list);
	if (!fresh) {
		cJSON_AddBoolToObject(j, "stale", 1);
		cJSON_AddStringToObject(j, "etcd_error", e.msg);
	}
	return j;
}

int cluster_drain(struct cluster *c, const char *node, struct err *e)
{
	char key[256];
	cluster_key(key, sizeof(key), "members/", node);
	struct etcd_kv kv;
	int r = etcd_get(c->etcd, key, &kv, e);
	if (r < 0)
		return err_code(e);
	if (r == 0)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no node '%.*s' in the cluster",
			       UTF8_CUT(node, 64));
	etcd_kv_release(&kv);
	cluster_key(key, sizeof(key), "drain/", node);
	char when[32];
	snprintf(when, sizeof(when), "%lld", clock_wall_ms());
	if (etcd_put(c->etcd, key, when, strlen(when), 0, e) < 0)
		return err_code(e);
	return cluster_refresh(c, e);
}
