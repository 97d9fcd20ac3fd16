/* files: find, search, chmod and chown inside a sandbox (see files.h).
 *
 * SECURITY: walks start at a directory resolved with files_resolve() and
 * go on by fd, one name at a time, with O_NOFOLLOW: a symlink is reported
 * (find) but never followed, whatever the sandbox swaps in meanwhile. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "internal.h"
#include "server/runtime/runtime.h"

/* The longest piece of a line a search matches at once. */
#define LINE_MAX_SEARCH (64 * 1024)

/* What a search reads of a file to call it binary. */
#define BINARY_PROBE 8192

/* Called for each entry of a walk with its directory fd, name, stat and
 * full path; a nonzero return stops the walk. */
typedef int (*walk_fn)(void *cls, int dfd, const char *name, const struct stat *st,
		       const char *path);

struct walker {
	dev_t dev;
	unsigned max_depth;
	walk_fn fn;
	void *cls;
};

static int walk(struct walker *w, int dfd, char *path, size_t plen, unsigned depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	int stop = 0;
	struct dirent *de;
	while (!stop && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		size_t nl = strlen(de->d_name);
		if (plen + 1 + nl >= PATH_MAX)
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		path[plen] = '/';
		memcpy(path + plen + 1, de->d_name, nl + 1);
		size_t nlen = plen + 1 + nl;
		/* "/" + name, not "//name", at the top. */
		if (plen == 1 && path[0] == '/') {
			memmove(path + 1, path + 2, nl + 1);
			nlen = nl + 1;
		}
		stop = w->fn(w->cls, dirfd(d), de->d_name, &st, path);
		if (!stop && S_ISDIR(st.st_mode) && st.st_dev == w->dev && depth < w->max_depth &&
		    depth < WALK_MAX_DEPTH) {
			int cfd = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd >= 0)
				stop = walk(w, cfd, path, nlen, depth + 1);
		}
		path[plen] = '\0';
	}
	closedir(d);
	return stop;
}

/* Walks the directory `canon` (as the sandbox user: the caller is). */
static int walk_top(const struct files_root *fr, const char *canon, struct walker *w,
		    struct err *e)
{
	int fd = files_resolve(fr->fd, canon, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int r = files_fail(e, fd < 0 ? -fd : errno, "walking", canon);
		if (fd >= 0)
			close(fd);
		return r;
	}
	w->dev = st.st_dev;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", canon);
	walk(w, fd, path, strlen(path), 0);
	return 0;
}

/* ---- find ---- */

struct find {
	const char *pattern;
	unsigned max;
	cJSON *arr;
	unsigned n;
	int truncated, oom;
};

static int find_one(void *cls, int dfd, const char *name, const struct stat *st, const char *path)
{
	struct find *f = cls;
	if (f->pattern && fnmatch(f->pattern, name, 0) != 0)
		return 0;
	if (f->n >= f->max) {
		f->truncated = 1;
		return 1;
	}
	cJSON *j = files_stat_json(path, name, st);
	if (!j) {
		f->oom = 1;
		return 1;
	}
	cJSON_AddItemToArray(f->arr, j);
	f->n++;
	return 0;
}

int files_find(const struct files_root *fr, const char *canon, const char *pattern,
	       unsigned max_depth, unsigned max_results, cJSON **out, int *truncated,
	       struct err *e)
{
	AS_USER(fr);
	struct find f = {.pattern = pattern && *pattern ? pattern : NULL,
			 .max = max_results,
			 .arr = cJSON_CreateArray()};
	if (!f.arr)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	struct walker w = {.max_depth = max_depth, .fn = find_one, .cls = &f};
	if (walk_top(fr, canon, &w, e) < 0 || f.oom) {
		cJSON_Delete(f.arr);
		return f.oom ? err_set(e, ERR_INTERNAL, ENOMEM, "out of memory") : err_code(e);
	}
	*out = f.arr;
	*truncated = f.truncated;
	return 0;
}

/* ---- search ---- */

