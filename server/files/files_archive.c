/* files: a directory streamed out as an archive (see files.h).
 *
 * libarchive's writer pushes bytes into a callback; the HTTP layer pulls
 * them.  files_archive_out_read() turns one into the other: it advances
 * the walk by one step at a time (one header, or one block of a file's
 * data) until libarchive has handed over some bytes, so memory stays at a
 * block or two whatever the tree's size.
 *
 * SECURITY: the walk starts at a directory resolved with files_resolve()
 * and goes on by fd, one name at a time, with O_NOFOLLOW and
 * AT_SYMLINK_NOFOLLOW: a symlink is stored as a link and never followed,
 * whatever the sandbox swaps in meanwhile. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* File data goes to libarchive in blocks of this size. */
#define BLOCK (256 * 1024)

struct frame {
	DIR *d;
	size_t rel_len; /* length of `rel` while in this directory */
};

struct files_archive_out {
	struct archive *a;
	struct files_root owner; /* its fd is not used */
	dev_t dev;
	struct frame stack[WALK_MAX_DEPTH + 1];
	int depth; /* frames in `stack` */
	char rel[PATH_MAX]; /* the current directory, relative, "" or ending in '/' */
	int file_fd;	    /* the file whose data is being written, or -1 */
	uint64_t file_left;
	unsigned members;
	int closed, failed;
	char *out; /* bytes libarchive handed over and not yet read */
	size_t len, off, cap;
	char *block;
};

