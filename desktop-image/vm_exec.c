/* vm_exec: `deskbox-init vm-exec RUN_DIR REQUEST`, run on the host by
 * deskboxd for a program in a VM sandbox (server/runtime/runtime_vm_exec.c).
 * Takes a free exec port of the VM (RUN_DIR/exec<i>.sock, held with a lock
 * on RUN_DIR/exec<i>.lock), sends REQUEST (JSON: argv, env, cwd) to the
 * guest's agent (vm-agent.py), relays its own stdin to the program and the
 * program's stdout and stderr to its own, and exits as the program did (a
 * signal's death is raised again).
 *
 * Frames both ways: a type byte, a big-endian u32 length, the payload.
 * Host to guest: 'R' request, 'I' stdin bytes, 'C' stdin closed.  Guest to
 * host: 'O' stdout, 'E' stderr, 'P' the program's guest pid (when asked
 * for with "want_pid"), 'X' the end ("code N" or "signal N").
 *
 * `deskbox-init vm-exec RUN_DIR REQUEST PID_FILE` writes that pid to
 * PID_FILE (through a temporary name, so it is never read half-written).
 *
 * A terminal ("pty" in REQUEST): the client's stdio is the slave of a host
 * pty whose master deskboxd holds, and its controlling terminal.  It puts
 * it in raw mode, so every byte passes unchanged both ways (the guest's own
 * pty does the line discipline: echo, ^C), and sends the window size as
 * 'W' ("ROWS COLS") at every SIGWINCH, which the kernel sends it when
 * deskboxd resizes the master. */
#include "vm_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define VM_EXEC_PORTS 4 /* RUNTIME_VM_EXEC_PORTS */
#define FRAME_MAX     (1u << 20)

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int send_frame(int fd, char type, const void *data, uint32_t len)
{
	unsigned char h[5] = {(unsigned char)type, (unsigned char)(len >> 24),
			      (unsigned char)(len >> 16), (unsigned char)(len >> 8),
			      (unsigned char)len};
	return write_all(fd, h, 5) < 0 || (len && write_all(fd, data, len) < 0) ? -1 : 0;
}

/* A free port: the first whose lock is free, else wait for one. */
static int take_port(const char *run, int *lock_fd)
{
	char p[4096];
	for (int i = 0; i <= VM_EXEC_PORTS; i++) {
		int port = i < VM_EXEC_PORTS ? i : (int)(getpid() % VM_EXEC_PORTS);
		snprintf(p, sizeof(p), "%s/exec%d.lock", run, port);
		int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return -1;
		if (flock(fd, i < VM_EXEC_PORTS ? LOCK_EX | LOCK_NB : LOCK_EX) == 0) {
			*lock_fd = fd;
			return port;
		}
		close(fd);
	}
	return -1;
}

static int connect_port(const char *run, int i)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/exec%d.sock", run, i);
	int dfd = open(p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", dfd);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(dfd);
		return -1;
	}
	close(dfd);
	return fd;
}

struct rx {
	unsigned char buf[FRAME_MAX + 5];
	size_t have;
	const char *pid_file;
};

static void write_pid(const char *path, const unsigned char *p, uint32_t len)
{
	char tmp[4096], v[16];
	if (!path || len == 0 || len >= sizeof(v))
		return;
	memcpy(v, p, len);
	v[len] = '\0';
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	int ok = write_all(fd, v, len) == 0;
	close(fd);
	if (!ok || rename(tmp, path) < 0)
		unlink(tmp);
}

