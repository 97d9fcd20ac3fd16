/* egress_conn: the listener, and what one redirected connection goes
 * through (see egress.c for the choices). */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

#define MAX_CONNS    256
#define HANDSHAKE_MS 10000

static const gnutls_datum_t http11 = {(unsigned char *)"http/1.1", 8};

static int tls_session(gnutls_session_t *s, unsigned flags, gnutls_certificate_credentials_t cred,
		       int fd)
{
	int r = gnutls_init(s, flags);
	if (r < 0)
		return r;
	/* Only HTTP/1.1 offered and accepted: the rewriting parses 1.x. */
	if ((r = gnutls_set_default_priority(*s)) < 0 ||
	    (r = gnutls_credentials_set(*s, GNUTLS_CRD_CERTIFICATE, cred)) < 0 ||
	    (r = gnutls_alpn_set_protocols(*s, &http11, 1, 0)) < 0) {
		gnutls_deinit(*s);
		*s = NULL;
		return r;
	}
	gnutls_transport_set_int(*s, fd);
	gnutls_handshake_set_timeout(*s, HANDSHAKE_MS);
	return 0;
}

static int handshake(gnutls_session_t s)
{
	int r;
	do
		r = gnutls_handshake(s);
	while (r < 0 && !gnutls_error_is_fatal(r));
	return r;
}

/* TLS to the real host, its certificate verified for `host`. */
static int upstream_tls(struct egress_conn *c)
{
	gnutls_session_t s;
	int r = tls_session(&s, GNUTLS_CLIENT, c->g->upstream, c->up.fd);
	if (r < 0)
		return r;
	c->up.tls = s;
	if ((r = gnutls_server_name_set(s, GNUTLS_NAME_DNS, c->host, strlen(c->host))) < 0)
		return r;
	gnutls_session_set_verify_cert(s, c->host, 0);
	return handshake(s);
}

/* The sandbox's handshake, answered with its CA's certificate. */
static int client_tls(struct egress_conn *c, gnutls_certificate_credentials_t *own)
{
	gnutls_certificate_credentials_t creds;
	struct err e = ERR_INIT;
	int r = egress_ca_creds(c->b->ca, c->host, &creds, &e);
	if (r < 0) {
		log_msg(LOG_LEVEL_WARN, "egress: %s", e.msg);
		return -1;
	}
	if (r == 1)
		*own = creds;
	gnutls_session_t s;
	if (tls_session(&s, GNUTLS_SERVER, creds, c->client.fd) < 0)
		return -1;
	c->client.tls = s;
	return handshake(s) < 0 ? -1 : 0;
}

/* Answers the sandbox's request with a 502 saying why.  The request is
 * read first (its head, briefly) and the answer sent in one record: a
 * socket closed with unread bytes resets, and the sandbox would lose the
 * answer. */
