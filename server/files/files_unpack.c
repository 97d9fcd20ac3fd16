/* files: an archive unpacked into a sandbox (see files.h).
 *
 * The body is spooled to an unlinked file inside a temporary directory
 * ("<parent>/.deskbox-upload-<16 hex>/", 0700) next to the target, then
 * unpacked there by libarchive and the directory renamed onto the target.
 * Any failure removes the directory: nothing half-unpacked is ever
 * visible at the target, and a crash leaves only a FILES_TEMP_PREFIX
 * directory that the next start sweeps.
 *
 * SECURITY: member names are the archive author's.  Each is checked (no
 * absolute name, no "..") and created one component at a time from the
 * temporary directory's fd with O_NOFOLLOW, so no member is ever written
 * through a symlink, including one an earlier member made.  Symlink
 * targets must stay inside the tree; hard links must name an earlier
 * member; devices, FIFOs and sockets are refused. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "internal.h"

#define SPOOL_NAME ".spool"
/* libarchive reads the spool in blocks of this size. */
#define READ_BLOCK (256 * 1024)

struct files_archive_in {
	struct files_root owner; /* its fd is not used */
	int pfd;		 /* O_PATH: the target's parent directory */
	int tmpfd;		 /* O_PATH: the temporary directory */
	int spool;		 /* the unlinked spool file */
	char tmp[sizeof(FILES_TEMP_PREFIX) + 16];
	char name[NAME_MAX + 1];
	char path[PATH_MAX];
	int committed;
};

/* Whether directory `fd` (closed here) has no entries. */
static int dir_empty(int fd)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	struct dirent *de;
	int empty = 1;
	while (empty && (de = readdir(d)))
		empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
	closedir(d);
	return empty;
}

