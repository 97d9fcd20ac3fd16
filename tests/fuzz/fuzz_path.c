/* Fuzzes the files API's path normalisation (server/files/files.c): whatever the
 * client sends, a success is a canonical absolute path with no empty, "."
 * or ".." component and no NUL, within PATH_MAX. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/files/files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[PATH_MAX];
	struct err e = ERR_INIT;
	if (files_path_normalize((const char *)data, size, out, sizeof(out), &e) < 0) {
		if (e.kind != ERR_INVALID)
			abort();
		return 0;
	}
	size_t n = strlen(out);
	if (out[0] != '/' || n >= PATH_MAX || (n > 1 && out[n - 1] == '/') || strstr(out, "//") ||
	    strstr(out, "/./") || strstr(out, "/../") ||
	    (n >= 2 && strcmp(out + n - 2, "/.") == 0) ||
	    (n >= 3 && strcmp(out + n - 3, "/..") == 0))
		abort();
	char parent[PATH_MAX];
	const char *name = files_path_split(out, parent, sizeof(parent));
	if (name ? (strchr(name, '/') || !*name) : strcmp(out, "/") != 0)
		abort();
	return 0;
}
