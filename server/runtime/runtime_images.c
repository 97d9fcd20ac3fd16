/* images: the stored images under <state>/images/<name>/ (see runtime.h):
 * names, the checks made before a sandbox uses one, manifests, listing,
 * removal, and finishing a new one (deskbox's mount points and user, the
 * manifest, the rename into place).  Making them (OCI import, debootstrap)
 * is runtime_images_make.c.
 *
 * An image's tree comes from outside (an OCI image anyone could have
 * built): deskboxd, as host root, never follows a path inside it except
 * through openat2(RESOLVE_IN_ROOT), so a symlink such as `proc -> /etc`
 * resolves inside the image, never on the host. */
#include "common/clock.h"
#include "common/text.h"
#include "runtime.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"
#include "internal.h"

#define MANIFEST_MAX (1u << 20)

/* Directories deskbox mounts on or gives the sandbox (image_own_dirs), and
 * the files it bind-mounts its binaries on: in a user namespace crun
 * cannot create a mount point, so every image has them. */
static const struct {
	const char *path;
	mode_t mode;
} skeleton_dirs[] = {
    {"proc", 0555}, {"sys", 0555},	{"dev", 0755},		{"run", 0755},
    {"tmp", 01777}, {"home", 0755},	{"home/user", 0755},	{"workspace", 0755},
    {"root", 0700}, {".deskbox", 0755}, {".deskbox/lib", 0755}, {".deskbox/host", 0755},
    {"etc", 0755},
};
static const char *const skeleton_files[] = {".deskbox/init", ".deskbox/deskbox-vnc",
					     ".deskbox/xtool", "etc/resolv.conf"};

/* Programs the manifest reports: the first the image must have
 * (image_lookup), the next two the host supplies when it lacks them
 * (image_host_parts). */
static const struct {
	const char *name;
	const char *paths[3];
} tools[] = {
    {"sh", {"bin/sh", "usr/bin/sh"}},	{"Xvfb", {"usr/bin/Xvfb"}},
    {"openbox", {"usr/bin/openbox"}},	{"python3", {"usr/bin/python3", "usr/local/bin/python3"}},
    {"chromium", {"usr/bin/chromium"}}, {"xterm", {"usr/bin/xterm"}},
};
#define TOOL_XVFB 1
#define TOOL_WM	  2

int image_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > IMAGE_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			 (i > 0 && (c == '.' || c == '_' || c == '-'));
		if (!ok)
			return 0;
	}
	return 1;
}

void image_dir(const char *state_dir, char *buf, size_t size)
{
	snprintf(buf, size, "%s/images", state_dir);
}

/* <state>/images/<prefix><name><suffix> into buf. */
static void image_path(const char *state_dir, const char *prefix, const char *name,
		       const char *suffix, char *buf, size_t size)
{
	snprintf(buf, size, "%s/images/%s%s%s", state_dir, prefix, name, suffix);
}

/* Opens <root>/<rel> with every symlink resolved inside `rootfd`. */
static int open_in_root(int rootfd, const char *rel, uint64_t flags)
{
	struct open_how how = {.flags = flags | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
	return (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
}

/* 1 if <root>/<rel> is an executable regular file. */
static int has_program(int rootfd, const char *rel)
{
	_cleanup_fd_ int fd = open_in_root(rootfd, rel, O_PATH);
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

static int has_tool(int rootfd, size_t i)
{
	for (size_t k = 0; k < 3 && tools[i].paths[k]; k++)
		if (has_program(rootfd, tools[i].paths[k]))
			return 1;
	return 0;
}

static unsigned host_parts(int rootfd)
{
	return (has_tool(rootfd, TOOL_XVFB) ? 0 : IMAGE_HOST_XVFB) |
	       (has_tool(rootfd, TOOL_WM) ? 0 : IMAGE_HOST_WM);
}

unsigned image_host_parts(const char *lower)
{
	_cleanup_fd_ int rootfd = open(lower, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return rootfd < 0 ? IMAGE_HOST_XVFB | IMAGE_HOST_WM : host_parts(rootfd);
}

/* The ELF interpreter (PT_INTERP) of the 64-bit ELF file `fd` into `buf`;
 * "" for a static program, a script or another format. */
static void elf_interp(int fd, char *buf, size_t size)
{
	Elf64_Ehdr eh;
	buf[0] = '\0';
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 256)
		return;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		off_t at = (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph));
		if (pread(fd, &ph, sizeof(ph), at) != (ssize_t)sizeof(ph))
			return;
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz < 2 || ph.p_filesz > size)
			return;
		ssize_t n = pread(fd, buf, ph.p_filesz, (off_t)ph.p_offset);
		buf[n == (ssize_t)ph.p_filesz ? ph.p_filesz - 1 : 0] = '\0';
		return;
	}
}

