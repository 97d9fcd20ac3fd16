/* Requests: routes, auth, bodies, answers, upgrades.  Starting and
 * stopping the daemon is http_daemon.c's, the connection guard
 * http_guard.c's. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"
#include "common/cleanup.h"
#include "common/text.h"
#include "common/log.h"
#include "common/clock.h"

/* A 401's message says how to send the token and where it is. */
static int unauthorized(const struct http *h, struct err *e, const char *why)
{
	const char *hint = h->o.token_hint;
	return err_set(
	    e, ERR_UNAUTHORIZED, 0,
	    "%s: send 'Authorization: Bearer TOKEN' (deskbox's CLI and SDKs read it from "
	    "DESKBOX_TOKEN)%s%s",
	    why, hint ? "; this server's token is " : "", hint ? hint : "");
}

int http_auth_conn(const struct http *h, struct MHD_Connection *conn, struct err *e)
{
	const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	if (!auth)
		return unauthorized(h, e, "missing API token");
	if (strncasecmp(auth, "Bearer ", 7) != 0)
		return unauthorized(h, e, "the Authorization scheme must be 'Bearer'");
	const char *tok = auth + 7;
	while (*tok == ' ')
		tok++;
	if (!text_equal_secret(tok, h->token))
		return unauthorized(h, e, "wrong API token");
	return 0;
}

static void response_release(struct http_response *res)
{
	free(res->data);
	res->data = NULL;
	if (res->shared && res->shared_release)
		res->shared_release(res->shared_cls);
	res->shared = NULL;
	res->shared_release = NULL;
	res->shared_cls = NULL;
	if (res->reader && res->release)
		res->release(res->reader_cls);
	res->reader = NULL;
	res->release = NULL;
	res->reader_cls = NULL;
	for (size_t i = 0; i < res->n_headers; i++) {
		free(res->headers[i].value);
		free(res->headers[i].owned_name);
	}
	res->n_headers = 0;
	if (res->upgrade && res->upgrade_release)
		res->upgrade_release(res->upgrade_cls);
	res->upgrade = NULL;
	res->upgrade_release = NULL;
	res->upgrade_cls = NULL;
}

int http_add_header(struct http_response *res, const char *name, const char *value, struct err *e)
{
	if (res->n_headers >= HTTP_MAX_HEADERS)
		return err_set(e, ERR_INTERNAL, 0, "too many response headers");
	char *v = strdup(value);
	if (!v)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	res->headers[res->n_headers].name = name;
	res->headers[res->n_headers].value = v;
	res->headers[res->n_headers].owned_name = NULL;
	res->n_headers++;
	return 0;
}

int http_add_header_copy(struct http_response *res, const char *name, const char *value,
			 struct err *e)
{
	char *n = strdup(name);
	if (!n)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r = http_add_header(res, n, value, e);
	if (r < 0) {
		free(n);
		return r;
	}
	res->headers[res->n_headers - 1].owned_name = n;
	return 0;
}

void http_reply_data(struct http_response *res, int status, const char *content_type, void *data,
		     size_t len)
{
	free(res->data);
	if (res->shared && res->shared_release)
		res->shared_release(res->shared_cls);
	res->shared = NULL;
	res->shared_release = NULL;
	res->status = status;
	res->content_type = content_type;
	res->data = data;
	res->len = len;
}

void http_reply_shared(struct http_response *res, int status, const char *content_type,
		       const void *data, size_t len, http_release release, void *cls)
{
	http_reply_data(res, status, content_type, NULL, 0);
	res->shared = data;
	res->len = len;
	res->shared_release = release;
	res->shared_cls = cls;
}

void http_reply_stream(struct http_response *res, int status, const char *content_type,
		       uint64_t size, http_reader reader, void *cls, http_release release)
{
	free(res->data);
	res->data = NULL;
	if (res->reader && res->release)
		res->release(res->reader_cls);
	res->status = status;
	res->content_type = content_type;
	res->reader = reader;
	res->release = release;
	res->reader_cls = cls;
	res->stream_size = size;
}

void http_reply_upgrade(struct http_response *res, http_upgrade_fn fn, void *cls,
			http_release release)
{
	http_reply_data(res, 101, NULL, NULL, 0);
	if (res->upgrade && res->upgrade_release)
		res->upgrade_release(res->upgrade_cls);
	res->upgrade = fn;
	res->upgrade_release = release;
	res->upgrade_cls = cls;
}

