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
	/* Its isolation's backend (runtime.h): every runtime call goes
	 * through it.  The container's until the spec is known
	 * (sandbox_backend_set). */
	const struct runtime_backend *be;

	/* Guards status, cap, init_pid, init_gen and reason. */
	pthread_mutex_t mu;
	enum sandbox_status status;
	struct capture *cap;
	pid_t init_pid;
	/* Which watch of the monitor (sandbox_monitor.c) is this init's: 0
	 * once nobody expects it to run (a teardown began, or it exited).  An
	 * exit whose watch still matches is a failure. */
	uint64_t init_gen;
	uint64_t fail_gen; /* the watch whose init's exit made it failed */
	/* Why it is failed ("the init was killed by signal 9"); persisted. */
	char reason[256];
	/* Automatic restarts (spec.restart_on_failure): when the last
	 * SANDBOX_RESTART_MAX happened (monotonic ms), a ring. */
	long long restarts[8];
	unsigned n_restarts;
	/* When its deadline fires (sandbox_timeout.c): unix time in ms
	 * (wall clock, as it is persisted); 0: none. */
	long long expires_ms;
	/* The overlay is mounted on <dir>/rootfs.  It stays mounted while the
	 * sandbox is stopped (the files API works on it) until delete or
	 * shutdown: overlayfs forbids two mounts sharing an upper dir. */
	int rootfs_mounted;
	/* The default image's /usr is the sandbox's own overlay (its layers
	 * idmapped, sandbox_desktop.c); 0: the host's, read-only. */
	int own_usr;
	/* Its own disk (sandbox_disk.c) is mounted on <dir>/disk, and the
	 * tmpfs for /run/deskbox on <dir>/run; both under mu. */
	int disk_mounted, run_mounted;
	/* The read-only view of a stopped read_only_root sandbox is mounted
	 * on <dir>/roview (sandbox_readonly.c); under mu. */
	int roview_mounted;
	/* Its disk image and checkpoints are in the disk store
	 * (sandbox_store.c), not in <dir>. */
	int disk_pooled;
	/* Bytes reserved by uploads in flight and not written yet. */
	_Atomic uint64_t disk_reserved;
	/* Drains the container's stdout and stderr into init.log
	 * (sandbox_log.c); NULL while no container runs. */
	struct sandbox_log *log;

	/* The runs (exec, code_run, contexts) in it; see process.h. */
	struct process_table *procs;

	/* Operations hold it shared; delete, stop and reconnect exclusive. */
	pthread_rwlock_t op;

	/* Left running by a deskboxd that stopped (sandbox_adopt.c): sandbox.json
	 * says so, with the log keeper's pid; adopted: taken over from such a
	 * deskboxd (its mounts are not in this mount namespace). */
	int detached, adopted;
	/* Its files went to another node (sandbox_move.c): nothing starts it. */
	int moved;
	pid_t log_keeper;

	/* A warm-pool member (server/sandbox/sandbox_pool.c): running, but not listed, not
	 * found by id and not counted against max_sandboxes until claimed;
	 * net_at_claim: its network is attached at the claim (a --warm-pool
	 * member; a template's has its own from the start). */
	int pooled, net_at_claim;

	/* Its network (sandbox_network.c) while attached, under op held
	 * exclusively; its address under mu for the JSON view. */
	struct network_attachment *net;
	char net_addr[16];

	struct sandbox *next;
};

struct sandbox_monitor;
struct sandbox_timer;

struct sandboxes {
	struct sandboxes_config cfg;
	struct sandbox_monitor *mon;
	struct sandbox_timer *timer;
	char lower[PATH_MAX];
	char usr_extra[PATH_MAX]; /* the default image's /usr additions (sudo) */
	/* The disk store's mount point, "" when there is none; store_new: new
	 * sandboxes' disks go there (sandbox_store.c). */
	char store[PATH_MAX];
	int store_new;
	struct runtime *rt;
	pthread_mutex_t mu;
	struct sandbox *list;
	unsigned count;
	/* Dockerfile builds under way (sandbox_image.c): they use `rt` and
	 * the uid ranges, so a registry closed while one runs is not freed
	 * (the process is ending). */
	unsigned builds;
	/* The host_base of every sandbox that has one, deleted or not yet
	 * torn down included (sandbox_userns.c). */
	uint32_t *ranges;
	size_t n_ranges, cap_ranges;
};

