/* egress_proxy: the user's own upstream HTTP proxy (--egress-proxy): the
 * egress proxy reaches every real host through an HTTP CONNECT tunnel. */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <nettle/base64.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define ANSWER_MAX 8192
#define ANSWER_MS  10000

int egress_all(const struct egress *g)
{
	return g->proxy.set;
}

static int resolve(const char *host, const char *port, struct sockaddr_in *out, struct err *e)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
	int r = getaddrinfo(host, port, &hints, &res);
	if (r != 0)
		return err_set(e, ERR_INVALID, EINVAL, "--egress-proxy: '%s': %s", host,
			       gai_strerror(r));
	memcpy(out, res->ai_addr, sizeof(*out));
	freeaddrinfo(res);
	return 0;
}

int egress_proxy_parse(const char *url, struct egress_upstream *out, struct err *e)
{
	memset(out, 0, sizeof(*out));
	if (strncmp(url, "http://", 7) != 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "--egress-proxy: '%s' is not http://[user:password@]host:port", url);
	char rest[512];
	snprintf(rest, sizeof(rest), "%s", url + 7);
	rest[strcspn(rest, "/")] = '\0';
	char *hostport = rest, *at = strrchr(rest, '@');
	if (at) {
		*at = '\0';
		hostport = at + 1;
		size_t n = strlen(rest);
		if (BASE64_ENCODE_RAW_LENGTH(n) + 48 > sizeof(out->auth))
			return err_set(e, ERR_INVALID, EINVAL,
				       "--egress-proxy: credentials too long");
		char b64[sizeof(out->auth)];
		base64_encode_raw(b64, n, (const uint8_t *)rest);
		b64[BASE64_ENCODE_RAW_LENGTH(n)] = '\0';
		snprintf(out->auth, sizeof(out->auth), "Proxy-Authorization: Basic %s\r\n", b64);
		explicit_bzero(rest, n);
	}
	char *colon = strrchr(hostport, ':');
	if (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return err_set(e, ERR_INVALID, EINVAL, "--egress-proxy: '%s' names no port", url);
	*colon = '\0';
	if (resolve(hostport, colon + 1, &out->addr, e) < 0)
		return err_code(e);
	out->set = 1;
	return 0;
}

/* Reads the proxy's answer up to its blank line, byte by byte: what
 * follows is the tunnel's and must stay in the socket. */
static int read_answer(int fd, char *buf, size_t size)
{
	size_t n = 0;
	while (n + 1 < size) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, ANSWER_MS) != 1 || recv(fd, buf + n, 1, 0) != 1)
			return -1;
		buf[++n] = '\0';
		if (n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0)
			return 0;
	}
	return -1;
}

int egress_proxy_connect(const struct egress_upstream *u, int fd, const struct sockaddr_in *dst)
{
	char ip[16], req[800], answer[ANSWER_MAX];
	inet_ntop(AF_INET, &dst->sin_addr, ip, sizeof(ip));
	unsigned port = ntohs(dst->sin_port);
	int len = snprintf(req, sizeof(req), "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n%s\r\n", ip,
			   port, ip, port, u->auth);
	struct egress_side s = {fd, NULL};
	if (egress_write(&s, req, (size_t)len) < 0 || read_answer(fd, answer, sizeof(answer)) < 0)
		return -1;
	/* "HTTP/1.1 200 Connection established" */
	return strncmp(answer, "HTTP/1.", 7) == 0 && strncmp(answer + 8, " 200", 4) == 0 ? 0 : -1;
}
