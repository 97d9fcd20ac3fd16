/* sandbox: the registry of sandboxes and their lifecycle.
 *
 * A sandbox is a container (server/runtime/runtime.h) over an overlay root
 * filesystem (server/runtime/runtime.h) running the desktop init, plus the capture
 * bridge mirroring its screen (capture/capture.h).  Its state lives in
 * <state>/sandboxes/<id>/: sandbox.json (spec and status, written
 * atomically), upper/ work/ rootfs/ (overlay), run/ (bind-mounted at
 * /run/deskbox inside: the VNC socket and the ready flag), bundle/, init.log.
 *
 * Lifetimes: sandbox_get() hands out a reference that sandbox_put() drops;
 * a deleted sandbox is freed when its last reference goes.  Operations that
 * use the running container or the mirror run between sandbox_use() and
 * sandbox_unuse(), which delete and reconnect wait for.
 */
#ifndef DESKBOX_SERVER_SANDBOX_H
#define DESKBOX_SERVER_SANDBOX_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "capture/capture.h"
#include "common/error.h"
#include "server/network/network.h"
#include "server/runtime/runtime.h"
#include "server/secrets/secrets.h"

#define SANDBOX_ID_LEN 32 /* hex characters: 128 random bits */

enum sandbox_status {
	SANDBOX_CREATING,
	SANDBOX_RUNNING,
	SANDBOX_STOPPED,
	SANDBOX_FAILED,
	SANDBOX_PAUSED, /* every process frozen (sandbox_pause.c) */
	SANDBOX_DELETING,
};

/* What a sandbox's deadline does (sandbox_timeout.c). */
enum sandbox_on_timeout {
	SANDBOX_ON_TIMEOUT_STOP,
	SANDBOX_ON_TIMEOUT_DELETE,
	SANDBOX_ON_TIMEOUT_PAUSE,
};

#define SANDBOX_MAX_ENV 128

/* Names and metadata (sandbox_name.c): a name is a DNS label of at most
 * SANDBOX_NAME_MAX; metadata holds at most SANDBOX_META_MAX_KEYS keys of
 * at most SANDBOX_META_KEY_MAX bytes with string values of at most
 * SANDBOX_META_VALUE_MAX bytes. */
#define SANDBOX_NAME_MAX       63
#define SANDBOX_META_MAX_KEYS  32
#define SANDBOX_META_KEY_MAX   64
#define SANDBOX_META_VALUE_MAX 256

/* One secret a sandbox names (sandbox_secrets.c). */
struct sandbox_secret {
	char name[SECRETS_NAME_MAX + 1];
	char placeholder[SECRETS_PLACEHOLDER_LEN + 1];		 /* "" until create gives one */
	char kv[SECRETS_NAME_MAX + SECRETS_PLACEHOLDER_LEN + 2]; /* "NAME=placeholder" */
};

