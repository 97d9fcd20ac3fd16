/* UTF-8 text to key presses with keysyms. */
#include <errno.h>
#include <string.h>

#include <X11/keysym.h>

#include "internal.h"

size_t input_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
	if (len == 0)
		return 0;
	unsigned char c = s[0];
	size_t n;
	uint32_t v, min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if (c >= 0xc2 && c <= 0xdf) { /* 0xc0/0xc1 only start overlongs */
		n = 2, v = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3, v = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) { /* 0xf5.. would exceed U+10FFFF */
		n = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return n;
}

uint32_t input_codepoint_keysym(uint32_t cp)
{
	/* X11 keysyms 0x20-0x7e and 0xa0-0xff are the Latin-1 characters
	 * themselves; everything else has a Unicode keysym (keysymdef.h). */
	if ((cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xff))
		return cp;
	return 0x01000000u + cp;
}

int input_seq_text(struct input_seq *s, const char *text, size_t len, struct err *e)
{
	return input_seq_text_paced(s, text, len, 0, e);
}

int input_seq_text_paced(struct input_seq *s, const char *text, size_t len, int32_t pause_ms,
			 struct err *e)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t i = 0;
	while (i < len) {
		uint32_t cp;
		size_t n = input_utf8_decode(p + i, len - i, &cp);
		if (n == 0)
			return err_set(e, ERR_INVALID, EILSEQ, "invalid utf-8 at byte offset %zu",
				       i);
		uint32_t keysym;
		if (cp == '\r' && i + 1 < len && p[i + 1] == '\n') {
			keysym = XK_Return;
			n = 2;
		} else if (cp == '\n' || cp == '\r') {
			keysym = XK_Return;
		} else if (cp == '\t') {
			keysym = XK_Tab;
		} else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
			/* NUL and control characters have no key a user could
			 * mean; sending e.g. 0x01000003 would type garbage. */
			return err_set(e, ERR_INVALID, EINVAL,
				       "control character U+%04X at byte offset %zu", cp, i);
		} else {
			keysym = input_codepoint_keysym(cp);
		}
		int r = input_push_key(s, keysym, 1, e);
		if (r == 0)
			r = input_push_key(s, keysym, 0, e);
		if (r == 0 && pause_ms > 0)
			r = input_seq_pause(s, pause_ms, e);
		if (r < 0)
			return r;
		i += n;
	}
	return 0;
}