extern const char *const sandbox_status_names[];

/* A sandbox directory being deleted is first renamed to this prefix + id. */
#define TRASH_PREFIX ".deleting-"

/* A new sandbox object for `id` (not listed, no files touched). */
struct sandbox *sandbox_alloc(struct sandboxes *s, const char *id);
/* Reads every sandbox under `dir` (<state>/sandboxes) into the registry
 * (sandbox_load.c). */
void sandbox_load_all(struct sandboxes *s, const char *dir);
/* One sandbox directory <state>/sandboxes/<id> into the registry (also a
 * sandbox moved in from another node, sandbox_move.c); a half-made one is
 * rolled back. */
int sandbox_load_one(struct sandboxes *s, const char *id);

/* <dir>/<name> into buf. */
void sandbox_path(const struct sandbox *sb, char *buf, size_t size, const char *name);
/* Writes sandbox.json atomically with `status`. */
int sandbox_persist(struct sandbox *sb, enum sandbox_status status, struct err *e);
/* What sandbox_persist writes (the caller frees it); NULL: out of memory. */
char *sandbox_persist_text(struct sandbox *sb, enum sandbox_status status);
/* The error for an operation that needs `sb` running while it is `st`. */
int sandbox_not_running(struct sandbox *sb, enum sandbox_status st, struct err *e);

/* Resolves the spec's isolation (the server's default when it names
 * none) and sets sb->be; ERR_NOT_IMPLEMENTED naming the reason when this
 * host or deskboxd cannot provide it. */
int sandbox_backend_set(struct sandbox *sb, struct err *e);

/* ---- warm-pool claims (sandbox_claim.c) ---- */
/* Makes the claim record of a new pool member: <dir>/claim.json, zeros,
 * synced (its directory entry is synced by the sandbox.json write that
 * follows). */
int sandbox_claim_prepare(struct sandbox *sb, struct err *e);
/* For a sandbox.json that says "pooled": 1 with *j replaced by the state
 * its claim recorded (or kept, when the record is unreadable), 0 when it
 * was never claimed (the member is to be removed). */
int sandbox_claim_load(struct sandbox *sb, cJSON **j);
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
/* The sandbox's own disk and /run/deskbox (sandbox_disk.c).  disk_mount
 * (with mu held) mounts the disk, creating it while the sandbox is being
 * created, and names the overlay's upper and work dirs (in the plain state
 * dir when the sandbox has no disk); disk_loaded drops the limit of a
 * sandbox found without an image (made before disks existed). */
int sandbox_disk_mount(struct sandbox *sb, char *upper, char *work, size_t size, struct err *e);
/* The upper and work dirs of the default image's /usr overlay, beside the
 * root overlay's (on the disk, or in the plain state dir without one). */
void sandbox_usr_layers(struct sandbox *sb, char *upper, char *work, size_t size);
/* The disk store (sandbox_store.c).  store_open mounts it (making it when
 * --disk-store asks for it and there is none) before the sandboxes are
 * loaded, store_sweep removes what deleted sandboxes left in it (after),
 * store_close unmounts it.  sandbox_disk_path: `name` (disk.img,
 * checkpoints/...) in the directory that holds sb's disk image: its own
 * dir, or <store>/sandboxes/<id>; disk_home_make creates that directory,
 * disk_home_remove removes it with everything in it (a delete).
 * store_room: ERR_NO_SPACE, saying so, when the store has too little left
 * for a new image or checkpoint of sb.  store_trim: gives what was deleted
 * in the store back to the host soon (in the background). */
int sandbox_store_open(struct sandboxes *s, struct err *e);
void sandbox_store_sweep(struct sandboxes *s);
void sandbox_store_close(struct sandboxes *s);
void sandbox_disk_path(const struct sandbox *sb, char *buf, size_t size, const char *name);
int sandbox_disk_home_make(struct sandbox *sb, struct err *e);
void sandbox_disk_home_remove(struct sandbox *sb);
int sandbox_store_room(struct sandbox *sb, struct err *e);
void sandbox_store_trim(struct sandboxes *s);
void sandbox_disk_umount(struct sandbox *sb);
void sandbox_disk_loaded(struct sandbox *sb);
int sandbox_run_mount(struct sandbox *sb, struct err *e);
void sandbox_run_umount(struct sandbox *sb);
/* The container's output (sandbox_log.c): open starts draining a new pipe
 * into init.log and hands out its write end (the caller closes it); flush
 * drains what is waiting now; close stops, drains and frees. */
