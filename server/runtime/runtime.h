/* runtime: OCI containers through an OCI runtime binary (crun by default).
 *
 * deskboxd writes a bundle (config.json built with cJSON) per sandbox and
 * drives the runtime's CLI: run -d, exec, kill, delete, state.  The runtime
 * binary is configurable (runsc, kata) as long as it speaks that CLI.
 *
 * cgroups: crun 1.8 refuses a "hybrid" host (v1 controllers plus a cgroup2
 * mount at /sys/fs/cgroup/unified).  runtime_host_setup() gives deskboxd a
 * private mount namespace in which that mount is gone, so every runtime call
 * (and every overlay mount deskboxd makes) happens there; pure v2 and pure
 * v1 hosts need nothing.
 */
#ifndef DESKBOX_SERVER_RUNTIME_H
#define DESKBOX_SERVER_RUNTIME_H

#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "common/error.h"

enum runtime_cgroup_mode {
	RUNTIME_CGROUP_V1 = 1,
	RUNTIME_CGROUP_V2 = 2,
};

/* Must run in main() before any thread exists (unshare(CLONE_NEWNS) refuses
 * multi-threaded callers): makes the mount namespace private and, on a hybrid
 * host, unmounts /sys/fs/cgroup/unified inside it.  Reports the mode in use. */
int runtime_host_setup(enum runtime_cgroup_mode *mode, struct err *e);

/* Ids a container with a user namespace maps: its 0..65535 to host ids
 * host_base..host_base+65535. */
#define RUNTIME_USERNS_SIZE 65536u

/* Whether this kernel lets deskboxd give containers user namespaces
 * (/proc/sys/user/max_user_namespaces above 0 and a child that creates one
 * and maps an id in it).  ERR_UNAVAILABLE saying why when not. */
int runtime_userns_probe(struct err *e);

/* Makes a user namespace owned by host id `host_base` (so the kernel's
 * per-uid counts of the sandbox land on that id, never on host root's)
 * mapping 0..RUNTIME_USERNS_SIZE-1 to host_base.., and keeps it on a bind
 * mount at `path` for runtime_spec.userns_path (runtime_userns.c).
 * runtime_userns_drop() unmounts and removes it once the container runs
 * (its processes keep the namespace). */
int runtime_userns_make(const char *path, uint32_t host_base, struct err *e);
void runtime_userns_drop(const char *path);

struct runtime_mount {
	const char *source;	 /* host path */
	const char *destination; /* path in the container */
	int read_only;
};

/* What one container looks like.  Strings are borrowed for the call. */
struct runtime_spec {
	const char *id;		/* container id, [a-z0-9-], unique per runtime root */
	const char *bundle_dir; /* config.json is written here */
	const char *rootfs;	/* absolute path of the mounted root filesystem */
	const char *hostname;
	uint32_t uid, gid; /* the init's user, in the container's ids */
	/* 0: no user namespace (container ids are host ids); else a user
	 * namespace mapping container ids 0..RUNTIME_USERNS_SIZE-1 to host ids
	 * from here. */
	uint32_t userns_host_base;
	const char *userns_path; /* with it: join this user namespace */
	/* The init's capabilities ("CAP_KILL", ...: bounding, permitted and
	 * effective), NULL-terminated; NULL: none. */
	const char *const *caps;
	/* 1: seccomp lets chroot(2) through (still gated by CAP_SYS_CHROOT,
	 * which only the init of an image given the host's desktop has). */
	int allow_chroot;
	const char *const *argv; /* the init's argv, NULL-terminated */
	const char *const *env;	 /* "K=V", NULL-terminated */
	const char *cwd;
	const struct runtime_mount *mounts; /* extra bind mounts, after the standard ones */
	size_t n_mounts;
	/* The root mount read-only (OCI root.readonly); the mounts on it keep
	 * their own flags. */
	int read_only_root;
	uint64_t memory_bytes;	   /* 0: no limit */
	int64_t pids_max;	   /* 0: no limit */
	uint32_t cpu_millis;	   /* 0: no limit; 1000 = one core */
	const char *cgroup_parent; /* e.g. "deskbox": cgroups go under it */
};

