/* network_uplink: what the uplink must be for the sandboxes' traffic to
 * leave by it, checked when the table is made (the first attach after
 * deskboxd starts), so that a wrong --uplink is one clear error instead of
 * every connection timing out.
 *
 * The uplink must exist in deskboxd's network namespace, be up and hold an
 * IPv4 address (masquerade rewrites the source to it); the sandbox subnet
 * must not overlap the networks on it (their replies would be routed to the
 * uplink, or the uplink's neighbours to a sandbox).  Nothing is assumed of
 * the uplink's own subnet: a /30 whose gateway is the only neighbour works
 * like a /24 on a LAN.  Its networks (the host's neighbours, the gateway
 * among them) are what sandboxes may not reach unless an allow entry names
 * them, as for private ranges: for a host on a public subnet they are what
 * private4 is for a host behind NAT. */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"

static int overlaps(uint32_t a, unsigned pa, uint32_t b, unsigned pb)
{
	unsigned p = pa < pb ? pa : pb;
	uint32_t mask = p ? ~0u << (32 - p) : 0;
	return (a & mask) == (b & mask);
}

static void addr_str(uint32_t a, char *out, size_t size)
{
	struct in_addr in = {.s_addr = htonl(a)};
	inet_ntop(AF_INET, &in, out, (socklen_t)size);
}

/* Adds network a/p to n->up_nets unless it is there. */
static void add_net(struct network *n, uint32_t a, unsigned p)
{
	for (size_t i = 0; i < n->n_up_nets; i++)
		if (n->up_nets[i].addr == a && n->up_nets[i].prefix == p)
			return;
	if (n->n_up_nets < NETWORK_MAX_UPLINK_NETS)
		n->up_nets[n->n_up_nets++] = (struct network_rule){.addr = a, .prefix = p};
}

/* The uplink's flags and IPv4 networks; *found = 0 without the interface. */
static int read_uplink(struct network *n, int *found, unsigned *flags, struct err *e)
{
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "listing the interfaces");
	*found = 0;
	*flags = 0;
	n->n_up_nets = 0;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_name || strcmp(i->ifa_name, n->uplink) != 0)
			continue;
		*found = 1;
		*flags |= i->ifa_flags;
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask)
			continue;
		uint32_t a = ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
		uint32_t m = ntohl(((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr);
		unsigned p = (unsigned)__builtin_popcount(m);
		add_net(n, a & m, p);
	}
	freeifaddrs(ifs);
	return 0;
}

/* Whether the host's route to `dns` leaves by the uplink: the source
 * address a connected UDP socket gets is one of the uplink's. */
static int routed_by_uplink(const struct network *n, const char *dns)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
	if (inet_pton(AF_INET, dns, &sa.sin_addr) != 1)
		return 1;
	_cleanup_fd_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in me;
	socklen_t len = sizeof(me);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&me, &len) < 0)
		return 0;
	uint32_t src = ntohl(me.sin_addr.s_addr);
	for (size_t i = 0; i < n->n_up_nets; i++)
		if (overlaps(src, 32, n->up_nets[i].addr, n->up_nets[i].prefix))
			return 1;
	return 0;
}

int net_uplink_check(struct network *n, struct err *e)
{
	int found = 0;
	unsigned flags = 0;
	if (read_uplink(n, &found, &flags, e) < 0)
		return err_code(e);
	if (!found)
		return err_set(e, ERR_UNAVAILABLE, ENODEV,
			       "uplink '%s': no such interface in deskboxd's network namespace "
			       "(--uplink names the interface the sandboxes' traffic leaves by)",
			       n->uplink);
	if (!(flags & IFF_UP))
		return err_set(e, ERR_UNAVAILABLE, ENETDOWN, "uplink '%s' is down", n->uplink);
	if (!n->n_up_nets)
		return err_set(e, ERR_UNAVAILABLE, EADDRNOTAVAIL,
			       "uplink '%s' has no IPv4 address: the sandboxes' traffic is "
			       "masqueraded to one",
			       n->uplink);
	for (size_t i = 0; i < n->n_up_nets; i++) {
		if (!overlaps(n->subnet, n->prefix, n->up_nets[i].addr, n->up_nets[i].prefix))
			continue;
		char sub[16], net[16];
		addr_str(n->subnet, sub, sizeof(sub));
		addr_str(n->up_nets[i].addr, net, sizeof(net));
		return err_set(e, ERR_UNAVAILABLE, EADDRINUSE,
			       "the sandbox subnet %s/%u overlaps uplink '%s''s network %s/%u: "
			       "choose a --sandbox-subnet apart from it",
			       sub, n->prefix, n->uplink, net, n->up_nets[i].prefix);
	}
	/* Not an error: the resolvers run on the host and follow its routes,
	 * but a host whose way out is elsewhere drops the sandboxes' own
	 * traffic (it leaves by the uplink only). */
	for (size_t i = 0; i < n->n_dns; i++)
		if (!routed_by_uplink(n, n->dns[i]))
			log_msg(LOG_LEVEL_WARN,
				"the route to DNS server %s does not leave by uplink '%s': if the "
				"way out is another interface, name it with --uplink",
				n->dns[i], n->uplink);
	return 0;
}
