/* images_make: making stored images.  An OCI image (a layout directory or
 * a tar of one) is unpacked with umoci; a Debian 12 desktop image is built
 * with debootstrap (minbase plus the desktop's packages).  Both end in
 * image_finish() (runtime_images.c).  Build figures are in docs/images.md. */
#include "common/clock.h"
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"
#include "internal.h"

#define DEBIAN_SUITE "bookworm"
/* The desktop (Xvfb, openbox: the init starts them), what users expect in
 * it, and the libraries deskbox's own binaries link (they come from the
 * host too, see docs/images.md, but the image is complete without).
 * Installed by apt in the new tree after a minbase debootstrap: with
 * debootstrap --include they failed to configure (dconf-service, on
 * bookworm): debootstrap does not order the scripts of a set that large. */
static const char *const debian_packages[] = {
    "xvfb",	   "openbox",	      "xterm",
    "python3",	   "chromium",	      "fonts-wqy-microhei",
    "x11-utils",   "xdotool",	      "x11-xserver-utils",
    "xfonts-base", "ca-certificates", "libvncserver1",
    "libxdo3",	   "libx11-6",	      "libxtst6",
    "libxdamage1", "libxfixes3",      "libxext6",
};
#define N_DEBIAN_PACKAGES (sizeof(debian_packages) / sizeof(debian_packages[0]))

/* Runs argv[0] (looked up in PATH) with stdin /dev/null; stdout and
 * stderr are collected and their tail becomes the error message of a
 * failure.  `pkg` names the Debian package of a missing tool. */