int sandbox_log_open(struct sandbox *sb, int *wfd, struct err *e);
void sandbox_log_flush(const struct sandbox *sb);
void sandbox_log_close(struct sandbox *sb);

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

/* ---- sandboxes that outlive deskboxd (sandbox_adopt.c) ---- */
/* Leaves a running or paused sandbox as it is for the next deskboxd: the
 * mirror ends, the log pipe goes to a keeper, sandbox.json says
 * "detached".  Under its exclusive lock. */
void sandbox_detach(struct sandbox *sb);
/* Takes over a sandbox a previous deskboxd left running (`detached` is
 * sandbox.json's object, NULL when that deskboxd was killed and the
 * backend's adopt_after_kill allows it); fails when its container ended. */
int sandbox_adopt(struct sandbox *sb, const cJSON *detached, struct err *e);
/* The adopted sandbox's container ended: back to this deskboxd's mounts. */
void sandbox_adopt_end(struct sandbox *sb);
/* Where /run/deskbox of the sandbox is: <dir>/run, or through the
 * adopted init's root. */
void sandbox_run_dir(const struct sandbox *sb, char *buf, size_t size);
/* An adopted sandbox's run dir and root, reached through its init (either
 * may be NULL; each `size` bytes). */
void sandbox_adopted_paths(const struct sandbox *sb, char *run, char *root, size_t size);
/* The log pipe handed to a keeper process / taken back from it
 * (sandbox_log.c). */
int sandbox_log_detach(struct sandbox *sb, pid_t *keeper, struct err *e);
int sandbox_log_adopt(struct sandbox *sb, pid_t keeper, struct err *e);
/* ---- images (sandbox_image.c) ---- */
/* Checks that image `name` can be used by a new sandbox ("default"
 * always can); ERR_INVALID naming what is wrong.  With s->mu held. */
int sandbox_image_check(struct sandboxes *s, const char *name, struct err *e);
/* The refusal of an image that needs the host's desktop (its init must
 * chroot, so the sandbox must be root in a user namespace of its own). */
#define NO_USERNS_HOST_DESKTOP                                                                     \
	"image '%s' has no Xvfb or openbox of its own, and deskbox supplies the host's only to "   \
	"sandboxes with a user namespace (deskboxd runs without them: --allow-shared-uid)"
/* The lower layer of the sandbox's image into `lower`. */
int sandbox_image_lower(const struct sandbox *sb, char *lower, size_t size, struct err *e);
/* The ENV of the sandbox's image (a Dockerfile build's manifest
 * "config.env", at most SANDBOX_IMAGE_ENV_MAX "K=V"), NULL-terminated, or
 * NULL when it has none; free with sandbox_image_env_free(). */
#define SANDBOX_IMAGE_ENV_MAX 64
char **sandbox_image_env(const struct sandbox *sb);
void sandbox_image_env_free(char **env);

/* Removes upload temp files a crash left behind (sandbox_state.c). */
void sandbox_sweep_uploads(struct sandbox *sb);
/* Starts a stopped or failed sandbox under its exclusive lock
 * (sandbox_state.c); the monitor's restarts use it too. */
int sandbox_start_locked(struct sandbox *sb, struct err *e);

/* sandbox_get() with sb->op then held exclusively, and the status the
 * sandbox had once it was; sandbox_put_exclusive() lets go of the lock
 * and, when `r` is an error (or `out` NULL), of the reference too, else
 * hands it to *out.  Returns `r`. */
int sandbox_get_exclusive(struct sandboxes *s, const char *id, struct sandbox **out,
			  enum sandbox_status *st, struct err *e);
int sandbox_put_exclusive(struct sandbox *sb, int r, struct sandbox **out);

/* ---- names and metadata (sandbox_name.c) ---- */
/* "name", "metadata" and "read_only_root" of a create into `spec`
 * (sandbox_spec_parse; on failure spec->metadata may be set, released
 * with the spec). */
int sandbox_spec_parse_labels(const cJSON *req, struct sandbox_spec *spec, struct err *e);

