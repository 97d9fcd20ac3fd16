/* files: watching a directory with inotify (see files.h).
 *
 * Watches are added through "/proc/self/fd/N" of a directory fd that
 * files_resolve() returned, so the inode watched is the one inside the
 * sandbox's view whatever the path's symlinks say; subdirectories are
 * opened one name at a time with O_NOFOLLOW.  Each watch descriptor maps
 * to the directory's path inside the sandbox, kept current when a watched
 * directory is moved within the tree. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "internal.h"

#define MASK                                                                                       \
	(IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |        \
	 IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)
/* No IN_DONT_FOLLOW: the path watched is our own /proc/self/fd link, which
 * must be followed to the directory it stands for. */
/* How long a move's first half waits for its second before it counts as
 * a delete (moved out of the tree). */
#define MOVE_PAIR_MS 20

struct wdir {
	int wd;
	char *path;
};

struct files_watch {
	int ifd;
	int root; /* a dup of the sandbox's root fd */
	struct files_root owner;
	int recursive;
	dev_t dev;
	int top_wd;
	struct wdir *dirs;
	size_t n, cap;
	int overflow; /* an overflow event is owed */
	/* The first half of a move, waiting for its second. */
	uint32_t cookie;
	char *from;
	int from_dir;
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
};

static struct wdir *find_wd(struct files_watch *w, int wd)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->dirs[i].wd == wd)
			return &w->dirs[i];
	return NULL;
}

static int remember(struct files_watch *w, int wd, const char *path)
{
	struct wdir *d = find_wd(w, wd);
	if (d) {
		char *np = strdup(path);
		if (!np)
			return -ENOMEM;
		free(d->path);
		d->path = np;
		return 0;
	}
	if (w->n == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 16;
		struct wdir *nd = realloc(w->dirs, nc * sizeof(*nd));
		if (!nd)
			return -ENOMEM;
		w->dirs = nd;
		w->cap = nc;
	}
	if (!(w->dirs[w->n].path = strdup(path)))
		return -ENOMEM;
	w->dirs[w->n++].wd = wd;
	return 0;
}

static void emit(struct files_watch *w, cJSON *events, const char *type, const char *path,
		 const char *to, int dir);

/* Watches directory `fd` (at `path`); with `recursive`, its
 * subdirectories too.  With `events` (a directory that just appeared), a
 * "create" for each entry found in it: they may have been made before its
 * watch was in place.  Returns the wd or -errno. */
static int add_dir(struct files_watch *w, int fd, const char *path, int depth, cJSON *events)
{
	if (w->n >= FILES_WATCH_MAX_DIRS) {
		w->overflow = 1;
		return -ENOSPC;
	}
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	int wd = inotify_add_watch(w->ifd, self, MASK);
	if (wd < 0)
		return -errno;
	if (remember(w, wd, path) < 0)
		return -ENOMEM;
	if (!w->recursive || depth >= WALK_MAX_DEPTH)
		return wd;
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return wd;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		char sub[PATH_MAX];
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    snprintf(sub, sizeof(sub), "%s/%s", strcmp(path, "/") ? path : "",
			     de->d_name) >= (int)sizeof(sub))
			continue;
		if (events)
			emit(w, events, "create", sub, NULL, S_ISDIR(st.st_mode));
		if (!S_ISDIR(st.st_mode) || st.st_dev != w->dev)
			continue;
		_cleanup_fd_ int cfd =
		    openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd >= 0)
			add_dir(w, cfd, sub, depth + 1, events);
	}
	closedir(d);
	return wd;
}