int files_archive_in_begin(const struct files_root *fr, const char *canon, int parents,
			   struct files_archive_in **out, struct err *e)
{
	AS_USER(fr);
	struct files_archive_in *a = calloc(1, sizeof(*a));
	if (!a)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	a->pfd = a->tmpfd = a->spool = -1;
	a->owner = (struct files_root){-1, fr->uid, fr->gid};
	snprintf(a->path, sizeof(a->path), "%s", canon);
	char parent[PATH_MAX], rnd[17];
	const char *name = files_path_split(canon, parent, sizeof(parent));
	int r;
	if (!name) {
		r = err_set(e, ERR_INVALID, EINVAL, "cannot unpack onto '/'");
		goto fail;
	}
	snprintf(a->name, sizeof(a->name), "%s", name);
	if (parents && files_mkdir_parents(fr->fd, parent, e) < 0) {
		r = err_code(e);
		goto fail;
	}
	if ((a->pfd = files_resolve(fr->fd, parent, O_PATH | O_DIRECTORY, 0)) < 0) {
		r = files_fail(e, -a->pfd, "opening directory", parent);
		goto fail;
	}
	/* The target: absent, or an empty directory (rename replaces it). */
	int tfd = openat(a->pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tfd >= 0) {
		if (!dir_empty(tfd)) {
			r = err_set(e, ERR_CONFLICT, ENOTEMPTY,
				    "'%s' exists and is not empty (unpack into a new directory)",
				    canon);
			goto fail;
		}
	} else if (errno != ENOENT) {
		r = errno == ENOTDIR || errno == ELOOP
			? err_set(e, ERR_CONFLICT, EEXIST, "'%s' exists and is not a directory",
				  canon)
			: files_fail(e, errno, "opening", canon);
		goto fail;
	}
	if ((r = fs_random_hex(rnd, 8, e)) < 0)
		goto fail;
	snprintf(a->tmp, sizeof(a->tmp), "%s%s", FILES_TEMP_PREFIX, rnd);
	if (mkdirat(a->pfd, a->tmp, 0700) < 0) {
		r = files_fail(e, errno, "creating a directory in", parent);
		goto fail;
	}
	a->tmpfd = openat(a->pfd, a->tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (a->tmpfd < 0 ||
	    (a->spool = openat(a->tmpfd, SPOOL_NAME,
			       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
		r = files_fail(e, errno, "creating a file in", parent);
		goto fail;
	}
	/* Unlinked at once: it takes disk space while open, and never shows
	 * up in the result. */
	unlinkat(a->tmpfd, SPOOL_NAME, 0);
	*out = a;
	return 0;
fail:
	files_archive_in_free(a);
	return r;
}

int files_archive_in_write(struct files_archive_in *a, const void *data, size_t len,
			   struct err *e)
{
	const char *p = data;
	while (len) {
		ssize_t n = write(a->spool, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return files_fail(e, errno, "writing the archive of", a->path);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- member checks ---- */

/* Makes an archive member's name canonical in `out` ("a/b/c", no leading
 * "./", no trailing '/'); "" for the top itself.  ERR_INVALID for an
 * absolute name, a ".." component or a component over NAME_MAX. */
static int member_name(const char *in, char *out, size_t out_size, struct err *e)
{
	if (in[0] == '/')
		return err_set(e, ERR_INVALID, EINVAL, "archive member '%s' has an absolute name",
			       in);
	size_t o = 0;
	const char *p = in;
	while (*p) {
		while (*p == '/')
			p++;
		const char *c = p;
		while (*p && *p != '/')
			p++;
		size_t cl = (size_t)(p - c);
		if (cl == 0 || (cl == 1 && c[0] == '.'))
			continue;
		if (cl == 2 && c[0] == '.' && c[1] == '.')
			return err_set(e, ERR_INVALID, EINVAL,
				       "archive member '%s' has a '..' component", in);
		if (cl > NAME_MAX || o + cl + 2 > out_size)
			return err_set(e, ERR_INVALID, ENAMETOOLONG,
				       "archive member '%s': name too long", in);
		if (o)
			out[o++] = '/';
		memcpy(out + o, c, cl);
		o += cl;
	}
	out[o] = '\0';
	return 0;
}

/* Whether symlink `target` of member `name` stays inside the tree:
 * relative, and never climbing above the top from the link's directory. */
static int link_inside(const char *name, const char *target)
{
	if (target[0] == '/' || target[0] == '\0')
		return 0;
	int depth = 0;
	for (const char *p = name; *p; p++)
		depth += *p == '/';
	for (const char *p = target; *p;) {
		while (*p == '/')
			p++;
		const char *c = p;
		while (*p && *p != '/')
			p++;
		size_t cl = (size_t)(p - c);
		if (cl == 2 && c[0] == '.' && c[1] == '.') {
			if (--depth < 0)
				return 0;
		} else if (cl && !(cl == 1 && c[0] == '.')) {
			depth++;
		}
	}
	return 1;
}

/* The directory that will hold member `rel` as an O_PATH fd, its missing
 * directories made on the way, never through a symlink; *leaf is the last
 * name.  Negative errno on failure. */
static int member_parent(int tmpfd, char *rel, const char **leaf)
{
	int fd = dup(tmpfd);
	if (fd < 0)
		return -errno;
	char *p = rel;
	for (;;) {
		char *slash = strchr(p, '/');
		if (!slash) {
			*leaf = p;
			return fd;
		}
		*slash = '\0';
		if (mkdirat(fd, p, 0755) < 0 && errno != EEXIST) {
			int r = -errno;
			*slash = '/';
			close(fd);
			return r;
		}
		int nfd = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int saved = errno;
		*slash = '/';
		close(fd);
		if (nfd < 0)
			return saved == ELOOP ? -ENOTDIR : -saved;
		fd = nfd;
		p = slash + 1;
	}
}

/* ---- unpacking ---- */

struct unpack {
	struct archive *ar;
	int tmpfd;
	const struct files_space *space;
	unsigned members;
	uint64_t bytes, max_bytes;
	char *zeros;
	/* deskboxd's own credentials, and the sandbox user's: the space
	 * accounting looks at the host's view of the disk, as deskboxd. */
	const struct files_cred *self;
	struct files_root owner;
};

static int reserve(struct unpack *u, uint64_t n, struct err *e)
{
	if (!u->space || !u->space->reserve)
		return 0;
	files_as_self(u->self);
	int r = u->space->reserve(u->space->cls, n, e);
	files_as_user(u->owner.uid, u->owner.gid);
	return r;
}

static void release(struct unpack *u, uint64_t n)
{
	if (u->space && u->space->release)
		u->space->release(u->space->cls, n);
}

static int too_large(const struct unpack *u, struct err *e)
{
	return err_set(e, ERR_TOO_LARGE, EFBIG, "the archive unpacks to more than %llu bytes",
		       (unsigned long long)u->max_bytes);
}

static int member_fail(struct err *e, int errnum, const char *name)
{
	if (errnum == ENOTDIR)
		return err_set(e, ERR_INVALID, ENOTDIR,
			       "archive member '%s' goes through a symbolic link or a file", name);
	return files_fail(e, errnum, "unpacking archive member", name);
}

/* Writes one block at `off`, leaving all-zero blocks as holes. */
static int write_block(struct unpack *u, int fd, const char *buf, size_t n, int64_t off,
		       struct err *e, const char *name)
{
	/* libarchive may hand over an empty block with no buffer. */
	if (n == 0 || (n <= READ_BLOCK && memcmp(buf, u->zeros, n) == 0))
		return 0;
	while (n) {
		ssize_t w = pwrite(fd, buf, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return member_fail(e, errno, name);
		buf += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

/* The data of a regular file member, into `fd`. */
static int unpack_data(struct unpack *u, int fd, struct archive_entry *en, const char *name,
		       struct err *e)
{
	const void *buf;
	size_t n;
	la_int64_t off;
	int64_t end = 0;
	for (;;) {
		int r = archive_read_data_block(u->ar, &buf, &n, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return err_set(e, ERR_INVALID, EINVAL, "archive member '%s': %s", name,
				       archive_error_string(u->ar));
		if (off < 0 || (uint64_t)off + n > u->max_bytes || u->bytes + n > u->max_bytes)
			return too_large(u, e);
		if (reserve(u, n, e) < 0)
			return err_wrap(e, "unpacking archive member '%s'", name);
		int w = write_block(u, fd, buf, n, off, e, name);
		release(u, n);
		if (w < 0)
			return w;
		u->bytes += n;
		if (off + (int64_t)n > end)
			end = off + (int64_t)n;
	}
	int64_t size = archive_entry_size_is_set(en) ? archive_entry_size(en) : end;
	if (size > end) {
		/* Holes at the end (sparse members): counted like data. */
		uint64_t hole = (uint64_t)(size - end);
		if (u->bytes + hole > u->max_bytes)
			return too_large(u, e);
		u->bytes += hole;
	}
	if (ftruncate(fd, size > end ? size : end) < 0)
		return member_fail(e, errno, name);
	return 0;
}

static int unpack_file(struct unpack *u, int pfd, const char *leaf, struct archive_entry *en,
		       const char *name, struct err *e)
{
	mode_t mode = archive_entry_perm(en) & 0777;
	/* A later member of the same name replaces an earlier file (tar). */
	int fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && unlinkat(pfd, leaf, 0) == 0)
		fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return member_fail(e, errno, name);
	_cleanup_fd_ int f = fd;
	if (unpack_data(u, f, en, name, e) < 0)
		return err_code(e);
	struct timespec ts[2] = {{0, UTIME_OMIT},
				 {archive_entry_mtime(en), archive_entry_mtime_nsec(en)}};
	if (!archive_entry_mtime_is_set(en))
		ts[1].tv_nsec = UTIME_OMIT;
	if (fchmod(f, mode) < 0 || futimens(f, ts) < 0)
		return member_fail(e, errno, name);
	return 0;
}

/* A hard link to an earlier member. */
static int unpack_hardlink(struct unpack *u, int pfd, const char *leaf, const char *target,
			   const char *name, struct err *e)
{
	char rel[PATH_MAX];
	if (member_name(target, rel, sizeof(rel), e) < 0)
		return err_wrap(e, "archive member '%s' is a hard link", name);
	if (!rel[0])
		return err_set(e, ERR_INVALID, EINVAL, "archive member '%s' links to the top", name);
	const char *tleaf;
	_cleanup_fd_ int tfd = member_parent(u->tmpfd, rel, &tleaf);
	if (tfd < 0)
		return member_fail(e, -tfd, name);
	struct stat st;
	if (fstatat(tfd, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return err_set(e, ERR_INVALID, EINVAL,
			       "archive member '%s' is a hard link to '%s', not an earlier file",
			       name, target);
	if (linkat(tfd, tleaf, pfd, leaf, 0) < 0)
		return member_fail(e, errno, name);
	return 0;
}

/* One member, checked and created under the temporary directory. */
static int unpack_member(struct unpack *u, struct archive_entry *en, struct err *e)
{
	const char *raw = archive_entry_pathname_utf8(en);
	if (!raw)
		raw = archive_entry_pathname(en);
	if (!raw)
		return err_set(e, ERR_INVALID, EINVAL, "archive member without a name");
	char rel[PATH_MAX];
	if (member_name(raw, rel, sizeof(rel), e) < 0)
		return err_code(e);
	if (++u->members > FILES_ARCHIVE_MAX_MEMBERS)
		return err_set(e, ERR_TOO_LARGE, E2BIG, "the archive has more than %d members",
			       FILES_ARCHIVE_MAX_MEMBERS);
	mode_t type = archive_entry_filetype(en);
	const char *hard = archive_entry_hardlink_utf8(en);
	if (!hard)
		hard = archive_entry_hardlink(en);
	if (!rel[0])
		return type == AE_IFDIR ? 0
					: err_set(e, ERR_INVALID, EINVAL,
						  "archive member '%s' names the top itself", raw);
	if (!hard && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
		return err_set(e, ERR_INVALID, EINVAL,
			       "archive member '%s' is a device, FIFO or socket (not allowed)", raw);
	char parent_rel[PATH_MAX];
	memcpy(parent_rel, rel, strlen(rel) + 1);
	const char *leaf;
	_cleanup_fd_ int pfd = member_parent(u->tmpfd, parent_rel, &leaf);
	if (pfd < 0)
		return member_fail(e, -pfd, raw);
	if (hard)
		return unpack_hardlink(u, pfd, leaf, hard, raw, e);
	if (type == AE_IFDIR) {
		mode_t mode = (archive_entry_perm(en) & 0777) | 0700;
		if (mkdirat(pfd, leaf, mode) < 0 && errno != EEXIST)
			return member_fail(e, errno, raw);
		_cleanup_fd_ int dfd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
							     O_CLOEXEC);
		if (dfd < 0 || fchmod(dfd, mode) < 0)
			return member_fail(e, dfd < 0 && errno == ELOOP ? ENOTDIR : errno, raw);
		return 0;
	}
	if (type == AE_IFLNK) {
		const char *target = archive_entry_symlink_utf8(en);
		if (!target)
			target = archive_entry_symlink(en);
		if (!target || !link_inside(rel, target))
			return err_set(e, ERR_INVALID, EINVAL,
				       "archive member '%s' is a symbolic link out of the tree "
				       "(to '%s')",
				       raw, target ? target : "");
		if (symlinkat(target, pfd, leaf) < 0)
			return member_fail(e, errno, raw);
		return 0;
	}
	return unpack_file(u, pfd, leaf, en, raw, e);
}

static int open_reader(struct unpack *u, int spool, enum files_archive_format f, struct err *e)
{
	u->ar = archive_read_new();
	if (!u->ar)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r;
	if (f == FILES_ARCHIVE_ZIP) {
		r = archive_read_support_format_zip(u->ar);
	} else {
		r = archive_read_support_format_tar(u->ar);
		if (r == ARCHIVE_OK)
			r = f == FILES_ARCHIVE_TGZ ? archive_read_support_filter_gzip(u->ar)
						   : archive_read_support_filter_none(u->ar);
	}
	if (r == ARCHIVE_OK && f == FILES_ARCHIVE_ZIP)
		r = archive_read_set_options(u->ar, "zip:hdrcharset=UTF-8");
	if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
		return err_set(e, ERR_INTERNAL, EIO, "archive reader: %s",
			       archive_error_string(u->ar));
	if (lseek(spool, 0, SEEK_SET) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "rewinding the archive");
	if (archive_read_open_fd(u->ar, spool, READ_BLOCK) != ARCHIVE_OK)
		return err_set(e, ERR_INVALID, EINVAL, "not a %s archive: %s",
			       f == FILES_ARCHIVE_ZIP ? "zip"
			       : f == FILES_ARCHIVE_TGZ ? "tar.gz"
							: "tar",
			       archive_error_string(u->ar));
	return 0;
}

static int unpack_all(struct unpack *u, struct err *e)
{
	for (;;) {
		struct archive_entry *en;
		int r = archive_read_next_header(u->ar, &en);
		if (r == ARCHIVE_EOF)
			return 0;
		if (r < ARCHIVE_WARN)
			return err_set(e, ERR_INVALID, EINVAL, "malformed archive: %s",
				       archive_error_string(u->ar));
		if (unpack_member(u, en, e) < 0)
			return err_code(e);
	}
}

int files_archive_in_commit(struct files_archive_in *a, enum files_archive_format f,
			    const struct files_space *space, unsigned *members, uint64_t *bytes,
			    struct err *e)
{
	AS_USER(&a->owner);
	IN_UTF8();
	struct unpack u = {.tmpfd = a->tmpfd,
			   .space = space,
			   .max_bytes = FILES_ARCHIVE_MAX_BYTES,
			   .self = &cred_,
			   .owner = a->owner};
	if (space && space->max_bytes && space->max_bytes < u.max_bytes)
		u.max_bytes = space->max_bytes;
	int r;
	if (!(u.zeros = calloc(1, READ_BLOCK)))
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if ((r = open_reader(&u, a->spool, f, e)) == 0)
		r = unpack_all(&u, e);
	if (u.ar)
		archive_read_free(u.ar);
	free(u.zeros);
	if (r < 0)
		return err_wrap(e, "unpacking into '%s' (nothing was changed)", a->path);
	*members = u.members;
	*bytes = u.bytes;
	_cleanup_fd_ int d = openat(a->tmpfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* Durable before it is visible: one syncfs for every file. */
	if (d < 0 || fchmod(d, 0755) < 0 || syncfs(d) < 0)
		return files_fail(e, errno, "syncing", a->path);
	if (renameat(a->pfd, a->tmp, a->pfd, a->name) < 0)
		return errno == ENOTEMPTY || errno == EEXIST
			   ? err_set(e, ERR_CONFLICT, ENOTEMPTY,
				     "'%s' was filled meanwhile (nothing was changed)", a->path)
			   : files_fail(e, errno, "renaming into", a->path);
	a->committed = 1;
	_cleanup_fd_ int pd = openat(a->pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pd < 0 || fsync(pd) < 0)
		return files_fail(e, errno, "syncing the directory of", a->path);
	return 0;
}

void files_archive_in_free(struct files_archive_in *a)
{
	if (!a)
		return;
	if (a->spool >= 0)
		close(a->spool);
	if (a->tmpfd >= 0)
		close(a->tmpfd);
	if (a->pfd >= 0) {
		if (a->tmp[0] && !a->committed) {
			AS_USER(&a->owner);
			files_remove_at(a->pfd, a->tmp, 0);
		}
		close(a->pfd);
	}
	free(a);
}
