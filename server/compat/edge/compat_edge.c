/* The front-ends at the edge: their route tables joined to deskbox's own,
 * and errors under their prefixes in their engines' shapes. */
#include <stdlib.h>
#include <string.h>

#include "server/compat/internal.h"

struct engine {
	const char *prefix; /* the path prefix, with no trailing slash */
	const struct http_route *routes;
	const size_t *n_routes;
};

static const struct engine engines[] = {
    {"/zeroboot", zeroboot_routes, &zeroboot_n_routes},
    {"/daytona", daytona_routes, &daytona_n_routes},
    {"/sprites", sprites_routes, &sprites_n_routes},
    {"/opensandbox", opensandbox_routes, &opensandbox_n_routes},
};
#define N_ENGINES (sizeof(engines) / sizeof(engines[0]))

struct http_route *compat_routes_join(const struct http_route *base, size_t n_base, size_t *n)
{
	size_t total = n_base;
	for (size_t i = 0; i < N_ENGINES; i++)
		total += *engines[i].n_routes;
	struct http_route *t = calloc(total, sizeof(*t));
	if (!t)
		return NULL;
	memcpy(t, base, n_base * sizeof(*t));
	size_t at = n_base;
	for (size_t i = 0; i < N_ENGINES; i++) {
		memcpy(t + at, engines[i].routes, *engines[i].n_routes * sizeof(*t));
		at += *engines[i].n_routes;
	}
	*n = total;
	return t;
}

static int under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);
	return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

void compat_canon_captures(void *app, const char *pattern, const char **captures, size_t n,
			   char *buf, size_t size)
{
	static const char *const sandbox_routes[] = {
	    "/daytona/api/sandbox/{id}", "/daytona/toolbox/{id}", "/sprites/v1/sprites/{name}"};
	struct api *api = app;
	for (size_t i = 0; i < sizeof(sandbox_routes) / sizeof(sandbox_routes[0]); i++) {
		size_t len = strlen(sandbox_routes[i]);
		if (n < 1 || strncmp(pattern, sandbox_routes[i], len) != 0 ||
		    (pattern[len] && pattern[len] != '/'))
			continue;
		if (sandbox_resolve(api->sandboxes, captures[0], buf, size) == 0)
			captures[0] = buf;
		return;
	}
	api_canon_captures(app, pattern, captures, n, buf, size);
}

int compat_error_body(void *app, const char *path, const struct err *e, struct http_response *res)
{
	int status = http_error_status(e->kind);
	const char *msg = e->msg[0] ? e->msg : "internal error";
	if (under(path, "/zeroboot")) {
		zeroboot_error(res, status, msg);
		return 1;
	}
	if (under(path, "/daytona")) {
		daytona_error(res, status, e);
		return 1;
	}
	if (under(path, "/sprites")) {
		sprites_error(res, status, e);
		return 1;
	}
	if (under(path, "/opensandbox")) {
		opensandbox_error(res, status, e);
		return 1;
	}
	return 0;
}
