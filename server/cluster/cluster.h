/* cluster: many deskboxd nodes as one service, coordinated by etcd
 * (docs/cluster.md).  Two parts:
 *
 *  - an etcd v3 client over etcd's gRPC gateway (JSON over HTTP via
 *    libcurl, cluster_etcd.c): key-value calls, transactions and leases,
 *    with failover over the listed members.  No consensus of its own.
 *  - the node's place in the cluster (cluster.c, cluster_place.c):
 *    membership by a lease kept alive by a thread, the capacity it
 *    publishes, placement of creates and the sandbox → node map.
 *
 * It knows no HTTP server (requests are forwarded by server/http at the
 * API's edge); it asks the sandbox registry only for counts through the
 * callback the caller gives.  Errors: ERR_UNAVAILABLE when no etcd member
 * answers (no quorum), ERR_INVALID for a refused request.
 */
#ifndef DESKBOX_SERVER_CLUSTER_CLUSTER_H
#define DESKBOX_SERVER_CLUSTER_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "common/error.h"

/* ---- etcd (cluster_etcd.c) ---- */

#define ETCD_MAX_ENDPOINTS 16

struct etcd;

/* `endpoints` is "etcd://host:port,host:port,..." (the scheme optional);
 * each call gives one member `timeout_ms` before trying the next.  The
 * client is safe to share between threads. */
int etcd_open(struct etcd **out, const char *endpoints, int timeout_ms, struct err *e);
void etcd_close(struct etcd *c);
size_t etcd_n_endpoints(const struct etcd *c);

/* One key as etcd holds it; key and value are malloc'd and NUL-terminated
 * (value_len counts the value's bytes). */
struct etcd_kv {
	char *key, *value;
	size_t value_len;
	int64_t create_revision, mod_revision, version, lease;
};
struct etcd_kvs {
	struct etcd_kv *kv;
	size_t n;
	int64_t revision; /* the store's revision the answer saw */
};
void etcd_kv_release(struct etcd_kv *kv);
void etcd_kvs_free(struct etcd_kvs *r);

/* `key`, or with ETCD_PREFIX every key starting with it, sorted by key.
 * ETCD_SERIALIZABLE: the member's own copy, answered without the leader
 * (also while the cluster has no quorum; possibly a little behind). */
enum etcd_range_flags { ETCD_PREFIX = 1 << 0, ETCD_SERIALIZABLE = 1 << 1 };
int etcd_range(struct etcd *c, const char *key, unsigned flags, struct etcd_kvs *out,
	       struct err *e);
/* 1 with *out filled (release it), 0 when there is no such key. */
int etcd_get(struct etcd *c, const char *key, struct etcd_kv *out, struct err *e);
/* `lease` 0: none (the key stays until deleted). */
int etcd_put(struct etcd *c, const char *key, const char *value, size_t len, int64_t lease,
	     struct err *e);
/* *deleted (may be NULL): how many keys went. */
int etcd_delete(struct etcd *c, const char *key, int prefix, int64_t *deleted, struct err *e);

/* A transaction: if every compare holds, the `ok` ops run, else the
 * `fail` ones; *succeeded says which, all atomically. */
enum etcd_cmp_target { ETCD_CMP_CREATE, ETCD_CMP_MOD, ETCD_CMP_VERSION, ETCD_CMP_VALUE };
enum etcd_cmp_result { ETCD_EQUAL, ETCD_NOT_EQUAL, ETCD_LESS, ETCD_GREATER };
struct etcd_cmp {
	const char *key;
	enum etcd_cmp_target target;
	enum etcd_cmp_result result;
	int64_t number;	   /* a revision or version (a missing key's are 0) */
	const char *value; /* ETCD_CMP_VALUE */
};
enum etcd_op_type { ETCD_OP_PUT, ETCD_OP_DELETE, ETCD_OP_RANGE };
struct etcd_op {
	enum etcd_op_type type;
	const char *key;
	const char *value; /* PUT */
	size_t value_len;  /* PUT; 0: strlen(value) */
	int64_t lease;	   /* PUT */
	int prefix;	   /* DELETE, RANGE */
};
int etcd_txn(struct etcd *c, const struct etcd_cmp *cmps, size_t n_cmps, const struct etcd_op *ok,
	     size_t n_ok, const struct etcd_op *fail, size_t n_fail, int *succeeded, struct err *e);

/* Leases: keys put with one go when it expires.  keepalive gives the TTL
 * left after the refresh; 0 means the lease is gone (expired or
 * revoked): grant a new one. */
int etcd_lease_grant(struct etcd *c, int ttl_s, int64_t *id, struct err *e);
int etcd_lease_keepalive(struct etcd *c, int64_t id, int64_t *ttl, struct err *e);
int etcd_lease_revoke(struct etcd *c, int64_t id, struct err *e);

/* The raw call: POSTs `req` (consumed) to `path` ("/v3/kv/range") and
 * gives the answer's JSON object (caller frees).  And a gateway integer
 * (a string in JSON) of `j`, 0 when absent. */
int etcd_call(struct etcd *c, const char *path, cJSON *req, cJSON **out, struct err *e);
int64_t etcd_int(const cJSON *j, const char *name);

/* ---- the node in the cluster (cluster.c, cluster_place.c, cluster_node.c) ---- */

#define CLUSTER_NAME_MAX 63
#define CLUSTER_URL_MAX	 256
/* The header node-to-node calls carry the cluster secret in. */
#define CLUSTER_SECRET_HEADER "X-Deskbox-Cluster-Secret"

