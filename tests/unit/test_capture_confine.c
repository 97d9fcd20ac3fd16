/* The bridge is confined before it reads anything from the VNC server: this
 * test plays the VNC server itself over a socketpair, so it decides when the
 * first byte goes out.  While the bridge waits for the banner it must already
 * run as nobody with no capabilities, no_new_privs, not dumpable, under its
 * seccomp filter; then a whole handshake, a frame and a key event must work
 * under that filter, and servers that ask for authentication or send junk
 * must make it exit cleanly (status 3), not be killed by the filter.  Needs
 * no X server; runs as any user, the uid checks only as root. */
#include <errno.h>
#include <limits.h>
#include <libgen.h>
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
#include <sys/wait.h>
#include <unistd.h>

#include "capture/capture.h"
#include "common/clock.h"
#include "tests/harness.h"

#define W 64
#define H 32

static char bridge[PATH_MAX];

/* The value of `key` in /proc/<pid>/status, "" when absent. */
static void status_field(pid_t pid, const char *key, char *out, size_t len)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	out[0] = '\0';
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	size_t kl = strlen(key);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
			char *v = line + kl + 1;
			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = '\0';
			snprintf(out, len, "%s", v);
			break;
		}
	}
	fclose(f);
}

/* Whether the bridge sits in read(3, ...) (the banner): /proc/<pid>/syscall
 * starts with the syscall number and the first argument.  Readable by root only, the
 * bridge being non-dumpable. */
static int blocked_reading_vnc(pid_t pid)
{
	char path[64], buf[256] = "", want[64];
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	snprintf(want, sizeof(want), "%ld 0x3 ", (long)SYS_read);
	return strncmp(buf, want, strlen(want)) == 0;
}

static int send_all(int fd, const void *p, size_t n)
{
	return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* Reads exactly `n` bytes within two seconds. */
static int recv_all(int fd, void *p, size_t n)
{
	size_t got = 0;
	long long deadline = clock_mono_ms() + 2000;
	while (got < n) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		long long left = deadline - clock_mono_ms();
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			return -1;
		ssize_t r = recv(fd, (char *)p + got, n - got, 0);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* Starts a bridge on one end of a socketpair; *srv is the other end. */
static struct capture *start_bridge(int *srv, pid_t *pid)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return NULL;
	struct capture *c = NULL;
	struct err e = ERR_INIT;
	struct capture_opts o = {.bridge_path = bridge, .width = W, .height = H};
	if (capture_start(&c, &o, sp[1], &e) < 0) {
		printf("# capture_start: %s\n", e.msg);
		close(sp[0]);
		return NULL;
	}
	*srv = sp[0];
	/* Alive until it reads our first byte; capture_pid() says -1 once the
	 * bridge exited, and exit_of() needs the pid after that. */
	*pid = capture_pid(c);
	return c;
}

/* The bridge's exit, read without reaping it (capture_free reaps):
 * "exit N", "signal N" or "running". */
static void exit_of(pid_t pid, char *out, size_t len)
{
	siginfo_t si = {0};
	long long deadline = clock_mono_ms() + 5000;
	do {
		si.si_pid = 0;
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT | WNOHANG) < 0)
			break;
		if (si.si_pid == pid) {
			snprintf(out, len, "%s %d", si.si_code == CLD_EXITED ? "exit" : "signal",
				 si.si_status);
			return;
		}
		clock_sleep_ms(5);
	} while (clock_mono_ms() < deadline);
	snprintf(out, len, "running");
}

/* Waits, before any byte was sent, until the bridge is confined, then checks
 * how. */