struct search {
	const struct files_search_opts *o;
	regex_t re;
	cJSON *arr;
	unsigned n, files;
	int truncated, oom;
	long long deadline;
	char *line; /* LINE_MAX_SEARCH + 1 bytes */
};

static int line_matches(struct search *s, const char *line)
{
	if (s->o->regex)
		return regexec(&s->re, line, 0, NULL, 0) == 0;
	return (s->o->ignore_case ? strcasestr(line, s->o->pattern)
				  : strstr(line, s->o->pattern)) != NULL;
}

static int add_match(struct search *s, const char *path, unsigned long lineno, const char *text,
		     size_t len)
{
	if (s->n >= s->o->max_matches) {
		s->truncated = 1;
		return 1;
	}
	char cut[FILES_SEARCH_TEXT_MAX + 1];
	if (len > FILES_SEARCH_TEXT_MAX)
		len = FILES_SEARCH_TEXT_MAX;
	memcpy(cut, text, len);
	cut[len] = '\0';
	cJSON *j = cJSON_CreateObject();
	if (!j || !cJSON_AddStringToObject(j, "path", path) ||
	    !cJSON_AddNumberToObject(j, "line", (double)lineno) ||
	    !cJSON_AddStringToObject(j, "text", cut)) {
		cJSON_Delete(j);
		s->oom = 1;
		return 1;
	}
	cJSON_AddItemToArray(s->arr, j);
	s->n++;
	return 0;
}

/* Searches one open regular file, line by line.  A line longer than
 * LINE_MAX_SEARCH is matched in pieces of that size (memory stays bounded
 * whatever the file holds; a match across two pieces is missed). */
static int search_file(struct search *s, FILE *f, const char *path)
{
	char probe[BINARY_PROBE];
	size_t got = fread(probe, 1, sizeof(probe), f);
	if (memchr(probe, '\0', got))
		return 0;
	rewind(f);
	s->files++;
	unsigned long lineno = 1, pieces = 0;
	while (fgets(s->line, LINE_MAX_SEARCH + 1, f)) {
		size_t len = strlen(s->line);
		int whole = len && s->line[len - 1] == '\n';
		if (whole)
			s->line[--len] = '\0';
		/* A NUL past the probe: matching stops at it, as grep -a would
		 * not, but never reads past the piece. */
		if (line_matches(s, s->line) && add_match(s, path, lineno, s->line, len))
			return 1;
		if (whole)
			lineno++;
		if ((++pieces & 1023) == 0 && clock_mono_ms() > s->deadline) {
			s->truncated = 1;
			return 1;
		}
	}
	return 0;
}

static int search_one(void *cls, int dfd, const char *name, const struct stat *st,
		      const char *path)
{
	struct search *s = cls;
	if (clock_mono_ms() > s->deadline) {
		s->truncated = 1;
		return 1;
	}
	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_size > s->o->max_file_size)
		return 0;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat fst;
	if (fd < 0)
		return 0;
	if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode)) {
		close(fd);
		return 0;
	}
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return 0;
	}
	int stop = search_file(s, f, path);
	fclose(f);
	return stop;
}

/* `canon` itself when it is a regular file, else a walk under it. */
static int search_top(const struct files_root *fr, const char *canon, struct search *s,
		      struct err *e)
{
	_cleanup_fd_ int pfd = files_resolve(fr->fd, canon, O_PATH | O_NOFOLLOW, 0);
	struct stat st;
	if (pfd < 0 || fstat(pfd, &st) < 0)
		return files_fail(e, pfd < 0 ? -pfd : errno, "searching", canon);
	if (!S_ISDIR(st.st_mode)) {
		const char *name;
		_cleanup_fd_ int dfd = files_resolve_parent(fr->fd, canon, &name, e);
		if (dfd < 0)
			return dfd;
		search_one(s, dfd, name, &st, canon);
		return 0;
	}
	struct walker w = {.max_depth = s->o->max_depth, .fn = search_one, .cls = s};
	return walk_top(fr, canon, &w, e);
}

