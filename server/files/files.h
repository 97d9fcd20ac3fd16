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

/* ---- archives (files_archive.c, files_unpack.c) ----
 *
 * A directory streams out as tar, tar.gz or zip (libarchive), walked by fd
 * in name order of readdir, never following a symlink (links are stored as
 * links) and never crossing into another mount (/proc, /dev, the /usr bind:
 * their directories are left out).  FIFOs, sockets and devices are left
 * out.  Archives come in through a spool file and are unpacked into a
 * temporary FILES_TEMP_PREFIX directory next to the target, which is
 * renamed into place only when every member was good: a bad archive leaves
 * nothing. */
enum files_archive_format {
	FILES_ARCHIVE_TAR,
	FILES_ARCHIVE_TGZ,
	FILES_ARCHIVE_ZIP,
};

/* Members of one archive at most, either way; past it a download is cut
 * off (the client sees a truncated archive) and an upload refused. */
#define FILES_ARCHIVE_MAX_MEMBERS 100000
/* Unpacked bytes of one archive at most (holes of sparse files included). */
#define FILES_ARCHIVE_MAX_BYTES (64ULL << 30)

/* "tar", "tar.gz" (or "tgz"), "zip": 0, else ERR_INVALID. */
int files_archive_format_parse(const char *name, enum files_archive_format *out, struct err *e);
/* "application/x-tar", "application/gzip", "application/zip". */
const char *files_archive_mime(enum files_archive_format f);

struct files_archive_out;
/* Opens directory `canon` for archiving.  Free with files_archive_out_free(). */
int files_archive_out_begin(const struct files_root *root, const char *canon,
			    enum files_archive_format f, struct files_archive_out **out,
			    struct err *e);
/* The next bytes of the archive into `buf`: their count (> 0), 0 at the
 * end, or -1 when it cannot go on (a read or libarchive failed, or over
 * FILES_ARCHIVE_MAX_MEMBERS). */
long files_archive_out_read(struct files_archive_out *a, char *buf, size_t max);
/* Members written so far. */
unsigned files_archive_out_members(const struct files_archive_out *a);
void files_archive_out_free(struct files_archive_out *a);

/* Space accounting for what an unpack writes (the sandbox's disk);
 * reserve and release may be NULL (no accounting). */
struct files_space {
	int (*reserve)(void *cls, uint64_t bytes, struct err *e);
	void (*release)(void *cls, uint64_t bytes);
	void *cls;
	/* Unpacked bytes at most, holes of sparse files included (which take
	 * no disk space, so the reservations alone do not stop a bomb of
	 * zeros); 0 or more than FILES_ARCHIVE_MAX_BYTES: that. */
	uint64_t max_bytes;
};

struct files_archive_in;
/* Checks that `canon` does not exist or is an empty directory (its
 * parents are made with `parents`) and creates the temporary directory
 * and spool file.  Free with files_archive_in_free(). */
int files_archive_in_begin(const struct files_root *root, const char *canon, int parents,
			   struct files_archive_in **out, struct err *e);
/* Appends body bytes to the spool. */
int files_archive_in_write(struct files_archive_in *a, const void *data, size_t len,
			   struct err *e);
/* Unpacks the spool and renames the result into place.  Every member is
 * checked: a relative name without "..", no member through a symlink, a
 * symlink target that stays inside the tree (relative, never above its
 * top), a hard link to an earlier member, no device, FIFO or socket
 * (ERR_INVALID); more than FILES_ARCHIVE_MAX_MEMBERS members or
 * the byte limit (ERR_TOO_LARGE); `space` refusing
 * (ERR_NO_SPACE).  Set-id and sticky bits are dropped; files belong to the
 * sandbox user.  *members and *bytes say what was unpacked. */
int files_archive_in_commit(struct files_archive_in *a, enum files_archive_format f,
			    const struct files_space *space, unsigned *members, uint64_t *bytes,
			    struct err *e);
/* Frees; an archive not committed has its temporary directory removed. */
void files_archive_in_free(struct files_archive_in *a);

/* ---- find, search, replace, chmod, chown (files_find.c, files_replace.c) ----
 *
 * Walks go by fd from a resolved directory, never following a symlink and
 * never into another mount, at most WALK_MAX_DEPTH (or `max_depth`) deep,
 * entries in readdir order. */

/* Files and directories under `canon` whose name matches the fnmatch(3)
 * `pattern` (NULL: all), at most `max_depth` levels below it (0: only its
 * entries) and `max_results` of them: *out is an array of
 * files_stat_json() entries with "path"; *truncated when there were more. */
int files_find(const struct files_root *root, const char *canon, const char *pattern,
	       unsigned max_depth, unsigned max_results, cJSON **out, int *truncated,
	       struct err *e);

struct files_search_opts {
	const char *pattern; /* literal text, or a POSIX extended regex */
	int regex, ignore_case;
	unsigned max_matches;	/* *truncated past it */
	uint64_t max_file_size; /* larger files are skipped */
	unsigned max_depth;
	unsigned timeout_ms; /* *truncated when the search ran this long */
};
/* Lines of the regular files at or under `canon` that match: *out is an
 * array of {"path","line","text"} (line from 1, text cut at
 * FILES_SEARCH_TEXT_MAX bytes).  Files with a NUL byte in their first
 * 8 KiB are binary and skipped, as are files over max_file_size.
 * ERR_INVALID for a regex that does not compile. */
#define FILES_SEARCH_TEXT_MAX 1024
int files_search(const struct files_root *root, const char *canon,
		 const struct files_search_opts *o, cJSON **out, int *truncated,
		 unsigned *files_scanned, struct err *e);

