/* Unit tests of the files module's path handling and of SHA-256: path
 * normalisation, and (as root) resolution inside a scratch directory used
 * as a sandbox root, with symlinks that try to leave it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "common/fs.h"
#include "common/text.h"
#include "server/files/files.h"
#include "server/runtime/runtime.h"
#include "tests/harness.h"

static void norm_ok(const char *in, const char *want)
{
	char out[PATH_MAX];
	struct err e = ERR_INIT;
	char name[PATH_MAX + 64];
	snprintf(name, sizeof(name), "normalize '%.60s'", in);
	int r = files_path_normalize(in, strlen(in), out, sizeof(out), &e);
	if (!ok(r == 0 && strcmp(out, want) == 0, name))
		printf("#   got %d '%s' (%s), want '%s'\n", r, r == 0 ? out : "", e.msg, want);
}

static void norm_bad(const char *in, size_t len, const char *what)
{
	char out[PATH_MAX];
	struct err e = ERR_INIT;
	int r = files_path_normalize(in, len, out, sizeof(out), &e);
	ok(r < 0 && e.kind == ERR_INVALID, what);
}

static void test_normalize(void)
{
	norm_ok("a.txt", "/workspace/a.txt");
	norm_ok("/", "/");
	norm_ok("//etc///passwd/", "/etc/passwd");
	norm_ok("./a/./b", "/workspace/a/b");
	norm_ok("/tmp/.hidden", "/tmp/.hidden");
	norm_ok("...", "/workspace/...");
	norm_ok("a/..b", "/workspace/a/..b");
	norm_bad("", 0, "empty path refused");
	norm_bad("../../etc/passwd", 16, "'..' refused");
	norm_bad("/a/../../b", 10, "'..' in the middle refused");
	norm_bad("/a/..", 5, "trailing '..' refused");
	norm_bad("a\0b", 3, "embedded NUL refused");
	char *long_path = malloc(PATH_MAX + 2);
	memset(long_path, 'a', PATH_MAX + 1);
	long_path[0] = '/';
	for (int i = 100; i < PATH_MAX; i += 100)
		long_path[i] = '/';
	long_path[PATH_MAX + 1] = '\0';
	norm_bad(long_path, PATH_MAX + 1, "path over PATH_MAX refused");
	long_path[0] = 'x';
	long_path[PATH_MAX - 5] = '\0';
	norm_bad(long_path, strlen(long_path),
		 "relative path over PATH_MAX with the prefix refused");
	memset(long_path, 'b', 300);
	long_path[0] = '/';
	long_path[300] = '\0';
	norm_bad(long_path, 300, "component over NAME_MAX refused");
	free(long_path);

	char parent[PATH_MAX];
	is_str(files_path_split("/workspace/a", parent, sizeof(parent)), "a", "split name");
	is_str(parent, "/workspace", "split parent");
	is_str(files_path_split("/a", parent, sizeof(parent)), "a", "split top-level name");
	is_str(parent, "/", "top-level parent is /");
	ok(files_path_split("/", parent, sizeof(parent)) == NULL, "/ has no name");
}

static void sha_hex(const void *data, size_t len, char *out)
{
	struct sha256_ctx s;
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_init(&s);
	sha256_update(&s, len, data);
	sha256_digest(&s, sizeof(d), d);
	hex_encode(d, sizeof(d), out);
}

/* The upload receipt's digest: nettle's SHA-256, fed piece by piece, in hex. */
static void test_sha256(void)
{
	char hex[2 * SHA256_DIGEST_SIZE + 1];
	sha_hex("", 0, hex);
	is_str(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	       "sha256 ''");
	sha_hex("abc", 3, hex);
	is_str(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	       "sha256 'abc'");
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sha_hex(m, strlen(m), hex);
	is_str(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
	       "sha256 two blocks");
	/* One million 'a's, fed in uneven pieces to exercise the buffering. */
	struct sha256_ctx s;
	sha256_init(&s);
	uint8_t a[997];
	memset(a, 'a', sizeof(a));
	size_t left = 1000000;
	for (size_t step = 1; left; step = step * 7 % 997 + 1) {
		size_t n = step < left ? step : left;
		sha256_update(&s, n, a);
		left -= n;
	}
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_digest(&s, sizeof(d), d);
	hex_encode(d, sizeof(d), hex);
	is_str(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
	       "sha256 one million 'a'");
}

/* ---- resolution inside a scratch root (needs root for setfsuid) ---- */

static char scratch[PATH_MAX];

/* The sandbox user as deskboxd sees it with a user namespace: the first
 * range's IMAGE_USER_UID. */
#define HOST_UID ((1u << 20) + IMAGE_USER_UID)
#define HOST_GID ((1u << 20) + IMAGE_USER_GID)

static void put(const char *rel, const char *text)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s%s", scratch, rel);
	struct err e = ERR_INIT;
	fs_write_atomic(p, text, strlen(text), 0644, &e);
	if (chown(p, HOST_UID, HOST_GID) < 0)
		diag("chown failed");
}

