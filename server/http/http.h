/* http: deskboxd's HTTP layer on libmicrohttpd.
 *
 * Routes are a table of {method, pattern, handler}; a pattern's "{name}"
 * segments capture one path segment each, and a last segment "{name*}" the
 * rest of the path (one or more segments, slashes included).  A handler fills a response or
 * returns a negative code with `struct err` filled in; this file is the one
 * place that turns an error into a status and the JSON body
 * {"error":{"code":"...","message":"..."}}.
 *
 * Threads: one per connection (handlers may block: creating a sandbox, a
 * foreground exec, waiting for the screen).  Connection count (in all and
 * per client address), idle timeout and per-connection memory are capped
 * explicitly; libmicrohttpd's defaults are unlimited.  A client must send
 * its whole request header within a fixed time that bytes arriving do not
 * extend, and connections still waiting for one are few: slow clients
 * cannot take the slots others need (internal.h, "connection guard").
 */
#ifndef DESKBOX_SERVER_HTTP_H
#define DESKBOX_SERVER_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/args.h"
#include "common/error.h"

#define HTTP_MAX_CAPTURES 4
#define HTTP_MAX_HEADERS  40
/* The longest X-Request-Id taken from a client. */
#define HTTP_REQUEST_ID_MAX 64

struct http_request {
	void *conn; /* the http layer's own: handlers use the http_* calls */
	const char *method;
	const char *path;
	const char *captures[HTTP_MAX_CAPTURES]; /* values of the pattern's {name}s, in order */
	size_t n_captures;
	const char
	    *body; /* NUL-terminated copy of the request body (routes without HTTP_STREAM_BODY) */
	size_t body_len;
	void *app;    /* the application context given to http_new() */
	void *stream; /* HTTP_STREAM_BODY routes: the sink's cls from the route's begin() */
	/* The request target as the client sent it (path and query, not
	 * decoded); with host-based routing (http_opts.rewrite) the prefix
	 * the Host header stood for comes first, and host_routed is 1. */
	const char *raw_uri;
	int host_routed;
	int from_peer; /* it carried http_opts.peer_secret (another node sent it) */
	void *layer;   /* the http layer's own */
};

/* Where a streamed request body goes (HTTP_STREAM_BODY routes).  write() is
 * called per chunk as it arrives; after the last one the route's handler
 * runs with req->stream == cls to finish (e.g. fsync and rename).  If the
 * request ends any other way (the client went away, a write or the handler
 * failed) abort() runs instead of nothing: it must undo what begin() did.
 * Exactly one of "handler returned 0" or abort() happens for every sink;
 * when the handler succeeds it owns the cls and abort() is not called. */
struct http_body_sink {
	int (*write)(void *cls, const char *data, size_t len, struct err *e);
	void (*abort)(void *cls);
	void *cls;
};

/* Streamed responses (downloads, Server-Sent Events).  The reader fills
 * `buf` with up to `max` bytes of the body from offset `pos` and returns how
 * many, or HTTP_STREAM_END at the end (chunked bodies) or HTTP_STREAM_ERROR
 * to cut the connection.  It runs on the connection's own thread and may
 * block until data is there; it must not return 0.  `release` frees `cls`
 * once the response is done (also when it was never sent). */
#define HTTP_STREAM_END	  (-1)
#define HTTP_STREAM_ERROR (-2)
#define HTTP_SIZE_UNKNOWN UINT64_MAX
typedef long (*http_reader)(void *cls, uint64_t pos, char *buf, size_t max);
typedef void (*http_release)(void *cls);

/* Protocol upgrades (WebSocket; see http_reply_upgrade).  Runs once the 101
 * answer went out, on the connection's own thread, with the raw socket and
 * the bytes the client sent right after its request; it may block for the
 * whole session and must not close `fd`. */
typedef void (*http_upgrade_fn)(void *cls, int fd, const char *extra, size_t extra_len);

struct http_header {
	const char *name;
	char *value;	  /* owned (malloc'd) */
	char *owned_name; /* the name's copy when http_add_header_copy made it */
};

