/* secrets' internals: the store's records, the proxy's bindings and the
 * pieces of a proxied connection. */
#ifndef DESKBOX_SERVER_SECRETS_INTERNAL_H
#define DESKBOX_SERVER_SECRETS_INTERNAL_H

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <pthread.h>

#include "secrets.h"

#define SECRETS_HOST_MAX 253

struct secret_rec {
	char name[SECRETS_NAME_MAX + 1];
	char *value; /* owned */
	size_t n_hosts;
	char hosts[SECRETS_MAX_HOSTS][SECRETS_HOST_MAX + 1]; /* lowercase; "*.x" wildcards */
	int replace_in_body;
	long long created_ms, last_used_ms;
};

struct secrets {
	pthread_mutex_t mu;
	char path[4096];
	size_t n;
	struct secret_rec *recs[SECRETS_MAX];
	int dirty_use;	    /* last_used changed since the last save */
	long long saved_ms; /* when it was saved */
};

/* 1 when `host` (any case, no port) matches `pattern`: the same name, or
 * for "*.example.org" any name below example.org. */
int secrets_host_match(const char *pattern, const char *host);

/* What one request to `host` may replace: for each of the binding's
 * placeholders whose secret allows `host`, a copy of the value.  Values
 * are the caller's to free (secrets_subst_release). */
struct secrets_subst {
	size_t n;
	const char *placeholder[SECRETS_PER_SANDBOX]; /* the binding's */
	char *value[SECRETS_PER_SANDBOX];
	int in_body[SECRETS_PER_SANDBOX];
};
void secrets_subst_for(struct secrets *s, const char *host, size_t n, const char *const *names,
		       const char *const *placeholders, struct secrets_subst *out);
void secrets_subst_release(struct secrets_subst *sub);
/* 1 when any secret of the binding allows `host` (so TLS to it is
 * intercepted). */
int secrets_any_for(struct secrets *s, const char *host, size_t n, const char *const *names);
/* Notes that `name` was used now (saved lazily). */
void secrets_touch(struct secrets *s, const char *name);

/* The sandbox's CA, loaded, minting leaf certificates by host name. */
struct egress_ca;
int egress_ca_load(const char *dir, struct egress_ca **out, struct err *e);
void egress_ca_free(struct egress_ca *ca);
/* Credentials presenting a certificate for `host` signed by the CA:
 * 0 when they are cached (the CA's, valid while it lives), 1 when the
 * cache was full (the caller's to free). */
int egress_ca_creds(struct egress_ca *ca, const char *host,
		    gnutls_certificate_credentials_t *out, struct err *e);

/* The SNI host name of the TLS ClientHello in `buf` (len bytes, perhaps
 * only its start): 1 and `out` filled, 0 when there is none, -1 when more
 * bytes are needed, -2 when it is not a ClientHello. */
int egress_sni(const unsigned char *buf, size_t len, char *out, size_t size);

/* One side of a proxied connection: a socket, TLS over it or not. */
struct egress_side {
	int fd;
	gnutls_session_t tls; /* NULL: plain */
};
/* > 0 bytes, 0 at the end, EGRESS_AGAIN when nothing is there now,
 * -1 on failure.  Writes wait while the socket is full (at most 30 s). */
#define EGRESS_AGAIN (-2)
ssize_t egress_read(struct egress_side *s, void *buf, size_t n);
int egress_write(struct egress_side *s, const void *buf, size_t n);

/* What the proxy knows of one sandbox. */
struct egress_binding {
	char addr[16];
	struct egress_ca *ca;
	size_t n;
	char names[SECRETS_PER_SANDBOX][SECRETS_NAME_MAX + 1];
	char placeholders[SECRETS_PER_SANDBOX][SECRETS_PLACEHOLDER_LEN + 1];
	const char *name_p[SECRETS_PER_SANDBOX], *ph_p[SECRETS_PER_SANDBOX];
	int refs; /* under the proxy's mu */
};

enum egress_counter {
	EGRESS_CONNECTIONS,
	EGRESS_INTERCEPTED,
	EGRESS_REPLACED,
	EGRESS_REFUSED,
	EGRESS_UPSTREAM_BAD,
	EGRESS_COUNTERS
};

/* --egress-proxy (egress_proxy.c). */
struct egress_upstream {
	int set;
	struct sockaddr_in addr;
	char auth[512]; /* "Proxy-Authorization: Basic ...\r\n" or "" */
};
/* Parses "http://[user:password@]host:port" (host resolved now). */
int egress_proxy_parse(const char *url, struct egress_upstream *out, struct err *e);
/* Asks the proxy on `fd` for a tunnel to `dst`: 0 once it answered 200. */
int egress_proxy_connect(const struct egress_upstream *u, int fd, const struct sockaddr_in *dst);

struct egress {
	struct secrets *secrets;
	struct egress_upstream proxy;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int listen_fd;
	uint16_t port;
	int stopping;
	unsigned active; /* connection threads, under mu */
	pthread_t thread;
	gnutls_certificate_credentials_t upstream; /* the system's CAs and --egress-ca-file */
	size_t n_bindings;
	struct egress_binding *bindings[1024];
	uint64_t counters[EGRESS_COUNTERS]; /* atomic */
};

void egress_count(struct egress *g, enum egress_counter c, uint64_t n);

/* One intercepted connection. */
struct egress_conn {
	struct egress *g;
	struct egress_binding *b;
	struct egress_side client, up;
	/* TLS terminated for this host (its SNI, verified upstream); "":
	 * plain HTTP, whose secrets are never replaced. */
	char host[SECRETS_HOST_MAX + 1];
	char dst[48]; /* "203.0.113.10:443", for the log */
};

/* Rewrites the client's HTTP/1.x requests onto c->up as they arrive. */
struct egress_rw;
int egress_rw_new(struct egress_conn *c, struct egress_rw **out);
/* < 0: a malformed or too large request (the connection is closed);
 * 1: the stream is no longer HTTP (an upgrade): `*raw_off` is where the
 * rest of `buf`, to be relayed as it is, begins. */
int egress_rw_feed(struct egress_rw *rw, const char *buf, size_t len, size_t *raw_off);
void egress_rw_free(struct egress_rw *rw);

/* egress.c's pieces for egress_conn.c. */
/* The binding of `addr` with a reference, or NULL; put drops it. */
struct egress_binding *egress_binding_get(struct egress *g, const char *addr);
void egress_binding_put(struct egress *g, struct egress_binding *b);
/* What the client's first bytes are: 1 a ClientHello with its SNI in
 * `host`, 0 other TLS, 2 not TLS, -1 nothing usable. */
int egress_classify(struct egress_conn *c, char *host, size_t size);
/* A blocking TCP connection to `dst`, or -1: directly (egress_tcp) or
 * through the upstream proxy when there is one (egress_dial). */
int egress_tcp(const struct sockaddr_in *dst);
int egress_dial(struct egress *g, const struct sockaddr_in *dst);
/* Relays until either side ends; frees `rw` (NULL: the client's bytes
 * go as they are). */
void egress_relay(struct egress_conn *c, struct egress_rw *rw);

#endif
