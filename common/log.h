/* log: the one way library code reports what no caller can act on (a
 * teardown step that failed, a client that went away).  Errors a caller can
 * act on travel up in a `struct err` instead (error.h).
 *
 * The process has one logger: main() configures it with log_configure()
 * before it starts any thread; after that it is only read, so log_msg() is
 * safe from every thread.  Until then (and in tests) messages at
 * LOG_LEVEL_INFO and above go to the default sink. */
#ifndef DESKBOX_COMMON_LOG_H
#define DESKBOX_COMMON_LOG_H

#include <stdarg.h>

/* Prefixed LOG_LEVEL_ because <syslog.h> takes LOG_INFO and LOG_DEBUG. */
enum log_level {
	LOG_LEVEL_DEBUG, /* detail for finding a problem; off by default */
	LOG_LEVEL_INFO,	 /* an event worth a line: a client left, files swept */
	LOG_LEVEL_WARN,	 /* something failed and was worked around or left behind */
	LOG_LEVEL_ERROR, /* a request or task failed on the server's side */
};

/* Receives each message at or above the threshold: one line without the
 * newline, at most LOG_LINE_MAX - 1 bytes (longer ones are cut). */
typedef void log_sink_fn(void *cls, enum log_level level, const char *line);

#define LOG_LINE_MAX 1024

/* Sets the threshold and the sink.  A NULL sink is the default: one line on
 * stderr, "deskboxd: " + the message. */
void log_configure(enum log_level threshold, log_sink_fn *sink, void *cls);

/* How the default sink writes a line: "deskboxd: message" (text), or one
 * JSON object {"ts","level","msg","request_id"} per line (json), which a
 * log collector can read without parsing prose. */
enum log_format {
	LOG_FORMAT_TEXT,
	LOG_FORMAT_JSON,
};
void log_set_format(enum log_format format);
/* "text" or "json" into *out; -1 for anything else. */
int log_format_parse(const char *name, enum log_format *out);

/* The request the calling thread works for (the http layer sets it around
 * each handler, NULL after): the default sink adds it to every line, so a
 * client's X-Request-Id finds the server's lines about it.  The string
 * must outlive the setting. */
void log_set_request_id(const char *id);
const char *log_request_id(void);

/* The level called `name` ("debug", "info", "warn", "error"), or `fallback`
 * when `name` is NULL or none of those. */
enum log_level log_level_parse(const char *name, enum log_level fallback);

/* Formats and hands one message to the sink when `level` reaches the
 * threshold.  Like error messages: lowercase, no final period, no newline. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#endif