struct http_response {
	int status;
	const char *content_type;
	void *data; /* malloc'd body, freed by the http layer */
	size_t len;
	/* Instead of data: a body someone else owns (see http_reply_shared). */
	const void *shared;
	http_release shared_release;
	void *shared_cls;
	/* Instead of data: a streamed body (see http_reply_stream). */
	http_reader reader;
	http_release release;
	void *reader_cls;
	uint64_t stream_size;
	struct http_header headers[HTTP_MAX_HEADERS];
	size_t n_headers;
	/* Instead of a body: a protocol upgrade (see http_reply_upgrade). */
	http_upgrade_fn upgrade;
	http_release upgrade_release;
	void *upgrade_cls;
};

/* Returns 0 with `res` filled, or a negative code with `e` filled. */
typedef int (*http_handler)(struct http_request *req, struct http_response *res, struct err *e);

/* Called once the headers are in, before any body byte is read, for
 * HTTP_STREAM_BODY routes: validates the request and sets up `sink`.  A
 * failure is answered at once (the body is never read). */
typedef int (*http_stream_begin)(struct http_request *req, struct http_body_sink *sink,
				 struct err *e);

enum http_route_flags {
	HTTP_NO_AUTH = 1 << 0,	   /* no bearer token needed (health check) */
	HTTP_STREAM_BODY = 1 << 1, /* body goes to begin()'s sink, no size cap here */
	/* Bulk work (screenshots): while another such request is under way,
	 * the handler and the sending of its answer run at a lower CPU
	 * priority (nice HTTP_BACKGROUND_NICE), so that input, the desktops
	 * themselves and other requests go first when many clients fill the
	 * cores with it.  A lone one keeps its priority (on a host busy
	 * with other work a niced one takes ~1.5x as long). */
	HTTP_BACKGROUND = 1 << 2,
};
#define HTTP_BACKGROUND_NICE 10

/* Writes the body of an error answer (`res->status` is already the one
 * status_of() chose for `e`): front-ends speaking another engine's wire
 * format answer errors in its shape.  Must fill a body, whatever fails. */
typedef void (*http_error_writer)(struct http_response *res, const struct err *e);

struct http_route {
	const char *method;
	const char *pattern;
	http_handler handler;
	unsigned flags;		 /* enum http_route_flags */
	http_stream_begin begin; /* HTTP_STREAM_BODY only */
	/* The header holding the API token as its whole value (E2B's
	 * "X-API-KEY"); NULL: "Authorization: Bearer TOKEN". */
	const char *token_header;
	/* This route's error bodies; NULL: the mount's, else deskbox's. */
	http_error_writer error;
};

/* A route table served under a path prefix with its own application
 * context (the compatibility front-ends, server/compat/compat.h): a path
 * "PREFIX/rest" is routed as "/rest" in `routes`, handlers see `app`, and
 * errors (an unknown path under the prefix too) are written by `error`. */
struct http_mount {
	const char *prefix; /* "/e2b": no trailing slash */
	const struct http_route *routes;
	size_t n_routes;
	void *app;
	http_error_writer error; /* NULL: deskbox's {"error":{…}} */
};

/* Where opts.forward sends a request. */
struct http_forward {
	int fd;		/* connected to the server that serves it; the http layer's from then on */
	char what[96];	/* it, in messages ("node 'b'") */
	char host[256]; /* the Host header to send; "": the client's */
	/* One header added (the peer secret); they must outlive the server. */
	const char *extra_name, *extra_value;
};

