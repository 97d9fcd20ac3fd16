/* image: the default image's lower layer and the per-sandbox overlay.
 *
 * The lower layer is generated into a temporary directory, named after a
 * hash of everything in it (<state>/images/default/base-<hash>) and renamed
 * into place; `base` is a symlink to the newest one.  A lower layer is never
 * changed once in place (overlayfs does not allow changes under a mounted
 * overlay): when the host's /etc changes, a new one appears next to it, and
 * older ones go once no overlay in this mount namespace uses them. */
#include "runtime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"
#include "internal.h"

/* Host /etc entries copied into the image: what programs need to find
 * libraries, fonts, certificates, mime types, the time zone and plotting defaults.  Never
 * secrets (shadow, ssh, sudoers, ...); on top of that only entries readable
 * by everyone are copied.  A trailing '*' matches a prefix. */
static const char *const etc_allowlist[] = {
    "alternatives",	 "fonts",     "xdg",	     "X11",	   "ld.so.cache", "ld.so.conf",
    "ld.so.conf.d",	 "localtime", "timezone",    "mime.types", "python3*",	  "ssl/certs",
    "ssl/openssl.cnf",	 "gtk-3.0",   "bash.bashrc", "inputrc",	   "environment", "os-release",
    "matplotlibrc",	 /* python3-matplotlib's defaults: `import matplotlib` needs them */
    "apt/trusted.gpg.d", /* the archive keys apt checks a mirror with (public) */
};

/* Larger host files are not copied: nothing on the list is that big. */
#define COPY_MAX_BYTES (32u << 20)

/* Who a directory of the image belongs to.  The lower layer is shared by
 * every sandbox and owned by host root; image_own_dirs() gives a sandbox's
 * own directories their owners in that sandbox's ids. */
enum dir_owner {
	OWNER_HOST_ROOT,
	OWNER_USER,	    /* the sandbox's user (IMAGE_USER_UID) */
	OWNER_SANDBOX_ROOT, /* the container's root: the desktop's home */
};

struct dir_entry {
	const char *path;
	mode_t mode;
	enum dir_owner owner;
};

static const struct dir_entry image_dirs[] = {
    {"usr", 0755, 0},
    {"proc", 0555, 0},
    {"sys", 0555, 0},
    {"dev", 0755, 0},
    {"tmp", 01777, 0},
    {"run", 0755, 0},
    {"run/deskbox", 0755, 0},
    {"home", 0755, 0},
    {"home/user", 0755, OWNER_USER},
    {"workspace", 0755, OWNER_USER},
    {"root", 0700, OWNER_SANDBOX_ROOT},
    {"var", 0755, 0},
    {"var/tmp", 01777, 0},
    {"var/cache", 0755, 0},
    {"var/lib", 0755, 0},
    {"var/log", 0755, 0},
    {"opt", 0755, 0},
    {"mnt", 0755, 0},
    {"srv", 0755, 0},
    {"media", 0755, 0},
    {".deskbox", 0755, 0},
    {"etc", 0755, 0},
    {"etc/ssl", 0755, 0},
    /* The package database (the host's, see dpkg_db()) and apt's places,
     * so that the sandbox's root can dpkg -i and apt-get install into its
     * own /usr. */
    {"var/lib/dpkg", 0755, 0},
    {"var/lib/dpkg/info", 0755, 0},
    {"var/lib/dpkg/updates", 0755, 0},
    {"var/lib/dpkg/triggers", 0755, 0},
    {"var/lib/dpkg/alternatives", 0755, 0},
    {"var/lib/dpkg/parts", 0755, 0},
    {"var/lib/apt", 0755, 0},
    {"var/lib/apt/lists", 0755, 0},
    {"var/lib/apt/lists/partial", 0700, 0},
    {"var/cache/apt", 0755, 0},
    {"var/cache/apt/archives", 0755, 0},
    {"var/cache/apt/archives/partial", 0700, 0},
    {"var/log/apt", 0755, 0},
    {"etc/apt", 0755, 0},
    {"etc/apt/apt.conf.d", 0755, 0},
    {"etc/apt/sources.list.d", 0755, 0},
    {"etc/apt/preferences.d", 0755, 0},
};

