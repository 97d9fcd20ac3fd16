/* sandbox_readonly: "read_only_root": true.  The container's root is
 * mounted read-only (OCI root.readonly) with the places a user and the
 * desktop write to bound back writable from the same overlay, so what is
 * written there persists as before; anything else fails with EROFS
 * inside.  The files API sees the same: a running sandbox's root is the
 * container's own, a stopped one's a view made the same way (roview/),
 * so a write outside the writable places is EROFS there too (403). */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "common/log.h"

const char *const sandbox_rw_dirs[SANDBOX_RW_DIRS + 1] = {
    "/workspace", /* the working directory */
    "/tmp",	  /* X's sockets and lock files, every program's scratch */
    "/home/user", /* the user's HOME */
    "/root",	  /* the desktop's HOME (openbox, xterm's settings) */
    NULL,
};

int sandbox_ro_mounts(const struct sandbox *sb, const char *rootfs, struct runtime_mount *mounts,
		      char src[SANDBOX_RW_DIRS][PATH_MAX])
{
	if (!sb->spec.read_only_root)
		return 0;
	int n = 0;
	for (size_t i = 0; sandbox_rw_dirs[i]; i++) {
		struct stat st;
		snprintf(src[n], PATH_MAX, "%s%s", rootfs, sandbox_rw_dirs[i]);
		/* An image without one has nothing there to write to. */
		if (lstat(src[n], &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		mounts[n] = (struct runtime_mount){src[n], sandbox_rw_dirs[i], 0};
		n++;
	}
	return n;
}

int sandbox_roview_mount(struct sandbox *sb, struct err *e)
{
	char rootfs[PATH_MAX], view[PATH_MAX];
	sandbox_path(sb, rootfs, sizeof(rootfs), "rootfs");
	sandbox_path(sb, view, sizeof(view), "roview");
	pthread_mutex_lock(&sb->mu);
	int r = 0;
	if (sb->roview_mounted)
		goto out;
	if (!sb->rootfs_mounted) {
		/* (an adopted sandbox's overlay is its container's alone) */
		r = err_set(e, ERR_CONFLICT, ESRCH, "the filesystem of sandbox '%s' is not mounted",
			    sb->id);
		goto out;
	}
	if (mkdir(view, 0700) < 0 && errno != EEXIST) {
		r = err_sys(e, ERR_INTERNAL, errno, "creating '%s'", view);
		goto out;
	}
	/* A bind mount's read-only flag is its own: the binds of the
	 * writable places on top of it stay writable. */
	if (mount(rootfs, view, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, view, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0) {
		r = err_sys(e, ERR_INTERNAL, errno, "mounting a read-only view of '%s'", rootfs);
		umount2(view, MNT_DETACH);
		goto out;
	}
	sb->roview_mounted = 1;
	for (size_t i = 0; sandbox_rw_dirs[i]; i++) {
		char src[PATH_MAX], dst[PATH_MAX];
		struct stat st;
		snprintf(src, sizeof(src), "%s%s", rootfs, sandbox_rw_dirs[i]);
		snprintf(dst, sizeof(dst), "%s%s", view, sandbox_rw_dirs[i]);
		if (lstat(src, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0) {
			r = err_sys(e, ERR_INTERNAL, errno, "binding '%s'", dst);
			umount2(view, MNT_DETACH);
			sb->roview_mounted = 0;
			goto out;
		}
	}
out:
	pthread_mutex_unlock(&sb->mu);
	return r;
}

void sandbox_roview_umount(struct sandbox *sb)
{
	char view[PATH_MAX];
	sandbox_path(sb, view, sizeof(view), "roview");
	pthread_mutex_lock(&sb->mu);
	/* MNT_DETACH takes the binds on it along. */
	if (sb->roview_mounted && umount2(view, MNT_DETACH) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: unmounting '%s': %s", sb->id, view,
			strerror(errno));
	sb->roview_mounted = 0;
	pthread_mutex_unlock(&sb->mu);
}
