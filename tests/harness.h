/* A tiny TAP test harness.
 *
 *   int main(void) {
 *           ok(1 + 1 == 2, "addition");
 *           is_int(f(), 3, "f returns 3");
 *           is_str(name, "x", "name");
 *           return done();
 *   }
 *
 * Prints "ok N - name" / "not ok N - name" lines and "1..N" at the end;
 * done() returns 0 when all passed, 1 otherwise.  skip_all("why") exits 77
 * after printing "1..0 # SKIP why"; skip("name", "why") skips one part of a
 * program that otherwise runs, printing "ok N - name # SKIP why", which
 * tests/run.sh counts as skipped, not passed. */
#ifndef DESKBOX_TESTS_HARNESS_H
#define DESKBOX_TESTS_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int harness_n, harness_failed;

static inline int harness_ok(int cond, const char *file, int line, const char *name)
{
	harness_n++;
	if (!cond)
		harness_failed++;
	printf("%sok %d - %s\n", cond ? "" : "not ", harness_n, name);
	if (!cond)
		printf("#   failed at %s:%d\n", file, line);
	fflush(stdout);
	return cond;
}

#define ok(cond, name) harness_ok(!!(cond), __FILE__, __LINE__, (name))

#define is_int(got, want, name)                                                                    \
	do {                                                                                       \
		long long got_ = (long long)(got), want_ = (long long)(want);                      \
		if (!ok(got_ == want_, name))                                                      \
			printf("#   got %lld, want %lld\n", got_, want_);                          \
	} while (0)

#define is_str(got, want, name)                                                                    \
	do {                                                                                       \
		const char *got_ = (got), *want_ = (want);                                         \
		if (!ok(got_ && want_ && strcmp(got_, want_) == 0, name))                          \
			printf("#   got '%s', want '%s'\n", got_ ? got_ : "(null)",                \
			       want_ ? want_ : "(null)");                                          \
	} while (0)

static inline void diag(const char *msg)
{
	printf("# %s\n", msg);
}

static inline int done(void)
{
	printf("1..%d\n", harness_n);
	return harness_failed ? 1 : 0;
}

static inline void skip(const char *name, const char *why)
{
	harness_n++;
	printf("ok %d - %s # SKIP %s\n", harness_n, name, why);
	fflush(stdout);
}

static inline void skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	exit(77);
}

#endif
