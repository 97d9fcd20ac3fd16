/* Terminals (process.h): a run on a pseudo-terminal, a thread that owns it
 * and keeps the last PROCESS_TERM_REPLAY bytes of its output, and the
 * clients attached to it.
 *
 * References: the table's list holds one, the owner thread one while the
 * program runs, each attached client one (and one on the table, so the
 * table outlives its clients).  term->mu guards everything below it; it is
 * never held while taking the table's lock except in term_kill(), and the
 * owner thread never takes it while holding the table's lock. */
#include "common/text.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs.h"

#define TERM_THREAD_STACK (256 * 1024)
#define TERM_MAX_CLIENTS  8

struct process_term_client {
	struct process_term *term;
	struct process_table *table;
	uint64_t pos; /* the next output byte this client reads */
	int efd;
	struct process_term_client *next;
};

struct process_term {
	struct process_term *next; /* in the table, under table->mu */
	atomic_int refs;
	pthread_mutex_t mu;
	pthread_cond_t ended_cv;
	struct process_term_info info;
	struct process_run *run; /* NULL once the owner freed it */
	int master;		 /* our own dup of the master: input, resize */
	char ring[PROCESS_TERM_REPLAY];
	uint64_t total; /* output bytes ever; ring holds the last ones */
	struct process_term_client *clients;
	int ended;
};

static void term_unref(struct process_term *tm)
{
	if (atomic_fetch_sub(&tm->refs, 1) != 1)
		return;
	if (tm->master >= 0)
		close(tm->master);
	pthread_mutex_destroy(&tm->mu);
	pthread_cond_destroy(&tm->ended_cv);
	free(tm);
}

static void wake_clients_locked(struct process_term *tm)
{
	uint64_t one = 1;
	for (struct process_term_client *c = tm->clients; c; c = c->next)
		if (write(c->efd, &one, sizeof(one)) < 0) {
			/* only at a counter of 2^64-1 */
		}
}

static void term_output(void *cls, enum process_stream s, const char *data, size_t len)
{
	struct process_term *tm = cls;
	pthread_mutex_lock(&tm->mu);
	for (size_t i = 0; i < len;) {
		size_t at = (size_t)(tm->total % PROCESS_TERM_REPLAY);
		size_t n = PROCESS_TERM_REPLAY - at < len - i ? PROCESS_TERM_REPLAY - at : len - i;
		memcpy(tm->ring + at, data + i, n);
		tm->total += n;
		i += n;
	}
	tm->info.output_bytes = tm->total;
	wake_clients_locked(tm);
	pthread_mutex_unlock(&tm->mu);
}

static void *term_thread(void *arg)
{
	struct process_term *tm = arg;
	struct process_run *r = tm->run;
	struct process_table *t = r->table; /* process_term_create took a reference for us */
	r->so.max = SIZE_MAX;
	while (!process_step(r, 1000, term_output, tm))
		;
	struct process_result res;
	struct err e = ERR_INIT;
	int code = process_finish(r, &res, &e) == 0 ? res.exit_code : -1;
	process_result_release(&res);
	pthread_mutex_lock(&tm->mu);
	tm->run = NULL;
	pthread_mutex_unlock(&tm->mu);
	process_run_free(r);
	pthread_mutex_lock(&tm->mu);
	tm->ended = 1;
	tm->info.running = 0;
	tm->info.exit_code = code;
	wake_clients_locked(tm);
	pthread_cond_broadcast(&tm->ended_cv);
	pthread_mutex_unlock(&tm->mu);
	term_unref(tm);
	process_table_unref(t);
	return NULL;
}

int process_term_host_pty(const struct process_opts *o, int *master, int *slave, struct err *e)
{
	char name[64];
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (m < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening a pty");
	struct winsize ws = {.ws_row = o->rows, .ws_col = o->cols};
	int s = -1;
	if (grantpt(m) == 0 && unlockpt(m) == 0 && ptsname_r(m, name, sizeof(name)) == 0)
		s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0) {
		int r = err_sys(e, ERR_INTERNAL, errno, "opening a pty");
		if (s >= 0)
			close(s);
		close(m);
		return r;
	}
	*master = m;
	*slave = s;
	return 0;
}

