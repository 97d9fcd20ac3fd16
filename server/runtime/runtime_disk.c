/* disk: a sandbox's own filesystem, a fixed-size ext4 image on a loop
 * device, so that everything it writes is counted and capped by the kernel.
 *
 * Why an image: measured on the reference host (ext4 root on a virtio disk,
 * kernel 6.18, 2 shared cores), for a 10 GiB sparse image:
 *   mkfs.ext4 -m 0 -E lazy_itable_init=1,lazy_journal_init=1: 25 ms, 4.3 MiB
 *     allocated on the host (a plain mkfs.ext4 zeroes the 64 MiB journal:
 *     28 ms, 68 MiB allocated);
 *   loop attach + mount: 27-42 ms; unmount + detach: a few ms;
 *   capacity inside: 9.75 GiB of 10 (inode tables, journal), 655360 inodes.
 * Project quotas would need the quota feature on the state dir's
 * filesystem, which an ext4 root cannot get while mounted; a size-limited
 * tmpfs is RAM, not disk.  The image is sparse: the host pays for what the
 * sandbox writes, never more than the image's size.
 *
 * The disk store (the end of this file; sandbox_store.c decides when) is
 * the same trick one level down: a sparse XFS image with reflinks,
 * loop-mounted, holding the sandboxes' images where the state dir's
 * filesystem cannot clone them.  mkfs.xfs of a 252 GiB sparse file: ~20
 * ms and 65 MiB allocated (its log). */
#include "runtime.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"

extern char **environ;

/* How many times a free loop device is looked for when another process
 * takes the one the kernel offered first. */
#define LOOP_ATTEMPTS 16

/* Runs `argv` (a mkfs on `path`); its output becomes the error message,
 * ERR_NO_SPACE when the filesystem holding `path` is full. */
static int run_mkfs(char *const argv[], const char *path, struct err *e)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		return err_sys(e, ERR_INTERNAL, rc, "starting %s", argv[0]);
	}
	char text[512];
	size_t len = 0;
	ssize_t n;
	while ((n = read(p[0], text + len, sizeof(text) - 1 - len)) > 0 ||
	       (n < 0 && errno == EINTR))
		len += n > 0 ? (size_t)n : 0;
	text[len] = '\0';
	close(p[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return err_sys(e, ERR_INTERNAL, errno, "waiting for %s", argv[0]);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return err_set(e, strstr(text, "No space left") ? ERR_NO_SPACE : ERR_INTERNAL, EIO,
			       "%s '%s' failed: %s", argv[0], path, text);
	return 0;
}

/* A new sparse file `path` of `bytes` (O_EXCL, root's, 0600). */
static int sparse_create(const char *path, uint64_t bytes, struct err *e)
{
	_cleanup_fd_ int fd =
	    open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(e, errno == ENOSPC ? ERR_NO_SPACE : ERR_INTERNAL, errno,
			       "creating '%s'", path);
	if (ftruncate(fd, (off_t)bytes) < 0) {
		int saved = errno;
		unlink(path);
		return err_sys(e, ERR_INTERNAL, saved, "sizing '%s'", path);
	}
	return 0;
}

int disk_image_create(const char *path, uint64_t bytes, struct err *e)
{
	/* -m 0: no blocks reserved for root (everything in the sandbox writes
	 * as its user, deskboxd's files API too).  Lazy inode table and
	 * journal init: a sparse file already reads as zeros, so nothing
	 * needs writing (see the figures above). */
	char *argv[] = {"mkfs.ext4",  "-q", "-F",
			"-m",	      "0",  "-T",
			"default",    "-E", "lazy_itable_init=1,lazy_journal_init=1",
			(char *)path, NULL};
	if (sparse_create(path, bytes, e) < 0)
		return err_code(e);
	if (run_mkfs(argv, path, e) < 0) {
		unlink(path);
		return err_wrap(e, "creating the disk image (mkfs.ext4: package e2fsprogs)");
	}
	return 0;
}

/* Binds `image` to a free loop device that frees itself once its last
 * user (the mount) is gone; returns the device's fd. */
static int loop_attach(int image_fd, char *dev, size_t dev_size, struct err *e)
{
	_cleanup_fd_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '/dev/loop-control'");
	struct loop_config cfg = {.fd = (uint32_t)image_fd};
	cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
	for (int i = 0; i < LOOP_ATTEMPTS; i++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return err_sys(e, ERR_INTERNAL, errno, "finding a free loop device");
		snprintf(dev, dev_size, "/dev/loop%d", n);
		int fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", dev);
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
			return fd;
		int saved = errno;
		close(fd);
		if (saved != EBUSY) /* EBUSY: another process took it first */
			return err_sys(e, ERR_INTERNAL, saved, "attaching '%s'", dev);
	}
	return err_set(e, ERR_UNAVAILABLE, EBUSY, "no free loop device");
}

/* The loop device already backed by `image` ("/dev/loopN" into dev), as a
 * container that outlived a deskboxd still holds its disk: 1 found, 0 not.
 * Mounting that device again gives the same superblock; attaching a second
 * loop device to the file would mount the filesystem twice, which corrupts
 * it.  Matched by device and inode (LOOP_GET_STATUS64), not by the path in
 * sysfs: that is the path in the mount namespace that attached it, and for
 * a file on the disk store (itself mounted only in a deskboxd's namespace,
 * gone with it) it no longer reads as the path here. */
static int loop_find(const char *image, char *dev, size_t size)
{
	struct stat st;
	if (stat(image, &st) < 0)
		return 0;
	DIR *d = opendir("/sys/block");
	if (!d)
		return 0;
	int found = 0;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		if (access(path, F_OK) < 0)
			continue; /* not attached */
		snprintf(dev, size, "/dev/%s", de->d_name);
		_cleanup_fd_ int fd = open(dev, O_RDONLY | O_CLOEXEC);
		struct loop_info64 li;
		found = fd >= 0 && ioctl(fd, LOOP_GET_STATUS64, &li) == 0 &&
			li.lo_device == (uint64_t)st.st_dev && li.lo_inode == (uint64_t)st.st_ino;
	}
	closedir(d);
	return found;
}

