/* Corpus replayer for the libFuzzer targets in this folder: without
 * -fsanitize=fuzzer each target links this main(), which feeds it every file
 * named on the command line (directories are walked one level deep) and
 * prints TAP.  `make fuzz` builds the same targets with libFuzzer instead. */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int n;

static void run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		printf("not ok %d - cannot open %s\n", ++n, path);
		return;
	}
	uint8_t *buf = malloc(1 << 20);
	size_t len = buf ? fread(buf, 1, 1 << 20, f) : 0;
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	/* Reaching here without a crash or sanitizer report is the assertion. */
	printf("ok %d - %s\n", ++n, path);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			DIR *d = opendir(argv[i]);
			struct dirent *de;
			while (d && (de = readdir(d))) {
				if (de->d_name[0] == '.')
					continue;
				char p[4096];
				snprintf(p, sizeof(p), "%s/%s", argv[i], de->d_name);
				run_file(p);
			}
			if (d)
				closedir(d);
		} else {
			run_file(argv[i]);
		}
	}
	printf("1..%d\n", n);
	return n ? 0 : 1;
}
