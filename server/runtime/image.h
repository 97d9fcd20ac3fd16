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
#ifndef DESKBOX_SERVER_IMAGE_H
#define DESKBOX_SERVER_IMAGE_H

#include <stddef.h>

#include "common/error.h"

/* The uid/gid the sandbox's processes run as, named "user" in the image. */
#define IMAGE_USER_UID 1000u
#define IMAGE_USER_GID 1000u

/* Builds (or refreshes, idempotently) the default image's lower layer under
 * <state_dir>/images/default/base and writes its path to `lower`. */
int image_prepare_default(const char *state_dir, char *lower, size_t lower_size, struct err *e);

/* Mounts overlay(lower, upper, work) on `target`, creating upper/work/target
 * if missing. */
int image_mount_rootfs(const char *lower, const char *upper, const char *work, const char *target,
		       struct err *e);

/* Unmounts `target` (detaching if busy).  Not mounted is not an error. */
int image_umount_rootfs(const char *target, struct err *e);

#endif