/* Replaces every match of `pattern` in the regular file `canon` (at most
 * FILES_REPLACE_MAX_SIZE bytes, not binary) with `replacement` and writes
 * the file back atomically (temporary file, rename), keeping its mode; a
 * file without a match is left untouched.  With `regex`, `pattern` is a
 * POSIX extended regex (per line: '^', '$' and '.' do not cross newlines)
 * and `\0`-`\9` in `replacement` are the match and its groups (`\\` a
 * backslash).  *count: the replacements made. */
#define FILES_REPLACE_MAX_SIZE (64u << 20)
/* ERR_INVALID (with regerror's words) unless `pattern` compiles as a POSIX
 * extended regex. */
int files_regex_check(const char *pattern, struct err *e);
int files_replace(const struct files_root *root, const char *canon, const char *pattern,
		  const char *replacement, int regex, unsigned *count, struct err *e);

/* chmod of `canon` (not of a symlink: ERR_INVALID) to `mode` (07777 at
 * most), as the sandbox user: only its own files (ERR_FORBIDDEN). */
int files_chmod(const struct files_root *root, const char *canon, unsigned mode, struct err *e);
/* chown of `canon` (a symlink itself, not followed) to `uid`:`gid` as
 * seen inside the sandbox.  Only the sandbox's own ids, root (0) and its
 * user (IMAGE_USER_UID), are allowed, as targets and as current owners:
 * ERR_FORBIDDEN for anything else.  The path is resolved as the sandbox
 * user; -1 keeps an id. */
int files_chown(const struct files_root *root, const char *canon, int64_t uid, int64_t gid,
		struct err *e);

/* ---- watching (files_watch.c) ----
 *
 * inotify on a directory resolved inside the sandbox's view (and, with
 * `recursive`, on every directory under it, by fd, never through a link or
 * into another mount, and on directories created or moved in later, whose
 * entries found when their watch is added are reported as "create").
 * Events are JSON objects {"type","path","dir"} with type "create",
 * "modify", "delete" or "move" (with "from" and "to" instead of "path"),
 * or {"type":"overflow"} when events were lost: the kernel's queue filled,
 * or more than FILES_WATCH_BATCH came at once, or more than
 * FILES_WATCH_MAX_DIRS directories would be watched.  Repeated "modify"
 * events of one file in a batch are sent once. */
#define FILES_WATCH_BATCH    1024
#define FILES_WATCH_MAX_DIRS 8192

struct files_watch;
/* ERR_LIMIT when the host's inotify instances or watches ran out. */
int files_watch_open(const struct files_root *root, const char *canon, int recursive,
		     struct files_watch **out, struct err *e);
/* Waits up to `timeout_ms` for events and appends them to the array
 * `events` (at most FILES_WATCH_BATCH and one overflow).  Returns how many
 * were added, or -1 once the watched directory itself is gone (deleted or
 * moved away; a last "delete" event is added). */
int files_watch_next(struct files_watch *w, int timeout_ms, cJSON *events);
void files_watch_free(struct files_watch *w);

/* ---- resumable uploads (files_partial.c) ----
 *
 * The bytes of an upload sent in pieces live in a staging file next to
 * the target, "<dir>/.deskbox-partial-<16 hex of the name's SHA-256>"
 * (the sandbox user's, 0600), until the last piece renames it onto the
 * target.  It counts against the sandbox's disk like any file, survives
 * restarts of deskboxd, and is removed when complete, discarded, or left
 * untouched for FILES_PARTIAL_STALE_S (by the next resumable upload into
 * that directory, and by files_sweep_temp() at start). */
#define FILES_PARTIAL_PREFIX  ".deskbox-partial-"
#define FILES_PARTIAL_STALE_S (24 * 3600)

struct files_partial;
/* Opens the staging file of `canon`, created empty when missing (its
 * parents too with `parents`); *size is what it holds.  It is locked
 * until freed: ERR_CONFLICT while another piece is being written. */
int files_partial_open(const struct files_root *root, const char *canon, int parents,
		       struct files_partial **out, uint64_t *size, struct err *e);
/* Cuts the staging file to `offset` bytes (at most its size) and appends
 * from there. */
int files_partial_truncate(struct files_partial *p, uint64_t offset, struct err *e);
int files_partial_write(struct files_partial *p, const void *data, size_t len, struct err *e);
/* The SHA-256 of everything staged, as 64 lowercase hex digits. */
int files_partial_sha256(struct files_partial *p, char hex[65], struct err *e);
/* fsync, chmod to `mode` (< 0: the replaced file's mode, else 0644),
 * rename over the target, fsync of the directory. */
int files_partial_commit(struct files_partial *p, int mode, struct err *e);
/* Removes the staging file. */
void files_partial_discard(struct files_partial *p);
/* Closes; the staging file stays unless committed or discarded. */
void files_partial_free(struct files_partial *p);
/* What the staging file of `canon` holds: 1 with *size and *mtime, 0 when
 * there is none. */
int files_partial_status(const struct files_root *root, const char *canon, uint64_t *size,
			 int64_t *mtime, struct err *e);

/* Host-side helpers on a sandbox's layer directory (its overlay upper
 * dir), walked by fd without following symlinks or crossing mounts. */
/* Removes every FILES_TEMP_PREFIX file (and directory) under `dir`, and
 * the FILES_PARTIAL_PREFIX files older than FILES_PARTIAL_STALE_S; only
 * while nothing runs in the sandbox. */
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
