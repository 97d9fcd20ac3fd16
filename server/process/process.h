/* process: programs inside a sandbox.
 *
 * A run is one exec, code_run or Python context: a program started in a
 * cgroup of its own below the sandbox's (process_cgroup.h) before it runs
 * an instruction, so the whole tree it starts can be killed at once without
 * touching the desktop.  The sandbox's init starts it (its exec agent,
 * process_agent.c, ~1 ms); without one, `crun exec --cgroup` (~30 ms).
 *
 * Foreground runs capture stdout and stderr (each capped; what is past the
 * cap is read and dropped so the program never blocks on a full pipe), feed
 * stdin, and end at the deadline by killing the run's cgroup.  When the
 * program itself exits, whatever it left running in its cgroup is killed
 * too: a run is over when its response says so (background runs are for
 * long-lived programs).  Output can also be delivered as it arrives
 * (process_step with a callback), which the SSE responses use.
 *
 * Background runs return at once with the program's pid inside the
 * sandbox; a thread owns them (reads their output into bounded logs, keeps
 * their exit status) and the sandbox's process table keeps the record.
 *
 * Every run is registered in its sandbox's table while it lives, and
 * process_table_kill_all() (sandbox teardown) kills them all.
 */
#ifndef DESKBOX_SERVER_PROCESS_H
#define DESKBOX_SERVER_PROCESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "server/runtime/runtime.h"

/* ---- the per-sandbox table ---- */

struct process_table;

/* What the process code needs of the sandbox it runs programs in; it knows
 * nothing else of it (server/sandbox/ owns the table and this handle). */
struct process_host {
	struct runtime *rt;
	/* The sandbox's isolation backend (runtime.h), its calls on rt. */
	const struct runtime_backend *be;
	enum runtime_cgroup_mode cgroup_mode;
	const char *container_id;
	/* The sandbox's state directory: <dir>/run holds the exec agent's
	 * socket, <dir> the pid files of `crun exec`. */
	const char *dir;
	/* Makes sure the container runs while an interpreter is (re)started
	 * by a caller that is not already inside an operation on it (the
	 * sandbox's use/unuse); enter() fails with the reason it cannot. */
	int (*enter)(void *cls, struct err *e);
	void (*leave)(void *cls);
	void *cls;
};

/* A table for the runs of one sandbox; `host` is copied (its strings too).
 * NULL when out of memory.  The sandbox holds one reference, each run
 * another. */
struct process_table *process_table_new(const struct process_host *host);
void process_table_unref(struct process_table *t);
/* Where the exec agent's socket is: NULL for <dir>/run; a sandbox that
 * deskboxd re-adopted after a restart names the directory through its
 * init's root ("/proc/PID/root/run/deskbox"). */
void process_table_set_run_dir(struct process_table *t, const char *run);
/* The sandbox's backend once its isolation is known (the create's). */
void process_table_set_backend(struct process_table *t, const struct runtime_backend *be);
/* Kills every run of the sandbox (their owners then see them end); with
 * `foreground_only` only the runs someone waits for, so that background
 * runs and launched programs go on (a deskboxd leaving its sandboxes
 * running). */
void process_table_kill_all(struct process_table *t, int foreground_only);

/* ---- runs ---- */

struct process_opts {
	const char *const *argv; /* NULL-terminated, argv[0] non-empty */
	const char *const *env;	 /* extra "K=V", NULL-terminated, may be NULL */
	const char *cwd;	 /* NULL: /workspace */
	const char *stdin_data;	 /* may be NULL; background runs copy it */
	size_t stdin_len;
	int timeout_ms;	     /* 0: none (background runs only) */
	size_t max_output;   /* per stream */
	int keep_stdin_open; /* contexts: stdin stays open for process_write() */
	int want_pid;	     /* find out the program's pid (process_pid) */
	/* When the program exits by itself, what it left running (a daemon,
	 * `cmd &`) goes on in the sandbox's own cgroup, until the sandbox
	 * ends, instead of being killed with the run (E2B's envd). */
	int keep_orphans;
	/* A terminal: the program gets a new pseudo-terminal of the sandbox
	 * (cols x rows) as stdin, stdout, stderr and controlling tty; its
	 * output is the run's stdout.  Needs the exec agent. */
	int pty;
	unsigned short cols, rows;
	/* Runs as the container's root (uid 0 of the sandbox's user
	 * namespace, with the namespace's capabilities only) instead of the
	 * image's user.  The caller checked that the sandbox allows it. */
	int root;
};