/* The files deskboxd bind-mounts its helpers on (sandbox_desktop.c).  In a
 * user namespace crun cannot create a mount point ("Permission denied"):
 * they must already be in the image. */
static const char *const mount_point_files[] = {".deskbox/init", ".deskbox/deskbox-vnc",
						".deskbox/xtool"};

/* Top-level names that are symlinks into /usr on a merged-/usr host. */
static const char *const usr_links[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};

/* Builds one image tree under `root`, hashing every entry it creates so that
 * equal trees get equal names. */
struct builder {
	const char *root;
	uint64_t hash;
	struct err *e;
};

static void hash_bytes(struct builder *b, const void *data, size_t n)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++) {
		b->hash ^= p[i];
		b->hash *= 1099511628211ull; /* FNV-1a 64 */
	}
}

static void hash_entry(struct builder *b, char type, const char *rel, mode_t mode)
{
	char head[32];
	int n = snprintf(head, sizeof(head), "%c%o:", type, (unsigned)mode);
	hash_bytes(b, head, (size_t)n);
	hash_bytes(b, rel, strlen(rel) + 1);
}

static int make_dir(struct builder *b, const char *rel, mode_t mode)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", b->root, rel);
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return err_sys(b->e, ERR_INTERNAL, errno, "creating '%s'", p);
	if (chmod(p, mode) < 0)
		return err_sys(b->e, ERR_INTERNAL, errno, "chmod '%s'", p);
	hash_entry(b, 'd', rel, mode);
	return 0;
}

static int make_link(struct builder *b, const char *rel, const char *target)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", b->root, rel);
	if (symlink(target, p) < 0)
		return err_sys(b->e, ERR_INTERNAL, errno, "creating symlink '%s'", p);
	hash_entry(b, 'l', rel, 0777);
	hash_bytes(b, target, strlen(target) + 1);
	return 0;
}

static int make_file(struct builder *b, const char *rel, mode_t mode, const char *data, size_t len)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", b->root, rel);
	_cleanup_fd_ int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return err_sys(b->e, ERR_INTERNAL, errno, "creating '%s'", p);
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_sys(b->e, ERR_INTERNAL, errno, "writing '%s'", p);
		off += (size_t)n;
	}
	if (fchmod(fd, mode) < 0)
		return err_sys(b->e, ERR_INTERNAL, errno, "chmod '%s'", p);
	hash_entry(b, 'f', rel, mode);
	hash_bytes(b, data, len);
	return 0;
}

static int make_text(struct builder *b, const char *rel, const char *text)
{
	return make_file(b, rel, 0644, text, strlen(text));
}

static int read_all(const char *path, size_t max, char **out, size_t *len)
{
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max)
		return -EFBIG;
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return -ENOMEM;
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	*out = buf;
	*len = got;
	return 0;
}

/* Copies host /etc/<rel> (not following symlinks) into the image.  Entries
 * that are not world-readable, and anything that is not a directory, file
 * or symlink, are left out. */
/* Copies the host's /<top>/<rel> (world-readable entries only) to the
 * image's <top>/<rel>; an empty `rel` copies /<top> itself. */
static int copy_tree(struct builder *b, const char *top, const char *rel)
{
	char host[PATH_MAX], dst[PATH_MAX];
	snprintf(host, sizeof(host), rel[0] ? "/%s/%s" : "/%s", top, rel);
	snprintf(dst, sizeof(dst), rel[0] ? "%s/%s" : "%s", top, rel);
	struct stat st;
	if (lstat(host, &st) < 0)
		return 0;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(host, target, sizeof(target) - 1);
		if (n < 0)
			return 0;
		target[n] = '\0';
		return make_link(b, dst, target);
	}
	if (S_ISREG(st.st_mode)) {
		if ((st.st_mode & 0004) == 0)
			return 0;
		_cleanup_free_ char *data = NULL;
		size_t len = 0;
		if (read_all(host, COPY_MAX_BYTES, &data, &len) < 0)
			return 0;
		return make_file(b, dst, st.st_mode & 0755, data, len);
	}
	if (!S_ISDIR(st.st_mode) || (st.st_mode & 0005) != 0005)
		return 0;
	int r = make_dir(b, dst, st.st_mode & 0755);
	if (r < 0)
		return r;
	struct dirent **names;
	int n = scandir(host, &names, NULL, alphasort);
	if (n < 0)
		return 0;
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		if (r == 0 && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
			char child[PATH_MAX];
			if ((size_t)snprintf(child, sizeof(child), rel[0] ? "%s/%s" : "%s%s", rel,
					     name) < sizeof(child))
				r = copy_tree(b, top, child);
		}
		free(names[i]);
	}
	free(names);
	return r;
}

