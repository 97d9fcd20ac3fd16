/* Background runs: a detached thread per run owns it (pumps its output into
 * two rings of the last max_output bytes, sees it end, removes its cgroup);
 * the sandbox's process table keeps the record for status, kill and logs,
 * finished ones up to BG_KEEP_FINISHED.  Log memory per sandbox is thus at
 * most (BG_MAX_RUNNING + BG_KEEP_FINISHED) * 2 * max_output. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define BG_KEEP_FINISHED 32
#define BG_MAX_RUNNING	 64
#define BG_THREAD_STACK	 (256 * 1024)

static void ring_put(struct process_ring *g, const char *data, size_t n)
{
	g->written += n;
	if (!g->buf || !g->cap)
		return;
	if (n >= g->cap) {
		memcpy(g->buf, data + n - g->cap, g->cap);
		g->head = 0;
		g->len = g->cap;
		return;
	}
	size_t first = g->cap - g->head < n ? g->cap - g->head : n;
	memcpy(g->buf + g->head, data, first);
	memcpy(g->buf, data + first, n - first);
	g->head = (g->head + n) % g->cap;
	g->len = g->len + n > g->cap ? g->cap : g->len + n;
}

static char *ring_copy(const struct process_ring *g, size_t *len)
{
	char *out = malloc(g->len + 1);
	if (!out)
		return NULL;
	size_t start = (g->head + g->cap - g->len) % (g->cap ? g->cap : 1);
	size_t first = g->cap - start < g->len ? g->cap - start : g->len;
	if (g->len) {
		memcpy(out, g->buf + start, first);
		memcpy(out + first, g->buf, g->len - first);
	}
	out[g->len] = '\0';
	*len = g->len;
	return out;
}

static void bg_output(void *cls, enum process_stream s, const char *data, size_t len)
{
	struct process_run *r = cls;
	pthread_mutex_lock(&r->table->mu);
	ring_put(&r->ring[s - 1], data, len);
	pthread_cond_broadcast(&r->table->bg_output);
	pthread_mutex_unlock(&r->table->mu);
}

/* Drops the oldest finished records past BG_KEEP_FINISHED; returns the
 * list of dropped runs to destroy outside the lock. */
static struct process_run *evict_locked(struct process_table *t)
{
	int finished = 0;
	struct process_run *dropped = NULL;
	/* Newest first: everything past the limit is older. */
	for (struct process_run **pp = &t->runs; *pp;) {
		struct process_run *r = *pp;
		if (r->bg && r->bg_finished && ++finished > BG_KEEP_FINISHED) {
			*pp = r->next;
			r->in_table = 0;
			r->next = dropped;
			dropped = r;
			continue;
		}
		pp = &r->next;
	}
	return dropped;
}

static void destroy_list(struct process_run *r)
{
	while (r) {
		struct process_run *next = r->next;
		process_run_destroy(r);
		r = next;
	}
}

static void *bg_thread(void *arg)
{
	struct process_run *r = arg;
	struct process_table *t = r->table;
	/* Output is not kept in r->so/se (the callback takes it): the cap
	 * there counts toward `truncated` only, so lift it. */
	r->so.max = r->se.max = SIZE_MAX;
	while (!process_step(r, 1000, bg_output, r))
		;
	pthread_mutex_lock(&t->mu);
	int live = r->cg_live;
	r->cg_live = 0;
	pthread_mutex_unlock(&t->mu);
	if (live)
		run_cgroup_destroy(&r->cg);
	pthread_mutex_lock(&t->mu);
	r->bg_finished = 1;
	/* The record stays in the table without a reference of its own:
	 * the table frees it, and must not be kept alive by it. */
	r->table = NULL;
	struct process_run *dropped = evict_locked(t);
	t->bg_threads--;
	pthread_cond_broadcast(&t->bg_done);
	pthread_cond_broadcast(&t->bg_output);
	pthread_mutex_unlock(&t->mu);
	destroy_list(dropped);
	process_table_unref(t); /* the run's */
	process_table_unref(t); /* the thread's */
	return NULL;
}