void http_reply_empty(struct http_response *res, int status)
{
	http_reply_data(res, status, NULL, NULL, 0);
}

int http_reply_json(struct http_response *res, int status, cJSON *json, struct err *e)
{
	char *s = json ? cJSON_PrintUnformatted(json) : NULL;
	cJSON_Delete(json);
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "cannot serialise response");
	http_reply_data(res, status, "application/json", s, strlen(s));
	return 0;
}

/* The one place an error kind becomes an HTTP status (error.h).  ERR_NONE
 * is 500: a failure without a recorded error is a bug. */
int http_error_status(enum err_kind kind)
{
	switch (kind) {
	case ERR_INVALID:
	case ERR_UNKNOWN_FIELD:
		return 400;
	case ERR_UNAUTHORIZED:
		return 401;
	case ERR_FORBIDDEN:
		return 403;
	case ERR_NOT_FOUND:
		return 404;
	case ERR_METHOD:
		return 405;
	case ERR_CONFLICT:
	case ERR_NOT_RUNNING:
	case ERR_PAUSED:
	case ERR_NAME_TAKEN:
	case ERR_ROOT_DISABLED:
		return 409;
	case ERR_TAKEN_OVER:
		return 423; /* Locked (RFC 4918): someone else holds it */
	case ERR_TOO_LARGE:
		return 413;
	case ERR_UNSUPPORTED:
		return 415;
	case ERR_RANGE:
		return 416;
	case ERR_LIMIT:
		return 429;
	case ERR_NOT_IMPLEMENTED:
		return 501;
	case ERR_BAD_GATEWAY:
		return 502;
	case ERR_UNAVAILABLE:
	case ERR_NO_QUORUM:
		return 503;
	case ERR_TIMEOUT:
		return 504;
	case ERR_NO_SPACE:
		return 507;
	case ERR_NONE:
	case ERR_INTERNAL:
		break;
	}
	return 500;
}

/* Turns `res` into the error answer for `e`: the body and status are
 * replaced, headers the handler added stay (416's Content-Range).  A
 * route's or mount's writer `w` writes the body in its engine's shape;
 * else, under a path that opts.error_body claims, that one's. */
static void reply_error(const struct http *h, const char *path, struct http_response *res,
			const struct err *e, http_error_writer w)
{
	if (res->reader && res->release)
		res->release(res->reader_cls);
	res->reader = NULL;
	res->release = NULL;
	res->reader_cls = NULL;
	if (res->upgrade && res->upgrade_release)
		res->upgrade_release(res->upgrade_cls);
	res->upgrade = NULL;
	res->upgrade_release = NULL;
	res->upgrade_cls = NULL;
	if (w) {
		free(res->data);
		res->data = NULL;
		res->len = 0;
		res->status = http_error_status(e->kind);
		w(res, e);
		return;
	}
	if (h->o.error_body && path && h->o.error_body(h->o.app, path, e, res) == 1)
		return;
	cJSON *root = cJSON_CreateObject();
	cJSON *er = cJSON_AddObjectToObject(root, "error");
	cJSON_AddStringToObject(er, "code", err_kind_name(e->kind));
	cJSON_AddStringToObject(er, "message", e->msg[0] ? e->msg : "internal error");
	if (http_reply_json(res, http_error_status(e->kind), root, NULL) < 0) {
		static const char fallback[] =
		    "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
		char *copy = strdup(fallback);
		http_reply_data(res, 500, "application/json", copy, copy ? strlen(copy) : 0);
	}
}

/* What MHD's content reader calls: our reader and release behind MHD's
 * function types. */
struct stream_adapter {
	http_reader reader;
	http_release release;
	void *cls;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream_adapter *a = cls;
	long n = a->reader(a->cls, pos, buf, max);
	if (n == HTTP_STREAM_END)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct stream_adapter *a = cls;
	if (a->release)
		a->release(a->cls);
	free(a);
}

