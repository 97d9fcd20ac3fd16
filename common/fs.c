#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "text.h"

static int fsync_parent(const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	_cleanup_fd_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return fsync(fd) < 0 ? -errno : 0;
}

int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode, struct err *e)
{
	char tmp[PATH_MAX];
	char rnd[17];
	if (fs_random_hex(rnd, 8, e) < 0)
		return err_code(e);
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp-%s", path, rnd) >= sizeof(tmp))
		return err_set(e, ERR_INTERNAL, ENAMETOOLONG, "path too long '%s'", path);
	_cleanup_fd_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", tmp);
	const char *p = data;
	size_t left = len;
	while (left) {
		ssize_t n = write(fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int saved = errno;
			unlink(tmp);
			return err_sys(e, saved == ENOSPC ? ERR_NO_SPACE : ERR_INTERNAL, saved,
				       "writing '%s'", tmp);
		}
		p += n;
		left -= (size_t)n;
	}
	if (fsync(fd) < 0) {
		int saved = errno;
		unlink(tmp);
		return err_sys(e, ERR_INTERNAL, saved, "syncing '%s'", tmp);
	}
	if (rename(tmp, path) < 0) {
		int saved = errno;
		unlink(tmp);
		return err_sys(e, ERR_INTERNAL, saved, "renaming to '%s'", path);
	}
	int r = fsync_parent(path);
	if (r < 0)
		return err_sys(e, ERR_INTERNAL, -r, "syncing directory of '%s'", path);
	return 0;
}

int fs_read_file(const char *path, size_t max, char **out, size_t *len, struct err *e)
{
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return err_sys(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL, errno,
			       "opening '%s'", path);
	size_t cap = 4096, n = 0;
	_cleanup_free_ char *buf = malloc(cap + 1);
	if (!buf)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	for (;;) {
		if (n == cap) {
			if (cap >= max)
				return err_set(e, ERR_TOO_LARGE, EFBIG, "'%s' is over %zu bytes",
					       path, max);
			cap = cap * 2 > max ? max : cap * 2;
			char *nb = realloc(buf, cap + 1);
			if (!nb)
				return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
			buf = nb;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return err_sys(e, ERR_INTERNAL, errno, "reading '%s'", path);
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	*out = TAKE_PTR(buf);
	if (len)
		*len = n;
	return 0;
}

int fs_mkdir_p(const char *path, mode_t mode, struct err *e)
{
	char buf[PATH_MAX];
	if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf))
		return err_set(e, ERR_INVALID, ENAMETOOLONG, "path too long '%s'", path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", buf);
			*p = c;
			if (!c)
				break;
		}
	}
	return 0;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	int r = (type == FTW_DP) ? rmdir(path) : unlink(path);
	if (r < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int fs_remove_tree(const char *path, struct err *e)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		return err_sys(e, ERR_INTERNAL, errno, "inspecting '%s'", path);
	}
	int r = nftw(path, remove_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (r != 0)
		return err_sys(e, ERR_INTERNAL, r < 0 ? -r : errno, "removing '%s'", path);
	return 0;
}

int fs_random(void *buf, size_t n, struct err *e)
{
	unsigned char *p = buf;
	while (n) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return err_sys(e, ERR_INTERNAL, errno, "getrandom");
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int fs_random_hex(char *out, size_t n, struct err *e)
{
	unsigned char raw[64];
	if (n > sizeof(raw))
		return err_set(e, ERR_INTERNAL, EINVAL, "random id too long");
	int r = fs_random(raw, n, e);
	if (r < 0)
		return r;
	hex_encode(raw, n, out);
	return 0;
}