int process_spawn(struct process_table *t, const struct process_opts *o, pid_t *pid, struct err *e)
{
	pthread_mutex_lock(&t->mu);
	int running = 0;
	for (struct process_run *r = t->runs; r; r = r->next)
		running += r->bg && !r->bg_finished;
	pthread_mutex_unlock(&t->mu);
	if (running >= BG_MAX_RUNNING)
		return err_set(e, ERR_LIMIT, EAGAIN, "%d background processes are running already",
			       BG_MAX_RUNNING);
	struct process_opts bo = *o;
	char *stdin_copy = NULL;
	if (o->stdin_len) {
		stdin_copy = malloc(o->stdin_len);
		if (!stdin_copy)
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		memcpy(stdin_copy, o->stdin_data, o->stdin_len);
		bo.stdin_data = stdin_copy;
	}
	bo.want_pid = 1;
	struct process_run *r;
	int rc = process_start(t, &bo, &r, e);
	if (rc < 0) {
		free(stdin_copy);
		return rc;
	}
	r->stdin_copy = stdin_copy;
	r->bg = 1;
	r->started_at_ms = clock_wall_ms();
	for (int i = 0; i < 2; i++) {
		r->ring[i].cap = o->max_output;
		r->ring[i].buf = malloc(o->max_output);
	}
	/* The thread's own reference; the run keeps the one process_start
	 * took for the record in the table. */
	process_table_ref(t);
	pthread_t th;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, BG_THREAD_STACK);
	pthread_mutex_lock(&t->mu);
	t->bg_threads++;
	pthread_mutex_unlock(&t->mu);
	int prc = (!r->ring[0].buf || !r->ring[1].buf) ? ENOMEM
						       : pthread_create(&th, &attr, bg_thread, r);
	pthread_attr_destroy(&attr);
	if (prc != 0) {
		pthread_mutex_lock(&t->mu);
		t->bg_threads--;
		pthread_mutex_unlock(&t->mu);
		process_table_unref(t);
		process_run_free(r);
		return err_set(e, ERR_INTERNAL, prc, "cannot start the background run's thread");
	}
	*pid = r->pid;
	return 0;
}

static struct process_run *find_locked(struct process_table *t, pid_t pid)
{
	for (struct process_run *r = t->runs; r; r = r->next)
		if (r->bg && r->pid == pid)
			return r;
	return NULL;
}

static void info_locked(struct process_run *r, struct process_info *info)
{
	memset(info, 0, sizeof(*info));
	info->pid = r->pid;
	info->running = !r->bg_finished;
	info->timed_out = r->timed_out;
	info->killed = r->killed && !r->timed_out;
	info->oom_killed = r->oom_kills > 0;
	info->exit_code = !r->bg_finished		? 0
			  : (r->timed_out || r->killed) ? -1
			  : WIFEXITED(r->status)	? WEXITSTATUS(r->status)
			  : WIFSIGNALED(r->status)	? 128 + WTERMSIG(r->status)
							: -1;
	info->started_at_ms = r->started_at_ms;
	info->duration_ms = (r->bg_finished ? r->end_ms : clock_mono_ms()) - r->start_ms;
}

int process_bg_info(struct process_table *t, pid_t pid, struct process_info *info, struct err *e)
{
	pthread_mutex_lock(&t->mu);
	struct process_run *r = find_locked(t, pid);
	if (r)
		info_locked(r, info);
	pthread_mutex_unlock(&t->mu);
	return r ? 0 : err_set(e, ERR_NOT_FOUND, ENOENT, "no background process %d", (int)pid);
}

int process_bg_kill(struct process_table *t, pid_t pid, struct process_info *info, struct err *e)
{
	pthread_mutex_lock(&t->mu);
	struct process_run *r = find_locked(t, pid);
	if (r && r->cg_live) {
		r->killed = 1;
		run_cgroup_kill(&r->cg);
	}
	pthread_mutex_unlock(&t->mu);
	if (!r)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no background process %d", (int)pid);
	/* The owner sees its client exit within moments: wait for the
	 * record to say so, so the answer is final. */
	long long until = clock_mono_ms() + 5000;
	for (;;) {
		pthread_mutex_lock(&t->mu);
		r = find_locked(t, pid);
		int fin = !r || r->bg_finished;
		if (r)
			info_locked(r, info);
		pthread_mutex_unlock(&t->mu);
		if (!r)
			return err_set(e, ERR_NOT_FOUND, ENOENT, "no background process %d",
				       (int)pid);
		if (fin || clock_mono_ms() > until)
			return 0;
		clock_sleep_ms(2);
	}
}