static int copy_allowlist(struct builder *b)
{
	for (size_t i = 0; i < sizeof(etc_allowlist) / sizeof(etc_allowlist[0]); i++) {
		const char *want = etc_allowlist[i];
		size_t n = strlen(want);
		if (want[n - 1] != '*') {
			int r = copy_tree(b, "etc", want);
			if (r < 0)
				return r;
			continue;
		}
		struct dirent **names;
		int k = scandir("/etc", &names, NULL, alphasort);
		int r = 0;
		for (int j = 0; j < k; j++) {
			if (r == 0 && strncmp(names[j]->d_name, want, n - 1) == 0)
				r = copy_tree(b, "etc", names[j]->d_name);
			free(names[j]);
		}
		if (k >= 0)
			free(names);
		if (r < 0)
			return r;
	}
	return 0;
}

static int generate_etc(struct builder *b, const char *state_dir)
{
	char uid_lines[512];
	snprintf(uid_lines, sizeof(uid_lines),
		 "root:x:0:0:root:/root:/bin/bash\n"
		 "user:x:%u:%u:user:/home/user:/bin/bash\n"
		 "_apt:x:42:65534::/nonexistent:/usr/sbin/nologin\n"
		 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		 IMAGE_USER_UID, IMAGE_USER_GID);
	char groups[256];
	snprintf(groups, sizeof(groups),
		 "root:x:0:\ntty:x:5:\naudio:x:29:user\nvideo:x:44:user\nuser:x:%u:\n"
		 "nogroup:x:65534:\n",
		 IMAGE_USER_GID);
	/* A stable id per state dir: D-Bus and friends want one. */
	struct builder h = {.hash = 14695981039346656037ull};
	hash_bytes(&h, state_dir, strlen(state_dir));
	uint64_t a = h.hash;
	hash_bytes(&h, "machine-id", 10);
	char machine_id[40];
	snprintf(machine_id, sizeof(machine_id), "%016llx%016llx\n", (unsigned long long)a,
		 (unsigned long long)h.hash);
	int r = 0;
	r = r ?: make_text(b, "etc/passwd", uid_lines);
	r = r ?: make_text(b, "etc/group", groups);
	r = r ?: make_text(b, "etc/hostname", "deskbox\n");
	r = r ?: make_text(b, "etc/hosts", "127.0.0.1\tlocalhost deskbox\n::1\tlocalhost\n");
	r = r
		?: make_text(b, "etc/nsswitch.conf",
			     "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
			     "networks: files\nprotocols: files\nservices: files\n");
	/* The mount point of the sandbox's own resolv.conf (its network). */
	r = r ?: make_text(b, "etc/resolv.conf", "");
	r = r ?: make_text(b, "etc/machine-id", machine_id);
	r = r ?: make_text(b, "etc/shells", "/bin/sh\n/bin/bash\n/usr/bin/sh\n/usr/bin/bash\n");
	r = r ?: make_text(b, "var/lib/dpkg/available", "");
	/* pip installs into the sandbox's own /usr/local (or ~/.local): the
	 * system Python's "externally managed" marker guards a /usr shared
	 * with nothing here (docs/security.md, root). */
	r = r ?: make_text(b, "etc/pip.conf", "[global]\nbreak-system-packages = true\n");
	r = r
		?: make_text(b, "etc/profile",
			     "export PATH=/usr/local/bin:/usr/bin:/bin\n"
			     "export LANG=${LANG:-C.UTF-8}\n"
			     "[ -n \"$BASH_VERSION\" ] && [ -r /etc/bash.bashrc ] && "
			     ". /etc/bash.bashrc\n");
	return r;
}

