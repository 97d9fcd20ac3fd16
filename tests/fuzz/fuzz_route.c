/* Fuzzes route matching against every route deskboxd serves. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/api.h"
#include "server/http/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *path = malloc(size + 1);
	if (!path)
		return 0;
	memcpy(path, data, size);
	path[size] = '\0';
	char buf[4096];
	const char *caps[HTTP_MAX_CAPTURES];
	size_t n;
	for (size_t i = 0; i < api_n_routes; i++) {
		if (http_route_match(api_routes[i].pattern, path, buf, sizeof(buf), caps, &n)) {
			for (size_t k = 0; k < n; k++)
				if (strchr(caps[k], '/') || !caps[k][0])
					abort(); /* a capture is one non-empty segment */
		}
	}
	free(path);
	return 0;
}
