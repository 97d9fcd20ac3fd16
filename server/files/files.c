/* files: path-safe filesystem operations inside a sandbox (see files.h).
 *
 * SECURITY: every lookup below goes through files_resolve() (openat2 with
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS relative to the sandbox's root
 * fd) or names a single component relative to a directory fd it returned.
 * No function here takes a host path built from client input. */
#include "files.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "server/runtime/runtime.h"

/* openat2 answers EAGAIN when a rename raced a ".." lookup; retry a few
 * times before giving up. */
#define RESOLVE_RETRIES 8

/* ---- credentials ---- */

/* setfsuid/setfsgid are per thread (glibc does not broadcast them to the
 * other threads as it does setuid): only this request's thread acts as the
 * sandbox user.  Leaving fsuid 0 also drops CAP_DAC_OVERRIDE and friends
 * from the effective set; going back restores them. */
struct files_cred files_as_user(uint32_t uid, uint32_t gid)
{
	struct files_cred c;
	c.gid = setfsgid(gid);
	c.uid = setfsuid(uid);
	return c;
}

void files_as_self(const struct files_cred *c)
{
	setfsuid((uid_t)c->uid);
	setfsgid((gid_t)c->gid);
}

/* ---- paths ---- */

int files_path_normalize(const char *in, size_t len, char *out, size_t out_size, struct err *e)
{
	if (!in || len == 0)
		return err_set(e, ERR_INVALID, EINVAL, "missing 'path'");
	if (memchr(in, '\0', len))
		return err_set(e, ERR_INVALID, EINVAL, "path contains a NUL byte");
	if (len >= PATH_MAX)
		return err_set(e, ERR_INVALID, ENAMETOOLONG, "path longer than %d bytes",
			       PATH_MAX - 1);
	if (out_size < 2)
		return err_set(e, ERR_INTERNAL, EINVAL, "path buffer too small");
	size_t o = 0;
	out[o] = '\0';
	/* Relative paths start at FILES_HOME: walk its components first. */
	const char *parts[2] = {in[0] == '/' ? "" : FILES_HOME, in};
	size_t lens[2] = {in[0] == '/' ? 0 : strlen(FILES_HOME), len};
	for (int k = 0; k < 2; k++) {
		const char *p = parts[k], *end = parts[k] + lens[k];
		while (p < end) {
			while (p < end && *p == '/')
				p++;
			const char *c = p;
			while (p < end && *p != '/')
				p++;
			size_t cl = (size_t)(p - c);
			if (cl == 0 || (cl == 1 && c[0] == '.'))
				continue;
			if (cl == 2 && c[0] == '.' && c[1] == '.')
				return err_set(e, ERR_INVALID, EINVAL,
					       "path must not contain '..' components");
			if (cl > NAME_MAX)
				return err_set(e, ERR_INVALID, ENAMETOOLONG,
					       "path component longer than %d bytes", NAME_MAX);
			if (o + 1 + cl + 1 > out_size || o + 1 + cl + 1 > PATH_MAX)
				return err_set(e, ERR_INVALID, ENAMETOOLONG,
					       "path longer than %d bytes", PATH_MAX - 1);
			out[o++] = '/';
			memcpy(out + o, c, cl);
			o += cl;
			out[o] = '\0';
		}
	}
	if (o == 0) {
		out[0] = '/';
		out[1] = '\0';
	}
	return 0;
}

const char *files_path_split(const char *canon, char *parent, size_t parent_size)
{
	const char *slash = strrchr(canon, '/');
	if (!slash || slash[1] == '\0') {
		snprintf(parent, parent_size, "/");
		return NULL;
	}
	size_t pl = (size_t)(slash - canon);
	if (pl == 0)
		snprintf(parent, parent_size, "/");
	else
		snprintf(parent, parent_size, "%.*s", (int)pl, canon);
	return slash + 1;
}