struct runtime;

struct runtime_opts {
	const char *binary; /* "crun" (looked up in PATH) or an absolute path */
	const char *root;   /* the runtime's state dir (--root), created if missing */
	enum runtime_cgroup_mode cgroup_mode;
};

int runtime_new(struct runtime **out, const struct runtime_opts *o, struct err *e);
void runtime_free(struct runtime *rt);

/* Writes <bundle_dir>/config.json for `spec`: mount, pid, ipc, uts, net,
 * cgroup and (with userns_host_base) user namespaces (only lo in the
 * network), only spec->caps,
 * no_new_privs, a default seccomp allowlist, masked and read-only /proc and
 * /sys paths, a minimal /dev, a tmpfs /run (/tmp is the rootfs's, so it
 * persists), and the limits. */
int runtime_write_bundle(const struct runtime_spec *spec, struct err *e);

/* Starts the container detached (`run -d`); the init's stdout and stderr go
 * to `log_fd` (-1: /dev/null).  Reports the init's host pid. */
int runtime_start(struct runtime *rt, const char *id, const char *bundle_dir, int log_fd,
		  pid_t *init_pid, struct err *e);

/* Runs the container to its end in the foreground (`crun run`, for image
 * builds): its init's stdout and stderr, and crun's own message when it
 * fails, go to `log_fd`.  After `timeout_ms` every process of it is killed
 * (ERR_TIMEOUT).  The container is deleted after; *status is crun's wait
 * status, which carries the init's exit status.  The init's host pid is in
 * <bundle_dir>/init.pid while it runs.  `cancel` (may be NULL; read
 * atomically) set by another thread kills it within 200 ms (ERR_UNAVAILABLE,
 * ECANCELED). */
int runtime_run(struct runtime *rt, const char *id, const char *bundle_dir, int log_fd,
		int timeout_ms, const int *cancel, int *status, struct err *e);

/* Sends `sig` to the container's init (all processes with `all`). */
int runtime_kill(struct runtime *rt, const char *id, int sig, int all, struct err *e);

/* Removes the container (force: kills it first).  A container the runtime
 * does not know is not an error. */
int runtime_delete(struct runtime *rt, const char *id, int force, struct err *e);

/* A running container's limits, changed in place (`crun update`).  A
 * field of 0 is left as it is; cpu_millis RUNTIME_CPU_UNLIMITED lifts the
 * CPU limit.  ERR_CONFLICT when the kernel refuses a memory limit below
 * what the container uses now (cgroup v1 answers EBUSY). */
#define RUNTIME_CPU_UNLIMITED UINT32_MAX
/* The CFS period of every CPU limit (100 ms, the kernel's default):
 * cpu_millis 1000 = one core. */
#define RUNTIME_CPU_PERIOD_US 100000
struct runtime_limits {
	uint64_t memory_bytes;
	int64_t pids_max;
	uint32_t cpu_millis;
};
int runtime_update(struct runtime *rt, const char *id, const struct runtime_limits *l,
		   struct err *e);

/* Reports whether the container runs (frozen counts: its processes are
 * there) and its init's host pid (0 if not). */
int runtime_state(struct runtime *rt, const char *id, int *running, pid_t *init_pid, struct err *e);

/* How to run one process inside a running container. */
struct runtime_exec {
	const char *const *argv; /* NULL-terminated */
	const char *const *env;	 /* extra "K=V", NULL-terminated, may be NULL */
	const char *cwd;	 /* NULL: the container's */
	uint32_t uid, gid;
	int stdin_fd, stdout_fd, stderr_fd; /* become the process's 0, 1, 2 */
	const char *pid_file;		    /* where the runtime writes the process's host pid */
	const char
	    *cgroup; /* sub-cgroup of the container's to run in (crun exec --cgroup), or NULL */
	/* 1: a terminal (only for a backend with exec_pty): stdin, stdout and
	 * stderr are the slave of the caller's pty, with its window size set;
	 * the program runs on a pty of the sandbox, resized with the slave. */
	int pty;
};

