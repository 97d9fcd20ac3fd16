/* runtime internals shared by runtime.c, runtime_bundle.c and
 * runtime_seccomp.c.  Not part of the server's interface. */
#ifndef DESKBOX_SERVER_RUNTIME_INTERNAL_H
#define DESKBOX_SERVER_RUNTIME_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "common/error.h"

/* The OCI `linux.seccomp` object of every sandbox: Docker's default profile
 * for a container without capabilities (an allowlist, everything else fails
 * with EPERM), with chroot(2) allowed when `allow_chroot`.  Returns a new
 * object the caller owns, or NULL when out of memory. */
cJSON *runtime_seccomp_json(int allow_chroot);

/* /etc/chromium.d/deskbox: the flags chromium gets in a sandbox
 * (runtime_image.c); the Debian image has it too. */
extern const char image_chromium_flags[];

/* Finishes an image made in `tmp` (<state>/images/.tmp-...; holding
 * rootfs/): adds deskbox's mount points and user, fills in `manifest`'s
 * name, size_bytes, created_at and tools, writes manifest.json and renames
 * `tmp` to <state>/images/<name>.  Takes `manifest` (NULL on failure, kept
 * and returned in *out on success).  ERR_CONFLICT if the name is taken. */
int image_finish(const char *state_dir, const char *name, const char *tmp, cJSON *manifest,
		 cJSON **out, struct err *e);

/* Creates <state>/images/.tmp-<name>-XXXXXX (0755) into `tmp`. */
int image_tmp_dir(const char *state_dir, const char *name, char *tmp, size_t size, struct err *e);

/* "<state>/images" into buf. */
void image_dir(const char *state_dir, char *buf, size_t size);

#endif
