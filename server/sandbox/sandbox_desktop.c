/* sandbox_desktop: bringing one sandbox's container and desktop up (the
 * OCI bundle, the container, waiting for X and the window manager, the
 * screen mirror) and down again, and new connections to its VNC server. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "server/process/process.h"
#include "server/runtime/runtime.h"

#define CAPTURE_READY_TIMEOUT_MS 5000
#define VNC_CONNECT_RETRY_MS	 3000

/* Last line(s) of init.log, for error messages that say why a desktop did not
 * come up. */
static void log_tail(const struct sandbox *sb, char *out, size_t size)
{
	char path[PATH_MAX];
	sandbox_path(sb, path, sizeof(path), "init.log");
	out[0] = '\0';
	sandbox_log_flush(sb);
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	off_t start = end > (off_t)size - 1 ? end - (off_t)size + 1 : 0;
	ssize_t n = pread(fd, out, size - 1, start);
	if (n <= 0)
		return;
	out[n] = '\0';
	for (char *p = out; *p; p++)
		if (*p == '\n' && p[1])
			*p = ' ';
	size_t l = strlen(out);
	if (l && out[l - 1] == '\n')
		out[l - 1] = '\0';
}

/* Connects to the sandbox's VNC socket run/`name`.  The path goes through
 * /proc/self/fd/N of the directory so it stays short whatever the state
 * dir's length (sun_path holds 108 bytes). */
static int vnc_connect(const struct sandbox *sb, const char *name, struct err *e)
{
	char run[PATH_MAX];
	sandbox_run_dir(sb, run, sizeof(run));
	_cleanup_fd_ int dfd = open(run, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", run);
	/* The socket file appears at bind(), a moment before x11vnc listens
	 * (or while it restarts): retry refusals for a short while. */
	long long deadline = clock_mono_ms() + VNC_CONNECT_RETRY_MS;
	for (;;) {
		/* SECURITY: the sandbox owns run/ (its root, or its user
		 * without a user namespace) and could put a symlink to a host
		 * socket there; deskboxd (root) must only ever connect to a
		 * socket inode that is really in run/. */
		_cleanup_fd_ int sfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		int saved = 0;
		if (sfd < 0)
			saved = errno;
		else if (fstat(sfd, &st) < 0)
			saved = errno;
		else if (!S_ISSOCK(st.st_mode))
			return err_set(e, ERR_UNAVAILABLE, EINVAL,
				       "the sandbox's VNC socket is not a socket");
		if (!saved) {
			struct sockaddr_un sa = {.sun_family = AF_UNIX};
			snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", sfd);
			_cleanup_fd_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fd < 0)
				return err_sys(e, ERR_INTERNAL, errno, "socket");
			if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
				return TAKE_FD(fd);
			saved = errno;
		}
		if ((saved != ECONNREFUSED && saved != ENOENT) || clock_mono_ms() > deadline)
			return err_sys(e, ERR_UNAVAILABLE, saved,
				       "connecting to the sandbox's VNC server");
		clock_sleep_ms(5);
	}
}

/* A viewer port's greeting (desktop-image/vm-relay.py): the guest may see
 * a port's close and its next connect as one, so each connection starts
 * with HELLO, and what comes before the guest's ACK (the end of an old
 * connection's stream) is dropped.  Then the VNC server's banner follows. */
static const char viewer_hello[] = "\377deskbox-view\000\001";
static const char viewer_ack[] = "\377deskbox-view-ok\n";
#define VIEWER_ACK_TIMEOUT_MS 20000
#define VIEWER_STALE_MAX      (64u << 20)

