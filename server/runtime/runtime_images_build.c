/* images_build: an image from a Dockerfile (docs/images.md, "Images from a
 * Dockerfile").  No builder daemon: the FROM image's tree is copied, and
 * every RUN, COPY and ADD runs in a build container of deskbox's own
 * runtime (crun) on that tree, in a user namespace of its own (the tree's
 * owners are moved into the build's uid range for the build and back
 * after), with no network, no capability over the host and the limits
 * below.  COPY and ADD run in the container too (the context mounted
 * read-only at /.deskbox/context, copied with the image's own cp), so a
 * symlink the Dockerfile's RUN made can never point a copy at the host.
 * The rest (ENV, WORKDIR, USER, ARG) is the build's state; CMD, ENTRYPOINT,
 * LABEL, EXPOSE, VOLUME and STOPSIGNAL are recorded in the manifest's
 * "config". */
#include "common/clock.h"
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"
#include "internal.h"

/* What one build may use. */
#define BUILD_MEMORY_BYTES (2ULL << 30)
#define BUILD_PIDS_MAX	   4096
#define BUILD_LOG_MAX	   (8u << 20) /* beyond: the log says it was cut */

void build_status_path(const char *state_dir, const char *name, const char *ext, char *out,
		       size_t size)
{
	char dir[PATH_MAX];
	image_dir(state_dir, dir, sizeof(dir));
	snprintf(out, size, "%s/.build-%s%s", dir, name, ext);
}

void image_build_log_path(const char *state_dir, const char *name, char *out, size_t size)
{
	build_status_path(state_dir, name, ".log", out, size);
}

void build_set_status(struct build *b, const char *status, const char *error)
{
	char p[PATH_MAX];
	build_status_path(b->state_dir, b->name, ".json", p, sizeof(p));
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", b->name);
	cJSON_AddStringToObject(j, "status", status);
	cJSON_AddStringToObject(j, "source", "dockerfile");
	cJSON_AddStringToObject(j, "from", dockerfile_from(b->df));
	cJSON_AddStringToObject(j, "build_id", b->id);
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

void build_say(struct build *b, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* A lost line of the log is no reason to fail the build. */
	if (n > 0 &&
	    write(b->log_w, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
		return;
}

/* Copies the log pipe into the log file until every writer closed it. */
void *build_drain(void *arg)
{
	struct build_drain *d = arg;
	char buf[8192];
	size_t total = 0, ll = 0;
	ssize_t n;
	char line[300];
	while ((n = read(d->fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
		if (n <= 0)
			continue;
		size_t take = total + (size_t)n <= BUILD_LOG_MAX ? (size_t)n : 0;
		if (take && write(d->out, buf, take) != (ssize_t)take)
			take = 0;
		if (!take && total <= BUILD_LOG_MAX) {
			static const char cut[] = "\n[the log is cut here: over 8 MiB]\n";
			if (write(d->out, cut, sizeof(cut) - 1) < 0)
				break;
			total = BUILD_LOG_MAX + 1;
		}
		total += take;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n') {
				if (ll) {
					line[ll] = '\0';
					snprintf(d->last, d->last_size, "%s", line);
				}
				ll = 0;
			} else if (ll < sizeof(line) - 1) {
				line[ll++] = buf[i];
			}
		}
	}
	close(d->fd);
	return NULL;
}

/* ---- the tree's owners ---- */

static uint32_t shift_base;
static int shift_up;
static pthread_mutex_t shift_mu = PTHREAD_MUTEX_INITIALIZER;

static uint32_t shifted(uint32_t id, int *changed)
{
	if (shift_up && id < RUNTIME_USERNS_SIZE) {
		*changed = 1;
		return id + shift_base;
	}
	if (!shift_up && id >= shift_base && id - shift_base < RUNTIME_USERNS_SIZE) {
		*changed = 1;
		return id - shift_base;
	}
	return id;
}

static int shift_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)type, (void)ftw;
	int changed = 0;
	uid_t uid = shifted(st->st_uid, &changed);
	gid_t gid = shifted(st->st_gid, &changed);
	if (!changed)
		return 0;
	if (lchown(path, uid, gid) < 0)
		return errno ? -errno : -EIO;
	/* chown(2) drops set-id bits; they belong to the file. */
	if (!S_ISLNK(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID)) &&
	    chmod(path, st->st_mode & 07777) < 0)
		return -errno;
	return 0;
}

/* Moves the owners of every entry under `root` into the build's uid range
 * (`up`) or back.  A hard link is seen twice, but the second time its
 * owner is already moved, so it is not moved again. */
