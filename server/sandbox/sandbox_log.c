/* sandbox_log: the container's stdout and stderr (its init, Xvfb, the
 * window manager, the VNC server) go into a pipe that a thread of deskboxd
 * drains into <dir>/init.log, a root-owned 0600 file.  When init.log has
 * reached LOG_CAP it becomes init.log.1 (replacing the previous one) and a
 * new init.log begins, so whatever the sandbox writes there, even through
 * /proc/1/fd/1, costs the host at most about 2 x LOG_CAP.  A sandbox
 * writing faster than the thread drains blocks on the full pipe. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

extern char **environ;

#define LOG_CAP	  (1 << 20)
#define LOG_CHUNK 65536

struct sandbox_log {
	pthread_mutex_t mu; /* guards fd, size and the reads */
	int rfd;	    /* the pipe's read end, non-blocking */
	int stop[2];	    /* a byte in it ends the thread */
	int fd;		    /* init.log */
	off_t size;
	int eof;
	char path[PATH_MAX], old[PATH_MAX];
	char id[SANDBOX_ID_LEN + 1];
	pthread_t thread;
	char buf[LOG_CHUNK];
};

static int log_reopen(struct sandbox_log *l, int truncate)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd =
	    open(l->path,
		 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (truncate ? O_TRUNC : 0),
		 0600);
	struct stat st;
	l->size = l->fd >= 0 && fstat(l->fd, &st) == 0 ? st.st_size : 0;
	return l->fd;
}

/* Starts a new init.log when the current one is full. */
static void log_rotate(struct sandbox_log *l)
{
	if (l->size < LOG_CAP)
		return;
	if (rename(l->path, l->old) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: rotating '%s': %s", l->id, l->path,
			strerror(errno));
	log_reopen(l, 1);
}

