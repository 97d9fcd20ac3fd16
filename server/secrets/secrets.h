/* secrets: values a sandbox uses without ever holding them (docs/secrets.md).
 *
 * A secret is a name, a value and the hosts it may be sent to.  A sandbox
 * that names it sees only a placeholder in its environment
 * ("deskbox-secret-<32 hex>"); deskboxd's egress proxy (struct egress)
 * puts the value in place of the placeholder in the headers of HTTP and
 * HTTPS requests to the secret's hosts, and nowhere else.  HTTPS to such a
 * host is terminated with the sandbox's own CA (secrets_ca_prepare()),
 * whose certificate the sandbox trusts and whose key stays in the host's
 * state dir, and re-encrypted to the real host, whose certificate is
 * verified against the host's CAs.
 *
 * `struct secrets` is the store: <state>/secrets.json, mode 0600, written
 * atomically.  Values never leave it through this interface except into
 * the proxy's rewriting.  This module knows nothing of sandboxes, networks
 * or HTTP routes: it is given addresses, directories and placeholders.
 * All functions are thread-safe.
 */
#ifndef DESKBOX_SERVER_SECRETS_H
#define DESKBOX_SERVER_SECRETS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/error.h"

#define SECRETS_NAME_MAX	64   /* an environment variable name */
#define SECRETS_VALUE_MAX	8192 /* bytes */
#define SECRETS_MAX_HOSTS	32
#define SECRETS_MAX		256 /* secrets in the store */
#define SECRETS_PER_SANDBOX	32
#define SECRETS_PLACEHOLDER_LEN (15 + 32) /* "deskbox-secret-" + 32 hex */

struct secrets;

/* Opens (or creates) the store in `state_dir`. */
int secrets_open(struct secrets **out, const char *state_dir, struct err *e);
void secrets_close(struct secrets *s);

/* Creates or replaces a secret from a request body {"name", "value",
 * "hosts": [...], "replace_in_body": false}; *out (the caller's) is its
 * public view (secrets_get_json()).  ERR_INVALID names the bad field. */
int secrets_put(struct secrets *s, const cJSON *body, cJSON **out, struct err *e);
/* Removes a secret: placeholders already given out are no longer replaced. */
int secrets_delete(struct secrets *s, const char *name, struct err *e);
/* {"name", "hosts", "replace_in_body", "created_at", "last_used_at"}:
 * never the value.  ERR_NOT_FOUND when there is none. */
int secrets_get_json(struct secrets *s, const char *name, cJSON **out, struct err *e);
/* {"secrets": [views...]}. */
cJSON *secrets_list_json(struct secrets *s);
/* 0 if `name` is stored, else ERR_NOT_FOUND naming it. */
int secrets_check(struct secrets *s, const char *name, struct err *e);
/* 1 when `name` is a valid secret name (an environment variable name). */
int secrets_name_valid(const char *name);

/* A fresh placeholder into `out` (SECRETS_PLACEHOLDER_LEN + 1 bytes). */
int secrets_placeholder_new(char *out, struct err *e);

/* Makes the sandbox's CA in `dir` unless it is there: ca.key (0600, the
 * host's only) and ca.pem (what the sandbox trusts). */
int secrets_ca_prepare(const char *dir, struct err *e);

/* The egress proxy: one listener in deskboxd's network namespace that the
 * sandboxes' intercepted connections are redirected to (their HTTP and
 * HTTPS: server/network's network_intercept()). */
struct egress;

struct egress_config {
	/* PEM file of extra CAs trusted for the real hosts, besides the
	 * system's (--egress-ca-file); NULL: none. */
	const char *ca_file;
	/* "http://[user:password@]host:port" (--egress-proxy): every
	 * redirected connection goes through it (HTTP CONNECT); NULL: direct. */
	const char *proxy_url;
};

int egress_open(struct egress **out, struct secrets *s, const struct egress_config *cfg,
		struct err *e);
/* Stops the listener and waits for every connection to end. */
void egress_close(struct egress *g);
/* The listener's TCP port (on every address of the namespace; a
 * connection is served only from a bound sandbox address). */
uint16_t egress_port(const struct egress *g);
/* 1 when every TCP connection of every networked sandbox is to be
 * redirected (--egress-proxy), not only the web ports of those with
 * secrets. */
int egress_all(const struct egress *g);

/* Serves the sandbox at `addr` (IPv4 text): `names[i]` stands in its
 * environment as `placeholders[i]`; `ca_dir` holds its CA.  Replaces an
 * earlier binding of the same address. */
int egress_bind(struct egress *g, const char *addr, const char *ca_dir, size_t n,
		const char *const *names, const char *const *placeholders, struct err *e);
void egress_unbind(struct egress *g, const char *addr);

struct egress_stats {
	uint64_t connections;  /* served */
	uint64_t intercepted;  /* TLS connections terminated for a secret's host */
	uint64_t replaced;     /* placeholders replaced */
	uint64_t refused;      /* placeholders seen on their way to another host */
	uint64_t upstream_bad; /* real hosts whose certificate failed verification */
};
void egress_stats(struct egress *g, struct egress_stats *out);

#endif