static enum MHD_Result queue_owned(struct MHD_Connection *conn, struct request_ctx *c,
				   struct http_response *res)
{
	struct MHD_Response *r;
	if (res->reader) {
		struct stream_adapter *a = malloc(sizeof(*a));
		r = NULL;
		if (a) {
			*a = (struct stream_adapter){res->reader, res->release, res->reader_cls};
			r = MHD_create_response_from_callback(
			    res->stream_size == HTTP_SIZE_UNKNOWN ? MHD_SIZE_UNKNOWN
								  : res->stream_size,
			    64 * 1024, stream_read, a, stream_free);
			if (r) {
				/* MHD owns it now and calls stream_free. */
				res->reader = NULL;
				res->release = NULL;
				res->reader_cls = NULL;
			} else {
				free(a);
			}
		}
	} else if (res->data) {
		r = MHD_create_response_from_buffer(res->len, res->data, MHD_RESPMEM_MUST_FREE);
		if (r)
			res->data = NULL;
	} else if (res->shared) {
		/* MHD sends from it and calls the release once done. */
		r = MHD_create_response_from_buffer_with_free_callback_cls(
		    res->len, (void *)(uintptr_t)res->shared, res->shared_release, res->shared_cls);
		if (r)
			res->shared = NULL;
	} else {
		r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	}
	if (!r) {
		response_release(res);
		return MHD_NO;
	}
	if (res->content_type)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, res->content_type);
	for (size_t i = 0; i < res->n_headers; i++)
		MHD_add_response_header(r, res->headers[i].name, res->headers[i].value);
	if (c) {
		MHD_add_response_header(r, "X-Request-Id", c->rid);
		http_trace_answer(c->route, c->t0_ns, (unsigned)res->status);
	}
	response_release(res);
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned)res->status, r);
	MHD_destroy_response(r);
	return ret;
}

/* An upgraded connection's session and what it needs after MHD's callback
 * returned. */
struct upgrade_session {
	struct http *h;
	http_upgrade_fn fn;
	http_release release;
	void *cls;
	MHD_socket sock;
	struct MHD_UpgradeResponseHandle *urh;
	size_t extra_len;
	char extra[]; /* MHD's buffer lives only as long as its callback */
};

static void upgrade_session_run(struct upgrade_session *s)
{
	if (s->fn)
		s->fn(s->cls, s->sock, s->extra, s->extra_len);
	if (s->release)
		s->release(s->cls);
	MHD_upgrade_action(s->urh, MHD_UPGRADE_ACTION_CLOSE);
}

static void *upgrade_thread(void *arg)
{
	struct upgrade_session *s = arg;
	struct http *h = s->h;
	upgrade_session_run(s);
	free(s);
	pthread_mutex_lock(&h->mu);
	h->n_sessions--;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

/* Runs the session on its own thread: with TLS, `sock` is one end of a
 * socket pair and the connection's thread must go back to MHD, which
 * moves the bytes between it and the TLS connection.  1 when started. */
static int upgrade_spawn(struct upgrade_session *s)
{
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&s->h->mu);
	int r = pthread_create(&t, &attr, upgrade_thread, s);
	if (r == 0)
		s->h->n_sessions++;
	pthread_mutex_unlock(&s->h->mu);
	pthread_attr_destroy(&attr);
	if (r != 0)
		log_msg(LOG_LEVEL_ERROR, "http: cannot start an upgraded session: %s", strerror(r));
	return r == 0;
}

/* MHD calls this on the connection's thread once the 101 went out (before
 * it reports the request completed, so `c` is still alive).  Without TLS
 * the session runs right here, blocking that thread, which
 * thread-per-connection mode allows. */
static void upgrade_run(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra,
			size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct request_ctx *c = cls;
	struct upgrade_session *s = malloc(sizeof(*s) + extra_len + 1);
	if (!s) {
		if (c->upgrade_release)
			c->upgrade_release(c->upgrade_cls);
		c->upgrade_release = NULL;
		c->upgrade = NULL;
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return;
	}
	*s = (struct upgrade_session){c->h, c->upgrade, c->upgrade_release, c->upgrade_cls,
				      sock, urh,	extra_len};
	if (extra_len)
		memcpy(s->extra, extra, extra_len);
	s->extra[extra_len] = '\0';
	c->upgrade = NULL;
	c->upgrade_release = NULL;
	c->upgrade_cls = NULL;
	if (c->h->tls && upgrade_spawn(s))
		return;
	if (c->h->tls) /* no thread: the session cannot run */
		s->fn = NULL;
	upgrade_session_run(s);
	free(s);
}