/* Maps an errno from an operation on `path` to the error kinds of files.h. */
int files_fail(struct err *e, int errnum, const char *what, const char *path)
{
	enum err_kind k;
	switch (errnum) {
	case ENOENT:
		k = ERR_NOT_FOUND;
		break;
	case EACCES:
	case EPERM:
	case EROFS:
		k = ERR_FORBIDDEN;
		break;
	case EEXIST:
	case ENOTEMPTY:
	case EBUSY:
	case EISDIR:
	case ETXTBSY:
		k = ERR_CONFLICT;
		break;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		k = ERR_NO_SPACE;
		break;
	case ELOOP:
		return err_set(e, ERR_INVALID, ELOOP,
			       "%s '%s': the last component is a symbolic link (not followed), "
			       "or there are too many levels of links",
			       what, path);
	case ENOTDIR:
	case EXDEV:
	case ENAMETOOLONG:
	case EINVAL:
		k = ERR_INVALID;
		break;
	default:
		k = ERR_INTERNAL;
		break;
	}
	return err_sys(e, k, errnum, "%s '%s'", what, path);
}

/* openat2 relative to `root` with the sandbox's "/" as the root of every
 * lookup.  Returns the fd or -errno. */
int files_resolve(int root, const char *canon, int flags, mode_t mode)
{
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_CLOEXEC),
	    .mode = (flags & O_CREAT) ? mode : 0,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	for (int i = 0;; i++) {
		long fd = syscall(SYS_openat2, root, canon, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if ((errno != EAGAIN && errno != EINTR) || i >= RESOLVE_RETRIES)
			return -errno;
	}
}

/* The parent directory of `canon` as an O_PATH fd, and the last name. */
int files_resolve_parent(int root, const char *canon, const char **name, struct err *e)
{
	char parent[PATH_MAX];
	*name = files_path_split(canon, parent, sizeof(parent));
	if (!*name)
		return err_set(e, ERR_INVALID, EINVAL, "not allowed on '/'");
	int fd = files_resolve(root, parent, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return files_fail(e, -fd, "opening directory", parent);
	return fd;
}

/* ---- stat and list ---- */

static const char *type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

cJSON *files_stat_json(const char *path, const char *name, const struct stat *st)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	if (path)
		cJSON_AddStringToObject(j, "path", path);
	cJSON_AddStringToObject(j, "name", name);
	cJSON_AddStringToObject(j, "type", type_name(st->st_mode));
	cJSON_AddNumberToObject(j, "size", (double)st->st_size);
	cJSON_AddNumberToObject(j, "mode", (double)(st->st_mode & 07777));
	cJSON_AddNumberToObject(j, "mtime", (double)st->st_mtim.tv_sec);
	return j;
}

int files_stat(const struct files_root *fr, const char *canon, struct stat *st, struct err *e)
{
	AS_USER(fr);
	int root = fr->fd;
	_cleanup_fd_ int fd = files_resolve(root, canon, O_PATH | O_NOFOLLOW, 0);
	if (fd < 0)
		return files_fail(e, -fd, "stat", canon);
	if (fstat(fd, st) < 0)
		return files_fail(e, errno, "stat", canon);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int files_list(const struct files_root *fr, const char *canon, cJSON **out, int *truncated,
	       struct err *e)
{
	AS_USER(fr);
	int root = fr->fd;
	*out = NULL;
	*truncated = 0;
	int fd = files_resolve(root, canon, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	if (fd < 0)
		return files_fail(e, -fd, "listing", canon);
	DIR *d = fdopendir(fd);
	if (!d) {
		int saved = errno;
		close(fd);
		return files_fail(e, saved, "listing", canon);
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n >= FILES_LIST_MAX) {
			*truncated = 1;
			break;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			char **nn = realloc(names, nc * sizeof(*names));
			if (!nn)
				goto oom;
			names = nn;
			cap = nc;
		}
		if (!(names[n] = strdup(de->d_name)))
			goto oom;
		n++;
	}
	if (n) /* qsort wants a non-null base, even for nothing */
		qsort(names, n, sizeof(*names), cmp_names);
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; arr && i < n; i++) {
		struct stat st;
		/* Gone since readdir: skip it. */
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		cJSON *it = files_stat_json(NULL, names[i], &st);
		if (!it) {
			cJSON_Delete(arr);
			arr = NULL;
			break;
		}
		cJSON_AddItemToArray(arr, it);
	}
	free_names(names, n);
	closedir(d);
	if (!arr)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	*out = arr;
	return 0;
oom:
	free_names(names, n);
	closedir(d);
	return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
}

