/* sandbox_checkpoint: named checkpoints of a sandbox's filesystem,
 * restore, and forks.
 *
 * What a checkpoint is: a clone of the sandbox's disk image (disk.img, the
 * ext4 that holds the overlay's upper layer: everything the sandbox ever
 * wrote) in checkpoints/<name>/disk.img beside it, with checkpoint.json.
 * Taken consistently: the sandbox's processes are frozen (cgroup freezer)
 * and its ext4 frozen (FIFREEZE: flushed, journal clean) for the clone
 * only, then both thaw and the desktop goes on; it never restarts.
 *
 * Why a clone of the image and not overlay layers: turning the upper dir
 * into a read-only layer and starting a fresh upper costs nothing per
 * byte, but an overlay cannot change its layers while mounted, so every
 * checkpoint of a running sandbox would restart its desktop.  Without a
 * restart the snapshot has to be of the block image, and FICLONE (a
 * reflink) makes it in constant time and room, sharing the image's blocks
 * copy-on-write.  The images live where FICLONE works: the state dir when
 * its filesystem has reflinks (XFS, btrfs), else deskboxd's own XFS disk
 * store (sandbox_store.c; the reference host is ext4 without
 * device-mapper), so the cost is the same at 1 MiB and at 1 GiB
 * (docs/lifecycle.md has the figures).  The filesystem counts the shared
 * blocks: no reference counts of ours, each checkpoint and fork is a file
 * of its own, deleting a sandbox deletes its checkpoints, and a delete
 * frees the blocks nothing else shares.  Only a sandbox whose image sits
 * on a filesystem without reflinks (--disk-store direct on ext4, or one
 * made before the store) falls back to a sparse copy (SEEK_DATA/SEEK_HOLE
 * + copy_file_range), whose cost grows with the data.  Checkpoints count
 * against the store (or the state dir), not the sandbox's disk_mb.
 *
 * Restore stops the container, puts a clone of the checkpoint's image in
 * place of disk.img and starts the desktop again (if it ran).  A fork is a
 * new sandbox, with its parent's spec, whose disk.img is a clone of a
 * checkpoint (or of the parent now), its files' owners moved from the
 * parent's uid range into its own. */
#include "common/text.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "server/files/files.h"

#define CHECKPOINTS_MAX	    32
#define CHECKPOINT_NAME_MAX 64
#define NEW_PREFIX	    ".new-"
#define CHECKPOINT_QUIESCE_MS 10000 /* a VM guest's sync */

int sandbox_checkpoint_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > CHECKPOINT_NAME_MAX || name[0] == '.' || name[0] == '-')
		return 0;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
	       n;
}

/* Copies [*from, end) of `in` to the same offsets of `out`: in the kernel
 * (copy_file_range), or through a buffer between filesystems that cannot
 * (a fork into the store of a sandbox made before it). */
static int copy_range(int in, int out, off_t from, off_t end, struct err *e)
{
	loff_t a = from, b = from;
	while (a < end) {
		ssize_t n = copy_file_range(in, &a, out, &b, (size_t)(end - a), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EXDEV || errno == EOPNOTSUPP || errno == EINVAL))
			break;
		if (n <= 0)
			return err_sys(e, n < 0 && errno == ENOSPC ? ERR_NO_SPACE : ERR_INTERNAL,
				       n < 0 ? errno : EIO, "copying a disk image");
	}
	static char buf[1 << 20];
	static pthread_mutex_t buf_mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&buf_mu);
	int r = 0;
	while (r == 0 && a < end) {
		size_t want = end - a < (off_t)sizeof(buf) ? (size_t)(end - a) : sizeof(buf);
		ssize_t n = pread(in, buf, want, a);
		ssize_t w = n > 0 ? pwrite(out, buf, (size_t)n, a) : n;
		if (n <= 0 || w != n)
			r = err_sys(e, errno == ENOSPC ? ERR_NO_SPACE : ERR_INTERNAL,
				    n == 0 ? EIO : errno, "copying a disk image");
		a += n > 0 ? n : 0;
	}
	pthread_mutex_unlock(&buf_mu);
	return r;
}

/* Copies the image `src` to the new file `dst`: a reflink when the
 * filesystem has them, else only its data extents (holes stay holes). */