/* The image must have a shell that can run: deskbox's parts bring their
 * own libraries, but the user's programs, code_run's and the exec agent's
 * `sh -c` are the image's. */
static int shell_check(int rootfd, const char *name, struct err *e)
{
	_cleanup_fd_ int fd = -1;
	for (size_t k = 0; k < 3 && tools[0].paths[k] && fd < 0; k++)
		if (has_program(rootfd, tools[0].paths[k]))
			fd = open_in_root(rootfd, tools[0].paths[k], O_RDONLY);
	if (fd < 0)
		return err_set(e, ERR_INVALID, ENOENT,
			       "image '%s' has no shell (/bin/sh): deskbox runs the image's own "
			       "programs, so it needs at least /bin/sh and its libc",
			       name);
	char interp[PATH_MAX];
	elf_interp(fd, interp, sizeof(interp));
	_cleanup_fd_ int ld = interp[0] ? open_in_root(rootfd, interp, O_PATH) : -1;
	struct stat st;
	if (interp[0] && (ld < 0 || fstat(ld, &st) < 0 || !S_ISREG(st.st_mode)))
		return err_set(e, ERR_INVALID, ENOENT,
			       "image '%s' cannot run its /bin/sh: its dynamic loader %s (libc) is "
			       "not in the image",
			       name, interp);
	return 0;
}

static cJSON *read_json(const char *path, struct err *e)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (fs_read_file(path, MANIFEST_MAX, &text, &len, e) < 0)
		return NULL;
	cJSON *j = cJSON_ParseWithLength(text, len);
	if (!j || !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		err_set(e, ERR_INVALID, EINVAL, "'%s' is not a JSON object", path);
		return NULL;
	}
	return j;
}

int image_lookup(const char *state_dir, const char *name, char *lower, size_t size, struct err *e)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	if (!image_name_valid(name) || strcmp(name, IMAGE_DEFAULT) == 0)
		return err_set(e, ERR_INVALID, EINVAL, "bad image name '%.*s'", UTF8_CUT(name, 64));
	image_path(state_dir, "", name, "", dir, sizeof(dir));
	struct stat st;
	if (stat(dir, &st) < 0) {
		image_path(state_dir, ".build-", name, ".json", path, sizeof(path));
		if (access(path, F_OK) == 0)
			return err_set(e, ERR_INVALID, EBUSY,
				       "image '%s' is not ready (being built, or its build "
				       "failed: GET /v1/images/%s)",
				       name, name);
		return err_set(e, ERR_INVALID, ENOENT, "image '%s' does not exist", name);
	}
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	struct err e2 = ERR_INIT;
	cJSON *m = read_json(path, &e2);
	if (!m)
		return err_set(e, ERR_INVALID, EINVAL,
			       "image '%s' is broken: no readable manifest: %s", name, e2.msg);
	cJSON_Delete(m);
	snprintf(path, sizeof(path), "%s/rootfs", dir);
	_cleanup_fd_ int rootfd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0)
		return err_set(e, ERR_INVALID, ENOENT, "image '%s' is broken: no rootfs directory",
			       name);
	if (shell_check(rootfd, name, e) < 0)
		return err_code(e);
	if (host_parts(rootfd)) {
		const char *rel = IMAGE_HOST_DIR + 1;
		_cleanup_fd_ int fd = open_in_root(rootfd, rel, O_PATH | O_DIRECTORY);
		if (fd < 0)
			return err_set(e, ERR_INVALID, ENOENT,
				       "image '%s' is broken: it lacks Xvfb or openbox and has no "
				       "mount point %s for the host's (import it again)",
				       name, IMAGE_HOST_DIR);
	}
	for (size_t i = 0; i < sizeof(skeleton_files) / sizeof(skeleton_files[0]); i++) {
		_cleanup_fd_ int fd = open_in_root(rootfd, skeleton_files[i], O_PATH);
		if (fd < 0)
			return err_set(e, ERR_INVALID, ENOENT,
				       "image '%s' is broken: no mount point /%s", name,
				       skeleton_files[i]);
	}
	if ((size_t)snprintf(lower, size, "%s", path) >= size)
		return err_set(e, ERR_INTERNAL, ENAMETOOLONG, "image path too long");
	return 0;
}