struct http_opts {
	const char *listen; /* "ADDR:PORT"; port 0 picks a free one */
	const char *token;  /* the API bearer token */
	/* Where it is ("in /var/lib/deskbox/token"), said in every 401; kept
	 * for the server's life.  NULL: not said. */
	const char *token_hint;
	const struct http_route *routes;
	size_t n_routes;
	void *app;
	/* Prefixes served by other route tables, looked at first. */
	const struct http_mount *mounts;
	size_t n_mounts;
	size_t max_body; /* JSON bodies over this are refused with 413 */
	unsigned max_connections;
	unsigned max_per_address; /* connections from one IP address; 0: no cap */
	unsigned idle_timeout_s;  /* no byte either way for this long: closed */
	/* A connection that has not sent a whole request header this long
	 * after it opened (or after its previous answer) is closed; 0: no
	 * deadline. */
	unsigned header_timeout_s;
	/* At most this many connections wait for a header; a new one closes
	 * the one waiting longest.  Keep it under max_connections so there is
	 * always room for requests being served.  0: no cap. */
	unsigned max_waiting;
	/* HTTPS with this PEM certificate (chain) and key; both or neither. */
	const char *tls_cert_file;
	const char *tls_key_file;
	/* Host-based routing: given a request's Host header, returns 1 with a
	 * path prefix in `prefix` (the request is then routed as prefix +
	 * path, e.g. "/v1/sandboxes/ID/ports/8000"), or 0.  NULL: none. */
	int (*rewrite)(void *app, const char *host, char *prefix, size_t size);
	/* Runs once a route matched, before anything else looks at the
	 * request: may point captures at canonical values it writes into
	 * `buf` (a sandbox's name becomes its id), so every handler, and
	 * every store keyed by a capture, sees one form.  NULL: none. */
	void (*canon)(void *app, const char *pattern, const char **captures, size_t n, char *buf,
		      size_t size);
	/* Error bodies in another API's shape (the compatibility front-ends):
	 * given the routed path of a request that failed (no route, no
	 * credential, a body too large, a handler's error), returns 1 with
	 * the answer in `res` (status, body; http_error_status() gives the
	 * status deskbox would use), or 0 for deskbox's own body.  NULL: none. */
	int (*error_body)(void *app, const char *path, const struct err *e,
			  struct http_response *res);
	/* Forwarding (cluster mode): runs once a route of the main table
	 * matched and the request is authenticated, before its body is read.
	 * Returns 1 with `out` filled to pass the whole request (body,
	 * answer, upgrades) to another server instead of the handler, 0 to
	 * serve it here, or a negative code with `e` filled.  NULL: none. */
	int (*forward)(void *app, struct http_request *req, const char *pattern,
		       struct http_forward *out, struct err *e);
	/* A request whose header `peer_header` holds `peer_secret` comes from
	 * a peer (another node): it needs no API token (forward sees it as
	 * req->from_peer and passes it on only to where this node moved a
	 * sandbox); a wrong value is a 401.  NULL: none. */
	const char *peer_header, *peer_secret;
};

struct http;

int http_new(struct http **out, const struct http_opts *o, struct err *e);
/* The port actually bound. */
uint16_t http_port(const struct http *h);
/* Whether the listen address is a loopback one (127.0.0.0/8) / TLS is on. */
int http_loopback(const struct http *h);
int http_tls(const struct http *h);
/* Stops accepting, waits for the connection threads and the upgraded
 * sessions (tell those to stop first), frees. */
void http_free(struct http *h);

/* Response helpers.  They take ownership of `json` / `data`. */
int http_reply_json(struct http_response *res, int status, cJSON *json, struct err *e);
void http_reply_data(struct http_response *res, int status, const char *content_type, void *data,
		     size_t len);
/* A body sent straight from `data` (not copied), which must stay valid
 * until release(cls), called once the response is done with it. */
void http_reply_shared(struct http_response *res, int status, const char *content_type,
		       const void *data, size_t len, http_release release, void *cls);
void http_reply_empty(struct http_response *res, int status);
/* Answers with a body produced by `reader` (`size` bytes, or
 * HTTP_SIZE_UNKNOWN for a chunked body).  Takes ownership of `cls`:
 * `release(cls)` runs exactly once, whatever happens. */
void http_reply_stream(struct http_response *res, int status, const char *content_type,
		       uint64_t size, http_reader reader, void *cls, http_release release);
/* Answers 101 Switching Protocols (add the protocol's headers with
 * http_add_header; "Connection: Upgrade" is added here) and hands the socket
 * to `fn` once the answer went out.  Takes ownership of `cls`:
 * `release(cls)` runs exactly once, after fn returned or instead of it when
 * the connection ends before the upgrade. */
