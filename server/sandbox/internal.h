/* sandbox internals: what the sandbox/ files share.  Not for
 * other modules: they use sandbox.h. */
#ifndef DESKBOX_SERVER_SANDBOX_INTERNAL_H
#define DESKBOX_SERVER_SANDBOX_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "sandbox.h"

struct sandbox {
	char id[SANDBOX_ID_LEN + 1];
	char container_id[SANDBOX_ID_LEN + 8];
	char dir[PATH_MAX];
	struct sandbox_spec spec;
	long long created_at; /* unix seconds */
	struct sandboxes *owner;
	atomic_int refs;
	/* Host id of its container's root: its ids are host_base..+65535
	 * (sandbox_userns.c); 0: no user namespace. */
	uint32_t host_base;

	/* Guards status and cap. */
	pthread_mutex_t mu;
	enum sandbox_status status;
	struct capture *cap;
	pid_t init_pid;
	/* The overlay is mounted on <dir>/rootfs.  It stays mounted while the
	 * sandbox is stopped (the files API works on it) until delete or
	 * shutdown: overlayfs forbids two mounts sharing an upper dir. */
	int rootfs_mounted;

	/* The runs (exec, code_run, contexts) in it; see process.h. */
	struct process_table *procs;

	/* Operations hold it shared; delete, stop and reconnect exclusive. */
	pthread_rwlock_t op;

	/* A warm-pool member (server/sandbox/sandbox_pool.c): running, but not listed, not
	 * found by id and not counted against max_sandboxes until claimed. */
	int pooled;

	struct sandbox *next;
};

struct sandboxes {
	struct sandboxes_config cfg;
	char lower[PATH_MAX];
	struct runtime *rt;
	pthread_mutex_t mu;
	struct sandbox *list;
	unsigned count;
	/* The host_base of every sandbox that has one, deleted or not yet
	 * torn down included (sandbox_userns.c). */
	uint32_t *ranges;
	size_t n_ranges, cap_ranges;
};

extern const char *const sandbox_status_names[];

/* <dir>/<name> into buf. */
void sandbox_path(const struct sandbox *sb, char *buf, size_t size, const char *name);
/* Writes sandbox.json atomically with `status`. */
int sandbox_persist(struct sandbox *sb, enum sandbox_status status, struct err *e);
/* Stops the container and the mirror; unmounts the overlay with `unmount`. */
void sandbox_teardown_ex(struct sandbox *sb, int unmount);
/* Mounts the overlay on <dir>/rootfs unless it already is. */
int sandbox_rootfs_mount(struct sandbox *sb, struct err *e);
/* Starts the container and waits for its desktop and mirror
 * (sandbox_desktop.c). */
int sandbox_start_container(struct sandbox *sb, struct err *e);
/* A new mirror of the running desktop (a bridge that died is replaced). */
int sandbox_capture_connect(struct sandbox *sb, int timeout_ms, struct capture **out,
			    struct err *e);
/* ---- uid ranges (sandbox_userns.c); the registry's lock is taken ---- */
/* A free range for a new sandbox in *base (0 without user namespaces). */
int sandbox_userns_claim(struct sandboxes *s, uint32_t *base, struct err *e);
/* Marks a persisted range used: -EEXIST if it overlaps one, -EINVAL if it
 * is not a range. */
int sandbox_userns_take(struct sandboxes *s, uint32_t base);
/* Frees a range once nothing of its sandbox runs any more; 0 is none. */
void sandbox_userns_release(struct sandboxes *s, uint32_t base);
/* Gives a sandbox made before user namespaces (host_base 0) a range and
 * moves its files' owners into it; nothing while deskboxd runs without
 * user namespaces. */
int sandbox_userns_migrate(struct sandbox *sb, struct err *e);
/* The owners and modes of <dir> and <dir>/run for the sandbox's ids. */
int sandbox_userns_dirs(struct sandbox *sb, struct err *e);

/* Removes upload temp files a crash left behind (sandbox_state.c). */
void sandbox_sweep_uploads(struct sandbox *sb);

#endif