/* Chromium (Debian's package) as a user types it: /usr/bin/chromium, the
 * wrapper, sources every file in /etc/chromium.d (and stops when there is
 * none) and passes $CHROMIUM_FLAGS, split on blanks, to the real binary.
 * The flags fit a sandbox: no user namespaces for its own sandbox, no GLX
 * in Xvfb, a 64 MiB /dev/shm, no D-Bus (whose errors would be all it
 * logs), nothing sent to outside services unasked, the profile in the
 * home directory, and DevTools on the sandbox's own loopback for
 * deskboxd's CDP route (docs/browser.md).  Later flags on the command line
 * win over these. */
#define CHROMIUM_WRAPPER "/usr/bin/chromium"
const char image_chromium_flags[] =
    "# Written by deskbox for its sandboxes; see deskbox's docs/browser.md.\n"
    "CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --no-sandbox --disable-gpu --disable-dev-shm-usage\"\n"
    "CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --no-first-run --no-default-browser-check"
    " --password-store=basic --log-level=3\"\n"
    "CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --disable-background-networking --disable-component-update"
    " --disable-sync --disable-breakpad --metrics-recording-only --disable-domain-reliability"
    " --disable-client-side-phishing-detection --disable-default-apps --no-pings"
    " --disable-features=Translate,MediaRouter,OptimizationHints\"\n"
    "CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --user-data-dir=${HOME:-/home/user}/.config/chromium\"\n"
    "CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --remote-debugging-port=9222"
    " --remote-debugging-address=127.0.0.1\"\n"
    "# The accessibility tree (docs/observation.md) with DESKBOX_A11Y=1.\n"
    "if [ \"${DESKBOX_A11Y:-}\" = 1 ]; then\n"
    "  CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --force-renderer-accessibility\"\n"
    "  export ACCESSIBILITY_ENABLED=1\n"
    "fi\n"
    "export CHROMIUM_FLAGS\n";

/* The flags above, and x-www-browser (which xdg-open falls back to) leading
 * to chromium whatever the host chose, when the host's /usr has it. */
static int browser_etc(struct builder *b)
{
	if (access(CHROMIUM_WRAPPER, X_OK) < 0)
		return 0;
	static const char *const links[] = {"etc/alternatives/x-www-browser",
					    "etc/alternatives/gnome-www-browser"};
	int r = make_dir(b, "etc/chromium.d", 0755);
	r = r ?: make_text(b, "etc/chromium.d/deskbox", image_chromium_flags);
	r = r ?: make_dir(b, "etc/alternatives", 0755);
	for (size_t i = 0; r == 0 && i < sizeof(links) / sizeof(links[0]); i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", b->root, links[i]);
		if (unlink(p) < 0 && errno != ENOENT)
			return err_sys(b->e, ERR_INTERNAL, errno, "removing '%s'", p);
		r = make_link(b, links[i], CHROMIUM_WRAPPER);
	}
	return r;
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && strcmp(s + n - t, tail) == 0;
}

/* The host's dpkg database, as far as it describes this image: the image
 * is the host's /usr, so the host's status file (every package, so that
 * apt finds every dependency met) and each package's file list
 * (info/<pkg>.list, ~11 MB for 1200 packages: dpkg -i reads them all and
 * warns for each one missing; dpkg -L and dpkg -r use them).  Maintainer
 * scripts, md5sums, triggers and alternatives are not copied
 * (docs/security.md says what that means).  A host without dpkg gets an
 * empty database. */
