/* process: runs (each in a cgroup of its own, started by the sandbox's
 * exec agent or a crun exec client) and the per-sandbox table that knows
 * them.  Background runs are in process_bg.c, contexts in process_ctx.c. */
#include "common/text.h"
#include "process.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "server/runtime/runtime.h"

/* After the cgroup was killed, how long the runtime client gets to notice
 * before it is killed itself. */
#define KILL_GRACE_MS 2000
/* After the program exited, how long output still in flight is read. */
#define DRAIN_MS 500
/* How long crun may take to write the pid file of a background run. */
#define PID_WAIT_MS 10000
#define READ_CHUNK  65536

void process_result_release(struct process_result *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

/* ---- the table ---- */

struct process_table *process_table_new(const struct process_host *host)
{
	struct process_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->host = *host;
	snprintf(t->container_id, sizeof(t->container_id), "%s", host->container_id);
	snprintf(t->dir, sizeof(t->dir), "%s", host->dir);
	t->host.container_id = t->container_id;
	t->host.dir = t->dir;
	snprintf(t->run, sizeof(t->run), "%s/run", host->dir);
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->bg_done, NULL);
	pthread_cond_init(&t->bg_output, NULL);
	atomic_init(&t->refs, 1);
	return t;
}

void process_table_set_run_dir(struct process_table *t, const char *run)
{
	pthread_mutex_lock(&t->mu);
	if (run)
		snprintf(t->run, sizeof(t->run), "%s", run);
	else
		snprintf(t->run, sizeof(t->run), "%s/run", t->dir);
	pthread_mutex_unlock(&t->mu);
}

/* Before the sandbox is listed, so before any run reads it. */
void process_table_set_backend(struct process_table *t, const struct runtime_backend *be)
{
	t->host.be = be;
}

void process_table_ref(struct process_table *t)
{
	atomic_fetch_add(&t->refs, 1);
}

void process_table_unref(struct process_table *t)
{
	if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	/* Ended terminals may be listed still (their owners are gone). */
	process_term_drop_all(t);
	process_helper_free_all(t);
	/* Only finished background records can be left: every live run
	 * holds a reference. */
	while (t->runs) {
		struct process_run *r = t->runs;
		t->runs = r->next;
		process_run_destroy(r);
	}
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->bg_done);
	pthread_cond_destroy(&t->bg_output);
	free(t);
}

