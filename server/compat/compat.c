/* compat: the front-ends' mounts, one per engine. */
#include <stdio.h>
#include <string.h>

#include "compat.h"
#include "server/api/api.h"
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

int compat_ports_rewrite(void *app, const char *host, char *prefix, size_t size)
{
	if (api_ports_rewrite(app, host, prefix, size) != 1)
		return 0;
	size_t n = strlen(prefix);
	static const char *const e2b_ports[] = {"/ports/49983", "/ports/49999"};
	for (size_t i = 0; i < 2; i++) {
		size_t k = strlen(e2b_ports[i]);
		if (n > k && strcmp(prefix + n - k, e2b_ports[i]) == 0)
			return snprintf(prefix, size, "/e2b") < (int)size;
	}
	return 1;
}