struct cluster_config {
	const char *endpoints; /* --cluster etcd://h:p,... */
	const char *name;      /* --node-name: 1-63 of a-z 0-9 - */
	const char *advertise; /* --advertise: http://host:port other nodes reach it at */
	const char *secret;    /* --cluster-secret-file's content */
	int ttl_s;	       /* --cluster-ttl: the lease's seconds */
	unsigned max_sandboxes;
	/* This node's capacity as a JSON object (free memory, sandboxes,
	 * backends, images, templates, warm pool; the caller's: freed here)
	 * and its sandboxes as an array of {"id","name"}; on the cluster's
	 * thread, any time. */
	cJSON *(*capacity)(void *cls);
	cJSON *(*local)(void *cls);
	void *cls;
};

struct cluster;

/* Validates the config, registers the node (lease, capacity, its
 * sandboxes) and starts the thread keeping the lease alive.  When etcd
 * does not answer at start the node serves anyway and the thread joins
 * once etcd answers (a node restarting while etcd has no quorum). */
int cluster_open(struct cluster **out, const struct cluster_config *cfg, struct err *e);
/* Stops the thread and revokes the lease (the node leaves at once). */
void cluster_close(struct cluster *c);
const char *cluster_self(const struct cluster *c);
/* 1 when `presented` is the cluster secret (constant time). */
int cluster_secret_ok(const struct cluster *c, const char *presented);
const char *cluster_secret(const struct cluster *c);

/* GET /v1/nodes: [{"name","advertise","health":"ok"|"lost","draining",
 * "self","capacity":{...}}], from etcd when it answers, else from the
 * last view (then "stale":true). */
cJSON *cluster_nodes_json(struct cluster *c);
/* Stops placing sandboxes on `node` (kept in etcd).  ERR_NOT_FOUND for a
 * node never seen, ERR_UNAVAILABLE without etcd. */
int cluster_drain(struct cluster *c, const char *node, struct err *e);

/* Placement (cluster_place.c).  A create picks a node: the pinned one, or
 * among the live, undrained ones with a free slot those with a ready warm
 * desktop of the template first, then the most free slots, then the most
 * free memory.  One transaction takes the slot (compares the node's slot
 * counter's revision and bumps it) and reserves the name (compares that
 * its key does not exist), so two creates never get one last slot or one
 * name.  ERR_LIMIT when no node has room, ERR_NAME_TAKEN, ERR_INVALID for
 * an unknown pinned node, ERR_CONFLICT for a drained or lost one,
 * ERR_UNAVAILABLE when etcd has no quorum. */
struct cluster_slot {
	char node[CLUSTER_NAME_MAX + 1];
	char advertise[CLUSTER_URL_MAX];
	char name[64]; /* the sandbox's name, "" for none */
	int local;     /* the node is this one */
};
int cluster_place(struct cluster *c, const char *pin, const char *name, const char *tmpl,
		  struct cluster_slot *out, struct err *e);
/* The create on the slot's node made sandbox `id`: records id → node and
 * name → id.  Or it failed: gives the slot and the name back. */
int cluster_placed(struct cluster *c, const struct cluster_slot *s, const char *id, struct err *e);
void cluster_unplace(struct cluster *c, const struct cluster_slot *s);
/* This node deleted sandbox `id` (named `name`, or ""): its records go
 * and its slot is free again. */
void cluster_release(struct cluster *c, const char *id, const char *name);

/* Where sandbox `ref` (an id or a name) lives: CLUSTER_HERE (this node or
 * nobody knows it), CLUSTER_REMOTE (node and advertise filled) or
 * CLUSTER_LOST (its node's lease is gone; node filled).  Cached; a miss
 * asks etcd. */
enum cluster_where { CLUSTER_HERE, CLUSTER_REMOTE, CLUSTER_LOST };
enum cluster_where cluster_locate(struct cluster *c, const char *ref, char id[64],
				  char node[CLUSTER_NAME_MAX + 1], char advertise[CLUSTER_URL_MAX]);
/* The sandboxes the map gives to other nodes, with their node's health,
 * from etcd when it answers, else from the last view:
 * [{"id","name","node","advertise","health"}]. */
cJSON *cluster_remote_sandboxes(struct cluster *c);

/* Calls to other nodes (cluster_node.c), with the cluster secret: a TCP
 * connection to `advertise` (the caller owns the fd), and a whole request
 * with a JSON (or empty) body, an Authorization value to pass on (or NULL)
 * and a deadline (0: 180 s, what a create may take), giving the status and
 * the answer (*answer malloc'd). */
int cluster_connect(const char *advertise, struct err *e);
int cluster_call(struct cluster *c, const char *advertise, const char *method, const char *path,
		 const char *auth, const char *body, int timeout_ms, long *status, char **answer,
		 size_t *len, struct err *e);

/* The same with a body streamed from `in` (a tar, chunked), POSTed. */
int cluster_send(struct cluster *c, const char *advertise, const char *path, FILE *in,
		 int timeout_ms, long *status, char **answer, size_t *len, struct err *e);

/* Moving a sandbox to another node (drain with "migrate"): while `on`,
 * the reconcile of this node leaves `id` alone (its record may already
 * name the new owner).  cluster_moved: it went to `node` (which recorded
 * it): this node's slot of it is free again. */
void cluster_moving(struct cluster *c, const char *id, int on);
void cluster_moved(struct cluster *c, const char *id, const char *node, const char *name);
/* 1 with `node` filled when this node moved sandbox `ref` (id or name)
 * there. */
int cluster_moved_to(struct cluster *c, const char *ref, char node[CLUSTER_NAME_MAX + 1]);

#endif
