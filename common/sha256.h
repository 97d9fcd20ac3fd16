/* sha256: SHA-256 (FIPS 180-4), incremental.  deskbox links no crypto
 * library; this is only for content digests (upload receipts), never for
 * secrets, so it makes no attempt at constant time. */
#ifndef DESKBOX_COMMON_SHA256_H
#define DESKBOX_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32
#define SHA256_HEX_LEN	  64

struct sha256 {
	uint32_t h[8];
	uint64_t total; /* bytes hashed so far */
	unsigned char buf[64];
	size_t buf_len;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* Writes the digest; `s` must be re-initialised before reuse. */
void sha256_final(struct sha256 *s, unsigned char out[SHA256_DIGEST_LEN]);
/* Whether the CPU's SHA extensions are in use (x86 SHA-NI). */
int sha256_accelerated(void);
/* For tests: use the plain C rounds (1) or pick again (0). */
void sha256_force_portable(int on);
/* Lowercase hex of the digest, NUL-terminated (SHA256_HEX_LEN + 1 bytes). */
void sha256_final_hex(struct sha256 *s, char out[SHA256_HEX_LEN + 1]);

#endif
