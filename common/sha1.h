/* sha1: SHA-1 (FIPS 180-4), for the WebSocket handshake's Sec-WebSocket-Accept
 * (RFC 6455 fixes the hash) and for keeping viewer tokens hashed in memory
 * (random 256-bit tokens: only preimage resistance matters, which SHA-1
 * still has).  Not for signatures or anything needing collision resistance. */
#ifndef DESKBOX_COMMON_SHA1_H
#define DESKBOX_COMMON_SHA1_H

#include <stddef.h>
#include <stdint.h>

#define SHA1_LEN 20

struct sha1 {
	uint32_t h[5];
	uint64_t len; /* bytes hashed so far */
	unsigned char block[64];
	size_t fill;
};

void sha1_init(struct sha1 *s);
void sha1_update(struct sha1 *s, const void *data, size_t len);
void sha1_final(struct sha1 *s, unsigned char out[SHA1_LEN]);

/* One-shot: the digest of `len` bytes. */
void sha1(const void *data, size_t len, unsigned char out[SHA1_LEN]);

#endif
