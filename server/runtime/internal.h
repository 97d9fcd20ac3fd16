/* runtime internals shared by runtime.c, runtime_bundle.c and
 * runtime_seccomp.c.  Not part of the server's interface. */
#ifndef DESKBOX_SERVER_RUNTIME_INTERNAL_H
#define DESKBOX_SERVER_RUNTIME_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>

#include "common/error.h"
#include "runtime.h"

/* The OCI `linux.seccomp` object of every sandbox: Docker's default profile
 * for a container without capabilities (an allowlist, everything else fails
 * with EPERM), with chroot(2) allowed when `allow_chroot`.  Returns a new
 * object the caller owns, or NULL when out of memory. */
cJSON *runtime_seccomp_json(int allow_chroot);

/* /etc/chromium.d/deskbox: the flags chromium gets in a sandbox
 * (runtime_image.c); the Debian image has it too. */
extern const char image_chromium_flags[];

/* Finishes an image made in `tmp` (<state>/images/.tmp-...; holding
 * rootfs/): adds deskbox's mount points and user, fills in `manifest`'s
 * name, size_bytes, created_at and tools, writes manifest.json and renames
 * `tmp` to <state>/images/<name>.  Takes `manifest` (NULL on failure, kept
 * and returned in *out on success).  ERR_CONFLICT if the name is taken. */
int image_finish(const char *state_dir, const char *name, const char *tmp, cJSON *manifest,
		 cJSON **out, struct err *e);

/* Creates <state>/images/.tmp-<name>-XXXXXX (0755) into `tmp`. */
int image_tmp_dir(const char *state_dir, const char *name, char *tmp, size_t size, struct err *e);

/* "<state>/images" into buf. */
void image_dir(const char *state_dir, char *buf, size_t size);

/* ---- Dockerfile builds (runtime_images_build.c, runtime_images_build_steps.c) ---- */

#define BUILD_ENV_MAX (2 * DOCKERFILE_MAX_VARS + 8)

/* One Dockerfile build (runtime_images_build*.c), in its own thread. */
struct build {
	char *state_dir, *name, *context, *text;
	char id[17]; /* the build's id: 16 hex digits */
	int context_owned;
	struct dockerfile *df;
	struct runtime *rt;
	uint32_t host_base;
	void (*done)(void *cls);
	void *done_cls;
	/* The build's state. */
	char tmp[PATH_MAX], rootfs[PATH_MAX + 16], bundle[PATH_MAX + 16], userns[PATH_MAX + 32];
	char *env[BUILD_ENV_MAX], *args[BUILD_ENV_MAX]; /* "K=V" */
	size_t n_env, n_args;
	char workdir[DOCKERFILE_PATH_MAX], user[DOCKERFILE_NAME_MAX + 1];
	cJSON *config;
	long long deadline_ms;
	unsigned timeout_s;
	/* The log: every write goes through a pipe that drain() copies into
	 * the log file, at most BUILD_LOG_MAX, keeping the last line seen. */
	int log_w;
	char last[300];
	/* The container running now ("" between them) and whether
	 * image_builds_cancel() ended the build; under the builds' lock. */
	char cur[64];
	int cancelled;
};

struct build_drain {
	int fd, out;
	char *last;
	size_t last_size;
};

/* <state>/images/.build-<name><ext> into out. */
void build_status_path(const char *state_dir, const char *name, const char *ext, char *out,
		       size_t size);