struct process_result {
	int exit_code; /* -1 when killed by the timeout or the API */
	int timed_out, oom_killed, killed;
	char *out, *err; /* malloc'd, NUL-terminated */
	size_t out_len, err_len;
	int out_truncated, err_truncated;
	long long duration_ms;
};

void process_result_release(struct process_result *r);

enum process_stream {
	PROCESS_STDOUT = 1,
	PROCESS_STDERR = 2,
};

/* Receives output as it arrives (only what is within the cap). */
typedef void (*process_output_fn)(void *cls, enum process_stream s, const char *data, size_t len);

struct process_run;

/* Starts `o` in the table's sandbox (the caller is inside an operation on
 * it, so the container runs; the run itself does not need that afterwards).  The caller owns the
 * run and must process_run_free() it. */
int process_start(struct process_table *t, const struct process_opts *o, struct process_run **out,
		  struct err *e);

/* Waits up to `wait_ms` for the run to make progress and handles it:
 * output (kept in the result unless `fn` takes it), stdin, the program's
 * exit, the deadline.  Returns 1 once the run is over, 0 otherwise. */
int process_step(struct process_run *r, int wait_ms, process_output_fn fn, void *cls);

/* After process_step() returned 1: moves the result out (output buffers
 * are empty when a callback took the output). */
int process_finish(struct process_run *r, struct process_result *res, struct err *e);

/* Kills what is left of the run, reaps its client, removes its cgroup. */
void process_run_free(struct process_run *r);

/* The run's pid inside the sandbox, or -1 if unknown. */
pid_t process_pid(struct process_run *r);

/* Foreground: start, wait, finish, free. */
int process_run(struct process_table *t, const struct process_opts *o, struct process_result *res,
		struct err *e);

/* ---- background runs ---- */

/* Starts `o` in the background; *pid is its pid inside the sandbox. */
int process_spawn(struct process_table *t, const struct process_opts *o, pid_t *pid, struct err *e);

struct process_info {
	pid_t pid;
	int running;
	int exit_code; /* valid when !running */
	int timed_out, oom_killed, killed;
	long long started_at_ms; /* unix time */
	long long duration_ms;	 /* so far, or in all */
};

/* ERR_NOT_FOUND when the sandbox has no background run `pid`. */
int process_bg_info(struct process_table *t, pid_t pid, struct process_info *info, struct err *e);

/* Kills the run `pid` and everything it started; waits until they are
 * gone. */
int process_bg_kill(struct process_table *t, pid_t pid, struct process_info *info, struct err *e);

/* The last bytes each stream wrote (at most max_output each): malloc'd
 * copies the caller frees; *_total is how much was written in all. */
struct process_logs {
	char *out, *err;
	size_t out_len, err_len;
	uint64_t out_total, err_total;
};
int process_bg_logs(struct process_table *t, pid_t pid, struct process_logs *logs,
		    struct process_info *info, struct err *e);
void process_logs_release(struct process_logs *l);
/* Follows background run `pid`: its output from the byte positions pos[0]
 * (stdout) and pos[1] (stderr) on, counted from its start, waiting at most
 * `wait_ms` for some or for its end.  logs->out/err hold the new bytes,
 * pos[] moves past them; logs->*_total count the bytes that fell out of
 * the logs before they were read (lost).  A position past the end is the
 * end: UINT64_MAX follows only what comes next.  `info` says whether the
 * run goes on. */
int process_bg_follow(struct process_table *t, pid_t pid, uint64_t pos[2], int wait_ms,
		      struct process_logs *logs, struct process_info *info, struct err *e);

/* Writes `len` bytes to the stdin of background run `pid` (started with
 * keep_stdin_open), waiting at most `timeout_ms` for the program to take
 * them, then closes its stdin (EOF) when `close_after`.  ERR_CONFLICT when
 * the run has no open stdin or has ended, ERR_TIMEOUT when the program took
 * not all of it in time (*written says how much it took). */
int process_bg_stdin(struct process_table *t, pid_t pid, const void *data, size_t len,
		     int close_after, int timeout_ms, size_t *written, struct err *e);

/* ---- Python contexts (process_ctx.c) ---- */

#define PROCESS_CTX_ID_LEN 16

struct process_ctx_info;
/* Starts a persistent Python interpreter in the table's sandbox (the caller
 * is inside an operation on it); `out` receives its id and creation time. */