/* Mounts `image` through a loop device on `target` (see disk_image_mount). */
static int loop_mount(const char *image, const char *target, const char *type, unsigned long flags,
		      const char *opts, struct err *e)
{
	if (mkdir(target, 0700) < 0 && errno != EEXIST)
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", target);
	_cleanup_fd_ int img = open(image, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (img < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", image);
	char dev[64];
	/* A device being released as its last mount goes (autoclear) refuses
	 * the mount: then a fresh one is attached. */
	if (loop_find(image, dev, sizeof(dev)) && mount(dev, target, type, flags, opts) == 0)
		return 0;
	_cleanup_fd_ int loop = loop_attach(img, dev, sizeof(dev), e);
	if (loop < 0)
		return loop;
	if (mount(dev, target, type, flags, opts) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "mounting '%s' on '%s'", image, target);
	/* Closing `loop` now leaves the mount as the device's only user: with
	 * autoclear, unmounting detaches it. */
	return 0;
}

int disk_image_mount(const char *image, const char *target, struct err *e)
{
	/* nosuid, nodev: nothing the sandbox writes is set-user-ID or a device
	 * on the host's side.  noinit_itable: the image is sparse, its inode
	 * tables already read as zeros. */
	return loop_mount(image, target, "ext4", MS_NOSUID | MS_NODEV, "noinit_itable", e);
}

int disk_usage(const char *mount, uint64_t *used, uint64_t *avail, struct err *e)
{
	struct statvfs sv;
	if (statvfs(mount, &sv) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "statvfs '%s'", mount);
	*used = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

int disk_image_umount(const char *target, struct err *e)
{
	/* Detached if busy (an upload in flight): the loop device goes with
	 * the last reference. */
	if (umount2(target, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return err_sys(e, ERR_INTERNAL, errno, "unmounting '%s'", target);
	return 0;
}

/* ---- the disk store ---- */

int disk_reflinks(const char *dir)
{
	_cleanup_fd_ int a = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	_cleanup_fd_ int b = a >= 0 ? open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) : -1;
	static const char block[4096];
	return b >= 0 && pwrite(a, block, sizeof(block), 0) == (ssize_t)sizeof(block) &&
	       ioctl(b, FICLONE, a) == 0;
}

int disk_store_make(const char *image, uint64_t bytes, struct err *e)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s.new", image);
	unlink(tmp); /* a crash's leftover */
	/* -K: nothing to discard in a new sparse file.  -l size=64m, the
	 * smallest log mkfs.xfs allows: mkfs writes the whole log, which is
	 * all the host pays for an empty store (the default grows it with
	 * the size, to 127 MiB at 252 GiB); the store holds few, large files,
	 * so a bigger log buys nothing. */
	char *argv[] = {"mkfs.xfs",  "-q", "-f",       "-K",	    "-m",
			"reflink=1", "-l", "size=64m", (char *)tmp, NULL};
	if (sparse_create(tmp, bytes, e) < 0)
		return err_code(e);
	if (run_mkfs(argv, tmp, e) < 0) {
		unlink(tmp);
		return err_wrap(e, "making the disk store (mkfs.xfs: package xfsprogs)");
	}
	_cleanup_fd_ int fd = open(tmp, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0 || rename(tmp, image) < 0) {
		int saved = errno;
		unlink(tmp);
		return err_sys(e, ERR_INTERNAL, saved, "making '%s'", image);
	}
	return 0;
}

int disk_store_mount(const char *image, const char *target, struct err *e)
{
	/* discard: space freed in the store (a deleted image, checkpoint or
	 * fork) is punched out of the sparse image on the host through the
	 * loop device. */
	if (loop_mount(image, target, "xfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "discard", e) < 0)
		return err_code(e);
	if (chmod(target, 0700) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "chmod '%s'", target);
	return 0;
}
