/* network internals: what the network/ files share.  Not for other
 * modules: they use network.h. */
#ifndef DESKBOX_SERVER_NETWORK_INTERNAL_H
#define DESKBOX_SERVER_NETWORK_INTERNAL_H

#include <limits.h>
#include <net/if.h>
#include <pthread.h>

#include "network.h"

/* Link names: "dbx<slot>" on the host, "eth0" in the sandbox. */
#define NETWORK_LINK_PREFIX "dbx"
#define NETWORK_TABLE	    "deskbox"
#define NETWORK_MAX_SLOTS   4096
/* <state>/network/<marker>: this state dir's deskboxd made the table. */
#define NETWORK_MARKER "table-made"
/* Most IPv4 networks of the uplink that are kept out of reach. */
#define NETWORK_MAX_UPLINK_NETS 16

struct nft_ctx;

struct network {
	struct network_config cfg;
	char state[PATH_MAX]; /* <state_dir>/network */
	uint32_t subnet;      /* host order */
	unsigned prefix;
	unsigned n_slots;
	char uplink[IF_NAMESIZE];
	/* The uplink's IPv4 networks (addr, prefix), read when the table is
	 * made (net_uplink_check). */
	struct network_rule up_nets[NETWORK_MAX_UPLINK_NETS];
	size_t n_up_nets;
	char dns[NETWORK_MAX_DNS][16];
	size_t n_dns;
	const char *dnsmasq;

	pthread_mutex_t mu;  /* slots, the table's existence, nft */
	unsigned char *used; /* n_slots flags */
	int table_made;
	struct nft_ctx *nft;
};

struct network_attachment {
	unsigned slot;
	char link[IF_NAMESIZE];
	char gw[16], addr[16];
	uint32_t gw_n, addr_n; /* host order */
	char resolv[PATH_MAX];
	pid_t dnsmasq; /* -1: none */
	enum network_mode mode;
	uint16_t intercept; /* the egress proxy's port, 0: none (network.h) */
	int intercept_all;  /* every TCP port, not only the web ones */
};

/* ---- links (network_link.c): rtnetlink over libmnl ---- */
/* Makes the veth pair: host end `host` (gw/30, up) and `eth0` inside the
 * network namespace of `pid` (addr/30, up, default route via gw). */
int net_link_make(const char *host, pid_t pid, uint32_t gw, uint32_t addr, struct err *e);
/* Deletes link `name` (its veth peer goes with it); 0 if it is not there. */
int net_link_delete(const char *name, struct err *e);
/* Deletes every link whose name starts with NETWORK_LINK_PREFIX. */
void net_link_sweep(void);
/* The interface of the default IPv4 route, into out. */
int net_link_default_uplink(char *out, size_t size, struct err *e);

/* ---- the uplink (network_uplink.c), n->mu held ---- */
/* Checks that n->uplink exists, is up and holds an IPv4 address, and that
 * the sandbox subnet is apart from its networks (ERR_UNAVAILABLE saying
 * which), and reads those networks into n->up_nets. */
int net_uplink_check(struct network *n, struct err *e);

/* ---- nftables (network_nft.c), n->mu held ---- */
int net_nft_run(struct network *n, const char *cmds, struct err *e);
/* The table with its hooks, sets and maps, unless made already. */
int net_nft_table(struct network *n, struct err *e);
/* The sandbox's chains and sets, and its map elements. */
int net_nft_add(struct network *n, const struct network_attachment *a,
		const struct network_policy *p, struct err *e);
void net_nft_remove(struct network *n, const struct network_attachment *a);

/* ---- the resolver (network_dns.c) ---- */
int net_dns_start(struct network *n, struct network_attachment *a, const struct network_policy *p,
		  struct err *e);
void net_dns_stop(struct network *n, struct network_attachment *a);
int net_dns_probe(const struct network_attachment *a, int timeout_ms, struct err *e);
/* Kills the dnsmasq processes a previous deskboxd left (pid files). */
void net_dns_sweep(struct network *n);

#endif