static int run_tool(const char *const *argv, const char *pkg, struct err *e)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	/* fork and exec rather than posix_spawn, for PR_SET_PDEATHSIG: a
	 * debootstrap must not go on writing into the state dir after the
	 * deskboxd (thread) that started it is gone. */
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0 || dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
			_exit(127);
		execvp(argv[0], (char *const *)argv);
		dprintf(2, "cannot run %s (Debian package %s): %s", argv[0], pkg, strerror(errno));
		_exit(127);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return err_sys(e, ERR_INTERNAL, errno, "fork");
	}
	/* The last 400 bytes of its output: where the reason is. */
	char ring[400], buf[4096];
	size_t len = 0;
	ssize_t n;
	while ((n = read(p[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
		for (ssize_t i = 0; i < n; i++) {
			if (len == sizeof(ring) - 1) {
				memmove(ring, ring + 1, len - 1);
				len--;
			}
			ring[len++] = buf[i] == '\n' ? ' ' : buf[i];
		}
	}
	ring[len] = '\0';
	close(p[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return err_sys(e, ERR_INTERNAL, errno, "waiting for %s", argv[0]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	return err_set(e, ERR_INVALID, EIO, "%s failed (status %d): %s", argv[0],
		       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ring);
}

/* The checks before an image is made: a good name, not there yet. */
static int new_name(const char *state_dir, const char *name, struct err *e)
{
	if (!image_name_valid(name))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'name' must match [a-z0-9][a-z0-9._-]{0,62}");
	if (strcmp(name, IMAGE_DEFAULT) == 0)
		return err_set(e, ERR_CONFLICT, EEXIST, "image 'default' is built in");
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/images/%s", state_dir, name);
	if (access(p, F_OK) == 0)
		return err_set(e, ERR_CONFLICT, EEXIST, "image '%s' exists", name);
	return 0;
}

/* The manifest entry of the layout's index.json to unpack: the one tagged
 * `ref`, or the only one.  Reports its tag and digest. */
static int pick_manifest(const char *layout, const char *ref, char *tag, size_t tag_size,
			 char *digest, size_t digest_size, struct err *e)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/index.json", layout);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (fs_read_file(p, 1 << 20, &text, &len, e) < 0)
		return err_set(e, ERR_INVALID, ENOENT, "'%s' is not an OCI layout (no index.json)",
			       layout);
	cJSON *j = cJSON_ParseWithLength(text, len);
	const cJSON *ms = cJSON_GetObjectItemCaseSensitive(j, "manifests");
	const cJSON *m, *found = NULL;
	int count = 0;
	cJSON_ArrayForEach(m, ms)
	{
		const cJSON *ann = cJSON_GetObjectItemCaseSensitive(m, "annotations");
		const cJSON *rn =
		    cJSON_GetObjectItemCaseSensitive(ann, "org.opencontainers.image.ref.name");
		count++;
		if (cJSON_IsString(rn) && (!ref || strcmp(rn->valuestring, ref) == 0))
			found = found && !ref ? found : m;
	}
	int r = 0;
	const cJSON *rn = found ? cJSON_GetObjectItemCaseSensitive(
				      cJSON_GetObjectItemCaseSensitive(found, "annotations"),
				      "org.opencontainers.image.ref.name")
				: NULL;
	const cJSON *dg = cJSON_GetObjectItemCaseSensitive(found, "digest");
	if (!cJSON_IsArray(ms))
		r = err_set(e, ERR_INVALID, EINVAL, "'%s/index.json' has no manifests", layout);
	else if (!found)
		r = err_set(e, ERR_INVALID, ENOENT, "no image tagged '%s' in '%s'",
			    ref ? ref : "(any)", layout);
	else if (!ref && count > 1)
		r = err_set(e, ERR_INVALID, EINVAL, "'%s' holds %d images: name one with 'ref'",
			    layout, count);
	else if (!cJSON_IsString(dg))
		r = err_set(e, ERR_INVALID, EINVAL, "manifest without a digest in '%s'", layout);
	else {
		snprintf(tag, tag_size, "%s", rn->valuestring);
		snprintf(digest, digest_size, "%s", dg->valuestring);
	}
	cJSON_Delete(j);
	return r;
}

/* The image manifest's layer digests (blobs/sha256/<hex> of `digest`). */
static cJSON *layer_list(const char *layout, const char *digest)
{
	cJSON *arr = cJSON_CreateArray();
	if (strncmp(digest, "sha256:", 7) != 0 || strchr(digest, '/'))
		return arr;
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/blobs/sha256/%s", layout, digest + 7);
	_cleanup_free_ char *text = NULL;
	size_t len;
	struct err e = ERR_INIT;
	if (fs_read_file(p, 1 << 20, &text, &len, &e) < 0)
		return arr;
	cJSON *j = cJSON_ParseWithLength(text, len);
	const cJSON *l;
	cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(j, "layers"))
	{
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(l, "digest");
		if (cJSON_IsString(d))
			cJSON_AddItemToArray(arr, cJSON_CreateString(d->valuestring));
	}
	cJSON_Delete(j);
	return arr;
}

static int check_source(const struct image_import *im, struct err *e)
{
	const char *src = im->layout ? im->layout : im->archive;
	if (!!im->layout == !!im->archive)
		return err_set(e, ERR_INVALID, EINVAL,
			       "give one of 'oci_layout', 'oci_archive' or 'build'");
	if (src[0] != '/' || strchr(src, ':') || strlen(src) >= PATH_MAX - 64)
		return err_set(e, ERR_INVALID, EINVAL,
			       "the OCI source must be an absolute host path without ':'");
	struct stat st;
	if (stat(src, &st) < 0)
		return err_sys(e, ERR_INVALID, errno, "OCI source '%s'", src);
	if (im->layout ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return err_set(e, ERR_INVALID, EINVAL, "'%s' is not %s", src,
			       im->layout ? "a directory" : "a file");
	if (im->ref && (!im->ref[0] || strlen(im->ref) > 128 || strpbrk(im->ref, "/: \t\n")))
		return err_set(e, ERR_INVALID, EINVAL, "bad 'ref'");
	return 0;
}

/* Unpacks the layout (extracting the archive first) into <tmp>/rootfs. */
static int unpack(const struct image_import *im, const char *tmp, cJSON *manifest, struct err *e)
{
	char layout[PATH_MAX], bundle[PATH_MAX], from[PATH_MAX], to[PATH_MAX];
	snprintf(layout, sizeof(layout), "%s", im->layout ? im->layout : "");
	if (im->archive) {
		snprintf(layout, sizeof(layout), "%s/layout", tmp);
		const char *tar[] = {"tar", "-xf", im->archive, "-C", layout, "--no-same-owner",
				     NULL};
		if (fs_mkdir_p(layout, 0700, e) < 0 || run_tool(tar, "tar", e) < 0)
			return err_wrap(e, "extracting '%s'", im->archive);
	}
	char tag[160], digest[160], image[PATH_MAX + 200];
	if (pick_manifest(layout, im->ref, tag, sizeof(tag), digest, sizeof(digest), e) < 0)
		return err_code(e);
	snprintf(image, sizeof(image), "%s:%s", layout, tag);
	snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
	const char *umoci[] = {"umoci", "unpack", "--image", image, bundle, NULL};
	if (run_tool(umoci, "umoci", e) < 0)
		return err_code(e);
	snprintf(from, sizeof(from), "%s/rootfs", bundle);
	snprintf(to, sizeof(to), "%s/rootfs", tmp);
	if (rename(from, to) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "moving the unpacked rootfs");
	char source[PATH_MAX + 200];
	snprintf(source, sizeof(source), "%s:%s:%s", im->layout ? "oci-layout" : "oci-archive",
		 im->layout ? im->layout : im->archive, tag);
	cJSON_AddStringToObject(manifest, "source", source);
	cJSON_AddStringToObject(manifest, "digest", digest);
	cJSON_AddItemToObject(manifest, "layers", layer_list(layout, digest));
	if (fs_remove_tree(bundle, e) < 0 || (im->archive && fs_remove_tree(layout, e) < 0))
		return err_code(e);
	return 0;
}

int image_import_oci(const char *state_dir, const struct image_import *im, cJSON **manifest,
		     struct err *e)
{
	if (new_name(state_dir, im->name, e) < 0 || check_source(im, e) < 0)
		return err_code(e);
	char tmp[PATH_MAX];
	if (image_tmp_dir(state_dir, im->name, tmp, sizeof(tmp), e) < 0)
		return err_code(e);
	cJSON *m = cJSON_CreateObject();
	int r = unpack(im, tmp, m, e);
	if (r < 0)
		cJSON_Delete(m);
	r = r ?: image_finish(state_dir, im->name, tmp, m, manifest, e);
	if (r < 0) {
		struct err e2 = ERR_INIT;
		fs_remove_tree(tmp, &e2);
		return err_wrap(e, "importing image '%s'", im->name);
	}
	return 0;
}

/* ---- the Debian image ---- */

/* The first Debian archive (not its security archive) in the host's apt
 * sources, deb822 or one-line, into `out`. */
static int host_mirror(char *out, size_t size)
{
	static const char *const files[] = {"/etc/apt/sources.list.d/debian.sources",
					    "/etc/apt/sources.list"};
	for (size_t i = 0; i < 2; i++) {
		_cleanup_file_ FILE *f = fopen(files[i], "re");
		char line[1024];
		while (f && fgets(line, sizeof(line), f)) {
			char url[512];
			if (sscanf(line, "URIs: %511s", url) != 1 &&
			    sscanf(line, "deb %511s " DEBIAN_SUITE " ", url) != 1)
				continue;
			if (strstr(url, "security") || strncmp(url, "http", 4) != 0)
				continue;
			snprintf(out, size, "%s", url);
			return 0;
		}
	}
	return -ENOENT;
}

/* {"name","version"} of every installed package, from dpkg's status file;
 * `digest` is the SHA-256 of "name=version\n" in that (sorted) order. */
static cJSON *package_list(const char *rootfs, char *digest, size_t size)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/var/lib/dpkg/status", rootfs);
	cJSON *arr = cJSON_CreateArray();
	struct sha256_ctx h;
	sha256_init(&h);
	_cleanup_file_ FILE *f = fopen(p, "re");
	char line[4096], pkg[256] = "", ver[256] = "";
	int installed = 0;
	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "Package: %255s", pkg);
		sscanf(line, "Version: %255s", ver);
		if (strncmp(line, "Status: ", 8) == 0)
			installed = strstr(line, " installed") != NULL;
		if (line[0] != '\n')
			continue;
		if (installed && pkg[0]) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "name", pkg);
			cJSON_AddStringToObject(o, "version", ver);
			cJSON_AddItemToArray(arr, o);
			char kv[520];
			int n = snprintf(kv, sizeof(kv), "%s=%s\n", pkg, ver);
			sha256_update(&h, (size_t)n, (const uint8_t *)kv);
		}
		pkg[0] = ver[0] = '\0';
		installed = 0;
	}
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_digest(&h, sizeof(d), d);
	int off = snprintf(digest, size, "sha256:");
	for (size_t i = 0; i < sizeof(d) && (size_t)off + 2 < size; i++)
		off += snprintf(digest + off, size - (size_t)off, "%02x", d[i]);
	return arr;
}

