/* sandbox_store: where the sandboxes' disk images live.
 *
 * A checkpoint, a restore and a fork each clone a disk image
 * (sandbox_checkpoint.c).  Where the state dir's filesystem can clone files
 * (FICLONE: XFS with reflinks, btrfs) the images stay in the sandboxes' own
 * directories and that costs the same at 1 MiB and at 1 GiB.  On ext4,
 * which cannot, every clone would be a copy of the data, so deskboxd keeps
 * the images in a disk store of its own instead: one sparse file,
 * <state>/store.xfs, holding an XFS made with reflinks, loop-mounted on
 * <state>/store (in deskboxd's mount namespace, like the disks; mounted
 * with discard, so what is deleted in it is punched out of the file on the
 * host).  A sandbox's image is then <store>/sandboxes/<id>/disk.img and its
 * checkpoints <store>/sandboxes/<id>/checkpoints/<name>/; the rest of its
 * directory stays where it was.  --disk-store auto (the default) uses the
 * store only when the state dir cannot clone, pool always, direct never.
 *
 * The store is sparse and overcommitted like the images in it: the host
 * pays for what the sandboxes wrote, and its size (--disk-store-size,
 * default the state dir's filesystem's) caps them all together.  A store
 * that exists is always mounted, whatever --disk-store says, since
 * sandboxes live in it; sandboxes made before it (or with direct) keep
 * their images in their own directories and work as before.
 *
 * Across a restart of deskboxd with sandboxes left running, the store's
 * XFS stays alive under them (their disks' loop devices hold files in it)
 * and is mounted again from the loop device that still backs it: the same
 * filesystem, never a second one (XFS refuses a second mount of one UUID
 * anyway). */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"

/* Free room the store must have for a new image or a checkpoint: an image's
 * ext4 metadata (~5 MiB for 10 GiB) and a clone's extent maps, with margin
 * for the writes of the sandboxes already in it. */
#define STORE_MIN_FREE (64ULL << 20)
/* mkfs.xfs makes nothing smaller (300 MB). */
#define STORE_MIN_MB 300

static void store_paths(const struct sandboxes *s, char *img, char *dir, size_t size)
{
	snprintf(img, size, "%s/store.xfs", s->cfg.state_dir);
	snprintf(dir, size, "%s/store", s->cfg.state_dir);
}

/* The size of a store made now: --disk-store-size, else the state dir's
 * filesystem's. */
static uint64_t store_bytes(const struct sandboxes *s)
{
	uint64_t mb = s->cfg.disk_store_mb;
	struct statvfs sv;
	if (!mb && statvfs(s->cfg.state_dir, &sv) == 0)
		mb = ((uint64_t)sv.f_blocks * sv.f_frsize) >> 20;
	return (mb < STORE_MIN_MB ? STORE_MIN_MB : mb) << 20;
}

/* Mounts the store at `img` on `dir`, making it first unless it exists. */
static int store_mount(struct sandboxes *s, const char *img, const char *dir, int exists,
		       struct err *e)
{
	if (!exists && disk_store_make(img, store_bytes(s), e) < 0)
		return err_code(e);
	if (disk_store_mount(img, dir, e) < 0) {
		if (!exists) /* nothing is in it yet */
			unlink(img);
		return err_wrap(e, "the disk store '%s'", img);
	}
	char sub[PATH_MAX];
	snprintf(sub, sizeof(sub), "%s/sandboxes", dir);
	if (fs_mkdir_p(sub, 0700, e) < 0) {
		disk_image_umount(dir, NULL);
		return err_code(e);
	}
	return 0;
}

int sandbox_store_open(struct sandboxes *s, struct err *e)
{
	char img[PATH_MAX], dir[PATH_MAX];
	store_paths(s, img, dir, sizeof(img));
	int exists = access(img, F_OK) == 0;
	enum disk_store_mode mode = s->cfg.disk_store;
	int want = mode == DISK_STORE_POOL ||
		   (mode == DISK_STORE_AUTO && !disk_reflinks(s->cfg.state_dir));
	if (!exists && !want)
		return 0;
	if (store_mount(s, img, dir, exists, e) < 0) {
		/* auto, with nothing in a store yet: the images stay in the
		 * sandboxes' directories (copied, not cloned). */
		if (exists || mode == DISK_STORE_POOL)
			return err_code(e);
		log_msg(LOG_LEVEL_WARN, "no disk store, checkpoints copy their images: %s", e->msg);
		err_clear(e);
		return 0;
	}
	snprintf(s->store, sizeof(s->store), "%s", dir);
	s->store_new = want;
	struct statvfs sv;
	uint64_t mb = statvfs(dir, &sv) == 0 ? ((uint64_t)sv.f_blocks * sv.f_frsize) >> 20 : 0;
	log_msg(LOG_LEVEL_INFO, "disk store %s: XFS with reflinks, %" PRIu64 " MiB%s", img, mb,
		want ? "" : " (only for the sandboxes already in it)");
	return 0;
}