/* Spawns the runtime's `exec` for `x` and returns the runtime client's pid
 * (the caller reaps it; its exit status is the process's).  Does not wait. */
int runtime_exec_spawn(struct runtime *rt, const char *id, const struct runtime_exec *x,
		       pid_t *client_pid, struct err *e);

/* A TCP connection to 127.0.0.1:`port` inside the network namespace of
 * the container whose init is `pid` (runtime_netns.c): the socket is made
 * in that namespace, so it works whatever the sandbox's network mode, and
 * the sandbox never needs a route to the host.  Waits up to `timeout_ms`
 * for the connect.  ERR_BAD_GATEWAY when nothing accepts there; the fd
 * (blocking, O_CLOEXEC, TCP_NODELAY) is the caller's. */
int runtime_connect_inside(pid_t pid, uint16_t port, int timeout_ms, int *fd, struct err *e);

/* ---- isolation backends (runtime_backend.c) ---- */

/* How a sandbox is isolated: "container" (crun, the default) or "vm" (a
 * KVM virtual machine with a kernel of its own). */
enum runtime_isolation {
	RUNTIME_ISOLATION_CONTAINER = 1,
	RUNTIME_ISOLATION_VM = 2,
};

/* "container" | "vm" ("container" for anything else). */
const char *runtime_isolation_name(enum runtime_isolation iso);
/* The isolation called `name`; -EINVAL when there is none. */
int runtime_isolation_parse(const char *name, enum runtime_isolation *out);

/* 0 when /dev/kvm opens and speaks KVM_API_VERSION; else
 * ERR_NOT_IMPLEMENTED saying what is missing. */
int runtime_kvm_probe(struct err *e);

/* What a backend may lack (runtime_backend.feature). */
enum runtime_feature {
	RUNTIME_FEATURE_NETWORK = 1, /* a network mode other than "none" */
	RUNTIME_FEATURE_CHECKPOINT,  /* checkpoints, restores, forks */
	RUNTIME_FEATURE_PAUSE,	     /* pause, resume */
	RUNTIME_FEATURE_TERMINAL,    /* terminals (a pty) */
	RUNTIME_FEATURE_ADOPT,	     /* taken over by the next deskboxd */
	RUNTIME_FEATURE_READ_ONLY_ROOT,
	RUNTIME_FEATURE_VNC_VIEWER, /* a VNC connection of its own beside the mirror's */
};

/* What the sandbox and process layers do with a sandbox's isolation,
 * whatever it is: each backend fills every field (the container's are the
 * crun calls above, with the same contracts).  The callers never test
 * which backend they hold. */
