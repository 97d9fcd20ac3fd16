#include "sandbox.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "server/files/files.h"
#include "server/runtime/runtime.h"
#include "server/process/process.h"

#define CAPTURE_READY_TIMEOUT_MS 5000
#define RECONNECT_TIMEOUT_MS	 3000
#define VNC_CONNECT_RETRY_MS	 3000

const char *const sandbox_status_names[] = {
    [SANDBOX_CREATING] = "creating", [SANDBOX_RUNNING] = "running",   [SANDBOX_STOPPED] = "stopped",
    [SANDBOX_FAILED] = "failed",     [SANDBOX_DELETING] = "deleting",
};

const char *sandbox_id(const struct sandbox *sb)
{
	return sb->id;
}

const char *sandbox_container_id(const struct sandbox *sb)
{
	return sb->container_id;
}

const char *sandbox_dir(const struct sandbox *sb)
{
	return sb->dir;
}

struct runtime *sandbox_runtime(const struct sandbox *sb)
{
	return sb->owner->rt;
}

struct process_table *sandbox_procs(const struct sandbox *sb)
{
	return sb->procs;
}

uint32_t sandbox_width(const struct sandbox *sb)
{
	return sb->spec.width;
}

uint32_t sandbox_height(const struct sandbox *sb)
{
	return sb->spec.height;
}

void sandbox_agent_display(const struct sandbox *sb, uint32_t *w, uint32_t *h)
{
	*w = sb->spec.agent_width;
	*h = sb->spec.agent_height;
}

/* ---- persistence ---- */

static cJSON *spec_json(const struct sandbox *sb, enum sandbox_status status)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", sb->id);
	cJSON_AddStringToObject(j, "status", sandbox_status_names[status]);
	cJSON *d = cJSON_AddObjectToObject(j, "display");
	cJSON_AddNumberToObject(d, "width", sb->spec.width);
	cJSON_AddNumberToObject(d, "height", sb->spec.height);
	cJSON_AddNumberToObject(j, "memory_mb", (double)sb->spec.memory_mb);
	cJSON_AddNumberToObject(j, "pids_max", (double)sb->spec.pids_max);
	cJSON_AddNumberToObject(j, "cpu_millis", sb->spec.cpu_millis);
	if (sb->spec.agent_width) {
		cJSON *ad = cJSON_AddObjectToObject(j, "agent_display");
		cJSON_AddNumberToObject(ad, "width", sb->spec.agent_width);
		cJSON_AddNumberToObject(ad, "height", sb->spec.agent_height);
	}
	cJSON_AddNumberToObject(j, "created_at", (double)sb->created_at);
	return j;
}

int sandbox_persist(struct sandbox *sb, enum sandbox_status status, struct err *e)
{
	cJSON *j = spec_json(sb, status);
	/* A pool member found at start-up was never handed out: removed. */
	if (sb->pooled)
		cJSON_AddTrueToObject(j, "pooled");
	cJSON *env = cJSON_AddObjectToObject(j, "env");
	for (size_t i = 0; i < SANDBOX_MAX_ENV && sb->spec.env[i]; i++) {
		const char *kv = sb->spec.env[i];
		const char *eq = strchr(kv, '=');
		char *key = strndup(kv, (size_t)(eq - kv));
		if (key)
			cJSON_AddStringToObject(env, key, eq + 1);
		free(key);
	}
	_cleanup_free_ char *s = cJSON_Print(j);
	cJSON_Delete(j);
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/sandbox.json", sb->dir);
	return fs_write_atomic(path, s, strlen(s), 0600, e);
}

/* ---- lifecycle helpers ---- */

/* The process table's way into the sandbox (struct process_host). */
static int procs_enter(void *cls, struct err *e)
{
	return sandbox_use(cls, 0, NULL, e);
}

static void procs_leave(void *cls)
{
	sandbox_unuse(cls);
}

