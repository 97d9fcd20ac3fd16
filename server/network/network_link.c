/* network_link: veth pairs, addresses and routes over rtnetlink (libmnl),
 * with no ip(8) process per sandbox.
 *
 * The peer is created directly inside the sandbox's network namespace
 * (VETH_INFO_PEER with IFLA_NET_NS_FD), so it never appears on the host.
 * Its address and route are set over a netlink socket opened inside that
 * namespace: a short-lived thread enters it (setns(CLONE_NEWNET) changes
 * only the calling thread), opens the socket and leaves; a socket keeps the
 * namespace it was made in. */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"

static void nl_close(struct mnl_socket **nl)
{
	if (*nl)
		mnl_socket_close(*nl);
}
#define _cleanup_nl_ __attribute__((cleanup(nl_close)))

static struct mnl_socket *nl_open(struct err *e)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!nl) {
		err_sys(e, ERR_INTERNAL, errno, "opening a netlink socket");
		return NULL;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err_sys(e, ERR_INTERNAL, errno, "binding a netlink socket");
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

/* Sends one request with NLM_F_ACK and reads its answer. */
static int nl_talk(struct mnl_socket *nl, struct nlmsghdr *nlh, const char *what, struct err *e)
{
	static _Atomic unsigned seq_counter;
	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = (unsigned)time(NULL) + ++seq_counter;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "%s", what);
	char buf[8192];
	unsigned portid = mnl_socket_get_portid(nl);
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (n < 0)
			return err_sys(e, ERR_INTERNAL, errno, "%s", what);
		int r = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, portid, NULL, NULL);
		if (r < 0)
			return err_sys(e, ERR_INTERNAL, errno, "%s", what);
		if (r == MNL_CB_STOP)
			return 0;
	}
}

static int add_addr(struct mnl_socket *nl, unsigned ifindex, uint32_t addr, const char *what,
		    struct err *e)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = 30;
	ifa->ifa_index = ifindex;
	uint32_t be = htonl(addr);
	mnl_attr_put_u32(nlh, IFA_LOCAL, be);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, be);
	return nl_talk(nl, nlh, what, e);
}

static int add_default_route(struct mnl_socket *nl, unsigned ifindex, uint32_t gw, struct err *e)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gw));
	mnl_attr_put_u32(nlh, RTA_OIF, ifindex);
	return nl_talk(nl, nlh, "adding the sandbox's default route", e);
}

static int link_up(struct mnl_socket *nl, unsigned ifindex, struct err *e)
{
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWLINK;
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = (int)ifindex;
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
	return nl_talk(nl, nlh, "bringing a link up", e);
}

/* RTM_NEWLINK for the pair; the peer goes into the namespace `nsfd`. */
static int add_veth(struct mnl_socket *nl, const char *host, int nsfd, struct err *e)
{
	char buf[1024];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWLINK;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, host);
	struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	/* The peer's attributes follow an ifinfomsg of its own.  Neither end
	 * can be brought up in this message: the first one's open runs before
	 * it knows its peer and fails (ENOTCONN). */
	struct ifinfomsg *pifm = (struct ifinfomsg *)((char *)nlh + nlh->nlmsg_len);
	memset(pifm, 0, NLMSG_ALIGN(sizeof(*pifm)));
	pifm->ifi_family = AF_UNSPEC;
	nlh->nlmsg_len += NLMSG_ALIGN(sizeof(*pifm));
	mnl_attr_put_strz(nlh, IFLA_IFNAME, "eth0");
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)nsfd);
	mnl_attr_nest_end(nlh, peer);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	return nl_talk(nl, nlh, "creating the sandbox's veth pair", e);
}

struct in_ns {
	int nsfd, selffd;
	struct mnl_socket *nl;
	unsigned ifindex;
	struct err e;
};

static void *in_ns_main(void *arg)
{
	struct in_ns *t = arg;
	if (setns(t->nsfd, CLONE_NEWNET) < 0) {
		err_sys(&t->e, ERR_INTERNAL, errno, "entering the sandbox's network namespace");
		return NULL;
	}
	t->nl = nl_open(&t->e);
	t->ifindex = if_nametoindex("eth0");
	if (t->nl && !t->ifindex)
		err_sys(&t->e, ERR_INTERNAL, errno, "no eth0 in the sandbox");
	/* Back, though the thread ends now anyway. */
	setns(t->selffd, CLONE_NEWNET);
	return NULL;
}