/* ---- secrets (sandbox_secrets.c) ---- */
/* "secrets": names (a request) or {"name","placeholder"} (sandbox.json). */
int sandbox_spec_parse_secrets(const cJSON *req, struct sandbox_spec *spec, struct err *e);
/* "secrets": [{"name","placeholder"}], when it has any. */
void sandbox_secrets_json(const struct sandbox_spec *spec, cJSON *j);
/* At create: every name stored, none also in env; placeholders given. */
int sandbox_secrets_resolve(struct sandbox *sb, struct err *e);
/* Appends the placeholders and the trust variables to `env` (room for
 * SECRETS_PER_SANDBOX + 4); returns how many. */
size_t sandbox_secrets_env(struct sandbox *sb, const char **env);
/* <dir>/egress: the sandbox's CA (the host's only). */
void sandbox_secrets_dir(const struct sandbox *sb, char *buf, size_t size);
/* Makes the CA unless it is there and trusts it inside `rootfs`. */
int sandbox_secrets_rootfs(struct sandbox *sb, const char *rootfs, struct err *e);
/* The egress proxy's port for the network filter, 0: no interception. */
uint16_t sandbox_secrets_port(const struct sandbox *sb);
/* Binds the attached sandbox's address to the proxy; unbind undoes it. */
int sandbox_secrets_bind(struct sandbox *sb, struct err *e);
void sandbox_secrets_unbind(struct sandbox *sb);
/* PATCH "secrets" (sb->op held): the new list, placeholders of the names
 * it had kept; a running sandbox's proxy binding and filter follow at
 * once, its environment at the next start. */
int sandbox_secrets_change(struct sandbox *sb, enum sandbox_status st,
			   const struct sandbox_secret *list, size_t n, struct err *e);
/* The network filter and the proxy binding again after the secrets
 * changed (sb->op held); no-op without a network. */
int sandbox_net_reapply(struct sandbox *sb, struct err *e);
/* Adds "name" (when it has one), "metadata" and "read_only_root". */
void sandbox_labels_json(struct sandbox *sb, cJSON *j);
/* The listed sandbox whose id or name is `ref`, or NULL; s->mu held. */
struct sandbox *sandbox_find_locked(struct sandboxes *s, const char *ref);
/* ERR_NAME_TAKEN when a listed sandbox has `name` ("" is no name); s->mu
 * held, so that the check and the listing that follows are one step. */
int sandbox_name_claim_locked(struct sandboxes *s, const char *name, struct err *e);
/* `cur` (NULL: none) with merge patch `patch` applied (a string sets a
 * key, null removes it), checked against the create's bounds, into *out
 * (the caller's). */
int sandbox_metadata_merge(const cJSON *cur, const cJSON *patch, cJSON **out, struct err *e);
/* Whether sb's metadata meets all `n` conditions. */
int sandbox_matches(struct sandbox *sb, const struct sandbox_filter *f, size_t n);

/* ---- read-only roots (sandbox_readonly.c) ---- */
#define SANDBOX_RW_DIRS 4
/* What stays writable under a read-only root: /workspace, /tmp,
 * /home/user, /root. */
extern const char *const sandbox_rw_dirs[SANDBOX_RW_DIRS + 1];
/* The container's writable binds (from `rootfs`, the overlay) for a
 * read_only_root sandbox into `mounts` (room for SANDBOX_RW_DIRS; their
 * sources in `src`); returns how many, 0 for other sandboxes. */
int sandbox_ro_mounts(const struct sandbox *sb, const char *rootfs, struct runtime_mount *mounts,
		      char src[SANDBOX_RW_DIRS][PATH_MAX]);
/* Mounts <dir>/roview (the overlay read-only, the writable places bound
 * writable on it) unless it is; the overlay must be mounted.  umount
 * undoes it (before the overlay is unmounted). */
int sandbox_roview_mount(struct sandbox *sb, struct err *e);
void sandbox_roview_umount(struct sandbox *sb);

/* ---- deadlines (sandbox_timeout.c) ---- */

/* Starts the one timer thread that fires every sandbox's deadline. */
int sandbox_timer_new(struct sandboxes *s, struct err *e);
/* Stops it and waits for the actions it started; then frees it. */
void sandbox_timer_free(struct sandboxes *s);
/* Arms sb's deadline from spec.timeout_s (resolving the server default),
 * counted from now; nothing for 0.  Wakes the timer. */
