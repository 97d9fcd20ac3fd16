/* runtime internals shared by runtime.c, runtime_bundle.c and
 * runtime_seccomp.c.  Not part of the server's interface. */
#ifndef DESKBOX_SERVER_RUNTIME_INTERNAL_H
#define DESKBOX_SERVER_RUNTIME_INTERNAL_H

#include <cjson/cJSON.h>

/* The OCI `linux.seccomp` object of every sandbox: Docker's default profile
 * for a container without capabilities (an allowlist, everything else fails
 * with EPERM).  Returns a new object the caller owns, or NULL when out of
 * memory. */
cJSON *runtime_seccomp_json(void);

#endif
