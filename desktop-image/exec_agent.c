/* exec_agent: see exec_agent.h. */
#include "exec_agent.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* Requests over this are refused (argv and env of one program). */
#define REQUEST_MAX  (8u << 20)
#define MAX_CHILDREN 4096
/* The child's fds while it sets up: the connection and the three stdio
 * fds are moved up here, out of the way of 0-2. */
#define CONN_FD 3

struct exec_agent {
	int listen_fd;
	int sudo_fd; /* -1: no sudo door */
	struct {
		pid_t pid;
		int conn;
	} kids[MAX_CHILDREN];
	int n_kids;
};

extern char **environ;

/* The sudo door (EXEC_AGENT_SUDO_SOCK) when deskboxd allows root here
 * (DESKBOX_SUDO=1) and the init is the container's root; -1 otherwise. */
static int sudo_open(void)
{
	const char *want = getenv("DESKBOX_SUDO");
	int on = want && strcmp(want, "1") == 0 && getuid() == 0;
	unsetenv("DESKBOX_SUDO");
	if (!on)
		return -1;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", EXEC_AGENT_SUDO_SOCK);
	unlink(EXEC_AGENT_SUDO_SOCK);
	/* Everyone's: sudo without a password for every program inside. */
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(EXEC_AGENT_SUDO_SOCK, 0666) < 0 || listen(fd, 64) < 0) {
		fprintf(stderr, "deskbox-init: sudo: %s: %s\n", EXEC_AGENT_SUDO_SOCK,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

struct exec_agent *exec_agent_open(void)
{
	struct exec_agent *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->sudo_fd = sudo_open();
	a->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", EXEC_AGENT_SOCK);
	unlink(EXEC_AGENT_SOCK);
	if (a->listen_fd < 0 || bind(a->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(EXEC_AGENT_SOCK, 0600) < 0 || listen(a->listen_fd, 128) < 0) {
		fprintf(stderr, "deskbox-init: exec agent: %s: %s\n", EXEC_AGENT_SOCK,
			strerror(errno));
		if (a->listen_fd >= 0)
			close(a->listen_fd);
		if (a->sudo_fd >= 0)
			close(a->sudo_fd);
		free(a);
		return NULL;
	}
	return a;
}

int exec_agent_sudo_fd(const struct exec_agent *a)
{
	return a ? a->sudo_fd : -1;
}

int exec_agent_fd(const struct exec_agent *a)
{
	return a ? a->listen_fd : -1;
}

static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The request from CONN_FD: its length header with the stdio fds attached
 * (none for a terminal: *pty is set), then the body, NUL-terminated, into
 * *req (*len bytes). */
static int recv_request(int fds[3], char **req, uint32_t *len, int *pty, int *root)
{
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = {len, sizeof(*len)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t n;
	while ((n = recvmsg(CONN_FD, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (n != sizeof(*len))
		return -1;
	*pty = (*len & EXEC_AGENT_PTY) != 0;
	*root = (*len & EXEC_AGENT_ROOT) != 0;
	*len &= ~(EXEC_AGENT_PTY | EXEC_AGENT_ROOT);
	if (*pty && cm)
		return -1;
	if (!*pty &&
	    (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(3 * sizeof(int))))
		return -1;
	if (!*pty)
		memcpy(fds, CMSG_DATA(cm), 3 * sizeof(int));
	if (*len < 8 || *len > REQUEST_MAX)
		return -1;
	*req = malloc((size_t)*len + 1);
	if (!*req || read_full(CONN_FD, *req, *len) < 0)
		return -1;
	(*req)[*len] = '\0';
	return 0;
}

/* The init's environment, minus what the request's `envc` variables at the
 * start of envp override, appended to them. */
static void merge_environ(char **envp, uint32_t envc, size_t n_env)
{
	size_t k = envc;
	for (size_t i = 0; i < n_env; i++) {
		size_t kl = strcspn(environ[i], "=");
		int overridden = 0;
		for (uint32_t j = 0; j < envc && !overridden; j++)
			overridden = strncmp(envp[j], environ[i], kl + 1) == 0;
		if (!overridden)
			envp[k++] = environ[i];
	}
	envp[k] = NULL;
}

/* Splits the request body (see exec_agent.h) into the working directory,
 * argv and the program's environment; they point into `req`. */
static int parse_request(char *req, uint32_t len, const char **cwd, char ***argv, char ***envp)
{
	uint32_t argc, envc;
	memcpy(&argc, req, 4);
	memcpy(&envc, req + 4, 4);
	if (argc == 0 || argc > len || envc > len)
		return -1;
	size_t n_env = 0;
	while (environ[n_env])
		n_env++;
	*argv = calloc((size_t)argc + 1, sizeof(char *));
	*envp = calloc(n_env + envc + 1, sizeof(char *));
	if (!*argv || !*envp)
		return -1;
	char *p = req + 8, *end = req + len;
	*cwd = p;
	p += strnlen(p, (size_t)(end - p)) + 1;
	for (uint32_t i = 0; i < argc + envc; i++) {
		if (p >= end)
			return -1;
		if (i < argc)
			(*argv)[i] = p;
		else
			(*envp)[i - argc] = p;
		p += strnlen(p, (size_t)(end - p)) + 1;
	}
	merge_environ(*envp, envc, n_env);
	return 0;
}

/* Who we are, in deskboxd's terms: our pid, sent with SCM_CREDENTIALS;
 * a terminal's master fd goes along (master >= 0). */
static int send_pid(int master)
{
	int32_t me = (int32_t)getpid();
	struct ucred uc = {getpid(), getuid(), getgid()};
	char ccbuf[CMSG_SPACE(sizeof(uc)) + CMSG_SPACE(sizeof(int))];
	memset(ccbuf, 0, sizeof(ccbuf));
	struct iovec iov = {&me, sizeof(me)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ccbuf,
			    .msg_controllen = CMSG_SPACE(sizeof(uc))};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_CREDENTIALS;
	c->cmsg_len = CMSG_LEN(sizeof(uc));
	memcpy(CMSG_DATA(c), &uc, sizeof(uc));
	if (master >= 0) {
		mh.msg_controllen = sizeof(ccbuf);
		c = CMSG_NXTHDR(&mh, c);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &master, sizeof(int));
	}
	return sendmsg(CONN_FD, &mh, MSG_NOSIGNAL) == sizeof(me) ? 0 : -1;
}

/* A new pseudo-terminal pair of the sandbox's devpts: the master in
 * *master, the slave (not yet our controlling terminal) in fds[0..2]. */
static int open_pty(int *master, int fds[3])
{
	*master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0 || grantpt(*master) < 0 || unlockpt(*master) < 0)
		return -1;
	int slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0)
		return -1;
	fds[0] = fds[1] = fds[2] = slave;
	return 0;
}

/* Execs the program in a new session, with the stdio fds, in `cwd`, the
 * signal state reset and no other fds.  Never returns. */
static void exec_program(const int fds[3], int pty, const char *cwd, char **argv, char **envp)
{
	setsid();
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], i) < 0)
			_exit(125);
	if (pty && ioctl(0, TIOCSCTTY, 0) < 0)
		_exit(125);
	if (cwd[0] && chdir(cwd) < 0) {
		dprintf(2, "cannot enter '%s': %s\n", cwd, strerror(errno));
		_exit(126);
	}
	sigset_t none;
	sigemptyset(&none);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	syscall(SYS_close_range, 3, ~0u, 0);
	execvpe(argv[0], argv, envp);
	int err = errno;
	dprintf(2, "%s: %s\n", argv[0], strerror(err));
	_exit(err == ENOENT ? 127 : 126);
}

/* As the container's root (the init apart from the user), becomes the
 * user before the request's body is parsed: the program runs as
 * EXEC_AGENT_UID with no capabilities (they go with the uid change).  Only
 * the fixed-size length word and the raw bytes were read as root, from a
 * peer known to be deskboxd (from_outside). */
static int become_user(void)
{
	if (getuid() != 0)
		return 0;
	if (setgroups(0, NULL) < 0 || setgid(EXEC_AGENT_GID) < 0 || setuid(EXEC_AGENT_UID) < 0)
		return -1;
	return 0;
}

/* Runs in the forked child: never returns. */
static void child(void)
{
	int fds[3] = {-1, -1, -1};
	uint32_t len;
	char *req = NULL;
	const char *cwd;
	char **argv, **envp;
	int pty = 0, root = 0, master = -1;
	/* Root only from the container's root: never as a host uid. */
	if (recv_request(fds, &req, &len, &pty, &root) < 0 || (root && getuid() != 0) ||
	    (!root && become_user() < 0) || parse_request(req, len, &cwd, &argv, &envp) < 0 ||
	    (pty && open_pty(&master, fds) < 0) || send_pid(master) < 0)
		_exit(125);
	if (master >= 0)
		close(master);
	/* Nothing of the program may run before deskboxd placed us. */
	char go;
	if (read_full(CONN_FD, &go, 1) < 0 || go != 'g')
		_exit(125);
	exec_program(fds, pty, cwd, argv, envp);
}

/* SECURITY: only deskboxd may ask; it connects from outside the sandbox's
 * pid namespace, where the kernel reports its pid as 0.  Every process of
 * the sandbox has a pid here.  (The socket's directory keeps the user out
 * as well; this holds even for the container's root.) */
static int from_outside(int conn)
{
	struct ucred peer;
	socklen_t len = sizeof(peer);
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0 || len != sizeof(peer))
		return 0;
	if (peer.pid != 0) {
		fprintf(stderr, "deskbox-init: exec agent: refused a request from pid %d uid %u\n",
			(int)peer.pid, (unsigned)peer.uid);
		return 0;
	}
	return 1;
}