static cJSON *default_manifest(void)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", IMAGE_DEFAULT);
	cJSON_AddStringToObject(j, "status", "ready");
	cJSON_AddStringToObject(j, "source", "embedded");
	cJSON_AddStringToObject(j, "description",
				"a generated minimal /etc with the host's /usr mounted read-only");
	return j;
}

int image_get(const char *state_dir, const char *name, cJSON **out, struct err *e)
{
	if (!image_name_valid(name))
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no image '%.*s'", UTF8_CUT(name, 64));
	if (strcmp(name, IMAGE_DEFAULT) == 0) {
		*out = default_manifest();
		return 0;
	}
	char path[PATH_MAX];
	image_path(state_dir, "", name, "/manifest.json", path, sizeof(path));
	struct err e2 = ERR_INIT;
	cJSON *j = read_json(path, &e2);
	if (j) {
		/* Images made before timestamps were RFC 3339 say unix seconds. */
		cJSON *at = cJSON_GetObjectItemCaseSensitive(j, "created_at");
		if (cJSON_IsNumber(at)) {
			char t[CLOCK_RFC3339_MAX];
			clock_rfc3339((long long)at->valuedouble * 1000, t, sizeof(t));
			cJSON_ReplaceItemInObjectCaseSensitive(j, "created_at",
							       cJSON_CreateString(t));
		}
		cJSON_DeleteItemFromObject(j, "status");
		cJSON_AddStringToObject(j, "status", "ready");
	} else {
		image_path(state_dir, ".build-", name, ".json", path, sizeof(path));
		j = read_json(path, &e2);
	}
	if (!j) {
		image_path(state_dir, "", name, "", path, sizeof(path));
		if (access(path, F_OK) < 0)
			return err_set(e, ERR_NOT_FOUND, ENOENT, "no image '%s'", name);
		j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", name);
		cJSON_AddStringToObject(j, "status", "broken");
		cJSON_AddStringToObject(j, "error", "no readable manifest.json");
	}
	*out = j;
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

cJSON *image_list(const char *state_dir)
{
	cJSON *arr = cJSON_CreateArray();
	cJSON_AddItemToArray(arr, default_manifest());
	char dir[PATH_MAX];
	image_dir(state_dir, dir, sizeof(dir));
	struct dirent **names;
	int n = scandir(dir, &names, NULL, by_name);
	for (int i = 0; i < n; i++) {
		char name[NAME_MAX + 1];
		snprintf(name, sizeof(name), "%s", names[i]->d_name);
		free(names[i]);
		size_t l = strlen(name);
		if (strncmp(name, ".build-", 7) == 0 && l > 12 && !strcmp(name + l - 5, ".json")) {
			memmove(name, name + 7, l - 7);
			name[l - 12] = '\0';
			char done[PATH_MAX];
			image_path(state_dir, "", name, "", done, sizeof(done));
			if (access(done, F_OK) == 0)
				continue; /* listed under its own name */
		}
		cJSON *j;
		struct err e = ERR_INIT;
		if (strcmp(name, IMAGE_DEFAULT) != 0 && image_name_valid(name) &&
		    image_get(state_dir, name, &j, &e) == 0)
			cJSON_AddItemToArray(arr, j);
	}
	if (n >= 0)
		free(names);
	return arr;
}

int image_remove(const char *state_dir, const char *name, char *trash, size_t size, struct err *e)
{
	if (image_name_valid(name) && strcmp(name, IMAGE_DEFAULT) == 0)
		return err_set(e, ERR_INVALID, EPERM, "the default image cannot be deleted");
	cJSON *j;
	if (image_get(state_dir, name, &j, e) < 0)
		return err_code(e);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
	int building = cJSON_IsString(st) && strcmp(st->valuestring, "building") == 0;
	cJSON_Delete(j);
	if (building)
		return err_set(e, ERR_CONFLICT, EBUSY, "image '%s' is being built", name);
	char dir[PATH_MAX], status[PATH_MAX];
	image_path(state_dir, "", name, "", dir, sizeof(dir));
	image_path(state_dir, ".build-", name, ".json", status, sizeof(status));
	unlink(status);
	image_build_log_path(state_dir, name, status, sizeof(status));
	unlink(status);
	image_context_path(state_dir, name, status, sizeof(status));
	unlink(status);
	/* Out of the name first, so a new image of that name can come while
	 * the old tree is still being removed. */
	if (image_tmp_dir(state_dir, name, trash, size, e) < 0)
		return err_code(e);
	if (rename(dir, trash) < 0 && errno != ENOENT) {
		rmdir(trash);
		return err_sys(e, ERR_INTERNAL, errno, "removing image '%s'", name);
	}
	return 0;
}

void images_recover(const char *state_dir)
{
	char dir[PATH_MAX];
	image_dir(state_dir, dir, sizeof(dir));
	struct dirent **names;
	int n = scandir(dir, &names, NULL, by_name);
	for (int i = 0; i < n; i++) {
		char p[PATH_MAX + NAME_MAX + 2];
		const char *name = names[i]->d_name;
		snprintf(p, sizeof(p), "%s/%s", dir, name);
		struct err e = ERR_INIT;
		if (strncmp(name, ".tmp-", 5) == 0 && fs_remove_tree(p, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "images: %s", e.msg);
		cJSON *j = strncmp(name, ".build-", 7) == 0 ? read_json(p, &e) : NULL;
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
		if (cJSON_IsString(st) && strcmp(st->valuestring, "building") == 0) {
			cJSON_ReplaceItemInObject(j, "status", cJSON_CreateString("failed"));
			cJSON_DeleteItemFromObject(j, "error");
			cJSON_AddStringToObject(j, "error", "deskboxd stopped during the build");
			_cleanup_free_ char *text = cJSON_PrintUnformatted(j);
			if (text)
				fs_write_atomic(p, text, strlen(text), 0644, &e);
		}
		cJSON_Delete(j);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

int image_tmp_dir(const char *state_dir, const char *name, char *tmp, size_t size, struct err *e)
{
	char dir[PATH_MAX];
	image_dir(state_dir, dir, sizeof(dir));
	if (fs_mkdir_p(dir, 0755, e) < 0)
		return err_code(e);
	snprintf(tmp, size, "%s/.tmp-%s-XXXXXX", dir, name);
	if (!mkdtemp(tmp))
		return err_sys(e, ERR_INTERNAL, errno, "creating a directory in '%s'", dir);
	if (chmod(tmp, 0755) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "chmod '%s'", tmp);
	return 0;
}

/* mkdir <root>/<rel> (its parent resolved inside the image); an existing
 * entry of any kind is left as it is. */
static int skel_dir(int rootfd, const char *rel, mode_t mode, struct err *e)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", rel);
	char *slash = strrchr(parent, '/');
	const char *leaf = slash ? slash + 1 : rel;
	if (slash)
		*slash = '\0';
	_cleanup_fd_ int pfd = slash ? open_in_root(rootfd, parent, O_PATH | O_DIRECTORY)
				     : fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	if (pfd < 0)
		return err_sys(e, ERR_INVALID, errno, "image: '/%s' is not a directory", parent);
	if (mkdirat(pfd, leaf, mode) < 0) {
		if (errno == EEXIST)
			return 0;
		return err_sys(e, ERR_INTERNAL, errno, "image: creating '/%s'", rel);
	}
	_cleanup_fd_ int fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fchmod(fd, mode) < 0 || fchown(fd, 0, 0) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "image: chmod '/%s'", rel);
	return 0;
}

static int skel_file(int rootfd, const char *rel, struct err *e)
{
	char dir[64];
	const char *leaf = strrchr(rel, '/') + 1;
	snprintf(dir, sizeof(dir), "%.*s", (int)(leaf - rel - 1), rel);
	_cleanup_fd_ int pfd = open_in_root(rootfd, dir, O_PATH | O_DIRECTORY);
	int fd =
	    pfd < 0 ? -1 : openat(pfd, leaf, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0755);
	/* A symlink there (an image's /etc/resolv.conf often is one) cannot
	 * be a mount point: a plain file replaces it. */
	if (fd < 0 && errno == ELOOP && unlinkat(pfd, leaf, 0) == 0)
		fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "image: creating '/%s'", rel);
	close(fd);
	return 0;
}

/* Appends `line` to /etc/<file> unless a line there starts with `key`. */
static int skel_line(int rootfd, const char *file, const char *key, const char *line, struct err *e)
{
	char rel[64];
	snprintf(rel, sizeof(rel), "etc/%s", file);
	_cleanup_fd_ int fd = open_in_root(rootfd, rel, O_RDWR | O_CREAT | O_APPEND);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20))
		return err_set(e, ERR_INVALID, EINVAL, "image: /etc/%s is not a usable file", file);
	_cleanup_free_ char *text = calloc(1, (size_t)st.st_size + 2);
	if (!text || pread(fd, text + 1, (size_t)st.st_size, 0) < 0)
		return err_sys(e, ERR_INTERNAL, errno ?: ENOMEM, "image: reading /etc/%s", file);
	text[0] = '\n';
	char needle[64];
	snprintf(needle, sizeof(needle), "\n%s", key);
	if (strstr(text, needle))
		return 0;
	size_t l = strlen(text);
	const char *sep = l > 1 && text[l - 1] != '\n' ? "\n" : "";
	if (dprintf(fd, "%s%s\n", sep, line) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "image: writing /etc/%s", file);
	return 0;
}

