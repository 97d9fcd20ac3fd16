/* runtime_vm_net: a VM's network namespace (docs/isolation.md, "Network").
 *
 * Every VM gets a network namespace of its own, as a container does, so
 * that the network layer (server/network/) attaches it exactly as it
 * attaches a container: its veth's peer becomes `eth0` of this namespace,
 * with the sandbox's address, a default route to the gateway, the
 * host-side filter keyed by the host end and the per-sandbox resolver.
 *
 * In the namespace, besides lo: a tap `vm0` addressed VM_NET_HOST/30,
 * whose queue QEMU's virtio-net reads and writes through the fd deskboxd
 * opens here and passes (QEMU never opens /dev/net/tun: making a tap
 * needs CAP_NET_ADMIN over this namespace, which it does not have in the
 * sandbox's user namespace).  The guest is VM_NET_GUEST/30 with its
 * default route to VM_NET_HOST; the namespace forwards its packets and
 * masquerades them behind eth0's address, so that what leaves the
 * namespace is what a container's eth0 sends, and the host's filter,
 * allow lists, NAT and resolver apply to it unchanged.  Without an eth0
 * (mode "none") the namespace has no route: the guest's packets are
 * answered "network unreachable".  The port proxy connects from this
 * namespace to VM_NET_GUEST.  The namespace and the tap live as long as
 * QEMU: it is their last holder.
 *
 * The namespace is made by a short-lived thread (unshare(CLONE_NEWNET)
 * changes only the calling thread), which does the set-up there and ends;
 * the sockets it made (the nftables context's too) keep that namespace. */
#include "runtime.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "internal.h"

/* Link-local: never a destination a policy lets through (docs/network.md),
 * so the guest's own link shadows nothing it could be allowed to reach. */
#define VM_NET_MASK "255.255.255.252"

static const char masquerade[] =
    "add table ip deskbox_vm\n"
    "add chain ip deskbox_vm post { type nat hook postrouting priority srcnat; }\n"
    "add rule ip deskbox_vm post oifname \"eth0\" masquerade\n";

static int if_flags_up(int sock, const char *name, struct err *e)
{
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "VM network: reading '%s'", name);
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(sock, SIOCSIFFLAGS, &ifr) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "VM network: bringing '%s' up", name);
	return 0;
}

static int if_set_addr(int sock, const char *name, const char *addr, const char *mask,
		       struct err *e)
{
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, addr, &sin->sin_addr);
	if (ioctl(sock, SIOCSIFADDR, &ifr) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "VM network: addressing '%s'", name);
	inet_pton(AF_INET, mask, &sin->sin_addr);
	if (ioctl(sock, SIOCSIFNETMASK, &ifr) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "VM network: the netmask of '%s'", name);
	return 0;
}

/* The tap, with a virtio-net header (QEMU's offloads), no packet info. */
static int tap_open(int *out, struct err *e)
{
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, ERR_UNAVAILABLE, errno, "VM network: opening /dev/net/tun");
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", RUNTIME_VM_TAP);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int r = err_sys(e, ERR_UNAVAILABLE, errno, "VM network: making the tap");
		close(fd);
		return r;
	}
	*out = fd;
	return 0;
}

/* Forwarding and the masquerade, in the calling thread's namespace. */
static int route_out(struct err *e)
{
	_cleanup_fd_ int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1\n", 2) != 2)
		return err_sys(e, ERR_INTERNAL, errno, "VM network: enabling forwarding");
	struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!nft)
		return err_set(e, ERR_UNAVAILABLE, ENOMEM, "VM network: no nftables context");
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	int r = 0;
	if (nft_run_cmd_from_buffer(nft, masquerade) != 0) {
		char first[300];
		snprintf(first, sizeof(first), "%s", nft_ctx_get_error_buffer(nft) ?: "");
		first[strcspn(first, "\n")] = '\0';
		r = err_set(e, ERR_INTERNAL, EIO, "VM network: nftables: %s", first);
	}
	nft_ctx_free(nft);
	return r;
}

struct vm_net_job {
	int self, nsfd, tapfd;
	struct err e;
};

static void *vm_net_main(void *arg)
{
	struct vm_net_job *j = arg;
	if (unshare(CLONE_NEWNET) < 0) {
		err_sys(&j->e, ERR_UNAVAILABLE, errno, "VM network: a network namespace");
		return NULL;
	}
	j->nsfd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (j->nsfd < 0 || sock < 0)
		err_sys(&j->e, ERR_INTERNAL, errno, "VM network: its namespace");
	else if (if_flags_up(sock, "lo", &j->e) == 0 && tap_open(&j->tapfd, &j->e) == 0 &&
		 if_set_addr(sock, RUNTIME_VM_TAP, RUNTIME_VM_NET_HOST, VM_NET_MASK, &j->e) == 0 &&
		 if_flags_up(sock, RUNTIME_VM_TAP, &j->e) == 0)
		route_out(&j->e);
	if (sock >= 0)
		close(sock);
	if (setns(j->self, CLONE_NEWNET) < 0) {
		/* The thread ends now, but nothing of it may run on there. */
		log_msg(LOG_LEVEL_ERROR,
			"runtime: cannot return to deskboxd's network namespace: %s",
			strerror(errno));
		abort();
	}
	return NULL;
}

int runtime_vm_net_make(int *nsfd, int *tapfd, struct err *e)
{
	struct vm_net_job j = {.nsfd = -1, .tapfd = -1, .e = ERR_INIT};
	j.self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (j.self < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening deskboxd's network namespace");
	pthread_t th;
	int r = pthread_create(&th, NULL, vm_net_main, &j);
	if (r != 0) {
		close(j.self);
		return err_sys(e, ERR_INTERNAL, r, "starting a thread");
	}
	pthread_join(th, NULL);
	close(j.self);
	if (j.e.kind != ERR_NONE) {
		if (j.nsfd >= 0)
			close(j.nsfd);
		if (j.tapfd >= 0)
			close(j.tapfd);
		*e = j.e;
		return err_code(e);
	}
	*nsfd = j.nsfd;
	*tapfd = j.tapfd;
	return 0;
}

/* The guest reads its resolver from the run share's resolv.conf (its init
 * bind-mounts it on /etc/resolv.conf): the sandbox's own file bound there,
 * so that the network layer's in-place rewrites are what the guest reads
 * next (the share is uncached). */
int runtime_vm_net_resolv(const char *guest, const char *resolv, struct err *e)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/resolv.conf", guest);
	umount2(p, MNT_DETACH);
	_cleanup_fd_ int fd = open(p, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || mount(resolv, p, NULL, MS_BIND, NULL) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "VM: binding '%s' on '%s'", resolv, p);
	return 0;
}

void runtime_vm_net_unresolv(const char *run)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/guest/resolv.conf", run);
	umount2(p, MNT_DETACH);
	unlink(p);
}
