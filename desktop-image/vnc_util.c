/* deskbox-vnc's log: see vnc_util.h. */
#include "vnc_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int vnc_debug_enabled;

void vnc_say(const char *fmt, ...)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "deskbox-vnc: ");
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	while (len > (size_t)n && line[len - 1] == '\n')
		len--;
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}