static void reply_bad_gateway(struct egress_conn *c, const char *why)
{
	char in[8192];
	size_t got = 0;
	for (int waited = 0; waited < 2000 && got < sizeof(in) - 1;) {
		ssize_t n = egress_read(&c->client, in + got, sizeof(in) - 1 - got);
		if (n == 0 || n == -1)
			break;
		if (n > 0) {
			got += (size_t)n;
			in[got] = '\0';
			if (strstr(in, "\r\n\r\n"))
				break;
			continue;
		}
		struct pollfd p = {c->client.fd, POLLIN, 0};
		poll(&p, 1, 100);
		waited += 100;
	}
	char out[1024];
	int body = (int)strlen(why) + (int)strlen("deskbox egress: \n");
	int n = snprintf(out, sizeof(out),
			 "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n"
			 "Connection: close\r\nContent-Length: %d\r\n\r\ndeskbox egress: %s\n",
			 body, why);
	egress_write(&c->client, out, (size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1);
}

/* Terminates TLS for c->host on both sides, then rewrites. */
static void serve_intercepted(struct egress_conn *c)
{
	egress_count(c->g, EGRESS_INTERCEPTED, 1);
	int up = upstream_tls(c);
	gnutls_certificate_credentials_t own = NULL;
	if (client_tls(c, &own) < 0) {
		if (own)
			gnutls_certificate_free_credentials(own);
		return;
	}
	if (up < 0) {
		char why[300];
		if (up == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
			egress_count(c->g, EGRESS_UPSTREAM_BAD, 1);
			snprintf(why, sizeof(why), "the certificate of '%s' failed verification",
				 c->host);
		} else {
			snprintf(why, sizeof(why), "TLS to '%s' (%s) failed: %s", c->host, c->dst,
				 gnutls_strerror(up));
		}
		log_msg(LOG_LEVEL_WARN, "egress: sandbox %s: %s", c->b->addr, why);
		fcntl(c->client.fd, F_SETFL, fcntl(c->client.fd, F_GETFL) | O_NONBLOCK);
		reply_bad_gateway(c, why);
	} else {
		struct egress_rw *rw;
		if (egress_rw_new(c, &rw) == 0)
			egress_relay(c, rw);
	}
	gnutls_bye(c->client.tls, GNUTLS_SHUT_WR);
	if (own)
		gnutls_certificate_free_credentials(own);
}

static void serve(struct egress_conn *c)
{
	struct sockaddr_in dst;
	socklen_t len = sizeof(dst);
	if (getsockopt(c->client.fd, SOL_IP, SO_ORIGINAL_DST, &dst, &len) < 0)
		return;
	char ip[16];
	inet_ntop(AF_INET, &dst.sin_addr, ip, sizeof(ip));
	snprintf(c->dst, sizeof(c->dst), "%s:%u", ip, ntohs(dst.sin_port));
	char host[SECRETS_HOST_MAX + 1];
	/* Only the web ports of a sandbox with secrets are looked into; the
	 * rest (everything, with --egress-proxy) is relayed at once: a
	 * protocol whose server speaks first must not wait for the client. */
	int port = ntohs(dst.sin_port), kind = 0;
	if ((port == 80 || port == 443) && c->b->n)
		kind = egress_classify(c, host, sizeof(host));
	if (kind < 0 || (c->up.fd = egress_dial(c->g, &dst)) < 0)
		return;
	egress_count(c->g, EGRESS_CONNECTIONS, 1);
	if (kind == 1 && secrets_any_for(c->g->secrets, host, c->b->n, c->b->name_p)) {
		snprintf(c->host, sizeof(c->host), "%s", host);
		serve_intercepted(c);
	} else if (kind == 2) {
		struct egress_rw *rw;
		if (egress_rw_new(c, &rw) == 0)
			egress_relay(c, rw);
	} else {
		egress_relay(c, NULL);
	}
}

static void *conn_main(void *arg)
{
	struct egress_conn *c = arg;
	struct egress *g = c->g;
	serve(c);
	if (c->up.tls)
		gnutls_deinit(c->up.tls);
	if (c->client.tls)
		gnutls_deinit(c->client.tls);
	if (c->up.fd >= 0)
		close(c->up.fd);
	close(c->client.fd);
	egress_binding_put(g, c->b);
	free(c);
	pthread_mutex_lock(&g->mu);
	if (--g->active == 0)
		pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

static void start_conn(struct egress *g, int fd)
{
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	char addr[16];
	struct egress_binding *b = NULL;
	if (getpeername(fd, (struct sockaddr *)&peer, &len) == 0 && peer.sin_family == AF_INET &&
	    inet_ntop(AF_INET, &peer.sin_addr, addr, sizeof(addr)))
		b = egress_binding_get(g, addr);
	struct egress_conn *c = b ? calloc(1, sizeof(*c)) : NULL;
	pthread_mutex_lock(&g->mu);
	int room = g->active < MAX_CONNS;
	if (c && room)
		g->active++;
	pthread_mutex_unlock(&g->mu);
	pthread_t t;
	pthread_attr_t attr;
	if (c && room) {
		*c = (struct egress_conn){.g = g, .b = b, .client = {fd, NULL}, .up = {-1, NULL}};
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int r = pthread_create(&t, &attr, conn_main, c);
		pthread_attr_destroy(&attr);
		if (r == 0)
			return;
		pthread_mutex_lock(&g->mu);
		g->active--;
		pthread_mutex_unlock(&g->mu);
	}
	free(c);
	if (b)
		egress_binding_put(g, b);
	close(fd);
}

static void *accept_main(void *arg)
{
	struct egress *g = arg;
	while (!__atomic_load_n(&g->stopping, __ATOMIC_RELAXED)) {
		struct pollfd p = {g->listen_fd, POLLIN, 0};
		if (poll(&p, 1, 500) <= 0)
			continue;
		int fd = accept4(g->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			start_conn(g, fd);
	}
	return NULL;
}

static int listen_any(struct egress *g, struct err *e)
{
	g->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	if (g->listen_fd < 0 || bind(g->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(g->listen_fd, 128) < 0 ||
	    getsockname(g->listen_fd, (struct sockaddr *)&a, &len) < 0)
		return err_sys(e, ERR_UNAVAILABLE, errno, "egress proxy: listening");
	g->port = ntohs(a.sin_port);
	return 0;
}

int egress_open(struct egress **out, struct secrets *s, const struct egress_config *cfg,
		struct err *e)
{
	struct egress *g = calloc(1, sizeof(*g));
	if (!g)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	g->secrets = s;
	g->listen_fd = -1;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cond, NULL);
	int rc = gnutls_certificate_allocate_credentials(&g->upstream);
	if (rc == 0 && (rc = gnutls_certificate_set_x509_system_trust(g->upstream)) < 0)
		log_msg(LOG_LEVEL_WARN, "egress: the system's CAs: %s", gnutls_strerror(rc));
	if (rc >= 0 && cfg && cfg->proxy_url &&
	    egress_proxy_parse(cfg->proxy_url, &g->proxy, e) < 0) {
		egress_close(g);
		return err_code(e);
	}
	if (rc >= 0 && cfg && cfg->ca_file &&
	    (rc = gnutls_certificate_set_x509_trust_file(g->upstream, cfg->ca_file,
							 GNUTLS_X509_FMT_PEM)) <= 0) {
		int r = err_set(e, ERR_INVALID, EINVAL, "--egress-ca-file '%s': %s", cfg->ca_file,
				rc == 0 ? "no certificate in it" : gnutls_strerror(rc));
		egress_close(g);
		return r;
	}
	if (listen_any(g, e) < 0 || pthread_create(&g->thread, NULL, accept_main, g) != 0) {
		egress_close(g);
		return e->kind ? err_code(e) : err_set(e, ERR_INTERNAL, EAGAIN, "egress thread");
	}
	*out = g;
	return 0;
}

void egress_close(struct egress *g)
{
	if (!g)
		return;
	__atomic_store_n(&g->stopping, 1, __ATOMIC_RELAXED);
	if (g->thread)
		pthread_join(g->thread, NULL);
	pthread_mutex_lock(&g->mu);
	while (g->active)
		pthread_cond_wait(&g->cond, &g->mu);
	pthread_mutex_unlock(&g->mu);
	while (g->n_bindings)
		egress_unbind(g, g->bindings[0]->addr);
	if (g->listen_fd >= 0)
		close(g->listen_fd);
	if (g->upstream)
		gnutls_certificate_free_credentials(g->upstream);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->mu);
	free(g);
}
