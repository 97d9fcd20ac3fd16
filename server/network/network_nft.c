/* network_nft: the nftables side, through libnftables in process (a
 * netlink transaction per call, no nft process per sandbox).
 *
 * One `table inet deskbox`, made at the first attach:
 *   input   from dbx*: `iifname vmap @in_map` → sb<slot>_in, which accepts
 *           DNS (udp/tcp 53) to that sandbox's own gateway only; the rest
 *           from dbx* (the host's addresses, the API port, other
 *           sandboxes' gateways) is dropped.
 *   forward from dbx*: IPv6 dropped, anything not leaving by the uplink
 *           dropped, @blocked4 (the sandbox subnet, 169.254/16, 127/8, 0/8,
 *           224/3) dropped, then `iifname vmap @fwd_map` → sb<slot>_out
 *           (its policy), and whatever is left dropped.  Into dbx*: only
 *           established/related.
 *   postrouting: the subnet is masqueraded on the uplink.
 * Per sandbox, sb<slot>_out first drops a source address that is not its
 * own.  internet: @private4 and @uplink4 (the uplink's own networks, its
 * gateway and neighbours: network_uplink.c) dropped, the rest accepted.
 * allow: its networks (@sb<slot>_net, private ones too: they are named),
 * its address.port pairs (@sb<slot>_port), then @private4 and @uplink4
 * dropped, then the addresses its resolver returned for allowed names
 * (@sb<slot>_dns, filled by dnsmasq's --nftset), the rest dropped.  The
 * private drop before the DNS set means an allowed name that resolves to
 * 10.x or 169.254.169.254 still reaches nothing. */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"

static const char private4[] = "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, "
			       "198.18.0.0/15, 192.0.0.0/24";

int net_nft_run(struct network *n, const char *cmds, struct err *e)
{
	if (!n->nft) {
		n->nft = nft_ctx_new(NFT_CTX_DEFAULT);
		if (!n->nft)
			return err_set(e, ERR_UNAVAILABLE, ENOMEM, "no nftables context");
		nft_ctx_buffer_output(n->nft);
		nft_ctx_buffer_error(n->nft);
	}
	if (nft_run_cmd_from_buffer(n->nft, cmds) != 0) {
		const char *msg = nft_ctx_get_error_buffer(n->nft);
		char first[300];
		snprintf(first, sizeof(first), "%s", msg ? msg : "");
		first[strcspn(first, "\n")] = '\0';
		return err_set(e, ERR_INTERNAL, EIO, "nftables: %s", first[0] ? first : "failed");
	}
	return 0;
}

static void addr_str(uint32_t a, char *out, size_t size)
{
	struct in_addr in = {.s_addr = htonl(a)};
	inet_ntop(AF_INET, &in, out, (socklen_t)size);
}

/* Forwarding in deskboxd's network namespace: the sandboxes' traffic is
 * routed through it (docs/network.md says the host must allow it). */
static int enable_forwarding(struct err *e)
{
	_cleanup_fd_ int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1\n", 2) != 2)
		return err_sys(e, ERR_UNAVAILABLE, errno, "enabling net.ipv4.ip_forward");
	return 0;
}

/* The hooks of the redirect to the egress proxy (network.h:
 * intercept_port): a sandbox's policy first (pre_map), then the redirect
 * (dnat_map), for its TCP to ports 80 and 443. */
static const char egress_hooks[] =
    "add map inet " NETWORK_TABLE " pre_map { type ifname : verdict; }\n"
    "add map inet " NETWORK_TABLE " dnat_map { type ifname : verdict; }\n"
    "add chain inet " NETWORK_TABLE
    " egress_pre { type filter hook prerouting priority -150; policy accept; }\n"
    "add rule inet " NETWORK_TABLE
    " egress_pre meta l4proto tcp th dport { 80, 443 } iifname vmap @pre_map\n"
    "add chain inet " NETWORK_TABLE
    " egress_nat { type nat hook prerouting priority -100; policy accept; }\n"
    "add rule inet " NETWORK_TABLE
    " egress_nat meta l4proto tcp th dport { 80, 443 } iifname vmap @dnat_map\n"
    /* Every TCP port, for --egress-proxy. */
    "add map inet " NETWORK_TABLE " pre_all_map { type ifname : verdict; }\n"
    "add map inet " NETWORK_TABLE " dnat_all_map { type ifname : verdict; }\n"
    "add rule inet " NETWORK_TABLE " egress_pre meta l4proto tcp iifname vmap @pre_all_map\n"
    "add rule inet " NETWORK_TABLE " egress_nat meta l4proto tcp iifname vmap @dnat_all_map\n";

