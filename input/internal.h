/* input module internals shared by input.c, keys.c and text.c. */
#ifndef DESKBOX_INPUT_INTERNAL_H
#define DESKBOX_INPUT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "input.h"

/* Appends one key press (down=1) or release (down=0). */
int input_push_key(struct input_seq *s, uint32_t keysym, int down, struct err *e);

/* The keysym X11 uses for a printable code point: Latin-1 as is, everything
 * else 0x01000000 + code point. */
uint32_t input_codepoint_keysym(uint32_t cp);

#endif