/* Moves what the pipe holds now into the file (l->mu held). */
static void log_drain(struct sandbox_log *l)
{
	for (;;) {
		ssize_t n = read(l->rfd, l->buf, sizeof(l->buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			l->eof = 1;
		if (n <= 0)
			break;
		log_rotate(l);
		if (l->fd >= 0 && write(l->fd, l->buf, (size_t)n) == n)
			l->size += n;
	}
}

static void *log_thread(void *arg)
{
	struct sandbox_log *l = arg;
	for (;;) {
		struct pollfd p[2] = {{l->rfd, POLLIN, 0}, {l->stop[0], POLLIN, 0}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		pthread_mutex_lock(&l->mu);
		log_drain(l);
		int eof = l->eof;
		pthread_mutex_unlock(&l->mu);
		if (eof) /* every writer is gone: nothing more can come */
			break;
	}
	return NULL;
}

static void log_free(struct sandbox_log *l)
{
	close(l->rfd);
	close(l->stop[0]);
	close(l->stop[1]);
	if (l->fd >= 0)
		close(l->fd);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* Starts draining the read end `rfd` (taken over) into init.log. */
static int log_start(struct sandbox *sb, int rfd, struct err *e)
{
	sandbox_log_close(sb); /* a previous run's, if any */
	struct sandbox_log *l = calloc(1, sizeof(*l));
	if (!l) {
		close(rfd);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	l->fd = -1;
	l->rfd = rfd;
	pthread_mutex_init(&l->mu, NULL);
	snprintf(l->id, sizeof(l->id), "%s", sb->id);
	sandbox_path(sb, l->path, sizeof(l->path), "init.log");
	sandbox_path(sb, l->old, sizeof(l->old), "init.log.1");
	if (pipe2(l->stop, O_CLOEXEC) < 0) {
		l->stop[0] = l->stop[1] = -1;
		log_free(l);
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	}
	fcntl(l->rfd, F_SETFL, O_NONBLOCK);
	if (log_reopen(l, 0) < 0) {
		int saved = errno;
		log_free(l);
		return err_sys(e, ERR_INTERNAL, saved, "opening '%s'", l->path);
	}
	log_rotate(l); /* an init.log from before the cap */
	int rc = pthread_create(&l->thread, NULL, log_thread, l);
	if (rc != 0) {
		log_free(l);
		return err_sys(e, ERR_INTERNAL, rc, "starting the log thread");
	}
	sb->log = l;
	return 0;
}

int sandbox_log_open(struct sandbox *sb, int *wfd, struct err *e)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	if (log_start(sb, p[0], e) < 0) {
		close(p[1]);
		return err_code(e);
	}
	*wfd = p[1];
	return 0;
}

/* Stops the thread and drains what waits (the log stays open). */
static void log_stop_thread(struct sandbox_log *l)
{
	char c = 1;
	while (write(l->stop[1], &c, 1) < 0 && errno == EINTR)
		;
	pthread_join(l->thread, NULL);
	log_drain(l); /* what the container wrote last */
}

int sandbox_log_detach(struct sandbox *sb, pid_t *keeper, struct err *e)
{
	struct sandbox_log *l = sb->log;
	*keeper = 0;
	if (!l)
		return 0;
	sb->log = NULL;
	log_stop_thread(l);
	int fl = fcntl(l->rfd, F_GETFL);
	char cap[32];
	snprintf(cap, sizeof(cap), "%d", LOG_CAP);
	/* Unbuffered: what head read is in the file before a kill can come. */
	char *argv[] = {
	    "/bin/sh", "-c",	"stdbuf -o0 head -c \"$0\" >>\"$1\"; exec cat >/dev/null",
	    cap,       l->path, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, l->rfd, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawnattr_init(&at);
	/* Its own session: a signal to deskboxd's process group spares it. */
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
	int r = fl < 0 || fcntl(l->rfd, F_SETFL, fl & ~O_NONBLOCK) < 0
		    ? errno
		    : posix_spawn(keeper, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	log_free(l);
	if (r != 0) {
		*keeper = 0;
		return err_sys(e, ERR_INTERNAL, r, "starting the log keeper of sandbox '%s'",
			       sb->id);
	}
	return 0;
}

int sandbox_log_adopt(struct sandbox *sb, pid_t keeper, struct err *e)
{
	char path[PATH_MAX], want[PATH_MAX], cmd[PATH_MAX + 256];
	sandbox_path(sb, want, sizeof(want), "init.log");
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)keeper);
	int pidfd = keeper > 0 ? (int)syscall(SYS_pidfd_open, keeper, 0) : -1;
	FILE *f = pidfd >= 0 ? fopen(path, "re") : NULL;
	size_t n = f ? fread(cmd, 1, sizeof(cmd) - 1, f) : 0;
	if (f)
		fclose(f);
	cmd[n] = '\0';
	/* SECURITY: the pid comes from sandbox.json; only the keeper that
	 * this sandbox's detach started (its init.log in its argv, the
	 * process still there after the check: the pidfd) is taken over. */
	int ours = pidfd >= 0 && memmem(cmd, n, want, strlen(want)) &&
		   syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
	int rfd = ours ? (int)syscall(SYS_pidfd_getfd, pidfd, 0, 0) : -1;
	if (ours)
		kill(-keeper, SIGKILL); /* its session: sh and the head or cat under it */
	if (pidfd >= 0)
		close(pidfd);
	if (rfd < 0)
		return err_set(e, ERR_INTERNAL, ESRCH,
			       "the log keeper (pid %d) of sandbox '%s' is gone", (int)keeper,
			       sb->id);
	fcntl(rfd, F_SETFD, FD_CLOEXEC);
	return log_start(sb, rfd, e);
}

void sandbox_log_flush(const struct sandbox *sb)
{
	struct sandbox_log *l = sb->log;
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	log_drain(l);
	pthread_mutex_unlock(&l->mu);
}

void sandbox_log_close(struct sandbox *sb)
{
	struct sandbox_log *l = sb->log;
	if (!l)
		return;
	sb->log = NULL;
	log_stop_thread(l);
	log_free(l);
}