int process_bg_logs(struct process_table *t, pid_t pid, struct process_logs *logs,
		    struct process_info *info, struct err *e)
{
	memset(logs, 0, sizeof(*logs));
	pthread_mutex_lock(&t->mu);
	struct process_run *r = find_locked(t, pid);
	if (r) {
		info_locked(r, info);
		logs->out = ring_copy(&r->ring[0], &logs->out_len);
		logs->err = ring_copy(&r->ring[1], &logs->err_len);
		logs->out_total = r->total[0];
		logs->err_total = r->total[1];
	}
	pthread_mutex_unlock(&t->mu);
	if (!r)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no background process %d", (int)pid);
	if (!logs->out || !logs->err) {
		process_logs_release(logs);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

/* The ring's bytes from position *pos on (malloc'd; *pos moves to the
 * end, *lost adds what fell out before it was read). */
static char *ring_since(const struct process_ring *g, uint64_t *pos, size_t *len, uint64_t *lost)
{
	uint64_t oldest = g->written - g->len;
	if (*pos > g->written)
		*pos = g->written;
	if (*pos < oldest) {
		*lost += oldest - *pos;
		*pos = oldest;
	}
	size_t want = (size_t)(g->written - *pos), all;
	char *held = ring_copy(g, &all);
	if (!held)
		return NULL;
	memmove(held, held + all - want, want);
	held[want] = '\0';
	*len = want;
	*pos = g->written;
	return held;
}

int process_bg_follow(struct process_table *t, pid_t pid, uint64_t pos[2], int wait_ms,
		      struct process_logs *logs, struct process_info *info, struct err *e)
{
	memset(logs, 0, sizeof(*logs));
	struct timespec until = clock_wall_after(wait_ms);
	pthread_mutex_lock(&t->mu);
	struct process_run *r;
	for (;;) {
		r = find_locked(t, pid);
		if (!r)
			break;
		for (int i = 0; i < 2; i++)
			if (pos[i] > r->ring[i].written)
				pos[i] = r->ring[i].written;
		if (r->bg_finished || pos[0] < r->ring[0].written ||
		    pos[1] < r->ring[1].written || wait_ms <= 0)
			break;
		if (pthread_cond_timedwait(&t->bg_output, &t->mu, &until) == ETIMEDOUT)
			wait_ms = 0;
	}
	if (r) {
		info_locked(r, info);
		logs->out = ring_since(&r->ring[0], &pos[0], &logs->out_len, &logs->out_total);
		logs->err = ring_since(&r->ring[1], &pos[1], &logs->err_len, &logs->err_total);
	}
	pthread_mutex_unlock(&t->mu);
	if (!r)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no background process %d", (int)pid);
	if (!logs->out || !logs->err) {
		process_logs_release(logs);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

void process_logs_release(struct process_logs *l)
{
	free(l->out);
	free(l->err);
	l->out = l->err = NULL;
}

/* Writes to a dup of the run's stdin made under the lock, so that the
 * owner closing its own fd at the run's end never closes ours under us. */
static int write_until(int fd, const char *p, size_t len, long long until, size_t *written)
{
	*written = 0;
	while (*written < len) {
		ssize_t n = write(fd, p + *written, len - *written);
		if (n > 0) {
			*written += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EPIPE)
			return -EPIPE;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		long long left = until - clock_mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pf = {fd, POLLOUT, 0};
		poll(&pf, 1, (int)(left > 1000 ? 1000 : left));
	}
	return 0;
}

int process_bg_stdin(struct process_table *t, pid_t pid, const void *data, size_t len,
		     int close_after, int timeout_ms, size_t *written, struct err *e)
{
	*written = 0;
	pthread_mutex_lock(&t->mu);
	struct process_run *r = find_locked(t, pid);
	int fd = -1, found = r != NULL, open_in = r && !r->bg_finished && r->in_fd >= 0;
	if (open_in && len)
		fd = fcntl(r->in_fd, F_DUPFD_CLOEXEC, 3);
	if (open_in && close_after && !len) {
		close(r->in_fd);
		r->in_fd = -1;
	}
	pthread_mutex_unlock(&t->mu);
	if (!found)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no background process %d", (int)pid);
	if (!open_in)
		return err_set(e, ERR_CONFLICT, EPIPE,
			       "process %d has no open stdin (started without \"stdin\": true, "
			       "closed, or ended)",
			       (int)pid);
	if (!len)
		return 0;
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "dup");
	int rc = write_until(fd, data, len, clock_mono_ms() + timeout_ms, written);
	close(fd);
	if (rc == -EPIPE)
		return err_set(e, ERR_CONFLICT, EPIPE, "process %d closed its stdin", (int)pid);
	if (rc == -ETIMEDOUT)
		return err_set(e, ERR_TIMEOUT, ETIMEDOUT,
			       "process %d took %zu of %zu bytes in %d ms", (int)pid, *written, len,
			       timeout_ms);
	if (rc < 0)
		return err_sys(e, ERR_INTERNAL, -rc, "writing to the stdin of process %d",
			       (int)pid);
	if (close_after) {
		size_t none;
		return process_bg_stdin(t, pid, NULL, 0, 1, 0, &none, e);
	}
	return 0;
}
