#include "clock.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* clock_gettime() on these two clocks cannot fail on Linux (the vDSO
 * answers it), so there is no error to report. */
static struct timespec now(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts;
}

long long clock_mono_ms(void)
{
	struct timespec ts = now(CLOCK_MONOTONIC);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t clock_mono_ns(void)
{
	struct timespec ts = now(CLOCK_MONOTONIC);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

long long clock_wall_ms(void)
{
	struct timespec ts = now(CLOCK_REALTIME);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec clock_wall_after(long long ms)
{
	struct timespec ts = now(CLOCK_REALTIME);
	if (ms <= 0)
		return ts;
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static void sleep_ns(long long ns)
{
	if (ns <= 0)
		return;
	struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Clamped so that the conversion to nanoseconds cannot overflow (a
 * sleep of ~292 years is as good as forever). */
void clock_sleep_ms(long long ms)
{
	sleep_ns(ms > LLONG_MAX / 1000000 ? LLONG_MAX : ms * 1000000LL);
}

void clock_sleep_us(long long us)
{
	sleep_ns(us > LLONG_MAX / 1000 ? LLONG_MAX : us * 1000LL);
}

void clock_rfc3339(long long unix_ms, char *out, size_t size)
{
	time_t secs = (time_t)(unix_ms / 1000);
	struct tm tm;
	char buf[24];
	gmtime_r(&secs, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, size, "%s.%03dZ", buf, (int)(unix_ms % 1000));
}

long long clock_parse_rfc3339(const char *s)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return 0;
	long long ms = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 3)
				ms = ms * 10 + (*p - '0');
		for (; digits < 3; digits++)
			ms *= 10;
	}
	if (strcmp(p, "Z") != 0)
		return 0;
	time_t secs = timegm(&tm);
	return secs > 0 ? (long long)secs * 1000 + ms : 0;
}
