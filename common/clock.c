#include "clock.h"

#include <errno.h>
#include <limits.h>

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