struct sandbox_spec {
	uint32_t width, height;
	uint64_t memory_mb;
	int64_t pids_max;
	uint32_t cpu_millis;
	/* The screen size the agent sees and points in (screenshots come at
	 * that size, coordinates are mapped back); 0x0: the real size. */
	uint32_t agent_width, agent_height;
	/* The sandbox's own disk in MiB (everything it writes, see
	 * sandbox_disk.c); 0: none, no limit; SANDBOX_DISK_DEFAULT: the
	 * server's default (sandboxes_config.disk_mb), resolved at create. */
	uint64_t disk_mb;
	char *env[SANDBOX_MAX_ENV + 1]; /* "K=V", NULL-terminated, owned */
	/* "restart":"on-failure": started again when its init dies
	 * (sandbox_monitor.c: with a backoff, at most 5 times in 10 minutes). */
	int restart_on_failure;
	/* "timeout_s": seconds from create (or claim) until on_timeout
	 * happens; 0: never; SANDBOX_TIMEOUT_DEFAULT: the server's
	 * --default-timeout, resolved at create. */
	int64_t timeout_s;
	enum sandbox_on_timeout on_timeout;
	/* "auto_resume": desktop and process calls resume a paused sandbox
	 * instead of answering ERR_PAUSED. */
	int auto_resume;
	/* "network": "none" | "internet" | {"allow": [...]}; json NULL
	 * when the request named none (the server's default, resolved at
	 * create). */
	struct network_policy network;
	/* "default" or a stored image (server/runtime/runtime.h, images). */
	char image[IMAGE_NAME_MAX + 1];
	/* "name" (sandbox_name.c): unique among the sandboxes and usable in
	 * place of the id; "" when it has none. */
	char name[SANDBOX_NAME_MAX + 1];
	/* "metadata": a JSON object of string values (owned), NULL: none. */
	cJSON *metadata;
	/* "read_only_root": all but /workspace, /tmp, /home/user and /root
	 * is read-only inside. */
	int read_only_root;
	/* "root": false: nothing runs as the container's root on request
	 * ("user": "root" answers ERR_ROOT_DISABLED) and sudo says no. */
	int no_root;
	/* "secrets": the names of stored secrets it uses, each seen inside as
	 * its placeholder (docs/secrets.md). */
	size_t n_secrets;
	struct sandbox_secret secrets[SECRETS_PER_SANDBOX];
	/* "isolation": "container" | "vm"; 0 when the request named none
	 * (the server's default, resolved at create). */
	enum runtime_isolation isolation;
};

#define SANDBOX_TIMEOUT_DEFAULT (-1)
#define SANDBOX_TIMEOUT_MAX	(10LL * 365 * 86400)

#define SANDBOX_DISK_DEFAULT UINT64_MAX
#define SANDBOX_DISK_MIN_MB  32

struct sandboxes_config {
	const char *state_dir;
	const char *runtime_binary; /* "crun" */
	const char *bridge_path;    /* build/deskbox-bridge */
	const char *init_path;	    /* build/deskbox-init */
	const char *vnc_path;	    /* build/deskbox-vnc */
	const char *xtool_path;	    /* build/deskbox-xtool */
	/* build/image: deskbox-init, deskbox-vnc, deskbox-xtool linked for
	 * stored images, and lib/ (docs/images.md); NULL: none. */
	const char *image_bin_dir;
	enum runtime_cgroup_mode cgroup_mode;
	unsigned max_sandboxes;
	int ready_timeout_ms;
	uint64_t disk_mb; /* a sandbox's disk when its spec names none; 0: none */
	/* Where new disk images go (sandbox_store.c, --disk-store) and the
	 * size of a disk store made now in MiB (0: the state dir's
	 * filesystem's size, --disk-store-size). */
	enum disk_store_mode disk_store;
	uint64_t disk_store_mb;
	/* First host id of the sandboxes' uid ranges (RUNTIME_USERNS_SIZE
	 * each, see sandbox_userns.c); 0: no user namespaces, every sandbox
	 * runs as host uid IMAGE_USER_UID (--allow-shared-uid). */
	uint32_t userns_base;
	/* Seconds a sandbox lives when its spec names no timeout_s; 0: no
	 * limit (--default-timeout). */
	int64_t default_timeout_s;
	/* A sandbox's isolation when its spec names none; 0: container
	 * (--default-isolation). */
	enum runtime_isolation default_isolation;
	/* The host-wide network manager (server/network/network.h); NULL:
	 * every sandbox has network none. */
	struct network *network;
	/* The secrets store and the egress proxy (server/secrets/secrets.h);
	 * NULL: a spec naming secrets is refused. */
	struct secrets *secrets;
	struct egress *egress;
};

struct sandbox;
struct sandboxes;
struct process_table;
struct files_root;

/* Opens the registry: prepares the default image and the runtime, reads the
 * sandboxes already in the state dir (stale containers of a previous run are
 * removed and those sandboxes listed as stopped, failed ones stay failed;
 * half-created and half-deleted ones are rolled back) and starts the monitor
 * that notices a sandbox whose init exits (sandbox_monitor.c).  deskboxd
 * becomes a child subreaper: the inits crun starts detached are its
 * children, so their exit status can be read and their pids are not reused
 * until it is. */