static int skeleton(const char *rootfs, struct err *e)
{
	_cleanup_fd_ int rootfd = open(rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0 || chmod(rootfs, 0755) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", rootfs);
	for (size_t i = 0; i < sizeof(skeleton_dirs) / sizeof(skeleton_dirs[0]); i++)
		if (skel_dir(rootfd, skeleton_dirs[i].path, skeleton_dirs[i].mode, e) < 0)
			return err_code(e);
	for (size_t i = 0; i < sizeof(skeleton_files) / sizeof(skeleton_files[0]); i++)
		if (skel_file(rootfd, skeleton_files[i], e) < 0)
			return err_code(e);
	char pw[128], gr[64];
	snprintf(pw, sizeof(pw), "user:x:%u:%u:user:/home/user:/bin/sh", IMAGE_USER_UID,
		 IMAGE_USER_GID);
	snprintf(gr, sizeof(gr), "user:x:%u:", IMAGE_USER_GID);
	int r = skel_line(rootfd, "passwd", "root:", "root:x:0:0:root:/root:/bin/sh", e);
	r = r ?: skel_line(rootfd, "passwd", "user:", pw, e);
	r = r ?: skel_line(rootfd, "group", "root:", "root:x:0:", e);
	return r ?: skel_line(rootfd, "group", "user:", gr, e);
}

/* Bytes the tree under directory `dfd` (taken) takes on disk, not
 * following symlinks nor crossing mounts; 256 levels at most. */
static uint64_t dir_bytes(int dfd, int depth)
{
	struct stat top;
	DIR *d = fstat(dfd, &top) == 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		close(dfd);
		return 0;
	}
	uint64_t n = (uint64_t)top.st_blocks * 512;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		/* A file with several links counts its share once per link, so
		 * a tree holding all of them counts it once (du does). */
		if (!S_ISDIR(st.st_mode)) {
			n += (uint64_t)st.st_blocks * 512 / (st.st_nlink ? st.st_nlink : 1);
			continue;
		}
		int sub = st.st_dev == top.st_dev && depth < 256
			      ? openat(dirfd(d), de->d_name,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
			      : -1;
		if (sub >= 0)
			n += dir_bytes(sub, depth + 1);
	}
	closedir(d);
	return n;
}