int process_ctx_create(struct process_table *t, struct process_ctx_info *out, struct err *e);

/* Runs `code` in context `id` (o: cwd, env, timeout_ms, max_output).  A
 * context whose run times out, or whose interpreter dies, is restarted
 * fresh (*restarted).  *result is the repr() of a final expression, or
 * NULL (malloc'd).  The caller holds a reference to the table but is not
 * inside an operation on the sandbox (a delete must not wait for the run):
 * the host's enter() is called only to start an interpreter.  Same for
 * restart. */
int process_ctx_run(struct process_table *t, const char *id, const char *code,
		    const struct process_opts *o, struct process_result *res, char **result,
		    int *restarted, struct err *e);

int process_ctx_restart(struct process_table *t, const char *id, struct err *e);
int process_ctx_delete(struct process_table *t, const char *id, struct err *e);

struct process_ctx_info {
	char id[PROCESS_CTX_ID_LEN + 1];
	long long created_at_ms; /* unix time */
	uint64_t runs;
	int busy;
};
/* Up to `max` contexts into `out`; returns how many. */
size_t process_ctx_list(struct process_table *t, struct process_ctx_info *out, size_t max);

/* ---- resident helpers (process_helper.c) ----
 *
 * A helper is a long-lived program of the sandbox, one per name, that
 * answers requests one at a time over its stdin and stdout, each message
 * a u32 big-endian length and that many bytes.  It starts at the first
 * call; one that died (with its sandbox, or leaving when idle), hung past
 * a call's deadline or sent more than `max_answer` is killed with what it
 * started, and started afresh at the next call.  Sandbox teardown
 * (process_table_kill_all) ends them. */

struct process_helper_spec {
	const char *name; /* at most 31 bytes: one helper per name and table */
	const char *const *argv;
	const char *const *env; /* extra "K=V", may be NULL */
	size_t max_answer;
};

/* Sends `req` to the helper and reads its answer into *answer (malloc'd,
 * NUL-terminated, the caller frees it), all within `timeout_ms`.  The
 * caller is inside an operation on the sandbox (the helper may have to be
 * started).  ERR_TIMEOUT past the deadline, ERR_UNAVAILABLE when the
 * helper failed the exchange. */
int process_helper_call(struct process_table *t, const struct process_helper_spec *s,
			const void *req, size_t len, int timeout_ms, char **answer,
			size_t *answer_len, struct err *e);

/* ---- terminals (process_term.c) ----
 *
 * A terminal is a program (a login shell by default) on a pseudo-terminal
 * of the sandbox, in a run cgroup of its own, owned by a thread that reads
 * its output into a ring of the last PROCESS_TERM_REPLAY bytes.  Clients
 * attach and detach at will (the terminal outlives them): an attached
 * client first reads what the ring holds, then what follows.  A client that
 * falls more than the ring behind loses the oldest bytes (it is told how
 * many); the program never waits for a client.  An ended terminal stays
 * listed (with its exit code and last output) until deleted. */

#define PROCESS_TERM_ID_LEN  16
#define PROCESS_TERM_MAX     16 /* per sandbox, ended ones included */
#define PROCESS_TERM_REPLAY  (64u << 10)
#define PROCESS_TERM_CMD_MAX 256

struct process_term_info {
	char id[PROCESS_TERM_ID_LEN + 1];
	pid_t pid; /* inside the sandbox */
	unsigned short cols, rows;
	int running, exit_code; /* exit_code valid when !running */
	long long created_at_ms;
	unsigned attached; /* clients attached now */
	uint64_t output_bytes;
	char command[PROCESS_TERM_CMD_MAX]; /* argv joined by spaces, cut */
	int root;			    /* it runs as the container's root */
};

/* Starts o->argv on a new terminal (o->pty, cols, rows set by the caller,
 * who is inside an operation on the sandbox).  ERR_LIMIT past
 * PROCESS_TERM_MAX (ended terminals are dropped first, oldest first). */
int process_term_create(struct process_table *t, const struct process_opts *o,
			struct process_term_info *info, struct err *e);
/* Up to `max` terminals, newest first; returns how many. */
size_t process_term_list(struct process_table *t, struct process_term_info *out, size_t max);
int process_term_get(struct process_table *t, const char *id, struct process_term_info *info,
		     struct err *e);
/* Kills the terminal's program and everything it started, waits until
 * they are gone, forgets it (attached clients see it end). */