void sandbox_store_sweep(struct sandboxes *s)
{
	if (!s->store[0])
		return;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/sandboxes", s->store);
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char own[PATH_MAX], path[PATH_MAX];
		snprintf(own, sizeof(own), "%s/sandboxes/%s", s->cfg.state_dir, de->d_name);
		if (access(own, F_OK) == 0)
			continue;
		/* Its sandbox is gone (a delete or a rollback a crash cut
		 * short): so is its image. */
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		struct err e = ERR_INIT;
		if (fs_remove_tree(path, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "%s", e.msg);
		else
			log_msg(LOG_LEVEL_INFO, "removed the disk of deleted sandbox %s",
				de->d_name);
	}
	if (d)
		closedir(d);
}

void sandbox_store_close(struct sandboxes *s)
{
	struct err e = ERR_INIT;
	/* Detached: the disks of sandboxes left running keep it alive until
	 * the next deskboxd mounts it again. */
	if (s->store[0] && disk_image_umount(s->store, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "%s", e.msg);
	s->store[0] = '\0';
}

/* Trim threads running (see sandbox_store_trim): a burst of deletes
 * starts a few, whose later syncfs calls cover the rest. */
#define TRIMS_MAX 4
static atomic_int trims_running;

static void *trim_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	/* The deleted image's last holder, its loop device, lets go of it
	 * just after the delete returns; the second pass catches a slow
	 * release. */
	clock_sleep_ms(1000);
	syncfs(fd);
	clock_sleep_ms(4000);
	syncfs(fd);
	close(fd);
	atomic_fetch_sub(&trims_running, 1);
	return NULL;
}

void sandbox_store_trim(struct sandboxes *s)
{
	/* XFS frees a deleted file's blocks, and so discards them, when its
	 * log next commits: within 30 s (xfssyncd_centisecs) on its own.
	 * syncfs commits it now, but also writes back what the sandboxes
	 * wrote and not yet flushed, so it runs beside the request, not in
	 * it; the thread holds only an fd of the store. */
	if (!s->store[0])
		return;
	if (atomic_fetch_add(&trims_running, 1) >= TRIMS_MAX) {
		atomic_fetch_sub(&trims_running, 1);
		return;
	}
	int fd = open(s->store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (fd < 0 || pthread_create(&t, &attr, trim_main, (void *)(intptr_t)fd) != 0) {
		if (fd >= 0)
			close(fd);
		atomic_fetch_sub(&trims_running, 1);
	}
	pthread_attr_destroy(&attr);
}

void sandbox_disk_path(const struct sandbox *sb, char *buf, size_t size, const char *name)
{
	if (sb->disk_pooled)
		snprintf(buf, size, "%s/sandboxes/%s/%s", sb->owner->store, sb->id, name);
	else
		sandbox_path(sb, buf, size, name);
}

int sandbox_disk_home_make(struct sandbox *sb, struct err *e)
{
	char dir[PATH_MAX];
	if (!sb->disk_pooled)
		return 0;
	snprintf(dir, sizeof(dir), "%s/sandboxes/%s", sb->owner->store, sb->id);
	return fs_mkdir_p(dir, 0700, e);
}

void sandbox_disk_home_remove(struct sandbox *sb)
{
	char dir[PATH_MAX];
	struct err e = ERR_INIT;
	if (!sb->disk_pooled || !sb->owner->store[0])
		return;
	snprintf(dir, sizeof(dir), "%s/sandboxes/%s", sb->owner->store, sb->id);
	if (fs_remove_tree(dir, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
	sandbox_store_trim(sb->owner);
}

int sandbox_store_room(struct sandbox *sb, struct err *e)
{
	if (!sb->disk_pooled)
		return 0;
	struct statvfs sv;
	if (statvfs(sb->owner->store, &sv) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "statvfs '%s'", sb->owner->store);
	uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (avail >= STORE_MIN_FREE)
		return 0;
	return err_set(e, ERR_NO_SPACE, ENOSPC,
		       "the disk store is full: %" PRIu64 " MiB free of %" PRIu64
		       " MiB (deskboxd --disk-store-size); delete sandboxes or checkpoints",
		       avail >> 20, ((uint64_t)sv.f_blocks * sv.f_frsize) >> 20);
}
