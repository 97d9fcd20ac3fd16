/* The libmicrohttpd daemon: the listen address, TLS, the connection limits
 * and the guard (internal.h), start and stop.  The requests themselves are
 * http.c's. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"
#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"

/* A PEM certificate chain or key is a few KB; this only bounds a mistake
 * such as pointing --tls-cert at a big file. */
#define TLS_FILE_MAX (1u << 20)

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http *h = cls;
	unsigned long suppressed = 0;
	if (h->guard && !http_guard_log_allowed(h->guard, &suppressed))
		return;
	char line[LOG_LINE_MAX];
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	if (suppressed)
		log_msg(LOG_LEVEL_WARN, "http: %s (%lu similar messages dropped)", line,
			suppressed);
	else
		log_msg(LOG_LEVEL_WARN, "http: %s", line);
}

static int parse_listen(const char *listen, struct sockaddr_in *sa, struct err *e)
{
	const char *colon = strrchr(listen, ':');
	if (!colon)
		return err_set(e, ERR_INVALID, 0, "listen address '%s' is not ADDR:PORT", listen);
	char host[64];
	size_t hl = (size_t)(colon - listen);
	if (hl == 0 || hl >= sizeof(host))
		return err_set(e, ERR_INVALID, 0, "bad listen address '%s'", listen);
	memcpy(host, listen, hl);
	host[hl] = '\0';
	char *end;
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || port > 65535)
		return err_set(e, ERR_INVALID, 0, "bad port in '%s'", listen);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (strcmp(host, "localhost") == 0)
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return err_set(e, ERR_INVALID, 0, "bad IPv4 address '%s'", host);
	return 0;
}

/* The certificate and key files' contents, for MHD_OPTION_HTTPS_MEM_*. */
static int read_tls_files(const struct http_opts *o, char **cert, char **key, struct err *e)
{
	*cert = *key = NULL;
	if (!o->tls_cert_file != !o->tls_key_file)
		return err_set(e, ERR_INVALID, 0, "TLS needs both a certificate and a key file");
	if (!o->tls_cert_file)
		return 0;
	if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
		return err_set(e, ERR_UNSUPPORTED, 0, "this libmicrohttpd was built without TLS");
	size_t len;
	if (fs_read_file(o->tls_cert_file, TLS_FILE_MAX, cert, &len, e) < 0)
		return err_wrap(e, "TLS certificate '%s'", o->tls_cert_file);
	if (fs_read_file(o->tls_key_file, TLS_FILE_MAX, key, &len, e) < 0) {
		free(*cert);
		*cert = NULL;
		return err_wrap(e, "TLS key '%s'", o->tls_key_file);
	}
	return 0;
}

/* MHD_start_daemon with deskboxd's options.  Thread per connection, so
 * handlers may block; MHD_USE_POLL so a connection's socket may be any fd
 * (select() stops at FD_SETSIZE, 1024). */
static struct MHD_Daemon *start_daemon(struct http *h, const struct sockaddr_in *sa,
				       const char *cert, const char *key)
{
	const struct http_opts *o = &h->o;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
			 MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE;
	struct MHD_OptionItem tls[] = {
	    {MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cert},
	    {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key},
	    {MHD_OPTION_END, 0, NULL},
	};
	if (cert)
		flags |= MHD_USE_TLS;
	else
		tls[0].option = MHD_OPTION_END;
	return MHD_start_daemon(
	    flags, 0, NULL, NULL, http_on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
	    MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)sa, MHD_OPTION_NOTIFY_COMPLETED,
	    http_on_completed, h, MHD_OPTION_URI_LOG_CALLBACK, http_on_uri, h,
	    MHD_OPTION_NOTIFY_CONNECTION, http_guard_notify, h->guard, MHD_OPTION_CONNECTION_LIMIT,
	    o->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->max_per_address,
	    MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)(128 * 1024), MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_ARRAY, tls,
	    MHD_OPTION_END);
}

static void daemon_release(struct http *h)
{
	http_guard_free(h->guard);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->mu);
	free(h->token);
	free(h);
}

int http_new(struct http **out, const struct http_opts *o, struct err *e)
{
	struct sockaddr_in sa;
	int r = parse_listen(o->listen, &sa, e);
	if (r < 0)
		return r;
	_cleanup_free_ char *cert = NULL;
	_cleanup_free_ char *key = NULL;
	if ((r = read_tls_files(o, &cert, &key, e)) < 0)
		return r;
	struct http *h = calloc(1, sizeof(*h));
	if (!h)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	h->o = *o;
	h->loopback = (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
	h->tls = cert != NULL;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cond, NULL);
	h->token = strdup(o->token);
	if (!h->token) {
		daemon_release(h);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	if (http_guard_new(&h->guard, (long long)o->header_timeout_s * 1000, o->max_waiting, e) <
	    0) {
		daemon_release(h);
		return err_code(e);
	}
	h->daemon = start_daemon(h, &sa, cert, key);
	if (key)
		explicit_bzero(key, strlen(key));
	if (!h->daemon) {
		int saved = errno;
		daemon_release(h);
		return err_set(e, ERR_INTERNAL, saved, "cannot listen on '%s'%s", o->listen,
			       cert ? " (or the TLS certificate and key were refused)" : "");
	}
	const union MHD_DaemonInfo *info =
	    MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
	h->port = info ? info->port : ntohs(sa.sin_port);
	*out = h;
	return 0;
}

uint16_t http_port(const struct http *h)
{
	return h->port;
}

int http_loopback(const struct http *h)
{
	return h->loopback;
}

int http_tls(const struct http *h)
{
	return h->tls;
}

void http_free(struct http *h)
{
	if (!h)
		return;
	/* Upgraded sessions on their own threads end first (the caller has
	 * told them to stop): they still use their MHD connection. */
	pthread_mutex_lock(&h->mu);
	while (h->n_sessions)
		pthread_cond_wait(&h->cond, &h->mu);
	pthread_mutex_unlock(&h->mu);
	MHD_stop_daemon(h->daemon);
	daemon_release(h);
}