int sandboxes_open(struct sandboxes **out, const struct sandboxes_config *cfg, struct err *e);

/* Stops every running sandbox (their files stay) and frees the registry. */
void sandboxes_close(struct sandboxes *s);
/* Frees the registry and leaves running sandboxes running, for the next
 * deskboxd on the same state dir to take over (sandbox_adopt.c; their
 * foreground runs must have been killed first: sandboxes_kill_runs). */
void sandboxes_detach(struct sandboxes *s);

/* Kills every run (exec, code_run, context) of every sandbox, so requests
 * waiting for one end now (shutdown); with `foreground_only`, background
 * runs and launched programs are spared (sandboxes_detach). */
void sandboxes_kill_runs(struct sandboxes *s, int foreground_only);

/* Validates the spec's JSON form into `spec`, defaults filled in
 * (sandbox_spec.c: {"display":{"width","height"}, "memory_mb", "pids_max",
 * "cpu_millis", "agent_display":{"width","height"}, "disk_mb", "env":{K:V},
 * "restart":"no"|"on-failure", "network": see network.h, "image", "name",
 * "metadata", "read_only_root" (sandbox_name.c), "isolation":
 * "container"|"vm"}); on failure nothing is
 * left to release. */
int sandbox_spec_parse(const cJSON *req, struct sandbox_spec *spec, struct err *e);

/* Every member a create request (POST /v1/sandboxes) may have, NULL-
 * terminated: anything else is refused with ERR_UNKNOWN_FIELD before the
 * create does anything (args_only()).  A new create field is a name added
 * here and its parser in sandbox_spec_parse(). */
extern const char *const sandbox_create_fields[];

/* 0 if runs of `sb` may be the container's root ("user": "root"): the
 * sandbox has a user namespace of its own, so its root is only that
 * namespace's, and was not made with "root": false.  ERR_ROOT_DISABLED
 * saying which. */
int sandbox_root_check(struct sandbox *sb, struct err *e);
void sandbox_spec_release(struct sandbox_spec *spec);

/* Creates and starts a sandbox and returns once its desktop is ready (X
 * accepting clients, window manager up, mirror holding a first frame).
 * Takes ownership of spec's strings.  On failure everything is rolled
 * back.  The caller gets a reference. */
int sandbox_create(struct sandboxes *s, struct sandbox_spec *spec, struct sandbox **out,
		   struct err *e);

/* The warm pool's hooks (sandbox_pool.c).  A pooled sandbox is created like
 * any other but is not listed, not found by id and not counted against
 * max_sandboxes; with `own_network` its network is resolved and attached
 * as at an ordinary create (a template's member), else it has none until
 * its claim.  sandbox_claim() turns it into an ordinary one (taking the
 * agent display, restart, timeout and auto_resume from `req`, and the
 * network too without own_network; ERR_LIMIT if max_sandboxes is
 * reached; sandbox_claim.c says how the claim is made durable),
 * sandbox_discard() deletes it (consumes nothing: the caller keeps and must
 * drop its own reference).  sandbox_spec_matches_pool() says whether a
 * create request can be served by `sb`. */
int sandbox_create_pooled(struct sandboxes *s, struct sandbox_spec *spec, int own_network,
			  struct sandbox **out, struct err *e);
int sandbox_claim(struct sandboxes *s, struct sandbox *sb, const struct sandbox_spec *req,
		  struct err *e);
void sandbox_discard(struct sandboxes *s, struct sandbox *sb);
int sandbox_spec_matches_pool(const struct sandbox_spec *req, const struct sandbox *sb);

/* Looks a sandbox up by id or name and takes a reference.  ERR_NOT_FOUND. */
int sandbox_get(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e);
void sandbox_put(struct sandbox *sb);

