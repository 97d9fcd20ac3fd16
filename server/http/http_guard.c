/* The connection guard (see internal.h): the connections waiting for a
 * request header in a list, oldest first, and a thread that closes the
 * oldest once its deadline passed.  A wait always begins "now", so the list
 * stays sorted by appending: the head is the only deadline to watch and the
 * one to drop when the list is full. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"
#include "common/clock.h"
#include "common/log.h"

/* A summary of what the guard closed goes to the log at most this often;
 * an attack would otherwise write a line per connection. */
#define GUARD_SUMMARY_MS 10000
/* MHD's own messages (one per refused connection): at most this many per
 * window. */
#define GUARD_LOG_LINES 10

enum guard_state {
	GUARD_WAITING, /* in the list */
	GUARD_SERVING, /* the access handler has its request */
	GUARD_CLOSING, /* shut down by the guard, MHD not yet done with it */
};

struct guard_conn {
	int fd;
	enum guard_state state;
	long long since_ms; /* when the wait began (monotonic) */
	struct guard_conn *prev, *next;
};

struct http_guard {
	pthread_mutex_t mu;
	pthread_cond_t cond; /* measures CLOCK_MONOTONIC */
	pthread_t thread;
	int stop;
	long long timeout_ms;
	unsigned max_waiting;
	struct guard_conn *head, *tail;
	unsigned n_waiting;
	/* Closed since the last summary line. */
	unsigned long n_expired, n_evicted;
	long long summary_ms;
	/* MHD's messages in the current window. */
	long long log_window_ms;
	unsigned log_lines;
	unsigned long log_suppressed;
};

static void list_remove(struct http_guard *g, struct guard_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		g->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		g->tail = c->prev;
	c->prev = c->next = NULL;
	g->n_waiting--;
}

static void list_append(struct http_guard *g, struct guard_conn *c)
{
	c->since_ms = clock_mono_ms();
	c->state = GUARD_WAITING;
	c->next = NULL;
	c->prev = g->tail;
	if (g->tail)
		g->tail->next = c;
	else
		g->head = c;
	g->tail = c;
	g->n_waiting++;
}

/* Closes a waiting connection.  Called with g->mu held: MHD closes the fd
 * only after the CLOSED notification, which takes g->mu, so the fd cannot
 * have been reused for another file here. */
static void guard_close(struct http_guard *g, struct guard_conn *c)
{
	list_remove(g, c);
	c->state = GUARD_CLOSING;
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
}

static void guard_summary(struct http_guard *g, long long now)
{
	if (!g->n_expired && !g->n_evicted)
		return;
	if (now - g->summary_ms < GUARD_SUMMARY_MS)
		return;
	log_msg(LOG_LEVEL_WARN,
		"http: closed %lu connections without a request header after %lld ms, "
		"%lu to make room for new ones (%u waiting)",
		g->n_expired, g->timeout_ms, g->n_evicted, g->n_waiting);
	g->n_expired = g->n_evicted = 0;
	g->summary_ms = now;
}

static void *guard_run(void *arg)
{
	struct http_guard *g = arg;
	pthread_mutex_lock(&g->mu);
	while (!g->stop) {
		long long now = clock_mono_ms();
		while (g->timeout_ms && g->head && now - g->head->since_ms >= g->timeout_ms) {
			guard_close(g, g->head);
			g->n_expired++;
		}
		guard_summary(g, now);
		long long wait = GUARD_SUMMARY_MS;
		if (g->timeout_ms && g->head && g->head->since_ms + g->timeout_ms - now < wait)
			wait = g->head->since_ms + g->timeout_ms - now;
		uint64_t at = clock_mono_ns() + (uint64_t)(wait > 0 ? wait : 1) * 1000000u;
		struct timespec ts = {.tv_sec = (time_t)(at / 1000000000u),
				      .tv_nsec = (long)(at % 1000000000u)};
		pthread_cond_timedwait(&g->cond, &g->mu, &ts);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

int http_guard_new(struct http_guard **out, long long header_timeout_ms, unsigned max_waiting,
		   struct err *e)
{
	struct http_guard *g = calloc(1, sizeof(*g));
	if (!g)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	g->timeout_ms = header_timeout_ms > 0 ? header_timeout_ms : 0;
	g->max_waiting = max_waiting;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&g->mu, NULL);
	int r = pthread_create(&g->thread, NULL, guard_run, g);
	if (r != 0) {
		pthread_cond_destroy(&g->cond);
		pthread_mutex_destroy(&g->mu);
		free(g);
		return err_set(e, ERR_INTERNAL, r, "cannot start the connection guard's thread");
	}
	*out = g;
	return 0;
}

void http_guard_free(struct http_guard *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->stop = 1;
	pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->mu);
	pthread_join(g->thread, NULL);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->mu);
	free(g);
}

/* A new connection (on MHD's accepting thread): it waits, and the longest
 * waiting one goes when the list is full. */
static void guard_started(struct http_guard *g, struct MHD_Connection *conn, void **socket_context)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	int fd = ci ? ci->connect_fd : -1;
	struct guard_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		/* Untracked, it could wait forever: better closed. */
		if (fd >= 0)
			shutdown(fd, SHUT_RDWR);
		return;
	}
	c->fd = fd;
	pthread_mutex_lock(&g->mu);
	if (g->max_waiting && g->n_waiting >= g->max_waiting && g->head) {
		guard_close(g, g->head);
		g->n_evicted++;
	}
	int was_empty = !g->head;
	list_append(g, c);
	if (was_empty)
		pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->mu);
	*socket_context = c;
}

void http_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		       enum MHD_ConnectionNotificationCode code)
{
	struct http_guard *g = cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		guard_started(g, conn, socket_context);
		return;
	}
	struct guard_conn *c = *socket_context;
	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	if (c->state == GUARD_WAITING)
		list_remove(g, c);
	pthread_mutex_unlock(&g->mu);
	free(c);
	*socket_context = NULL;
}

static struct guard_conn *guard_conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

void http_guard_request_began(struct http_guard *g, struct MHD_Connection *conn)
{
	struct guard_conn *c = guard_conn_of(conn);
	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	if (c->state == GUARD_WAITING) {
		list_remove(g, c);
		c->state = GUARD_SERVING;
	}
	pthread_mutex_unlock(&g->mu);
}

void http_guard_request_ended(struct http_guard *g, struct MHD_Connection *conn)
{
	struct guard_conn *c = guard_conn_of(conn);
	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	if (c->state == GUARD_SERVING) {
		int was_empty = !g->head;
		list_append(g, c);
		if (was_empty)
			pthread_cond_signal(&g->cond);
	}
	pthread_mutex_unlock(&g->mu);
}

int http_guard_log_allowed(struct http_guard *g, unsigned long *suppressed)
{
	long long now = clock_mono_ms();
	int ok;
	pthread_mutex_lock(&g->mu);
	if (now - g->log_window_ms >= GUARD_SUMMARY_MS) {
		g->log_window_ms = now;
		g->log_lines = 0;
	}
	ok = g->log_lines < GUARD_LOG_LINES;
	if (ok) {
		g->log_lines++;
		*suppressed = g->log_suppressed;
		g->log_suppressed = 0;
	} else {
		g->log_suppressed++;
	}
	pthread_mutex_unlock(&g->mu);
	return ok;
}
