/* compat: the front-ends' mounts, one per engine. */
#include "compat.h"
#include "e2b/internal.h"

size_t compat_mounts(struct compat *c, struct http_mount *out, size_t max)
{
	size_t n = 0;
	if (n < max)
		out[n++] = (struct http_mount){"/e2b", e2b_routes, e2b_n_routes, c, e2b_error_api};
	return n;
}