/* Queues the 101 of an upgrade; the upgrade's callback moves into `c`. */
static enum MHD_Result queue_upgrade(struct MHD_Connection *conn, struct request_ctx *c,
				     struct http_response *res)
{
	struct MHD_Response *r = MHD_create_response_for_upgrade(upgrade_run, c);
	if (!r) {
		response_release(res);
		return MHD_NO;
	}
	for (size_t i = 0; i < res->n_headers; i++)
		MHD_add_response_header(r, res->headers[i].name, res->headers[i].value);
	c->upgrade = res->upgrade;
	c->upgrade_release = res->upgrade_release;
	c->upgrade_cls = res->upgrade_cls;
	c->upgraded = 1;
	res->upgrade = NULL;
	res->upgrade_release = NULL;
	res->upgrade_cls = NULL;
	response_release(res);
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_SWITCHING_PROTOCOLS, r);
	MHD_destroy_response(r);
	return ret;
}

/* Answers `e`; `res` (may be NULL) holds the headers to keep. */
static enum MHD_Result queue_error(struct MHD_Connection *conn, struct request_ctx *c,
				   struct http_response *res, const struct err *e)
{
	struct http_response none = {0};
	if (!res)
		res = &none;
	http_error_writer w = c->route && c->route->error ? c->route->error
			      : c->mount		  ? c->mount->error
							  : NULL;
	reply_error(c->h, c->path, res, e, w);
	if (e->kind == ERR_UNAUTHORIZED && !w)
		http_add_header(res, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer", NULL);
	return queue_owned(conn, c, res);
}

static int body_append(struct http *h, struct request_ctx *c, const char *data, size_t len)
{
	if (c->too_large || len > h->o.max_body - c->body_len) {
		c->too_large = 1;
		return 0;
	}
	if (c->body_len + len + 1 > c->body_cap) {
		size_t cap = c->body_cap ? c->body_cap : 4096;
		while (cap < c->body_len + len + 1)
			cap *= 2;
		char *nb = realloc(c->body, cap);
		if (!nb)
			return -ENOMEM;
		c->body = nb;
		c->body_cap = cap;
	}
	memcpy(c->body + c->body_len, data, len);
	c->body_len += len;
	c->body[c->body_len] = '\0';
	return 0;
}

/* What a handler (or a stream's begin()) sees of the request so far. */
void http_request_view(const struct http *h, const struct request_ctx *c,
		       struct MHD_Connection *conn, const char *method, const char *url,
		       struct http_request *req)
{
	*req = (struct http_request){
	    .conn = conn,
	    .method = method,
	    .path = url,
	    .n_captures = c->n_captures,
	    .body = c->body ? c->body : "",
	    .body_len = c->body_len,
	    .app = c->mount ? c->mount->app : h->o.app,
	    .raw_uri = c->raw_uri ? c->raw_uri : url,
	    .host_routed = c->host_routed,
	    .from_peer = c->peer,
	    .layer = (void *)h,
	};
	memcpy(req->captures, c->captures, sizeof(req->captures));
}

/* Counts the Content-Length headers, notes whether they all agree and
 * whether a Transfer-Encoding came too (request smuggling shapes). */
struct framing {
	unsigned n_length;
	const char *length;
	int lengths_differ, has_te;
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
				      const char *value)
{
	struct framing *f = cls;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		if (f->n_length++ && strcmp(f->length, value ? value : "") != 0)
			f->lengths_differ = 1;
		f->length = value ? value : "";
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		f->has_te = 1;
	}
	return MHD_YES;
}

/* Refuses a request whose body length two parties could read differently:
 * Content-Length headers that disagree, or one beside Transfer-Encoding
 * (RFC 9112 6.3): a proxy in front and deskboxd could then split the
 * stream into different requests. */
static int check_framing(struct MHD_Connection *conn, struct err *e)
{
	struct framing f = {0};
	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_header, &f);
	if (f.lengths_differ)
		return err_set(e, ERR_INVALID, EINVAL, "conflicting Content-Length headers");
	if (f.n_length && f.has_te)
		return err_set(e, ERR_INVALID, EINVAL,
			       "Content-Length together with Transfer-Encoding");
	return 0;
}

/* Whether the request announces a body. */
static int has_body(struct MHD_Connection *conn)
{
	struct framing f = {0};
	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_header, &f);
	return f.has_te || (f.n_length && strcmp(f.length, "0") != 0);
}

/* The path to route: with opts.rewrite, a Host header it knows (a port of
 * a sandbox by name) turns into a path under the API, and the raw target
 * gets the same prefix.  Copied into c->path; NULL (e filled) when too
 * long. */
