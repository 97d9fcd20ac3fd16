#include "log.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static void sink_stderr(void *cls, enum log_level level, const char *line)
{
	/* One stdio call per line: glibc locks the stream for it, so lines
	 * from different threads do not interleave. */
	fprintf(stderr, "deskboxd: %s\n", line);
}

static struct {
	enum log_level threshold;
	log_sink_fn *sink;
	void *cls;
} logger = {LOG_LEVEL_INFO, sink_stderr, NULL};

void log_configure(enum log_level threshold, log_sink_fn *sink, void *cls)
{
	logger.threshold = threshold;
	logger.sink = sink ? sink : sink_stderr;
	logger.cls = sink ? cls : NULL;
}

enum log_level log_level_parse(const char *name, enum log_level fallback)
{
	static const char *const names[] = {
	    [LOG_LEVEL_DEBUG] = "debug",
	    [LOG_LEVEL_INFO] = "info",
	    [LOG_LEVEL_WARN] = "warn",
	    [LOG_LEVEL_ERROR] = "error",
	};
	for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(name, names[i]) == 0)
			return (enum log_level)i;
	return fallback;
}

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	if (level < logger.threshold)
		return;
	char line[LOG_LINE_MAX];
	vsnprintf(line, sizeof(line), fmt, ap);
	/* Messages from other libraries (libmicrohttpd's) end in a newline;
	 * the sink adds its own. */
	size_t n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	logger.sink(logger.cls, level, line);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}