/* The uplink's networks as set elements, "a/p, b/q". */
static void uplink_elements(const struct network *n, char *out, size_t size)
{
	size_t k = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n->n_up_nets && k < size; i++) {
		char a[16];
		addr_str(n->up_nets[i].addr, a, sizeof(a));
		k += (size_t)snprintf(out + k, size - k, "%s%s/%u", i ? ", " : "", a,
				      n->up_nets[i].prefix);
	}
}

int net_nft_table(struct network *n, struct err *e)
{
	if (n->table_made)
		return 0;
	if (net_uplink_check(n, e) < 0)
		return err_code(e);
	char subnet[32], uplink4[NETWORK_MAX_UPLINK_NETS * 20];
	addr_str(n->subnet, subnet, sizeof(subnet));
	uplink_elements(n, uplink4, sizeof(uplink4));
	_cleanup_free_ char *cmds = NULL;
	const char *up = n->uplink;
	if (asprintf(&cmds,
		     "add table inet " NETWORK_TABLE "\n"
		     "delete table inet " NETWORK_TABLE "\n"
		     "table inet " NETWORK_TABLE " {\n"
		     " set blocked4 { type ipv4_addr; flags interval; elements = { %s/%u, "
		     "169.254.0.0/16, 127.0.0.0/8, 0.0.0.0/8, 224.0.0.0/3 } }\n"
		     " set private4 { type ipv4_addr; flags interval; elements = { %s } }\n"
		     " set uplink4 { type ipv4_addr; flags interval; auto-merge; elements = { %s } "
		     "}\n"
		     " map in_map { type ifname : verdict; }\n"
		     " map fwd_map { type ifname : verdict; }\n"
		     " chain input { type filter hook input priority -10; policy accept;\n"
		     "  iifname vmap @in_map\n"
		     "  iifname \"dbx*\" drop\n"
		     " }\n"
		     " chain forward { type filter hook forward priority -10; policy accept;\n"
		     "  iifname \"dbx*\" meta nfproto ipv6 drop\n"
		     "  iifname \"dbx*\" oifname != \"%s\" drop\n"
		     "  iifname \"dbx*\" ip daddr @blocked4 drop\n"
		     "  iifname vmap @fwd_map\n"
		     "  iifname \"dbx*\" drop\n"
		     "  oifname \"dbx*\" ct state established,related accept\n"
		     "  oifname \"dbx*\" drop\n"
		     " }\n"
		     " chain postrouting { type nat hook postrouting priority 100; policy accept;\n"
		     "  oifname \"%s\" ip saddr %s/%u masquerade\n"
		     " }\n"
		     "}\n",
		     subnet, n->prefix, private4, uplink4, up, up, subnet, n->prefix) < 0)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	char marker[PATH_MAX];
	snprintf(marker, sizeof(marker), "%s/" NETWORK_MARKER, n->state);
	if (fs_write_atomic(marker, "", 0, 0600, e) < 0 || enable_forwarding(e) < 0 ||
	    net_nft_run(n, cmds, e) < 0 || net_nft_run(n, egress_hooks, e) < 0)
		return err_wrap(e, "making the nftables table");
	n->table_made = 1;
	return 0;
}