void sandbox_timeout_arm(struct sandbox *sb);
/* Adds "timeout_s", "on_timeout", "auto_resume" and "expires_at" to `j`. */
void sandbox_timeout_json(struct sandbox *sb, cJSON *j);
/* Reads "expires_at" of a persisted sandbox.json back. */
void sandbox_timeout_load(struct sandbox *sb, const cJSON *j);

/* A create whose filesystem does not start empty (a fork): fill() runs
 * once the sandbox's directory exists, before its disk is mounted and its
 * container starts, and puts its disk.img in place. */
struct sandbox_seed {
	int (*fill)(struct sandbox *sb, void *cls, struct err *e);
	void *cls;
};
int sandbox_create_seeded(struct sandboxes *s, struct sandbox_spec *spec,
			  const struct sandbox_seed *seed, struct sandbox **out, struct err *e);
/* Stops a running, paused or failed sandbox under its exclusive lock
 * (sandbox_state.c); files stay, status "stopped". */
int sandbox_stop_locked(struct sandbox *sb, struct err *e);
/* Freezes the cgroup of a running sandbox and returns at once frozen, or
 * thaws it (sandbox_pause.c); without a status change. */
int sandbox_freeze(struct sandbox *sb, struct err *e);
int sandbox_thaw(struct sandbox *sb, struct err *e);

/* ---- the freezer (sandbox_pause.c) ---- */

/* Thaws the sandbox's cgroup if it is frozen (before a stop or a
 * teardown: frozen tasks neither take SIGTERM nor die of SIGKILL). */
void sandbox_thaw_quiet(struct sandbox *sb);
/* Under the exclusive lock: freezes a running one / thaws a paused one. */
int sandbox_pause_locked(struct sandbox *sb, struct err *e);
int sandbox_resume_locked(struct sandbox *sb, struct err *e);
/* ---- the network (sandbox_network.c), under op held exclusively ---- */
/* Fills a spec that names no network with the server's default (none
 * for a pooled sandbox). */
int sandbox_net_resolve(struct sandbox *sb, int pooled, struct err *e);
/* <dir>/resolv.conf: bind-mounted over the sandbox's /etc/resolv.conf. */
void sandbox_net_resolv_path(const struct sandbox *sb, char *buf, size_t size);
/* Attaches the running container per its spec (nothing for none); ready
 * waits for its resolver; detach undoes attach (nothing if detached). */
int sandbox_net_attach(struct sandbox *sb, struct err *e);
int sandbox_net_ready(struct sandbox *sb, struct err *e);
void sandbox_net_detach(struct sandbox *sb);
/* A pooled sandbox's network at its claim, from the request's spec. */
int sandbox_net_claim(struct sandbox *sb, const struct sandbox_spec *req, struct err *e);
/* Adds "network" (as given), and "network_address" while attached. */
void sandbox_net_json(struct sandbox *sb, cJSON *j);
void sandbox_net_json_address(struct sandbox *sb, cJSON *j);

/* ---- the monitor (sandbox_monitor.c) ---- */

/* Starts the thread that watches every init; makes deskboxd a child
 * subreaper (see sandboxes_open). */
int sandbox_monitor_new(struct sandboxes *s, struct err *e);
/* Stops the thread and waits for restarts in progress; the watches left
 * are dropped by sandbox_monitor_free(), after the sandboxes' teardown. */
void sandbox_monitor_stop(struct sandboxes *s);
void sandbox_monitor_free(struct sandboxes *s);
/* Watches sb->init_pid, just started: a pidfd, checked to be the
 * container's init (its cgroup), so a pid reused by another process is
 * never taken for it; sets sb->init_gen. */
int sandbox_monitor_watch(struct sandbox *sb, struct err *e);
/* Whether `pid` is a process in the cgroup of container `cid`. */
int sandbox_pid_in_container(pid_t pid, const char *cid);
/* The init about to be stopped on purpose: its exit is no failure. */
void sandbox_init_disown(struct sandbox *sb);
/* 1 once the init that was started exited (or was disowned). */
int sandbox_init_gone(struct sandbox *sb);
/* Makes a sandbox whose container just came up "running", unless its init
 * died meanwhile (then the error says why).  Under the exclusive lock. */
int sandbox_set_running(struct sandbox *sb, struct err *e);

#endif