static int copy_image(const char *src, const char *dst, struct err *e)
{
	_cleanup_fd_ int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", src);
	_cleanup_fd_ int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0)
		return err_sys(e, errno == ENOSPC ? ERR_NO_SPACE : ERR_INTERNAL, errno,
			       "creating '%s'", dst);
	if (ioctl(out, FICLONE, in) == 0)
		return 0;
	if (errno == ENOSPC)
		return err_sys(e, ERR_NO_SPACE, errno, "cloning '%s'", src);
	struct stat st;
	if (fstat(in, &st) < 0 || ftruncate(out, st.st_size) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "sizing '%s'", dst);
	for (off_t off = 0; off < st.st_size;) {
		off_t data = lseek(in, off, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* only a hole is left */
		off_t hole = data < 0 ? -1 : lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return err_sys(e, ERR_INTERNAL, errno, "reading the extents of '%s'", src);
		if (copy_range(in, out, data, hole, e) < 0)
			return err_wrap(e, "'%s'", src);
		off = hole;
	}
	return 0;
}

/* Copies sb's disk image to `dst` consistently (see the top); under sb's
 * exclusive lock.  A running sandbox is frozen for the copy only. */
static int capture(struct sandbox *sb, const char *dst, struct err *e)
{
	char img[PATH_MAX], disk[PATH_MAX];
	sandbox_disk_path(sb, img, sizeof(img), "disk.img");
	sandbox_path(sb, disk, sizeof(disk), "disk");
	if (sandbox_store_room(sb, e) < 0)
		return err_code(e);
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status st = sb->status;
	int mounted = sb->disk_mounted;
	pthread_mutex_unlock(&sb->mu);
	int froze = st == SANDBOX_RUNNING;
	/* What the sandbox caches itself (a VM's guest) reaches the disk. */
	if (froze && sb->be->quiesce(sb->owner->rt, sb->container_id, CHECKPOINT_QUIESCE_MS, e) < 0)
		return err_wrap(e, "writing back the sandbox's files for the checkpoint");
	if (froze && sandbox_freeze(sb, e) < 0)
		return err_wrap(e, "freezing the sandbox for the checkpoint");
	_cleanup_fd_ int dfd = mounted ? open(disk, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	int fsfrozen = dfd >= 0 && ioctl(dfd, FIFREEZE, 0) == 0;
	if (dfd >= 0 && !fsfrozen)
		syncfs(dfd); /* already frozen by someone else: at least flushed */
	int r = copy_image(img, dst, e);
	if (fsfrozen && ioctl(dfd, FITHAW, 0) < 0)
		log_msg(LOG_LEVEL_ERROR, "sandbox %s: thawing its disk: %s", sb->id,
			strerror(errno));
	struct err e2 = ERR_INIT;
	if (froze && sandbox_thaw(sb, &e2) < 0)
		log_msg(LOG_LEVEL_ERROR, "sandbox %s: %s", sb->id, e2.msg);
	return r;
}

/* ERR_* unless sb can be checkpointed now (its lock held). */
static int check_usable(struct sandbox *sb, struct err *e)
{
	if (sb->be->feature(RUNTIME_FEATURE_CHECKPOINT, e) < 0)
		return err_code(e);
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status st = sb->status;
	pthread_mutex_unlock(&sb->mu);
	if (st == SANDBOX_DELETING)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", sb->id);
	if (st == SANDBOX_CREATING)
		return err_set(e, ERR_CONFLICT, EBUSY, "sandbox '%s' is being created", sb->id);
	if (!sb->spec.disk_mb)
		return err_set(e, ERR_CONFLICT, ENOTSUP,
			       "sandbox '%s' has no disk of its own (disk_mb 0): no checkpoints",
			       sb->id);
	return 0;
}

static void checkpoint_path(const struct sandbox *sb, const char *name, const char *file, char *buf,
			    size_t size)
{
	char dir[PATH_MAX];
	sandbox_disk_path(sb, dir, sizeof(dir), "checkpoints");
	snprintf(buf, size, "%s/%s%s%s", dir, name, file ? "/" : "", file ? file : "");
}

/* checkpoint.json of `name`, or NULL. */
static cJSON *checkpoint_read(const struct sandbox *sb, const char *name)
{
	char path[PATH_MAX];
	checkpoint_path(sb, name, "checkpoint.json", path, sizeof(path));
	_cleanup_free_ char *text = NULL;
	struct err e = ERR_INIT;
	if (fs_read_file(path, 1 << 16, &text, NULL, &e) < 0)
		return NULL;
	return cJSON_Parse(text);
}

/* How many checkpoints sb has (names only, no half-made ones). */
static unsigned count_checkpoints(const struct sandbox *sb)
{
	char dir[PATH_MAX];
	sandbox_disk_path(sb, dir, sizeof(dir), "checkpoints");
	DIR *d = opendir(dir);
	unsigned n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* Writes checkpoint `name` of sb (exclusive lock held) and describes it. */
static int checkpoint_make(struct sandbox *sb, const char *name, cJSON **out, struct err *e)
{
	char tmp[PATH_MAX], final[PATH_MAX], img[PATH_MAX], meta[PATH_MAX], tmpname[96];
	snprintf(tmpname, sizeof(tmpname), NEW_PREFIX "%s", name);
	checkpoint_path(sb, tmpname, NULL, tmp, sizeof(tmp));
	checkpoint_path(sb, name, NULL, final, sizeof(final));
	checkpoint_path(sb, tmpname, "disk.img", img, sizeof(img));
	checkpoint_path(sb, tmpname, "checkpoint.json", meta, sizeof(meta));
	if (access(final, F_OK) == 0)
		return err_set(e, ERR_CONFLICT, EEXIST, "checkpoint '%s' exists", name);
	if (count_checkpoints(sb) >= CHECKPOINTS_MAX)
		return err_set(e, ERR_LIMIT, EMLINK, "sandbox '%s' has %d checkpoints, the most",
			       sb->id, CHECKPOINTS_MAX);
	struct err e2 = ERR_INIT;
	fs_remove_tree(tmp, &e2); /* a crash's leftover */
	if (fs_mkdir_p(tmp, 0700, e) < 0)
		return err_code(e);
	uint64_t t0 = clock_mono_ns();
	long long now = clock_wall_ms();
	int r = capture(sb, img, e);
	double frozen_ms = (double)(clock_mono_ns() - t0) / 1e6;
	/* Durable before it is listed; the sandbox runs again meanwhile. */
	_cleanup_fd_ int fd = r == 0 ? open(img, O_RDONLY | O_CLOEXEC) : -1;
	struct stat st;
	if (r == 0 && (fd < 0 || fdatasync(fd) < 0 || fstat(fd, &st) < 0))
		r = err_sys(e, ERR_INTERNAL, errno, "writing '%s'", img);
	cJSON *j = cJSON_CreateObject();
	char when[CLOCK_RFC3339_MAX];
	clock_rfc3339(now, when, sizeof(when));
	cJSON_AddStringToObject(j, "name", name);
	cJSON_AddStringToObject(j, "created_at", when);
	cJSON_AddNumberToObject(j, "size_bytes", r == 0 ? (double)st.st_blocks * 512 : 0);
	_cleanup_free_ char *text = cJSON_PrintUnformatted(j);
	if (r == 0 && (!text || fs_write_atomic(meta, text, strlen(text), 0600, e) < 0))
		r = text ? err_code(e) : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r == 0 && rename(tmp, final) < 0)
		r = err_sys(e, ERR_INTERNAL, errno, "renaming '%s'", tmp);
	if (r < 0) {
		cJSON_Delete(j);
		fs_remove_tree(tmp, &e2);
		return err_wrap(e, "checkpoint '%s'", name);
	}
	cJSON_AddNumberToObject(j, "frozen_ms", frozen_ms);
	*out = j;
	return 0;
}

int sandbox_checkpoint_create(struct sandboxes *s, const char *id, const char *name, cJSON **out,
			      struct err *e)
{
	if (!sandbox_checkpoint_name_ok(name))
		return err_set(e, ERR_INVALID, EINVAL,
			       "checkpoint name '%.*s' must be 1-64 of A-Z a-z 0-9 . _ - and not "
			       "start with '.' or '-'",
			       UTF8_CUT(name, 80));
	struct sandbox *sb;
	if (sandbox_get(s, id, &sb, e) < 0)
		return err_code(e);
	pthread_rwlock_wrlock(&sb->op);
	int r = check_usable(sb, e);
	if (r == 0) {
		char dir[PATH_MAX];
		sandbox_disk_path(sb, dir, sizeof(dir), "checkpoints");
		r = fs_mkdir_p(dir, 0700, e);
	}
	if (r == 0)
		r = checkpoint_make(sb, name, out, e);
	pthread_rwlock_unlock(&sb->op);
	sandbox_put(sb);
	return r;
}

/* The checkpoint `name` of sb must exist (lock held). */
static int need_checkpoint(struct sandbox *sb, const char *name, struct err *e)
{
	char path[PATH_MAX];
	if (!sandbox_checkpoint_name_ok(name))
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no checkpoint '%.*s'",
			       UTF8_CUT(name, 80));
	checkpoint_path(sb, name, "disk.img", path, sizeof(path));
	if (access(path, F_OK) < 0)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "sandbox '%s' has no checkpoint '%s'",
			       sb->id, name);
	return 0;
}