int files_search(const struct files_root *fr, const char *canon,
		 const struct files_search_opts *o, cJSON **out, int *truncated,
		 unsigned *files_scanned, struct err *e)
{
	AS_USER(fr);
	struct search s = {.o = o, .deadline = clock_mono_ms() + o->timeout_ms};
	if (!(s.line = malloc(LINE_MAX_SEARCH + 1)))
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (o->regex) {
		int flags = REG_EXTENDED | REG_NOSUB | (o->ignore_case ? REG_ICASE : 0);
		int rc = regcomp(&s.re, o->pattern, flags);
		if (rc != 0) {
			char msg[128];
			regerror(rc, &s.re, msg, sizeof(msg));
			regfree(&s.re);
			free(s.line);
			return err_set(e, ERR_INVALID, EINVAL,
				       "query parameter 'pattern': bad regex: %s", msg);
		}
	}
	int r = -1;
	if (!(s.arr = cJSON_CreateArray()))
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	else if ((r = search_top(fr, canon, &s, e)) == 0 && s.oom)
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (o->regex)
		regfree(&s.re);
	free(s.line);
	if (r < 0) {
		cJSON_Delete(s.arr);
		return r;
	}
	*out = s.arr;
	*truncated = s.truncated;
	*files_scanned = s.files;
	return 0;
}

/* ---- chmod, chown ---- */

int files_chmod(const struct files_root *fr, const char *canon, unsigned mode, struct err *e)
{
	AS_USER(fr);
	if (mode > 07777)
		return err_set(e, ERR_INVALID, EINVAL, "mode must be at most 07777");
	_cleanup_fd_ int fd = files_resolve(fr->fd, canon, O_PATH | O_NOFOLLOW, 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return files_fail(e, fd < 0 ? -fd : errno, "chmod", canon);
	if (S_ISLNK(st.st_mode))
		return err_set(e, ERR_INVALID, ELOOP,
			       "'%s' is a symbolic link (links have no mode of their own)", canon);
	/* Through our own fd's link: the very inode resolved above. */
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	if (chmod(self, mode) < 0)
		return files_fail(e, errno, "chmod", canon);
	return 0;
}

/* Inside id (0 or IMAGE_USER_UID) to host id; UINT32_MAX when not one of
 * the sandbox's. */
static uint32_t host_id(uint32_t user_host, int64_t inside)
{
	uint32_t base = user_host - IMAGE_USER_UID;
	if (inside == 0)
		return base;
	if (inside == IMAGE_USER_UID)
		return user_host;
	return UINT32_MAX;
}

static int own_id(uint32_t user_host, uint32_t host)
{
	return host == user_host || host == user_host - IMAGE_USER_UID;
}

int files_chown(const struct files_root *fr, const char *canon, int64_t uid, int64_t gid,
		struct err *e)
{
	uint32_t hu = uid < 0 ? (uint32_t)-1 : host_id(fr->uid, uid);
	uint32_t hg = gid < 0 ? (uint32_t)-1 : host_id(fr->gid, gid);
	if ((uid >= 0 && hu == UINT32_MAX) || (gid >= 0 && hg == UINT32_MAX))
		return err_set(e, ERR_FORBIDDEN, EPERM,
			       "only the sandbox's own ids may own its files: 0 (root) or %u "
			       "(its user)",
			       IMAGE_USER_UID);
	int fd;
	{
		AS_USER(fr);
		fd = files_resolve(fr->fd, canon, O_PATH | O_NOFOLLOW, 0);
	}
	_cleanup_fd_ int pfd = fd;
	struct stat st;
	if (pfd < 0 || fstat(pfd, &st) < 0)
		return files_fail(e, pfd < 0 ? -pfd : errno, "chown", canon);
	if (!own_id(fr->uid, st.st_uid) || !own_id(fr->gid, st.st_gid))
		return err_set(e, ERR_FORBIDDEN, EPERM,
			       "'%s' belongs to an id outside the sandbox's own", canon);
	/* As deskboxd: the user may not give a file away, root inside may. */
	if (fchownat(pfd, "", hu, hg, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return files_fail(e, errno, "chown", canon);
	return 0;
}
