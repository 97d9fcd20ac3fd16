/* The logger: threshold, sink, one line per message. */
#include <string.h>

#include "common/log.h"
#include "tests/harness.h"

struct capture_sink {
	int calls;
	enum log_level level;
	char line[LOG_LINE_MAX];
};

static void capture(void *cls, enum log_level level, const char *line)
{
	struct capture_sink *c = cls;
	c->calls++;
	c->level = level;
	snprintf(c->line, sizeof(c->line), "%s", line);
}

int main(void)
{
	struct capture_sink c = {0};
	log_configure(LOG_LEVEL_WARN, capture, &c);
	log_msg(LOG_LEVEL_INFO, "below the threshold");
	is_int(c.calls, 0, "a message below the threshold is dropped");
	log_msg(LOG_LEVEL_ERROR, "sandbox %s: %d", "abc", 7);
	is_int(c.calls, 1, "a message at or above the threshold reaches the sink");
	is_int(c.level, LOG_LEVEL_ERROR, "the sink gets the level");
	is_str(c.line, "sandbox abc: 7", "the message is formatted");
	log_msg(LOG_LEVEL_WARN, "mhd says %s\n", "hi");
	is_str(c.line, "mhd says hi", "a trailing newline is cut");
	char big[3 * LOG_LINE_MAX];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_msg(LOG_LEVEL_WARN, "%s", big);
	is_int(strlen(c.line), LOG_LINE_MAX - 1, "a long message is cut to one line");

	is_int(log_level_parse("debug", LOG_LEVEL_INFO), LOG_LEVEL_DEBUG, "parse debug");
	is_int(log_level_parse("WARN", LOG_LEVEL_INFO), LOG_LEVEL_WARN, "parse ignores case");
	is_int(log_level_parse("loud", LOG_LEVEL_INFO), LOG_LEVEL_INFO, "unknown name falls back");
	is_int(log_level_parse(NULL, LOG_LEVEL_ERROR), LOG_LEVEL_ERROR, "no name falls back");
	log_configure(LOG_LEVEL_INFO, NULL, NULL);
	return done();
}