static const char *routed_path(struct http *h, struct request_ctx *c, struct MHD_Connection *conn,
			       const char *url, struct err *e)
{
	char prefix[256];
	const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
	if (h->o.rewrite && host && h->o.rewrite(h->o.app, host, prefix, sizeof(prefix)) == 1) {
		const char *raw = c->raw_uri ? c->raw_uri : url;
		size_t pl = strlen(prefix), rl = strlen(raw);
		char *nraw = malloc(pl + rl + 1);
		if (!nraw || snprintf(c->path, sizeof(c->path), "%s%s", prefix, url) >=
				 (int)sizeof(c->path)) {
			free(nraw);
			err_set(e, ERR_INVALID, 0, "request path too long");
			return NULL;
		}
		memcpy(nraw, prefix, pl);
		memcpy(nraw + pl, raw, rl + 1);
		free(c->raw_uri);
		c->raw_uri = nraw;
		c->host_routed = 1;
		return c->path;
	}
	if (strlen(url) >= sizeof(c->path)) {
		err_set(e, ERR_NOT_FOUND, 0, "no route for a path this long");
		return NULL;
	}
	strcpy(c->path, url);
	return c->path;
}

/* The first call for a request, with the headers in and no body byte read:
 * route, framing, auth, and the stream's begin() or the body size cap. */
static enum MHD_Result on_headers(struct http *h, struct request_ctx *c,
				  struct MHD_Connection *conn, const char *method, const char *url)
{
	struct err e = ERR_INIT;
	url = routed_path(h, c, conn, url, &e);
	c->route = url ? http_route_find(h, method, url, c, &e) : NULL;
	if (c->route && h->o.canon && !c->mount)
		h->o.canon(h->o.app, c->route->pattern, c->captures, c->n_captures, c->canon,
			   sizeof(c->canon));
	if (c->route)
		check_framing(conn, &e);
	if (e.kind == ERR_NONE)
		http_peer_check(h, c, conn, &e);
	if (e.kind == ERR_NONE && !(c->route->flags & HTTP_NO_AUTH) && !c->peer) {
		if (c->route->token_header)
			http_auth_header(h, conn, c->route->token_header, &e);
		else
			http_auth_conn(h, conn, &e);
	}
	if (e.kind == ERR_NONE && h->o.forward && !c->mount)
		http_forward_begin(h, c, conn, method, url, &e);
	if (e.kind == ERR_NONE && c->forwarded) {
		/* the request streams to the other server */
	} else if (e.kind == ERR_NONE && (c->route->flags & HTTP_STREAM_BODY)) {
		struct http_request req;
		http_request_view(h, c, conn, method, url, &req);
		if (c->route->begin(&req, &c->sink, &e) == 0)
			c->sink_active = 1;
		else if (e.kind == ERR_NONE)
			err_set(&e, ERR_INTERNAL, 0, "stream setup failed without a reason");
	} else if (e.kind == ERR_NONE) {
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > h->o.max_body)
			err_set(&e, ERR_TOO_LARGE, 0, "request body over %zu bytes", h->o.max_body);
	}
	if (e.kind != ERR_NONE)
		return queue_error(conn, c, NULL, &e);
	/* A request without a token (HTTP_NO_AUTH) stays under the header
	 * deadline while it sends a body: strangers may not hold a
	 * connection open with a slow one. */
	if (!(c->route->flags & HTTP_NO_AUTH) || !has_body(conn))
		http_guard_request_began(h->guard, conn);
	return MHD_YES;
}

/* A piece of the body: to the stream's sink, or appended (capped). */
static enum MHD_Result on_body(struct http *h, struct request_ctx *c, const char *data, size_t len)
{
	if ((c->route->flags & HTTP_STREAM_BODY) || c->forwarded) {
		/* After a failed write the rest is read and dropped, and the
		 * error answered when the body is in. */
		if (c->sink_active && c->sink.write(c->sink.cls, data, len, &c->stream_err) < 0) {
			if (c->stream_err.kind == ERR_NONE)
				err_set(&c->stream_err, ERR_INTERNAL, 0, "write failed");
			c->sink.abort(c->sink.cls);
			c->sink_active = 0;
		}
	} else if (body_append(h, c, data, len) < 0) {
		return MHD_NO;
	}
	return MHD_YES;
}

/* Lowers this thread's CPU priority for an HTTP_BACKGROUND request (the
 * threads it starts inherit it).  Best effort. */
