/* A live X display for unit tests: see xlive.h. */
#include "tests/lib/xlive.h"

#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fs.h"

/* What the atexit and signal handlers clean up. */
static pid_t children[16];
static size_t nchildren;
static char scratch[64];

static void cleanup(void)
{
	for (size_t i = nchildren; i > 0; i--) {
		if (children[i - 1] > 0) {
			kill(-children[i - 1], SIGKILL);
			kill(children[i - 1], SIGKILL);
			waitpid(children[i - 1], NULL, 0);
			children[i - 1] = 0;
		}
	}
	if (scratch[0] && fs_remove_tree(scratch, NULL) < 0)
		fprintf(stderr, "# could not remove %s\n", scratch);
	scratch[0] = '\0';
}

static void on_signal(int sig)
{
	cleanup();
	_exit(128 + sig);
}

int xlive_in_path(const char *prog)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
	return system(cmd) == 0;
}

void xlive_find_build(struct xlive *x, const char *argv0)
{
	const char *build = getenv("BUILD");
	char dir[PATH_MAX];
	if (build) {
		snprintf(dir, sizeof(dir), "%s", build);
	} else {
		char self[PATH_MAX];
		snprintf(self, sizeof(self), "%s", argv0);
		snprintf(dir, sizeof(dir), "%s/..", dirname(self));
	}
	snprintf(x->bridge, sizeof(x->bridge), "%s/deskbox-bridge", dir);
	snprintf(x->vnc, sizeof(x->vnc), "%s/deskbox-vnc", dir);
}

pid_t xlive_spawn(char *const argv[], int keep_fd, const char *display)
{
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		if (!getenv("DBX_TEST_VERBOSE"))
			dup2(null, 2);
		for (int fd = 3; fd < 1024; fd++)
			if (fd != keep_fd)
				close(fd);
		if (keep_fd >= 0)
			fcntl(keep_fd, F_SETFD, 0); /* the one fd the program inherits */
		if (display)
			setenv("DISPLAY", display, 1);
		setenv("LC_ALL", "C.UTF-8", 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid > 0 && nchildren < sizeof(children) / sizeof(children[0]))
		children[nchildren++] = pid;
	return pid;
}

void xlive_forget(pid_t pid)
{
	for (size_t i = 0; i < nchildren; i++)
		if (children[i] == pid)
			children[i] = 0;
}

double xlive_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int xlive_connect_unix(const char *path, int timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	double end = xlive_now_ms() + timeout_ms;
	while (xlive_now_ms() < end) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		if (fd >= 0)
			close(fd);
		usleep(1000);
	}
	return -1;
}

/* Reads the display number Xvfb writes to `fd` (-displayfd): the number
 * and the newline come in separate writes.  0, or -1 after 5 s. */
static int read_display(int fd, char *num, size_t size)
{
	size_t got = 0;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	num[0] = '\0';
	while (got < size - 1 && !strchr(num, '\n') && poll(&p, 1, 5000) == 1) {
		ssize_t n = read(fd, num + got, size - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		num[got] = '\0';
	}
	char *nl = strchr(num, '\n');
	if (!nl)
		return -1;
	*nl = '\0';
	return 0;
}

int xlive_start(struct xlive *x, const char *prefix, const char *const *extra, const char **why)
{
	if (!xlive_in_path("Xvfb")) {
		*why = "Xvfb not installed";
		return -1;
	}
	snprintf(x->tmpdir, sizeof(x->tmpdir), "/tmp/%s-XXXXXX", prefix);
	if (!mkdtemp(x->tmpdir)) {
		*why = "mkdtemp failed";
		return -1;
	}
	snprintf(scratch, sizeof(scratch), "%s", x->tmpdir);
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		*why = "pipe failed";
		return -1;
	}
	char fdarg[16], screen[32];
	snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
	snprintf(screen, sizeof(screen), "%dx%dx24", XLIVE_W, XLIVE_H);
	char *argv[24] = {"Xvfb", "-screen", "0", screen, "-nolisten", "tcp", "-displayfd", fdarg};
	size_t n = 8;
	for (size_t i = 0; extra && extra[i] && n < sizeof(argv) / sizeof(argv[0]) - 1; i++)
		argv[n++] = (char *)extra[i];
	argv[n] = NULL;
	xlive_spawn(argv, pfd[1], NULL);
	close(pfd[1]);
	char num[16];
	int r = read_display(pfd[0], num, sizeof(num));
	close(pfd[0]);
	if (r < 0) {
		*why = "Xvfb did not start";
		return -1;
	}
	snprintf(x->display, sizeof(x->display), ":%s", num);
	return 0;
}

void xlive_settle(struct capture *c, int quiet_ms, int max_ms)
{
	double end = xlive_now_ms() + max_ms;
	struct err e = ERR_INIT;
	while (xlive_now_ms() < end && capture_wait_frame(c, capture_frame(c), quiet_ms, &e) == 1)
		;
}

size_t xlive_read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t got = 0;
	for (ssize_t n; got < cap && (n = read(fd, buf + got, cap - got)) > 0;)
		got += (size_t)n;
	close(fd);
	return got;
}
