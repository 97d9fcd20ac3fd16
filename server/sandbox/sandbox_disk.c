/* sandbox_disk: where a sandbox's writes land on the host, and what caps
 * them.
 *
 * - Its filesystem: the overlay's upper and work dirs live on the sandbox's
 *   own disk, a `disk_mb` ext4 image (disk.img in the disk store or in
 *   <dir>, sandbox_store.c; mounted on <dir>/disk;
 *   server/runtime/runtime_disk.c has the figures behind that choice).
 *   The kernel answers ENOSPC at the limit, to programs inside and to
 *   the files API alike.  The image has a fixed size: it never grows.
 *   It stays mounted while the sandbox exists (the files API works on a
 *   stopped sandbox) and is mounted again after a restart of deskboxd.
 *   A sandbox with disk_mb 0, or one made before disks existed (a plain
 *   <dir>/upper), writes to the state dir's filesystem without a limit.
 * - /run/deskbox: a 4 MiB tmpfs mounted on <dir>/run for each run of the
 *   container (deskboxd reaches vnc.sock, ready and exec.sock there).
 * - Its output: a pipe drained into a capped init.log (sandbox_log.c).
 * - Uploads reserve their size first (sandbox_disk_reserve), so several at
 *   once cannot together pass the limit. */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "common/log.h"
#include "server/runtime/runtime.h"

/* Sockets and flag files only; 4 MiB of RAM at most, charged to the
 * sandbox's memory cgroup. */
#define RUN_TMPFS_OPTS "size=4m,nr_inodes=1024,mode=0755"

void sandbox_disk_loaded(struct sandbox *sb)
{
	char img[PATH_MAX];
	/* In the disk store, or (made before it, or without one) in its own
	 * directory. */
	sb->disk_pooled = sb->owner->store[0] != '\0';
	sandbox_disk_path(sb, img, sizeof(img), "disk.img");
	if (sb->disk_pooled && access(img, F_OK) == 0)
		return;
	sb->disk_pooled = 0;
	sandbox_path(sb, img, sizeof(img), "disk.img");
	if (access(img, F_OK) < 0)
		sb->spec.disk_mb = 0;
}

void sandbox_recordings_dir(struct sandbox *sb, char *buf, size_t size)
{
	pthread_mutex_lock(&sb->mu);
	int disk = sb->spec.disk_mb != 0;
	pthread_mutex_unlock(&sb->mu);
	sandbox_path(sb, buf, size, disk ? "disk/recordings" : "recordings");
}

int sandbox_disk_mount(struct sandbox *sb, char *upper, char *work, size_t size, struct err *e)
{
	if (!sb->spec.disk_mb) {
		sandbox_path(sb, upper, size, "upper");
		sandbox_path(sb, work, size, "work");
		return 0;
	}
	sandbox_path(sb, upper, size, "disk/upper");
	sandbox_path(sb, work, size, "disk/work");
	if (sb->disk_mounted)
		return 0;
	char img[PATH_MAX], disk[PATH_MAX];
	sandbox_disk_path(sb, img, sizeof(img), "disk.img");
	sandbox_path(sb, disk, sizeof(disk), "disk");
	/* Only a sandbox being created gets a new, empty disk: a missing
	 * image later is an error, not a reason to start over. */
	if (sb->status == SANDBOX_CREATING && access(img, F_OK) < 0 &&
	    (sandbox_store_room(sb, e) < 0 || sandbox_disk_home_make(sb, e) < 0 ||
	     disk_image_create(img, sb->spec.disk_mb << 20, e) < 0))
		return err_code(e);
	if (disk_image_mount(img, disk, e) < 0)
		return err_wrap(e, "the disk of sandbox '%s'", sb->id);
	sb->disk_mounted = 1;
	return 0;
}

void sandbox_usr_layers(struct sandbox *sb, char *upper, char *work, size_t size)
{
	int disk = sb->spec.disk_mb != 0;
	sandbox_path(sb, upper, size, disk ? "disk/usr-upper" : "usr-upper");
	sandbox_path(sb, work, size, disk ? "disk/usr-work" : "usr-work");
}

void sandbox_disk_umount(struct sandbox *sb)
{
	char disk[PATH_MAX];
	sandbox_path(sb, disk, sizeof(disk), "disk");
	struct err e = ERR_INIT;
	pthread_mutex_lock(&sb->mu);
	/* Also when not marked mounted: a load after a crash of deskboxd
	 * finds nothing mounted (its mount namespace went with it), and an
	 * unmounted target is not an error. */
	if (sb->spec.disk_mb && disk_image_umount(disk, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
	sb->disk_mounted = 0;
	pthread_mutex_unlock(&sb->mu);
}

int sandbox_run_mount(struct sandbox *sb, struct err *e)
{
	char run[PATH_MAX];
	sandbox_path(sb, run, sizeof(run), "run");
	pthread_mutex_lock(&sb->mu);
	int r = 0;
	if (!sb->run_mounted) {
		if (mount("deskbox-run", run, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  RUN_TMPFS_OPTS) < 0)
			r = err_sys(e, ERR_INTERNAL, errno, "mounting a tmpfs on '%s'", run);
		sb->run_mounted = r == 0;
	}
	pthread_mutex_unlock(&sb->mu);
	return r;
}

void sandbox_run_umount(struct sandbox *sb)
{
	char run[PATH_MAX];
	sandbox_path(sb, run, sizeof(run), "run");
	pthread_mutex_lock(&sb->mu);
	if (sb->run_mounted && umount2(run, MNT_DETACH) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: unmounting '%s': %s", sb->id, run,
			strerror(errno));
	sb->run_mounted = 0;
	pthread_mutex_unlock(&sb->mu);
}

int sandbox_disk_reserve(struct sandbox *sb, uint64_t bytes, struct err *e)
{
	char disk[PATH_MAX];
	sandbox_path(sb, disk, sizeof(disk), "disk");
	pthread_mutex_lock(&sb->mu);
	int limited = sb->spec.disk_mb != 0, mounted = sb->disk_mounted;
	pthread_mutex_unlock(&sb->mu);
	if (!limited || !bytes)
		return 0;
	/* Unmounted, statvfs would report the host's filesystem. */
	if (!mounted)
		return err_set(e, ERR_CONFLICT, ESRCH, "the disk of sandbox '%s' is not mounted",
			       sb->id);
	uint64_t used, avail;
	if (disk_usage(disk, &used, &avail, e) < 0)
		return err_code(e);
	uint64_t cur = atomic_load(&sb->disk_reserved);
	do {
		if (bytes > avail || cur > avail - bytes)
			return err_set(e, ERR_NO_SPACE, ENOSPC,
				       "the sandbox's disk quota of %" PRIu64
				       " MiB is short: %" PRIu64 " MiB in use, %" PRIu64
				       " MiB free, %" PRIu64 " MiB held by uploads in flight",
				       sb->spec.disk_mb, used >> 20, avail >> 20, cur >> 20);
	} while (!atomic_compare_exchange_weak(&sb->disk_reserved, &cur, cur + bytes));
	return 0;
}

void sandbox_disk_release(struct sandbox *sb, uint64_t bytes)
{
	if (sb->spec.disk_mb && bytes)
		atomic_fetch_sub(&sb->disk_reserved, bytes);
}

uint64_t sandbox_disk_bytes(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->mu);
	uint64_t mb = sb->spec.disk_mb;
	pthread_mutex_unlock(&sb->mu);
	return mb << 20;
}

enum sandbox_status sandbox_current_status(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status st = sb->status;
	pthread_mutex_unlock(&sb->mu);
	return st;
}