/* Moving a stopped sandbox to another node (sandbox_move.c).  out_begin
 * holds `id` exclusively (its other operations wait), refuses one that is
 * not stopped (ERR_CONFLICT, its state the message), unmounts its disk and
 * gives a shell command writing its files to stdout as tar, and its name.
 * out_end: moved, it is deleted here; not, its disk is mounted again and
 * it stays as it was.  in_begin: a directory for `id` coming in (*tmp) and
 * the shell command reading the tar from stdin into it (ERR_CONFLICT when
 * this node has it); in_end puts the files in place and loads it, stopped
 * (its name in `name`); in_abort removes what came. */
int sandbox_move_out_begin(struct sandboxes *s, const char *id, struct sandbox **out, char *cmd,
			   size_t size, char name[64], struct err *e);
int sandbox_move_out_end(struct sandboxes *s, struct sandbox *sb, int moved, struct err *e);
int sandbox_move_in_begin(struct sandboxes *s, const char *id, char *tmp, size_t tsize, char *cmd,
			  size_t csize, struct err *e);
int sandbox_move_in_end(struct sandboxes *s, const char *id, const char *tmp, char name[64],
			struct err *e);
void sandbox_move_in_abort(const char *tmp);

/* ---- names and metadata (sandbox_name.c) ---- */

/* 1 if `name` can name a sandbox: 1-63 of a-z 0-9 '-', starting with a
 * letter, not ending with '-', and not 32 hex digits (so that no name is
 * ever taken for an id). */
int sandbox_name_ok(const char *name);
/* 1 if `key` can be a metadata key: 1-64 of A-Z a-z 0-9 . _ - /. */
int sandbox_metadata_key_ok(const char *key);
/* The id of the sandbox `ref` (an id or a name) names, into `id`; -ENOENT
 * when none does. */
int sandbox_resolve(struct sandboxes *s, const char *ref, char *id, size_t size);

/* One metadata condition of a list: metadata[key] == value. */
struct sandbox_filter {
	const char *key, *value;
};
/* The listed sandboxes whose metadata meets all `n` conditions (a JSON
 * array of sandbox_json views, the caller's). */
cJSON *sandboxes_json_where(struct sandboxes *s, const struct sandbox_filter *f, size_t n);

/* Deletes a sandbox: every process, mount, cgroup, socket and file. */
int sandbox_delete(struct sandboxes *s, const char *id, struct err *e);

/* Stops the sandbox's container (every process ends, the desktop with
 * them); the files stay and the status becomes "stopped".  Stopping a
 * stopped sandbox is not an error.  The caller gets a reference. */
int sandbox_stop(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e);

/* Starts a stopped or failed sandbox again over the same files and returns
 * once its desktop is ready; on failure it stays as it was.  Starting a
 * running one is not an error.  The caller gets a reference.  Stopping a
 * failed one makes it stopped (and ends automatic restarts). */
int sandbox_start(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e);

/* Changes the sandbox's network policy (`v`: the "network" value): a
 * running sandbox gets it at once (attached, updated or detached), a
 * stopped one at its next start; persisted.  The caller gets a reference. */
int sandbox_set_network(struct sandboxes *s, const char *id, const cJSON *v, struct sandbox **out,
			struct err *e);

/* An O_PATH fd of the sandbox's "/" for the files API (server/files/files.h)
 * and the host ids of its user, for running and stopped sandboxes alike:
 * while it runs, the container's own root (/proc/<init>/root: with its
 * /usr, /proc and /run mounts); while stopped, its overlay mounted on
 * <dir>/rootfs.  The fd stays usable
 * across stop and start (same overlay); ERR_CONFLICT while it is being
 * created. */
int sandbox_open_root(struct sandbox *sb, struct files_root *root, struct err *e);

/* Space for a write of `bytes` from outside the sandbox (an upload):
 * reserved against the sandbox's disk, so that concurrent writers cannot
 * together pass it.  ERR_NO_SPACE when what is free, less what others have
 * reserved, is short.  A sandbox without a disk limit always has room.
 * Each reservation is given back with sandbox_disk_release() (as bytes are
 * written, since the filesystem counts them from then on, and at the end). */