void exec_agent_accept(struct exec_agent *a)
{
	for (;;) {
		int conn = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (conn < 0)
			return;
		if (!from_outside(conn)) {
			close(conn);
			continue;
		}
		if (a->n_kids >= MAX_CHILDREN) {
			close(conn);
			continue;
		}
		pid_t pid = fork();
		if (pid == 0) {
			if (dup2(conn, CONN_FD) < 0)
				_exit(125);
			/* Everything of the init (signalfd, X, other
			 * connections) goes; the stdio fds arrive later. */
			syscall(SYS_close_range, CONN_FD + 1, ~0u, 0);
			child();
		}
		if (pid < 0) {
			close(conn);
			continue;
		}
		a->kids[a->n_kids].pid = pid;
		a->kids[a->n_kids].conn = conn;
		a->n_kids++;
	}
}

int exec_agent_reaped(struct exec_agent *a, pid_t pid, int status)
{
	if (!a)
		return 0;
	for (int i = 0; i < a->n_kids; i++) {
		if (a->kids[i].pid != pid)
			continue;
		int32_t st = status;
		/* Four bytes into an idle socket's buffer: never blocks. */
		ssize_t w = send(a->kids[i].conn, &st, sizeof(st), MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)w;
		close(a->kids[i].conn);
		a->kids[i] = a->kids[--a->n_kids];
		return 1;
	}
	return 0;
}