static void command_line(const char *const *argv, char *out, size_t size)
{
	size_t k = 0;
	out[0] = '\0';
	for (size_t i = 0; argv[i] && k + 1 < size; i++)
		k += (size_t)snprintf(out + k, size - k, "%s%s", i ? " " : "", argv[i]);
}

/* Makes room for one more terminal: drops the oldest ended one when the
 * table is full.  ERR_LIMIT when all of them run. */
static int make_room(struct process_table *t, struct err *e)
{
	struct process_term *drop = NULL;
	pthread_mutex_lock(&t->mu);
	size_t n = 0;
	struct process_term **oldest_ended = NULL;
	for (struct process_term **pp = &t->terms; *pp; pp = &(*pp)->next) {
		n++;
		if ((*pp)->ended)
			oldest_ended = pp;
	}
	if (n >= PROCESS_TERM_MAX && oldest_ended) {
		drop = *oldest_ended;
		*oldest_ended = drop->next;
	}
	pthread_mutex_unlock(&t->mu);
	if (drop) {
		term_unref(drop);
		return 0;
	}
	if (n >= PROCESS_TERM_MAX)
		return err_set(e, ERR_LIMIT, EAGAIN, "%d terminals are running already; delete one",
			       PROCESS_TERM_MAX);
	return 0;
}

static struct process_term *term_new(const struct process_opts *o, struct err *e)
{
	struct process_term *tm = calloc(1, sizeof(*tm));
	if (!tm) {
		err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		return NULL;
	}
	if (fs_random_hex(tm->info.id, PROCESS_TERM_ID_LEN / 2, e) < 0) {
		free(tm);
		return NULL;
	}
	atomic_init(&tm->refs, 1);
	pthread_mutex_init(&tm->mu, NULL);
	pthread_cond_init(&tm->ended_cv, NULL);
	tm->master = -1;
	tm->info.cols = o->cols;
	tm->info.rows = o->rows;
	tm->info.root = o->root;
	tm->info.running = 1;
	tm->info.created_at_ms = clock_wall_ms();
	command_line(o->argv, tm->info.command, sizeof(tm->info.command));
	return tm;
}

static int start_thread(struct process_term *tm, struct err *e)
{
	pthread_t th;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, TERM_THREAD_STACK);
	atomic_fetch_add(&tm->refs, 1); /* the thread's */
	int prc = pthread_create(&th, &attr, term_thread, tm);
	pthread_attr_destroy(&attr);
	if (prc != 0) {
		atomic_fetch_sub(&tm->refs, 1);
		return err_set(e, ERR_INTERNAL, prc, "cannot start the terminal's thread");
	}
	return 0;
}

int process_term_create(struct process_table *t, const struct process_opts *o,
			struct process_term_info *info, struct err *e)
{
	if (make_room(t, e) < 0)
		return err_code(e);
	struct process_term *tm = term_new(o, e);
	if (!tm)
		return err_code(e);
	struct process_opts to = *o;
	to.pty = 1;
	/* Without the agent (a VM), the pid is asked for as a background
	 * run's is; the agent says it anyway. */
	to.want_pid = 1;
	to.timeout_ms = 0;
	to.max_output = SIZE_MAX;
	to.stdin_data = NULL;
	to.stdin_len = 0;
	struct process_run *r;
	if (process_start(t, &to, &r, e) < 0) {
		term_unref(tm);
		return err_code(e);
	}
	tm->run = r;
	tm->info.pid = r->pid;
	tm->master = fcntl(r->so.fd, F_DUPFD_CLOEXEC, 3);
	if (tm->master < 0)
		err_sys(e, ERR_INTERNAL, errno, "dup");
	process_table_ref(t); /* the owner thread's */
	if (tm->master < 0 || start_thread(tm, e) < 0) {
		process_table_unref(t);
		process_run_free(r);
		term_unref(tm);
		return err_code(e);
	}
	pthread_mutex_lock(&t->mu);
	tm->next = t->terms;
	t->terms = tm;
	pthread_mutex_unlock(&t->mu);
	pthread_mutex_lock(&tm->mu);
	*info = tm->info;
	pthread_mutex_unlock(&tm->mu);
	return 0;
}

