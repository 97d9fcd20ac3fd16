/* The fast exec path: deskbox-init's exec agent (desktop-image/exec_agent.h
 * has the protocol).  deskboxd connects to the agent's socket through the
 * sandbox's run dir, hands over the program and its stdio fds, learns the
 * child's host pid from SCM_CREDENTIALS (the kernel's word, not the
 * sandbox's), moves it into the run's cgroup and only then lets it exec.
 * The connection then says when the program ended, with its wait status. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"

/* In the request's length word: a terminal (EXEC_AGENT_PTY of
 * desktop-image/exec_agent.h, the other side of this protocol). */
#define EXEC_AGENT_PTY 0x80000000u
/* And: the program runs as the container's root (EXEC_AGENT_ROOT). */
#define EXEC_AGENT_ROOT 0x40000000u
/* How long the agent's child may take to say who it is. */
#define HELLO_TIMEOUT_MS 10000

static int connect_agent(struct process_table *t)
{
	char run[PATH_MAX];
	pthread_mutex_lock(&t->mu);
	snprintf(run, sizeof(run), "%s", t->run);
	pthread_mutex_unlock(&t->mu);
	_cleanup_fd_ int dfd = open(run, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	/* SECURITY: the sandbox owns this directory: with a user namespace
	 * its root (the init and the desktop, 0700, the user cannot enter
	 * it), without one its user.  Either is inside the sandbox and could
	 * put a symlink there, which connect() would follow to any socket of
	 * the host.  So the socket is opened without following links,
	 * checked, and connected to through its fd (which also keeps the path
	 * short: sun_path holds 108 bytes). */
	_cleanup_fd_ int sfd = openat(dfd, "exec.sock", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (sfd < 0)
		return -errno;
	if (fstat(sfd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return -ENOTSOCK;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", sfd);
	_cleanup_fd_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	return TAKE_FD(fd);
}

/* The request body: argc, envc, cwd, argv, env (see exec_agent.h). */
static char *build_request(const struct process_opts *o, uint32_t *len)
{
	uint32_t argc = 0, envc = 0;
	const char *cwd = o->cwd ? o->cwd : "/workspace";
	size_t total = 8 + strlen(cwd) + 1;
	for (; o->argv[argc]; argc++)
		total += strlen(o->argv[argc]) + 1;
	for (; o->env && o->env[envc]; envc++)
		total += strlen(o->env[envc]) + 1;
	if (total > UINT32_MAX)
		return NULL;
	char *buf = malloc(total);
	if (!buf)
		return NULL;
	memcpy(buf, &argc, 4);
	memcpy(buf + 4, &envc, 4);
	char *p = buf + 8;
	p = stpcpy(p, cwd) + 1;
	for (uint32_t i = 0; i < argc; i++)
		p = stpcpy(p, o->argv[i]) + 1;
	for (uint32_t i = 0; i < envc; i++)
		p = stpcpy(p, o->env[i]) + 1;
	*len = (uint32_t)total;
	return buf;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* 1 when host process `pid` is in the sandbox's cgroup (the socket is the
 * sandbox's to replace: whoever answers must at least be inside it). */
static int in_sandbox(pid_t pid, const char *cid)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	_cleanup_file_ FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char want[128];
	snprintf(want, sizeof(want), "/deskbox/%s", cid);
	size_t wl = strlen(want);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, want);
		if (p && (p[wl] == '\n' || p[wl] == '/' || p[wl] == '\0'))
			return 1;
	}
	return 0;
}

/* The child's hello: its pid with SCM_CREDENTIALS and, for a terminal, the
 * master fd (SCM_RIGHTS; *master stays -1 without one).  Any other fd sent
 * along is closed. */
static int recv_hello(int conn, int32_t *nspid, struct ucred *uc, int *master)
{
	struct pollfd p = {conn, POLLIN, 0};
	int pr;
	while ((pr = poll(&p, 1, HELLO_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	union {
		char buf[CMSG_SPACE(sizeof(*uc)) + CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} cc;
	memset(&cc, 0, sizeof(cc));
	struct iovec iov = {nspid, sizeof(*nspid)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cc.buf, .msg_controllen = sizeof(cc)};
	ssize_t n = pr > 0 ? recvmsg(conn, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) : -1;
	int have_creds = 0;
	for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(*uc))) {
			memcpy(uc, CMSG_DATA(c), sizeof(*uc));
			have_creds = 1;
		} else if (c->cmsg_type == SCM_RIGHTS) {
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (*master < 0 && i == 0)
					*master = fd;
				else
					close(fd);
			}
		}
	}
	return n == sizeof(*nspid) && have_creds ? 0 : -1;
}

/* SECURITY: the fd came from inside the sandbox: it must be a terminal's
 * master (TIOCGPTN answers only on one), else it is refused; then it gets
 * its window size and is made non-blocking. */
static int pty_setup(int master, const struct process_opts *o)
{
	struct stat st;
	unsigned ptn;
	if (fstat(master, &st) < 0 || !S_ISCHR(st.st_mode) || ioctl(master, TIOCGPTN, &ptn) < 0)
		return -1;
	struct winsize ws = {.ws_row = o->rows, .ws_col = o->cols};
	if (ioctl(master, TIOCSWINSZ, &ws) < 0)
		return -1;
	int fl = fcntl(master, F_GETFL);
	return fl < 0 ? -1 : fcntl(master, F_SETFL, fl | O_NONBLOCK);
}

int process_agent_start(struct process_table *t, struct process_run *r,
			const struct process_opts *o, const int stdio[3], struct err *e)
{
	int fd = connect_agent(t);
	/* The socket is there but nobody listens: the init that made it is
	 * gone (a crun exec would only fail with "not running", exit 1). */
	if (fd == -ECONNREFUSED)
		return err_set(e, ERR_NOT_RUNNING, ESRCH, "the sandbox's init is not running");
	if (fd < 0)
		return PROCESS_NO_AGENT;
	_cleanup_fd_ int conn = fd;
	uint32_t len;
	_cleanup_free_ char *req = build_request(o, &len);
	if (!req)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	memset(cbuf, 0, sizeof(cbuf));
	uint32_t word = len | (o->pty ? EXEC_AGENT_PTY : 0) | (o->root ? EXEC_AGENT_ROOT : 0);
	struct iovec iov = {&word, sizeof(word)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(3 * sizeof(int));
	memcpy(CMSG_DATA(cm), stdio, 3 * sizeof(int));
	if (o->pty) {
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
	}
	if (sendmsg(conn, &mh, MSG_NOSIGNAL) != sizeof(word) || write_all(conn, req, len) < 0)
		return PROCESS_NO_AGENT; /* a stale socket of a stopped init */

	int32_t nspid = 0;
	struct ucred uc = {0};
	_cleanup_fd_ int master = -1;
	if (recv_hello(conn, &nspid, &uc, &master) < 0 || (o->pty && master < 0))
		return err_set(e, ERR_UNAVAILABLE, EPROTO,
			       "the sandbox could not start the process (at its pids limit?)");
	/* SECURITY: the kernel checked the pid the child claimed (it may only
	 * name itself) and translated it; 0 means it is not in our pid
	 * namespace's view. */
	if (uc.pid <= 1 || !in_sandbox(uc.pid, t->container_id))
		return err_set(e, ERR_INTERNAL, EPROTO, "exec agent: no usable pid");
	if (o->pty && pty_setup(master, o) < 0)
		return err_set(e, ERR_INTERNAL, EPROTO, "exec agent: not a terminal's master");
	if (run_cgroup_attach(&r->cg, uc.pid, e) < 0)
		return err_code(e);
	if (write_all(conn, "g", 1) < 0)
		return err_set(e, ERR_INTERNAL, EPIPE, "the sandbox's exec agent went away");
	r->pid = nspid;
	r->agent_fd = TAKE_FD(conn);
	if (o->pty)
		r->so.fd = TAKE_FD(master);
	return 0;
}

int process_agent_poll_exit(struct process_run *r)
{
	int32_t st;
	ssize_t n = recv(r->agent_fd, &st, sizeof(st), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	/* The init went away (the sandbox stopped or failed): the program
	 * with it, and the result says it was killed, not how it exited. */
	r->status = n == sizeof(st) ? st : 9; /* as if SIGKILLed */
	if (n != sizeof(st))
		r->killed = 1;
	r->client_done = 1;
	return 1;
}