static void background_enter(struct request_ctx *c)
{
	pid_t tid = gettid();
	errno = 0;
	int old = getpriority(PRIO_PROCESS, (id_t)tid);
	if ((old == -1 && errno) || old >= HTTP_BACKGROUND_NICE)
		return;
	if (setpriority(PRIO_PROCESS, (id_t)tid, HTTP_BACKGROUND_NICE) == 0) {
		c->niced_tid = tid;
		c->nice0 = old;
	}
}

/* The body is in: run the handler and queue its answer. */
static enum MHD_Result on_complete(struct http *h, struct request_ctx *c,
				   struct MHD_Connection *conn, const char *method, const char *url)
{
	struct err e = ERR_INIT;
	if (((c->route->flags & HTTP_STREAM_BODY) || c->forwarded) && !c->sink_active)
		return queue_error(conn, c, NULL, &c->stream_err);
	if (c->too_large) {
		err_set(&e, ERR_TOO_LARGE, 0, "request body over %zu bytes", h->o.max_body);
		return queue_error(conn, c, NULL, &e);
	}
	http_guard_request_began(h->guard, conn);
	struct http_request req;
	http_request_view(h, c, conn, method, url, &req);
	req.stream = c->sink_active ? c->sink.cls : NULL;
	struct http_response res = {.status = 200};
	if ((c->route->flags & HTTP_BACKGROUND) && !c->forwarded) {
		c->counted = 1;
		if (atomic_fetch_add(&h->background, 1) > 0)
			background_enter(c);
	}
	int hr =
	    c->forwarded ? http_proxy_finish(&req, &res, &e) : c->route->handler(&req, &res, &e);
	if (c->sink_active) {
		/* Succeeded: the handler owns the sink's state now. */
		if (hr < 0)
			c->sink.abort(c->sink.cls);
		c->sink_active = 0;
	}
	if (hr < 0) {
		if (e.kind == ERR_NONE)
			err_set(&e, ERR_INTERNAL, 0, "handler failed without a reason");
		if (http_error_status(e.kind) >= 500)
			log_msg(LOG_LEVEL_ERROR, "%s %s: %s", method, url, e.msg);
		return queue_error(conn, c, &res, &e);
	}
	if (res.upgrade)
		return queue_upgrade(conn, c, &res);
	return queue_owned(conn, c, &res);
}

enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
				const char *method, const char *version, const char *upload_data,
				size_t *upload_data_size, void **con_cls)
{
	struct http *h = cls;
	struct request_ctx *c = *con_cls;
	if (!c) {
		c = http_on_uri(h, NULL, conn);
		if (!c)
			return MHD_NO;
		*con_cls = c;
	}
	if (!c->started) {
		c->started = 1;
		c->t0_ns = clock_mono_ns();
		http_trace_request_id(
		    c->rid, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id"));
		log_set_request_id(c->rid);
		enum MHD_Result r = on_headers(h, c, conn, method, url);
		log_set_request_id(NULL);
		return r;
	}
	if (*upload_data_size) {
		enum MHD_Result r = on_body(h, c, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return r;
	}
	log_set_request_id(c->rid);
	enum MHD_Result r = on_complete(h, c, conn, method, c->path);
	log_set_request_id(NULL);
	return r;
}

void http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		       enum MHD_RequestTerminationCode toe)
{
	struct http *h = cls;
	struct request_ctx *c = *con_cls;
	if (c) {
		/* Kept alive: the connection waits for its next header, under
		 * the guard's deadline again. */
		if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && !c->upgraded)
			http_guard_request_ended(h->guard, conn);
		if (c->sink_active)
			c->sink.abort(c->sink.cls);
		if (c->upgrade_release) /* the connection ended before the upgrade */
			c->upgrade_release(c->upgrade_cls);
		/* Back to its priority (root may raise it again; otherwise the
		 * thread stays low for the rest of its connection). */
		if (c->niced_tid)
			setpriority(PRIO_PROCESS, (id_t)c->niced_tid, c->nice0);
		if (c->counted)
			atomic_fetch_sub(&h->background, 1);
		free(c->body);
		free(c->raw_uri);
		free(c);
		*con_cls = NULL;
	}
}

void *http_on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)conn;
	struct request_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->h = cls;
	if (uri && strlen(uri) < HTTP_PATH_MAX * 2)
		c->raw_uri = strdup(uri);
	return c;
}