/* The terminal `id` with a reference for the caller, or NULL. */
static struct process_term *term_find(struct process_table *t, const char *id)
{
	pthread_mutex_lock(&t->mu);
	struct process_term *tm = t->terms;
	while (tm && strcmp(tm->info.id, id) != 0)
		tm = tm->next;
	if (tm)
		atomic_fetch_add(&tm->refs, 1);
	pthread_mutex_unlock(&t->mu);
	return tm;
}

static int not_found(const char *id, struct err *e)
{
	return err_set(e, ERR_NOT_FOUND, ENOENT, "no terminal '%.*s'", UTF8_CUT(id, 32));
}

static void info_of(struct process_term *tm, struct process_term_info *info)
{
	pthread_mutex_lock(&tm->mu);
	*info = tm->info;
	info->attached = 0;
	for (struct process_term_client *c = tm->clients; c; c = c->next)
		info->attached++;
	pthread_mutex_unlock(&tm->mu);
}

size_t process_term_list(struct process_table *t, struct process_term_info *out, size_t max)
{
	struct process_term *held[PROCESS_TERM_MAX];
	size_t n = 0;
	pthread_mutex_lock(&t->mu);
	for (struct process_term *tm = t->terms; tm && n < max && n < PROCESS_TERM_MAX;
	     tm = tm->next) {
		atomic_fetch_add(&tm->refs, 1);
		held[n++] = tm;
	}
	pthread_mutex_unlock(&t->mu);
	for (size_t i = 0; i < n; i++) {
		info_of(held[i], &out[i]);
		term_unref(held[i]);
	}
	return n;
}

int process_term_get(struct process_table *t, const char *id, struct process_term_info *info,
		     struct err *e)
{
	struct process_term *tm = term_find(t, id);
	if (!tm)
		return not_found(id, e);
	info_of(tm, info);
	term_unref(tm);
	return 0;
}

/* Kills the program's cgroup and waits (5 s at most) for the owner to see
 * it end. */
