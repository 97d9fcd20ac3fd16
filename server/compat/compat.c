/* compat: the front-ends' mounts, one per engine. */
#include <string.h>

#include "compat.h"
#include "e2b/internal.h"

void compat_init(struct compat *c, struct sandboxes *s, int exec_timeout_max_s,
		 size_t exec_max_output)
{
	*c = (struct compat){
	    .sandboxes = s,
	    .exec_timeout_max_s = exec_timeout_max_s,
	    .exec_max_output = exec_max_output,
	};
	pthread_mutex_init(&c->mu, NULL);
}

size_t compat_mounts(struct compat *c, struct http_mount *out, size_t max)
{
	size_t n = 0;
	if (n < max)
		out[n++] = (struct http_mount){"/e2b", e2b_routes, e2b_n_routes, c, e2b_error_api};
	return n;
}
