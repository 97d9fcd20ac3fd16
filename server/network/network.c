/* network: the manager (options, slots, start-up sweep) and one sandbox's
 * attach, update and detach. */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <nftables/libnftables.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/fs.h"
#include "common/log.h"

#define DEFAULT_SUBNET "10.231.0.0/16"

static int parse_subnet(struct network *n, const char *s, struct err *e)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%s", s);
	char *slash = strchr(buf, '/');
	struct in_addr a;
	char *end = NULL;
	long p = slash ? strtol(slash + 1, &end, 10) : -1;
	if (slash)
		*slash = '\0';
	if (!slash || *end || p < 8 || p > 29 || inet_pton(AF_INET, buf, &a) != 1)
		return err_set(e, ERR_INVALID, EINVAL,
			       "--sandbox-subnet '%s' is not an IPv4 network from /8 to /29", s);
	n->prefix = (unsigned)p;
	n->subnet = ntohl(a.s_addr) & (~0u << (32 - p));
	n->n_slots = 1u << (30 - p);
	if (n->n_slots > NETWORK_MAX_SLOTS)
		n->n_slots = NETWORK_MAX_SLOTS;
	return 0;
}

/* The nameservers of the host's /etc/resolv.conf (IPv4 ones; loopback
 * ones too: dnsmasq runs in deskboxd's namespace, where they answer). */
static void host_resolvers(struct network *n)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	if (!f)
		return;
	char line[256], addr[64];
	while (n->n_dns < NETWORK_MAX_DNS && fgets(line, sizeof(line), f)) {
		struct in_addr a;
		if (sscanf(line, "nameserver %63s", addr) == 1 && inet_pton(AF_INET, addr, &a) == 1)
			snprintf(n->dns[n->n_dns++], sizeof(n->dns[0]), "%s", addr);
	}
	fclose(f);
}

static int parse_dns(struct network *n, struct err *e)
{
	for (size_t i = 0; n->cfg.dns && n->cfg.dns[i]; i++) {
		struct in_addr a;
		if (n->n_dns >= NETWORK_MAX_DNS)
			return err_set(e, ERR_INVALID, E2BIG, "more than %d --dns-server",
				       NETWORK_MAX_DNS);
		if (inet_pton(AF_INET, n->cfg.dns[i], &a) != 1)
			return err_set(e, ERR_INVALID, EINVAL,
				       "--dns-server '%s' is not an IPv4 address", n->cfg.dns[i]);
		snprintf(n->dns[n->n_dns++], sizeof(n->dns[0]), "%s", n->cfg.dns[i]);
	}
	if (!n->n_dns)
		host_resolvers(n);
	if (!n->n_dns)
		log_msg(LOG_LEVEL_WARN, "no upstream DNS server (none in /etc/resolv.conf): "
					"sandboxes' lookups will fail; use --dns-server");
	return 0;
}

int network_open(struct network **out, const struct network_config *cfg, struct err *e)
{
	struct network *n = calloc(1, sizeof(*n));
	if (!n)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	n->cfg = *cfg;
	n->dnsmasq = cfg->dnsmasq ? cfg->dnsmasq : "dnsmasq";
	pthread_mutex_init(&n->mu, NULL);
	snprintf(n->state, sizeof(n->state), "%s/network", cfg->state_dir);
	int r = parse_subnet(n, cfg->subnet ? cfg->subnet : DEFAULT_SUBNET, e);
	r = r ?: parse_dns(n, e);
	if (r == 0 && cfg->uplink) {
		if (strlen(cfg->uplink) >= sizeof(n->uplink) || !*cfg->uplink)
			r = err_set(e, ERR_INVALID, EINVAL,
				    "--uplink '%s' is not an interface name", cfg->uplink);
		else
			snprintf(n->uplink, sizeof(n->uplink), "%s", cfg->uplink);
	}
	r = r ?: fs_mkdir_p(n->state, 0700, e);
	if (r == 0 && !(n->used = calloc(n->n_slots, 1)))
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r < 0) {
		free(n->used);
		free(n);
		return r;
	}
	/* What a deskboxd killed before it could detach left behind: its
	 * resolvers (their pid files are in this state dir) and, if the
	 * marker says it had made them, the table and the links.  Without the
	 * marker nothing of the namespace is touched, so a deskboxd that never
	 * attached a sandbox leaves alone what others made. */
	net_dns_sweep(n);
	char marker[PATH_MAX];
	snprintf(marker, sizeof(marker), "%s/" NETWORK_MARKER, n->state);
	if (access(marker, F_OK) == 0) {
		net_nft_run(
		    n, "add table inet " NETWORK_TABLE "\ndelete table inet " NETWORK_TABLE "\n",
		    NULL);
		net_link_sweep();
		unlink(marker);
	}
	*out = n;
	return 0;
}

void network_close(struct network *n)
{
	if (!n)
		return;
	if (n->table_made) {
		net_nft_run(n, "delete table inet " NETWORK_TABLE "\n", NULL);
		char marker[PATH_MAX];
		snprintf(marker, sizeof(marker), "%s/" NETWORK_MARKER, n->state);
		unlink(marker);
	}
	if (n->nft)
		nft_ctx_free(n->nft);
	pthread_mutex_destroy(&n->mu);
	free(n->used);
	free(n);
}

