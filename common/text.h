/* text: UTF-8 and base64, for text that crosses JSON. */
#ifndef DESKBOX_COMMON_TEXT_H
#define DESKBOX_COMMON_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one code point at s[*i] (len bytes in all), advancing *i.
 * Returns 0, or -1 for invalid UTF-8 (overlong forms, surrogates, values past
 * U+10FFFF, truncated or stray continuation bytes); *i is then unchanged. */
int utf8_decode(const char *s, size_t len, size_t *i, uint32_t *cp);

/* 1 when all `len` bytes are valid UTF-8. */
int utf8_valid(const char *s, size_t len);

/* A copy of `s` with every invalid sequence replaced by U+FFFD; malloc'd,
 * NUL-terminated, NULL on allocation failure. */
char *utf8_sanitize(const char *s, size_t len);

/* The length of the longest prefix of NUL-terminated `s` that is at most
 * `max` bytes and does not end inside a UTF-8 character: where a message
 * shows a bounded piece of an untrusted string, cut there (a "%.64s" cut in
 * the middle of "é" made the JSON answer invalid UTF-8). */
size_t utf8_cut(const char *s, size_t max);

/* printf arguments for "%.*s" showing at most `max` bytes of `s`, cut at a
 * character boundary: err_set(e, ..., "no key '%.*s'", UTF8_CUT(name, 64)). */
#define UTF8_CUT(s, max) (int)utf8_cut((s), (max)), (s)

/* Lowercase hex of `len` bytes into `out` (2 * len + 1 bytes), NUL-terminated. */
void hex_encode(const void *data, size_t len, char *out);

/* Standard base64 (with padding) of `len` bytes; malloc'd, NUL-terminated. */
char *base64_encode(const void *data, size_t len);

/* Decodes base64, standard or URL-safe, padding optional, into a malloc'd
 * buffer with a NUL after the bytes (*len of them); NULL on a character
 * outside the alphabet or on no memory. */
char *base64_decode(const char *s, size_t *len);

/* 1 when `presented` equals the secret `expected`, in time that depends
 * only on the length of `expected` (tokens, token hashes). */
int text_equal_secret(const char *presented, const char *expected);

#endif