/* The sandbox's sets and the rules of its sb<slot>_out chain. */
static void write_policy(FILE *f, const struct network_attachment *a,
			 const struct network_policy *p)
{
	const char *t = "inet " NETWORK_TABLE;
	unsigned s = a->slot;
	fprintf(f, "add chain %s sb%u_out\n", t, s);
	fprintf(f, "add rule %s sb%u_out ip saddr != %s drop\n", t, s, a->addr);
	if (p->mode == NETWORK_INTERNET) {
		fprintf(f, "add rule %s sb%u_out ip daddr @private4 drop\n", t, s);
		fprintf(f, "add rule %s sb%u_out ip daddr @uplink4 drop\n", t, s);
		fprintf(f, "add rule %s sb%u_out accept\n", t, s);
		return;
	}
	fprintf(f, "add set %s sb%u_net { type ipv4_addr; flags interval; }\n", t, s);
	fprintf(f, "add set %s sb%u_port { type ipv4_addr . inet_service; flags interval; }\n", t,
		s);
	fprintf(f, "add set %s sb%u_dns { type ipv4_addr; }\n", t, s);
	size_t nets = 0, ports = 0;
	for (size_t i = 0; i < p->n_rules; i++) {
		nets += !p->rules[i].is_name && !p->rules[i].port;
		ports += !p->rules[i].is_name && p->rules[i].port;
	}
	for (int with_port = 0; with_port < 2; with_port++) {
		if (!(with_port ? ports : nets))
			continue;
		fprintf(f, "add element %s sb%u_%s { ", t, s, with_port ? "port" : "net");
		int any = 0;
		for (size_t i = 0; i < p->n_rules; i++) {
			const struct network_rule *r = &p->rules[i];
			if (r->is_name || (r->port != 0) != with_port)
				continue;
			char addr[16];
			addr_str(r->addr, addr, sizeof(addr));
			fprintf(f, "%s%s/%u", any ? ", " : "", addr, r->prefix);
			if (with_port)
				fprintf(f, " . %u", r->port);
			any = 1;
		}
		fprintf(f, " }\n");
	}
	fprintf(f, "add rule %s sb%u_out ip daddr @sb%u_net accept\n", t, s, s);
	fprintf(f,
		"add rule %s sb%u_out meta l4proto { tcp, udp } ip daddr . th dport @sb%u_port "
		"accept\n",
		t, s, s);
	fprintf(f, "add rule %s sb%u_out ip daddr @private4 drop\n", t, s);
	fprintf(f, "add rule %s sb%u_out ip daddr @uplink4 drop\n", t, s);
	fprintf(f, "add rule %s sb%u_out ip daddr @sb%u_dns accept\n", t, s, s);
	fprintf(f, "add rule %s sb%u_out drop\n", t, s);
}

/* The redirect of the sandbox's TCP 80 and 443 to the egress proxy on
 * its gateway: what the policy lets through (the checks of the forward
 * chain, then sb<slot>_out) is redirected; the proxy's port on the
 * gateway is open to redirected connections only (ct status dnat), so
 * that the proxy never dials itself. */
static void write_intercept(FILE *f, const struct network_attachment *a)
{
	const char *t = "inet " NETWORK_TABLE;
	unsigned s = a->slot;
	fprintf(f, "add chain %s sb%u_pre\n", t, s);
	fprintf(f, "add rule %s sb%u_pre ip daddr @blocked4 drop\n", t, s);
	fprintf(f, "add rule %s sb%u_pre jump sb%u_out\n", t, s, s);
	fprintf(f, "add chain %s sb%u_dnat\n", t, s);
	fprintf(f, "add rule %s sb%u_dnat meta l4proto tcp dnat ip to %s:%u\n", t, s, a->gw,
		a->intercept);
	fprintf(
	    f,
	    "insert rule %s sb%u_in ip saddr %s ip daddr %s tcp dport %u ct status dnat accept\n",
	    t, s, a->addr, a->gw, a->intercept);
	const char *all = a->intercept_all ? "_all" : "";
	fprintf(f, "add element %s pre%s_map { \"%s\" : jump sb%u_pre }\n", t, all, a->link, s);
	fprintf(f, "add element %s dnat%s_map { \"%s\" : jump sb%u_dnat }\n", t, all, a->link, s);
}