static void check_confined(struct capture *c, int srv)
{
	pid_t pid = capture_pid(c);
	int root = geteuid() == 0;
	char v[256] = "";
	long long deadline = clock_mono_ms() + 5000;
	/* As root: until it blocks reading fd 3 (the handshake started);
	 * otherwise until the filter shows. */
	while (clock_mono_ms() < deadline) {
		status_field(pid, "Seccomp", v, sizeof(v));
		if (root ? blocked_reading_vnc(pid) : strcmp(v, "2") == 0)
			break;
		clock_sleep_ms(2);
	}
	if (root)
		ok(blocked_reading_vnc(pid), "the bridge waits in read() on the VNC socket");
	status_field(pid, "Seccomp", v, sizeof(v));
	is_str(v, "2", "Seccomp: 2 (filter) while waiting for the banner");
	status_field(pid, "NoNewPrivs", v, sizeof(v));
	is_str(v, "1", "NoNewPrivs: 1");
	status_field(pid, "CapEff", v, sizeof(v));
	is_str(v, "0000000000000000", "CapEff: none");
	status_field(pid, "CapPrm", v, sizeof(v));
	is_str(v, "0000000000000000", "CapPrm: none");
	int pending = -1;
	ioctl(srv, FIONREAD, &pending);
	is_int(pending, 0, "the bridge sent nothing before the banner");
	if (!root) {
		skip("uid, groups and dumpable", "not root: the bridge keeps the test's uid");
		return;
	}
	status_field(pid, "Uid", v, sizeof(v));
	is_str(v, "65534\t65534\t65534\t65534", "Uid: nobody (real, effective, saved, fs)");
	status_field(pid, "Gid", v, sizeof(v));
	is_str(v, "65534\t65534\t65534\t65534", "Gid: nogroup");
	status_field(pid, "Groups", v, sizeof(v));
	is_str(v, "", "Groups: none");
	/* A non-dumpable process's /proc files belong to root (its
	 * directory keeps the euid, for ps). */
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	int r = stat(path, &st);
	if (!ok(r == 0 && st.st_uid == 0, "not dumpable (/proc/<pid>/status owned by root)"))
		printf("#   stat %d, owner %d\n", r, (int)st.st_uid);
}

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
}

/* RFB 3.8 up to and including ServerInit (RFC 6143 7.1-7.3). */
static int server_handshake(int srv)
{
	uint8_t ver[12], sec[2] = {1, 1}, choice, shared, ok32[4] = {0};
	if (send_all(srv, "RFB 003.008\n", 12) < 0 || recv_all(srv, ver, 12) < 0 ||
	    memcmp(ver, "RFB 003.008\n", 12) != 0 || send_all(srv, sec, 2) < 0 ||
	    recv_all(srv, &choice, 1) < 0 || choice != 1 || send_all(srv, ok32, 4) < 0 ||
	    recv_all(srv, &shared, 1) < 0)
		return -1;
	uint8_t init[24 + 4] = {0};
	put16(init, W);
	put16(init + 2, H);
	/* 32 bpp, depth 24, little-endian, true colour, 255/255/255, 16/8/0. */
	const uint8_t pf[16] = {32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0};
	memcpy(init + 4, pf, sizeof(pf));
	put32(init + 20, 4);
	memcpy(init + 24, "test", 4);
	return send_all(srv, init, sizeof(init));
}

/* One raw rectangle covering the screen, every pixel 0x00336699. */
static int server_frame(int srv)
{
	static uint8_t msg[4 + 12 + W * H * 4];
	msg[0] = 0; /* FramebufferUpdate */
	put16(msg + 2, 1);
	put16(msg + 8, W);
	put16(msg + 10, H);
	put32(msg + 12, 0); /* raw */
	for (size_t i = 0; i < (size_t)W * H; i++)
		memcpy(msg + 16 + i * 4, "\x99\x66\x33\x00", 4);
	return send_all(srv, msg, sizeof(msg));
}

/* Reads the client's stream until a KeyEvent for `keysym` (press) shows. */
static int saw_key(int srv, uint32_t keysym)
{
	uint8_t want[8] = {4, 1, 0, 0}, buf[4096];
	put32(want + 4, keysym);
	size_t have = 0;
	long long deadline = clock_mono_ms() + 3000;
	while (clock_mono_ms() < deadline) {
		struct pollfd pf = {.fd = srv, .events = POLLIN};
		if (poll(&pf, 1, 100) <= 0)
			continue;
		ssize_t r = recv(srv, buf + have, sizeof(buf) - have, 0);
		if (r <= 0)
			return 0;
		have += (size_t)r;
		for (size_t i = 0; i + 8 <= have; i++)
			if (memcmp(buf + i, want, 8) == 0)
				return 1;
		if (have > sizeof(buf) - 64) {
			memmove(buf, buf + have - 8, 8);
			have = 8;
		}
	}
	return 0;
}

