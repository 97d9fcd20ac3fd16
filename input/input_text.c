/* UTF-8 text to key presses with keysyms. */
#include <errno.h>
#include <string.h>

#include <X11/keysym.h>

#include "common/text.h"
#include "internal.h"

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
	size_t i = 0;
	while (i < len) {
		uint32_t cp;
		size_t next = i;
		if (utf8_decode(text, len, &next, &cp) < 0)
			return err_set(e, ERR_INVALID, EILSEQ, "invalid utf-8 at byte offset %zu",
				       i);
		size_t n = next - i;
		uint32_t keysym;
		if (cp == '\r' && i + 1 < len && text[i + 1] == '\n') {
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