/* Handles the complete frames in r; returns 1 with *status at 'X'. */
static int frames(struct rx *r, int *status)
{
	size_t off = 0;
	while (r->have - off >= 5) {
		unsigned char *h = r->buf + off;
		uint32_t len =
		    (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
		if (len > FRAME_MAX)
			return -1;
		if (r->have - off < 5 + len)
			break;
		if (h[0] == 'O' || h[0] == 'E')
			write_all(h[0] == 'O' ? 1 : 2, h + 5, len);
		else if (h[0] == 'P')
			write_pid(r->pid_file, h + 5, len);
		else if (h[0] == 'X') {
			char end[32] = "";
			memcpy(end, h + 5, len < sizeof(end) - 1 ? len : sizeof(end) - 1);
			int v = 0;
			if (sscanf(end, "signal %d", &v) == 1)
				*status = 256 + v;
			else if (sscanf(end, "code %d", &v) == 1)
				*status = v & 255;
			return 1;
		}
		off += 5 + len;
	}
	memmove(r->buf, r->buf + off, r->have - off);
	r->have -= off;
	return 0;
}

/* The terminal's size as a 'W' frame. */
static int send_size(int sock)
{
	struct winsize ws;
	char buf[32];
	if (ioctl(0, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		return 0;
	int n = snprintf(buf, sizeof(buf), "%u %u", ws.ws_row, ws.ws_col);
	return send_frame(sock, 'W', buf, (uint32_t)n);
}

/* Stdin to 'I' frames (at its end 'C', or nothing for a terminal, whose
 * slave reads EIO once deskboxd closed the master). */
static int relay_stdin(int sock, int tty, int *in_open)
{
	char buf[65536];
	ssize_t n = read(0, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n > 0)
		return send_frame(sock, 'I', buf, (uint32_t)n);
	*in_open = 0;
	return tty ? 0 : send_frame(sock, 'C', NULL, 0);
}

static int relay(int sock, const char *pid_file, int sig_fd)
{
	static struct rx r;
	r.pid_file = pid_file;
	int in_open = 1, status = 255;
	for (;;) {
		struct pollfd p[3] = {
		    {sock, POLLIN, 0}, {in_open ? 0 : -1, POLLIN, 0}, {sig_fd, POLLIN, 0}};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 255;
		}
		if (p[2].revents) {
			struct signalfd_siginfo si;
			if (read(sig_fd, &si, sizeof(si)) > 0 && send_size(sock) < 0)
				return 255;
		}
		if (p[1].revents && relay_stdin(sock, sig_fd >= 0, &in_open) < 0)
			return 255;
		if (p[0].revents) {
			ssize_t n = read(sock, r.buf + r.have, sizeof(r.buf) - r.have);
			if (n <= 0)
				return 255;
			r.have += (size_t)n;
			int f = frames(&r, &status);
			if (f < 0)
				return 255;
			if (f > 0)
				return status;
		}
	}
}

/* For a terminal: raw mode, and a signalfd for SIGWINCH; -1 otherwise.
 * The request says it (runtime_vm_exec.c writes it with cJSON, unformatted:
 * quotes inside strings are escaped, so only the key matches). */
static int tty_setup(const char *req)
{
	struct termios tio;
	if (!strstr(req, "\"pty\":true") || tcgetattr(0, &tio) < 0)
		return -1;
	cfmakeraw(&tio);
	tcsetattr(0, TCSANOW, &tio);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGWINCH);
	sigprocmask(SIG_BLOCK, &s, NULL);
	return signalfd(-1, &s, SFD_CLOEXEC | SFD_NONBLOCK);
}

int vm_exec_main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: deskbox-init vm-exec RUN_DIR REQUEST [PID_FILE]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int lock = -1;
	int i = take_port(argv[2], &lock);
	int sock = i < 0 ? -1 : connect_port(argv[2], i);
	if (sock < 0) {
		fprintf(stderr, "deskbox vm-exec: no exec channel to the VM: %s\n",
			strerror(errno));
		return 255;
	}
	int sig_fd = tty_setup(argv[3]);
	size_t len = strlen(argv[3]);
	if (len > FRAME_MAX || send_frame(sock, 'R', argv[3], (uint32_t)len) < 0)
		return 255;
	int status = relay(sock, argc == 5 ? argv[4] : NULL, sig_fd);
	if (status > 255) {
		signal(status - 256, SIG_DFL);
		raise(status - 256);
		return 128 + (status - 256);
	}
	return status;
}