int network_default_policy(const struct network *n, struct network_policy *out, struct err *e)
{
	cJSON *v =
	    cJSON_CreateString(n && n->cfg.default_mode == NETWORK_INTERNET ? "internet" : "none");
	if (!v)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r = network_policy_parse(v, out, e);
	cJSON_Delete(v);
	return r;
}

static void addr_str(uint32_t a, char *out, size_t size)
{
	struct in_addr in = {.s_addr = htonl(a)};
	inet_ntop(AF_INET, &in, out, (socklen_t)size);
}

/* Writes `text` into the bind-mounted file in place (same inode). */
static int resolv_write(const char *path, const char *text, struct err *e)
{
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
	size_t len = strlen(text);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		return err_sys(e, ERR_INTERNAL, errno, "writing '%s'", path);
	return 0;
}

int network_resolv_prepare(const char *path, struct err *e)
{
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || fchmod(fd, 0644) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", path);
	return 0;
}

/* A free slot, its names and addresses; n->mu held. */
static int slot_take(struct network *n, struct network_attachment *a, struct err *e)
{
	unsigned s = 0;
	while (s < n->n_slots && n->used[s])
		s++;
	if (s == n->n_slots)
		return err_set(e, ERR_LIMIT, ENOSPC,
			       "no free address in --sandbox-subnet (%u used)", n->n_slots);
	n->used[s] = 1;
	a->slot = s;
	snprintf(a->link, sizeof(a->link), NETWORK_LINK_PREFIX "%u", s);
	a->gw_n = n->subnet + 4 * s + 1;
	a->addr_n = a->gw_n + 1;
	addr_str(a->gw_n, a->gw, sizeof(a->gw));
	addr_str(a->addr_n, a->addr, sizeof(a->addr));
	return 0;
}

/* The filter and the resolver for policy `p`; n->mu held. */
static int apply(struct network *n, struct network_attachment *a, const struct network_policy *p,
		 struct err *e)
{
	a->mode = p->mode;
	a->intercept = p->intercept_port;
	a->intercept_all = p->intercept_all;
	if (net_nft_add(n, a, p, e) < 0)
		return err_code(e);
	if (net_dns_start(n, a, p, e) < 0) {
		net_nft_remove(n, a);
		return err_code(e);
	}
	return 0;
}

int network_attach(struct network *n, pid_t pid, const struct network_policy *p,
		   const char *resolv_path, struct network_attachment **out, struct err *e)
{
	if (!n)
		return err_set(e, ERR_UNAVAILABLE, ENOTSUP, "networking is not set up in deskboxd");
	uint64_t t0 = clock_mono_ns();
	struct network_attachment *a = calloc(1, sizeof(*a));
	if (!a)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	a->dnsmasq = -1;
	snprintf(a->resolv, sizeof(a->resolv), "%s", resolv_path);
	pthread_mutex_lock(&n->mu);
	int r = 0;
	if (!n->uplink[0])
		r = net_link_default_uplink(n->uplink, sizeof(n->uplink), e);
	r = r ?: net_nft_table(n, e);
	r = r ?: slot_take(n, a, e);
	if (r < 0) {
		pthread_mutex_unlock(&n->mu);
		free(a);
		return err_wrap(e, "attaching the network");
	}
	pthread_mutex_unlock(&n->mu);
	/* The link outside the lock: it is the sandbox's own. */
	r = net_link_make(a->link, pid, a->gw_n, a->addr_n, e);
	char text[64];
	snprintf(text, sizeof(text), "nameserver %s\n", a->gw);
	r = r ?: resolv_write(a->resolv, text, e);
	pthread_mutex_lock(&n->mu);
	r = r ?: apply(n, a, p, e);
	if (r < 0) {
		net_link_delete(a->link, NULL);
		n->used[a->slot] = 0;
		pthread_mutex_unlock(&n->mu);
		resolv_write(a->resolv, "", NULL);
		free(a);
		return err_wrap(e, "attaching the network");
	}
	pthread_mutex_unlock(&n->mu);
	metrics_observe("deskbox_network_attach_seconds", "", (double)(clock_mono_ns() - t0) / 1e9);
	*out = a;
	return 0;
}

int network_wait_ready(struct network_attachment *a, int timeout_ms, struct err *e)
{
	uint64_t t0 = clock_mono_ns();
	int r = net_dns_probe(a, timeout_ms, e);
	metrics_observe("deskbox_network_ready_wait_seconds", "",
			(double)(clock_mono_ns() - t0) / 1e9);
	return r;
}

int network_update(struct network *n, struct network_attachment *a, const struct network_policy *p,
		   struct err *e)
{
	net_dns_stop(n, a);
	pthread_mutex_lock(&n->mu);
	net_nft_remove(n, a);
	int r = apply(n, a, p, e);
	pthread_mutex_unlock(&n->mu);
	return r < 0 ? err_wrap(e, "changing the network") : 0;
}

void network_detach(struct network *n, struct network_attachment *a)
{
	if (!a)
		return;
	net_dns_stop(n, a);
	struct err e = ERR_INIT;
	if (net_link_delete(a->link, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "%s", e.msg);
	resolv_write(a->resolv, "", NULL);
	pthread_mutex_lock(&n->mu);
	net_nft_remove(n, a);
	n->used[a->slot] = 0;
	pthread_mutex_unlock(&n->mu);
	free(a);
}

const char *network_address(const struct network_attachment *a)
{
	return a->addr;
}
