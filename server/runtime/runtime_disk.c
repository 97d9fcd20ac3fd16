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
 * sandbox writes, never more than the image's size. */
#include "runtime.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
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

/* Runs mkfs.ext4 on `path`; its stderr becomes the error message. */
static int run_mkfs(const char *path, struct err *e)
{
	/* -m 0: no blocks reserved for root (everything in the sandbox writes
	 * as its user, deskboxd's files API too).  Lazy inode table and
	 * journal init: a sparse file already reads as zeros, so nothing
	 * needs writing (see the figures above). */
	char *argv[] = {"mkfs.ext4",  "-q", "-F",
			"-m",	      "0",  "-T",
			"default",    "-E", "lazy_itable_init=1,lazy_journal_init=1",
			(char *)path, NULL};
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	pid_t pid;
	int rc = posix_spawnp(&pid, "mkfs.ext4", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		return err_sys(e, ERR_INTERNAL, rc, "starting mkfs.ext4 (package e2fsprogs)");
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
			return err_sys(e, ERR_INTERNAL, errno, "waiting for mkfs.ext4");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return err_set(e, ERR_INTERNAL, EIO, "mkfs.ext4 '%s' failed: %s", path, text);
	return 0;
}

int disk_image_create(const char *path, uint64_t bytes, struct err *e)
{
	_cleanup_fd_ int fd =
	    open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", path);
	if (ftruncate(fd, (off_t)bytes) < 0) {
		int saved = errno;
		unlink(path);
		return err_sys(e, ERR_INTERNAL, saved, "sizing '%s'", path);
	}
	if (run_mkfs(path, e) < 0) {
		unlink(path);
		return err_wrap(e, "creating the disk image");
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
 * Mounting that device again gives the same ext4 superblock; attaching a
 * second loop device to the file would mount the filesystem twice, which
 * corrupts it. */
static int loop_find(const char *image, char *dev, size_t size)
{
	char real[PATH_MAX];
	if (!realpath(image, real))
		return 0;
	DIR *d = opendir("/sys/block");
	if (!d)
		return 0;
	int found = 0;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		char path[PATH_MAX], back[PATH_MAX];
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(back, sizeof(back), f)) {
			back[strcspn(back, "\n")] = '\0';
			found = strcmp(back, real) == 0;
		}
		fclose(f);
		if (found)
			snprintf(dev, size, "/dev/%s", de->d_name);
	}
	closedir(d);
	return found;
}

int disk_image_mount(const char *image, const char *target, struct err *e)
{
	if (mkdir(target, 0700) < 0 && errno != EEXIST)
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", target);
	_cleanup_fd_ int img = open(image, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (img < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", image);
	char dev[64];
	/* nosuid, nodev: nothing the sandbox writes is set-user-ID or a device
	 * on the host's side.  noinit_itable: the image is sparse, its inode
	 * tables already read as zeros. */
	const unsigned long flags = MS_NOSUID | MS_NODEV;
	/* A device being released as its last mount goes (autoclear) refuses
	 * the mount: then a fresh one is attached. */
	if (loop_find(image, dev, sizeof(dev)) &&
	    mount(dev, target, "ext4", flags, "noinit_itable") == 0)
		return 0;
	_cleanup_fd_ int loop = loop_attach(img, dev, sizeof(dev), e);
	if (loop < 0)
		return loop;
	if (mount(dev, target, "ext4", flags, "noinit_itable") < 0)
		return err_sys(e, ERR_INTERNAL, errno, "mounting '%s' on '%s'", image, target);
	/* Closing `loop` now leaves the mount as the device's only user: with
	 * autoclear, unmounting detaches it. */
	return 0;
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
