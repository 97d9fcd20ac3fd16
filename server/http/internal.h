/* Shared by the http files (http.c: requests, http_daemon.c: the daemon,
 * http_guard.c: the connection guard); not used elsewhere. */
#ifndef DESKBOX_SERVER_HTTP_INTERNAL_H
#define DESKBOX_SERVER_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "http.h"

struct http_guard;

struct http {
	struct MHD_Daemon *daemon;
	struct http_opts o;
	char *token;
	uint16_t port;
	int loopback; /* the listen address is in 127.0.0.0/8 */
	int tls;
	struct http_guard *guard;
	/* Upgraded sessions running on their own threads (TLS, see
	 * upgrade_run): http_free waits for them before stopping MHD. */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	unsigned n_sessions;
	/* An eventfd that becomes readable when http_free begins: proxied
	 * streams and upgraded pipes poll it (http_stop_fd). */
	int stop_fd;
	/* HTTP_BACKGROUND requests between their handler and their end. */
	atomic_uint background;
};

#define HTTP_PATH_MAX 4096

/* Per-request state, from the first call of the access handler to the
 * completion notification. */
struct request_ctx {
	struct http *h;
	/* The request line's target exactly as the client sent it (path and
	 * query, nothing decoded), from MHD's URI callback; with host-based
	 * routing, the rewritten path's prefix in front. */
	char *raw_uri;
	int started;		  /* the access handler saw the headers */
	int host_routed;	  /* the path came from the Host header (opts.rewrite) */
	char path[HTTP_PATH_MAX]; /* the decoded path routed on */
	const struct http_route *route;
	const struct http_mount *mount; /* the route is this mount's (NULL: the main table's) */
	char pathbuf[HTTP_PATH_MAX];
	const char *captures[HTTP_MAX_CAPTURES];
	size_t n_captures;
	char canon[128]; /* what opts.canon pointed a capture at */
	char *body;
	size_t body_len, body_cap;
	int too_large;
	/* HTTP_STREAM_BODY routes */
	struct http_body_sink sink;
	int sink_active;       /* begin() succeeded and nobody finished or aborted it */
	struct err stream_err; /* a write failure, answered once the body is in */
	/* An upgrade answered but not yet run (see upgrade_run). */
	http_upgrade_fn upgrade;
	http_release upgrade_release;
	void *upgrade_cls;
	int upgraded;  /* a 101 was queued: the connection is not HTTP any more */
	int peer;      /* it carried opts.peer_secret */
	int forwarded; /* opts.forward took it: the sink is http_proxy's */
	/* X-Request-Id: the client's when it sent a sane one, else ours; in
	 * every answer and every log line about the request. */
	char rid[HTTP_REQUEST_ID_MAX + 1];
	long long t0_ns;
	/* HTTP_BACKGROUND: the connection thread's id and its nice value
	 * before, restored when the request ends (the thread may serve a
	 * kept-alive connection's next request). */
	pid_t niced_tid; /* 0: not lowered */
	int nice0;
	int counted; /* in h->background */
};

/* http_route.c: the route for `path` (c->mount says whose), or NULL with
 * `e` filled (not found, method not allowed); and the checks of the API
 * token: "Authorization: Bearer" (http_auth_conn) or the whole value of
 * the header `name` (a front-end's own). */
const struct http_route *http_route_find(const struct http *h, const char *method, const char *path,
					 struct request_ctx *c, struct err *e);
int http_auth_header(const struct http *h, struct MHD_Connection *conn, const char *name,
		     struct err *e);

/* http.c: what MHD calls for each request. */
enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
				const char *method, const char *version, const char *upload_data,
				size_t *upload_data_size, void **con_cls);
void http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		       enum MHD_RequestTerminationCode toe);
/* MHD_OPTION_URI_LOG_CALLBACK's: the request's context, made as soon as the
 * request line is in, keeping the target as sent (http.c). */
void *http_on_uri(void *cls, const char *uri, struct MHD_Connection *conn);
/* The API token check of a request (http.c); 0 when it carries it. */
int http_auth_conn(const struct http *h, struct MHD_Connection *conn, struct err *e);

/* The connection guard: keeps clients that are slow to send a request
 * header from holding connection slots.
 *
 * Every connection is "waiting" from its start, and again after each
 * answered request (keep-alive), until the access handler has a request it
 * will serve (http_guard_request_began).  A waiting connection is closed when
 *  - it has waited `header_timeout_ms` in total: the deadline counts from
 *    when the wait began and does not move when bytes arrive, unlike
 *    MHD_OPTION_CONNECTION_TIMEOUT which a byte a second keeps alive;
 *  - `max_waiting` others are waiting and a new connection comes: the one
 *    waiting longest makes room.  Refusing the newcomer instead would let
 *    `max_waiting` slow clients lock every new client out; this way a
 *    client that sends its header at once always gets in, and a slow one
 *    is the first to go.
 * Closing is shutdown() of the socket from the guard's thread; the
 * connection's own thread then sees the end and MHD closes it.  A
 * connection serving a request is never touched: no body deadline (uploads
 * may be slow), no limit on streamed answers or upgrades.
 * 0 for either limit turns it off. */
int http_guard_new(struct http_guard **out, long long header_timeout_ms, unsigned max_waiting,
		   struct err *e);
/* Stops the guard's thread; after MHD_stop_daemon (no more callbacks). */
void http_guard_free(struct http_guard *g);
/* MHD_OPTION_NOTIFY_CONNECTION's callback; cls is the guard. */
void http_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		       enum MHD_ConnectionNotificationCode code);
/* The connection has a request to serve / finished one (keep-alive: it
 * waits for the next header again). */
void http_guard_request_began(struct http_guard *g, struct MHD_Connection *conn);
void http_guard_request_ended(struct http_guard *g, struct MHD_Connection *conn);
/* Whether a log line may go out now: under attack MHD logs one line per
 * refused connection, so lines are let through at a bounded rate.
 * *suppressed is set to how many were held back since the last one. */
int http_guard_log_allowed(struct http_guard *g, unsigned long *suppressed);

/* http_route.c: the route for `method` and `path`, its captures in c; NULL
 * and e a 404 (no route) or 405 (the path is a route's, not the method). */
const struct http_route *http_route_find(const struct http *h, const char *method, const char *path,
					 struct request_ctx *c, struct err *e);

/* http.c: what a handler (or a stream's begin()) sees of the request so
 * far. */
void http_request_view(const struct http *h, const struct request_ctx *c,
		       struct MHD_Connection *conn, const char *method, const char *url,
		       struct http_request *req);
/* http_forward.c: whether the request carries opts.peer_secret (c->peer;
 * a wrong one fills `e`), and opts.forward's decision: when it forwards,
 * the request head is sent and c->sink is the proxy's (c->forwarded). */
void http_peer_check(struct http *h, struct request_ctx *c, struct MHD_Connection *conn,
		     struct err *e);
void http_forward_begin(struct http *h, struct request_ctx *c, struct MHD_Connection *conn,
			const char *method, const char *url, struct err *e);

/* http_trace.c: the request id (the client's X-Request-Id when it is 1-64
 * characters of [A-Za-z0-9._-], else 16 random hex digits) and, once an
 * answer is queued, its metrics and debug access log line. */
void http_trace_request_id(char rid[HTTP_REQUEST_ID_MAX + 1], const char *client);
void http_trace_answer(const struct http_route *route, long long t0_ns, unsigned status);

#endif