/* ---- mkdir, move, remove ---- */

/* mkdir -p, one component at a time, each resolved again from the root so
 * a symlink in the way is followed only inside the sandbox. */
int files_mkdir_parents(int root, const char *canon, struct err *e)
{
	char prefix[PATH_MAX];
	size_t len = strlen(canon);
	for (size_t i = 1; i <= len; i++) {
		if (canon[i] != '/' && canon[i] != '\0')
			continue;
		memcpy(prefix, canon, i);
		prefix[i] = '\0';
		const char *name;
		_cleanup_fd_ int pfd = files_resolve_parent(root, prefix, &name, e);
		if (pfd < 0)
			return pfd;
		if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST)
			return files_fail(e, errno, "creating directory", prefix);
	}
	return 0;
}

int files_mkdir(const struct files_root *fr, const char *canon, int parents, int *created,
		struct err *e)
{
	AS_USER(fr);
	int root = fr->fd;
	*created = 0;
	if (parents) {
		char parent[PATH_MAX];
		if (files_path_split(canon, parent, sizeof(parent)) &&
		    files_mkdir_parents(root, parent, e) < 0)
			return err_code(e);
	}
	if (strcmp(canon, "/") == 0)
		return parents ? 0 : err_set(e, ERR_CONFLICT, EEXIST, "'/' exists");
	const char *name;
	_cleanup_fd_ int pfd = files_resolve_parent(root, canon, &name, e);
	if (pfd < 0)
		return pfd;
	if (mkdirat(pfd, name, 0755) == 0) {
		*created = 1;
		return 0;
	}
	int saved = errno;
	struct stat st;
	if (saved == EEXIST && parents && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(st.st_mode))
		return 0;
	return files_fail(e, saved, "creating directory", canon);
}

int files_move(const struct files_root *fr, const char *from, const char *to, struct err *e)
{
	AS_USER(fr);
	int root = fr->fd;
	const char *fname, *tname;
	_cleanup_fd_ int ffd = files_resolve_parent(root, from, &fname, e);
	if (ffd < 0)
		return ffd;
	_cleanup_fd_ int tfd = files_resolve_parent(root, to, &tname, e);
	if (tfd < 0)
		return tfd;
	if (renameat(ffd, fname, tfd, tname) < 0) {
		if (errno == EXDEV)
			return err_set(e, ERR_INVALID, EXDEV,
				       "cannot move '%s' to '%s': different filesystems", from, to);
		return files_fail(e, errno, "moving", from);
	}
	return 0;
}

/* Removes `name` in `dfd` and, if it is a directory, everything under it. */
int files_remove_at(int dfd, const char *name, int depth)
{
	if (unlinkat(dfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR)
		return -errno;
	if (depth >= WALK_MAX_DEPTH)
		return -ELOOP;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int saved = errno;
		close(fd);
		return -saved;
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		r = files_remove_at(dirfd(d), de->d_name, depth + 1);
	}
	closedir(d);
	if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		r = -errno;
	return r;
}