static int viewer_greet(int fd, struct err *e)
{
	const size_t al = sizeof(viewer_ack) - 1;
	char buf[65536];
	if (send(fd, viewer_hello, sizeof(viewer_hello) - 1, MSG_NOSIGNAL) !=
	    (ssize_t)sizeof(viewer_hello) - 1)
		return err_sys(e, ERR_UNAVAILABLE, errno, "greeting the viewer port");
	long long until = clock_mono_ms() + VIEWER_ACK_TIMEOUT_MS;
	for (size_t dropped = 0; dropped < VIEWER_STALE_MAX;) {
		long long left = until - clock_mono_ms();
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK);
		if (n <= 0)
			break;
		void *at = memmem(buf, (size_t)n, viewer_ack, al);
		/* Consumes up to the ACK's end, or all but a partial ACK. */
		size_t take = at ? (size_t)((char *)at - buf) + al
				 : ((size_t)n >= al ? (size_t)n - al + 1 : 0);
		if (take && recv(fd, buf, take, 0) != (ssize_t)take)
			break;
		if (at)
			return 0;
		if (!take)
			poll(NULL, 0, 5); /* a partial ACK: the rest comes */
		dropped += take;
	}
	return err_set(e, ERR_UNAVAILABLE, ETIMEDOUT,
		       "the sandbox's viewer port did not answer (its VNC relay)");
}

/* A viewer's own port (runtime_backend.viewer_ports): the first
 * run/vncview<i>.sock whose run/vncview<i>.lock nobody holds.  Each port
 * serves one connection at a time (a second would wait unanswered), so the
 * lock goes with the connection: *lease, closed when it ends. */
static int viewer_port_connect(const struct sandbox *sb, int n, int *lease, struct err *e)
{
	char run[PATH_MAX], name[32];
	sandbox_run_dir(sb, run, sizeof(run));
	_cleanup_fd_ int dfd = open(run, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", run);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "vncview%d.lock", i);
		_cleanup_fd_ int lk =
		    openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (lk < 0)
			return err_sys(e, ERR_INTERNAL, errno, "opening '%s/%s'", run, name);
		if (flock(lk, LOCK_EX | LOCK_NB) < 0)
			continue;
		snprintf(name, sizeof(name), "vncview%d.sock", i);
		_cleanup_fd_ int fd = vnc_connect(sb, name, e);
		if (fd < 0 || viewer_greet(fd, e) < 0)
			return err_code(e);
		*lease = TAKE_FD(lk);
		return TAKE_FD(fd);
	}
	return err_set(e, ERR_UNAVAILABLE, EBUSY,
		       "all %d live-viewer ports of this %s sandbox are in use; close a viewer "
		       "and retry",
		       n, runtime_isolation_name(sb->be->isolation));
}

int sandbox_vnc_connect(const struct sandbox *sb, int *lease, struct err *e)
{
	*lease = -1;
	if (sb->be->feature(RUNTIME_FEATURE_VNC_VIEWER, e) < 0)
		return err_code(e);
	if (sb->be->viewer_ports > 0)
		return viewer_port_connect(sb, sb->be->viewer_ports, lease, e);
	return vnc_connect(sb, "vnc.sock", e);
}

int sandbox_port_connect(struct sandbox *sb, uint16_t port, int timeout_ms, struct err *e)
{
	pthread_mutex_lock(&sb->mu);
	pid_t pid = sb->init_pid;
	pthread_mutex_unlock(&sb->mu);
	int fd = -1;
	int r = sb->be->connect_inside(pid, port, timeout_ms, &fd, e);
	return r < 0 ? r : fd;
}

/* Connects a new bridge to the sandbox's VNC server; returns at once. */
static int capture_begin(struct sandbox *sb, struct capture **out, struct err *e)
{
	int fd = vnc_connect(sb, "vnc.sock", e);
	if (fd < 0)
		return fd;
	struct capture_opts o = {
	    .bridge_path = sb->owner->cfg.bridge_path,
	    .width = sb->spec.width,
	    .height = sb->spec.height,
	};
	if (capture_start(out, &o, fd, e) < 0)
		return err_wrap(e, "starting the capture bridge");
	return 0;
}

static int capture_finish(struct capture *cap, int timeout_ms, struct err *e)
{
	if (capture_wait_ready(cap, timeout_ms, e) < 0) {
		capture_free(cap);
		return err_wrap(e, "waiting for the first frame");
	}
	return 0;
}

int sandbox_capture_connect(struct sandbox *sb, int timeout_ms, struct capture **out, struct err *e)
{
	struct capture *cap;
	if (capture_begin(sb, &cap, e) < 0 || capture_finish(cap, timeout_ms, e) < 0)
		return err_code(e);
	*out = cap;
	return 0;
}