int process_term_delete(struct process_table *t, const char *id, struct process_term_info *info,
			struct err *e);

struct process_term_client;
/* Attaches a client; it reads from the oldest byte the ring holds. */
int process_term_attach(struct process_table *t, const char *id, struct process_term_client **out,
			struct err *e);
/* Readable (an eventfd) when there is output to read or the terminal
 * ended; process_term_read() clears it. */
int process_term_client_fd(const struct process_term_client *c);
/* Up to `max` bytes of output not yet read; 0 when there is none now, -1
 * when the terminal ended and everything was read (*exit_code set).
 * *lost adds bytes that fell out of the ring before they were read. */
long process_term_read(struct process_term_client *c, char *buf, size_t max, uint64_t *lost,
		       int *exit_code);
/* Input bytes for the program (waits at most `timeout_ms` for room). */
int process_term_write(struct process_term_client *c, const void *data, size_t len, int timeout_ms,
		       struct err *e);
/* A new window size (the program gets SIGWINCH). */
int process_term_resize(struct process_term_client *c, unsigned cols, unsigned rows, struct err *e);
void process_term_detach(struct process_term_client *c);

/* Ends every terminal of the table (sandbox teardown). */
void process_term_drop_all(struct process_table *t);

/* ---- sessions (process_session.c) ----
 *
 * A session is a persistent bash (Daytona-style): each command runs in the
 * same shell with eval, so `cd`, `export`, variables and functions persist
 * to the next.  Commands arrive on the shell's stdin (fd 3 inside; the
 * command's own stdin is /dev/null); after each, the shell prints a random
 * per-command marker with $? on stdout and on stderr, which ends its output.
 * A command past its timeout, or one that ends the shell (`exit`), costs
 * the session: it is killed (its whole cgroup) and started afresh, and the
 * answer says so. */

#define PROCESS_SESSION_ID_LEN 16
#define PROCESS_SESSION_MAX    16 /* per sandbox */

struct process_session_info {
	char id[PROCESS_SESSION_ID_LEN + 1];
	long long created_at_ms;
	uint64_t commands;
	int busy;
	int root; /* its shell runs as the container's root */
};

/* Starts a session's shell (o: cwd and env for it; the caller is inside an
 * operation on the sandbox).  ERR_LIMIT past PROCESS_SESSION_MAX. */
int process_session_create(struct process_table *t, const struct process_opts *o,
			   struct process_session_info *info, struct err *e);
/* Runs `command` in session `id` (o: timeout_ms, max_output).  ERR_CONFLICT
 * while another command runs in it.  *restarted when the shell had to be
 * started afresh (after this command, or before it).  Like
 * process_ctx_run(), the caller holds a reference to the table and is not
 * inside an operation on the sandbox. */
int process_session_exec(struct process_table *t, const char *id, const char *command,
			 const struct process_opts *o, struct process_result *res, int *restarted,
			 struct err *e);
int process_session_delete(struct process_table *t, const char *id, struct err *e);
size_t process_session_list(struct process_table *t, struct process_session_info *out, size_t max);
void process_session_drop_all(struct process_table *t);

/* ---- code_run's languages (process_code.c) ---- */

/* "python", "bash", "node", NULL: what a code run may be written in. */
extern const char *const process_languages[];

/* argv for running `code` in process_languages[language]: the interpreter,
 * its flag taking code as an argument, `code`, NULL.  The interpreter is
 * looked up in the sandbox's tree `root_fd` (its "/" as it sees it: a
 * stored image has its own; -1: on the host, whose /usr the default image
 * has): /usr/bin, then /usr/local/bin (/bin for bash).  ERR_INVALID when it
 * is not installed. */
int process_code_argv(int language, const char *code, int root_fd, const char *argv[4],
		      struct err *e);

/* ---- helpers shared by process*.c ---- */

/* Writes all of buf to the run's stdin (kept open with keep_stdin_open),
 * waiting at most until the deadline; -1 on failure. */
int process_write(struct process_run *r, const void *buf, size_t len, long long deadline_ms);
/* Closes the run's stdin (kept open with keep_stdin_open): the program
 * reads EOF.  Nothing when it is closed already. */
void process_close_stdin(struct process_run *r);
/* Reads exactly len bytes of the run's stdout; -1 at EOF, on error or past
 * the deadline (the run is not killed). */
int process_read_exact(struct process_run *r, void *buf, size_t len, long long deadline_ms);

#endif