/* The build's status file (<state>/images/.build-<name>.json). */
void build_set_status(struct build *b, const char *status, const char *error);
/* A line into the build's log. */
void build_say(struct build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The log pipe's reader thread (arg: struct build_drain). */
void *build_drain(void *arg);
/* Moves the owners under `root` into [base, base + 65536) (`up`) or back. */
int build_shift_tree(const char *root, uint32_t base, int up, struct err *e);
/* Runs a host tool (execvp) with its output in the log. */
int build_tool(struct build *b, const char *const *argv, struct err *e);
/* openat2(RESOLVE_IN_ROOT) of `rel` under `rootfd`. */
int build_open_in(int rootfd, const char *rel, uint64_t flags);
/* mkdir -p inside the build's tree, resolved in it, owned by its root. */
int build_mkdir_in(struct build *b, const char *path, struct err *e);
/* The uid and gid of the build's USER, from the tree's passwd/group. */
int build_user_ids(struct build *b, uint32_t *uid, uint32_t *gid, struct err *e);
/* The runtime's state dir and cgroup mode (runtime.c). */
const char *runtime_root(const struct runtime *rt);
enum runtime_cgroup_mode runtime_cgroup_mode(const struct runtime *rt);

/* The VM backend (runtime_vm.c) and its exec path (runtime_vm_exec.c):
 * the client (deskbox-init vm-exec) relaying `x`'s stdio to the guest's
 * exec agent, as *client_pid. */
extern const struct runtime_backend runtime_vm_backend;
int runtime_vm_exec(struct runtime *rt, const char *id, const struct runtime_exec *x,
		    pid_t *client_pid, struct err *e);
/* The run dir of running VM `id`; -ESRCH when it does not run. */
int runtime_vm_run_dir(struct runtime *rt, const char *id, char *out, size_t size);
const char *runtime_vm_client(void);
/* The backend's quiesce: `sync` in the guest, within `timeout_ms`. */
int runtime_vm_quiesce(struct runtime *rt, const char *id, int timeout_ms, struct err *e);

/* A VM's cgroup and live limits (runtime_vm_limits.c): /deskbox/<id> in
 * the memory, pids, cpu and freezer hierarchies (one on cgroup v2). */
#define RUNTIME_VM_N_CG	       4
#define RUNTIME_VM_OVERHEAD_MB 384 /* QEMU and TCG's translation cache, in the memory limit */
#define RUNTIME_VM_MIN_MEM_MB  512
#define RUNTIME_VM_BALLOON_MS  2000 /* the most a PATCH waits for the guest */
struct runtime_vm_cg {
	uint64_t mem_mb; /* the guest's RAM */
	int64_t pids_max;
	long cpu_quota, cpu_period; /* quota <= 0: none */
};
/* Makes the cgroups with their limits; the cgroup.procs files QEMU joins
 * go to `procs` (the unused ones empty). */
int runtime_vm_cg_make(struct runtime *rt, const char *id, const struct runtime_vm_cg *l,
		       char procs[RUNTIME_VM_N_CG][PATH_MAX], struct err *e);
/* Removes them, with the run-* cgroups of exec clients left under them. */
void runtime_vm_cg_remove(struct runtime *rt, const char *id);
/* The backend's update: cpu and pids in the cgroup, memory through the
 * balloon (ERR_CONFLICT above the RAM it booted with or while paused). */
int runtime_vm_update(struct runtime *rt, const char *id, const struct runtime_limits *l,
		      struct err *e);

/* QEMU's QMP socket (<run>/qmp.sock; runtime_vm_qmp.c): the RAM the VM
 * booted with and the guest's now (the balloon's), in MiB; the balloon set
 * so that the guest has `mem_mb`, waiting up to `timeout_ms` for the guest
 * to get there (it goes on after), with the guest's RAM then in *now_mb
 * (may be NULL, as may e). */
int runtime_vm_qmp_memory(const char *run, uint64_t *base_mb, uint64_t *now_mb, struct err *e);
int runtime_vm_qmp_balloon(const char *run, uint64_t mem_mb, int timeout_ms, uint64_t *now_mb,
			   struct err *e);

/* A stored image in a VM (runtime_vm_image.c): the guest's /.deskbox for
 * it (<share>-image) in `out`, or 501 naming what the image lacks. */
int runtime_vm_image_share(const cJSON *config, const char *rootfs, const char *share,
			   char *out, size_t size, struct err *e);

/* A VM's read-only root (runtime_vm_ro.c): from the bundle, the root
 * exported read-only and its writable places (binds of the root's own
 * directories) as shares rw0.. of their own, opened as fds for QEMU. */
#define RUNTIME_VM_RW_MAX 4
struct runtime_vm_ro {
	int on, n;
	char dest[RUNTIME_VM_RW_MAX][64];
	int fds[RUNTIME_VM_RW_MAX];
};
void runtime_vm_ro_read(const cJSON *config, const char *rootfs, struct runtime_vm_ro *ro);
int runtime_vm_ro_open(const char *rootfs, struct runtime_vm_ro *ro, struct err *e);
void runtime_vm_ro_close(struct runtime_vm_ro *ro);
void runtime_vm_ro_cmdline(const struct runtime_vm_ro *ro, char *out, size_t size);

/* A VM's network (runtime_vm_net.c): the tap in its namespace, the
 * namespace's address on it and the guest's (a /30), the guest's MAC. */
#define RUNTIME_VM_TAP	     "vm0"
#define RUNTIME_VM_NET_HOST  "169.254.0.1"
#define RUNTIME_VM_NET_GUEST "169.254.0.2"
#define RUNTIME_VM_MAC	     "52:54:00:db:00:02"
/* A new network namespace for a VM (lo up, the tap addressed, forwarding,
 * the masquerade out of its future eth0): its fd and the tap's, O_CLOEXEC,
 * the caller's.  On failure nothing is left. */
int runtime_vm_net_make(int *nsfd, int *tapfd, struct err *e);
/* Binds the sandbox's resolv.conf on <guest>/resolv.conf (the guest's, in
 * the run share); the unbind is for <run>/guest/resolv.conf. */
int runtime_vm_net_resolv(const char *guest, const char *resolv, struct err *e);
void runtime_vm_net_unresolv(const char *run);
/* A TCP connection to `addr`:`port` from inside the network namespace of
 * `pid` (runtime_netns.c; runtime_connect_inside is it with 127.0.0.1). */
int runtime_connect_inside_to(pid_t pid, uint32_t addr, uint16_t port, int timeout_ms, int *fd,
			      struct err *e);

/* ---- the Dockerfile parser's word level (runtime_dockerfile_words.c) ---- */

/* A growing string; `failed` once memory or the size bound ran out. */
struct sbuf {
	char *s;
	size_t len, cap;
	int failed;
};

/* The parser's state: variables so far and the steps being built. */
struct parser {
	struct dockerfile *df;
	char *keys[DOCKERFILE_MAX_VARS], *vals[DOCKERFILE_MAX_VARS];
	size_t n_vars;
	unsigned line;
	char workdir[DOCKERFILE_PATH_MAX];
	const char *const *build_args; /* "K=V" values for ARG K, or NULL */
	struct err *e;
};

/* ERR_INVALID "Dockerfile line N: ..." into p->e; returns its code. */
int df_fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *df_var_get(const struct parser *p, const char *k);
int df_var_set(struct parser *p, const char *k, const char *v);
void df_free_words(char **w);
/* One more byte on a growing string (sets b->failed when it cannot). */
void df_sb_putc(struct sbuf *b, char c);
/* The words of `text` (quotes, escapes, variables), NULL-terminated. */
int df_words_of(struct parser *p, const char *text, char ***words, size_t *n);
/* `text` substituted as one word (NULL with p->e set on failure). */
char *df_expand_all(struct parser *p, const char *text);

#endif