void http_reply_upgrade(struct http_response *res, http_upgrade_fn fn, void *cls,
			http_release release);
/* Adds a header; `value` is copied, `name` must outlive the response
 * (a literal); http_add_header_copy copies the name too. */
int http_add_header(struct http_response *res, const char *name, const char *value, struct err *e);
int http_add_header_copy(struct http_response *res, const char *name, const char *value,
			 struct err *e);

/* A query-string argument, or NULL. */
const char *http_query(const struct http_request *req, const char *name);
/* The same with its decoded length, which tells a value holding "%00"
 * (an embedded NUL) from a shorter one. */
const char *http_query_n(const struct http_request *req, const char *name, size_t *len);
/* A query-string integer in [min, max]; `def` when absent (ARGS_REQUIRED in
 * `flags` makes it mandatory).  ERR_INVALID naming the parameter. */
int http_query_int(const struct http_request *req, const char *name, int64_t min, int64_t max,
		   int64_t def, unsigned flags, int64_t *out, struct err *e);
/* A request header, or NULL. */
const char *http_header(const struct http_request *req, const char *name);
/* Calls fn for every request header in the order sent; a non-zero return
 * stops the walk and is returned. */
int http_each_header(const struct http_request *req,
		     int (*fn)(void *cls, const char *name, const char *value), void *cls);
/* Calls fn for every query-string argument (decoded; "" for one without
 * '='), in the order sent; a non-zero return stops the walk and is
 * returned. */
int http_each_query(const struct http_request *req,
		    int (*fn)(void *cls, const char *name, const char *value), void *cls);
/* The query string as sent (after '?', not decoded), "" when none. */
const char *http_raw_query(const struct http_request *req);
/* 0 when the request carries the API token (Authorization: Bearer), else
 * ERR_UNAUTHORIZED saying what is wrong: for HTTP_NO_AUTH routes that
 * accept other credentials too. */
int http_check_token(const struct http_request *req, struct err *e);
/* The server a request came to: valid until http_free(), which waits for
 * the upgraded sessions that may hold it. */
const struct http *http_of(const struct http_request *req);
/* 0 when `presented` is the API token (compared in constant time), else
 * ERR_UNAUTHORIZED: for credentials that arrive some other way (another
 * header, a message on a WebSocket). */
int http_check_secret(const struct http *h, const char *presented, struct err *e);
/* The status deskbox answers an error of `kind` with (400, 404, ...). */
int http_error_status(enum err_kind kind);
/* The client's IP address as text ("" when unknown). */
void http_client_addr(const struct http_request *req, char *buf, size_t size);
/* Whether the connection is HTTPS. */
int http_request_tls(const struct http_request *req);

/* multipart/form-data bodies (streamed POST uploads).  The callback gets
 * each part's bytes as they arrive: `name` is the form field, `filename`
 * NULL for a field that is not a file, `off` the offset of `data` in the
 * part.  A negative return (with `e` filled) stops the body; that error is
 * what http_multipart_feed()/finish() then return. */
typedef int (*http_part_fn)(void *cls, const char *name, const char *filename, const char *data,
			    uint64_t off, size_t size, struct err *e);
struct http_multipart;
/* ERR_UNSUPPORTED unless the request's Content-Type is multipart/form-data,
 * ERR_INVALID when it has no boundary.  Free with http_multipart_free(). */
int http_multipart_new(struct http_request *req, http_part_fn fn, void *cls,
		       struct http_multipart **out, struct err *e);
/* Feeds body bytes as they come (an HTTP_STREAM_BODY sink's write). */
int http_multipart_feed(struct http_multipart *mp, const char *data, size_t len, struct err *e);
/* After the last byte: flushes the last part; ERR_INVALID for a body that
 * ended inside a part.  The caller still frees. */
int http_multipart_finish(struct http_multipart *mp, struct err *e);
void http_multipart_free(struct http_multipart *mp);