struct runtime_backend {
	enum runtime_isolation isolation;
	int (*start)(struct runtime *rt, const char *id, const char *bundle_dir, int log_fd,
		     pid_t *init_pid, struct err *e);
	int (*kill)(struct runtime *rt, const char *id, int sig, int all, struct err *e);
	int (*remove)(struct runtime *rt, const char *id, int force, struct err *e);
	int (*state)(struct runtime *rt, const char *id, int *running, pid_t *init_pid,
		     struct err *e);
	int (*update)(struct runtime *rt, const char *id, const struct runtime_limits *l,
		      struct err *e);
	int (*exec_spawn)(struct runtime *rt, const char *id, const struct runtime_exec *x,
			  pid_t *client_pid, struct err *e);
	int (*connect_inside)(pid_t pid, uint16_t port, int timeout_ms, int *fd, struct err *e);
	/* 0 when the backend can do `f`; else ERR_NOT_IMPLEMENTED naming it. */
	int (*feature)(enum runtime_feature f, struct err *e);
	/* The least time its desktop may take to come up (0: the configured
	 * one is enough); a VM under emulation boots in tens of seconds. */
	int ready_timeout_ms;
	/* 1: exec_spawn's pid_file gets the program's pid as the sandbox sees
	 * it, already running (a VM's guest pid, which no host call can
	 * reach); 0: its host pid, stopped until the caller's SIGCONT (the
	 * shim's `kill -STOP $$`). */
	int guest_pids;
	/* A sandbox taken over from an earlier deskboxd is reached through
	 * its init (`pid`): its mounts are in that deskboxd's mount
	 * namespace, which the init keeps.  `run` gets the run dir's path (its
	 * sockets), `root` the sandbox's files as it sees them, given the
	 * overlay's path `rootfs` in that namespace; each `size` bytes. */
	void (*adopted_paths)(pid_t pid, const char *rootfs, char *run, char *root, size_t size);
	/* Writes back what the sandbox holds in caches of its own before a
	 * snapshot of its disk (a VM's guest page cache over 9p), waiting up
	 * to `timeout_ms`; a container has none (the host's FIFREEZE flushes
	 * its pages). */
	int (*quiesce)(struct runtime *rt, const char *id, int timeout_ms, struct err *e);
	/* 1: taken over also after deskboxd was killed (SIGKILL, a crash),
	 * not only after a detach (--on-exit keep): nothing of it needs the
	 * deskboxd that started it. */
	int adopt_after_kill;
	/* 1: exec_spawn takes runtime_exec.pty (terminals without an exec
	 * agent in the sandbox; a VM's guest agent opens the pty). */
	int exec_pty;
	/* 0: a live viewer connects to run/vnc.sock beside the mirror (the
	 * VNC server takes many clients).  N: that socket serves the mirror
	 * alone; each viewer takes one of run/vncview0..N-1.sock. */
	int viewer_ports;
};

/* ---- the VM backend (runtime_vm.c, runtime_vm_exec.c) ---- */

/* Where the VM backend finds its parts (deskboxd's --vm-* options). */
struct runtime_vm_opts {
	const char *qemu;   /* qemu-system-x86_64 */
	const char *kernel; /* --vm-kernel: Debian's /boot/vmlinuz-* */
	const char *initrd; /* --vm-initrd: scripts/vm-initramfs.sh's (make vm) */
	const char *share;  /* deskbox's guest parts, the guest's /.deskbox (make vm) */
	const char *accel;  /* --vm-accel tcg|kvm|auto */
	const char *client; /* deskbox-init, which runs as `vm-exec` on the host */
};
void runtime_vm_configure(const struct runtime_vm_opts *o);
/* The accelerator a VM gets: "kvm", or "tcg" (emulation) when asked or,
 * with "auto", when /dev/kvm is absent or is the nested kvm_pvm one
 * (which does not boot Debian's kernel: docs/isolation.md). */
const char *runtime_vm_accel(void);
/* 0 when a VM can start here; else ERR_NOT_IMPLEMENTED saying what is
 * missing. */
int runtime_vm_usable(struct err *e);
/* The guest's exec channels: at most this many execs run at once, the
 * others wait for one. */
#define RUNTIME_VM_EXEC_PORTS 4
/* The guest's live-viewer channels (run/vncview<i>.sock, each relayed to
 * the guest's VNC server): at most this many viewers at once. */
#define RUNTIME_VM_VIEWER_PORTS 4

/* The backend of isolation `iso` (static, never freed).  "vm":
 * ERR_NOT_IMPLEMENTED naming the reason (no /dev/kvm, or what this
 * deskboxd cannot do in a VM yet). */
int runtime_backend_get(enum runtime_isolation iso, const struct runtime_backend **out,
			struct err *e);
/* The container backend (cannot fail). */
const struct runtime_backend *runtime_backend_container(void);

/* ---- the root filesystem (runtime_image.c) ---- */

/* image: the sandbox's root filesystem.
 *
 * The embedded default image needs no build: its lower layer is a generated
 * directory (<state>/images/default/base) with a minimal /etc, the usual
 * top-level directories and bin/lib/sbin symlinks into /usr; the host's /usr
 * is bind-mounted read-only over it by the container config.  Nothing of the
 * host's home directories, /var, secrets or the state dir is in it.
 * Each sandbox gets an overlay: that lower layer, an upper layer and a work
 * dir in its state dir, so whatever it writes persists.
 */
