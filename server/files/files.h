/* files: the sandbox filesystem operations behind the files API.
 *
 * Every path a client sends is first made canonical by
 * files_path_normalize() (absolute, no "." / ".." / empty components,
 * relative paths taken against /workspace).  Every operation then resolves
 * it against `root`, an O_PATH directory fd of the sandbox's "/" (see
 * sandbox_open_root()), with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS):
 * "..", absolute symlinks and symlinks to /proc/N/root stay inside the
 * sandbox, whatever the sandbox swaps in while a request runs.  The last
 * component is never followed (O_NOFOLLOW / AT_SYMLINK_NOFOLLOW): an
 * operation on a symlink acts on the link.  Directory-changing operations
 * (mkdir, rename, unlink) run on a resolved parent directory fd and a single
 * name, so no path is looked up twice.
 *
 * Every operation runs with the thread's filesystem uid/gid set to the
 * sandbox user's host ids (struct files_root: IMAGE_USER_UID mapped through
 * the sandbox's user namespace): deskboxd can read and write exactly what
 * programs in the sandbox can, and what it creates belongs to them.
 *
 * Errors: ERR_NOT_FOUND (ENOENT), ERR_FORBIDDEN (EACCES, EPERM, EROFS),
 * ERR_CONFLICT (exists, not empty, is a directory), ERR_NO_SPACE (ENOSPC,
 * EDQUOT), ERR_INVALID (bad path, symlink as the last component, not a
 * directory, across filesystems).
 */
#ifndef DESKBOX_SERVER_FILES_H
#define DESKBOX_SERVER_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "common/error.h"

/* Uploads are written to "<dir>/.deskbox-upload-<16 hex>" and renamed into
 * place; files_sweep_temp() removes ones a crash left behind. */
#define FILES_TEMP_PREFIX ".deskbox-upload-"

/* Where relative paths start. */
#define FILES_HOME "/workspace"

/* Entries of one listing at most; past it the listing says "truncated". */
#define FILES_LIST_MAX 100000

/* Where operations happen and as whom. */
struct files_root {
	int fd;		   /* O_PATH fd of the sandbox's "/", owned by the caller */
	uint32_t uid, gid; /* host ids of the sandbox's user */
};

/* Turns a client path of `len` bytes into a canonical absolute path in
 * `out` (at most PATH_MAX bytes with the NUL).  ERR_INVALID for an empty
 * path, an embedded NUL, a ".." component, a component over NAME_MAX bytes
 * or a result over PATH_MAX - 1 bytes. */
int files_path_normalize(const char *in, size_t len, char *out, size_t out_size, struct err *e);

/* The last component of a canonical path (NULL for "/"), and its parent
 * copied into `parent`. */
const char *files_path_split(const char *canon, char *parent, size_t parent_size);

/* {"path"?, "name", "type", "size", "mode", "mtime"} for `st`; `path` may be
 * NULL (listing entries). */
cJSON *files_stat_json(const char *path, const char *name, const struct stat *st);

int files_stat(const struct files_root *root, const char *canon, struct stat *st, struct err *e);
/* *out: a JSON array of files_stat_json() entries sorted by name;
 * *truncated when the directory held more than FILES_LIST_MAX. */
int files_list(const struct files_root *root, const char *canon, cJSON **out, int *truncated,
	       struct err *e);
/* With `parents`, missing parents are created and an existing directory
 * is not an error.  *created says whether the last one was made. */
int files_mkdir(const struct files_root *root, const char *canon, int parents, int *created,
		struct err *e);
/* rename(2): replaces an existing file (or empty directory) at `to`. */
int files_move(const struct files_root *root, const char *from, const char *to, struct err *e);
/* unlink / rmdir; with `recursive`, a directory and everything in it. */
int files_remove(const struct files_root *root, const char *canon, int recursive, struct err *e);

/* Opens a regular file for reading: *fd (O_RDONLY, caller closes) and its
 * stat.  Anything else (directory, FIFO, socket, device, symlink) is
 * refused without being opened for reading, so a FIFO never blocks. */
int files_open_read(const struct files_root *root, const char *canon, int *fd, struct stat *st,
		    struct err *e);

/* An upload in progress: a temporary file next to its target. */
struct files_upload;

/* Creates the temporary file for `canon` (its parents too with
 * `parents`).  `mode` < 0: the existing file's mode, or 0644. */
int files_upload_begin(const struct files_root *root, const char *canon, int parents, int mode,
		       struct files_upload **out, struct err *e);
int files_upload_write(struct files_upload *u, const void *data, size_t len, struct err *e);
/* fsync, rename over the target, fsync of the directory. */
int files_upload_commit(struct files_upload *u, struct err *e);
/* Frees; an upload not committed has its temporary file removed. */
void files_upload_free(struct files_upload *u);

/* Host-side helpers on a sandbox's layer directory (its overlay upper
 * dir), walked by fd without following symlinks or crossing mounts. */
/* Removes every FILES_TEMP_PREFIX file under `dir`; only while nothing
 * runs in the sandbox. */
int files_sweep_temp(const char *dir, unsigned *removed, struct err *e);
/* Adds `shift` to every uid and gid from 1 to RUNTIME_USERNS_SIZE - 1 under
 * `dir` (the layer of a sandbox made before sandboxes had user namespaces,
 * moving its user's files into its new range; set-id bits are kept);
 * *changed counts the entries.  Only while nothing runs in the sandbox. */
int files_shift_owners(const char *dir, uint32_t shift, unsigned *changed, struct err *e);
/* The same for the layer of a fork: every uid and gid in from..from +
 * RUNTIME_USERNS_SIZE - 1 (its parent's range) moves to the same offset
 * from `to` (its own); host root stays. */
int files_remap_owners(const char *dir, uint32_t from, uint32_t to, unsigned *changed,
		       struct err *e);

#endif
