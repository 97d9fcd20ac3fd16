/* network: the sandboxes' way out, with a policy (docs/network.md).
 *
 * A sandbox's container has a network namespace of its own holding only
 * `lo` (crun makes it).  A sandbox whose policy is not "none" is attached:
 * a veth pair, host end dbx<slot> addressed as the gateway of a /30 out of
 * --sandbox-subnet, the peer created directly inside the sandbox as eth0
 * with the next address and a default route; nftables rules in one
 * `table inet deskbox` (per-sandbox chains behind verdict maps keyed by the
 * interface, NAT on the uplink); a dnsmasq of its own on the gateway
 * address as its resolver, which in allow mode answers only the listed
 * names and pins their answers into an nftables set.  Whatever the policy,
 * the host itself, other sandboxes, link-local and metadata addresses stay
 * out of reach, and private ranges unless an allow entry names them.
 *
 * `struct network` is the host-wide manager, opened once in main() before
 * the sandbox registry (it removes what a killed deskboxd left: the table,
 * dbx* links, dnsmasq processes from their pid files).  One deskboxd per
 * network namespace: the table and link names are fixed.
 *
 * This module knows nothing of sandboxes or HTTP: it takes a pid whose
 * network namespace to attach, a policy, and a path for resolv.conf.
 */
#ifndef DESKBOX_SERVER_NETWORK_H
#define DESKBOX_SERVER_NETWORK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "common/error.h"

enum network_mode {
	NETWORK_NONE,
	NETWORK_INTERNET,
	NETWORK_ALLOW,
};

/* Most entries an allow list may have, and most upstream DNS servers. */
#define NETWORK_MAX_ALLOW 64
#define NETWORK_MAX_DNS	  4

/* One allow entry: a name ("api.example.com"), a wildcard ("*.example.org",
 * kept as "example.org" with `wildcard`), or an IPv4 network with an
 * optional port ("203.0.113.0/24", "198.51.100.7:443"). */
struct network_rule {
	int is_name, wildcard;
	char name[254];
	uint32_t addr; /* host order, masked */
	unsigned prefix;
	uint16_t port; /* 0: every port */
};

/* A parsed "network" value.  `json` is the value exactly as given (owned),
 * NULL when the spec named none (the server's default applies). */
struct network_policy {
	enum network_mode mode;
	cJSON *json;
	size_t n_rules;
	struct network_rule *rules; /* owned */
	/* Not from JSON: set by the caller of network_attach() or
	 * network_update(): when not 0, the sandbox's TCP to ports 80 and
	 * 443 that the policy lets through is redirected to this port on its
	 * gateway (deskboxd's egress proxy, server/secrets/secrets.h). */
	uint16_t intercept_port;
	/* With intercept_port: every TCP port is redirected, not only 80 and
	 * 443 (deskboxd's --egress-proxy). */
	int intercept_all;
};

/* Validates `v` ("none", "internet" or {"allow": [...]}) into `out`; on
 * failure (ERR_INVALID naming the bad entry) nothing is left to release.
 * A NULL or JSON null `v` gives mode none with json NULL. */
int network_policy_parse(const cJSON *v, struct network_policy *out, struct err *e);
int network_policy_copy(struct network_policy *dst, const struct network_policy *src,
			struct err *e);
void network_policy_release(struct network_policy *p);

struct network_config {
	const char *state_dir;	/* pid files go to <state_dir>/network/ */
	const char *subnet;	/* IPv4 CIDR, a /30 per sandbox; NULL: 10.231.0.0/16 */
	const char *uplink;	/* the interface to NAT through; NULL: the default route's */
	const char *const *dns; /* upstream servers (IPv4), NULL-terminated; NULL or
				   empty: the nameservers of /etc/resolv.conf */
	enum network_mode default_mode; /* for specs that name none: none or internet */
	const char *dnsmasq;		/* NULL: "dnsmasq" on the PATH */
};

struct network;

/* Opens the manager and removes what a previous deskboxd left in this
 * network namespace.  The nftables table is made at the first attach. */
int network_open(struct network **out, const struct network_config *cfg, struct err *e);
/* Detaches nothing (the caller detached every sandbox); removes the table. */
void network_close(struct network *n);

/* The policy for a spec that names none (a copy the caller releases). */
int network_default_policy(const struct network *n, struct network_policy *out, struct err *e);

struct network_attachment;

/* Attaches the network namespace of `pid` with policy `p` (not none):
 * link, addresses, route, filter and resolver, and writes "nameserver
 * <gateway>" into `resolv_path` in place (the file must exist: it is
 * bind-mounted into the sandbox).  Returns without waiting for the
 * resolver: network_wait_ready() does.  The first attach checks the
 * uplink (it exists, is up, has an IPv4 address, its networks are apart
 * from the subnet: ERR_UNAVAILABLE saying which) and keeps its networks
 * out of the sandboxes' reach.  On failure nothing is left. */
int network_attach(struct network *n, pid_t pid, const struct network_policy *p,
		   const char *resolv_path, struct network_attachment **out, struct err *e);
/* Waits until the attachment's resolver answers (a DNS query sent right
 * after must not be lost).  ERR_UNAVAILABLE after timeout_ms. */
int network_wait_ready(struct network_attachment *a, int timeout_ms, struct err *e);
/* Applies policy `p` (not none) to an attached sandbox: new filter and a
 * new resolver; the link and addresses stay. */
int network_update(struct network *n, struct network_attachment *a, const struct network_policy *p,
		   struct err *e);
/* Removes everything attach made and empties resolv.conf; NULL is no-op. */
void network_detach(struct network *n, struct network_attachment *a);
/* The sandbox's address ("10.231.0.2"), valid while attached. */
const char *network_address(const struct network_attachment *a);

/* Creates `path` (0644, empty) unless it exists, so that it can be
 * bind-mounted over the sandbox's /etc/resolv.conf. */
int network_resolv_prepare(const char *path, struct err *e);

#endif