int sandbox_checkpoints_list(struct sandboxes *s, const char *id, cJSON **out, struct err *e)
{
	struct sandbox *sb;
	if (sandbox_get(s, id, &sb, e) < 0)
		return err_code(e);
	pthread_rwlock_rdlock(&sb->op);
	cJSON *arr = cJSON_CreateArray();
	char dir[PATH_MAX];
	sandbox_disk_path(sb, dir, sizeof(dir), "checkpoints");
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		cJSON *j = de->d_name[0] != '.' ? checkpoint_read(sb, de->d_name) : NULL;
		if (j)
			cJSON_AddItemToArray(arr, j);
	}
	if (d)
		closedir(d);
	pthread_rwlock_unlock(&sb->op);
	sandbox_put(sb);
	*out = arr;
	return 0;
}

int sandbox_checkpoint_delete(struct sandboxes *s, const char *id, const char *name, struct err *e)
{
	struct sandbox *sb;
	if (sandbox_get(s, id, &sb, e) < 0)
		return err_code(e);
	pthread_rwlock_wrlock(&sb->op);
	int r = need_checkpoint(sb, name, e);
	char path[PATH_MAX], trash[PATH_MAX];
	checkpoint_path(sb, name, NULL, path, sizeof(path));
	char tmpname[96];
	snprintf(tmpname, sizeof(tmpname), NEW_PREFIX "%s", name);
	checkpoint_path(sb, tmpname, NULL, trash, sizeof(trash));
	/* Unlisted in one step; then removed. */
	if (r == 0 && rename(path, trash) < 0)
		r = err_sys(e, ERR_INTERNAL, errno, "renaming '%s'", path);
	if (r == 0)
		r = fs_remove_tree(trash, e);
	if (r == 0 && sb->disk_pooled)
		sandbox_store_trim(sb->owner);
	pthread_rwlock_unlock(&sb->op);
	sandbox_put(sb);
	return r;
}