int net_nft_add(struct network *n, const struct network_attachment *a,
		const struct network_policy *p, struct err *e)
{
	_cleanup_free_ char *cmds = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&cmds, &len);
	if (!f)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	const char *t = "inet " NETWORK_TABLE;
	unsigned s = a->slot;
	fprintf(f, "add chain %s sb%u_in\n", t, s);
	fprintf(f,
		"add rule %s sb%u_in ip saddr %s ip daddr %s meta l4proto { tcp, udp } th dport 53 "
		"accept\n",
		t, s, a->addr, a->gw);
	fprintf(f, "add rule %s sb%u_in drop\n", t, s);
	write_policy(f, a, p);
	if (a->intercept)
		write_intercept(f, a);
	fprintf(f, "add element %s in_map { \"%s\" : jump sb%u_in }\n", t, a->link, s);
	fprintf(f, "add element %s fwd_map { \"%s\" : jump sb%u_out }\n", t, a->link, s);
	if (fclose(f) != 0 || !cmds)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (net_nft_run(n, cmds, e) < 0)
		return err_wrap(e, "adding the sandbox's filter");
	return 0;
}

void net_nft_remove(struct network *n, const struct network_attachment *a)
{
	char cmds[1024];
	const char *t = "inet " NETWORK_TABLE;
	unsigned s = a->slot;
	/* Map elements first: the chains are unreferenced in the same
	 * transaction, then the chains, then the sets their rules used. */
	int len = 0;
	const char *all = a->intercept_all ? "_all" : "";
	if (a->intercept)
		len = snprintf(cmds, sizeof(cmds),
			       "delete element %s pre%s_map { \"%s\" }\n"
			       "delete element %s dnat%s_map { \"%s\" }\n"
			       "delete chain %s sb%u_pre\ndelete chain %s sb%u_dnat\n",
			       t, all, a->link, t, all, a->link, t, s, t, s);
	len += snprintf(cmds + len, sizeof(cmds) - (size_t)len,
			"delete element %s in_map { \"%s\" }\n"
			"delete element %s fwd_map { \"%s\" }\n"
			"delete chain %s sb%u_in\ndelete chain %s sb%u_out\n",
			t, a->link, t, a->link, t, s, t, s);
	if (a->mode == NETWORK_ALLOW)
		snprintf(
		    cmds + len, sizeof(cmds) - (size_t)len,
		    "delete set %s sb%u_net\ndelete set %s sb%u_port\ndelete set %s sb%u_dns\n", t,
		    s, t, s, t, s);
	if (net_nft_run(n, cmds, NULL) == 0)
		return;
	/* Something is missing (an attach that failed half way): each part
	 * on its own, so that what is there still goes. */
	static const char *const chains[] = {"pre", "dnat"};
	for (size_t i = 0; a->intercept && i < 2; i++) {
		snprintf(cmds, sizeof(cmds), "delete element %s %s%s_map { \"%s\" }\n", t,
			 chains[i], all, a->link);
		net_nft_run(n, cmds, NULL);
		snprintf(cmds, sizeof(cmds), "delete chain %s sb%u_%s\n", t, s, chains[i]);
		net_nft_run(n, cmds, NULL);
	}
	snprintf(cmds, sizeof(cmds), "delete element %s in_map { \"%s\" }\n", t, a->link);
	net_nft_run(n, cmds, NULL);
	snprintf(cmds, sizeof(cmds), "delete element %s fwd_map { \"%s\" }\n", t, a->link);
	net_nft_run(n, cmds, NULL);
	static const char *const objs[] = {"chain", "chain", "set", "set", "set"};
	static const char *const suffix[] = {"in", "out", "net", "port", "dns"};
	for (size_t i = 0; i < 5; i++) {
		snprintf(cmds, sizeof(cmds), "delete %s %s sb%u_%s\n", objs[i], t, s, suffix[i]);
		net_nft_run(n, cmds, NULL);
	}
}
