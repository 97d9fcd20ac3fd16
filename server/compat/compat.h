/* compat: other sandbox engines' wire protocols at the HTTP edge.
 *
 * Each engine is one sub-folder (server/compat/e2b/, …) translating that
 * engine's requests onto the subsystems the native API calls (sandbox,
 * process, files, desktop), never the other way: no engine's names below
 * this folder.  Each is served under its own path prefix ("/e2b") on
 * deskboxd's port, behind the same API token in the engine's own header,
 * with errors in the engine's own shape (http.h, struct http_mount).
 * docs/compat.md lists, per engine, every call and how it is mapped.
 */
#ifndef DESKBOX_SERVER_COMPAT_H
#define DESKBOX_SERVER_COMPAT_H

#include <pthread.h>
#include <stddef.h>

#include "server/http/http.h"

struct sandboxes;

/* A program a front-end started and streams: its sandbox, its pid inside
 * it and how it was started (a JSON object, malloc'd). */
#define COMPAT_MAX_PROCS 256
struct compat_proc {
	char sandbox[40]; /* "" for a free slot */
	int pid;
	char *config;
};

/* The code context a sandbox's runs go to when they name none (E2B's
 * runCode without a context), made at the first such run. */
#define COMPAT_MAX_DEFAULT_CTX 256
struct compat_default_ctx {
	char sandbox[40]; /* a sandbox id, "" for a free slot */
	char ctx[24];	  /* its context's id */
};

/* What every front-end's handlers reach through http_request.app; the
 * pointers are borrowed from main.c, which outlives the HTTP server. */
struct compat {
	struct sandboxes *sandboxes;
	int exec_timeout_max_s; /* the longest run a front-end may ask for */
	size_t exec_max_output; /* output kept of a run that is not streamed */
	pthread_mutex_t mu;	/* guards what follows; compat_init() */
	/* Programs being streamed to a client (E2B's process list). */
	struct compat_proc procs[COMPAT_MAX_PROCS];
	struct compat_default_ctx default_ctx[COMPAT_MAX_DEFAULT_CTX];
	unsigned next_evict; /* the slot a full table gives up next */
};

/* Fills `c` (its mutex too) for the registry `s`. */
void compat_init(struct compat *c, struct sandboxes *s, int exec_timeout_max_s,
		 size_t exec_max_output);

#define COMPAT_MAX_MOUNTS 8

/* Fills `out` (room for `max`) with one mount per front-end, each with
 * `c` as its app; returns how many. */
size_t compat_mounts(struct compat *c, struct http_mount *out, size_t max);

#endif
