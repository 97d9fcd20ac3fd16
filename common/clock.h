/* clock: the one place that reads clocks and sleeps.
 *
 * Deadlines, timeouts and durations use the monotonic clock: it never jumps
 * when the wall clock is set.  The wall clock is only for timestamps a user
 * reads (e.g. when a process started) and for pthread_cond_timedwait() on a
 * default condition variable, which measures CLOCK_REALTIME. */
#ifndef DESKBOX_COMMON_CLOCK_H
#define DESKBOX_COMMON_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in milliseconds / nanoseconds (since an arbitrary point,
 * usually boot): only differences mean anything. */
long long clock_mono_ms(void);
uint64_t clock_mono_ns(void);

/* CLOCK_REALTIME in milliseconds since the Unix epoch. */
long long clock_wall_ms(void);

/* Timestamps in answers: unix milliseconds as RFC 3339 UTC,
 * "2026-12-02T13:42:11.000Z" (CLOCK_RFC3339_MAX bytes with the NUL), and
 * back (0 when `s` is not that form, the fraction optional). */
#define CLOCK_RFC3339_MAX 32
void clock_rfc3339(long long unix_ms, char *out, size_t size);
long long clock_parse_rfc3339(const char *s);

/* The CLOCK_REALTIME instant `ms` milliseconds from now, as the absolute
 * deadline pthread_cond_timedwait() takes. */
struct timespec clock_wall_after(long long ms);

/* Sleep at least `ms` milliseconds / `us` microseconds; a value <= 0 returns
 * at once.  A signal handler that interrupts the sleep does not shorten it:
 * the rest is slept after the handler returns. */
void clock_sleep_ms(long long ms);
void clock_sleep_us(long long us);

#endif
