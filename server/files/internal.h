/* Shared by the files module's own .c files (files*.c); not used elsewhere.
 * The one path resolver and error mapping of files.c, so that every
 * operation resolves client paths the same way. */
#ifndef DESKBOX_SERVER_FILES_INTERNAL_H
#define DESKBOX_SERVER_FILES_INTERNAL_H

#include <locale.h>
#include <sys/types.h>

#include "files.h"

/* Deeper trees are not walked (usage, sweep, archives, find) or removed:
 * each level holds an fd. */
#define WALK_MAX_DEPTH 256

/* setfsuid/setfsgid are per thread: only this request's thread acts as the
 * sandbox user, until the scope ends. */
struct files_cred {
	int uid, gid;
};
struct files_cred files_as_user(uint32_t uid, uint32_t gid);
void files_as_self(const struct files_cred *c);
#define _cleanup_cred_ __attribute__((cleanup(files_as_self)))
#define AS_USER(fr)    _cleanup_cred_ struct files_cred cred_ = files_as_user((fr)->uid, (fr)->gid)

/* libarchive converts names through the thread's locale, and deskboxd runs
 * in "C" (ASCII), where a non-ASCII name makes it fail (or crash on a NULL
 * name).  Archive code runs with the thread's LC_CTYPE set to C.UTF-8 for
 * the scope. */
struct files_locale {
	locale_t old;
};
struct files_locale files_utf8_enter(void);
void files_utf8_leave(const struct files_locale *l);
#define IN_UTF8()                                                                                  \
	__attribute__((cleanup(files_utf8_leave))) struct files_locale loc_ = files_utf8_enter()

/* Maps an errno from an operation on `path` to the error kinds of files.h. */
int files_fail(struct err *e, int errnum, const char *what, const char *path);

/* openat2 relative to `root` with the sandbox's "/" as the root of every
 * lookup (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS).  Returns the fd or
 * -errno. */
int files_resolve(int root, const char *canon, int flags, mode_t mode);
/* The parent directory of `canon` as an O_PATH fd, and the last name. */
int files_resolve_parent(int root, const char *canon, const char **name, struct err *e);
/* mkdir -p of `canon`, one component at a time, each resolved again. */
int files_mkdir_parents(int root, const char *canon, struct err *e);
/* Removes `name` in `dfd` and, if it is a directory, everything under it
 * (never following links, at most WALK_MAX_DEPTH deep).  0 or -errno. */
int files_remove_at(int dfd, const char *name, int depth);

#endif