/* ---- the sudo door ---- */

/* The supervisor of one sudo request, forked by the init (so the
 * container's root, with its capabilities): starts the program as root in
 * a session of its own, tells the client its pid, sends it the signals the
 * client forwards (one byte each) and its wait status when it ends; when
 * the client goes away first (killed with its run, say), the program's
 * whole session is killed.  Never returns. */
static void sudo_child(void)
{
	int fds[3] = {-1, -1, -1};
	uint32_t len;
	char *req = NULL;
	const char *cwd;
	char **argv, **envp;
	int pty = 0, root = 0;
	if (recv_request(fds, &req, &len, &pty, &root) < 0 || pty ||
	    parse_request(req, len, &cwd, &argv, &envp) < 0)
		_exit(125);
	pid_t pid = fork();
	if (pid == 0) {
		close(CONN_FD);
		exec_program(fds, 0, cwd, argv, envp);
	}
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	int32_t me = (int32_t)pid;
	int pfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	if (pid < 0 || pfd < 0 || write(CONN_FD, &me, sizeof(me)) != sizeof(me)) {
		if (pid > 0)
			kill(pid, SIGKILL);
		_exit(125);
	}
	for (;;) {
		struct pollfd p[2] = {{CONN_FD, POLLIN, 0}, {pfd, POLLIN, 0}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		unsigned char sig;
		if (p[0].revents && read(CONN_FD, &sig, 1) != 1) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			break;
		}
		if (p[0].revents && sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP &&
		    kill(-pid, sig) < 0)
			kill(pid, sig);
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int32_t st = status;
	ssize_t w = write(CONN_FD, &st, sizeof(st));
	(void)w;
	_exit(0);
}

void exec_agent_sudo_accept(struct exec_agent *a)
{
	for (;;) {
		int conn = accept4(a->sudo_fd, NULL, NULL, SOCK_CLOEXEC);
		if (conn < 0)
			return;
		pid_t pid = fork();
		if (pid == 0) {
			if (dup2(conn, CONN_FD) < 0)
				_exit(125);
			syscall(SYS_close_range, CONN_FD + 1, ~0u, 0);
			signal(SIGCHLD, SIG_DFL);
			sigset_t none;
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			sudo_child();
		}
		/* The init reaps the supervisor like any orphan. */
		close(conn);
	}
}
