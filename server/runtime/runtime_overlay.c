/* runtime_overlay: a sandbox's overlays over lower layers seen through an
 * idmapped mount, so that its root owns its system directories.
 *
 * The lower layers (the default image's base and the host's /usr, or a
 * stored image) are owned by host root, which a sandbox's user namespace
 * does not map: inside, every file of them is nobody's, and even the
 * sandbox's root may not write to /usr, /etc, /var or /opt.  An idmapped
 * bind mount of a layer (mount_setattr MOUNT_ATTR_IDMAP, with a user
 * namespace mapping host 0..65535 to the sandbox's range) shows host uid N
 * as host_base + N, i.e. as the sandbox's uid N; overlayfs (5.19 and later)
 * takes such a mount as a lower layer, and what the sandbox's root changes
 * is copied up into the sandbox's own upper layer (on its disk), owned by
 * its range.  The layer on disk is never changed and other sandboxes keep
 * seeing it as it is.
 *
 * The idmapped mounts exist only while the overlay is made: overlayfs keeps
 * private clones of its layers, so they are unmounted right after.  Their
 * paths end in the layer's own name (<stage>/<i>/<name>), so the overlay's
 * lowerdir= still names base-<hash> for image_prepare_default's pruning. */
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"

/* Attaches an idmapped, read-only bind of `src` (with what is mounted below
 * it) on `dst` (made if missing), mapping through user namespace `ns`. */
static int idmap_bind(const char *src, const char *dst, int ns, struct err *e)
{
	if (fs_mkdir_p(dst, 0700, e) < 0)
		return err_code(e);
	_cleanup_fd_ int t = (int)syscall(SYS_open_tree, AT_FDCWD, src,
					  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (t < 0)
		return err_sys(e, ERR_INTERNAL, errno, "cloning the mount of '%s'", src);
	struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY,
			       .userns_fd = (uint64_t)ns};
	if (syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
		return err_sys(e, ERR_UNAVAILABLE, errno,
			       "an idmapped mount of '%s' (the kernel or its filesystem cannot "
			       "map ids)",
			       src);
	if (syscall(SYS_move_mount, t, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "attaching an idmapped '%s'", src);
	return 0;
}

/* The user namespace of the mapping, as an fd (the kept bind goes at once). */
static int idmap_userns(const char *stage, uint32_t base, int *fd, struct err *e)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/userns", stage);
	if (runtime_userns_make(path, base, e) < 0)
		return err_wrap(e, "the id mapping of an overlay");
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	int saved = errno;
	runtime_userns_drop(path);
	if (*fd < 0)
		return err_sys(e, ERR_INTERNAL, saved, "opening '%s'", path);
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s && s[1] ? s + 1 : p;
}

/* Overlay options for `lowers` (their staged paths in `staged` when
 * idmapped); ERR_INVALID for a path overlayfs cannot take. */
static int overlay_opts(const struct image_overlay *o, char staged[][PATH_MAX], size_t n,
			char *opts, size_t size, struct err *e)
{
	size_t len = (size_t)snprintf(opts, size, "lowerdir=");
	for (size_t i = 0; i < n; i++) {
		const char *l = o->idmap_base ? staged[i] : o->lowers[i];
		if (strpbrk(l, ",:\\"))
			return err_set(e, ERR_INVALID, EINVAL, "unusable overlay path '%s'", l);
		len += (size_t)snprintf(opts + len, len < size ? size - len : 0, "%s%s",
					i ? ":" : "", l);
	}
	const char *dirs[] = {o->upper, o->work};
	for (size_t i = 0; i < 2; i++)
		if (strpbrk(dirs[i], ",:\\"))
			return err_set(e, ERR_INVALID, EINVAL, "unusable overlay path '%s'",
				       dirs[i]);
	/* index=off: see image_mount_rootfs. */
	len += (size_t)snprintf(opts + len, len < size ? size - len : 0,
				",upperdir=%s,workdir=%s,index=off", o->upper, o->work);
	if (len >= size)
		return err_set(e, ERR_INVALID, ENAMETOOLONG, "overlay options too long");
	return 0;
}

int image_mount_overlay(const struct image_overlay *o, struct err *e)
{
	size_t n = 0;
	while (n < IMAGE_LOWERS_MAX && o->lowers[n])
		n++;
	if (n == 0 || o->lowers[n] || (o->idmap_base && !o->stage))
		return err_set(e, ERR_INVALID, EINVAL, "bad overlay layers for '%s'", o->target);
	const char *dirs[] = {o->upper, o->work, o->target};
	for (size_t i = 0; i < 3; i++)
		if (fs_mkdir_p(dirs[i], 0755, e) < 0)
			return err_code(e);
	/* The upper dir is the overlay's top directory (/ or /usr inside):
	 * the sandbox's root's, as the lower layers' are through the map. */
	struct stat st;
	if (o->idmap_base && stat(o->upper, &st) == 0 && st.st_uid == 0 &&
	    chown(o->upper, o->idmap_base, o->idmap_base) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "chown '%s'", o->upper);
	char staged[IMAGE_LOWERS_MAX][PATH_MAX];
	_cleanup_fd_ int ns = -1;
	size_t attached = 0;
	int r = 0;
	if (o->idmap_base) {
		r = fs_mkdir_p(o->stage, 0700, e) ?: idmap_userns(o->stage, o->idmap_base, &ns, e);
		for (size_t i = 0; r == 0 && i < n; i++) {
			snprintf(staged[i], PATH_MAX, "%s/%zu/%s", o->stage, i,
				 base_name(o->lowers[i]));
			r = idmap_bind(o->lowers[i], staged[i], ns, e);
			attached += r == 0;
		}
	}
	char opts[(IMAGE_LOWERS_MAX + 2) * PATH_MAX + 64];
	r = r ?: overlay_opts(o, staged, n, opts, sizeof(opts), e);
	/* nosuid, nodev: see image_mount_rootfs. */
	if (r == 0 && mount("overlay", o->target, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
		r = err_sys(e, ERR_INTERNAL, errno, "mounting overlay on '%s'", o->target);
	/* The overlay holds clones of its layers: the staged mounts can go. */
	for (size_t i = 0; i < attached; i++) {
		umount2(staged[i], MNT_DETACH);
		rmdir(staged[i]);
		char *slash = strrchr(staged[i], '/');
		*slash = '\0';
		rmdir(staged[i]);
	}
	return r;
}

int image_prepare_usr_extra(const char *state_dir, char *out, size_t size, struct err *e)
{
	char dir[PATH_MAX], bin[PATH_MAX], link[PATH_MAX];
	/* <state>/images/default/extra/usr: the tree above it is a stored image's top
	 * layer (usr/bin/sudo), the usr/ below it the default image's. */
	snprintf(dir, sizeof(dir), "%s/images/default/extra/usr", state_dir);
	snprintf(bin, sizeof(bin), "%s/bin", dir);
	snprintf(link, sizeof(link), "%s/sudo", bin);
	if (fs_mkdir_p(bin, 0755, e) < 0)
		return err_wrap(e, "preparing the default image's /usr additions");
	/* Made once and never changed (an overlay may use it): a link that is
	 * there already is left alone. */
	struct stat st;
	if (lstat(link, &st) < 0 && symlink(IMAGE_SUDO_TARGET, link) < 0 && errno != EEXIST)
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", link);
	if ((size_t)snprintf(out, size, "%s", dir) >= size)
		return err_set(e, ERR_INTERNAL, ENAMETOOLONG, "path '%s' too long", dir);
	return 0;
}