int sandbox_disk_reserve(struct sandbox *sb, uint64_t bytes, struct err *e);
void sandbox_disk_release(struct sandbox *sb, uint64_t bytes);
/* The size of the sandbox's disk in bytes; 0 when it has no limit. */
uint64_t sandbox_disk_bytes(struct sandbox *sb);
/* Where deskboxd keeps the sandbox's desktop recordings: on its own disk
 * (so they count against disk_mb) beside the overlay's layers, out of the
 * sandbox's reach; in its directory when it has no disk. */
void sandbox_recordings_dir(struct sandbox *sb, char *buf, size_t size);
/* The status now (it may change as soon as this returns). */
enum sandbox_status sandbox_current_status(struct sandbox *sb);

/* ---- live changes (sandbox_patch.c) ---- */

/* A PATCH: a limit of 0 (has_cpu 0) is left as it is; cpu_millis 0 with
 * has_cpu lifts the CPU limit; metadata (owned, NULL: unchanged) is a
 * merge patch, a null value removing its key. */
struct sandbox_patch {
	uint64_t memory_mb;
	int64_t pids_max;
	int has_cpu;
	uint32_t cpu_millis;
	cJSON *metadata;
	/* "secrets": the new list (names; placeholders of names it had are
	 * kept). */
	int has_secrets;
	size_t n_secrets;
	struct sandbox_secret secrets[SECRETS_PER_SANDBOX];
};

/* Parses a PATCH body ({"memory_mb","pids_max","cpu_millis","metadata",
 * "secrets"},
 * at least one); a field fixed at create (disk_mb, display, name, ...) or
 * an unknown one is ERR_INVALID naming it.  sandbox_patch_release() frees
 * it, also after a failure. */
int sandbox_patch_parse(const cJSON *req, struct sandbox_patch *p, struct err *e);
void sandbox_patch_release(struct sandbox_patch *p);

/* Applies `p` to sandbox `id`: limits in its cgroup at once when it runs
 * or is paused, everything in its persisted spec.  ERR_CONFLICT while it
 * is being made or when the kernel refuses a memory limit below its use;
 * ERR_INVALID when the merged metadata breaks the bounds.  The caller
 * gets a reference. */
int sandbox_patch_apply(struct sandboxes *s, const char *id, const struct sandbox_patch *p,
			struct sandbox **out, struct err *e);

/* ---- timeouts (sandbox_timeout.c) ---- */

/* Sets the deadline of sandbox `id` to `timeout_s` seconds from now (0:
 * none) and persists it; the timer thread acts on it within a second of
 * its time, whatever the sandbox's status (stop and pause only touch a
 * running one, delete deletes).  The caller gets a reference. */
int sandbox_set_timeout(struct sandboxes *s, const char *id, int64_t timeout_s,
			struct sandbox **out, struct err *e);

/* ---- pause and resume (sandbox_pause.c) ---- */
/* Pause with "memory":true: refused by name (ERR_NOT_IMPLEMENTED) for
 * either isolation yet (sandbox_pause.c says why); the sandbox's state
 * checks (not found, not running) come first. */
int sandbox_pause_memory(struct sandboxes *s, const char *id, struct sandbox **out,
			 struct err *e);

/* Freezes every process of a running sandbox (the cgroup freezer) and
 * returns once all are frozen; status "paused".  Pausing a paused one is
 * not an error; any other status is ERR_NOT_RUNNING or ERR_CONFLICT.  The
 * caller gets a reference. */
int sandbox_pause(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e);
/* Thaws a paused sandbox (status "running" again); resuming a running one
 * is not an error. */
int sandbox_resume(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e);

/* ---- checkpoints and forks (sandbox_checkpoint.c) ---- */

/* 1 if `name` is a usable checkpoint name: 1-64 of A-Z a-z 0-9 . _ -, not
 * starting with '.' or '-'. */
