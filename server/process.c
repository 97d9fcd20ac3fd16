#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/cleanup.h"
#include "../common/fs.h"
#include "image.h"

/* Past the deadline, how long the runtime client gets to notice its process
 * was killed before it is killed itself. */
#define KILL_GRACE_MS 2000
#define SPAWN_WAIT_MS 5000

struct stream {
	int fd;
	char *buf;
	size_t len, cap, max;
	int truncated;
};

void process_result_release(struct process_result *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Reads what is available; returns 1 at EOF, 0 otherwise. */
static int stream_read(struct stream *s)
{
	char scratch[65536];
	for (;;) {
		char *dst = scratch;
		size_t room = sizeof(scratch);
		if (s->len < s->max) {
			if (s->cap - s->len < 65536 && s->cap < s->max + 1) {
				size_t ncap = s->cap ? s->cap * 2 : 65536;
				if (ncap > s->max + 1)
					ncap = s->max + 1;
				char *nb = realloc(s->buf, ncap);
				if (nb) {
					s->buf = nb;
					s->cap = ncap;
				}
			}
			if (s->cap > s->len + 1) {
				dst = s->buf + s->len;
				room = s->cap - s->len - 1;
				if (room > s->max - s->len)
					room = s->max - s->len;
			}
		}
		ssize_t n = read(s->fd, dst, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : 1;
		if (n == 0)
			return 1;
		if (dst == scratch)
			s->truncated = 1;
		else
			s->len += (size_t)n;
	}
}

static pid_t read_pid_file(const char *path)
{
	char buf[32] = {0};
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
		return -1;
	long v = strtol(buf, NULL, 10);
	return v > 1 ? (pid_t)v : -1;
}

/* The pid of host process `pid` inside its own pid namespace. */
static pid_t ns_pid(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	_cleanup_file_ FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6) != 0)
			continue;
		char *last = strrchr(line, '\t');
		if (!last)
			last = line + 6;
		return (pid_t)strtol(last, NULL, 10);
	}
	return -1;
}

