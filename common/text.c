#include "text.h"

#include <stdlib.h>
#include <string.h>

int utf8_decode(const char *str, size_t len, size_t *i, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)str + *i;
	size_t left = len - *i;
	if (left == 0)
		return -1;
	uint32_t c = s[0];
	size_t n;
	uint32_t min;
	if (c < 0x80) {
		*cp = c;
		*i += 1;
		return 0;
	} else if ((c & 0xe0) == 0xc0) {
		n = 2;
		min = 0x80;
		c &= 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		n = 3;
		min = 0x800;
		c &= 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		n = 4;
		min = 0x10000;
		c &= 0x07;
	} else {
		return -1;
	}
	if (left < n)
		return -1;
	for (size_t k = 1; k < n; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return -1;
		c = (c << 6) | (s[k] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return -1;
	*cp = c;
	*i += n;
	return 0;
}

int utf8_valid(const char *s, size_t len)
{
	size_t i = 0;
	uint32_t cp;
	while (i < len)
		if (utf8_decode(s, len, &i, &cp) < 0)
			return 0;
	return 1;
}

char *utf8_sanitize(const char *s, size_t len)
{
	/* Each bad byte becomes 3 bytes at most. */
	char *out = malloc(len * 3 + 1);
	if (!out)
		return NULL;
	size_t i = 0, o = 0;
	while (i < len) {
		size_t start = i;
		uint32_t cp;
		if (utf8_decode(s, len, &i, &cp) == 0) {
			memcpy(out + o, s + start, i - start);
			o += i - start;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	return out;
}

void hex_encode(const void *data, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * len] = '\0';
}

char *base64_encode(const void *data, size_t len)
{
	static const char tbl[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = data;
	size_t olen = (len + 2) / 3 * 4;
	char *out = malloc(olen + 1);
	if (!out)
		return NULL;
	size_t o = 0, i = 0;
	for (; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		out[o++] = tbl[v >> 18];
		out[o++] = tbl[(v >> 12) & 63];
		out[o++] = tbl[(v >> 6) & 63];
		out[o++] = tbl[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		out[o++] = tbl[v >> 18];
		out[o++] = tbl[(v >> 12) & 63];
		out[o++] = i + 1 < len ? tbl[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
	return out;
}

static int b64_value(int ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+' || ch == '-')
		return 62;
	if (ch == '/' || ch == '_')
		return 63;
	return -1;
}

char *base64_decode(const char *s, size_t *len)
{
	size_t n = strlen(s);
	char *out = malloc(n / 4 * 3 + 4);
	if (!out)
		return NULL;
	size_t k = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n && s[i] != '='; i++) {
		int v = b64_value((unsigned char)s[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[k++] = (char)((acc >> bits) & 0xff);
		}
	}
	out[k] = '\0';
	*len = k;
	return out;
}

int text_equal_secret(const char *presented, const char *expected)
{
	size_t lp = strlen(presented), le = strlen(expected);
	/* Compare every byte of the expected token whatever the presented one
	 * holds, so the time taken says nothing about where they differ. */
	unsigned char diff = (unsigned char)(lp != le);
	for (size_t i = 0; i < le; i++)
		diff |= (unsigned char)(expected[i] ^ (i < lp ? presented[i] : 0));
	return diff == 0;
}

size_t utf8_cut(const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	if (n < max)
		return n;
	/* s[n] is the first byte left out: while it continues a character,
	 * the character started before the cut (at most 3 bytes back). */
	for (int k = 0; k < 3 && n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80; k++)
		n--;
	return n;
}