/* Puts a copy of checkpoint `name` in place of sb's disk image (stopped,
 * unmounted: lock held). */
static int swap_image(struct sandbox *sb, const char *name, struct err *e)
{
	char src[PATH_MAX], img[PATH_MAX], tmp[PATH_MAX];
	checkpoint_path(sb, name, "disk.img", src, sizeof(src));
	sandbox_disk_path(sb, img, sizeof(img), "disk.img");
	sandbox_disk_path(sb, tmp, sizeof(tmp), "disk.img.restore");
	int r = copy_image(src, tmp, e);
	if (r == 0 && rename(tmp, img) < 0)
		r = err_sys(e, ERR_INTERNAL, errno, "renaming '%s'", tmp);
	if (r < 0)
		unlink(tmp);
	return r;
}

int sandbox_checkpoint_restore(struct sandboxes *s, const char *id, const char *name,
			       struct sandbox **out, struct err *e)
{
	struct sandbox *sb;
	enum sandbox_status was;
	if (sandbox_get_exclusive(s, id, &sb, &was, e) < 0)
		return err_code(e);
	int r = check_usable(sb, e);
	r = r ?: need_checkpoint(sb, name, e);
	r = r ?: sandbox_store_room(sb, e); /* before the stop: a full store changes nothing */
	if (r == 0 && was != SANDBOX_STOPPED)
		r = sandbox_stop_locked(sb, e);
	if (r == 0) {
		sandbox_teardown_ex(sb, 1); /* the overlay and the disk unmounted */
		r = swap_image(sb, name, e);
	}
	/* A running (or paused) sandbox comes back running: its desktop
	 * starts over the restored files. */
	if (r == 0 && (was == SANDBOX_RUNNING || was == SANDBOX_PAUSED))
		r = sandbox_start_locked(sb, e);
	if (sandbox_put_exclusive(sb, r, out) < 0)
		return err_wrap(e, "restoring checkpoint '%s'", name);
	return 0;
}

