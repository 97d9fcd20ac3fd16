/* compat: other sandbox engines' wire protocols at the HTTP edge
 * (docs/compat.md), one sub-folder per engine, each under a path prefix of
 * deskboxd's own port:
 *
 *   /e2b/...                  E2B's control plane, envd and code interpreter (e2b/)
 *   /zeroboot/v1/...          Zeroboot's REST (zeroboot/)
 *   /daytona/api/...          Daytona's control plane (daytona/)
 *   /daytona/toolbox/{id}/... and its toolbox (the sandboxes' toolboxProxyUrl)
 *   /sprites/v1/...           Sprites' REST and exec WebSocket (sprites/)
 *   /opensandbox/v1/...       OpenSandbox's lifecycle API (opensandbox/)
 *   /opensandbox/execd/{id}/  and the execd each of its sandboxes has
 *
 * Each is a translator at the edge, a sibling of server/api/: it parses the
 * engine's requests and calls the subsystems (sandbox, process, files,
 * desktop) the way server/api/ does; no engine's names go below it.
 * Credentials are the API token under the engine's own header, errors have
 * the engine's own shape.  Two ways in: E2B's is a mount (http.h, struct
 * http_mount: its own route table, app context and error writer); the
 * others' routes are joined to the API's table (compat_routes_join), their
 * error shape chosen by prefix (compat_error_body).
 */
#ifndef DESKBOX_SERVER_COMPAT_H
#define DESKBOX_SERVER_COMPAT_H

#include <pthread.h>
#include <stddef.h>

#include "server/http/http.h"

/* http_opts.error_body: an error under one front-end's prefix in that
 * engine's shape. */
int compat_error_body(void *app, const char *path, const struct err *e, struct http_response *res);

/* http_opts.canon: names in the front-ends' sandbox ids become ids, and
 * api_canon_captures() for deskbox's own routes. */
void compat_canon_captures(void *app, const char *pattern, const char **captures, size_t n,
			   char *buf, size_t size);

/* `base` followed by every front-end's routes, in one malloc'd table (*n
 * entries, the caller frees); NULL when out of memory. */
struct http_route *compat_routes_join(const struct http_route *base, size_t n_base, size_t *n);

/* http_opts.rewrite with --ports-domain (app: the API's struct api):
 * api_ports_rewrite(), except that E2B's in-sandbox ports, envd's 49983 and
 * the code interpreter's 49999, go to the E2B front-end ("/e2b"; the SDK
 * names the sandbox in E2b-Sandbox-Id there too). */
int compat_ports_rewrite(void *app, const char *host, char *prefix, size_t size);

struct sandboxes;
struct api;

/* A program a front-end started (E2B's process list): its sandbox, its
 * pid inside it, its tag, the terminal it runs on (a PTY) and how it was
 * started (a JSON object, malloc'd). */
#define COMPAT_MAX_PROCS 256
struct compat_proc {
	char sandbox[40]; /* "" for a free slot */
	int pid;
	char tag[64];
	char term[24]; /* a terminal's id, "" for a background run */
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
	const char *ports_domain; /* --ports-domain, or NULL (set by main.c) */
	struct api *api;	  /* the native API's (templates), set by main.c */
	const char *token;	  /* the API token (E2B's signed URLs), set by main.c */
	pthread_mutex_t mu;	/* guards what follows; compat_init() */
	/* Programs started through a front-end (E2B's process list). */
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