/* Reverse proxy (http_proxy.c): a request passed on to an upstream
 * connection, its answer passed back, WebSocket and other upgrades piped
 * both ways.  Use from an HTTP_STREAM_BODY route: its begin() calls
 * http_proxy_begin() (which sends the request head and makes `sink` pass
 * the body on as it arrives), its handler http_proxy_finish() (which reads
 * the answer's head and streams the body back).  Hop-by-hop headers are
 * dropped both ways; X-Forwarded-For/-Proto/-Host (and -Prefix) added. */
struct http_proxy_opts {
	int fd;			  /* the upstream connection; owned by the proxy from the call on */
	const char *target;	  /* request target to send: "/path?query" */
	const char *host;	  /* Host header to send; NULL: the client's */
	const char *prefix;	  /* X-Forwarded-Prefix, or NULL */
	int strip_authorization;  /* the client's Authorization is deskboxd's: not passed on */
	int strip_origin;	  /* no Origin header upstream */
	const char *strip_cookie; /* a cookie of deskboxd's, not passed on; NULL: none */
	const char *what;	  /* the upstream in messages; NULL: "the service in the sandbox" */
	/* One header added to the request (the cluster secret); NULL: none. */
	const char *extra_name, *extra_value;
};
int http_proxy_begin(struct http_request *req, const struct http_proxy_opts *o,
		     struct http_body_sink *sink, struct err *e);
/* req->stream is the sink's cls; on failure everything is released. */
int http_proxy_finish(struct http_request *req, struct http_response *res, struct err *e);
/* An fd that becomes readable when the server begins to stop: code that
 * blocks for long on a connection's thread polls it too.  Not to close. */
int http_stop_fd(const struct http_request *req);
/* The request is known to come from someone entitled to it (an HTTP_NO_AUTH
 * route that checked its own credential): its body is no longer under the
 * header deadline that keeps strangers from holding connections. */
void http_request_trusted(struct http_request *req);

/* Connect RPC's streaming framing (connectrpc.com/docs/protocol), used by
 * front-ends whose clients speak it (http_connect.c): an envelope is one
 * flags byte, a 4-byte big-endian length and the message.  The flags of
 * the last one of a server stream are HTTP_CONNECT_END_STREAM. */
#define HTTP_CONNECT_END_STREAM	 0x02
#define HTTP_CONNECT_MAX_MESSAGE (1u << 20)
/* The one message of a streaming request's body (exactly one envelope,
 * uncompressed, at most HTTP_CONNECT_MAX_MESSAGE): *msg points into
 * `body`.  ERR_INVALID saying what is wrong, ERR_TOO_LARGE. */
int http_connect_unwrap(const char *body, size_t len, const char **msg, size_t *msg_len,
			struct err *e);

/* A response body being produced a piece at a time (streams of frames or
 * lines): bytes go in with http_frames_add(), a streamed response's reader
 * takes them out with http_frames_take() (0 when nothing waits); `failed`
 * is set when memory ran out. */
struct http_frames {
	char *buf;
	size_t len, off, cap;
	int failed;
};
void http_frames_add(struct http_frames *f, const void *data, size_t n);
/* One Connect envelope with `flags` holding `j` (serialised; stays the
 * caller's). */
void http_frames_connect(struct http_frames *f, unsigned flags, const cJSON *j);
/* `j` serialised as one NDJSON line (with its '\n'). */
void http_frames_ndjson(struct http_frames *f, const cJSON *j);
size_t http_frames_take(struct http_frames *f, char *buf, size_t max);
void http_frames_release(struct http_frames *f);

/* Parses the body as a JSON object (an empty body is an empty object).
 * ERR_INVALID for malformed JSON or a non-object.  Caller frees. */
int http_json_body(const struct http_request *req, cJSON **out, struct err *e);

/* Splits `path` against `pattern`: 1 on a match (captures filled, pointing
 * into `buf`, which receives a copy of the path), 0 otherwise.  Exposed for
 * the unit tests and the fuzzer. */
int http_route_match(const char *pattern, const char *path, char *buf, size_t buf_size,
		     const char **captures, size_t *n_captures);

#endif