static uint64_t disk_bytes(const char *root)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? 0 : dir_bytes(fd, 0);
}

static void manifest_tools(cJSON *m, const char *rootfs)
{
	_cleanup_fd_ int rootfd = open(rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cJSON *t = cJSON_AddObjectToObject(m, "tools");
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		cJSON_AddBoolToObject(t, tools[i].name, rootfd >= 0 && has_tool(rootfd, i));
	unsigned host = rootfd >= 0 ? host_parts(rootfd) : IMAGE_HOST_XVFB | IMAGE_HOST_WM;
	cJSON_AddBoolToObject(m, "desktop", rootfd >= 0 && !host);
	/* What the host supplies at run time (docs/images.md). */
	cJSON *sup = cJSON_AddArrayToObject(m, "host_parts");
	if (host & IMAGE_HOST_XVFB)
		cJSON_AddItemToArray(sup, cJSON_CreateString(tools[TOOL_XVFB].name));
	if (host & IMAGE_HOST_WM)
		cJSON_AddItemToArray(sup, cJSON_CreateString(tools[TOOL_WM].name));
}

int image_finish(const char *state_dir, const char *name, const char *tmp, cJSON *manifest,
		 cJSON **out, struct err *e)
{
	char rootfs[PATH_MAX], path[PATH_MAX], final[PATH_MAX];
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", tmp);
	snprintf(path, sizeof(path), "%s/manifest.json", tmp);
	image_path(state_dir, "", name, "", final, sizeof(final));
	if (skeleton(rootfs, e) < 0) {
		cJSON_Delete(manifest);
		return err_wrap(e, "image '%s'", name);
	}
	cJSON_DeleteItemFromObject(manifest, "name");
	cJSON_AddStringToObject(manifest, "name", name);
	cJSON_AddNumberToObject(manifest, "size_bytes", (double)disk_bytes(rootfs));
	char t_s[CLOCK_RFC3339_MAX];
	clock_rfc3339(clock_wall_ms(), t_s, sizeof(t_s));
	cJSON_AddStringToObject(manifest, "created_at", t_s);
	manifest_tools(manifest, rootfs);
	_cleanup_free_ char *text = cJSON_Print(manifest);
	_cleanup_fd_ int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!text || fs_write_atomic(path, text, strlen(text), 0644, e) < 0 || fd < 0 ||
	    syncfs(fd) < 0) {
		cJSON_Delete(manifest);
		return text ? err_wrap(e, "image '%s'", name)
			    : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	/* rename(2) onto an existing directory replaces it only when empty;
	 * an image is never empty. */
	if (rename(tmp, final) < 0) {
		int saved = errno;
		cJSON_Delete(manifest);
		if (saved == EEXIST || saved == ENOTEMPTY)
			return err_set(e, ERR_CONFLICT, EEXIST, "image '%s' exists", name);
		return err_sys(e, ERR_INTERNAL, saved, "renaming '%s'", tmp);
	}
	cJSON_AddStringToObject(manifest, "status", "ready");
	*out = manifest;
	return 0;
}
