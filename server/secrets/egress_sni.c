/* egress_sni: the server name of a TLS ClientHello, read from the bytes
 * a client sent first (peeked, not consumed).
 *
 * SECURITY: every length comes from the sandbox and is checked against
 * what was received before it is used. */
#include "internal.h"

#include <ctype.h>
#include <string.h>

static unsigned be16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

/* The server_name extension's body at `p` (n bytes). */
static int sni_ext(const unsigned char *p, size_t n, char *out, size_t size)
{
	if (n < 2 || be16(p) + 2u > n)
		return -2;
	size_t end = 2 + be16(p);
	for (size_t i = 2; i + 3 <= end;) {
		unsigned type = p[i], len = be16(p + i + 1);
		if (i + 3 + len > end)
			return -2;
		if (type == 0) { /* host_name */
			if (len == 0 || len >= size || len > SECRETS_HOST_MAX)
				return -2;
			for (unsigned k = 0; k < len; k++) {
				unsigned char c = p[i + 3 + k];
				if (!isalnum(c) && c != '-' && c != '.')
					return -2;
				out[k] = (char)tolower(c);
			}
			out[len] = '\0';
			return 1;
		}
		i += 3 + len;
	}
	return 0;
}

int egress_sni(const unsigned char *buf, size_t len, char *out, size_t size)
{
	/* Record header: type 22 (handshake), version, length. */
	if (len < 5)
		return len && buf[0] != 22 ? -2 : -1;
	if (buf[0] != 22 || buf[1] != 3)
		return -2;
	size_t rec = be16(buf + 3);
	if (rec < 4)
		return -2;
	if (len < 5 + rec)
		return -1; /* a ClientHello in one record: wait for all of it */
	const unsigned char *h = buf + 5;
	/* Handshake header: type 1 (client_hello), 24-bit length. */
	size_t hl = (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
	if (h[0] != 1 || hl + 4 > rec)
		return -2;
	const unsigned char *p = h + 4;
	size_t n = hl, i = 2 + 32; /* version, random */
	if (i + 1 > n)
		return -2;
	i += 1 + p[i]; /* session id */
	if (i + 2 > n)
		return -2;
	i += 2 + be16(p + i); /* cipher suites */
	if (i + 1 > n)
		return -2;
	i += 1 + p[i]; /* compression methods */
	if (i == n)
		return 0; /* no extensions */
	if (i + 2 > n || i + 2 + be16(p + i) > n)
		return -2;
	size_t end = i + 2 + be16(p + i);
	for (i += 2; i + 4 <= end;) {
		unsigned type = be16(p + i), elen = be16(p + i + 2);
		if (i + 4 + elen > end)
			return -2;
		if (type == 0)
			return sni_ext(p + i + 4, elen, out, size);
		i += 4 + elen;
	}
	return 0;
}