struct fork_seed {
	struct sandbox *parent;
	const char *checkpoint; /* NULL: the parent as it is now */
};

/* The fork's disk.img: the checkpoint's (or the parent's now), mounted,
 * its files moved into the fork's uid range. */
static int fork_fill(struct sandbox *sb, void *cls, struct err *e)
{
	struct fork_seed *f = cls;
	struct sandbox *p = f->parent;
	char img[PATH_MAX], src[PATH_MAX];
	sandbox_disk_path(sb, img, sizeof(img), "disk.img");
	if (sandbox_store_room(sb, e) < 0 || sandbox_disk_home_make(sb, e) < 0)
		return err_code(e);
	pthread_rwlock_wrlock(&p->op);
	int r = check_usable(p, e);
	if (r == 0 && f->checkpoint) {
		r = need_checkpoint(p, f->checkpoint, e);
		checkpoint_path(p, f->checkpoint, "disk.img", src, sizeof(src));
		r = r ?: copy_image(src, img, e);
	} else if (r == 0) {
		r = capture(p, img, e);
	}
	uint32_t from = p->host_base;
	pthread_rwlock_unlock(&p->op);
	if (r < 0)
		return r;
	char upper[PATH_MAX], work[PATH_MAX];
	pthread_mutex_lock(&sb->mu);
	r = sandbox_disk_mount(sb, upper, work, sizeof(upper), e);
	pthread_mutex_unlock(&sb->mu);
	unsigned n = 0;
	if (r == 0 && from != sb->host_base &&
	    files_remap_owners(upper, from, sb->host_base, &n, e) < 0)
		return err_wrap(e, "moving the fork's files into its uid range");
	/* And what its root changed in /usr (the default image's). */
	sandbox_usr_layers(sb, upper, work, sizeof(upper));
	if (r == 0 && from != sb->host_base && access(upper, F_OK) == 0 &&
	    files_remap_owners(upper, from, sb->host_base, &n, e) < 0)
		return err_wrap(e, "moving the fork's /usr into its uid range");
	return r;
}

/* A copy of `from` whose strings the copy owns. */
static int spec_copy(const struct sandbox_spec *from, struct sandbox_spec *to, struct err *e)
{
	*to = *from;
	memset(to->env, 0, sizeof(to->env));
	/* A name is one sandbox's: the fork gets its own or none. */
	to->name[0] = '\0';
	to->metadata = NULL;
	/* The network policy owns its JSON and rules: copied too. */
	if (network_policy_copy(&to->network, &from->network, e) < 0)
		return err_code(e);
	if (from->metadata && !(to->metadata = cJSON_Duplicate(from->metadata, 1))) {
		sandbox_spec_release(to);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < SANDBOX_MAX_ENV && from->env[i]; i++) {
		to->env[i] = strdup(from->env[i]);
		if (!to->env[i]) {
			sandbox_spec_release(to);
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		}
	}
	return 0;
}

int sandbox_fork(struct sandboxes *s, const char *id, const char *checkpoint, const char *name,
		 struct sandbox **out, struct err *e)
{
	if (checkpoint && !sandbox_checkpoint_name_ok(checkpoint))
		return err_set(e, ERR_INVALID, EINVAL, "bad checkpoint name '%.*s'",
			       UTF8_CUT(checkpoint, 80));
	if (name && !sandbox_name_ok(name))
		return err_set(e, ERR_INVALID, EINVAL, "field 'name': bad sandbox name '%.*s'",
			       UTF8_CUT(name, 80));
	struct sandbox *p;
	if (sandbox_get(s, id, &p, e) < 0)
		return err_code(e);
	struct sandbox_spec spec;
	pthread_rwlock_rdlock(&p->op);
	int r = check_usable(p, e);
	r = r ?: spec_copy(&p->spec, &spec, e);
	pthread_rwlock_unlock(&p->op);
	if (r == 0 && name)
		snprintf(spec.name, sizeof(spec.name), "%s", name);
	if (r == 0) {
		struct fork_seed f = {p, checkpoint};
		struct sandbox_seed seed = {fork_fill, &f};
		r = sandbox_create_seeded(s, &spec, &seed, out, e);
	}
	sandbox_put(p);
	return r < 0 ? err_wrap(e, "forking sandbox '%s'", id) : 0;
}