void process_table_kill_all(struct process_table *t, int foreground_only)
{
	pthread_mutex_lock(&t->mu);
	for (struct process_run *r = t->runs; r; r = r->next) {
		if (!r->cg_live || (foreground_only && r->bg))
			continue;
		r->killed = 1;
		run_cgroup_kill(&r->cg);
	}
	if (foreground_only) {
		pthread_mutex_unlock(&t->mu);
		return;
	}
	/* The owners of background runs notice within moments; wait for
	 * them so that nothing of the sandbox outlives its teardown. */
	struct timespec until = clock_wall_after(5000);
	while (t->bg_threads > 0)
		if (pthread_cond_timedwait(&t->bg_done, &t->mu, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&t->mu);
	process_ctx_drop_all(t);
	process_term_drop_all(t);
	process_session_drop_all(t);
	process_helper_drop_all(t);
}

static void table_add(struct process_table *t, struct process_run *r)
{
	pthread_mutex_lock(&t->mu);
	r->next = t->runs;
	t->runs = r;
	r->in_table = 1;
	pthread_mutex_unlock(&t->mu);
}

void process_table_remove_locked(struct process_table *t, struct process_run *r)
{
	for (struct process_run **pp = &t->runs; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	r->in_table = 0;
}

/* ---- one run ---- */

static void stream_init(struct process_stream_buf *s, int fd, size_t max)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->max = max;
}

/* Appends what fits under the cap; the rest only sets `truncated`. */
static void stream_keep(struct process_stream_buf *s, const char *data, size_t n)
{
	size_t room = s->max > s->len ? s->max - s->len : 0;
	size_t take = n < room ? n : room;
	if (take < n)
		s->truncated = 1;
	if (!take)
		return;
	if (s->len + take + 1 > s->cap) {
		size_t ncap = s->cap ? s->cap : 4096;
		while (ncap < s->len + take + 1)
			ncap *= 2;
		if (ncap > s->max + 1)
			ncap = s->max + 1;
		char *nb = realloc(s->buf, ncap);
		if (!nb) {
			s->truncated = 1;
			return;
		}
		s->buf = nb;
		s->cap = ncap;
	}
	memcpy(s->buf + s->len, data, take);
	s->len += take;
	s->buf[s->len] = '\0';
}

/* Reads what is there; returns 1 at EOF. */
static int stream_read(struct process_run *r, struct process_stream_buf *s, enum process_stream id,
		       process_output_fn fn, void *cls)
{
	if (s->fd < 0)
		return 1;
	char chunk[READ_CHUNK];
	for (int i = 0; i < 16; i++) {
		ssize_t n = read(s->fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			close(s->fd);
			s->fd = -1;
			return 1;
		}
		size_t room = s->max > s->seen ? s->max - s->seen : 0;
		size_t take = (size_t)n < room ? (size_t)n : room;
		s->seen += take;
		if (take < (size_t)n)
			s->truncated = 1;
		if (take && fn)
			fn(cls, id, chunk, take);
		else if (take)
			stream_keep(s, chunk, take);
		r->total[id - 1] += (uint64_t)n;
	}
	return 0;
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
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

static pid_t read_pid_file(const char *path)
{
	char buf[32] = {0};
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
		return -1;
	long v = strtol(buf, NULL, 10);
	return v > 1 ? (pid_t)v : -1;
}

/* Waits until host process `pid` is stopped (state T). */
static int wait_stopped(pid_t pid, long long until)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0;; i++) {
		_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (n <= 0)
			return -1;
		buf[n] = '\0';
		/* "pid (comm) S ...": comm may hold anything, the state
		 * follows the last ')'. */
		char *p = strrchr(buf, ')');
		if (p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't'))
			return 0;
		if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
			return -1;
		if (clock_mono_ms() > until)
			return -1;
		clock_sleep_us(i < 200 ? 100 : 2000);
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Reaps the client, waiting up to `ms` (then SIGKILL). */
static void reap_client(struct process_run *r, int ms)
{
	if (r->agent_fd >= 0 && !r->client_done) {
		struct pollfd p = {r->agent_fd, POLLIN, 0};
		while (ms > 0 && poll(&p, 1, ms) < 0 && errno == EINTR)
			;
		if (!process_agent_poll_exit(r)) {
			r->status = 9; /* the cgroup kill took it */
			r->client_done = 1;
		}
		return;
	}
	if (r->client <= 0 || r->client_done)
		return;
	if (r->pidfd >= 0 && ms > 0) {
		struct pollfd p = {r->pidfd, POLLIN, 0};
		while (poll(&p, 1, ms) < 0 && errno == EINTR)
			;
	}
	if (waitpid(r->client, &r->status, WNOHANG) != r->client) {
		kill(r->client, SIGKILL);
		while (waitpid(r->client, &r->status, 0) < 0 && errno == EINTR)
			;
	}
	r->client_done = 1;
}

void process_run_destroy(struct process_run *r)
{
	if (r->cg_live) {
		run_cgroup_destroy(&r->cg);
		r->cg_live = 0;
	}
	reap_client(r, KILL_GRACE_MS);
	close_fd(&r->pidfd);
	close_fd(&r->agent_fd);
	close_fd(&r->in_fd);
	close_fd(&r->so.fd);
	close_fd(&r->se.fd);
	free(r->so.buf);
	free(r->se.buf);
	free(r->stdin_copy);
	free(r->ring[0].buf);
	free(r->ring[1].buf);
	free(r);
}

static struct process_run *run_new(const struct process_opts *o)
{
	struct process_run *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->client = -1;
	r->pidfd = r->agent_fd = r->in_fd = -1;
	r->pid = -1;
	stream_init(&r->so, -1, o->max_output);
	stream_init(&r->se, -1, o->max_output);
	r->stdin_data = o->stdin_data;
	r->stdin_len = o->stdin_data ? o->stdin_len : 0;
	r->keep_stdin = o->keep_stdin_open;
	r->keep_orphans = o->keep_orphans;
	return r;
}

/* argv behind a shell that stops itself first: crun writes the pid file,
 * but a program that exits at once would be gone before its pid inside
 * the sandbox could be read from /proc.  malloc'd; NULL without memory. */
static const char **stop_first_argv(const char *const *argv)
{
	size_t n = 0;
	while (argv[n])
		n++;
	const char **shim = calloc(n + 5, sizeof(*shim));
	if (!shim)
		return NULL;
	shim[0] = "/bin/sh";
	shim[1] = "-c";
	shim[2] = "kill -STOP $$; exec \"$@\"";
	shim[3] = "sh";
	memcpy(shim + 4, argv, (n + 1) * sizeof(*shim));
	return shim;
}

/* The fallback without an exec agent: `crun exec` as r->client (~30 ms).
 * With o->want_pid, `pidfile` receives the path crun writes the program's
 * host pid to. */
static int start_via_runtime(struct process_table *t, struct process_run *r,
			     const struct process_opts *o, const int stdio[3], char *pidfile,
			     size_t pidfile_size, struct err *e)
{
	const char **argv = (const char **)o->argv;
	_cleanup_free_ const char **shim = NULL;
	if (o->want_pid) {
		char rnd[17];
		if (fs_random_hex(rnd, 8, e) < 0)
			return err_code(e);
		snprintf(pidfile, pidfile_size, "%s/exec-%s.pid", t->dir, rnd);
		argv = shim = stop_first_argv(o->argv);
		if (!shim)
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	struct runtime_exec x = {
	    .argv = argv,
	    .env = o->env,
	    .cwd = o->cwd ? o->cwd : "/workspace",
	    .uid = o->root ? 0 : IMAGE_USER_UID,
	    .gid = o->root ? 0 : IMAGE_USER_GID,
	    .stdin_fd = stdio[0],
	    .stdout_fd = stdio[1],
	    .stderr_fd = stdio[2],
	    .pid_file = pidfile[0] ? pidfile : NULL,
	    .cgroup = r->cg.name,
	    .pty = o->pty,
	};
	r->start_ms = clock_mono_ms();
	return t->host.be->exec_spawn(t->host.rt, t->container_id, &x, &r->client, e);
}

/* Waits for crun's pid file, learns the program's pid inside the sandbox
 * and lets the stopped program go on (start_via_runtime with want_pid). */
static int await_runtime_pid(struct process_run *r, const char *pidfile, const char *argv0,
			     int guest_pids, struct err *e)
{
	long long until = clock_mono_ms() + PID_WAIT_MS;
	pid_t host = -1;
	for (int i = 0; (host = read_pid_file(pidfile)) < 0; i++) {
		if (waitpid(r->client, &r->status, WNOHANG) == r->client) {
			r->client_done = 1;
			break;
		}
		if (clock_mono_ms() > until)
			break;
		clock_sleep_us(i < 200 ? 200 : 2000);
	}
	unlink(pidfile);
	if (guest_pids) { /* already the sandbox's pid, and running */
		r->pid = host;
		if (r->pid > 0)
			return 0;
	} else
		r->pid = host > 0 ? ns_pid(host) : -1;
	if (!guest_pids && r->pid > 0 && wait_stopped(host, until) == 0) {
		kill(host, SIGCONT);
		return 0;
	}
	r->pid = -1;
	int code = r->client_done ? exit_code_of(r->status) : -1;
	return err_set(e, ERR_INVALID, ECHILD, "could not start '%.*s' (runtime exit %d)",
		       UTF8_CUT(argv0, 200), code);
}

/* Starts the program with stdio[] as its stdin, stdout and stderr, in the
 * run's cgroup: through the agent in the sandbox's init when there is one
 * (~1 ms), crun exec otherwise. */
static int start_program(struct process_table *t, struct process_run *r,
			 const struct process_opts *o, const int *stdio, struct err *e)
{
	if (run_cgroup_create(&r->cg, t->host.cgroup_mode, "deskbox", t->container_id, e) < 0)
		return err_code(e);
	r->cg_live = 1;
	r->start_ms = clock_mono_ms();
	int a = process_agent_start(t, r, o, stdio, e);
	if (a <= 0)
		return a;
	/* A terminal without the agent: the client's stdio is the slave of
	 * a pty of ours, whose master is the run's output (and input). */
	_cleanup_fd_ int slave = -1;
	int pty_io[3];
	if (o->pty) {
		if (!t->host.be->exec_pty)
			return t->host.be->feature(RUNTIME_FEATURE_TERMINAL, e)
				   ?: err_set(e, ERR_UNAVAILABLE, ENOTSUP,
					      "terminals need the sandbox's exec agent "
					      "(deskbox-init)");
		if (process_term_host_pty(o, &r->so.fd, &slave, e) < 0)
			return err_code(e);
		pty_io[0] = pty_io[1] = pty_io[2] = slave;
		stdio = pty_io;
	}
	char pidfile[PATH_MAX] = "";
	if (start_via_runtime(t, r, o, stdio, pidfile, sizeof(pidfile), e) < 0) {
		r->client = -1;
		return err_code(e);
	}
	r->pidfd = (int)syscall(SYS_pidfd_open, r->client, 0);
	if (pidfile[0])
		return await_runtime_pid(r, pidfile, o->argv[0], t->host.be->guest_pids, e);
	return 0;
}

int process_start(struct process_table *t, const struct process_opts *o, struct process_run **out,
		  struct err *e)
{
	struct process_run *r = run_new(o);
	if (!r)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
	int rc = 0;
	/* A terminal's one fd, its master, comes from the agent. */
	if (!o->pty &&
	    (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0))
		rc = err_sys(e, ERR_INTERNAL, errno, "pipe");
	/* Our copies of the pipes' ends are set before the start, so that a
	 * failure anywhere closes them with the run. */
	r->in_fd = pin[1];
	r->so.fd = pout[0];
	r->se.fd = perr[0];
	const int stdio[3] = {pin[0], pout[1], perr[1]};
	if (rc == 0)
		rc = start_program(t, r, o, stdio, e);
	for (int k = 0; k < 3; k++)
		if (stdio[k] >= 0)
			close(stdio[k]);
	if (rc < 0) {
		process_run_destroy(r);
		return rc;
	}
	r->deadline_ms = o->timeout_ms > 0 ? r->start_ms + o->timeout_ms : 0;
	fcntl(r->in_fd, F_SETFL, O_NONBLOCK);
	fcntl(r->so.fd, F_SETFL, O_NONBLOCK);
	fcntl(r->se.fd, F_SETFL, O_NONBLOCK);
	if (r->stdin_len == 0 && !r->keep_stdin)
		close_fd(&r->in_fd);
	r->table = t;
	process_table_ref(t);
	table_add(t, r);
	*out = r;
	return 0;
}

pid_t process_pid(struct process_run *r)
{
	return r->pid;
}

/* The program exited or was killed: kill what it left, read what is still
 * in the pipes. */
static void conclude(struct process_run *r, process_output_fn fn, void *cls)
{
	pthread_mutex_lock(&r->table->mu);
	if (r->cg_live && r->keep_orphans && !r->killed && !r->timed_out)
		run_cgroup_release(&r->cg);
	if (r->cg_live)
		run_cgroup_kill(&r->cg);
	/* Under the lock: process_bg_stdin() may be about to dup it. */
	close_fd(&r->in_fd);
	pthread_mutex_unlock(&r->table->mu);
	reap_client(r, KILL_GRACE_MS);
	long long until = clock_mono_ms() + DRAIN_MS;
	while ((r->so.fd >= 0 || r->se.fd >= 0) && clock_mono_ms() < until) {
		struct pollfd p[2] = {{r->so.fd, POLLIN, 0}, {r->se.fd, POLLIN, 0}};
		poll(p, 2, 50);
		stream_read(r, &r->so, PROCESS_STDOUT, fn, cls);
		stream_read(r, &r->se, PROCESS_STDERR, fn, cls);
	}
	r->oom_kills = run_cgroup_oom_kills(&r->cg);
	r->end_ms = clock_mono_ms();
	r->done = 1;
}

int process_step(struct process_run *r, int wait_ms, process_output_fn fn, void *cls)
{
	if (r->done)
		return 1;
	long long now = clock_mono_ms();
	if (r->deadline_ms && now >= r->deadline_ms) {
		r->timed_out = 1;
		conclude(r, fn, cls);
		return 1;
	}
	int timeout = wait_ms;
	if (r->deadline_ms && r->deadline_ms - now < timeout)
		timeout = (int)(r->deadline_ms - now);
	struct pollfd p[4];
	nfds_t n = 0;
	p[n++] = (struct pollfd){r->agent_fd >= 0 ? r->agent_fd : r->pidfd, POLLIN, 0};
	p[n++] = (struct pollfd){r->so.fd, POLLIN, 0};
	p[n++] = (struct pollfd){r->se.fd, POLLIN, 0};
	int want_in = r->in_fd >= 0 && r->stdin_off < r->stdin_len;
	p[n++] = (struct pollfd){want_in ? r->in_fd : -1, POLLOUT, 0};
	/* Without a pidfd (old kernels) the exit is polled for. */
	if (r->pidfd < 0 && r->agent_fd < 0 && timeout > 20)
		timeout = 20;
	if (poll(p, n, timeout) < 0 && errno != EINTR)
		return 0;
	stream_read(r, &r->so, PROCESS_STDOUT, fn, cls);
	stream_read(r, &r->se, PROCESS_STDERR, fn, cls);
	if (want_in) {
		ssize_t w =
		    write(r->in_fd, r->stdin_data + r->stdin_off, r->stdin_len - r->stdin_off);
		if (w > 0)
			r->stdin_off += (size_t)w;
		if ((w < 0 && errno != EAGAIN && errno != EINTR) ||
		    (r->stdin_off == r->stdin_len && !r->keep_stdin))
			close_fd(&r->in_fd);
	}
	if (process_client_exited(r)) {
		conclude(r, fn, cls);
		return 1;
	}
	return 0;
}

int process_client_exited(struct process_run *r)
{
	if (r->client_done)
		return 1;
	if (r->agent_fd >= 0)
		return process_agent_poll_exit(r);
	if (r->client > 0 && waitpid(r->client, &r->status, WNOHANG) == r->client) {
		r->client_done = 1;
		return 1;
	}
	return 0;
}

static char *take_buf(struct process_stream_buf *s)
{
	char *b = s->buf ? s->buf : strdup("");
	s->buf = NULL;
	return b;
}

int process_finish(struct process_run *r, struct process_result *res, struct err *e)
{
	memset(res, 0, sizeof(*res));
	res->timed_out = r->timed_out;
	res->killed = r->killed && !r->timed_out;
	res->oom_killed = r->oom_kills > 0;
	res->exit_code = (r->timed_out || r->killed) ? -1 : exit_code_of(r->status);
	res->duration_ms = r->end_ms - r->start_ms;
	res->out_len = r->so.len;
	res->err_len = r->se.len;
	res->out_truncated = r->so.truncated;
	res->err_truncated = r->se.truncated;
	res->out = take_buf(&r->so);
	res->err = take_buf(&r->se);
	if (!res->out || !res->err) {
		process_result_release(res);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

void process_run_free(struct process_run *r)
{
	if (!r)
		return;
	struct process_table *t = r->table;
	if (t) {
		pthread_mutex_lock(&t->mu);
		if (r->in_table)
			process_table_remove_locked(t, r);
		pthread_mutex_unlock(&t->mu);
	}
	process_run_destroy(r);
	if (t)
		process_table_unref(t);
}

int process_run(struct process_table *t, const struct process_opts *o, struct process_result *res,
		struct err *e)
{
	struct process_run *r;
	int rc = process_start(t, o, &r, e);
	if (rc < 0)
		return rc;
	while (!process_step(r, 1000, NULL, NULL))
		;
	rc = process_finish(r, res, e);
	process_run_free(r);
	return rc;
}

int process_write(struct process_run *r, const void *buf, size_t len, long long deadline_ms)
{
	const char *p = buf;
	while (len) {
		if (r->in_fd < 0)
			return -1;
		ssize_t n = write(r->in_fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		long long left = deadline_ms - clock_mono_ms();
		if (left <= 0)
			return -1;
		struct pollfd pf = {r->in_fd, POLLOUT, 0};
		poll(&pf, 1, (int)(left > 1000 ? 1000 : left));
	}
	return 0;
}

void process_close_stdin(struct process_run *r)
{
	close_fd(&r->in_fd);
}

int process_read_exact(struct process_run *r, void *buf, size_t len, long long deadline_ms)
{
	char *p = buf;
	while (len) {
		if (r->so.fd < 0)
			return -1;
		ssize_t n = read(r->so.fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return -1;
		long long left = deadline_ms - clock_mono_ms();
		if (left <= 0)
			return -1;
		struct pollfd pf[2] = {{r->so.fd, POLLIN, 0},
				       {r->agent_fd >= 0 ? r->agent_fd : r->pidfd, POLLIN, 0}};
		poll(pf, 2, (int)(left > 1000 ? 1000 : left));
		if (pf[1].revents && !(pf[0].revents & POLLIN))
			return -1; /* the driver died */
	}
	return 0;
}
