/* sandbox_userns: each sandbox's own range of host uids and gids.
 *
 * With user namespaces (the default), sandbox k of the registry gets the
 * host ids [base + k * 65536, + 65536) (--userns-base): its container's
 * root is host id base + k * 65536, its user that + IMAGE_USER_UID.  Nothing
 * else on the host uses those ids, so a sandbox shares no per-uid kernel
 * limit (inotify instances, RLIMIT_NPROC, ...), no signal or ptrace
 * permission and no file ownership with the host or another sandbox.  The
 * range is kept in sandbox.json ("userns_base"), so the files keep their
 * owners across stop, start and restarts of deskboxd; it is free again once
 * the sandbox is deleted.
 *
 * Without them (--allow-shared-uid on a kernel that refuses user
 * namespaces) every sandbox runs as host uid IMAGE_USER_UID, as before. */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"
#include "server/files/files.h"
#include "server/runtime/runtime.h"

static int overlaps(uint32_t a, uint32_t b)
{
	return (uint64_t)a < (uint64_t)b + RUNTIME_USERNS_SIZE &&
	       (uint64_t)b < (uint64_t)a + RUNTIME_USERNS_SIZE;
}

/* Whether [base, +65536) is free; s->mu held. */
static int range_free(const struct sandboxes *s, uint32_t base)
{
	for (size_t i = 0; i < s->n_ranges; i++)
		if (overlaps(s->ranges[i], base))
			return 0;
	return 1;
}

/* Records `base` as used; s->mu held. */
static int range_add(struct sandboxes *s, uint32_t base)
{
	if (s->n_ranges == s->cap_ranges) {
		size_t cap = s->cap_ranges ? 2 * s->cap_ranges : 64;
		uint32_t *r = realloc(s->ranges, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		s->ranges = r;
		s->cap_ranges = cap;
	}
	s->ranges[s->n_ranges++] = base;
	return 0;
}

int sandbox_userns_claim(struct sandboxes *s, uint32_t *base, struct err *e)
{
	*base = 0;
	if (!s->cfg.userns_base)
		return 0;
	pthread_mutex_lock(&s->mu);
	int r = -ENOSPC;
	for (uint64_t b = s->cfg.userns_base; b + RUNTIME_USERNS_SIZE - 1 < UINT32_MAX;
	     b += RUNTIME_USERNS_SIZE) {
		if (!range_free(s, (uint32_t)b))
			continue;
		r = range_add(s, (uint32_t)b);
		if (r == 0)
			*base = (uint32_t)b;
		break;
	}
	pthread_mutex_unlock(&s->mu);
	if (r == -ENOMEM)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r < 0)
		return err_set(e, ERR_LIMIT, ENOSPC, "no free uid range above %u",
			       s->cfg.userns_base);
	return 0;
}

int sandbox_userns_take(struct sandboxes *s, uint32_t base)
{
	if (base == 0 || base > UINT32_MAX - RUNTIME_USERNS_SIZE)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	int r = range_free(s, base) ? range_add(s, base) : -EEXIST;
	pthread_mutex_unlock(&s->mu);
	return r;
}

void sandbox_userns_release(struct sandboxes *s, uint32_t base)
{
	if (!base)
		return;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n_ranges; i++) {
		if (s->ranges[i] == base) {
			s->ranges[i] = s->ranges[--s->n_ranges];
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
}

int sandbox_userns_migrate(struct sandbox *sb, struct err *e)
{
	struct sandboxes *s = sb->owner;
	if (sb->host_base || !s->cfg.userns_base)
		return 0;
	uint32_t base;
	if (sandbox_userns_claim(s, &base, e) < 0)
		return err_wrap(e, "sandbox %s", sb->id);
	/* Its files belong to host uid IMAGE_USER_UID (which may be a real
	 * user of this host): they move into the new range once. */
	char upper[PATH_MAX];
	sandbox_path(sb, upper, sizeof(upper), "upper");
	unsigned n = 0;
	if (files_shift_owners(upper, base, &n, e) < 0) {
		sandbox_userns_release(s, base);
		return err_wrap(e, "moving the files of sandbox %s into its uid range", sb->id);
	}
	/* The old desktop's X socket directory and lock were its user's; the
	 * init (root now) cannot replace them in the sticky /tmp, and Xvfb
	 * refuses a socket directory root does not own.  They only ever held
	 * a run's sockets: the init makes them anew. */
	char x11[PATH_MAX];
	sandbox_path(sb, x11, sizeof(x11), "upper/tmp/.X11-unix");
	if (fs_remove_tree(x11, e) < 0) {
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e->msg);
		err_clear(e);
	}
	sandbox_path(sb, x11, sizeof(x11), "upper/tmp/.X0-lock");
	unlink(x11);
	sb->host_base = base;
	log_msg(LOG_LEVEL_INFO, "sandbox %s: uid range %u..%u, %u file owner(s) moved into it",
		sb->id, base, base + RUNTIME_USERNS_SIZE - 1, n);
	return 0;
}

int sandbox_userns_dirs(struct sandbox *sb, struct err *e)
{
	char run[PATH_MAX];
	sandbox_path(sb, run, sizeof(run), "run");
	uint32_t root = sb->host_base, gid_root = sb->host_base;
	if (!sb->host_base) {
		/* No user namespace: the init runs as the user and owns run/. */
		if (chown(run, IMAGE_USER_UID, IMAGE_USER_GID) < 0)
			return err_sys(e, ERR_INTERNAL, errno, "chown '%s'", run);
		return 0;
	}
	/* The container's root must reach its rootfs and run/ through
	 * <dir> (crun mounts them from inside the user namespace): group
	 * search for its gid, nothing for anyone else. */
	if (chown(sb->dir, 0, gid_root) < 0 || chmod(sb->dir, 0710) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "giving '%s' to the sandbox", sb->dir);
	/* SECURITY: run/ holds the exec agent's and the VNC server's sockets:
	 * the container's root (the init) only, never its user. */
	if (chown(run, root, gid_root) < 0 || chmod(run, 0700) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "giving '%s' to the sandbox", run);
	return 0;
}

int sandbox_root_check(struct sandbox *sb, struct err *e)
{
	if (sb->spec.no_root)
		return err_set(e, ERR_ROOT_DISABLED, EPERM,
			       "sandbox '%s' was created with \"root\": false: its programs run as "
			       "the user only",
			       sb->id);
	/* Without a user namespace the container's root would be the host's. */
	if (!sb->host_base)
		return err_set(e, ERR_ROOT_DISABLED, EPERM,
			       "sandbox '%s' has no user namespace of its own (deskboxd runs with "
			       "--allow-shared-uid): root inside would be the host's, so it is off",
			       sb->id);
	return 0;
}
