#include "log.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "text.h"

static enum log_format format = LOG_FORMAT_TEXT;
static __thread const char *request_id;

static const char *const level_names[] = {
    [LOG_LEVEL_DEBUG] = "debug",
    [LOG_LEVEL_INFO] = "info",
    [LOG_LEVEL_WARN] = "warn",
    [LOG_LEVEL_ERROR] = "error",
};

void log_set_format(enum log_format f)
{
	format = f;
}

int log_format_parse(const char *name, enum log_format *out)
{
	if (name && strcmp(name, "text") == 0)
		*out = LOG_FORMAT_TEXT;
	else if (name && strcmp(name, "json") == 0)
		*out = LOG_FORMAT_JSON;
	else
		return -1;
	return 0;
}

void log_set_request_id(const char *id)
{
	request_id = id;
}

const char *log_request_id(void)
{
	return request_id;
}

/* `s` as the inside of a JSON string into out (size > 6). */
static void json_escape(const char *s, char *out, size_t size)
{
	size_t n = 0;
	for (; *s && n + 7 < size; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			out[n++] = '\\';
			out[n++] = (char)c;
		} else if (c < 0x20) {
			n += (size_t)snprintf(out + n, size - n, "\\u%04x", c);
		} else {
			out[n++] = (char)c;
		}
	}
	out[n] = '\0';
}

static void sink_stderr(void *cls, enum log_level level, const char *line)
{
	/* One stdio call per line: glibc locks the stream for it, so lines
	 * from different threads do not interleave. */
	const char *rid = request_id;
	if (format == LOG_FORMAT_TEXT) {
		if (rid)
			fprintf(stderr, "deskboxd: [%s] %s\n", rid, line);
		else
			fprintf(stderr, "deskboxd: %s\n", line);
		return;
	}
	char msg[LOG_LINE_MAX * 6 + 1], id[160] = "", clean[LOG_LINE_MAX];
	if (!utf8_valid(line, strlen(line))) {
		/* JSON strings are UTF-8: stray bytes (a path, a title) become '?'. */
		snprintf(clean, sizeof(clean), "%s", line);
		for (char *p = clean; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		line = clean;
	}
	json_escape(line, msg, sizeof(msg));
	if (rid)
		json_escape(rid, id, sizeof(id));
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(stderr, "{\"ts\":%lld.%03ld,\"level\":\"%s\",\"msg\":\"%s\"%s%s%s}\n",
		(long long)ts.tv_sec, ts.tv_nsec / 1000000, level_names[level], msg,
		rid ? ",\"request_id\":\"" : "", id, rid ? "\"" : "");
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
	for (size_t i = 0; name && i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (strcasecmp(name, level_names[i]) == 0)
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