/* The uid/gid (in the container's ids) sandbox code runs as, named "user"
 * in the image.  With a user namespace the init and the desktop run as the
 * container's root (0) instead. */
#define IMAGE_USER_UID 1000u
#define IMAGE_USER_GID 1000u

/* Builds (or refreshes, idempotently) the default image's lower layer under
 * <state_dir>/images/default/base and writes its path to `lower`. */
int image_prepare_default(const char *state_dir, char *lower, size_t lower_size, struct err *e);

/* Mounts overlay(lower, upper, work) on `target`, creating upper/work/target
 * if missing. */
int image_mount_rootfs(const char *lower, const char *upper, const char *work, const char *target,
		       struct err *e);

/* Gives the directories of the image that belong to a sandbox (/home/user
 * and /workspace to its user, /root to its root) their owners in the
 * sandbox's host ids (`host_base` + IMAGE_USER_UID, `host_base` + 0; with
 * host_base 0 only the user's), chowning them through the overlay mounted
 * on `rootfs`: overlayfs copies them up into the sandbox's upper layer, and
 * the shared lower layer keeps host root as their owner.  Only entries still
 * owned by host root (the lower layer's) are changed, so it is cheap to
 * call on every mount. */
int image_own_dirs(const char *rootfs, uint32_t host_base, struct err *e);

/* Unmounts `target` (detaching if busy).  Not mounted is not an error. */
int image_umount_rootfs(const char *target, struct err *e);

/* An overlay of several lower layers, optionally each seen through an
 * idmapped mount (runtime_overlay.c): with `idmap_base`, host ids
 * 0..RUNTIME_USERNS_SIZE-1 of the layers appear as idmap_base.. (the
 * sandbox's own ids, so its root owns what host root owns there), and what
 * the sandbox changes is copied up into `upper` in its ids; the layers
 * themselves are never written.  `stage` (made if missing) holds the
 * idmapped mounts while the overlay is made; they are gone on return.
 * ERR_UNAVAILABLE when the kernel or a layer's filesystem cannot map ids. */
#define IMAGE_LOWERS_MAX 4
struct image_overlay {
	const char *lowers[IMAGE_LOWERS_MAX + 1]; /* top first, NULL-terminated */
	const char *upper, *work, *target;
	uint32_t idmap_base; /* 0: the layers as they are */
	const char *stage;
};
int image_mount_overlay(const struct image_overlay *o, struct err *e);

/* What deskbox adds to a sandbox's /usr, as the top lower layer of the
 * default image's /usr overlay (`out`) or, through its parent directory
 * (a tree with usr/bin/sudo), of a stored image's root: bin/sudo, a link
 * to IMAGE_SUDO_TARGET (the init, which acts as sudo under that name and
 * asks its own root side to run the command; a set-user-ID sudo cannot
 * work under no_new_privs).  Made once as <state>/images/default/extra/usr. */
#define IMAGE_SUDO_TARGET "/.deskbox/init"
int image_prepare_usr_extra(const char *state_dir, char *out, size_t size, struct err *e);

/* ---- stored images (runtime_images.c, runtime_images_make.c) ---- */

/* images: root filesystems other than the default one, each in
 * <state>/images/<name>/: rootfs/ (read-only, the overlay's lower layer in
 * place of the default's, with no host /usr over it) and manifest.json
 * (name, source, digest, layers or packages, size_bytes, created_at).  An
 * image is made in <state>/images/.tmp-<name>-XXXXXX and renamed into place
 * whole, so a half-made one is never seen; it is never changed afterwards.
 * Every image gets deskbox's mount points (/.deskbox/{init,deskbox-vnc,
 * xtool,lib}, /proc, /sys, /dev, /run, /home/user, /workspace, /root) and a
 * "user" (IMAGE_USER_UID) in /etc/passwd when it has none. */

