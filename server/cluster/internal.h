/* Shared by the cluster files (cluster.c: membership and the caches,
 * cluster_place.c: placement and the sandbox map, cluster_node.c: calls to
 * other nodes); not used elsewhere. */
#ifndef DESKBOX_SERVER_CLUSTER_INTERNAL_H
#define DESKBOX_SERVER_CLUSTER_INTERNAL_H

#include <pthread.h>

#include "cluster.h"

/* The keys, all under one prefix:
 *   nodes/<name>      the node's capacity JSON, on its lease (gone when
 *                     the node stops keeping it alive)
 *   members/<name>    its advertise URL, kept: a node whose nodes/ key went
 *                     is "lost", not forgotten
 *   drain/<name>      present: no placement there
 *   count/<name>      sandboxes placed there (the slot counter every
 *                     placement compares and bumps in its transaction)
 *   sandboxes/<id>    {"node":N,"name":S}: who holds the sandbox
 *   names/<name>      the sandbox id ("" while its create runs) */
#define CLUSTER_PREFIX "/deskbox/"

struct cluster {
	struct etcd *etcd;
	struct cluster_config cfg; /* strings copied below */
	char name[CLUSTER_NAME_MAX + 1];
	char advertise[CLUSTER_URL_MAX];
	char *secret;
	int ttl_s;
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int stop;
	int64_t lease;
	/* The caches, refreshed on every tick (under mu): the live nodes'
	 * capacity by name, the known members' URLs, the drained names, the
	 * sandbox → {"node","name"} map and name → id. */
	cJSON *nodes, *members, *drains, *map, *names;
	/* Sandboxes being moved away (cluster_moving): id → true. */
	cJSON *moving;
	/* Sandboxes moved away, by id and by name → their new node. */
	cJSON *moved;
	long long refreshed_ms; /* when the caches were last read from etcd */
	int etcd_ok;		/* the last tick reached etcd */
};

/* cluster_place.c: re-registers this node's sandboxes (a restart, a new
 * lease) and forgets records of sandboxes it no longer holds. */
void cluster_reconcile(struct cluster *c, const cJSON *map);
/* cluster.c: reads nodes/, members/, drain/, sandboxes/ and names/ into
 * the caches (serializable reads: they work without quorum). */
int cluster_refresh(struct cluster *c, struct err *e);
/* "PREFIX" + a + b into out. */
void cluster_key(char *out, size_t size, const char *a, const char *b);

#endif
