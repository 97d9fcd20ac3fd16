/* compat: front-ends that speak other sandbox engines' wire protocols
 * (docs/compat-*.md), one sub-folder each, mounted under a path prefix of
 * deskboxd's own port:
 *
 *   /zeroboot/v1/...          Zeroboot's REST (zeroboot/)
 *   /daytona/api/...          Daytona's control plane (daytona/)
 *   /daytona/toolbox/{id}/... and its toolbox (the sandboxes' toolboxProxyUrl)
 *   /sprites/v1/...           Sprites' REST and exec WebSocket (sprites/)
 *   /opensandbox/v1/...       OpenSandbox's lifecycle API (opensandbox/)
 *   /opensandbox/execd/{id}/  and the execd each of its sandboxes has
 *
 * Each is a translator at the edge, a sibling of server/api/: it parses the
 * engine's requests and calls the subsystems (sandbox, process, files,
 * desktop) the way server/api/ does; no engine's names go below it.  Its
 * errors have the engine's own shape (compat_error_body), credentials are
 * the API token under the engine's header. */
#ifndef DESKBOX_SERVER_COMPAT_H
#define DESKBOX_SERVER_COMPAT_H

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

#endif