int sandbox_checkpoint_name_ok(const char *name);
/* Captures the filesystem of sandbox `id` (running, paused or stopped; its
 * processes frozen for the copy) as checkpoint `name`; *out describes it
 * ({"name","created_at","size_bytes","frozen_ms"}, the caller's).
 * ERR_CONFLICT if the name is taken or the sandbox has no disk of its
 * own, ERR_LIMIT past 32. */
int sandbox_checkpoint_create(struct sandboxes *s, const char *id, const char *name, cJSON **out,
			      struct err *e);
/* A checkpoint with "memory":true: ERR_NOT_IMPLEMENTED naming why for the
 * sandbox's isolation (ERR_NOT_FOUND without one). */
int sandbox_checkpoint_memory(struct sandboxes *s, const char *id, struct err *e);
/* The checkpoints of `id`, a JSON array (the caller's). */
int sandbox_checkpoints_list(struct sandboxes *s, const char *id, cJSON **out, struct err *e);
int sandbox_checkpoint_delete(struct sandboxes *s, const char *id, const char *name, struct err *e);
/* Rolls the filesystem back to checkpoint `name`: the container stops,
 * the files become the checkpoint's, and a sandbox that ran (or was
 * paused) starts again, answering once its desktop is ready.  The caller
 * gets a reference. */
int sandbox_checkpoint_restore(struct sandboxes *s, const char *id, const char *name,
			       struct sandbox **out, struct err *e);
/* A new sandbox with the spec of `id` and the files of its checkpoint
 * `checkpoint` (NULL: of `id` as it is now), independent of it from then
 * on; returns once its desktop is ready, as create does.  It copies the
 * metadata but not the name: it is named `name` (NULL: none; ERR_INVALID
 * for a bad one, ERR_NAME_TAKEN for one in use). */
int sandbox_fork(struct sandboxes *s, const char *id, const char *checkpoint, const char *name,
		 struct sandbox **out, struct err *e);

/* ---- templates (sandbox_template.c) ---- */

#define SANDBOX_TEMPLATE_NAME_MAX 64

struct sandbox_templates;

/* What a template adds to a create: its files and startup commands
 * (JSON arrays or NULL, owned). */
struct sandbox_template_extra {
	cJSON *files, *startup;
};

/* Loads the templates of <state>/templates and of `extra_dir` (NULL: none;
 * bad files are logged and skipped). */
int sandbox_templates_open(struct sandbox_templates **out, const char *state_dir,
			   const char *extra_dir, struct err *e);
void sandbox_templates_free(struct sandbox_templates *t);
int sandbox_template_name_ok(const char *name);
/* Every member a template may have (NULL-terminated; its "name" aside). */
extern const char *const sandbox_template_fields[];
/* Validates `body` (unknown fields refused, naming them; a create it would
 * make must be valid) and adds or replaces template `name`, persisted. */
int sandbox_template_put(struct sandbox_templates *t, const char *name, const cJSON *body,
			 struct err *e);
/* A copy of template `name` with its "name" (the caller's). */
int sandbox_template_get(struct sandbox_templates *t, const char *name, cJSON **out, struct err *e);
cJSON *sandbox_templates_json(struct sandbox_templates *t);
int sandbox_template_delete(struct sandbox_templates *t, const char *name, struct err *e);
/* A create request {"template":N, overrides…} into the plain create request
 * (*create, the caller's) and the template's files and startup commands;
 * ERR_INVALID for an unknown template or field. */
int sandbox_template_expand(struct sandbox_templates *t, const cJSON *req, cJSON **create,
			    struct sandbox_template_extra *extra, struct err *e);
void sandbox_template_extra_release(struct sandbox_template_extra *x);
/* Places the files and runs the startup commands in the new sandbox `sb`
 * (running); ERR_INVALID when a command exits non-zero. */
int sandbox_template_apply(struct sandbox *sb, const struct sandbox_template_extra *x,
			   struct err *e);

/* "creating", "running", "stopped", "failed", "paused", "deleting". */
const char *sandbox_status_name(enum sandbox_status status);

