/* xlive: a live X display for the unit tests that drive one (test_capture,
 * test_capture_vnc).
 *
 *   struct xlive x;
 *   const char *why;
 *   if (xlive_start(&x, "dbx-capture", NULL, &why) < 0)
 *           skip_all(why);
 *   xlive_spawn(argv, -1, x.display);   (a VNC server, xterm, ...)
 *
 * xlive_start() makes a scratch directory and starts a private Xvfb whose
 * display number comes back through -displayfd.  Every process started
 * with xlive_spawn() runs in its own process group; at exit, or on SIGINT
 * or SIGTERM, each group is killed and reaped and the scratch directory
 * removed.  The list of children is file-static because atexit and signal
 * handlers take no context; one xlive per test program. */
#ifndef DESKBOX_TESTS_XLIVE_H
#define DESKBOX_TESTS_XLIVE_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "capture/capture.h"

#define XLIVE_W 1280
#define XLIVE_H 800

struct xlive {
	char display[32];      /* ":N" */
	char tmpdir[64];       /* the scratch directory, removed at exit */
	char bridge[PATH_MAX]; /* deskbox-bridge of the build under test */
	char vnc[PATH_MAX];    /* deskbox-vnc, next to it */
};

/* Whether `prog` is found on PATH. */
int xlive_in_path(const char *prog);

/* Fills x->bridge and x->vnc: in $BUILD when set, else in the build
 * directory of the test binary `argv0` (<build>/tests/test_x). */
void xlive_find_build(struct xlive *x, const char *argv0);

/* Makes /tmp/<prefix>-XXXXXX, installs the cleanup and starts Xvfb at
 * XLIVE_W x XLIVE_H x 24, without TCP, plus the NULL-terminated `extra`
 * arguments (or NULL).  Returns 0 with x->display set, or -1 with *why
 * saying why the test cannot run (for skip_all). */
int xlive_start(struct xlive *x, const char *prefix, const char *const *extra, const char **why);

/* Starts argv in its own process group, stdin and stdout on /dev/null,
 * stderr too unless DBX_TEST_VERBOSE is set, every fd but `keep_fd` (or
 * -1) closed, DISPLAY=`display` when not NULL and LC_ALL=C.UTF-8.  The
 * child is killed at exit unless handed back with xlive_forget(). */
pid_t xlive_spawn(char *const argv[], int keep_fd, const char *display);

/* The caller has reaped `pid` (or will): the cleanup leaves it alone. */
void xlive_forget(pid_t pid);

/* CLOCK_MONOTONIC in milliseconds. */
double xlive_now_ms(void);

/* Connects to the unix socket `path`, retrying every millisecond while it
 * does not accept yet; the fd (O_CLOEXEC), or -1 after `timeout_ms`. */
int xlive_connect_unix(const char *path, int timeout_ms);

/* Waits until the mirrored screen has not changed for `quiet_ms`, for at
 * most `max_ms`. */
void xlive_settle(struct capture *c, int quiet_ms, int max_ms);

/* Reads up to `cap` bytes of `path` into buf (not NUL-terminated); the
 * count, 0 when it cannot be read. */
size_t xlive_read_file(const char *path, char *buf, size_t cap);

#endif