static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_init(void)
{
	utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

struct files_locale files_utf8_enter(void)
{
	pthread_once(&utf8_once, utf8_init);
	struct files_locale l = {(locale_t)0};
	if (utf8_locale)
		l.old = uselocale(utf8_locale);
	return l;
}

void files_utf8_leave(const struct files_locale *l)
{
	if (l->old)
		uselocale(l->old);
}

int files_archive_format_parse(const char *name, enum files_archive_format *out, struct err *e)
{
	if (!name || strcmp(name, "tar") == 0)
		*out = FILES_ARCHIVE_TAR;
	else if (strcmp(name, "tar.gz") == 0 || strcmp(name, "tgz") == 0)
		*out = FILES_ARCHIVE_TGZ;
	else if (strcmp(name, "zip") == 0)
		*out = FILES_ARCHIVE_ZIP;
	else
		return err_set(e, ERR_INVALID, EINVAL,
			       "query parameter 'format' must be tar, tar.gz or zip");
	return 0;
}

const char *files_archive_mime(enum files_archive_format f)
{
	switch (f) {
	case FILES_ARCHIVE_TGZ:
		return "application/gzip";
	case FILES_ARCHIVE_ZIP:
		return "application/zip";
	case FILES_ARCHIVE_TAR:
		break;
	}
	return "application/x-tar";
}

static la_ssize_t on_write(struct archive *ar, void *cls, const void *buf, size_t n)
{
	struct files_archive_out *a = cls;
	if (a->len + n > a->cap) {
		size_t ncap = a->cap ? a->cap : 65536;
		while (ncap < a->len + n)
			ncap *= 2;
		char *nb = realloc(a->out, ncap);
		if (!nb) {
			archive_set_error(ar, ENOMEM, "out of memory");
			return -1;
		}
		a->out = nb;
		a->cap = ncap;
	}
	memcpy(a->out + a->len, buf, n);
	a->len += n;
	return (la_ssize_t)n;
}

static int setup_writer(struct files_archive_out *a, enum files_archive_format f, struct err *e)
{
	a->a = archive_write_new();
	if (!a->a)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r;
	if (f == FILES_ARCHIVE_ZIP) {
		r = archive_write_set_format_zip(a->a);
		/* Names are UTF-8 whatever deskboxd's locale is. */
		if (r == ARCHIVE_OK)
			r = archive_write_set_options(a->a, "zip:hdrcharset=UTF-8");
	} else {
		/* pax: long names, big files, UTF-8 names, symlinks. */
		r = archive_write_set_format_pax_restricted(a->a);
		if (r == ARCHIVE_OK && f == FILES_ARCHIVE_TGZ)
			r = archive_write_add_filter_gzip(a->a);
	}
	/* No padding of the last block to 10 KiB: the stream ends with the
	 * archive. */
	if (r == ARCHIVE_OK)
		r = archive_write_set_bytes_in_last_block(a->a, 1);
	if (r == ARCHIVE_OK)
		r = archive_write_open(a->a, a, NULL, on_write, NULL);
	if (r != ARCHIVE_OK)
		return err_set(e, ERR_INTERNAL, EIO, "archive writer: %s",
			       archive_error_string(a->a));
	return 0;
}

int files_archive_out_begin(const struct files_root *fr, const char *canon,
			    enum files_archive_format f, struct files_archive_out **out,
			    struct err *e)
{
	AS_USER(fr);
	IN_UTF8();
	struct files_archive_out *a = calloc(1, sizeof(*a));
	if (!a || !(a->block = malloc(BLOCK))) {
		free(a);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	a->file_fd = -1;
	a->owner = (struct files_root){-1, fr->uid, fr->gid};
	int fd = files_resolve(fr->fd, canon, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int r = files_fail(e, fd < 0 ? -fd : errno, "archiving", canon);
		if (fd >= 0)
			close(fd);
		files_archive_out_free(a);
		return r;
	}
	a->dev = st.st_dev;
	a->stack[0].d = fdopendir(fd);
	if (!a->stack[0].d) {
		close(fd);
		files_archive_out_free(a);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	a->depth = 1;
	if (setup_writer(a, f, e) < 0) {
		files_archive_out_free(a);
		return err_code(e);
	}
	*out = a;
	return 0;
}

/* Writes the header of one member; 0, or -1 (a->failed). */
static int put_header(struct files_archive_out *a, const char *path, const struct stat *st,
		      const char *link)
{
	struct archive_entry *en = archive_entry_new();
	if (!en)
		return -1;
	/* The names' bytes as they are (the locale is UTF-8: see IN_UTF8). */
	archive_entry_copy_pathname(en, path);
	archive_entry_set_mode(en, st->st_mode & (S_IFMT | 0777));
	archive_entry_set_size(en, S_ISREG(st->st_mode) ? st->st_size : 0);
	archive_entry_set_mtime(en, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	if (link)
		archive_entry_copy_symlink(en, link);
	int r = archive_write_header(a->a, en);
	archive_entry_free(en);
	a->members++;
	return r == ARCHIVE_OK || r == ARCHIVE_WARN ? 0 : -1;
}

/* One entry of the current directory: header, and the file, link or
 * directory it is. */
static int put_entry(struct files_archive_out *a, int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* gone since readdir */
	size_t rl = strlen(a->rel), nl = strlen(name);
	if (rl + nl + 2 >= sizeof(a->rel))
		return 0;
	char path[PATH_MAX];
	memcpy(path, a->rel, rl);
	memcpy(path + rl, name, nl + 1);
	if (a->members >= FILES_ARCHIVE_MAX_MEMBERS)
		return -1;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return 0;
		target[n] = '\0';
		return put_header(a, path, &st, target);
	}
	if (S_ISREG(st.st_mode)) {
		int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		struct stat fst;
		/* Swapped for something else since the fstatat: left out. */
		if (fd < 0 || fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode)) {
			if (fd >= 0)
				close(fd);
			return 0;
		}
		if (put_header(a, path, &fst, NULL) < 0) {
			close(fd);
			return -1;
		}
		a->file_fd = fd;
		a->file_left = (uint64_t)fst.st_size;
		return 0;
	}
	/* Directories on another device are mount points (/proc, /dev, /usr):
	 * not part of the tree.  FIFOs, sockets and devices are left out. */
	if (!S_ISDIR(st.st_mode) || st.st_dev != a->dev || a->depth > WALK_MAX_DEPTH)
		return 0;
	int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = cfd >= 0 ? fdopendir(cfd) : NULL;
	if (!d) {
		if (cfd >= 0)
			close(cfd);
		return 0;
	}
	memcpy(path + rl + nl, "/", 2);
	if (put_header(a, path, &st, NULL) < 0) {
		closedir(d);
		return -1;
	}
	memcpy(a->rel, path, rl + nl + 2);
	a->stack[a->depth].d = d;
	a->stack[a->depth].rel_len = rl + nl + 1;
	a->depth++;
	return 0;
}

/* Copies one block of the current file. */
static int put_data(struct files_archive_out *a)
{
	size_t want = a->file_left < BLOCK ? (size_t)a->file_left : BLOCK;
	ssize_t n = want ? read(a->file_fd, a->block, want) : 0;
	if (n < 0 && errno == EINTR)
		return 0;
	if (n <= 0) {
		/* The end, or the file shrank: libarchive pads the member to
		 * the size its header promised. */
		close(a->file_fd);
		a->file_fd = -1;
		return n < 0 ? -1 : 0;
	}
	a->file_left -= (uint64_t)n;
	return archive_write_data(a->a, a->block, (size_t)n) == n ? 0 : -1;
}

/* Advances the walk by one step. */
static int step(struct files_archive_out *a)
{
	if (a->file_fd >= 0)
		return put_data(a);
	if (a->depth == 0) {
		a->closed = 1;
		return archive_write_close(a->a) == ARCHIVE_OK ? 0 : -1;
	}
	struct frame *fr = &a->stack[a->depth - 1];
	struct dirent *de = readdir(fr->d);
	if (!de) {
		closedir(fr->d);
		fr->d = NULL;
		a->depth--;
		a->rel[a->depth ? a->stack[a->depth - 1].rel_len : 0] = '\0';
		return 0;
	}
	if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
		return 0;
	return put_entry(a, dirfd(fr->d), de->d_name);
}

long files_archive_out_read(struct files_archive_out *a, char *buf, size_t max)
{
	AS_USER(&a->owner);
	IN_UTF8();
	while (a->off == a->len) {
		a->off = a->len = 0;
		if (a->failed)
			return -1;
		if (a->closed)
			return 0;
		if (step(a) < 0)
			a->failed = 1;
	}
	size_t n = a->len - a->off < max ? a->len - a->off : max;
	memcpy(buf, a->out + a->off, n);
	a->off += n;
	return (long)n;
}

unsigned files_archive_out_members(const struct files_archive_out *a)
{
	return a->members;
}

void files_archive_out_free(struct files_archive_out *a)
{
	if (!a)
		return;
	IN_UTF8();
	if (a->a)
		archive_write_free(a->a);
	for (int i = 0; i < a->depth; i++)
		if (a->stack[i].d)
			closedir(a->stack[i].d);
	if (a->file_fd >= 0)
		close(a->file_fd);
	free(a->out);
	free(a->block);
	free(a);
}