int files_remove(const struct files_root *fr, const char *canon, int recursive, struct err *e)
{
	AS_USER(fr);
	int root = fr->fd;
	const char *name;
	_cleanup_fd_ int pfd = files_resolve_parent(root, canon, &name, e);
	if (pfd < 0)
		return pfd;
	struct stat st;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return files_fail(e, errno, "removing", canon);
	int r;
	if (!S_ISDIR(st.st_mode))
		r = unlinkat(pfd, name, 0) < 0 ? -errno : 0;
	else if (!recursive)
		r = unlinkat(pfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
	else
		r = files_remove_at(pfd, name, 0);
	if (r == -ENOTEMPTY && !recursive)
		return err_set(e, ERR_CONFLICT, ENOTEMPTY,
			       "directory '%s' is not empty (use recursive=1)", canon);
	return r < 0 ? files_fail(e, -r, "removing", canon) : 0;
}

/* ---- reading ---- */

int files_open_read(const struct files_root *fr, const char *canon, int *out, struct stat *st,
		    struct err *e)
{
	AS_USER(fr);
	int root = fr->fd;
	/* O_PATH opens nothing: a FIFO does not block, a device's open
	 * handler never runs.  Only a regular file is then opened for real,
	 * through our own /proc/self/fd link to the very same inode. */
	_cleanup_fd_ int pfd = files_resolve(root, canon, O_PATH | O_NOFOLLOW, 0);
	if (pfd < 0)
		return files_fail(e, -pfd, "opening", canon);
	if (fstat(pfd, st) < 0)
		return files_fail(e, errno, "opening", canon);
	if (S_ISDIR(st->st_mode))
		return err_set(e, ERR_INVALID, EISDIR, "'%s' is a directory", canon);
	if (!S_ISREG(st->st_mode))
		return err_set(e, ERR_INVALID, EINVAL, "'%s' is not a regular file (%s)", canon,
			       S_ISLNK(st->st_mode) ? "a symbolic link"
						    : "a device, FIFO or socket");
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	int fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return files_fail(e, errno, "opening", canon);
	*out = fd;
	return 0;
}

/* ---- uploads ---- */

struct files_upload {
	int dirfd; /* O_PATH: the target's directory */
	int fd;	   /* the temporary file */
	char tmp[sizeof(FILES_TEMP_PREFIX) + 16];
	char name[NAME_MAX + 1];
	char path[PATH_MAX];
	mode_t mode;
	int committed;
	struct files_root owner; /* its fd is not used */
};

int files_upload_begin(const struct files_root *fr, const char *canon, int parents, int mode,
		       struct files_upload **out, struct err *e)
{
	AS_USER(fr);
	int root = fr->fd;
	struct files_upload *u = calloc(1, sizeof(*u));
	if (!u)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	u->dirfd = u->fd = -1;
	u->owner = (struct files_root){-1, fr->uid, fr->gid};
	snprintf(u->path, sizeof(u->path), "%s", canon);
	char parent[PATH_MAX];
	const char *name = files_path_split(canon, parent, sizeof(parent));
	int r;
	if (!name) {
		r = err_set(e, ERR_INVALID, EISDIR, "cannot upload to '/'");
		goto fail;
	}
	snprintf(u->name, sizeof(u->name), "%s", name);
	if (parents && files_mkdir_parents(root, parent, e) < 0) {
		r = err_code(e);
		goto fail;
	}
	u->dirfd = files_resolve(root, parent, O_PATH | O_DIRECTORY, 0);
	if (u->dirfd < 0) {
		r = files_fail(e, -u->dirfd, "opening directory", parent);
		goto fail;
	}
	struct stat st;
	u->mode = mode >= 0 ? (mode_t)mode : 0644;
	if (fstatat(u->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode)) {
			r = err_set(e, ERR_CONFLICT, EISDIR, "'%s' is a directory", canon);
			goto fail;
		}
		if (mode < 0 && S_ISREG(st.st_mode))
			u->mode = st.st_mode & 0777;
	}
	char rnd[17];
	if ((r = fs_random_hex(rnd, 8, e)) < 0)
		goto fail;
	snprintf(u->tmp, sizeof(u->tmp), "%s%s", FILES_TEMP_PREFIX, rnd);
	u->fd =
	    openat(u->dirfd, u->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (u->fd < 0) {
		r = files_fail(e, errno, "creating a file in", parent);
		goto fail;
	}
	*out = u;
	return 0;
fail:
	files_upload_free(u);
	return r;
}

int files_upload_write(struct files_upload *u, const void *data, size_t len, struct err *e)
{
	const char *p = data;
	while (len) {
		ssize_t n = write(u->fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return files_fail(e, errno, "writing", u->path);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int files_upload_commit(struct files_upload *u, struct err *e)
{
	AS_USER(&u->owner);
	if (fchmod(u->fd, u->mode) < 0)
		return files_fail(e, errno, "chmod", u->path);
	if (fsync(u->fd) < 0)
		return files_fail(e, errno, "syncing", u->path);
	if (renameat(u->dirfd, u->tmp, u->dirfd, u->name) < 0)
		return files_fail(e, errno, "renaming into", u->path);
	u->committed = 1;
	/* The rename is durable once the directory is synced. */
	_cleanup_fd_ int d = openat(u->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0 || fsync(d) < 0)
		return files_fail(e, errno, "syncing the directory of", u->path);
	return 0;
}

void files_upload_free(struct files_upload *u)
{
	if (!u)
		return;
	if (u->fd >= 0) {
		close(u->fd);
		if (!u->committed) {
			AS_USER(&u->owner);
			unlinkat(u->dirfd, u->tmp, 0);
		}
	}
	if (u->dirfd >= 0)
		close(u->dirfd);
	free(u);
}

/* ---- host-side walks of a layer directory ---- */

struct walk {
	dev_t dev;
	unsigned removed;
	int sweep;
	int shift;	   /* files_remap_owners() */
	uint32_t from, to; /* ids from..from+RUNTIME_USERNS_SIZE-1 become to.. */
	unsigned shifted;
};

/* Moves one entry's owner from one range of host ids into another; host
 * root (a copy-up of the lower layer) stays root. */
static uint32_t remap_id(const struct walk *w, uint32_t id)
{
	return id > 0 && id >= w->from && id - w->from < RUNTIME_USERNS_SIZE ? id - w->from + w->to
									     : id;
}

static void shift_owner(struct walk *w, int dfd, const char *name, const struct stat *st)
{
	uid_t uid = remap_id(w, st->st_uid);
	gid_t gid = remap_id(w, st->st_gid);
	if ((uid == st->st_uid && gid == st->st_gid) ||
	    fchownat(dfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	w->shifted++;
	/* chown clears the set-id bits: the sandbox set them, they stay. */
	if (!S_ISLNK(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID)))
		fchmodat(dfd, name, st->st_mode & 07777, 0);
}

static void walk_dir(struct walk *w, int dfd, int depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    st.st_dev != w->dev)
			continue;
		/* Upload files and archive extraction directories. */
		if (w->sweep && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) &&
		    strncmp(de->d_name, FILES_TEMP_PREFIX, strlen(FILES_TEMP_PREFIX)) == 0 &&
		    files_remove_at(dirfd(d), de->d_name, 0) == 0) {
			w->removed++;
			continue;
		}
		if (w->sweep && S_ISREG(st.st_mode) &&
		    strncmp(de->d_name, FILES_PARTIAL_PREFIX, strlen(FILES_PARTIAL_PREFIX)) == 0 &&
		    st.st_mtim.tv_sec + FILES_PARTIAL_STALE_S < time(NULL) &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0) {
			w->removed++;
			continue;
		}
		if (w->shift)
			shift_owner(w, dirfd(d), de->d_name, &st);
		if (S_ISDIR(st.st_mode) && depth < WALK_MAX_DEPTH) {
			int cfd = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd >= 0)
				walk_dir(w, cfd, depth + 1);
		}
	}
	closedir(d);
}

static int walk_top(const char *dir, struct walk *w, struct err *e)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", dir);
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int saved = errno;
		close(fd);
		return err_sys(e, ERR_INTERNAL, saved, "inspecting '%s'", dir);
	}
	w->dev = st.st_dev;
	walk_dir(w, fd, 0);
	return 0;
}

int files_sweep_temp(const char *dir, unsigned *removed, struct err *e)
{
	struct walk w = {.sweep = 1};
	int r = walk_top(dir, &w, e);
	if (removed)
		*removed = w.removed;
	return r;
}

int files_shift_owners(const char *dir, uint32_t shift, unsigned *changed, struct err *e)
{
	return files_remap_owners(dir, 0, shift, changed, e);
}

int files_remap_owners(const char *dir, uint32_t from, uint32_t to, unsigned *changed,
		       struct err *e)
{
	struct walk w = {.shift = from != to, .from = from, .to = to};
	int r = walk_top(dir, &w, e);
	if (changed)
		*changed = w.shifted;
	return r;
}
