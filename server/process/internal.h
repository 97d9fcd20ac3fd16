/* process internals shared by process.c, process_bg.c and process_ctx.c. */
#ifndef DESKBOX_SERVER_PROCESS_INTERNAL_H
#define DESKBOX_SERVER_PROCESS_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "process.h"
#include "process_cgroup.h"

struct process_stream_buf {
	int fd;
	char *buf; /* what is kept (foreground without a callback) */
	size_t len, cap, max;
	size_t seen; /* bytes within the cap so far */
	int truncated;
};

/* The last `cap` bytes of a stream (background logs). */
struct process_ring {
	char *buf;
	size_t cap, len, head; /* head: where the next byte goes */
	uint64_t written;      /* bytes put in all (process_bg_follow's positions) */
};

struct process_run {
	struct process_table *table; /* a reference, once registered */
	struct process_run *next;    /* in the table, under table->mu */
	int in_table;

	pid_t client; /* the runtime's exec client: this run's only child, or -1 */
	int pidfd;    /* of the client, -1 if the kernel has none */
	int agent_fd; /* instead of a client: the exec agent's connection */
	int client_done, status;
	pid_t pid; /* inside the sandbox, -1 when not asked for */

	/* cg_live and the cgroup's kill are guarded by table->mu, so a kill
	 * from another thread never meets a removed cgroup. */
	struct run_cgroup cg;
	int cg_live;

	int in_fd;
	const char *stdin_data;
	char *stdin_copy; /* background runs own their stdin */
	size_t stdin_len, stdin_off;
	int keep_stdin;
	int keep_orphans;
	struct process_stream_buf so, se; /* a terminal's master is so.fd */
	uint64_t total[2];

	long long start_ms, end_ms, deadline_ms, started_at_ms;
	int timed_out, killed, done;
	uint64_t oom_kills;

	/* background runs */
	int bg, bg_finished;
	struct process_ring ring[2]; /* guarded by table->mu */
};

struct process_ctx;
struct process_helper;

struct process_table {
	struct process_host host; /* strings point into the two below */
	char container_id[80];
	char dir[PATH_MAX];
	/* The exec agent's directory: <dir>/run, or the one reached through
	 * the init's root (process_table_set_run_dir); under mu. */
	char run[PATH_MAX];
	pthread_mutex_t mu;
	struct process_run *runs;
	struct process_ctx *ctxs;	  /* Python contexts (process_ctx.c) */
	struct process_term *terms;	  /* terminals (process_term.c), newest first */
	struct process_session *sessions; /* shell sessions (process_session.c) */
	struct process_helper *helpers;	  /* resident helpers (process_helper.c) */
	int bg_threads;			  /* background owners still running, under mu */
	pthread_cond_t bg_done;		  /* signalled when bg_threads drops */
	pthread_cond_t bg_output;	  /* signalled on a background run's output or end */
	atomic_int refs;
};

void process_table_ref(struct process_table *t);
void process_table_remove_locked(struct process_table *t, struct process_run *r);
/* Frees a run that is in no table (killing and reaping what is left). */
void process_run_destroy(struct process_run *r);
/* process_agent.c: starts `o` through the sandbox's exec agent with
 * stdio[0..2] as its stdin, stdout, stderr (r->cg made already); fills
 * r->agent_fd and r->pid.  PROCESS_NO_AGENT when the sandbox has none. */
#define PROCESS_NO_AGENT 1
int process_agent_start(struct process_table *t, struct process_run *r,
			const struct process_opts *o, const int stdio[3], struct err *e);
/* 1 once the agent reported the exit (r->status, r->client_done set). */
int process_agent_poll_exit(struct process_run *r);
/* process_term.c: a pty of the host for a terminal without an exec agent
 * (runtime_backend.exec_pty): *master (non-blocking) and *slave, both
 * O_CLOEXEC and the caller's, the window size o->cols x o->rows. */
int process_term_host_pty(const struct process_opts *o, int *master, int *slave, struct err *e);
/* 1 once the run's program ended (either path); never blocks. */
int process_client_exited(struct process_run *r);

/* Ends every context of the table (sandbox teardown). */
void process_ctx_drop_all(struct process_table *t);
/* Ends every helper's program (teardown); frees the helpers (last unref). */
void process_helper_drop_all(struct process_table *t);
void process_helper_free_all(struct process_table *t);

#endif