/* How many listed sandboxes are in each status (GET /metrics). */
void sandboxes_count(struct sandboxes *s, unsigned counts[SANDBOX_DELETING + 1]);

/* JSON views: the spec and status (what sandbox.json holds). */
cJSON *sandbox_json(struct sandbox *sb);
cJSON *sandboxes_json(struct sandboxes *s);

/* Enters an operation on a running sandbox: ERR_NOT_RUNNING when it is
 * stopped or failed (the message says which, and why it failed),
 * ERR_CONFLICT while it is being created.  With `need_capture`, also
 * makes sure the mirror is connected (reconnecting a bridge that died;
 * ERR_UNAVAILABLE if that fails) and reports it in *cap, valid until
 * sandbox_unuse(). */
int sandbox_use(struct sandbox *sb, int need_capture, struct capture **cap, struct err *e);
void sandbox_unuse(struct sandbox *sb);

/* A new connection to the sandbox's VNC server (its unix socket), retried
 * for a few seconds while x11vnc (re)starts.  Returns the fd (O_CLOEXEC,
 * caller closes).  Call between sandbox_use() and sandbox_unuse().
 * *lease is -1, or an fd the caller closes with the connection (a VM's
 * viewer port stays taken while it is open); ERR_UNAVAILABLE when every
 * viewer port of the sandbox is taken. */
int sandbox_vnc_connect(const struct sandbox *sb, int *lease, struct err *e);

/* A TCP connection to 127.0.0.1:`port` inside the sandbox, made from its
 * own network namespace (runtime_connect_inside), whatever its network
 * mode.  Returns the fd (caller closes); ERR_BAD_GATEWAY when nothing
 * accepts within `timeout_ms`.  Call between sandbox_use() and
 * sandbox_unuse(); the connection may outlive that. */
int sandbox_port_connect(struct sandbox *sb, uint16_t port, int timeout_ms, struct err *e);

/* Stored images (sandbox_image.c over server/runtime's images): the list
 * and one manifest, each with "sandboxes" (how many use it); delete is
 * ERR_CONFLICT while a sandbox, stopped ones included, names the image;
 * import is synchronous, build answers at once and runs in the background
 * (its status in sandbox_image_get). */
cJSON *sandbox_images_json(struct sandboxes *s);
int sandbox_image_get(struct sandboxes *s, const char *name, cJSON **out, struct err *e);
int sandbox_image_delete(struct sandboxes *s, const char *name, struct err *e);
int sandbox_image_import(struct sandboxes *s, const struct image_import *im, cJSON **out,
			 struct err *e);
int sandbox_image_build(struct sandboxes *s, const char *name, const char *mirror, struct err *e);
/* An image from a Dockerfile (image_dockerfile_start): the build gets a
 * uid range of its own, which no sandbox takes until the build is over.
 * `context`: a host path (tar or directory), or NULL for the one uploaded
 * for `name` (sandbox_image_context_*), if any; `build_args` "K=V" for
 * the Dockerfile's ARGs, or NULL; `timeout_s` bounds the build (0: the
 * most, IMAGE_BUILD_TIMEOUT_S).  Answers at once. */
int sandbox_image_dockerfile(struct sandboxes *s, const char *name, const char *text, size_t len,
			     const char *context, const char *const *build_args, unsigned timeout_s,
			     struct err *e);
/* The build log of `name` opened for reading (the caller closes *fd);
 * sandbox_image_building() is 1 while the build goes on (more may come). */
int sandbox_image_build_log(struct sandboxes *s, const char *name, int *fd, struct err *e);
int sandbox_image_building(struct sandboxes *s, const char *name);
/* A build context tar for `name`, written to a temporary file and put in
 * place whole: begin opens it (*fd, the caller's), commit renames it
 * (after the caller closed it), abort removes it. */
int sandbox_image_context_begin(struct sandboxes *s, const char *name, char *tmp, size_t size,
				int *fd, struct err *e);
int sandbox_image_context_commit(struct sandboxes *s, const char *name, const char *tmp,
				 struct err *e);