static void test_resolution(void)
{
	if (geteuid() != 0) {
		skip("path resolution in a scratch root", "needs root (setfsuid, chown)");
		return;
	}
	snprintf(scratch, sizeof(scratch), "/tmp/dbx-files-test-XXXXXX");
	if (!mkdtemp(scratch)) {
		ok(0, "mkdtemp");
		return;
	}
	char p[PATH_MAX + 32];
	snprintf(p, sizeof(p), "%s/workspace", scratch);
	mkdir(p, 0755);
	if (chown(scratch, HOST_UID, HOST_GID) < 0 || chown(p, HOST_UID, HOST_GID) < 0)
		diag("chown failed");
	chmod(scratch, 0755);
	snprintf(p, sizeof(p), "%s/etc", scratch);
	mkdir(p, 0755);
	put("/etc/hostname", "inside\n");
	/* Host canary outside the root. */
	char canary[PATH_MAX + 16];
	snprintf(canary, sizeof(canary), "%s.canary", scratch);
	struct err e = ERR_INIT;
	fs_write_atomic(canary, "host\n", 5, 0644, &e);
	snprintf(p, sizeof(p), "%s/workspace/root", scratch);
	ok(symlink("/", p) == 0, "symlink to / inside the root");
	snprintf(p, sizeof(p), "%s/workspace/up", scratch);
	ok(symlink("../../../../../..", p) == 0, "symlink climbing out");
	snprintf(p, sizeof(p), "%s/workspace/proc", scratch);
	ok(symlink("/proc/self/root", p) == 0, "symlink to /proc/self/root");

	int rootfd = open(scratch, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ok(rootfd >= 0, "root fd");
	const struct files_root fr = {rootfd, HOST_UID, HOST_GID}, *root = &fr;
	struct stat st;
	int fd = -1;
	err_clear(&e);
	ok(files_open_read(root, "/workspace/root/etc/hostname", &fd, &st, &e) == 0,
	   "absolute symlink is followed inside the root");
	char buf[64] = "";
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	is_str(buf, "inside\n", "and reads the root's own file");
	err_clear(&e);
	ok(files_open_read(root, "/workspace/up/etc/hostname", &fd, &st, &e) == 0,
	   "'..' symlinks stop at the root");
	if (fd >= 0)
		close(fd);
	const char *canary_name = strrchr(canary, '/') + 1;
	char via[PATH_MAX];
	snprintf(via, sizeof(via), "/workspace/up/tmp/%s", canary_name);
	err_clear(&e);
	ok(files_open_read(root, via, &fd, &st, &e) < 0 && e.kind == ERR_NOT_FOUND,
	   "the host canary is not reachable");
	err_clear(&e);
	ok(files_open_read(root, "/workspace/proc/etc/hostname", &fd, &st, &e) < 0,
	   "magic links are refused");
	err_clear(&e);
	ok(files_open_read(root, "/workspace/root", &fd, &st, &e) < 0 && e.kind == ERR_INVALID,
	   "a symlink as the last component is not followed");

	struct files_upload *u;
	err_clear(&e);
	snprintf(via, sizeof(via), "/workspace/up/tmp/%s", canary_name);
	int r = files_upload_begin(root, via, 1, -1, &u, &e);
	ok(r == 0, "upload through a climbing symlink starts");
	if (r == 0) {
		files_upload_write(u, "evil\n", 5, &e);
		ok(files_upload_commit(u, &e) == 0, "and commits");
		files_upload_free(u);
	}
	char *text = NULL;
	fs_read_file(canary, 64, &text, NULL, &e);
	is_str(text, "host\n", "the host canary is unchanged");
	free(text);
	snprintf(p, sizeof(p), "%s/tmp/%s", scratch, canary_name);
	ok(access(p, F_OK) == 0, "the upload landed inside the root");
	ok(stat(p, &st) == 0 && st.st_uid == HOST_UID && st.st_gid == HOST_GID,
	   "owned by the sandbox user's host ids");

	err_clear(&e);
	r = files_upload_begin(root, "/workspace/x.bin", 0, 0600, &u, &e);
	ok(r == 0, "upload begins");
	if (r == 0) {
		files_upload_write(u, "abc", 3, &e);
		files_upload_free(u);
	}
	snprintf(p, sizeof(p), "%s/workspace/x.bin", scratch);
	ok(access(p, F_OK) < 0, "an aborted upload leaves no file");
	unsigned removed = 0;
	snprintf(p, sizeof(p), "%s/workspace/" FILES_TEMP_PREFIX "0123456789abcdef", scratch);
	put("/workspace/" FILES_TEMP_PREFIX "0123456789abcdef", "litter");
	ok(files_sweep_temp(scratch, &removed, &e) == 0 && removed == 1, "sweep removes litter");
	ok(access(p, F_OK) < 0, "litter is gone");

	int created = 0;
	err_clear(&e);
	ok(files_mkdir(root, "/workspace/d1/d2", 1, &created, &e) == 0 && created, "mkdir -p");
	ok(files_mkdir(root, "/workspace/d1/d2", 0, &created, &e) < 0 && e.kind == ERR_CONFLICT,
	   "mkdir of an existing dir conflicts");
	err_clear(&e);
	ok(files_remove(root, "/workspace/d1", 0, &e) < 0 && e.kind == ERR_CONFLICT,
	   "non-recursive delete of a non-empty dir conflicts");
	err_clear(&e);
	ok(files_remove(root, "/workspace/d1", 1, &e) == 0, "recursive delete");
	err_clear(&e);
	ok(files_remove(root, "/workspace/root", 0, &e) == 0,
	   "deleting a symlink removes the link");
	ok(access("/etc/hostname", F_OK) == 0, "and not its target");
	close(rootfd);
	unlink(canary);
	fs_remove_tree(scratch, NULL);
}

/* A layer made before user namespaces: its user's files move into a range,
 * root's stay root's. */
static void test_shift_owners(void)
{
	if (geteuid() != 0) {
		skip("moving a layer's owners", "needs root (chown)");
		return;
	}
	char dir[] = "/tmp/dbx-shift-test-XXXXXX", p[PATH_MAX];
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return;
	}
	snprintf(p, sizeof(p), "%s/home", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/home/user", dir);
	mkdir(p, 0755);
	ok(chown(p, IMAGE_USER_UID, IMAGE_USER_GID) == 0, "a user's directory");
	snprintf(p, sizeof(p), "%s/home/user/tool", dir);
	struct err e = ERR_INIT;
	fs_write_atomic(p, "x", 1, 0755, &e);
	ok(chown(p, IMAGE_USER_UID, IMAGE_USER_GID) == 0 && chmod(p, 04755) == 0,
	   "a set-uid file of the user");
	snprintf(p, sizeof(p), "%s/home/user/link", dir);
	ok(symlink("/etc/passwd", p) == 0 && lchown(p, IMAGE_USER_UID, IMAGE_USER_GID) == 0,
	   "a symlink of the user");
	unsigned n = 0;
	ok(files_shift_owners(dir, 1u << 20, &n, &e) == 0 && n == 3, "three entries moved");
	struct stat st;
	snprintf(p, sizeof(p), "%s/home", dir);
	ok(stat(p, &st) == 0 && st.st_uid == 0, "root's directory stays root's");
	snprintf(p, sizeof(p), "%s/home/user/tool", dir);
	ok(stat(p, &st) == 0 && st.st_uid == HOST_UID && st.st_gid == HOST_GID &&
	       (st.st_mode & 04000),
	   "the file moved, set-uid bit kept");
	snprintf(p, sizeof(p), "%s/home/user/link", dir);
	ok(lstat(p, &st) == 0 && st.st_uid == HOST_UID, "the link moved, not its target");
	ok(stat("/etc/passwd", &st) == 0 && st.st_uid == 0, "the target untouched");
	fs_remove_tree(dir, NULL);
}

/* The start-up sweep: upload files and archive directories go, a fresh
 * resumable upload's staging file stays, a stale one goes. */
static void test_sweep(void)
{
	char dir[] = "/tmp/dbx-sweep-test-XXXXXX", p[PATH_MAX];
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return;
	}
	struct err e = ERR_INIT;
	snprintf(p, sizeof(p), "%s/%s0123456789abcdef", dir, FILES_TEMP_PREFIX);
	fs_write_atomic(p, "x", 1, 0644, &e);
	snprintf(p, sizeof(p), "%s/%sfedcba9876543210", dir, FILES_TEMP_PREFIX);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/%sfedcba9876543210/sub", dir, FILES_TEMP_PREFIX);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/%sfedcba9876543210/sub/member", dir, FILES_TEMP_PREFIX);
	fs_write_atomic(p, "x", 1, 0644, &e);
	snprintf(p, sizeof(p), "%s/%sfresh", dir, FILES_PARTIAL_PREFIX);
	fs_write_atomic(p, "x", 1, 0600, &e);
	snprintf(p, sizeof(p), "%s/%sstale", dir, FILES_PARTIAL_PREFIX);
	fs_write_atomic(p, "x", 1, 0600, &e);
	struct timespec old[2] = {{0, UTIME_OMIT}, {time(NULL) - FILES_PARTIAL_STALE_S - 60, 0}};
	ok(utimensat(AT_FDCWD, p, old, 0) == 0, "a staging file a day old");
	unsigned n = 0;
	ok(files_sweep_temp(dir, &n, &e) == 0 && n == 3, "three entries swept");
	struct stat st;
	snprintf(p, sizeof(p), "%s/%sfedcba9876543210", dir, FILES_TEMP_PREFIX);
	ok(lstat(p, &st) < 0 && errno == ENOENT, "an archive's temporary directory is gone");
	snprintf(p, sizeof(p), "%s/%sfresh", dir, FILES_PARTIAL_PREFIX);
	ok(lstat(p, &st) == 0, "a fresh staging file stays");
	snprintf(p, sizeof(p), "%s/%sstale", dir, FILES_PARTIAL_PREFIX);
	ok(lstat(p, &st) < 0 && errno == ENOENT, "a stale one is gone");
	fs_remove_tree(dir, NULL);
}

int main(void)
{
	test_sweep();
	test_normalize();
	test_sha256();
	test_resolution();
	test_shift_owners();
	return done();
}