/* A netlink socket inside namespace `nsfd`, and eth0's index there. */
static struct mnl_socket *nl_open_in(int nsfd, unsigned *ifindex, struct err *e)
{
	struct in_ns t = {.nsfd = nsfd, .e = ERR_INIT};
	t.selffd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (t.selffd < 0) {
		err_sys(e, ERR_INTERNAL, errno, "opening deskboxd's network namespace");
		return NULL;
	}
	pthread_t th;
	int r = pthread_create(&th, NULL, in_ns_main, &t);
	if (r != 0) {
		close(t.selffd);
		err_sys(e, ERR_INTERNAL, r, "starting a thread");
		return NULL;
	}
	pthread_join(th, NULL);
	close(t.selffd);
	if (t.e.kind != ERR_NONE) {
		if (t.nl)
			mnl_socket_close(t.nl);
		*e = t.e;
		return NULL;
	}
	*ifindex = t.ifindex;
	return t.nl;
}

int net_link_make(const char *host, pid_t pid, uint32_t gw, uint32_t addr, struct err *e)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	_cleanup_fd_ int nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", path);
	_cleanup_nl_ struct mnl_socket *nl = nl_open(e);
	if (!nl || add_veth(nl, host, nsfd, e) < 0)
		return err_code(e);
	unsigned hidx = if_nametoindex(host);
	if (!hidx)
		return err_sys(e, ERR_INTERNAL, errno, "finding '%s'", host);
	if (add_addr(nl, hidx, gw, "addressing the sandbox's gateway", e) < 0 ||
	    link_up(nl, hidx, e) < 0)
		return err_code(e);
	unsigned idx = 0;
	_cleanup_nl_ struct mnl_socket *inner = nl_open_in(nsfd, &idx, e);
	if (!inner || add_addr(inner, idx, addr, "addressing the sandbox's eth0", e) < 0 ||
	    link_up(inner, idx, e) < 0 || add_default_route(inner, idx, gw, e) < 0)
		return err_code(e);
	return 0;
}

int net_link_delete(const char *name, struct err *e)
{
	_cleanup_nl_ struct mnl_socket *nl = nl_open(e);
	if (!nl)
		return err_code(e);
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_DELLINK;
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	struct err e2 = ERR_INIT;
	if (nl_talk(nl, nlh, "deleting a link", &e2) < 0 && e2.sys_errno != ENODEV)
		return err_set(e, e2.kind, e2.sys_errno, "deleting '%s': %s", name, e2.msg);
	return 0;
}

void net_link_sweep(void)
{
	struct if_nameindex *ifs = if_nameindex();
	if (!ifs)
		return;
	for (struct if_nameindex *i = ifs; i->if_index; i++) {
		if (strncmp(i->if_name, NETWORK_LINK_PREFIX, strlen(NETWORK_LINK_PREFIX)) != 0 ||
		    strspn(i->if_name + 3, "0123456789") != strlen(i->if_name + 3))
			continue;
		net_link_delete(i->if_name, NULL);
	}
	if_freenameindex(ifs);
}

int net_link_default_uplink(char *out, size_t size, struct err *e)
{
	FILE *f = fopen("/proc/net/route", "re");
	if (!f)
		return err_sys(e, ERR_INTERNAL, errno, "reading /proc/net/route");
	char line[256], ifname[IF_NAMESIZE + 1];
	unsigned long dst, gw, flags, mask;
	int found = 0;
	while (!found && fgets(line, sizeof(line), f)) {
		int refcnt, use, metric;
		if (sscanf(line, "%16s %lx %lx %lx %d %d %d %lx", ifname, &dst, &gw, &flags,
			   &refcnt, &use, &metric, &mask) == 8 &&
		    dst == 0 && mask == 0 && (flags & 1))
			found = 1;
	}
	fclose(f);
	if (!found)
		return err_set(e, ERR_UNAVAILABLE, ENETUNREACH,
			       "no default route to take the uplink from (use --uplink)");
	snprintf(out, size, "%s", ifname);
	return 0;
}
