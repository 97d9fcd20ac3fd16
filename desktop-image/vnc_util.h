/* deskbox-vnc's log (vnc_util.c), used by both vnc.c and
 * vnc_input.c. */
#ifndef DESKBOX_VNC_UTIL_H
#define DESKBOX_VNC_UTIL_H

#include <stdint.h>

/* One line on stderr, prefixed "deskbox-vnc: ". */
void vnc_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Nonzero when DESKBOX_VNC_DEBUG is set: vnc_debug() then logs too. */
extern int vnc_debug_enabled;
#define vnc_debug(...)                                                                             \
	do {                                                                                       \
		if (vnc_debug_enabled)                                                             \
			vnc_say(__VA_ARGS__);                                                      \
	} while (0)

#endif