static struct sandbox *sandbox_alloc(struct sandboxes *s, const char *id)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	snprintf(sb->container_id, sizeof(sb->container_id), "dbx-%s", id);
	snprintf(sb->dir, sizeof(sb->dir), "%s/sandboxes/%s", s->cfg.state_dir, id);
	sb->owner = s;
	struct process_host host = {
	    .rt = s->rt,
	    .cgroup_mode = s->cfg.cgroup_mode,
	    .container_id = sb->container_id,
	    .dir = sb->dir,
	    .enter = procs_enter,
	    .leave = procs_leave,
	    .cls = sb,
	};
	sb->procs = process_table_new(&host);
	if (!sb->procs) {
		free(sb);
		return NULL;
	}
	atomic_init(&sb->refs, 1);
	pthread_mutex_init(&sb->mu, NULL);
	pthread_rwlockattr_t attr;
	pthread_rwlockattr_init(&attr);
	/* Writers (delete) must not starve behind a stream of screenshots. */
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&sb->op, &attr);
	pthread_rwlockattr_destroy(&attr);
	sb->init_pid = -1;
	return sb;
}

void sandbox_put(struct sandbox *sb)
{
	if (!sb || atomic_fetch_sub(&sb->refs, 1) != 1)
		return;
	capture_free(sb->cap);
	process_table_unref(sb->procs);
	sandbox_spec_release(&sb->spec);
	pthread_mutex_destroy(&sb->mu);
	pthread_rwlock_destroy(&sb->op);
	free(sb);
}

void sandbox_path(const struct sandbox *sb, char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", sb->dir, name);
}

/* Last line(s) of init.log, for error messages that say why a desktop did not
 * come up. */
static void log_tail(const struct sandbox *sb, char *out, size_t size)
{
	char path[PATH_MAX];
	sandbox_path(sb, path, sizeof(path), "init.log");
	out[0] = '\0';
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	off_t start = end > (off_t)size - 1 ? end - (off_t)size + 1 : 0;
	ssize_t n = pread(fd, out, size - 1, start);
	if (n <= 0)
		return;
	out[n] = '\0';
	for (char *p = out; *p; p++)
		if (*p == '\n' && p[1])
			*p = ' ';
	size_t l = strlen(out);
	if (l && out[l - 1] == '\n')
		out[l - 1] = '\0';
}

/* Connects to the sandbox's VNC socket.  The path goes through
 * /proc/self/fd/N of the directory so it stays short whatever the state
 * dir's length (sun_path holds 108 bytes). */