const char *sandbox_id(const struct sandbox *sb);
const char *sandbox_container_id(const struct sandbox *sb);
const char *sandbox_dir(const struct sandbox *sb);
struct runtime *sandbox_runtime(const struct sandbox *sb);
/* The sandbox's runs (server/process/process.h); lives as long as the sandbox. */
struct process_table *sandbox_procs(const struct sandbox *sb);
uint32_t sandbox_width(const struct sandbox *sb);
uint32_t sandbox_height(const struct sandbox *sb);
/* The declared agent display (spec.agent_width/height), 0x0 when none. */
void sandbox_agent_display(const struct sandbox *sb, uint32_t *w, uint32_t *h);

/* ---- the warm pool (sandbox_pool.c) ---- */

/* pool: warm desktops, ready before anyone asks.
 *
 * `deskboxd --warm-pool N[:WxH]` keeps N running sandboxes of that display
 * size (default 1280x800) with the default limits.  POST /v1/sandboxes takes
 * one when the request matches (same display size and limits, no env) and a
 * background thread starts a replacement; anything else is created cold.
 *
 * A template with "warm_pool": N keeps N sandboxes made from it (its
 * image, display, resources, network and env, its files placed and its
 * startup commands run) in a pool of its own; a create naming the template
 * takes one when its other fields are only those a claim can apply
 * (pool_template_claimable).  Replacing or deleting the template drains
 * its pool.  One background thread starts every pool's members, one at a
 * time.
 *
 * A claim costs a list operation and one small synced write instead of a
 * container and desktop start.
 */
#define POOL_MAX_SIZES	  8
#define POOL_MAX_PER_SIZE 64
/* A template's "warm_pool" at most, and all templates' together: each
 * member is a running desktop (~40 MB, and its startup's work). */
#define POOL_TEMPLATE_MAX    16
#define POOL_TEMPLATES_TOTAL 32

struct pool_size {
	uint32_t width, height;
	unsigned count;
};

struct pool;

/* Parses "N" or "N:WxH" (one --warm-pool option). */
int pool_size_parse(const char *arg, struct pool_size *out, struct err *e);

/* Starts the refill thread for `sizes` and for every template of `t` with
 * a warm_pool (`t` may be NULL: none).  Caller frees with pool_free()
 * before closing `s` and `t`. */
int pool_new(struct pool **out, struct sandboxes *s, struct sandbox_templates *t,
	     const struct pool_size *sizes, size_t n, struct err *e);

/* Claims a ready sandbox matching `spec`: 1 with *out (a reference the
 * caller drops with sandbox_put), 0 when none is ready or none matches,
 * negative on error (ERR_LIMIT). */
int pool_take(struct pool *p, const struct sandbox_spec *spec, struct sandbox **out, struct err *e);

/* Template `name` was stored, replaced or deleted: its pool is drained
 * (its ready members deleted before this returns) and refilled to its
 * warm_pool now.  Nothing for a NULL pool. */
void pool_template_sync(struct pool *p, const char *name);

/* Whether a create request naming a template ({"template":N, …}) may be
 * served from the template's pool: its other fields are only "timeout_s",
 * "on_timeout", "auto_resume", "restart" and "agent_display", which a
 * claim applies.  Anything else (env, resources, display, network, image)
 * makes a cold create. */
int pool_template_claimable(const cJSON *req);

/* Claims a ready member of template `name`'s pool, as pool_take does
 * (its files and startup are already applied). */
int pool_take_template(struct pool *p, const char *name, const struct sandbox_spec *spec,
		       struct sandbox **out, struct err *e);

/* Adds "warm_pool_ready" (members ready now) and, while its members fail
 * to start, "warm_pool_error" to a template's JSON view `j`. */
void pool_template_json(struct pool *p, const char *name, cJSON *j);

/* Stops the refill thread and deletes the sandboxes still waiting. */
void pool_free(struct pool *p);

/* Sandboxes ready to be claimed now (0 for a NULL pool). */
unsigned pool_ready(struct pool *p);

#endif