int files_watch_open(const struct files_root *fr, const char *canon, int recursive,
		     struct files_watch **out, struct err *e)
{
	AS_USER(fr);
	struct files_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	w->owner = (struct files_root){-1, fr->uid, fr->gid};
	w->recursive = recursive;
	w->root = w->ifd = -1;
	int r;
	_cleanup_fd_ int fd = files_resolve(fr->fd, canon, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = files_fail(e, fd < 0 ? -fd : errno, "watching", canon);
		goto fail;
	}
	w->dev = st.st_dev;
	w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->ifd < 0) {
		r = errno == EMFILE || errno == ENFILE
			? err_set(e, ERR_LIMIT, errno, "no inotify instance left on the host")
			: err_sys(e, ERR_INTERNAL, errno, "inotify_init");
		goto fail;
	}
	if ((w->root = fcntl(fr->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		r = err_sys(e, ERR_INTERNAL, errno, "dup");
		goto fail;
	}
	if ((w->top_wd = add_dir(w, fd, canon, 0, NULL)) < 0) {
		r = w->top_wd == -ENOSPC ? err_set(e, ERR_LIMIT, ENOSPC, "no inotify watch left")
					 : files_fail(e, -w->top_wd, "watching", canon);
		goto fail;
	}
	*out = w;
	return 0;
fail:
	files_watch_free(w);
	return r;
}

/* ---- events ---- */

static void emit(struct files_watch *w, cJSON *events, const char *type, const char *path,
		 const char *to, int dir)
{
	int n = cJSON_GetArraySize(events);
	if (n >= FILES_WATCH_BATCH) {
		w->overflow = 1;
		return;
	}
	/* The same file modified again in this batch: once is enough. */
	cJSON *last = n ? cJSON_GetArrayItem(events, n - 1) : NULL;
	if (last && strcmp(type, "modify") == 0 &&
	    strcmp(cJSON_GetObjectItem(last, "type")->valuestring, "modify") == 0 &&
	    strcmp(cJSON_GetObjectItem(last, "path")->valuestring, path) == 0)
		return;
	cJSON *j = cJSON_CreateObject();
	if (!j) {
		w->overflow = 1;
		return;
	}
	cJSON_AddStringToObject(j, "type", type);
	if (to) {
		cJSON_AddStringToObject(j, "from", path);
		cJSON_AddStringToObject(j, "to", to);
	} else {
		cJSON_AddStringToObject(j, "path", path);
	}
	cJSON_AddBoolToObject(j, "dir", dir);
	cJSON_AddItemToArray(events, j);
}

/* A new directory in the tree (created or moved in): watched too. */
static void watch_new(struct files_watch *w, const char *path, cJSON *events)
{
	if (!w->recursive)
		return;
	_cleanup_fd_ int fd = files_resolve(w->root, path, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == w->dev)
		add_dir(w, fd, path, 0, events);
}

/* A watched directory moved from `from` to `to`: its paths follow. */
static void rename_dirs(struct files_watch *w, const char *from, const char *to)
{
	size_t fl = strlen(from);
	for (size_t i = 0; i < w->n; i++) {
		const char *p = w->dirs[i].path;
		if (strncmp(p, from, fl) != 0 || (p[fl] != '\0' && p[fl] != '/'))
			continue;
		char np[PATH_MAX];
		if (snprintf(np, sizeof(np), "%s%s", to, p + fl) >= (int)sizeof(np))
			continue;
		char *dup = strdup(np);
		if (dup) {
			free(w->dirs[i].path);
			w->dirs[i].path = dup;
		}
	}
}

/* The first half of a move that found no second: moved out, a delete. */
static void flush_from(struct files_watch *w, cJSON *events)
{
	if (!w->from)
		return;
	emit(w, events, "delete", w->from, NULL, w->from_dir);
	free(w->from);
	w->from = NULL;
}

static void forget(struct files_watch *w, int wd)
{
	for (size_t i = 0; i < w->n; i++) {
		if (w->dirs[i].wd != wd)
			continue;
		free(w->dirs[i].path);
		w->dirs[i] = w->dirs[--w->n];
		return;
	}
}

/* One inotify event; 1 when the top directory is gone. */
static int one_event(struct files_watch *w, const struct inotify_event *ev, cJSON *events)
{
	if (ev->mask & IN_Q_OVERFLOW) {
		w->overflow = 1;
		return 0;
	}
	struct wdir *d = find_wd(w, ev->wd);
	if (ev->mask & IN_IGNORED) {
		forget(w, ev->wd);
		return ev->wd == w->top_wd;
	}
	if (!d)
		return 0;
	if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
		if (ev->wd != w->top_wd)
			return 0; /* its parent reports it */
		emit(w, events, "delete", d->path, NULL, 1);
		return 1;
	}
	char path[PATH_MAX];
	if (!ev->len || snprintf(path, sizeof(path), "%s/%s", strcmp(d->path, "/") ? d->path : "",
				 ev->name) >= (int)sizeof(path))
		return 0;
	int dir = (ev->mask & IN_ISDIR) != 0;
	if (w->from && !((ev->mask & IN_MOVED_TO) && ev->cookie == w->cookie))
		flush_from(w, events);
	if (ev->mask & IN_MOVED_FROM) {
		w->from = strdup(path);
		w->cookie = ev->cookie;
		w->from_dir = dir;
	} else if (ev->mask & IN_MOVED_TO) {
		if (w->from) {
			emit(w, events, "move", w->from, path, dir);
			if (dir)
				rename_dirs(w, w->from, path);
			free(w->from);
			w->from = NULL;
		} else {
			emit(w, events, "create", path, NULL, dir);
			if (dir)
				watch_new(w, path, events);
		}
	} else if (ev->mask & IN_CREATE) {
		emit(w, events, "create", path, NULL, dir);
		if (dir)
			watch_new(w, path, events);
	} else if (ev->mask & IN_MODIFY) {
		emit(w, events, "modify", path, NULL, dir);
	} else if (ev->mask & IN_DELETE) {
		emit(w, events, "delete", path, NULL, dir);
	}
	return 0;
}

/* Reads what is queued; 1 when the top is gone, -1 when nothing was. */
static int drain(struct files_watch *w, cJSON *events)
{
	ssize_t n = read(w->ifd, w->buf, sizeof(w->buf));
	if (n <= 0)
		return -1;
	for (char *p = w->buf; p < w->buf + n;) {
		const struct inotify_event *ev = (const struct inotify_event *)p;
		if (one_event(w, ev, events))
			return 1;
		p += sizeof(*ev) + ev->len;
	}
	return 0;
}

int files_watch_next(struct files_watch *w, int timeout_ms, cJSON *events)
{
	AS_USER(&w->owner);
	int before = cJSON_GetArraySize(events);
	struct pollfd p = {w->ifd, POLLIN, 0};
	int gone = 0;
	if (poll(&p, 1, timeout_ms) > 0)
		gone = drain(w, events) == 1;
	/* A move's second half comes right after the first, maybe in the
	 * next read: give it a moment. */
	while (!gone && w->from && poll(&p, 1, MOVE_PAIR_MS) > 0) {
		int r = drain(w, events);
		if (r != 0) {
			gone = r == 1;
			break;
		}
	}
	if (!gone)
		flush_from(w, events);
	if (w->overflow) {
		w->overflow = 0;
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "type", "overflow");
		cJSON_AddItemToArray(events, j);
	}
	if (gone)
		return -1;
	return cJSON_GetArraySize(events) - before;
}

void files_watch_free(struct files_watch *w)
{
	if (!w)
		return;
	if (w->ifd >= 0)
		close(w->ifd);
	if (w->root >= 0)
		close(w->root);
	for (size_t i = 0; i < w->n; i++)
		free(w->dirs[i].path);
	free(w->dirs);
	free(w->from);
	free(w);
}
