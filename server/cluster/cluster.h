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

/* `key`, or with `prefix` every key starting with it, sorted by key. */
int etcd_range(struct etcd *c, const char *key, int prefix, struct etcd_kvs *out, struct err *e);
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

#endif
