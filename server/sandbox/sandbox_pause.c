/* sandbox_pause: pause and resume through the cgroup freezer.
 *
 * Pausing freezes the sandbox's cgroup (deskbox/dbx-<id>): every process in
 * it and in its runs' sub-cgroups stops where it is, keeps its memory and
 * uses no CPU; resuming thaws them and they go on as if nothing happened
 * (their clocks jump).  cgroup v1 writes FROZEN to freezer.state and waits
 * until the state reads FROZEN (it says FREEZING while a task is still
 * running); v2 writes 1 to cgroup.freeze and waits for "frozen 1" in
 * cgroup.events.  Both freeze the whole subtree.
 *
 * The bridge outside keeps its connection to the frozen VNC server: it
 * waits in poll() with no timeout between messages, and libvncclient's
 * 30 s read timeout only applies inside a message; a bridge that gave up
 * anyway is reconnected by the next desktop call (sandbox_use).  A pause
 * does not outlive deskboxd: its processes are stopped at shutdown and the
 * sandbox is listed "stopped" at the next start, its files kept. */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"

#define CGROUP_ROOT "/sys/fs/cgroup"
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
/* A task in uninterruptible sleep delays a freeze; past this we give up
 * and thaw again (a loaded machine takes a few ms, not seconds). */
#define FREEZE_TIMEOUT_MS 5000

static int write_text(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	return n == (ssize_t)strlen(text) ? 0 : n < 0 ? -errno : -EIO;
}

static int read_text(const char *dir, const char *name, char *buf, size_t size)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* One cgroup version's freezer. */
struct freezer_ops {
	const char *file;		   /* what freezes and thaws */
	const char *frozen, *thawed;	   /* what is written to it */
	int (*is_frozen)(const char *dir); /* 1, 0, or -errno */
};

static int v1_is_frozen(const char *dir)
{
	char st[64];
	int r = read_text(dir, "freezer.state", st, sizeof(st));
	return r < 0 ? r : strncmp(st, "FROZEN", 6) == 0;
}

static int v2_is_frozen(const char *dir)
{
	char ev[256];
	int r = read_text(dir, "cgroup.events", ev, sizeof(ev));
	return r < 0 ? r : strstr(ev, "frozen 1") != NULL;
}

static const struct freezer_ops freezer_v1 = {"freezer.state", "FROZEN", "THAWED", v1_is_frozen};
static const struct freezer_ops freezer_v2 = {"cgroup.freeze", "1", "0", v2_is_frozen};

/* The sandbox's cgroup directory that holds the freezer, and its ops. */
static const struct freezer_ops *freezer_of(const struct sandbox *sb, char *dir, size_t size)
{
	if (sb->owner->cfg.cgroup_mode == RUNTIME_CGROUP_V2) {
		snprintf(dir, size, "%s/deskbox/%s", CGROUP_ROOT, sb->container_id);
		return &freezer_v2;
	}
	/* v1: the hierarchy whose name has "freezer" in it (it may be
	 * co-mounted with others, "cpu,freezer"). */
	snprintf(dir, size, "%s/freezer/deskbox/%s", CGROUP_ROOT, sb->container_id);
	if (access(dir, F_OK) == 0)
		return &freezer_v1;
	DIR *d = opendir(CGROUP_ROOT);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		struct statfs sf;
		char h[PATH_MAX];
		snprintf(h, sizeof(h), "%s/%s", CGROUP_ROOT, de->d_name);
		if (de->d_name[0] != '.' && strstr(de->d_name, "freezer") && statfs(h, &sf) == 0 &&
		    sf.f_type == CGROUP_SUPER_MAGIC) {
			snprintf(dir, size, "%s/deskbox/%s", h, sb->container_id);
			break;
		}
	}
	if (d)
		closedir(d);
	return &freezer_v1;
}

int sandbox_freeze(struct sandbox *sb, struct err *e)
{
	char dir[PATH_MAX];
	const struct freezer_ops *ops = freezer_of(sb, dir, sizeof(dir));
	int r = write_text(dir, ops->file, ops->frozen);
	if (r < 0)
		return err_sys(e, ERR_INTERNAL, -r, "freezing '%s'", dir);
	long long deadline = clock_mono_ms() + FREEZE_TIMEOUT_MS;
	for (int i = 0;; i++) {
		r = ops->is_frozen(dir);
		if (r == 1)
			return 0;
		if (r < 0 || clock_mono_ms() > deadline) {
			write_text(dir, ops->file, ops->thawed);
			return r < 0
				   ? err_sys(e, ERR_INTERNAL, -r, "reading the state of '%s'", dir)
				   : err_set(e, ERR_TIMEOUT, ETIMEDOUT,
					     "the sandbox's processes did not freeze in %d ms",
					     FREEZE_TIMEOUT_MS);
		}
		clock_sleep_us(i < 200 ? 50 : 1000);
	}
}

int sandbox_thaw(struct sandbox *sb, struct err *e)
{
	char dir[PATH_MAX];
	const struct freezer_ops *ops = freezer_of(sb, dir, sizeof(dir));
	int r = write_text(dir, ops->file, ops->thawed);
	if (r < 0 && r != -ENOENT)
		return err_sys(e, ERR_INTERNAL, -r, "thawing '%s'", dir);
	return 0;
}