#define IMAGE_DEFAULT  "default"
#define IMAGE_NAME_MAX 63
/* Where deskbox's own libraries (the host's, for the image variants of its
 * binaries, see docs/images.md) are mounted in a stored image. */
#define IMAGE_LIB_DIR "/.deskbox/lib"
/* Where the host's desktop (the default image's lower layer with the
 * host's /usr on it) is mounted read-only in a stored image that lacks
 * Xvfb or openbox; the init runs them chrooted there (docs/images.md). */
#define IMAGE_HOST_DIR "/.deskbox/host"

/* The parts of the desktop a stored image lacks, which deskbox supplies
 * from the host (image_host_parts). */
enum image_host_parts {
	IMAGE_HOST_XVFB = 1 << 0,
	IMAGE_HOST_WM = 1 << 1, /* openbox */
};

/* 1 if `name` is [a-z0-9][a-z0-9._-]{0,62} (or "default"). */
int image_name_valid(const char *name);

/* Removes what an earlier deskboxd left half-made (.tmp-* trees) and marks
 * builds it did not finish as failed.  Called once at start. */
void images_recover(const char *state_dir);

/* The lower layer of stored image `name` (not "default") into `lower`,
 * after checking that it is usable for a desktop: a readable manifest, a
 * rootfs with a /bin/sh that can run (its ELF interpreter is in the image)
 * and deskbox's mount points (/.deskbox/host too when it lacks Xvfb or
 * openbox, which the host then supplies).
 * ERR_INVALID naming the image and what is wrong. */
int image_lookup(const char *state_dir, const char *name, char *lower, size_t size, struct err *e);

/* Which of Xvfb and openbox the image whose lower layer is `lower` (from
 * image_lookup) lacks: enum image_host_parts bits, 0 when it has both. */
unsigned image_host_parts(const char *lower);

/* The manifest of `name` ("default" included), or the status of a build in
 * progress or failed ({"name","status":"building"|"failed","error"}); a new
 * object the caller frees.  ERR_NOT_FOUND. */
int image_get(const char *state_dir, const char *name, cJSON **out, struct err *e);

/* Every image and build, "default" first; a new array the caller frees. */
cJSON *image_list(const char *state_dir);

/* Takes stored image `name` (or a failed build's status) out of its name:
 * its tree is renamed to `trash` (a .tmp- path), which the caller removes
 * (fs_remove_tree, slow for a big image: outside its locks).  The caller
 * makes sure no sandbox uses it.  ERR_NOT_FOUND, ERR_INVALID for "default",
 * ERR_CONFLICT while it is being built. */
int image_remove(const char *state_dir, const char *name, char *trash, size_t size, struct err *e);

/* Imports an OCI image (an OCI layout directory, or a tar of one as
 * `skopeo copy ... oci-archive:` writes) as image `name`, unpacking it with
 * umoci.  `ref` picks the tag; NULL: the only one in the layout.  Returns
 * the manifest (caller frees).  ERR_CONFLICT if `name` exists, ERR_INVALID
 * for a bad source. */
struct image_import {
	const char *name;
	const char *layout;  /* an OCI layout directory, or NULL */
	const char *archive; /* a tar of one, or NULL */
	const char *ref;
};
int image_import_oci(const char *state_dir, const struct image_import *im, cJSON **manifest,
		     struct err *e);

/* Builds a Debian 12 desktop image `name` with debootstrap from `mirror`
 * (NULL: the first Debian URI in /etc/apt/sources.list(.d)); takes
 * minutes.  image_build_debian() works in the calling thread and returns
 * the manifest; image_build_start() checks the name, answers at once and
 * builds in a detached thread, its status in <state>/images/.build-<name>.json
 * (image_get). */
int image_build_debian(const char *state_dir, const char *name, const char *mirror,
		       cJSON **manifest, struct err *e);
int image_build_start(const char *state_dir, const char *name, const char *mirror, struct err *e);