/* apt-get install of debian_packages inside the new tree (chroot; these
 * packages' scripts need no /proc). */
static int apt_install(const char *rootfs, struct err *e)
{
	const char *argv[8 + N_DEBIAN_PACKAGES + 1] = {
	    "env", "DEBIAN_FRONTEND=noninteractive", "chroot", rootfs, "apt-get", "install",
	    "-y",  "--no-install-recommends",
	};
	size_t n = 8;
	for (size_t i = 0; i < N_DEBIAN_PACKAGES; i++)
		argv[n++] = debian_packages[i];
	argv[n] = NULL;
	return run_tool(argv, "apt", e);
}

/* What debootstrap and apt leave that an image does not need: the
 * downloaded .debs, apt's caches (69 MB) and the package lists; apt makes
 * them again when run. */
static int trim(const char *rootfs, struct err *e)
{
	static const char *const dirs[] = {"var/cache/apt", "var/lib/apt/lists"};
	for (size_t i = 0; i < 2; i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", rootfs, dirs[i]);
		if (fs_remove_tree(p, e) < 0 || fs_mkdir_p(p, 0755, e) < 0)
			return err_code(e);
	}
	char partial[PATH_MAX];
	snprintf(partial, sizeof(partial), "%s/var/cache/apt/archives/partial", rootfs);
	if (fs_mkdir_p(partial, 0755, e) < 0)
		return err_code(e);
	/* The host's resolver, which debootstrap copied in: sandboxes get
	 * their own (or none). */
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/etc/resolv.conf", rootfs);
	if (fs_write_atomic(p, "", 0, 0644, e) < 0)
		return err_code(e);
	snprintf(p, sizeof(p), "%s/etc/chromium.d", rootfs);
	if (access(p, F_OK) == 0) {
		snprintf(p, sizeof(p), "%s/etc/chromium.d/deskbox", rootfs);
		return fs_write_atomic(p, image_chromium_flags, strlen(image_chromium_flags), 0644,
				       e);
	}
	return 0;
}

