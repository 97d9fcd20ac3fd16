/* Fuzzes archive unpacking (server/files/files_unpack.c) on a scratch
 * directory standing in for a sandbox's root.  The first byte picks the
 * format (tar, tar.gz, zip), the rest is the archive.  Whatever it holds:
 * a failure leaves the scratch directory empty, and a success leaves only
 * the target, holding nothing but directories, regular files without
 * set-id bits and relative symlinks. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "server/files/files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char scratch[] = "/tmp/dbx-fuzz-unpack-XXXXXX";
static struct files_root root = {-1, 0, 0};

static void teardown(void)
{
	rmdir(scratch);
}

static void setup(void)
{
	if (root.fd >= 0)
		return;
	if (!mkdtemp(scratch))
		abort();
	atexit(teardown);
	root.fd = open(scratch, O_PATH | O_DIRECTORY | O_CLOEXEC);
	root.uid = geteuid();
	root.gid = getegid();
	if (root.fd < 0)
		abort();
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		abort();
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

/* Every entry under `dir` is a directory, a plain file or a relative link. */
static void check_tree(const char *dir, int depth)
{
	if (depth > 300)
		abort();
	DIR *d = opendir(dir);
	if (!d)
		abort();
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char p[PATH_MAX];
		if (snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >= (int)sizeof(p))
			abort();
		struct stat st;
		if (lstat(p, &st) < 0 || (st.st_mode & 07000))
			abort();
		if (S_ISLNK(st.st_mode)) {
			char t[PATH_MAX];
			ssize_t n = readlink(p, t, sizeof(t) - 1);
			if (n <= 0 || t[0] == '/')
				abort();
		} else if (S_ISDIR(st.st_mode)) {
			check_tree(p, depth + 1);
		} else if (!S_ISREG(st.st_mode)) {
			abort();
		}
	}
	closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setup();
	if (size < 1)
		return 0;
	enum files_archive_format f = (enum files_archive_format)(data[0] % 3);
	struct files_archive_in *a;
	struct err e = ERR_INIT;
	if (files_archive_in_begin(&root, "/out", 0, &a, &e) < 0)
		abort();
	unsigned members;
	uint64_t bytes;
	/* A small byte limit keeps each run cheap. */
	struct files_space space = {.max_bytes = 16 << 20};
	int r = files_archive_in_write(a, data + 1, size - 1, &e);
	if (r == 0)
		r = files_archive_in_commit(a, f, &space, &members, &bytes, &e);
	if (r < 0 && e.kind != ERR_INVALID && e.kind != ERR_TOO_LARGE && e.kind != ERR_CONFLICT)
		abort();
	files_archive_in_free(a);
	/* FUZZ_UNPACK_VERBOSE=1: what each input did. */
	if (getenv("FUZZ_UNPACK_VERBOSE"))
		fprintf(stderr, "# %s\n", r < 0 ? e.msg : "unpacked");
	char out[PATH_MAX];
	snprintf(out, sizeof(out), "%s/out", scratch);
	if (r < 0) {
		if (entries(scratch) != 0)
			abort(); /* a failure leaves nothing */
		return 0;
	}
	if (entries(scratch) != 1)
		abort();
	check_tree(out, 0);
	struct err ignored = ERR_INIT;
	fs_remove_tree(out, &ignored);
	return 0;
}