static int spawn(struct sandbox *sb, const struct process_opts *o, int in, int out, int err_fd,
		 char *pidfile, size_t pidfile_size, pid_t *client, struct err *e)
{
	char rnd[17];
	if (fs_random_hex(rnd, 8, e) < 0)
		return err_code(e);
	snprintf(pidfile, pidfile_size, "%s/exec-%s.pid", sandbox_dir(sb), rnd);
	struct runtime_exec x = {
	    .argv = o->argv,
	    .env = o->env,
	    .cwd = o->cwd ? o->cwd : "/workspace",
	    .uid = IMAGE_USER_UID,
	    .gid = IMAGE_USER_GID,
	    .stdin_fd = in,
	    .stdout_fd = out,
	    .stderr_fd = err_fd,
	    .pid_file = pidfile,
	};
	return runtime_exec_spawn(sandbox_runtime(sb), sandbox_container_id(sb), &x, client, e);
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

int process_run(struct sandbox *sb, const struct process_opts *o, struct process_result *res,
		struct err *e)
{
	memset(res, 0, sizeof(*res));
	int pin[2], pout[2], perr[2];
	if (pipe2(pin, O_CLOEXEC) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	if (pipe2(pout, O_CLOEXEC) < 0) {
		close(pin[0]);
		close(pin[1]);
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	}
	if (pipe2(perr, O_CLOEXEC) < 0) {
		close(pin[0]);
		close(pin[1]);
		close(pout[0]);
		close(pout[1]);
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	}
	long long start = fs_now_ms();
	char pidfile[PATH_MAX];
	pid_t client = -1;
	int r = spawn(sb, o, pin[0], pout[1], perr[1], pidfile, sizeof(pidfile), &client, e);
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	if (r < 0) {
		close(pin[1]);
		close(pout[0]);
		close(perr[0]);
		return r;
	}
	int infd = pin[1];
	fcntl(infd, F_SETFL, O_NONBLOCK);
	fcntl(pout[0], F_SETFL, O_NONBLOCK);
	fcntl(perr[0], F_SETFL, O_NONBLOCK);
	struct stream so = {.fd = pout[0], .max = o->max_output};
	struct stream se = {.fd = perr[0], .max = o->max_output};
	size_t in_off = 0;
	if (!o->stdin_data || o->stdin_len == 0) {
		close(infd);
		infd = -1;
	}
	int out_eof = 0, err_eof = 0, status = 0, exited = 0;
	long long deadline = start + o->timeout_ms;
	while (!exited) {
		struct pollfd pf[3];
		nfds_t n = 0;
		if (!out_eof)
			pf[n++] = (struct pollfd){.fd = so.fd, .events = POLLIN};
		if (!err_eof)
			pf[n++] = (struct pollfd){.fd = se.fd, .events = POLLIN};
		if (infd >= 0)
			pf[n++] = (struct pollfd){.fd = infd, .events = POLLOUT};
		long long left = deadline - fs_now_ms();
		/* Short slices: the client's exit is noticed by waitpid, not
		 * by EOF, since grandchildren may keep the pipes open. */
		poll(pf, n, left < 0 ? 0 : left > 20 ? 20 : (int)left);
		if (!out_eof)
			out_eof = stream_read(&so);
		if (!err_eof)
			err_eof = stream_read(&se);
		if (infd >= 0) {
			ssize_t w = write(infd, o->stdin_data + in_off, o->stdin_len - in_off);
			if (w > 0)
				in_off += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) ||
			    in_off == o->stdin_len) {
				close(infd);
				infd = -1;
			}
		}
		pid_t w = waitpid(client, &status, WNOHANG);
		if (w == client) {
			exited = 1;
			break;
		}
		if (fs_now_ms() >= deadline) {
			res->timed_out = 1;
			pid_t pid = read_pid_file(pidfile);
			if (pid > 0) {
				kill(-pid, SIGKILL);
				kill(pid, SIGKILL);
			}
			long long grace = fs_now_ms() + KILL_GRACE_MS;
			while (waitpid(client, &status, WNOHANG) == 0) {
				if (fs_now_ms() > grace) {
					kill(client, SIGKILL);
					waitpid(client, &status, 0);
					break;
				}
				sleep_ms(5);
			}
			exited = 1;
		}
	}
	/* Drain what the run wrote before it ended. */
	if (!out_eof)
		stream_read(&so);
	if (!err_eof)
		stream_read(&se);
	if (infd >= 0)
		close(infd);
	close(so.fd);
	close(se.fd);
	unlink(pidfile);
	res->exit_code = res->timed_out ? -1 : exit_code_of(status);
	res->duration_ms = fs_now_ms() - start;
	res->out = so.buf ? so.buf : strdup("");
	res->err = se.buf ? se.buf : strdup("");
	if (res->out && so.buf)
		res->out[so.len] = '\0';
	if (res->err && se.buf)
		res->err[se.len] = '\0';
	res->out_len = so.len;
	res->err_len = se.len;
	res->out_truncated = so.truncated;
	res->err_truncated = se.truncated;
	if (!res->out || !res->err) {
		process_result_release(res);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

static void *reaper(void *arg)
{
	pid_t pid = (pid_t)(intptr_t)arg;
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return NULL;
}

int process_spawn(struct sandbox *sb, const struct process_opts *o, pid_t *pid, struct err *e)
{
	_cleanup_fd_ int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening /dev/null");
	char pidfile[PATH_MAX];
	pid_t client;
	int r = spawn(sb, o, devnull, devnull, devnull, pidfile, sizeof(pidfile), &client, e);
	if (r < 0)
		return r;
	long long deadline = fs_now_ms() + SPAWN_WAIT_MS;
	pid_t host = -1;
	int status = 0;
	for (;;) {
		host = read_pid_file(pidfile);
		if (host > 0)
			break;
		if (waitpid(client, &status, WNOHANG) == client) {
			unlink(pidfile);
			return err_set(e, ERR_INVALID, ECHILD,
				       "could not start '%.200s' (runtime exit %d)", o->argv[0],
				       exit_code_of(status));
		}
		if (fs_now_ms() > deadline) {
			kill(client, SIGKILL);
			waitpid(client, &status, 0);
			unlink(pidfile);
			return err_set(e, ERR_TIMEOUT, ETIMEDOUT, "starting '%.200s' timed out",
				       o->argv[0]);
		}
		sleep_ms(1);
	}
	unlink(pidfile);
	*pid = ns_pid(host);
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	if (pthread_create(&t, &attr, reaper, (void *)(intptr_t)client) != 0) {
		/* Without a reaper the client would linger as a zombie once
		 * the program ends: wait for it here instead. */
		pthread_attr_destroy(&attr);
		waitpid(client, &status, 0);
		return 0;
	}
	pthread_attr_destroy(&attr);
	return 0;
}