static int dpkg_db(struct builder *b)
{
	/* Not statoverride: it names host groups the image has not. */
	static const char *const small[] = {"status", "diversions"};
	int r = 0;
	for (size_t i = 0; r == 0 && i < sizeof(small) / sizeof(small[0]); i++)
		r = copy_tree(b, "var/lib/dpkg", small[i]);
	if (r == 0 && access("/var/lib/dpkg/status", R_OK) < 0)
		return make_text(b, "var/lib/dpkg/status", "");
	struct dirent **names;
	int n = scandir("/var/lib/dpkg/info", &names, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		if (r == 0 && ends_with(names[i]->d_name, ".list"))
			r = copy_tree(b, "var/lib/dpkg/info", names[i]->d_name);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
	return r;
}

static int build_tree(struct builder *b, const char *state_dir)
{
	for (size_t i = 0; i < sizeof(image_dirs) / sizeof(image_dirs[0]); i++) {
		int r = make_dir(b, image_dirs[i].path, image_dirs[i].mode);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < sizeof(mount_point_files) / sizeof(mount_point_files[0]); i++) {
		int r = make_file(b, mount_point_files[i], 0755, "", 0);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < sizeof(usr_links) / sizeof(usr_links[0]); i++) {
		char host[32], target[64], want[64];
		snprintf(host, sizeof(host), "/%s", usr_links[i]);
		snprintf(want, sizeof(want), "usr/%s", usr_links[i]);
		ssize_t n = readlink(host, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = '\0';
		/* Only mirror the host's merged-/usr links ("usr/bin" or "/usr/bin"). */
		if (strcmp(target, want) == 0 ||
		    (target[0] == '/' && strcmp(target + 1, want) == 0)) {
			int r = make_link(b, usr_links[i], want);
			if (r < 0)
				return r;
		}
	}
	int r = generate_etc(b, state_dir);
	r = r ?: copy_allowlist(b);
	r = r ?: browser_etc(b);
	r = r ?: dpkg_db(b);
	/* Without the host's font cache every new desktop rebuilds it: openbox
	 * then spends ~1.5 s of CPU at start (measured), which is most of a
	 * create under load.  The cache describes the same read-only /usr. */
	return r ?: copy_tree(b, "var/cache/fontconfig", "");
}

/* Whether one of the ':'-separated paths of lowerdir value `v` (up to
 * ',', ' ' or the end) ends in the name `name`. */
static int lowers_name(const char *v, const char *name)
{
	size_t nl = strlen(name);
	while (*v && *v != ',' && *v != ' ' && *v != '\n') {
		size_t len = strcspn(v, ":, \n");
		if (len >= nl && memcmp(v + len - nl, name, nl) == 0 &&
		    (len == nl || v[len - nl - 1] == '/'))
			return 1;
		v += len;
		if (*v == ':')
			v++;
	}
	return 0;
}

/* Whether an overlay in this mount namespace has `dir` as a lower layer:
 * by its name (base-<hash>), which an idmapped view of it keeps
 * (runtime_overlay.c). */
static int lower_in_use(const char *dir)
{
	_cleanup_file_ FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return 1;
	const char *name = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
	char *line = NULL;
	size_t cap = 0;
	int used = 0;
	while (!used && getline(&line, &cap, f) > 0) {
		for (char *p = strstr(line, "lowerdir="); p && !used;
		     p = strstr(p + 1, "lowerdir="))
			used = lowers_name(p + 9, name);
	}
	free(line);
	return used;
}

/* Removes a tree nothing needs any more.  A failure only leaves disk space
 * behind (the next prune tries again), so it is logged, not returned. */
static void remove_leftover(const char *path)
{
	struct err e = ERR_INIT;
	if (fs_remove_tree(path, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "default image: %s", e.msg);
}

/* Removes half-built trees and lower layers no overlay uses any more. */
static void prune(const char *images, const char *keep)
{
	_cleanup_free_ struct dirent **names = NULL;
	int n = scandir(images, &names, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", images, name);
		if (strncmp(name, ".tmp-", 5) == 0 ||
		    (strncmp(name, "base-", 5) == 0 && strcmp(p, keep) != 0 && !lower_in_use(p)))
			remove_leftover(p);
		free(names[i]);
	}
}

int image_prepare_default(const char *state_dir, char *lower, size_t lower_size, struct err *e)
{
	char images[PATH_MAX], tmp[PATH_MAX], final[PATH_MAX], link_tmp[PATH_MAX], link[PATH_MAX];
	snprintf(images, sizeof(images), "%s/images/default", state_dir);
	int r = fs_mkdir_p(images, 0755, e);
	if (r < 0)
		return err_wrap(e, "preparing the default image");
	snprintf(tmp, sizeof(tmp), "%s/.tmp-XXXXXX", images);
	if (!mkdtemp(tmp))
		return err_sys(e, ERR_INTERNAL, errno, "creating a directory in '%s'", images);
	struct builder b = {.root = tmp, .hash = 14695981039346656037ull, .e = e};
	if (chmod(tmp, 0755) < 0) {
		r = err_sys(e, ERR_INTERNAL, errno, "chmod '%s'", tmp);
		goto fail;
	}
	hash_entry(&b, 'd', ".", 0755);
	r = build_tree(&b, state_dir);
	if (r < 0)
		goto fail;
	snprintf(final, sizeof(final), "%s/base-%016llx", images, (unsigned long long)b.hash);
	struct stat st;
	if (stat(final, &st) == 0) {
		remove_leftover(tmp); /* unchanged: the existing one is complete */
	} else {
		_cleanup_fd_ int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0)
			syncfs(fd);
		if (rename(tmp, final) < 0) {
			r = err_sys(e, ERR_INTERNAL, errno, "renaming '%s'", tmp);
			goto fail;
		}
	}
	snprintf(link, sizeof(link), "%s/base", images);
	snprintf(link_tmp, sizeof(link_tmp), "%s/.base.tmp", images);
	unlink(link_tmp);
	if (symlink(strrchr(final, '/') + 1, link_tmp) < 0 || rename(link_tmp, link) < 0) {
		r = err_sys(e, ERR_INTERNAL, errno, "pointing '%s' at '%s'", link, final);
		unlink(link_tmp);
		return r;
	}
	prune(images, final);
	if ((size_t)snprintf(lower, lower_size, "%s", final) >= lower_size)
		return err_set(e, ERR_INTERNAL, ENAMETOOLONG, "image path '%s' too long", final);
	return 0;
fail:
	remove_leftover(tmp);
	return err_wrap(e, "preparing the default image");
}

int image_mount_rootfs(const char *lower, const char *upper, const char *work, const char *target,
		       struct err *e)
{
	const char *dirs[] = {upper, work, target};
	for (size_t i = 0; i < 3; i++) {
		int r = fs_mkdir_p(dirs[i], 0755, e);
		if (r < 0)
			return r;
	}
	/* Overlay option values cannot contain ',' ':' or '\'. */
	const char *all[] = {lower, upper, work};
	for (size_t i = 0; i < 3; i++)
		if (strpbrk(all[i], ",:\\"))
			return err_set(e, ERR_INVALID, EINVAL, "unusable overlay path '%s'",
				       all[i]);
	char opts[3 * PATH_MAX + 64];
	/* index=off: the upper layer may be mounted over a newer lower layer
	 * later (see the top of this file); with the inode index on, overlayfs
	 * refuses a lower layer other than the one it first saw. */
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s,index=off", lower, upper,
		 work);
	/* nosuid: no_new_privs already keeps set-user-ID bits inert inside
	 * the sandbox; the mount says so too (and holds for a process that
	 * enters without it).  nodev: no device node the sandbox makes opens
	 * a host device. */
	if (mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "mounting overlay on '%s'", target);
	return 0;
}

/* Chowns <rootfs>/<rel> (a directory; no symlink is followed on the way)
 * to uid:gid if host root still owns it. */
static int own_dir(int rootfd, const char *rel, uid_t uid, gid_t gid, uid_t base, struct err *e)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
	_cleanup_fd_ int fd = (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
	struct stat st;
	/* Gone, or not a directory: the sandbox made it so; nothing to own. */
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP))
		return 0;
	if (fd < 0 || fstat(fd, &st) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '/%s' of the sandbox", rel);
	/* Host root's, or (seen through the sandbox's id mapping) the
	 * lower layer's root as the sandbox's root: still the image's. */
	if ((st.st_uid != 0 && st.st_uid != base) || st.st_uid == uid)
		return 0;
	if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "chown '/%s' of the sandbox", rel);
	return 0;
}

int image_own_dirs(const char *rootfs, uint32_t host_base, struct err *e)
{
	_cleanup_fd_ int rootfd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", rootfs);
	for (size_t i = 0; i < sizeof(image_dirs) / sizeof(image_dirs[0]); i++) {
		const struct dir_entry *d = &image_dirs[i];
		int user = d->owner == OWNER_USER;
		uint32_t uid = host_base + (user ? IMAGE_USER_UID : 0);
		uint32_t gid = host_base + (user ? IMAGE_USER_GID : 0);
		if (d->owner == OWNER_HOST_ROOT || uid == 0)
			continue;
		if (own_dir(rootfd, d->path, uid, gid, host_base ? host_base : (uid_t)-1, e) < 0)
			return err_code(e);
	}
	return 0;
}

int image_umount_rootfs(const char *target, struct err *e)
{
	if (umount2(target, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return err_sys(e, ERR_INTERNAL, errno, "unmounting '%s'", target);
	return 0;
}