int build_shift_tree(const char *root, uint32_t base, int up, struct err *e)
{
	pthread_mutex_lock(&shift_mu); /* nftw has no context argument */
	shift_base = base;
	shift_up = up;
	int r = nftw(root, shift_one, 64, FTW_PHYS | FTW_MOUNT);
	pthread_mutex_unlock(&shift_mu);
	if (r != 0)
		return err_sys(e, ERR_INTERNAL, r < 0 ? -r : EIO, "changing the owners under '%s'",
			       root);
	return 0;
}

/* ---- running tools and containers ---- */

/* Runs a host tool with its output in the log. */
int build_tool(struct build *b, const char *const *argv, struct err *e)
{
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0 || dup2(b->log_w, 1) < 0 || dup2(b->log_w, 2) < 0)
			_exit(127);
		execvp(argv[0], (char *const *)argv);
		dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (pid < 0)
		return err_sys(e, ERR_INTERNAL, errno, "fork");
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return err_sys(e, ERR_INTERNAL, errno, "waiting for %s", argv[0]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	return err_set(e, ERR_INVALID, EIO, "%s failed: %s", argv[0], b->last);
}

int build_open_in(int rootfd, const char *rel, uint64_t flags)
{
	struct open_how how = {.flags = flags | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
	return (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
}

/* mkdir -p of `path` inside the tree, every component resolved in it,
 * new directories owned by the build's root. */
int build_mkdir_in(struct build *b, const char *path, struct err *e)
{
	_cleanup_fd_ int rootfd = open(b->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char part[DOCKERFILE_PATH_MAX + 8];
	size_t len = strlen(path);
	if (rootfd < 0 || len >= sizeof(part))
		return err_sys(e, ERR_INTERNAL, rootfd < 0 ? errno : ENAMETOOLONG, "'%s'", path);
	for (size_t i = 1; i <= len; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		snprintf(part, sizeof(part), "%.*s", (int)i, path);
		char *slash = strrchr(part, '/');
		*slash = '\0';
		_cleanup_fd_ int dfd =
		    build_open_in(rootfd, part[0] ? part : "/", O_PATH | O_DIRECTORY);
		const char *leaf = slash + 1;
		if (!*leaf)
			continue;
		if (dfd < 0)
			return err_sys(e, ERR_INVALID, errno, "'%s' in the image", part);
		if (mkdirat(dfd, leaf, 0755) == 0)
			fchownat(dfd, leaf, b->host_base, b->host_base, AT_SYMLINK_NOFOLLOW);
		else if (errno != EEXIST)
			return err_sys(e, ERR_INVALID, errno, "creating '%s' in the image", path);
	}
	return 0;
}

/* uid and gid of USER `spec` (name or number, optionally :group), looked
 * up in the tree's /etc/passwd and /etc/group. */
static int lookup_id(struct build *b, const char *file, const char *name, int field_gid,
		     uint32_t *id, uint32_t *gid)
{
	char *end;
	unsigned long v = strtoul(name, &end, 10);
	int numeric = *name && !*end;
	if (numeric && v >= RUNTIME_USERNS_SIZE)
		return 0;
	if (numeric)
		*id = (uint32_t)v;
	if (numeric && !field_gid)
		return 1;
	_cleanup_fd_ int rootfd = open(b->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_fd_ int fd = rootfd < 0 ? -1 : build_open_in(rootfd, file, O_RDONLY);
	_cleanup_file_ FILE *f = fd < 0 ? NULL : fdopen(TAKE_FD(fd), "r");
	char line[1024];
	while (f && fgets(line, sizeof(line), f)) {
		char *rest = line, *n = strsep(&rest, ":"), *x = strsep(&rest, ":");
		char *i = strsep(&rest, ":"), *g = strsep(&rest, ":");
		/* A number names the uid; its passwd entry, if any, the group. */
		if (!n || !x || !i || (numeric ? strtoul(i, NULL, 10) != v : strcmp(n, name) != 0))
			continue;
		*id = (uint32_t)strtoul(i, NULL, 10);
		if (field_gid && g)
			*gid = (uint32_t)strtoul(g, NULL, 10);
		return *id < RUNTIME_USERNS_SIZE && *gid < RUNTIME_USERNS_SIZE;
	}
	return numeric;
}

int build_user_ids(struct build *b, uint32_t *uid, uint32_t *gid, struct err *e)
{
	char name[DOCKERFILE_NAME_MAX + 1];
	snprintf(name, sizeof(name), "%s", b->user[0] ? b->user : "0");
	char *group = strchr(name, ':');
	if (group)
		*group++ = '\0';
	*gid = 0;
	if (!lookup_id(b, "/etc/passwd", name, 1, uid, gid))
		return err_set(e, ERR_INVALID, ENOENT, "USER '%s': no such user in the image",
			       name);
	uint32_t unused = 0;
	if (group && !lookup_id(b, "/etc/group", group, 0, gid, &unused))
		return err_set(e, ERR_INVALID, ENOENT, "USER: no group '%s' in the image", group);
	return 0;
}