static int vnc_connect(const struct sandbox *sb, struct err *e)
{
	char run[PATH_MAX];
	sandbox_path(sb, run, sizeof(run), "run");
	_cleanup_fd_ int dfd = open(run, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", run);
	/* The socket file appears at bind(), a moment before x11vnc listens
	 * (or while it restarts): retry refusals for a short while. */
	long long deadline = clock_mono_ms() + VNC_CONNECT_RETRY_MS;
	for (;;) {
		/* SECURITY: the sandbox's user owns run/ and could put a
		 * symlink to a host socket there; deskboxd (root) must only
		 * ever connect to a socket inode that is really in run/. */
		_cleanup_fd_ int sfd = openat(dfd, "vnc.sock", O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		int saved = 0;
		if (sfd < 0)
			saved = errno;
		else if (fstat(sfd, &st) < 0)
			saved = errno;
		else if (!S_ISSOCK(st.st_mode))
			return err_set(e, ERR_UNAVAILABLE, EINVAL,
				       "the sandbox's VNC socket is not a socket");
		if (!saved) {
			struct sockaddr_un sa = {.sun_family = AF_UNIX};
			snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", sfd);
			_cleanup_fd_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fd < 0)
				return err_sys(e, ERR_INTERNAL, errno, "socket");
			if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
				return TAKE_FD(fd);
			saved = errno;
		}
		if ((saved != ECONNREFUSED && saved != ENOENT) || clock_mono_ms() > deadline)
			return err_sys(e, ERR_UNAVAILABLE, saved,
				       "connecting to the sandbox's VNC server");
		clock_sleep_ms(5);
	}
}

int sandbox_vnc_connect(const struct sandbox *sb, struct err *e)
{
	return vnc_connect(sb, e);
}

/* Connects a new bridge to the sandbox's VNC server; returns at once. */
static int capture_begin(struct sandbox *sb, struct capture **out, struct err *e)
{
	int fd = vnc_connect(sb, e);
	if (fd < 0)
		return fd;
	struct capture_opts o = {
	    .bridge_path = sb->owner->cfg.bridge_path,
	    .width = sb->spec.width,
	    .height = sb->spec.height,
	};
	if (capture_start(out, &o, fd, e) < 0)
		return err_wrap(e, "starting the capture bridge");
	return 0;
}

static int capture_finish(struct capture *cap, int timeout_ms, struct err *e)
{
	if (capture_wait_ready(cap, timeout_ms, e) < 0) {
		capture_free(cap);
		return err_wrap(e, "waiting for the first frame");
	}
	return 0;
}

static int capture_connect(struct sandbox *sb, int timeout_ms, struct capture **out, struct err *e)
{
	struct capture *cap;
	if (capture_begin(sb, &cap, e) < 0 || capture_finish(cap, timeout_ms, e) < 0)
		return err_code(e);
	*out = cap;
	return 0;
}

/* Waits until the init creates run/<name> ("vnc.sock", "ready"). */
static int wait_desktop(struct sandbox *sb, const char *name, int timeout_ms, struct err *e)
{
	char path[PATH_MAX], rel[64];
	snprintf(rel, sizeof(rel), "run/%s", name);
	sandbox_path(sb, path, sizeof(path), rel);
	long long deadline = clock_mono_ms() + timeout_ms;
	for (int i = 0;; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		if (sb->init_pid > 0 && kill(sb->init_pid, 0) < 0 && errno == ESRCH) {
			char tail[400];
			log_tail(sb, tail, sizeof(tail));
			return err_set(e, ERR_INTERNAL, ECHILD, "the sandbox's init exited: %s",
				       tail[0] ? tail : "no log");
		}
		if (clock_mono_ms() > deadline) {
			char tail[400];
			log_tail(sb, tail, sizeof(tail));
			return err_set(e, ERR_TIMEOUT, ETIMEDOUT,
				       "desktop not ready after %d ms: %s", timeout_ms,
				       tail[0] ? tail : "no log");
		}
		/* 2 ms polls: readiness is ~100s of ms away and a stat is cheap. */
		clock_sleep_ms(i < 500 ? 2 : 10);
	}
}

/* Stops the container and, with `unmount`, unmounts; leaves the files. */
void sandbox_teardown_ex(struct sandbox *sb, int unmount)
{
	struct err e = ERR_INIT;
	capture_free(sb->cap);
	sb->cap = NULL;
	/* Every run's own cgroup, before crun removes the sandbox's. */
	process_table_kill_all(sb->procs);
	if (runtime_delete(sb->owner->rt, sb->container_id, 1, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
	err_clear(&e);
	char rootfs[PATH_MAX];
	sandbox_path(sb, rootfs, sizeof(rootfs), "rootfs");
	if (unmount) {
		if (image_umount_rootfs(rootfs, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
		pthread_mutex_lock(&sb->mu);
		sb->rootfs_mounted = 0;
		pthread_mutex_unlock(&sb->mu);
	}
	char sock[PATH_MAX];
	sandbox_path(sb, sock, sizeof(sock), "run/vnc.sock");
	unlink(sock);
	sandbox_path(sb, sock, sizeof(sock), "run/ready");
	unlink(sock);
	sb->init_pid = -1;
}

static void teardown(struct sandbox *sb)
{
	sandbox_teardown_ex(sb, 1);
}

/* Mounts the overlay on <dir>/rootfs unless it already is. */
int sandbox_rootfs_mount(struct sandbox *sb, struct err *e)
{
	char rootfs[PATH_MAX], upper[PATH_MAX], work[PATH_MAX];
	sandbox_path(sb, rootfs, sizeof(rootfs), "rootfs");
	sandbox_path(sb, upper, sizeof(upper), "upper");
	sandbox_path(sb, work, sizeof(work), "work");
	pthread_mutex_lock(&sb->mu);
	int r = 0;
	if (!sb->rootfs_mounted) {
		r = image_mount_rootfs(sb->owner->lower, upper, work, rootfs, e);
		sb->rootfs_mounted = r == 0;
	}
	pthread_mutex_unlock(&sb->mu);
	return r;
}

int sandbox_start_container(struct sandbox *sb, struct err *e)
{
	struct sandboxes *s = sb->owner;
	char rootfs[PATH_MAX], run[PATH_MAX], bundle[PATH_MAX], logp[PATH_MAX];
	sandbox_path(sb, rootfs, sizeof(rootfs), "rootfs");
	sandbox_path(sb, run, sizeof(run), "run");
	sandbox_path(sb, bundle, sizeof(bundle), "bundle");
	sandbox_path(sb, logp, sizeof(logp), "init.log");

	if (fs_mkdir_p(bundle, 0700, e) < 0 || fs_mkdir_p(run, 0755, e) < 0)
		return err_code(e);
	if (chown(run, IMAGE_USER_UID, IMAGE_USER_GID) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "chown '%s'", run);
	if (sandbox_rootfs_mount(sb, e) < 0)
		return err_code(e);

	char display[64];
	snprintf(display, sizeof(display), "DESKBOX_DISPLAY=%ux%u", sb->spec.width,
		 sb->spec.height);
	const char *env[SANDBOX_MAX_ENV + 8];
	size_t n = 0;
	env[n++] = "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
	env[n++] = "HOME=/home/user";
	env[n++] = "USER=user";
	env[n++] = "LANG=C.UTF-8";
	env[n++] = "DISPLAY=:0";
	env[n++] = display;
	for (size_t i = 0; i < SANDBOX_MAX_ENV && sb->spec.env[i]; i++)
		env[n++] = sb->spec.env[i];
	/* deskboxd's own DESKBOX_VNC (x11vnc | deskbox) picks the sandboxes'
	 * VNC server unless the create request's env does (the first of two
	 * equal names wins in getenv). */
	char vnc_env[32];
	const char *vnc_choice = getenv("DESKBOX_VNC");
	if (vnc_choice && (!strcmp(vnc_choice, "x11vnc") || !strcmp(vnc_choice, "deskbox"))) {
		snprintf(vnc_env, sizeof(vnc_env), "DESKBOX_VNC=%s", vnc_choice);
		env[n++] = vnc_env;
	}
	env[n] = NULL;
	const char *argv[] = {"/.deskbox/init", NULL};
	struct runtime_mount mounts[] = {
	    {"/usr", "/usr", 1},
	    {s->cfg.init_path, "/.deskbox/init", 1},
	    {s->cfg.vnc_path, "/.deskbox/deskbox-vnc", 1},
	    {s->cfg.xtool_path, "/.deskbox/xtool", 1},
	    {run, "/run/deskbox", 0},
	};
	struct runtime_spec spec = {
	    .id = sb->container_id,
	    .bundle_dir = bundle,
	    .rootfs = rootfs,
	    .hostname = "deskbox",
	    .uid = IMAGE_USER_UID,
	    .gid = IMAGE_USER_GID,
	    .argv = argv,
	    .env = env,
	    .cwd = "/workspace",
	    .mounts = mounts,
	    .n_mounts = sizeof(mounts) / sizeof(mounts[0]),
	    .memory_bytes = sb->spec.memory_mb << 20,
	    .pids_max = sb->spec.pids_max,
	    .cpu_millis = sb->spec.cpu_millis,
	    .cgroup_parent = "deskbox",
	};
	if (runtime_write_bundle(&spec, e) < 0)
		return err_code(e);
	_cleanup_fd_ int logfd =
	    open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (logfd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", logp);
	/* A container left over by a crash of a previous deskboxd. */
	runtime_delete(s->rt, sb->container_id, 1, NULL);
	if (runtime_start(s->rt, sb->container_id, bundle, logfd, &sb->init_pid, e) < 0)
		return err_code(e);
	/* The mirror connects as soon as the VNC server listens, so its
	 * handshake and first frame overlap with the window manager's start
	 * (the init's ready flag). */
	struct capture *cap;
	if (wait_desktop(sb, "vnc.sock", s->cfg.ready_timeout_ms, e) < 0 ||
	    capture_begin(sb, &cap, e) < 0)
		return err_code(e);
	if (wait_desktop(sb, "ready", s->cfg.ready_timeout_ms, e) < 0) {
		capture_free(cap);
		return err_code(e);
	}
	if (capture_finish(cap, CAPTURE_READY_TIMEOUT_MS, e) < 0)
		return err_code(e);
	pthread_mutex_lock(&sb->mu);
	sb->cap = cap;
	pthread_mutex_unlock(&sb->mu);
	return 0;
}

static void registry_remove(struct sandboxes *s, struct sandbox *sb)
{
	pthread_mutex_lock(&s->mu);
	for (struct sandbox **pp = &s->list; *pp; pp = &(*pp)->next) {
		if (*pp == sb) {
			*pp = sb->next;
			if (!sb->pooled)
				s->count--;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
}

static int create(struct sandboxes *s, struct sandbox_spec *spec, int pooled, struct sandbox **out,
		  struct err *e)
{
	char id[SANDBOX_ID_LEN + 1];
	if (fs_random_hex(id, SANDBOX_ID_LEN / 2, e) < 0) {
		sandbox_spec_release(spec);
		return err_code(e);
	}
	struct sandbox *sb = sandbox_alloc(s, id);
	if (!sb) {
		sandbox_spec_release(spec);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	sb->spec = *spec;
	memset(spec->env, 0, sizeof(spec->env));
	sb->created_at = (long long)time(NULL);
	sb->status = SANDBOX_CREATING;
	sb->pooled = pooled;

	pthread_mutex_lock(&s->mu);
	if (!pooled && s->count >= s->cfg.max_sandboxes) {
		pthread_mutex_unlock(&s->mu);
		sandbox_put(sb);
		return err_set(e, ERR_LIMIT, EAGAIN, "sandbox limit of %u reached",
			       s->cfg.max_sandboxes);
	}
	sb->next = s->list;
	s->list = sb;
	if (!pooled)
		s->count++;
	atomic_fetch_add(&sb->refs, 1); /* the registry's */
	pthread_mutex_unlock(&s->mu);

	/* Exclusive while starting: operations that find it wait or see
	 * "creating", delete waits for the start to finish. */
	pthread_rwlock_wrlock(&sb->op);
	int r;
	if (fs_mkdir_p(sb->dir, 0700, e) < 0 || sandbox_persist(sb, SANDBOX_CREATING, e) < 0)
		r = err_code(e);
	else
		r = sandbox_start_container(sb, e);
	if (r == 0)
		r = sandbox_persist(sb, SANDBOX_RUNNING, e);
	if (r < 0) {
		err_wrap(e, "creating sandbox");
		teardown(sb);
		struct err e2 = ERR_INIT;
		if (fs_remove_tree(sb->dir, &e2) < 0)
			log_msg(LOG_LEVEL_WARN, "%s", e2.msg);
		pthread_mutex_lock(&sb->mu);
		sb->status = SANDBOX_FAILED;
		pthread_mutex_unlock(&sb->mu);
		pthread_rwlock_unlock(&sb->op);
		registry_remove(s, sb);
		sandbox_put(sb); /* the registry's */
		sandbox_put(sb);
		return r;
	}
	pthread_mutex_lock(&sb->mu);
	sb->status = SANDBOX_RUNNING;
	pthread_mutex_unlock(&sb->mu);
	pthread_rwlock_unlock(&sb->op);
	*out = sb;
	return 0;
}

int sandbox_create(struct sandboxes *s, struct sandbox_spec *spec, struct sandbox **out,
		   struct err *e)
{
	return create(s, spec, 0, out, e);
}

int sandbox_create_pooled(struct sandboxes *s, struct sandbox_spec *spec, struct sandbox **out,
			  struct err *e)
{
	return create(s, spec, 1, out, e);
}

int sandbox_claim(struct sandboxes *s, struct sandbox *sb, const struct sandbox_spec *req,
		  struct err *e)
{
	pthread_mutex_lock(&s->mu);
	if (s->count >= s->cfg.max_sandboxes) {
		pthread_mutex_unlock(&s->mu);
		return err_set(e, ERR_LIMIT, EAGAIN, "sandbox limit of %u reached",
			       s->cfg.max_sandboxes);
	}
	s->count++;
	pthread_rwlock_wrlock(&sb->op);
	sb->pooled = 0;
	sb->created_at = (long long)time(NULL);
	sb->spec.agent_width = req->agent_width;
	sb->spec.agent_height = req->agent_height;
	pthread_mutex_unlock(&s->mu);
	struct err e2 = ERR_INIT;
	if (sandbox_persist(sb, SANDBOX_RUNNING, &e2) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e2.msg);
	pthread_rwlock_unlock(&sb->op);
	return 0;
}

int sandbox_spec_matches_pool(const struct sandbox_spec *req, const struct sandbox *sb)
{
	/* Everything fixed when the container started must be equal; the
	 * agent's display is only a mapping and is taken from the request. */
	return req->width == sb->spec.width && req->height == sb->spec.height &&
	       req->memory_mb == sb->spec.memory_mb && req->pids_max == sb->spec.pids_max &&
	       req->cpu_millis == sb->spec.cpu_millis && !req->env[0] && !sb->spec.env[0];
}

int sandbox_get(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e)
{
	pthread_mutex_lock(&s->mu);
	for (struct sandbox *sb = s->list; sb; sb = sb->next) {
		if (!sb->pooled && strcmp(sb->id, id) == 0) {
			atomic_fetch_add(&sb->refs, 1);
			pthread_mutex_unlock(&s->mu);
			*out = sb;
			return 0;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%.64s'", id);
}

static int delete_ref(struct sandboxes *s, struct sandbox *sb, struct err *e);

int sandbox_delete(struct sandboxes *s, const char *id, struct err *e)
{
	struct sandbox *sb;
	if (sandbox_get(s, id, &sb, e) < 0)
		return err_code(e);
	return delete_ref(s, sb, e);
}

void sandbox_discard(struct sandboxes *s, struct sandbox *sb)
{
	struct err e = ERR_INIT;
	atomic_fetch_add(&sb->refs, 1);
	if (delete_ref(s, sb, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "%s", e.msg);
}

/* Deletes `sb`, consuming the caller's reference. */
static int delete_ref(struct sandboxes *s, struct sandbox *sb, struct err *e)
{
	const char *id = sb->id;
	pthread_mutex_lock(&sb->mu);
	if (sb->status == SANDBOX_DELETING) {
		pthread_mutex_unlock(&sb->mu);
		sandbox_put(sb);
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", id);
	}
	sb->status = SANDBOX_DELETING;
	pthread_mutex_unlock(&sb->mu);
	registry_remove(s, sb);

	pthread_rwlock_wrlock(&sb->op);
	teardown(sb);
	int r = fs_remove_tree(sb->dir, e);
	pthread_rwlock_unlock(&sb->op);
	sandbox_put(sb); /* the registry's */
	sandbox_put(sb);
	return r < 0 ? err_wrap(e, "deleting sandbox '%s'", id) : 0;
}

int sandbox_use(struct sandbox *sb, int need_capture, struct capture **cap, struct err *e)
{
	for (int attempt = 0;; attempt++) {
		pthread_rwlock_rdlock(&sb->op);
		pthread_mutex_lock(&sb->mu);
		enum sandbox_status st = sb->status;
		struct capture *c = sb->cap;
		pthread_mutex_unlock(&sb->mu);
		if (st != SANDBOX_RUNNING) {
			pthread_rwlock_unlock(&sb->op);
			if (st == SANDBOX_DELETING)
				return err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", sb->id);
			return err_set(e, ERR_CONFLICT, EBUSY, "sandbox '%s' is %s", sb->id,
				       sandbox_status_names[st]);
		}
		if (!need_capture)
			return 0;
		if (c && capture_alive(c)) {
			*cap = c;
			return 0;
		}
		pthread_rwlock_unlock(&sb->op);
		if (attempt > 0)
			return err_set(e, ERR_UNAVAILABLE, EAGAIN,
				       "the sandbox's screen mirror is reconnecting");

		/* The bridge died (VNC server restarted, or a crash in the
		 * parser): start a new one, once, exclusively. */
		pthread_rwlock_wrlock(&sb->op);
		pthread_mutex_lock(&sb->mu);
		int still_dead =
		    sb->status == SANDBOX_RUNNING && !(sb->cap && capture_alive(sb->cap));
		pthread_mutex_unlock(&sb->mu);
		if (still_dead) {
			struct capture *fresh = NULL;
			struct err e2 = ERR_INIT;
			if (capture_connect(sb, RECONNECT_TIMEOUT_MS, &fresh, &e2) < 0)
				log_msg(LOG_LEVEL_WARN, "sandbox %s: reconnect: %s", sb->id,
					e2.msg);
			pthread_mutex_lock(&sb->mu);
			capture_free(sb->cap);
			sb->cap = fresh;
			pthread_mutex_unlock(&sb->mu);
		}
		pthread_rwlock_unlock(&sb->op);
	}
}

void sandbox_unuse(struct sandbox *sb)
{
	pthread_rwlock_unlock(&sb->op);
}

cJSON *sandbox_json(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status st = sb->status;
	pthread_mutex_unlock(&sb->mu);
	return spec_json(sb, st);
}

cJSON *sandboxes_json(struct sandboxes *s)
{
	cJSON *arr = cJSON_CreateArray();
	pthread_mutex_lock(&s->mu);
	for (struct sandbox *sb = s->list; sb; sb = sb->next)
		if (!sb->pooled)
			cJSON_AddItemToArray(arr, sandbox_json(sb));
	pthread_mutex_unlock(&s->mu);
	return arr;
}

/* ---- opening and closing the registry ---- */

static int load_one(struct sandboxes *s, const char *id)
{
	struct err e = ERR_INIT;
	struct sandbox *sb = sandbox_alloc(s, id);
	if (!sb)
		return -ENOMEM;
	char path[PATH_MAX];
	sandbox_path(sb, path, sizeof(path), "sandbox.json");
	_cleanup_free_ char *text = NULL;
	cJSON *j = NULL;
	const cJSON *st = NULL;
	if (fs_read_file(path, 1 << 20, &text, NULL, &e) == 0 && (j = cJSON_Parse(text)) &&
	    (st = cJSON_GetObjectItemCaseSensitive(j, "status")) && cJSON_IsString(st) &&
	    strcmp(st->valuestring, "creating") != 0 &&
	    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "pooled")) &&
	    sandbox_spec_parse(j, &sb->spec, &e) == 0) {
		const cJSON *ca = cJSON_GetObjectItemCaseSensitive(j, "created_at");
		sb->created_at = cJSON_IsNumber(ca) ? (long long)ca->valuedouble : 0;
		/* Whatever ran before this deskboxd started is gone or stale:
		 * make sure of it, keep the files, report it stopped. */
		teardown(sb);
		sandbox_sweep_uploads(sb);
		sb->status = SANDBOX_STOPPED;
		if (sandbox_persist(sb, SANDBOX_STOPPED, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", id, e.msg);
		cJSON_Delete(j);
		pthread_mutex_lock(&s->mu);
		sb->next = s->list;
		s->list = sb;
		s->count++;
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	/* Half-created (or unreadable): roll back. */
	cJSON_Delete(j);
	log_msg(LOG_LEVEL_WARN, "rolling back half-created sandbox %s%s%s", id,
		e.msg[0] ? ": " : "", e.msg);
	err_clear(&e);
	teardown(sb);
	if (fs_remove_tree(sb->dir, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "%s", e.msg);
	sandbox_put(sb);
	return 0;
}

int sandboxes_open(struct sandboxes **out, const struct sandboxes_config *cfg, struct err *e)
{
	struct sandboxes *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	s->cfg = *cfg;
	pthread_mutex_init(&s->mu, NULL);
	char dir[PATH_MAX], rtroot[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/sandboxes", cfg->state_dir);
	snprintf(rtroot, sizeof(rtroot), "%s/runtime", cfg->state_dir);
	struct runtime_opts ro = {
	    .binary = cfg->runtime_binary,
	    .root = rtroot,
	    .cgroup_mode = cfg->cgroup_mode,
	};
	if (fs_mkdir_p(dir, 0700, e) < 0 ||
	    image_prepare_default(cfg->state_dir, s->lower, sizeof(s->lower), e) < 0 ||
	    runtime_new(&s->rt, &ro, e) < 0) {
		free(s);
		return err_code(e);
	}
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (strlen(de->d_name) != SANDBOX_ID_LEN ||
			    strspn(de->d_name, "0123456789abcdef") != SANDBOX_ID_LEN)
				continue;
			load_one(s, de->d_name);
		}
		closedir(d);
	}
	*out = s;
	return 0;
}

void sandboxes_kill_runs(struct sandboxes *s)
{
	pthread_mutex_lock(&s->mu);
	for (struct sandbox *sb = s->list; sb; sb = sb->next)
		process_table_kill_all(sb->procs);
	pthread_mutex_unlock(&s->mu);
}

void sandboxes_close(struct sandboxes *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	struct sandbox *list = s->list;
	s->list = NULL;
	s->count = 0;
	pthread_mutex_unlock(&s->mu);
	while (list) {
		struct sandbox *sb = list;
		list = sb->next;
		pthread_rwlock_wrlock(&sb->op);
		if (sb->status == SANDBOX_RUNNING) {
			teardown(sb);
			struct err e = ERR_INIT;
			if (sandbox_persist(sb, SANDBOX_STOPPED, &e) < 0)
				log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
		}
		sb->status = SANDBOX_STOPPED;
		pthread_rwlock_unlock(&sb->op);
		sandbox_put(sb);
	}
	runtime_free(s->rt);
	free(s);
}
