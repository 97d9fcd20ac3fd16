/* sandbox_state: stopping and starting sandboxes, and the root the files
 * API works in (the running container's, or the stopped one's overlay). */
#include "sandbox.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "server/files/files.h"
#include "server/runtime/runtime.h"
#include "server/process/process.h"

/* What stop gives the desktop after SIGTERM (the init itself waits 2 s
 * for its children before killing them). */
#define SANDBOX_STOP_GRACE_MS 3000

/* ---- stop, start and the files API's view ---- */

/* Whether `pid` is still there and not a zombie. */
static int pid_alive(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* Removes the temporary files of uploads a crash cut short (files.h).
 * Only while no container runs: the walk is on host paths. */
void sandbox_sweep_uploads(struct sandbox *sb)
{
	char upper[PATH_MAX], work[PATH_MAX], run[PATH_MAX];
	struct err e = ERR_INIT;
	/* The upper dir may be on the sandbox's own disk: mounted from here
	 * on, as it stays while the sandbox exists. */
	pthread_mutex_lock(&sb->mu);
	int r = sandbox_disk_mount(sb, upper, work, sizeof(upper), &e);
	pthread_mutex_unlock(&sb->mu);
	if (r < 0) {
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
		return;
	}
	sandbox_path(sb, run, sizeof(run), "run");
	const char *const dirs[] = {upper, run};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		const char *p = dirs[i];
		err_clear(&e);
		unsigned n = 0;
		if (files_sweep_temp(p, &n, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
		else if (n)
			log_msg(LOG_LEVEL_INFO, "sandbox %s: removed %u unfinished upload(s)",
				sb->id, n);
	}
}

/* A read-only root reached through a taken-over sandbox must be read-only
 * there too: a container's is (its root mount), a VM's is its overlay
 * itself (the read-only view is the guest's and QEMU's export), which
 * another mount namespace's mount cannot be bound read-only from. */
static int adopted_ro_check(struct sandbox *sb, int *fd, struct err *e)
{
	struct statvfs vs;
	if (*fd < 0 || !sb->adopted || !sb->spec.read_only_root ||
	    (fstatvfs(*fd, &vs) == 0 && (vs.f_flag & ST_RDONLY)))
		return 0;
	close(*fd);
	*fd = -1;
	return err_set(e, ERR_CONFLICT, EROFS,
		       "the files of sandbox '%s' (read_only_root, taken over by this deskboxd) "
		       "are reachable only read-only, which this deskboxd cannot provide until "
		       "its next start: stop and start it",
		       sb->id);
}

int sandbox_open_root(struct sandbox *sb, struct files_root *root, struct err *e)
{
	pthread_rwlock_rdlock(&sb->op);
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status st = sb->status;
	pid_t pid = sb->init_pid;
	pthread_mutex_unlock(&sb->mu);
	int r = 0;
	if (st == SANDBOX_DELETING)
		r = err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", sb->id);
	else if (st != SANDBOX_RUNNING && st != SANDBOX_PAUSED && st != SANDBOX_STOPPED &&
		 st != SANDBOX_FAILED)
		r = err_set(e, ERR_CONFLICT, EBUSY, "sandbox '%s' is %s", sb->id,
			    sandbox_status_names[st]);
	else if (st == SANDBOX_PAUSED)
		st = SANDBOX_RUNNING; /* its processes' root is there, frozen or not */
	else if (st != SANDBOX_RUNNING)
		r = sandbox_rootfs_mount(sb, e);
	if (r < 0) {
		pthread_rwlock_unlock(&sb->op);
		return r;
	}
	char rootfs[PATH_MAX];
	sandbox_path(sb, rootfs, sizeof(rootfs), "rootfs");
	struct stat want, got;
	_cleanup_fd_ int fd = -1;
	if (stat(rootfs, &want) < 0)
		r = err_sys(e, ERR_INTERNAL, errno, "inspecting '%s'", rootfs);
	if (r == 0 && st == SANDBOX_RUNNING && pid > 0) {
		/* What the sandbox itself sees: its root with the /usr, /proc
		 * and /run mounts on it. */
		char p[PATH_MAX];
		if (sb->adopted)
			sandbox_adopted_paths(sb, NULL, p, sizeof(p));
		else
			snprintf(p, sizeof(p), "/proc/%d/root", (int)pid);
		fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
		/* SECURITY: it must be the sandbox's overlay and nothing else:
		 * were the init gone and its pid reused, /proc/N/root could be
		 * the host's "/".  Then the overlay's own mount will do. */
		/* An adopted sandbox's overlay is the container's alone (not
		 * mounted in this deskboxd's namespace): there the pid must
		 * still be the container's init after the open. */
		int same = sb->adopted ? sandbox_pid_in_container(pid, sb->container_id)
				       : fstat(fd, &got) == 0 && got.st_dev == want.st_dev &&
					     got.st_ino == want.st_ino;
		if (fd >= 0 && !same) {
			close(fd);
			fd = -1;
		}
		r = adopted_ro_check(sb, &fd, e);
	}
	if (r == 0 && fd < 0 && sb->spec.read_only_root) {
		/* The overlay itself would take any write: a view of it that
		 * refuses them as the container's root does. */
		r = sandbox_roview_mount(sb, e);
		sandbox_path(sb, rootfs, sizeof(rootfs), "roview");
	}
	if (r == 0 && fd < 0) {
		fd = open(rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		/* An overlay, not the empty mount point under it. */
		struct stat dir;
		if (fd >= 0 &&
		    (fstat(fd, &got) < 0 || stat(sb->dir, &dir) < 0 || got.st_dev == dir.st_dev))
			r = err_set(e, ERR_CONFLICT, ESRCH,
				    "the filesystem of sandbox '%s' is not mounted", sb->id);
		else if (fd < 0)
			r = err_sys(e, ERR_INTERNAL, errno, "opening '%s'", rootfs);
	}
	pthread_rwlock_unlock(&sb->op);
	if (r < 0)
		return r;
	root->fd = TAKE_FD(fd);
	root->uid = sb->host_base + IMAGE_USER_UID;
	root->gid = sb->host_base + IMAGE_USER_GID;
	return 0;
}

/* Stops a running or failed sandbox (under its exclusive lock); files
 * stay. */
static int stop_running(struct sandboxes *s, struct sandbox *sb, struct err *e)
{
	/* Frozen tasks would take neither signal. */
	sandbox_thaw_quiet(sb);
	/* On purpose: the init's exit is no failure. */
	sandbox_init_disown(sb);
	/* SIGTERM first: the init stops the desktop (Xvfb removes its
	 * lock, programs save) and gets STOP_GRACE before the kill. */
	sb->be->kill(s->rt, sb->container_id, SIGTERM, 0, NULL);
	long long deadline = clock_mono_ms() + SANDBOX_STOP_GRACE_MS;
	while (sb->init_pid > 0 && pid_alive(sb->init_pid) && clock_mono_ms() < deadline)
		clock_sleep_ms(20);
	sandbox_teardown_ex(sb, 0);
	pthread_mutex_lock(&sb->mu);
	sb->status = SANDBOX_STOPPED;
	sb->reason[0] = '\0';
	pthread_mutex_unlock(&sb->mu);
	return sandbox_persist(sb, SANDBOX_STOPPED, e);
}

int sandbox_stop_locked(struct sandbox *sb, struct err *e)
{
	return stop_running(sb->owner, sb, e);
}

int sandbox_start_locked(struct sandbox *sb, struct err *e)
{
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status was = sb->status;
	pthread_mutex_unlock(&sb->mu);
	/* One loaded with an isolation this host could not provide then. */
	if (sb->be->isolation != sb->spec.isolation && sandbox_backend_set(sb, e) < 0)
		return err_code(e);
	/* What a failed init left, if the monitor's worker did not get to it. */
	if (was == SANDBOX_FAILED)
		sandbox_teardown_ex(sb, 0);
	int r = sandbox_start_container(sb, e);
	if (r == 0)
		r = sandbox_persist(sb, SANDBOX_RUNNING, e);
	if (r == 0)
		r = sandbox_set_running(sb, e);
	if (r < 0) {
		/* The files stay; the sandbox stays stopped or failed. */
		sandbox_teardown_ex(sb, 0);
		pthread_mutex_lock(&sb->mu);
		sb->status = was;
		pthread_mutex_unlock(&sb->mu);
		struct err e2 = ERR_INIT;
		if (sandbox_persist(sb, was, &e2) < 0)
			log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e2.msg);
	}
	return r;
}

static int start_stopped(struct sandboxes *s, struct sandbox *sb, struct err *e)
{
	(void)s;
	return sandbox_start_locked(sb, e);
}

/* Looks `id` up and, holding it exclusively, runs `act` if it is in state
 * `from` or failed; being in `to` already is success, any other state an
 * error.  On success the caller gets a reference in *out. */
static int transition(struct sandboxes *s, const char *id, enum sandbox_status from,
		      enum sandbox_status to,
		      int (*act)(struct sandboxes *, struct sandbox *, struct err *),
		      const char *what, struct sandbox **out, struct err *e)
{
	struct sandbox *sb;
	enum sandbox_status st;
	if (sandbox_get_exclusive(s, id, &sb, &st, e) < 0)
		return err_code(e);
	int r = 0;
	/* A paused sandbox stops like a running one. */
	if (sb->moved)
		r = err_set(e, ERR_NOT_FOUND, ENOENT, "sandbox '%s' moved to another node", sb->id);
	else if (st == from || st == SANDBOX_FAILED ||
		 (to == SANDBOX_STOPPED && st == SANDBOX_PAUSED))
		r = act(s, sb, e);
	else if (st == SANDBOX_DELETING)
		r = err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", sb->id);
	else if (st != to)
		r = err_set(e, ERR_CONFLICT, EBUSY, "sandbox '%s' is %s", sb->id,
			    sandbox_status_names[st]);
	if (sandbox_put_exclusive(sb, r, out) < 0)
		return err_wrap(e, "%s", what);
	return 0;
}

int sandbox_stop(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e)
{
	return transition(s, id, SANDBOX_RUNNING, SANDBOX_STOPPED, stop_running, "stopping sandbox",
			  out, e);
}

int sandbox_start(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e)
{
	return transition(s, id, SANDBOX_STOPPED, SANDBOX_RUNNING, start_stopped,
			  "starting sandbox", out, e);
}