void sandbox_thaw_quiet(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->mu);
	int paused = sb->status == SANDBOX_PAUSED;
	pthread_mutex_unlock(&sb->mu);
	struct err e = ERR_INIT;
	if (paused && sandbox_thaw(sb, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
}

/* Sets and persists the status; a failed write is logged, since the
 * processes are already in that state. */
static void set_status(struct sandbox *sb, enum sandbox_status st)
{
	pthread_mutex_lock(&sb->mu);
	sb->status = st;
	pthread_mutex_unlock(&sb->mu);
	struct err e = ERR_INIT;
	if (sandbox_persist(sb, st, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
}

int sandbox_pause_locked(struct sandbox *sb, struct err *e)
{
	if (sb->be->feature(RUNTIME_FEATURE_PAUSE, e) < 0)
		return err_code(e);
	if (sandbox_freeze(sb, e) < 0)
		return err_wrap(e, "pausing sandbox '%s'", sb->id);
	set_status(sb, SANDBOX_PAUSED);
	return 0;
}

int sandbox_resume_locked(struct sandbox *sb, struct err *e)
{
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status st = sb->status;
	pthread_mutex_unlock(&sb->mu);
	if (st != SANDBOX_PAUSED)
		return 0; /* someone else resumed it meanwhile */
	if (sandbox_thaw(sb, e) < 0)
		return err_wrap(e, "resuming sandbox '%s'", sb->id);
	set_status(sb, SANDBOX_RUNNING);
	return 0;
}

/* A pause with "memory":true (the guest's RAM and devices saved to a file,
 * the VM's process gone) is refused by name: a container's pause already
 * keeps its memory in place, and QEMU 7.2 refuses to migrate a guest that
 * has a virtio-9p share mounted ("Migration is disabled when VirtFS export
 * path ... is mounted"), which a VM's root, /usr and run dir are
 * (docs/isolation.md). */
static int refuse_memory(const struct sandbox *sb, int checkpoint, struct err *e)
{
	const char *what = checkpoint ? "a checkpoint" : "pause";
	if (sb->be->isolation != RUNTIME_ISOLATION_VM && checkpoint)
		return err_set(e, ERR_NOT_IMPLEMENTED, ENOTSUP,
			       "a checkpoint with \"memory\":true is not implemented: a "
			       "container's checkpoint keeps its files, and its desktop starts "
			       "again at a restore; take it without \"memory\"");
	if (sb->be->isolation != RUNTIME_ISOLATION_VM)
		return err_set(e, ERR_NOT_IMPLEMENTED, ENOTSUP,
			       "pause with \"memory\":true is for VM sandboxes: a container's "
			       "pause already keeps its memory in place (its cgroup frozen); "
			       "pause it without \"memory\"");
	return err_set(e, ERR_NOT_IMPLEMENTED, ENOTSUP,
		       "isolation 'vm': %s with \"memory\":true is not implemented: QEMU "
		       "refuses to save a guest's memory while a virtio-9p share is mounted, "
		       "and the VM's root, /usr and run dir are 9p shares (docs/isolation.md)",
		       what);
}

int sandbox_checkpoint_memory(struct sandboxes *s, const char *id, struct err *e)
{
	struct sandbox *sb;
	enum sandbox_status st;
	if (sandbox_get_exclusive(s, id, &sb, &st, e) < 0)
		return err_code(e);
	int r = st == SANDBOX_DELETING ? err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", id)
				       : refuse_memory(sb, 1, e);
	return sandbox_put_exclusive(sb, r, NULL);
}

/* Looks `id` up and, exclusively, pauses (`pause` 1; 2: with its memory
 * saved, refused) or resumes it (0). */
static int pause_or_resume(struct sandboxes *s, const char *id, int pause, struct sandbox **out,
			   struct err *e)
{
	struct sandbox *sb;
	enum sandbox_status st;
	if (sandbox_get_exclusive(s, id, &sb, &st, e) < 0)
		return err_code(e);
	int r = 0;
	if (st == SANDBOX_DELETING)
		r = err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", id);
	else if (st == SANDBOX_CREATING)
		r = err_set(e, ERR_CONFLICT, EBUSY, "sandbox '%s' is being created", id);
	else if (st != SANDBOX_RUNNING && st != SANDBOX_PAUSED)
		r = err_set(e, ERR_NOT_RUNNING, ESRCH, "sandbox '%s' is not running: it is %s", id,
			    sandbox_status_name(st));
	else if (pause == 2)
		r = refuse_memory(sb, 0, e);
	else if (pause && st == SANDBOX_RUNNING)
		r = sandbox_pause_locked(sb, e);
	else if (!pause && st == SANDBOX_PAUSED)
		r = sandbox_resume_locked(sb, e);
	return sandbox_put_exclusive(sb, r, out);
}

int sandbox_pause(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e)
{
	return pause_or_resume(s, id, 1, out, e);
}

int sandbox_pause_memory(struct sandboxes *s, const char *id, struct sandbox **out,
			 struct err *e)
{
	return pause_or_resume(s, id, 2, out, e);
}

int sandbox_resume(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e)
{
	return pause_or_resume(s, id, 0, out, e);
}