/* An image from a Dockerfile (runtime_images_build*.c, docs/images.md):
 * `text` is parsed (the 400s of dockerfile_parse), FROM must name a ready
 * stored image or "scratch" (ERR_NOT_FOUND when there is none), COPY and
 * ADD need a `context` (a tar file or a directory on the host; removed
 * after the build when `context_owned`).  Answers at once and builds in a
 * detached thread: every RUN, COPY and ADD in a crun container in a user
 * namespace mapping 0..65535 to `host_base`.. (a range no sandbox uses),
 * no network, IMAGE_BUILD_TIMEOUT_S for the whole build.  Status as for
 * image_build_start; the log in image_build_log_path().  `done(done_cls)`
 * runs in the thread once the build is over (never when this fails). */
#define IMAGE_BUILD_TIMEOUT_S 1800
#define IMAGE_CONTEXT_MAX     (512ULL << 20) /* an uploaded context tar */
struct image_dockerfile {
	const char *state_dir, *name;
	const char *text;
	size_t len;
	const char *context;
	int context_owned;
	const char *const *build_args; /* "K=V" for ARG K (dockerfile_parse_args), or NULL */
	unsigned timeout_s;	       /* the whole build; 0: IMAGE_BUILD_TIMEOUT_S */
	struct runtime *rt;
	uint32_t host_base;
	void (*done)(void *cls);
	void *done_cls;
};
int image_dockerfile_start(const struct image_dockerfile *o, struct err *e);
/* <state>/images/.build-<name>.log: the build's log (kept after it). */
void image_build_log_path(const char *state_dir, const char *name, char *out, size_t size);
/* <state>/images/.context-<name>.tar: a build context uploaded for `name`. */
void image_context_path(const char *state_dir, const char *name, char *out, size_t size);
/* 1 while a build of `name` is under way. */
int image_building(const char *state_dir, const char *name);
/* At most this many Dockerfile builds at a time (more: ERR_LIMIT). */
#define IMAGE_BUILDS_MAX 4
/* Ends every Dockerfile build under way (deskboxd is stopping): the
 * running build container is killed, the build fails ("deskboxd stopped
 * during the build") and cleans up in its thread, then done() runs. */
void image_builds_cancel(void);

/* ---- Dockerfiles (runtime_dockerfile.c) ---- */

/* Bounds on an untrusted Dockerfile. */
#define DOCKERFILE_MAX_BYTES	65536 /* the text */
#define DOCKERFILE_MAX_STEPS	200   /* instructions */
#define DOCKERFILE_MAX_ARGS	256   /* words of one instruction */
#define DOCKERFILE_MAX_VARS	128   /* distinct ARG and ENV names */
#define DOCKERFILE_NAME_MAX	128   /* a variable's name, a --chown value */
#define DOCKERFILE_PATH_MAX	1024  /* a WORKDIR */
#define DOCKERFILE_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

enum dockerfile_op {
	DF_FROM,       /* argv[0]: the image */
	DF_RUN,	       /* exec_form: argv; else argv[0] is the shell command */
	DF_COPY,       /* argv: sources..., destination; chown, chmod */
	DF_ADD,	       /* as COPY (local files only) */
	DF_ENV,	       /* argv: key, value, key, value... */
	DF_WORKDIR,    /* argv[0]: absolute */
	DF_USER,       /* argv[0]: user[:group] */
	DF_CMD,	       /* as RUN; recorded */
	DF_ENTRYPOINT, /* as RUN; recorded */
	DF_LABEL,      /* as ENV; recorded (MAINTAINER too, as "maintainer") */
	DF_EXPOSE,     /* argv: ports; recorded */
	DF_ARG,	       /* as ENV: in RUN's environment, not the image's */
	DF_VOLUME,     /* argv: paths; recorded */
	DF_STOPSIGNAL, /* argv[0]; recorded */
};

struct dockerfile_step {
	enum dockerfile_op op;
	unsigned line; /* of the instruction's first line, from 1 */
	char **argv;   /* NULL-terminated, argc words, variables substituted */
	size_t argc;
	int exec_form;	     /* RUN, CMD, ENTRYPOINT: the JSON array form */
	char *chown, *chmod; /* COPY, ADD: the flags' values, or NULL */
};

