/* Calls to other nodes (cluster.h, "calls to other nodes"): a plain TCP
 * connection for the HTTP layer's forwarding, and whole requests through
 * libcurl for what a node asks another itself (a create placed there, a
 * list). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "internal.h"

#define CONNECT_MS 2000
#define CALL_MS	   (180 * 1000) /* the default: a create placed there may take this long */
#define ANSWER_MAX (64u << 20)

/* "http://host:port" into host and port. */
static int split(const char *advertise, char *host, size_t hs, char *port, size_t ps)
{
	const char *hp = strncmp(advertise, "http://", 7) == 0 ? advertise + 7 : advertise;
	const char *colon = strrchr(hp, ':');
	if (!colon || colon == hp || (size_t)(colon - hp) >= hs || strlen(colon + 1) >= ps)
		return -1;
	const char *h = hp;
	size_t hl = (size_t)(colon - hp);
	if (h[0] == '[' && hl > 2 && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	snprintf(host, hs, "%.*s", (int)hl, h);
	snprintf(port, ps, "%s", colon + 1);
	return 0;
}

static int connect_wait(int fd, const struct addrinfo *ai)
{
	int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
	if (r == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -1;
	struct pollfd pf = {.fd = fd, .events = POLLOUT};
	if (poll(&pf, 1, CONNECT_MS) != 1)
		return errno = ETIMEDOUT, -1;
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		return errno = err ? err : EIO, -1;
	return 0;
}

int cluster_connect(const char *advertise, struct err *e)
{
	char host[256], port[16];
	if (split(advertise, host, sizeof(host), port, sizeof(port)) < 0)
		return err_set(e, ERR_INTERNAL, EINVAL, "bad node address '%s'", advertise);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
	int g = getaddrinfo(host, port, &hints, &res);
	if (g != 0)
		return err_set(e, ERR_BAD_GATEWAY, EHOSTUNREACH, "node address '%s': %s", advertise,
			       gai_strerror(g));
	int fd = -1, saved = 0;
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		if (connect_wait(fd, ai) < 0) {
			saved = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0)
		return err_sys(e, ERR_BAD_GATEWAY, saved ? saved : EHOSTUNREACH,
			       "node at %s does not answer", advertise);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

struct answer {
	char *buf;
	size_t len;
};

static size_t on_data(char *data, size_t size, size_t n, void *cls)
{
	struct answer *a = cls;
	size_t len = size * n;
	if (a->len + len > ANSWER_MAX)
		return 0;
	char *nb = realloc(a->buf, a->len + len + 1);
	if (!nb)
		return 0;
	memcpy(nb + a->len, data, len);
	a->buf = nb;
	a->len += len;
	a->buf[a->len] = '\0';
	return len;
}

/* A JSON body, or (`in` not NULL) a tar streamed from `in`, chunked. */
static int perform(struct cluster *c, const char *advertise, const char *method, const char *path,
		   const char *auth, const char *body, FILE *in, int timeout_ms, long *status,
		   char **answer, size_t *len, struct err *e)
{
	CURL *h = curl_easy_init();
	if (!h)
		return err_set(e, ERR_INTERNAL, ENOMEM, "curl_easy_init failed");
	char url[CLUSTER_URL_MAX + 512], secret[512];
	snprintf(url, sizeof(url), "%s%s", advertise, path);
	snprintf(secret, sizeof(secret), CLUSTER_SECRET_HEADER ": %s", c->secret);
	struct curl_slist *hdr = curl_slist_append(NULL, secret);
	hdr = curl_slist_append(hdr, in ? "Content-Type: application/x-tar"
					: "Content-Type: application/json");
	hdr = curl_slist_append(hdr, "Expect:");
	if (auth && strlen(auth) < 400) {
		char a[512];
		snprintf(a, sizeof(a), "Authorization: %s", auth);
		hdr = curl_slist_append(hdr, a);
	}
	struct answer a = {0};
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	if (body)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	if (in) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_READDATA, in);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
	}
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_ms > 0 ? timeout_ms : CALL_MS));
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
	CURLcode rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
	if (rc != CURLE_OK) {
		free(a.buf);
		return err_set(e, ERR_BAD_GATEWAY, EHOSTUNREACH, "node at %s: %s", advertise,
			       curl_easy_strerror(rc));
	}
	*answer = a.buf;
	*len = a.len;
	return 0;
}

int cluster_call(struct cluster *c, const char *advertise, const char *method, const char *path,
		 const char *auth, const char *body, int timeout_ms, long *status, char **answer,
		 size_t *len, struct err *e)
{
	return perform(c, advertise, method, path, auth, body, NULL, timeout_ms, status, answer,
		       len, e);
}

int cluster_send(struct cluster *c, const char *advertise, const char *path, FILE *in,
		 int timeout_ms, long *status, char **answer, size_t *len, struct err *e)
{
	return perform(c, advertise, "POST", path, NULL, NULL, in, timeout_ms, status, answer, len,
		       e);
}
