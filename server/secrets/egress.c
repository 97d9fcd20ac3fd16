/* egress: the proxy the sandboxes' HTTP and HTTPS are redirected to.
 *
 * One listener, one thread per connection (at most MAX_CONNS).  A
 * connection is served only from a bound sandbox address; its real
 * destination is the address the sandbox dialled (SO_ORIGINAL_DST of the
 * redirect).  The first bytes decide what happens:
 *   a TLS ClientHello naming a host one of the sandbox's secrets allows:
 *     the real host is dialled with TLS first and its certificate
 *     verified for that name, then the sandbox's handshake is answered
 *     with a certificate of its own CA, and the requests are rewritten
 *     (egress_http.c);
 *   any other TLS: relayed byte for byte, never decrypted;
 *   plain HTTP: rewritten too, but nothing is replaced (the value would
 *     travel in clear to an address nobody vouched for): placeholders
 *     there are only counted and logged.
 * The filter already applied the sandbox's network policy to the
 * redirected connection (server/network: network_intercept()). */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"

#define PEEK_MAX       16384
#define FIRST_BYTES_MS 10000
#define CONNECT_MS     10000
#define IDLE_MS	       (5 * 60 * 1000)
#define WRITE_MS       30000 /* a side that takes nothing for this long is gone */

void egress_count(struct egress *g, enum egress_counter c, uint64_t n)
{
	static const char *const names[EGRESS_COUNTERS] = {
	    "deskbox_egress_connections_total", "deskbox_egress_intercepted_total",
	    "deskbox_egress_replaced_total", "deskbox_egress_refused_total",
	    "deskbox_egress_upstream_failures_total"};
	__atomic_add_fetch(&g->counters[c], n, __ATOMIC_RELAXED);
	metrics_count(names[c], "", (double)n);
}

void egress_stats(struct egress *g, struct egress_stats *out)
{
	uint64_t v[EGRESS_COUNTERS];
	for (int i = 0; i < EGRESS_COUNTERS; i++)
		v[i] = __atomic_load_n(&g->counters[i], __ATOMIC_RELAXED);
	*out = (struct egress_stats){v[EGRESS_CONNECTIONS], v[EGRESS_INTERCEPTED],
				     v[EGRESS_REPLACED], v[EGRESS_REFUSED], v[EGRESS_UPSTREAM_BAD]};
}

uint16_t egress_port(const struct egress *g)
{
	return g->port;
}

ssize_t egress_read(struct egress_side *s, void *buf, size_t n)
{
	ssize_t r;
	if (!s->tls) {
		do
			r = recv(s->fd, buf, n, MSG_DONTWAIT);
		while (r < 0 && errno == EINTR);
		return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? EGRESS_AGAIN : r;
	}
	do
		r = gnutls_record_recv(s->tls, buf, n);
	while (r == GNUTLS_E_INTERRUPTED);
	if (r == GNUTLS_E_AGAIN)
		return EGRESS_AGAIN;
	if (r == GNUTLS_E_PREMATURE_TERMINATION)
		return 0;
	return r < 0 ? -1 : r;
}

/* Waits until `fd` takes more: 0, or -1 after WRITE_MS. */
static int wait_out(int fd)
{
	struct pollfd p = {fd, POLLOUT, 0};
	int r;
	do
		r = poll(&p, 1, WRITE_MS);
	while (r < 0 && errno == EINTR);
	return r == 1 ? 0 : -1;
}

