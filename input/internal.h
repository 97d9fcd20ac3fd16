/* input module internals shared by input.c, keys.c and text.c. */
#ifndef DESKBOX_INPUT_INTERNAL_H
#define DESKBOX_INPUT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "input.h"

/* Appends one key press (down=1) or release (down=0). */
int input_push_key(struct input_seq *s, uint32_t keysym, int down, struct err *e);

/* Decodes one UTF-8 sequence at s[0..len).  Returns its length (1..4) and
 * sets *cp, or 0 for invalid input: overlong forms, surrogates, code points
 * above U+10FFFF, stray continuation bytes and truncated sequences. */
size_t input_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);

/* The keysym X11 uses for a printable code point: Latin-1 as is, everything
 * else 0x01000000 + code point. */
uint32_t input_codepoint_keysym(uint32_t cp);

#endif
