/* files: staging files of resumable uploads (see files.h).
 *
 * SECURITY: the staging file is named by deskboxd (a hash of the target's
 * name, never a client string) and opened relative to the target's
 * directory fd, resolved with files_resolve(), with O_NOFOLLOW: a symlink
 * planted under that name is refused, not followed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/text.h"
#include "internal.h"

#define HASH_BLOCK (1 << 20)

struct files_partial {
	int dirfd; /* O_PATH: the target's directory */
	int fd;	   /* the staging file, O_RDWR */
	char stage[sizeof(FILES_PARTIAL_PREFIX) + 16];
	char name[NAME_MAX + 1];
	char path[PATH_MAX];
	int done;		 /* committed or discarded */
	struct files_root owner; /* its fd is not used */
};

static void stage_name(const char *name, char *out, size_t size)
{
	struct sha256_ctx c;
	uint8_t d[SHA256_DIGEST_SIZE];
	char hex[2 * SHA256_DIGEST_SIZE + 1];
	sha256_init(&c);
	sha256_update(&c, strlen(name), (const uint8_t *)name);
	sha256_digest(&c, sizeof(d), d);
	hex_encode(d, 8, hex);
	snprintf(out, size, "%s%.*s", FILES_PARTIAL_PREFIX, UTF8_CUT(hex, 16));
}

/* Removes the staging files in `dirfd` nobody touched for a day. */
static void sweep_stale(int dir)
{
	int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	time_t now = time(NULL);
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (strncmp(de->d_name, FILES_PARTIAL_PREFIX, strlen(FILES_PARTIAL_PREFIX)) == 0 &&
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && st.st_mtim.tv_sec + FILES_PARTIAL_STALE_S < now)
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

/* The target's directory and the staging name; ERR_CONFLICT when the
 * target is a directory. */
static int locate(const struct files_root *fr, const char *canon, int parents, int *dirfd,
		  char *name, char *stage, struct err *e)
{
	char parent[PATH_MAX];
	const char *n = files_path_split(canon, parent, sizeof(parent));
	if (!n)
		return err_set(e, ERR_INVALID, EISDIR, "cannot upload to '/'");
	if (parents && files_mkdir_parents(fr->fd, parent, e) < 0)
		return err_code(e);
	int fd = files_resolve(fr->fd, parent, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return files_fail(e, -fd, "opening directory", parent);
	struct stat st;
	if (fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return err_set(e, ERR_CONFLICT, EISDIR, "'%s' is a directory", canon);
	}
	snprintf(name, NAME_MAX + 1, "%s", n);
	stage_name(n, stage, sizeof(FILES_PARTIAL_PREFIX) + 16);
	*dirfd = fd;
	return 0;
}

int files_partial_open(const struct files_root *fr, const char *canon, int parents,
		       struct files_partial **out, uint64_t *size, struct err *e)
{
	AS_USER(fr);
	struct files_partial *p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	p->dirfd = p->fd = -1;
	p->owner = (struct files_root){-1, fr->uid, fr->gid};
	snprintf(p->path, sizeof(p->path), "%s", canon);
	int r = locate(fr, canon, parents, &p->dirfd, p->name, p->stage, e);
	if (r < 0)
		goto fail;
	sweep_stale(p->dirfd);
	p->fd = openat(p->dirfd, p->stage, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct stat st;
	if (p->fd < 0 || fstat(p->fd, &st) < 0) {
		r = files_fail(e, errno, "opening the partial upload of", canon);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		r = err_set(e, ERR_CONFLICT, EINVAL, "the partial upload of '%s' is not a file",
			    canon);
		goto fail;
	}
	/* One piece at a time: two writers would interleave their bytes. */
	if (flock(p->fd, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK
			? err_set(e, ERR_CONFLICT, EBUSY,
				  "another piece of the upload of '%s' is being written", canon)
			: files_fail(e, errno, "locking the partial upload of", canon);
		goto fail;
	}
	*size = (uint64_t)st.st_size;
	*out = p;
	return 0;
fail:
	files_partial_free(p);
	return r;
}

int files_partial_truncate(struct files_partial *p, uint64_t offset, struct err *e)
{
	if (ftruncate(p->fd, (off_t)offset) < 0 || lseek(p->fd, (off_t)offset, SEEK_SET) < 0)
		return files_fail(e, errno, "resuming the upload of", p->path);
	return 0;
}

int files_partial_write(struct files_partial *p, const void *data, size_t len, struct err *e)
{
	const char *c = data;
	while (len) {
		ssize_t n = write(p->fd, c, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return files_fail(e, errno, "writing", p->path);
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

int files_partial_sha256(struct files_partial *p, char hex[65], struct err *e)
{
	_cleanup_free_ char *buf = malloc(HASH_BLOCK);
	if (!buf)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	struct sha256_ctx c;
	sha256_init(&c);
	off_t off = 0;
	for (;;) {
		ssize_t n = pread(p->fd, buf, HASH_BLOCK, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return files_fail(e, errno, "reading", p->path);
		if (n == 0)
			break;
		sha256_update(&c, (size_t)n, (const uint8_t *)buf);
		off += n;
	}
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_digest(&c, sizeof(d), d);
	hex_encode(d, sizeof(d), hex);
	return 0;
}

int files_partial_commit(struct files_partial *p, int mode, struct err *e)
{
	AS_USER(&p->owner);
	struct stat st;
	mode_t m = mode >= 0 ? (mode_t)mode : 0644;
	if (mode < 0 && fstatat(p->dirfd, p->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode))
		m = st.st_mode & 0777;
	if (fchmod(p->fd, m) < 0 || fsync(p->fd) < 0)
		return files_fail(e, errno, "syncing", p->path);
	if (renameat(p->dirfd, p->stage, p->dirfd, p->name) < 0)
		return files_fail(e, errno, "renaming into", p->path);
	p->done = 1;
	_cleanup_fd_ int d = openat(p->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0 || fsync(d) < 0)
		return files_fail(e, errno, "syncing the directory of", p->path);
	return 0;
}

void files_partial_discard(struct files_partial *p)
{
	AS_USER(&p->owner);
	if (!p->done && unlinkat(p->dirfd, p->stage, 0) == 0)
		p->done = 1;
}

void files_partial_free(struct files_partial *p)
{
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->dirfd >= 0)
		close(p->dirfd);
	free(p);
}

int files_partial_status(const struct files_root *fr, const char *canon, uint64_t *size,
			 int64_t *mtime, struct err *e)
{
	AS_USER(fr);
	char name[NAME_MAX + 1], stage[sizeof(FILES_PARTIAL_PREFIX) + 16];
	int dfd;
	if (locate(fr, canon, 0, &dfd, name, stage, e) < 0)
		return err_code(e);
	_cleanup_fd_ int d = dfd;
	struct stat st;
	if (fstatat(d, stage, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return files_fail(e, errno, "looking at the partial upload of", canon);
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	*size = (uint64_t)st.st_size;
	*mtime = st.st_mtim.tv_sec;
	return 1;
}