int image_build_debian(const char *state_dir, const char *name, const char *mirror,
		       cJSON **manifest, struct err *e)
{
	char found[512], tmp[PATH_MAX], rootfs[PATH_MAX + 16], digest[80];
	if (new_name(state_dir, name, e) < 0)
		return err_code(e);
	if (!mirror && host_mirror(found, sizeof(found)) < 0)
		return err_set(e, ERR_UNAVAILABLE, ENOENT,
			       "no Debian mirror in /etc/apt/sources.list(.d): give 'mirror'");
	mirror = mirror ? mirror : found;
	if (image_tmp_dir(state_dir, name, tmp, sizeof(tmp), e) < 0)
		return err_code(e);
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", tmp);
	const char *argv[] = {"debootstrap", "--variant=minbase", DEBIAN_SUITE, rootfs, mirror,
			      NULL};
	long long t0 = (long long)time(NULL);
	int r = run_tool(argv, "debootstrap", e);
	r = r ?: apt_install(rootfs, e);
	r = r ?: trim(rootfs, e);
	if (r == 0) {
		cJSON *m = cJSON_CreateObject();
		char source[600];
		snprintf(source, sizeof(source), "debootstrap:%s:%s", DEBIAN_SUITE, mirror);
		cJSON_AddStringToObject(m, "source", source);
		cJSON_AddItemToObject(m, "packages", package_list(rootfs, digest, sizeof(digest)));
		cJSON_AddStringToObject(m, "digest", digest);
		cJSON_AddNumberToObject(m, "build_seconds", (double)((long long)time(NULL) - t0));
		r = image_finish(state_dir, name, tmp, m, manifest, e);
	}
	if (r < 0) {
		struct err e2 = ERR_INIT;
		fs_remove_tree(tmp, &e2);
		return err_wrap(e, "building image '%s'", name);
	}
	return 0;
}