int egress_write(struct egress_side *s, const void *buf, size_t n)
{
	const char *p = buf;
	int again = 0; /* GnuTLS: the same call again, with NULL */
	while (n) {
		ssize_t w;
		if (s->tls)
			w = gnutls_record_send(s->tls, again ? NULL : p, again ? 0 : n);
		else
			w = send(s->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w == GNUTLS_E_INTERRUPTED || (w < 0 && !s->tls && errno == EINTR))
			continue;
		if (w == GNUTLS_E_AGAIN || (w < 0 && !s->tls && errno == EAGAIN)) {
			again = s->tls != NULL;
			if (wait_out(s->fd) < 0)
				return -1;
			continue;
		}
		if (w <= 0)
			return -1;
		again = 0;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The binding of `addr` with a reference, or NULL. */
struct egress_binding *egress_binding_get(struct egress *g, const char *addr)
{
	struct egress_binding *b = NULL;
	pthread_mutex_lock(&g->mu);
	for (size_t i = 0; i < g->n_bindings && !b; i++)
		if (strcmp(g->bindings[i]->addr, addr) == 0)
			b = g->bindings[i];
	if (b)
		b->refs++;
	pthread_mutex_unlock(&g->mu);
	return b;
}

void egress_binding_put(struct egress *g, struct egress_binding *b)
{
	pthread_mutex_lock(&g->mu);
	int last = --b->refs == 0;
	pthread_mutex_unlock(&g->mu);
	if (last) {
		egress_ca_free(b->ca);
		explicit_bzero(b, sizeof(*b));
		free(b);
	}
}

int egress_bind(struct egress *g, const char *addr, const char *ca_dir, size_t n,
		const char *const *names, const char *const *placeholders, struct err *e)
{
	if (n > SECRETS_PER_SANDBOX)
		return err_set(e, ERR_INVALID, EINVAL, "at most %d secrets per sandbox",
			       SECRETS_PER_SANDBOX);
	struct egress_binding *b = calloc(1, sizeof(*b));
	if (!b)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	snprintf(b->addr, sizeof(b->addr), "%s", addr);
	/* No secrets (only --egress-proxy): nothing is terminated, no CA. */
	if (n && egress_ca_load(ca_dir, &b->ca, e) < 0) {
		free(b);
		return err_wrap(e, "egress");
	}
	b->n = n;
	for (size_t i = 0; i < n; i++) {
		snprintf(b->names[i], sizeof(b->names[i]), "%s", names[i]);
		snprintf(b->placeholders[i], sizeof(b->placeholders[i]), "%s", placeholders[i]);
		b->name_p[i] = b->names[i];
		b->ph_p[i] = b->placeholders[i];
	}
	b->refs = 1;
	egress_unbind(g, addr);
	pthread_mutex_lock(&g->mu);
	int full = g->n_bindings == sizeof(g->bindings) / sizeof(g->bindings[0]);
	if (!full)
		g->bindings[g->n_bindings++] = b;
	pthread_mutex_unlock(&g->mu);
	if (full) {
		egress_binding_put(g, b);
		return err_set(e, ERR_LIMIT, ENOSPC, "egress: too many sandboxes with secrets");
	}
	return 0;
}

void egress_unbind(struct egress *g, const char *addr)
{
	struct egress_binding *b = NULL;
	pthread_mutex_lock(&g->mu);
	for (size_t i = 0; i < g->n_bindings && !b; i++)
		if (strcmp(g->bindings[i]->addr, addr) == 0) {
			b = g->bindings[i];
			g->bindings[i] = g->bindings[--g->n_bindings];
		}
	pthread_mutex_unlock(&g->mu);
	if (b)
		egress_binding_put(g, b);
}

/* Waits for `fd` to be readable: 1, 0 on timeout or when stopping. */
static int wait_in(struct egress *g, int fd, int ms)
{
	for (int waited = 0; waited < ms; waited += 1000) {
		struct pollfd p = {fd, POLLIN, 0};
		int r = poll(&p, 1, ms - waited < 1000 ? ms - waited : 1000);
		if (r > 0)
			return 1;
		if ((r < 0 && errno != EINTR) || __atomic_load_n(&g->stopping, __ATOMIC_RELAXED))
			return 0;
	}
	return 0;
}

/* The first bytes, peeked: the SNI (1), TLS without one or that no
 * secret allows (0, `host` ""), plain (2), or -1 (closed, garbage). */
int egress_classify(struct egress_conn *c, char *host, size_t size)
{
	unsigned char buf[PEEK_MAX];
	host[0] = '\0';
	for (ssize_t have = 0;;) {
		if (!wait_in(c->g, c->client.fd, FIRST_BYTES_MS))
			return -1;
		ssize_t n = recv(c->client.fd, buf, sizeof(buf), MSG_PEEK);
		if (n <= 0 || n == have)
			return -1; /* closed, or the client waits for us */
		have = n;
		int r = egress_sni(buf, (size_t)n, host, size);
		if (r == -2)
			return buf[0] == 22 ? 0 : 2;
		if (r >= 0)
			return r;
		if (n == (ssize_t)sizeof(buf))
			return 0;
	}
}

int egress_tcp(const struct sockaddr_in *dst)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)dst, sizeof(*dst)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	struct pollfd p = {fd, POLLOUT, 0};
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (poll(&p, 1, CONNECT_MS) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 ||
	    soerr != 0) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

int egress_dial(struct egress *g, const struct sockaddr_in *dst)
{
	if (!g->proxy.set)
		return egress_tcp(dst);
	int fd = egress_tcp(&g->proxy.addr);
	if (fd >= 0 && egress_proxy_connect(&g->proxy, fd, dst) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Moves what the client sent (through `*rwp` when not NULL): 1 when
 * something moved, 0 when nothing was there, -1 at the end. */
static int pump_client(struct egress_conn *c, struct egress_rw **rwp, char *buf, size_t size)
{
	ssize_t n = egress_read(&c->client, buf, size);
	if (n == EGRESS_AGAIN)
		return 0;
	if (n <= 0)
		return -1;
	size_t raw = 0;
	int r = *rwp ? egress_rw_feed(*rwp, buf, (size_t)n, &raw) : 0;
	if (r < 0)
		return -1;
	if (r == 1) { /* upgraded: the rest as it is */
		egress_rw_free(*rwp);
		*rwp = NULL;
		return egress_write(&c->up, buf + raw, (size_t)n - raw) < 0 ? -1 : 1;
	}
	if (!*rwp && egress_write(&c->up, buf, (size_t)n) < 0)
		return -1;
	return 1;
}

static int pump_up(struct egress_conn *c, char *buf, size_t size)
{
	ssize_t n = egress_read(&c->up, buf, size);
	if (n == EGRESS_AGAIN)
		return 0;
	return n <= 0 || egress_write(&c->client, buf, (size_t)n) < 0 ? -1 : 1;
}

/* Both ways until either side ends.  Reads are tried before each wait:
 * a TLS record read along with a handshake sits in GnuTLS's buffer, where
 * neither poll() nor gnutls_record_check_pending() sees it. */
static void relay_loop(struct egress_conn *c, struct egress_rw **rwp)
{
	char buf[32768];
	for (int idle = 0;;) {
		int a = pump_client(c, rwp, buf, sizeof(buf));
		int b = a < 0 ? -1 : pump_up(c, buf, sizeof(buf));
		if (a < 0 || b < 0)
			return;
		if (a || b) {
			idle = 0;
			continue;
		}
		struct pollfd p[2] = {{c->client.fd, POLLIN, 0}, {c->up.fd, POLLIN, 0}};
		/* In steps, so that egress_close() is not kept waiting. */
		int r = poll(p, 2, 1000);
		if (r < 0 && errno != EINTR)
			return;
		if (r == 0 && ((idle += 1000) >= IDLE_MS ||
			       __atomic_load_n(&c->g->stopping, __ATOMIC_RELAXED)))
			return;
	}
}

void egress_relay(struct egress_conn *c, struct egress_rw *rw)
{
	fcntl(c->client.fd, F_SETFL, fcntl(c->client.fd, F_GETFL) | O_NONBLOCK);
	fcntl(c->up.fd, F_SETFL, fcntl(c->up.fd, F_GETFL) | O_NONBLOCK);
	relay_loop(c, &rw);
	egress_rw_free(rw);
}
