/* runtime_netns: connections made from inside a container's network
 * namespace.
 *
 * A socket belongs to the network namespace its creator was in when it
 * called socket(), for its whole life.  So the calling thread switches to
 * the container's namespace (setns() on a network namespace is per thread
 * and allowed in a threaded process), creates the socket and switches
 * back before doing anything else; the connect then reaches the
 * container's own 127.0.0.1 without the container ever getting a route to
 * the host.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime.h"
#include "internal.h"
#include "common/cleanup.h"
#include "common/log.h"

/* A TCP socket in the network namespace of `pid`. */
static int socket_in(pid_t pid, int *out, struct err *e)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	_cleanup_fd_ int target = open(path, O_RDONLY | O_CLOEXEC);
	if (target < 0)
		return err_sys(e, ERR_NOT_RUNNING, errno, "opening the sandbox's network namespace");
	_cleanup_fd_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening this thread's network namespace");
	if (setns(target, CLONE_NEWNET) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "entering the sandbox's network namespace");
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int saved = errno;
	if (setns(self, CLONE_NEWNET) < 0) {
		/* This thread would go on serving requests from inside a
		 * sandbox: nothing may continue. */
		log_msg(LOG_LEVEL_ERROR, "runtime: cannot return to deskboxd's network namespace: %s",
			strerror(errno));
		abort();
	}
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, saved, "creating a socket in the sandbox");
	*out = fd;
	return 0;
}

int runtime_connect_inside(pid_t pid, uint16_t port, int timeout_ms, int *out, struct err *e)
{
	return runtime_connect_inside_to(pid, INADDR_LOOPBACK, port, timeout_ms, out, e);
}

int runtime_connect_inside_to(pid_t pid, uint32_t addr, uint16_t port, int timeout_ms, int *out,
			      struct err *e)
{
	if (pid <= 0)
		return err_set(e, ERR_NOT_RUNNING, 0, "the sandbox is not running");
	_cleanup_fd_ int fd = -1;
	int r = socket_in(pid, &fd, e);
	if (r < 0)
		return r;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	sa.sin_addr.s_addr = htonl(addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno != EINPROGRESS)
			return err_sys(e, ERR_BAD_GATEWAY, errno,
				       "nothing answers on port %u in the sandbox", port);
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int n;
		do
			n = poll(&p, 1, timeout_ms);
		while (n < 0 && errno == EINTR);
		if (n == 0)
			return err_set(e, ERR_BAD_GATEWAY, ETIMEDOUT,
				       "port %u in the sandbox did not accept within %d ms", port,
				       timeout_ms);
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
		if (n < 0 || soerr)
			return err_sys(e, ERR_BAD_GATEWAY, n < 0 ? errno : soerr,
				       "nothing answers on port %u in the sandbox", port);
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "making the sandbox connection blocking");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*out = fd;
	fd = -1;
	return 0;
}
