/* process: running programs inside a sandbox.
 *
 * Foreground runs capture stdout and stderr (each capped; what is past the
 * cap is read and dropped so the program never blocks on a full pipe), feed
 * stdin, and enforce a timeout that kills the run.  Background runs return
 * at once with the program's pid inside the sandbox; a reaper thread owns
 * the runtime client and collects its exit.
 */
#ifndef DESKBOX_SERVER_PROCESS_H
#define DESKBOX_SERVER_PROCESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/error.h"
#include "sandbox.h"

struct process_opts {
	const char *const *argv; /* NULL-terminated, argv[0] non-empty */
	const char *const *env;	 /* extra "K=V", NULL-terminated, may be NULL */
	const char *cwd;	 /* NULL: /workspace */
	const char *stdin_data;	 /* may be NULL */
	size_t stdin_len;
	int timeout_ms;
	size_t max_output; /* per stream */
};

struct process_result {
	int exit_code; /* -1 when killed */
	int timed_out;
	char *out, *err; /* malloc'd, NUL-terminated */
	size_t out_len, err_len;
	int out_truncated, err_truncated;
	long long duration_ms;
};

void process_result_release(struct process_result *r);

/* Runs `o` in `sb` (between sandbox_use/unuse) and waits for it. */
int process_run(struct sandbox *sb, const struct process_opts *o, struct process_result *res,
		struct err *e);

/* Starts `o` in the background; *pid is its pid inside the sandbox.  Output
 * goes to /dev/null. */
int process_spawn(struct sandbox *sb, const struct process_opts *o, pid_t *pid, struct err *e);

#endif