/* Waits until the init creates run/<name> ("vnc.sock", "ready"). */
static int wait_desktop(struct sandbox *sb, const char *name, int timeout_ms, struct err *e)
{
	char path[PATH_MAX], rel[64];
	snprintf(rel, sizeof(rel), "run/%s", name);
	sandbox_path(sb, path, sizeof(path), rel);
	long long deadline = clock_mono_ms() + timeout_ms;
	for (int i = 0;; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		if (sandbox_init_gone(sb)) {
			char tail[400];
			log_tail(sb, tail, sizeof(tail));
			return err_set(e, ERR_INTERNAL, ECHILD, "the sandbox's init exited: %s",
				       tail[0] ? tail : "no log");
		}
		if (clock_mono_ms() > deadline) {
			char tail[400];
			log_tail(sb, tail, sizeof(tail));
			return err_set(e, ERR_TIMEOUT, ETIMEDOUT,
				       "desktop not ready after %d ms: %s", timeout_ms,
				       tail[0] ? tail : "no log");
		}
		/* 2 ms polls: readiness is ~100s of ms away and a stat is cheap. */
		clock_sleep_ms(i < 500 ? 2 : 10);
	}
}

/* Stops the container and, with `unmount`, unmounts; leaves the files. */
void sandbox_teardown_ex(struct sandbox *sb, int unmount)
{
	struct err e = ERR_INIT;
	sandbox_thaw_quiet(sb);
	sandbox_init_disown(sb);
	capture_free(sb->cap);
	sb->cap = NULL;
	/* Every run's own cgroup, before crun removes the sandbox's. */
	process_table_kill_all(sb->procs, 0);
	sandbox_net_detach(sb);
	if (sb->be->remove(sb->owner->rt, sb->container_id, 1, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
	err_clear(&e);
	sandbox_log_close(sb);
	char rootfs[PATH_MAX];
	sandbox_path(sb, rootfs, sizeof(rootfs), "rootfs");
	if (unmount) {
		sandbox_roview_umount(sb);
		if (image_umount_rootfs(rootfs, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
		pthread_mutex_lock(&sb->mu);
		sb->rootfs_mounted = 0;
		pthread_mutex_unlock(&sb->mu);
		sandbox_disk_umount(sb);
	}
	char sock[PATH_MAX];
	sandbox_path(sb, sock, sizeof(sock), "run/vnc.sock");
	unlink(sock);
	sandbox_path(sb, sock, sizeof(sock), "run/ready");
	unlink(sock);
	sandbox_run_umount(sb);
	sandbox_adopt_end(sb);
	sb->init_pid = -1;
}

/* The overlays of a sandbox with its own uid range: the image's lower
 * layer through its id mapping, so its root owns /etc, /var, /opt (and
 * the rest of the image), and for the default image the host's /usr as
 * the lower layer of a second overlay on <rootfs>/usr, its upper layer
 * beside the first on the sandbox's disk (sandbox_usr_layers).  What root
 * installs there is the sandbox's alone and persists like its other files. */
static int mount_layers(struct sandbox *sb, const char *lower, const char *upper, const char *work,
			const char *rootfs, struct err *e)
{
	sb->own_usr = 0;
	if (!sb->host_base)
		return image_mount_rootfs(lower, upper, work, rootfs, e);
	char stage[PATH_MAX], extra[PATH_MAX];
	sandbox_path(sb, stage, sizeof(stage), "layers");
	int stored = sb->spec.image[0] && strcmp(sb->spec.image, IMAGE_DEFAULT) != 0;
	/* A stored image gets deskbox's sudo above it, where its /usr/bin is a
	 * directory (a link there would be hidden by the layer's). */
	snprintf(extra, sizeof(extra), "%s", sb->owner->usr_extra);
	*strrchr(extra, '/') = '\0';
	char bin[PATH_MAX];
	struct stat st;
	snprintf(bin, sizeof(bin), "%s/usr/bin", lower);
	int top = stored && lstat(bin, &st) == 0 && S_ISDIR(st.st_mode);
	struct image_overlay o = {.lowers = {top ? extra : lower, top ? lower : NULL},
				  .upper = upper,
				  .work = work,
				  .target = rootfs,
				  .idmap_base = sb->host_base,
				  .stage = stage};
	if (image_mount_overlay(&o, e) < 0) {
		if (e->kind != ERR_UNAVAILABLE)
			return err_code(e);
		/* No idmapped mounts here: the layers as they are, read-only
		 * system directories (root inside still is, for its files). */
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s; its system directories stay read-only",
			sb->id, e->msg);
		err_clear(e);
		return image_mount_rootfs(lower, upper, work, rootfs, e);
	}
	if (stored)
		return 0;
	char usr[PATH_MAX], uupper[PATH_MAX], uwork[PATH_MAX];
	snprintf(usr, sizeof(usr), "%s/usr", rootfs);
	sandbox_usr_layers(sb, uupper, uwork, sizeof(uupper));
	/* Its sudo (it says so when root is off) over the host's /usr. */
	struct image_overlay u = {.lowers = {sb->owner->usr_extra, "/usr"},
				  .upper = uupper,
				  .work = uwork,
				  .target = usr,
				  .idmap_base = sb->host_base,
				  .stage = stage};
	if (image_mount_overlay(&u, e) < 0) {
		struct err e2 = ERR_INIT;
		image_umount_rootfs(rootfs, &e2);
		return err_wrap(e, "the /usr of sandbox '%s'", sb->id);
	}
	sb->own_usr = 1;
	return 0;
}

/* Mounts the overlay on <dir>/rootfs unless it already is. */
int sandbox_rootfs_mount(struct sandbox *sb, struct err *e)
{
	char rootfs[PATH_MAX], upper[PATH_MAX], work[PATH_MAX];
	sandbox_path(sb, rootfs, sizeof(rootfs), "rootfs");
	pthread_mutex_lock(&sb->mu);
	char lower[PATH_MAX];
	int r = 0;
	if (!sb->rootfs_mounted) {
		r = sandbox_image_lower(sb, lower, sizeof(lower), e);
		r = r ?: sandbox_disk_mount(sb, upper, work, sizeof(upper), e);
		r = r ?: mount_layers(sb, lower, upper, work, rootfs, e);
		sb->rootfs_mounted = r == 0;
		if (r == 0)
			r = image_own_dirs(rootfs, sb->host_base, e);
		if (r == 0)
			r = sandbox_secrets_rootfs(sb, rootfs, e);
	}
	pthread_mutex_unlock(&sb->mu);
	return r;
}

/* The container's environment: the fixed part, the spec's env, and
 * deskboxd's own DESKBOX_VNC (x11vnc | deskbox), which picks the VNC server
 * unless the spec's env does (the first of two equal names wins in getenv).
 * `env` has room for ENV_ROOM entries; the strings point into
 * the spec, `display` and `vnc_env`. */
#define ENV_ROOM (SANDBOX_MAX_ENV + 9 + SECRETS_PER_SANDBOX + 4 + SANDBOX_IMAGE_ENV_MAX)

static int same_key(const char *a, const char *b)
{
	size_t n = strcspn(a, "=");
	return strncmp(a, b, n) == 0 && b[n] == '=';
}

/* The image's ENV (of a Dockerfile build: sandbox_image_env) over the
 * fixed part, unless the spec's env names it too. */
static size_t image_env(const struct sandbox *sb, char *const *img, const char **env, size_t n)
{
	for (size_t i = 0; img && img[i]; i++) {
		int spec = 0;
		for (size_t k = 0; k < SANDBOX_MAX_ENV && sb->spec.env[k]; k++)
			spec |= same_key(img[i], sb->spec.env[k]);
		size_t k = 0;
		while (k < n && !same_key(img[i], env[k]))
			k++;
		if (!spec)
			env[k == n ? n++ : k] = img[i];
	}
	return n;
}

static void container_env(const struct sandbox *sb, char *const *img, const char **env,
			  char *display, size_t display_size, char *vnc_env, size_t vnc_env_size)
{
	snprintf(display, display_size, "DESKBOX_DISPLAY=%ux%u", sb->spec.width, sb->spec.height);
	size_t n = 0;
	env[n++] = "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
	env[n++] = "HOME=/home/user";
	env[n++] = "USER=user";
	env[n++] = "LANG=C.UTF-8";
	env[n++] = "DISPLAY=:0";
	env[n++] = display;
	/* The init's sudo door (desktop-image/exec_agent.h), where root is
	 * allowed: a user namespace of its own and no "root": false. */
	if (sb->host_base && !sb->spec.no_root)
		env[n++] = "DESKBOX_SUDO=1";
	n = image_env(sb, img, env, n);
	for (size_t i = 0; i < SANDBOX_MAX_ENV && sb->spec.env[i]; i++)
		env[n++] = sb->spec.env[i];
	n += sandbox_secrets_env((struct sandbox *)sb, env + n);
	const char *vnc_choice = getenv("DESKBOX_VNC");
	if (vnc_choice && (!strcmp(vnc_choice, "x11vnc") || !strcmp(vnc_choice, "deskbox"))) {
		snprintf(vnc_env, vnc_env_size, "DESKBOX_VNC=%s", vnc_choice);
		env[n++] = vnc_env;
	}
	env[n] = NULL;
}

/* 0 if <rootfs>/<name> is a directory, not a symlink: a bind source is a
 * host path, so one that an image could point elsewhere is refused. */
static int plain_dir(const char *rootfs, const char *name, char *out, size_t size, struct err *e)
{
	struct stat st;
	snprintf(out, size, "%s/%s", rootfs, name);
	if (lstat(out, &st) < 0 || !S_ISDIR(st.st_mode))
		return err_set(e, ERR_INVALID, ENOTDIR,
			       "image: /%s is not a directory, and the host's desktop needs it",
			       name);
	return 0;
}

/* The host's desktop for an image that lacks Xvfb or openbox: the default
 * image's lower layer and the host's /usr, read-only, at IMAGE_HOST_DIR,
 * with the sandbox's own /tmp (X socket, keymaps) and /root (the desktop's
 * home) in it; the init runs Xvfb and openbox chrooted there. */
static int host_mounts(const struct sandbox *sb, const char *rootfs, struct runtime_mount *mounts,
		       char img[2][PATH_MAX], struct err *e)
{
	if (!sb->host_base)
		return err_set(e, ERR_INVALID, EPERM, NO_USERNS_HOST_DESKTOP, sb->spec.image);
	if (plain_dir(rootfs, "tmp", img[0], PATH_MAX, e) < 0 ||
	    plain_dir(rootfs, "root", img[1], PATH_MAX, e) < 0)
		return err_code(e);
	mounts[0] = (struct runtime_mount){sb->owner->lower, IMAGE_HOST_DIR, 1};
	mounts[1] = (struct runtime_mount){"/usr", IMAGE_HOST_DIR "/usr", 1};
	mounts[2] = (struct runtime_mount){img[0], IMAGE_HOST_DIR "/tmp", 0};
	mounts[3] = (struct runtime_mount){img[1], IMAGE_HOST_DIR "/root", 0};
	return 4;
}

/* The container's bind mounts into `mounts` (room for 9; `img` holds
 * their paths); returns how many.  *host: the image gets the host's
 * desktop. */
static int bundle_mounts(const struct sandbox *sb, const char *rootfs, const char *run,
			 struct runtime_mount *mounts, char img[6][PATH_MAX], int *host,
			 struct err *e)
{
	const struct sandboxes *s = sb->owner;
	int n_mounts = 0;
	*host = 0;
	if (!sb->spec.image[0] || strcmp(sb->spec.image, IMAGE_DEFAULT) == 0) {
		/* With its own uid range, the sandbox's /usr overlay
		 * (mount_layers); else the host's, read-only. */
		snprintf(img[0], sizeof(img[0]), "%s/usr", rootfs);
		mounts[n_mounts++] =
		    sb->own_usr ? (struct runtime_mount){img[0], "/usr", sb->spec.read_only_root}
				: (struct runtime_mount){"/usr", "/usr", 1};
		mounts[n_mounts++] = (struct runtime_mount){s->cfg.init_path, "/.deskbox/init", 1};
		mounts[n_mounts++] =
		    (struct runtime_mount){s->cfg.vnc_path, "/.deskbox/deskbox-vnc", 1};
		mounts[n_mounts++] =
		    (struct runtime_mount){s->cfg.xtool_path, "/.deskbox/xtool", 1};
	} else {
		/* A stored image: its own /usr, deskbox's parts linked against
		 * the host libraries in /.deskbox/lib (docs/images.md). */
		if (!s->cfg.image_bin_dir)
			return err_set(e, ERR_UNAVAILABLE, ENOENT,
				       "deskboxd has no image binaries (build/image): only the "
				       "default image works");
		static const char *const parts[][2] = {{"deskbox-init", "/.deskbox/init"},
						       {"deskbox-vnc", "/.deskbox/deskbox-vnc"},
						       {"deskbox-xtool", "/.deskbox/xtool"},
						       {"lib", IMAGE_LIB_DIR}};
		for (size_t i = 0; i < 4; i++) {
			snprintf(img[i], sizeof(img[i]), "%s/%s", s->cfg.image_bin_dir,
				 parts[i][0]);
			mounts[n_mounts++] = (struct runtime_mount){img[i], parts[i][1], 1};
		}
		char lower[PATH_MAX];
		if (sandbox_image_lower(sb, lower, sizeof(lower), e) < 0)
			return err_code(e);
		*host = image_host_parts(lower) != 0;
		int n = *host ? host_mounts(sb, rootfs, mounts + n_mounts, img + 4, e) : 0;
		if (n < 0)
			return n;
		n_mounts += n;
	}
	mounts[n_mounts++] = (struct runtime_mount){run, "/run/deskbox", 0};
	return n_mounts;
}

/* The init's capabilities (all of the user namespace's only).  It runs as
 * the container's root apart from the user's programs, which it starts as
 * IMAGE_USER_UID (setuid and setgid), and able to stop them (kill); with
 * root allowed ("user": "root", sudo), what a root of a Docker container
 * has for files (chown, overriding modes, set-id bits, file capabilities)
 * and low ports, which its exec agent's root children keep; to run the
 * host's desktop in its chroot, CAP_SYS_CHROOT.  The desktop's parts get
 * none (the init drops them before their exec). */
static const char *const *init_caps(const struct sandbox *sb, int host)
{
	static const char *const user[] = {"CAP_SETUID", "CAP_SETGID", "CAP_KILL", NULL};
	static const char *const user_host[] = {"CAP_SETUID", "CAP_SETGID", "CAP_KILL",
						"CAP_SYS_CHROOT", NULL};
#define ROOT_CAPS                                                                                  \
	"CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER",     \
	    "CAP_FSETID", "CAP_SETPCAP", "CAP_SETFCAP", "CAP_NET_BIND_SERVICE"
	static const char *const root[] = {ROOT_CAPS, NULL};
	static const char *const root_host[] = {ROOT_CAPS, "CAP_SYS_CHROOT", NULL};
#undef ROOT_CAPS
	if (!sb->host_base)
		return NULL;
	if (sb->spec.no_root)
		return host ? user_host : user;
	return host ? root_host : root;
}

/* Writes <dir>/bundle/config.json for the sandbox's container. */
static int write_bundle(struct sandbox *sb, const char *bundle, const char *rootfs, const char *run,
			const char *userns, struct err *e)
{
	char resolv[PATH_MAX];
	sandbox_net_resolv_path(sb, resolv, sizeof(resolv));
	if (network_resolv_prepare(resolv, e) < 0)
		return err_code(e);
	char display[64], vnc_env[32];
	const char *env[ENV_ROOM];
	char **img_env = sandbox_image_env(sb);
	container_env(sb, img_env, env, display, sizeof(display), vnc_env, sizeof(vnc_env));
	const char *argv[] = {"/.deskbox/init", NULL};
	/* Room for bundle_mounts' 9, the resolver's and the writable places
	 * of a read-only root. */
	struct runtime_mount mounts[10 + SANDBOX_RW_DIRS];
	char img[6][PATH_MAX], rw[SANDBOX_RW_DIRS][PATH_MAX];
	int host = 0;
	int n_mounts = bundle_mounts(sb, rootfs, run, mounts, img, &host, e);
	if (n_mounts < 0) {
		sandbox_image_env_free(img_env);
		return n_mounts;
	}
	/* The network's resolver, rewritten in place as it changes. */
	mounts[n_mounts++] = (struct runtime_mount){resolv, "/etc/resolv.conf", 1};
	n_mounts += sandbox_ro_mounts(sb, rootfs, mounts + n_mounts, rw);
	/* With a user namespace the init runs as the container's root (caps:
	 * init_caps).  Without one, everything is IMAGE_USER_UID. */
	struct runtime_spec spec = {
	    .id = sb->container_id,
	    .bundle_dir = bundle,
	    .rootfs = rootfs,
	    .hostname = "deskbox",
	    .uid = sb->host_base ? 0 : IMAGE_USER_UID,
	    .gid = sb->host_base ? 0 : IMAGE_USER_GID,
	    .userns_host_base = sb->host_base,
	    .userns_path = userns,
	    .caps = init_caps(sb, host),
	    .allow_chroot = host,
	    .argv = argv,
	    .env = env,
	    .cwd = "/workspace",
	    .mounts = mounts,
	    .n_mounts = (size_t)n_mounts,
	    .memory_bytes = sb->spec.memory_mb << 20,
	    .pids_max = sb->spec.pids_max,
	    .cpu_millis = sb->spec.cpu_millis,
	    .cgroup_parent = "deskbox",
	    .read_only_root = sb->spec.read_only_root,
	};
	int r = runtime_write_bundle(&spec, e);
	sandbox_image_env_free(img_env);
	return r;
}

/* Waits for the desktop and connects the mirror.  The mirror connects as
 * soon as the VNC server listens, so its handshake and first frame overlap
 * with the window manager's start (the init's ready flag). */
static int connect_desktop(struct sandbox *sb, struct err *e)
{
	int timeout_ms = sb->owner->cfg.ready_timeout_ms;
	if (sb->be->ready_timeout_ms > timeout_ms)
		timeout_ms = sb->be->ready_timeout_ms;
	struct capture *cap;
	if (wait_desktop(sb, "vnc.sock", timeout_ms, e) < 0 || capture_begin(sb, &cap, e) < 0)
		return err_code(e);
	if (wait_desktop(sb, "ready", timeout_ms, e) < 0) {
		capture_free(cap);
		return err_code(e);
	}
	if (capture_finish(cap, sb->be->ready_timeout_ms ?: CAPTURE_READY_TIMEOUT_MS, e) < 0)
		return err_code(e);
	pthread_mutex_lock(&sb->mu);
	sb->cap = cap;
	pthread_mutex_unlock(&sb->mu);
	return 0;
}

int sandbox_start_container(struct sandbox *sb, struct err *e)
{
	struct sandboxes *s = sb->owner;
	char rootfs[PATH_MAX], run[PATH_MAX], bundle[PATH_MAX];
	sandbox_path(sb, rootfs, sizeof(rootfs), "rootfs");
	sandbox_path(sb, run, sizeof(run), "run");
	sandbox_path(sb, bundle, sizeof(bundle), "bundle");

	if (sb->host_base && !s->cfg.userns_base)
		return err_set(e, ERR_UNAVAILABLE, EPERM,
			       "sandbox '%s' has its own uid range, but deskboxd runs without user "
			       "namespaces",
			       sb->id);
	/* /run/deskbox's tmpfs first: the owners set next are its root's. */
	if (fs_mkdir_p(bundle, 0700, e) < 0 || fs_mkdir_p(run, 0755, e) < 0 ||
	    sandbox_run_mount(sb, e) < 0 || sandbox_userns_dirs(sb, e) < 0)
		return err_code(e);
	char userns[PATH_MAX];
	snprintf(userns, sizeof(userns), "%s/userns", bundle);
	if (sandbox_rootfs_mount(sb, e) < 0 ||
	    (sb->host_base && runtime_userns_make(userns, sb->host_base, e) < 0) ||
	    write_bundle(sb, bundle, rootfs, run, sb->host_base ? userns : NULL, e) < 0)
		return runtime_userns_drop(userns), err_code(e);
	/* A container left over by a crash of a previous deskboxd. */
	sb->be->remove(s->rt, sb->container_id, 1, NULL);
	_cleanup_fd_ int logfd = -1;
	if (sandbox_log_open(sb, &logfd, e) < 0)
		return runtime_userns_drop(userns), err_code(e);
	int r = sb->be->start(s->rt, sb->container_id, bundle, logfd, &sb->init_pid, e);
	runtime_userns_drop(userns); /* the container's processes keep it */
	if (r < 0 || sandbox_monitor_watch(sb, e) < 0 || sandbox_net_attach(sb, e) < 0)
		return err_code(e);
	return connect_desktop(sb, e) ?: sandbox_net_ready(sb, e);
}