static void term_kill(struct process_term *tm)
{
	pthread_mutex_lock(&tm->mu);
	struct process_run *r = tm->run;
	if (r) {
		pthread_mutex_lock(&r->table->mu);
		if (r->cg_live) {
			r->killed = 1;
			run_cgroup_kill(&r->cg);
		}
		pthread_mutex_unlock(&r->table->mu);
	}
	struct timespec until = clock_wall_after(5000);
	while (!tm->ended)
		if (pthread_cond_timedwait(&tm->ended_cv, &tm->mu, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&tm->mu);
}

int process_term_delete(struct process_table *t, const char *id, struct process_term_info *info,
			struct err *e)
{
	pthread_mutex_lock(&t->mu);
	struct process_term **pp = &t->terms;
	while (*pp && strcmp((*pp)->info.id, id) != 0)
		pp = &(*pp)->next;
	struct process_term *tm = *pp;
	if (tm)
		*pp = tm->next;
	pthread_mutex_unlock(&t->mu);
	if (!tm)
		return not_found(id, e);
	term_kill(tm);
	info_of(tm, info);
	term_unref(tm); /* the list's */
	return 0;
}

void process_term_drop_all(struct process_table *t)
{
	pthread_mutex_lock(&t->mu);
	struct process_term *list = t->terms;
	t->terms = NULL;
	pthread_mutex_unlock(&t->mu);
	while (list) {
		struct process_term *next = list->next;
		term_kill(list);
		term_unref(list);
		list = next;
	}
}

int process_term_attach(struct process_table *t, const char *id, struct process_term_client **out,
			struct err *e)
{
	struct process_term *tm = term_find(t, id);
	if (!tm)
		return not_found(id, e);
	struct process_term_client *c = calloc(1, sizeof(*c));
	if (!c) {
		term_unref(tm);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	c->efd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_lock(&tm->mu);
	unsigned n = 0;
	for (struct process_term_client *o = tm->clients; o; o = o->next)
		n++;
	if (c->efd < 0 || n >= TERM_MAX_CLIENTS) {
		pthread_mutex_unlock(&tm->mu);
		if (c->efd >= 0)
			close(c->efd);
		free(c);
		term_unref(tm);
		return n >= TERM_MAX_CLIENTS
			   ? err_set(e, ERR_LIMIT, EAGAIN, "terminal '%s' has %d clients attached",
				     id, TERM_MAX_CLIENTS)
			   : err_sys(e, ERR_INTERNAL, errno, "eventfd");
	}
	c->pos = tm->total > PROCESS_TERM_REPLAY ? tm->total - PROCESS_TERM_REPLAY : 0;
	c->next = tm->clients;
	tm->clients = c;
	pthread_mutex_unlock(&tm->mu);
	c->term = tm;
	c->table = t;
	process_table_ref(t);
	*out = c;
	return 0;
}

int process_term_client_fd(const struct process_term_client *c)
{
	return c->efd;
}

long process_term_read(struct process_term_client *c, char *buf, size_t max, uint64_t *lost,
		       int *exit_code)
{
	struct process_term *tm = c->term;
	uint64_t v;
	if (read(c->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing signalled; what is there is read anyway */
	}
	pthread_mutex_lock(&tm->mu);
	if (tm->total - c->pos > PROCESS_TERM_REPLAY) {
		*lost += tm->total - PROCESS_TERM_REPLAY - c->pos;
		c->pos = tm->total - PROCESS_TERM_REPLAY;
	}
	size_t n = 0;
	while (n < max && c->pos < tm->total) {
		size_t at = (size_t)(c->pos % PROCESS_TERM_REPLAY);
		size_t k = PROCESS_TERM_REPLAY - at;
		if (k > tm->total - c->pos)
			k = (size_t)(tm->total - c->pos);
		if (k > max - n)
			k = max - n;
		memcpy(buf + n, tm->ring + at, k);
		n += k;
		c->pos += k;
	}
	int done = tm->ended && c->pos == tm->total && n == 0;
	*exit_code = tm->info.exit_code;
	if (c->pos < tm->total || (tm->ended && !done)) {
		uint64_t one = 1; /* more to read, or the end to tell: stay readable */
		if (write(c->efd, &one, sizeof(one)) < 0) {
		}
	}
	pthread_mutex_unlock(&tm->mu);
	return done ? -1 : (long)n;
}

int process_term_write(struct process_term_client *c, const void *data, size_t len, int timeout_ms,
		       struct err *e)
{
	struct process_term *tm = c->term;
	const char *p = data;
	long long until = clock_mono_ms() + timeout_ms;
	while (len) {
		if (tm->ended)
			return err_set(e, ERR_CONFLICT, EIO, "the terminal has ended");
		ssize_t n = write(tm->master, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return err_sys(e, ERR_CONFLICT, errno, "writing to the terminal");
		long long left = until - clock_mono_ms();
		if (left <= 0)
			return err_set(e, ERR_TIMEOUT, ETIMEDOUT,
				       "the terminal's program reads no input");
		struct pollfd pf = {tm->master, POLLOUT, 0};
		poll(&pf, 1, (int)(left > 100 ? 100 : left));
	}
	return 0;
}

int process_term_resize(struct process_term_client *c, unsigned cols, unsigned rows, struct err *e)
{
	struct process_term *tm = c->term;
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	pthread_mutex_lock(&tm->mu);
	int r = ioctl(tm->master, TIOCSWINSZ, &ws);
	if (r == 0) {
		tm->info.cols = (unsigned short)cols;
		tm->info.rows = (unsigned short)rows;
	}
	pthread_mutex_unlock(&tm->mu);
	return r < 0 ? err_sys(e, ERR_CONFLICT, errno, "resizing the terminal") : 0;
}

void process_term_detach(struct process_term_client *c)
{
	if (!c)
		return;
	struct process_term *tm = c->term;
	pthread_mutex_lock(&tm->mu);
	for (struct process_term_client **pp = &tm->clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	pthread_mutex_unlock(&tm->mu);
	close(c->efd);
	struct process_table *t = c->table;
	free(c);
	term_unref(tm);
	process_table_unref(t);
}
