/* fs: small filesystem helpers with deskbox's error contract. */
#ifndef DESKBOX_COMMON_FS_H
#define DESKBOX_COMMON_FS_H

#include <stddef.h>
#include <sys/types.h>

#include "error.h"

/* Writes `len` bytes to `path` atomically and durably: a temporary file in
 * the same directory, fsync, rename over `path`, fsync of the directory.
 * A crash leaves either the old or the new content, never a mix. */
int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode, struct err *e);

/* Reads a whole file of at most `max` bytes; *out is malloc'd and
 * NUL-terminated (caller frees). */
int fs_read_file(const char *path, size_t max, char **out, size_t *len, struct err *e);

/* mkdir -p with `mode` for the directories it creates. */
int fs_mkdir_p(const char *path, mode_t mode, struct err *e);

/* rm -rf that never crosses a mount point and never follows symlinks.
 * A missing path is not an error. */
int fs_remove_tree(const char *path, struct err *e);

/* Fills `buf` with `n` bytes from getrandom(). */
int fs_random(void *buf, size_t n, struct err *e);

/* Lowercase hex of `n` random bytes into `out` (2n+1 bytes). */
int fs_random_hex(char *out, size_t n, struct err *e);

#endif