struct build_job {
	char *state_dir, *name, *mirror;
};

static void build_status(const char *state_dir, const char *name, const char *status,
			 const char *error)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/images/.build-%s.json", state_dir, name);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", name);
	cJSON_AddStringToObject(j, "status", status);
	cJSON_AddStringToObject(j, "source", "debootstrap:" DEBIAN_SUITE);
	char t_s[CLOCK_RFC3339_MAX];
	clock_rfc3339(clock_wall_ms(), t_s, sizeof(t_s));
	cJSON_AddStringToObject(j, "started_at", t_s);
	if (error)
		cJSON_AddStringToObject(j, "error", error);
	_cleanup_free_ char *text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	struct err e = ERR_INIT;
	if (!text || fs_write_atomic(p, text, strlen(text), 0644, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "image build status: %s", e.msg);
}

static void *build_thread(void *arg)
{
	struct build_job *job = arg;
	struct err e = ERR_INIT;
	cJSON *m = NULL;
	if (image_build_debian(job->state_dir, job->name, job->mirror, &m, &e) < 0) {
		log_msg(LOG_LEVEL_WARN, "%s", e.msg);
		build_status(job->state_dir, job->name, "failed", e.msg);
	} else {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/images/.build-%s.json", job->state_dir, job->name);
		unlink(p);
		log_msg(LOG_LEVEL_INFO, "image '%s' built", job->name);
	}
	cJSON_Delete(m);
	free(job->state_dir);
	free(job->name);
	free(job->mirror);
	free(job);
	return NULL;
}

int image_build_start(const char *state_dir, const char *name, const char *mirror, struct err *e)
{
	/* One check-and-claim at a time, so two requests cannot both start a
	 * build of one name. */
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	if (mirror && (strncmp(mirror, "http://", 7) != 0 && strncmp(mirror, "https://", 8) != 0))
		return err_set(e, ERR_INVALID, EINVAL, "field 'mirror' must be an http(s) URL");
	if (mirror && (strlen(mirror) > 400 || strpbrk(mirror, " \t\n")))
		return err_set(e, ERR_INVALID, EINVAL, "bad 'mirror'");
	pthread_mutex_lock(&mu);
	cJSON *cur = NULL;
	struct err e2 = ERR_INIT;
	int r = new_name(state_dir, name, e);
	const cJSON *st = NULL;
	if (r == 0 && image_get(state_dir, name, &cur, &e2) == 0)
		st = cJSON_GetObjectItemCaseSensitive(cur, "status");
	if (cJSON_IsString(st) && strcmp(st->valuestring, "failed") != 0)
		r = err_set(e, ERR_CONFLICT, EBUSY, "image '%s' is being built", name);
	cJSON_Delete(cur);
	struct build_job *job = r == 0 ? calloc(1, sizeof(*job)) : NULL;
	if (r == 0 && job) {
		job->state_dir = strdup(state_dir);
		job->name = strdup(name);
		job->mirror = mirror ? strdup(mirror) : NULL;
		build_status(state_dir, name, "building", NULL);
		pthread_attr_t attr;
		pthread_t t;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, build_thread, job) != 0) {
			build_status(state_dir, name, "failed", "could not start a thread");
			free(job->state_dir), free(job->name), free(job->mirror), free(job);
			r = err_set(e, ERR_INTERNAL, EAGAIN, "starting the build");
		}
		pthread_attr_destroy(&attr);
	} else if (r == 0) {
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	pthread_mutex_unlock(&mu);
	return r;
}