/* The confined bridge still does its work: handshake, frame, input. */
static void test_works_confined(void)
{
	int srv = -1;
	pid_t pid;
	struct capture *c = start_bridge(&srv, &pid);
	ok(c != NULL, "bridge started");
	if (!c)
		return;
	check_confined(c, srv);
	ok(server_handshake(srv) == 0, "handshake under the filter");
	ok(server_frame(srv) == 0, "frame sent");
	struct err e = ERR_INIT;
	int r = capture_wait_ready(c, 5000, &e);
	ok(r == 0, "first frame mirrored under the filter");
	if (r < 0)
		printf("# %s\n", e.msg);
	uint8_t px[4] = {0};
	if (r == 0 &&
	    capture_snapshot(c, (struct capture_rect){W - 1, H - 1, 1, 1}, px, 4, NULL, &e) == 0)
		ok(memcmp(px, "\x99\x66\x33", 3) == 0, "the server's pixels are mirrored");
	struct input_event ev = {.type = INPUT_KEY, .keysym = 0x61, .down = 1};
	ok(r == 0 && capture_send(c, &ev, 1, &e) == 0 && saw_key(srv, 0x61),
	   "a key event reaches the server under the filter");
	ok(capture_alive(c), "the bridge is still alive");
	capture_free(c);
	close(srv);
}

/* A server that sends `hello`, and `after_version` once the bridge
 * answered with its version, must end the bridge with
 * exit status 3 (RFB failure), not the filter's SIGSYS. */
static void test_refused(const char *name, const void *hello, size_t hello_len,
			 const void *after_version, size_t after_len)
{
	int srv = -1;
	pid_t pid;
	struct capture *c = start_bridge(&srv, &pid);
	if (!ok(c != NULL, "bridge started"))
		return;
	uint8_t ver[12];
	send_all(srv, hello, hello_len);
	if (after_len && recv_all(srv, ver, 12) == 0)
		send_all(srv, after_version, after_len);
	struct err e = ERR_INIT;
	ok(capture_wait_ready(c, 5000, &e) < 0, "no frame");
	char how[32];
	exit_of(pid, how, sizeof(how));
	char title[128];
	snprintf(title, sizeof(title), "%s: the bridge exits with status 3 (%s)", name, how);
	ok(strcmp(how, "exit 3") == 0, title);
	capture_free(c);
	close(srv);
}

/* An RFB 3.3 banner, split: the bridge waits for all 12 bytes, then exits
 * without answering (it would have answered with its own version). */
static void test_old_version(void)
{
	int srv = -1;
	pid_t pid;
	struct capture *c = start_bridge(&srv, &pid);
	if (!ok(c != NULL, "bridge started"))
		return;
	send_all(srv, "RFB 00", 6);
	struct pollfd pf = {.fd = srv, .events = POLLIN};
	ok(poll(&pf, 1, 200) == 0 && capture_alive(c), "half a banner: the bridge waits");
	send_all(srv, "3.003\n", 6);
	char how[32];
	exit_of(pid, how, sizeof(how));
	char title[128];
	snprintf(title, sizeof(title), "RFB 3.3 refused: the bridge exits with status 3 (%s)", how);
	ok(strcmp(how, "exit 3") == 0, title);
	char b;
	ok(recv(srv, &b, 1, MSG_DONTWAIT) == 0, "without answering");
	capture_free(c);
	close(srv);
}

int main(int argc, char **argv)
{
	const char *build = getenv("BUILD");
	char self[PATH_MAX];
	snprintf(self, sizeof(self), "%s", argv[0]);
	if (build)
		snprintf(bridge, sizeof(bridge), "%s/deskbox-bridge", build);
	else
		snprintf(bridge, sizeof(bridge), "%s/../deskbox-bridge", dirname(self));
	if (access(bridge, X_OK) != 0)
		skip_all("deskbox-bridge not built next to the test (set BUILD)");
	signal(SIGPIPE, SIG_IGN);

	test_works_confined();
	/* RFB 3.8 offering only VNC authentication (2), then only VeNCrypt
	 * (19): the bridge accepts None alone. */
	test_refused("VNC auth offered", "RFB 003.008\n", 12, "\x01\x02", 2);
	test_refused("VeNCrypt offered", "RFB 003.008\n", 12, "\x01\x13", 2);
	/* RFB 3.3 lets the server impose a security type, which libvncclient
	 * follows into TLS or SASL whatever it was told: refused at the banner,
	 * split here to show the bridge waits for all of it. */
	test_old_version();
	test_refused("RFB 3.6 banner", "RFB 003.006\n", 12, NULL, 0);
	test_refused("junk banner", "HTTP/1.1 200\r\n", 14, NULL, 0);
	return done();
}
