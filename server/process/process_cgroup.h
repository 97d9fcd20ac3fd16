/* process_cgroup: one cgroup per run, below the sandbox's cgroup.
 *
 * Every exec, code_run and context gets its own sub-cgroup of the sandbox's
 * (`crun exec --cgroup=NAME` places the process there before it runs a
 * single instruction of the program, so nothing it forks can escape it).
 * Killing the run freezes the cgroup, SIGKILLs every member and thaws it
 * (v1 freezer), or writes cgroup.kill (v2): children that called setsid,
 * double-forked or ignore SIGTERM go too, and the desktop, which lives in
 * the sandbox's own cgroup, is untouched.
 *
 * cgroup v1: crun joins the sub-cgroup in every hierarchy where it exists
 * and silently leaves the process in the root cgroup of the others (measured
 * with crun 1.8.1), so the sub-cgroup is made in every hierarchy the sandbox
 * has (cpuset's cpus and mems copied from the parent, which v1 needs before
 * a task may join).  The memory sub-cgroup gets a limit a little below the
 * sandbox's, so a run that exhausts memory is OOM-killed inside its own
 * cgroup (and counted there) before the desktop is touched.
 *
 * cgroup v2: one sub-cgroup without controllers (the sandbox's cgroup holds
 * processes, so it may not enable controllers for children); OOM kills are
 * read from the sandbox's memory.events.
 *
 * Internal to server/process*.c. */
#ifndef DESKBOX_SERVER_PROCESS_CGROUP_H
#define DESKBOX_SERVER_PROCESS_CGROUP_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "server/runtime/runtime.h"

#define RUN_CGROUP_MAX_HIER 16

struct run_cgroup {
	enum runtime_cgroup_mode mode;
	char name[24]; /* "run-<hex>": what crun exec --cgroup gets */
	/* Directories made, one per hierarchy (v2: one).  [kill_idx] holds
	 * the freezer (v1) or the only one (v2); [mem_idx] the memory one. */
	char *dirs[RUN_CGROUP_MAX_HIER];
	int n_dirs, kill_idx, mem_idx;
	uint64_t oom_base; /* v2: the sandbox's oom_kill count at creation */
};

/* Makes the run's cgroup below /<parent>/<container_id> in every hierarchy. */
int run_cgroup_create(struct run_cgroup *cg, enum runtime_cgroup_mode mode, const char *parent,
		      const char *container_id, struct err *e);

/* Moves process `pid` (host pid) into the cgroup in every hierarchy. */
int run_cgroup_attach(struct run_cgroup *cg, pid_t pid, struct err *e);

/* Kills every process in the cgroup and waits (at most ~5 s) until it is
 * empty.  Safe to call again and on a cgroup that is already gone. */
void run_cgroup_kill(struct run_cgroup *cg);

/* 1 when no process is left in it. */
int run_cgroup_empty(struct run_cgroup *cg);

/* How many processes of the run the kernel's OOM killer killed. */
uint64_t run_cgroup_oom_kills(struct run_cgroup *cg);

/* Moves what is left into the sandbox's own cgroup (the parent), where it
 * lives on until the sandbox ends: the programs a run left behind. */
void run_cgroup_release(struct run_cgroup *cg);

/* Kills what is left and removes the directories. */
void run_cgroup_destroy(struct run_cgroup *cg);

#endif