struct dockerfile {
	struct dockerfile_step *steps;
	size_t n_steps;
};

/* Parses a Dockerfile (one stage: FROM, then RUN COPY ADD ENV WORKDIR USER
 * ARG, and CMD ENTRYPOINT LABEL EXPOSE VOLUME STOPSIGNAL MAINTAINER, which
 * are recorded).  ERR_INVALID "Dockerfile line N: ..." naming what is
 * refused (ONBUILD, HEALTHCHECK, SHELL, a second FROM, COPY --from, ADD of
 * a URL, RUN --mount, an unknown instruction); ERR_TOO_LARGE over
 * DOCKERFILE_MAX_BYTES, ERR_LIMIT over DOCKERFILE_MAX_STEPS.  *out is the
 * caller's (dockerfile_free). */
int dockerfile_parse(const char *text, size_t len, struct dockerfile **out, struct err *e);
/* The same with build args ("K=V", NULL-terminated): each is the value of
 * its ARG (over the default); one that no ARG declares is ERR_INVALID. */
int dockerfile_parse_args(const char *text, size_t len, const char *const *args,
			  struct dockerfile **out, struct err *e);
void dockerfile_free(struct dockerfile *df);
/* The FROM image's name (never NULL after a successful parse). */
const char *dockerfile_from(const struct dockerfile *df);
const char *dockerfile_op_name(enum dockerfile_op op);

/* ---- a sandbox's own disk (runtime_disk.c) ---- */

/* disk: a fixed-size ext4 image (sparse, root-owned 0600) on a loop device,
 * holding a sandbox's overlay upper and work dirs, so the kernel counts and
 * caps everything it writes.  Fixed size: it never grows. */

/* Creates `path` (O_EXCL) as a `bytes`-sized sparse file with an ext4
 * filesystem in it (runs mkfs.ext4); removes it again on failure. */
int disk_image_create(const char *path, uint64_t bytes, struct err *e);

/* Attaches `image` to a free loop device and mounts it nosuid,nodev on
 * `target` (created if missing).  The loop device is freed when the mount
 * goes (autoclear).  A loop device that already backs `image` (a running
 * container's, kept across a restart of deskboxd) is mounted instead of a
 * second one. */
int disk_image_mount(const char *image, const char *target, struct err *e);

/* Unmounts `target` (detaching if busy).  Not mounted is not an error. */
int disk_image_umount(const char *target, struct err *e);

/* Bytes in use on the filesystem at `mount` and bytes still free for
 * writing (statvfs). */
int disk_usage(const char *mount, uint64_t *used, uint64_t *avail, struct err *e);

/* ---- the disk store (runtime_disk.c) ---- */

/* Where sandbox disk images live when the state dir's filesystem cannot
 * clone files (ext4): one sparse XFS image made with reflinks
 * (<state>/store.xfs) mounted on <state>/store, so that a checkpoint, a
 * restore and a fork clone an image (FICLONE) in constant time and room. */
enum disk_store_mode {
	DISK_STORE_AUTO,   /* the store only when the state dir cannot clone */
	DISK_STORE_POOL,   /* always the store */
	DISK_STORE_DIRECT, /* never: images in the sandboxes' own directories */
};

/* 1 when files in directory `dir` can be cloned (FICLONE), else 0. */
int disk_reflinks(const char *dir);

/* Makes `image` (absent) a sparse file of `bytes` holding an XFS with
 * reflinks (runs mkfs.xfs; written through a temporary name, so a crash
 * leaves no half-made store).  ERR_NO_SPACE when the host is full. */
int disk_store_make(const char *image, uint64_t bytes, struct err *e);

/* Mounts the store `image` on `target` (created, 0700) through a loop
 * device (the one that already backs it, when a running sandbox kept it
 * alive across a restart of deskboxd), with online discard.  Unmount with
 * disk_image_umount(). */
int disk_store_mount(const char *image, const char *target, struct err *e);

#endif
