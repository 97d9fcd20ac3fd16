/* runtime: the host's mount namespace setup and the OCI runtime's CLI.
 *
 * Every runtime call is one child process started with posix_spawn: its
 * stdin is /dev/null, every fd but 0, 1 and 2 is closed, its signal mask and
 * dispositions are reset, and its environment is a fixed minimal one (the
 * server's environment may hold secrets, and `crun exec` passes its own
 * environment on).  The function that spawns it also reaps it, except for
 * runtime_exec_spawn(), which hands the pid to its caller.  Callers must not
 * reap with waitpid(-1, ...) elsewhere in the process. */
#include "runtime.h"

#include "internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* How long one runtime call (not exec) may take before it is killed. */
#define RUNTIME_CALL_TIMEOUT_MS 30000
/* How much of a call's stdout (the JSON of `state`) is kept. */
#define RUNTIME_OUT_MAX (64 * 1024)
/* How much of a call's stderr is kept for the error message. */
#define RUNTIME_ERR_MAX 4096

struct runtime {
	char *binary; /* absolute path */
	char *root;   /* --root */
	enum runtime_cgroup_mode cgroup_mode;
};

const char *runtime_root(const struct runtime *rt)
{
	return rt->root;
}

enum runtime_cgroup_mode runtime_cgroup_mode(const struct runtime *rt)
{
	return rt->cgroup_mode;
}

static char *const child_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};

int runtime_host_setup(enum runtime_cgroup_mode *mode, struct err *e)
{
	if (unshare(CLONE_NEWNS) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "unsharing the mount namespace");
	/* Nothing mounted from now on propagates to the host, and it all goes
	 * away with the last process of this namespace. */
	if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "making the mount namespace private");
	struct statfs sf;
	if (statfs("/sys/fs/cgroup", &sf) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "inspecting '/sys/fs/cgroup'");
	if (sf.f_type == CGROUP2_SUPER_MAGIC) {
		*mode = RUNTIME_CGROUP_V2;
		return 0;
	}
	*mode = RUNTIME_CGROUP_V1;
	/* A hybrid host: crun 1.8 refuses it while the v2 hierarchy is
	 * visible ("cgroups in hybrid mode not supported"). */
	if (statfs("/sys/fs/cgroup/unified", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC &&
	    umount2("/sys/fs/cgroup/unified", MNT_DETACH) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "unmounting '/sys/fs/cgroup/unified'");
	return 0;
}

int runtime_userns_probe(struct err *e)
{
	char buf[32] = "";
	_cleanup_fd_ int fd = open("/proc/sys/user/max_user_namespaces", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n > 0 && atol(buf) <= 0)
		return err_set(e, ERR_UNAVAILABLE, EPERM,
			       "user namespaces are disabled (/proc/sys/user/max_user_namespaces "
			       "is 0)");
	/* The sysctl is not the only gate (LSMs, distribution patches): a
	 * child tries for real.  No thread exists yet, so fork is safe. */
	pid_t pid = fork();
	if (pid < 0)
		return err_sys(e, ERR_INTERNAL, errno, "fork");
	/* As deskboxd makes them: by an unprivileged host id (nobody's). */
	if (pid == 0)
		_exit(setgroups(0, NULL) == 0 && setresgid(65534, 65534, 65534) == 0 &&
			      setresuid(65534, 65534, 65534) == 0 && unshare(CLONE_NEWUSER) == 0
			  ? 0
			  : (errno & 0xff));
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return err_sys(e, ERR_UNAVAILABLE, WIFEXITED(status) ? WEXITSTATUS(status) : ECHILD,
			       "the kernel refuses to create a user namespace");
	return 0;
}

/* The absolute path of `name` (as execvp would find it), or NULL. */
static char *find_binary(const char *name)
{
	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? strdup(name) : NULL;
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");
		char buf[PATH_MAX];
		if (n > 0 &&
		    (size_t)snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, name) < sizeof(buf) &&
		    access(buf, X_OK) == 0)
			return strdup(buf);
		p += n;
		if (*p == ':')
			p++;
	}
	return NULL;
}

int runtime_new(struct runtime **out, const struct runtime_opts *o, struct err *e)
{
	const char *name = o->binary ? o->binary : "crun";
	if (!o->root || o->root[0] != '/')
		return err_set(e, ERR_INVALID, EINVAL, "runtime root must be an absolute path");
	if (mkdir(o->root, 0700) < 0 && errno != EEXIST)
		return err_sys(e, ERR_INTERNAL, errno, "creating runtime root '%s'", o->root);
	struct runtime *rt = calloc(1, sizeof(*rt));
	if (!rt)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	rt->binary = find_binary(name);
	rt->root = strdup(o->root);
	rt->cgroup_mode = o->cgroup_mode;
	if (!rt->binary || !rt->root) {
		int r = rt->root ? err_set(e, ERR_UNAVAILABLE, ENOENT,
					   "runtime binary '%s' not found", name)
				 : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		runtime_free(rt);
		return r;
	}
	*out = rt;
	return 0;
}

void runtime_free(struct runtime *rt)
{
	if (!rt)
		return;
	free(rt->binary);
	free(rt->root);
	free(rt);
}

/* Spawns argv (argv[0] is run as rt->binary) with in/out/err (-1:
 * /dev/null) as its 0, 1, 2 and nothing else open. */
static int spawn(const struct runtime *rt, char *const argv[], int in, int out, int errfd,
		 pid_t *pid, struct err *e)
{
	_cleanup_fd_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '/dev/null'");
	/* Copies above 2 so that no dup2 below overwrites a later source. */
	int src[3] = {in, out, errfd};
	int fds[3] = {-1, -1, -1};
	int r = 0;
	for (int i = 0; i < 3; i++) {
		fds[i] = fcntl(src[i] >= 0 ? src[i] : null_fd, F_DUPFD_CLOEXEC, 3);
		if (fds[i] < 0) {
			r = err_sys(e, ERR_INTERNAL, errno, "duplicating fd %d", src[i]);
			goto out;
		}
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	for (int i = 0; i < 3; i++)
		posix_spawn_file_actions_adddup2(&fa, fds[i], i);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	int rc = posix_spawn(pid, rt->binary, &fa, &attr, argv, child_env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (rc != 0)
		r = err_sys(e, ERR_INTERNAL, rc, "starting '%s'", rt->binary);
out:
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
}

/* Appends what `fd` has to buf (keeping at most cap-1 bytes, NUL
 * terminated); returns 0 at EOF, 1 if more may come. */
static int drain(int fd, char *buf, size_t *len, size_t cap)
{
	char tmp[4096];
	ssize_t n = read(fd, tmp, sizeof(tmp));
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : 0;
	if (n == 0)
		return 0;
	size_t room = cap - 1 - *len;
	size_t take = (size_t)n < room ? (size_t)n : room;
	memcpy(buf + *len, tmp, take);
	*len += take;
	buf[*len] = '\0';
	return 1;
}

/* The first non-empty line of `s` (at most 300 bytes), for messages. */
static void first_line(const char *s, char *out, size_t size)
{
	while (*s == '\n' || *s == ' ')
		s++;
	size_t n = strcspn(s, "\n");
	if (n > 300)
		n = 300;
	if (n >= size)
		n = size - 1;
	memcpy(out, s, n);
	out[n] = '\0';
}

/* Runs one runtime call to the end: stdout into `out` (if not NULL, at most
 * RUNTIME_OUT_MAX), stderr into `errbuf`.  Kills it after the timeout.
 * Reports its wait status. */
static int run_call(const struct runtime *rt, char *const argv[], char *out, char *errbuf,
		    int *status, struct err *e)
{
	int opipe[2] = {-1, -1}, epipe[2] = {-1, -1};
	if ((out && pipe2(opipe, O_CLOEXEC) < 0) || pipe2(epipe, O_CLOEXEC) < 0) {
		int r = err_sys(e, ERR_INTERNAL, errno, "creating a pipe");
		if (opipe[0] >= 0)
			close(opipe[0]), close(opipe[1]);
		return r;
	}
	_cleanup_fd_ int orfd = opipe[0], erfd = epipe[0];
	pid_t pid;
	int r = spawn(rt, argv, -1, opipe[1], epipe[1], &pid, e);
	if (opipe[1] >= 0)
		close(opipe[1]);
	close(epipe[1]);
	if (r < 0)
		return r;

	size_t olen = 0, elen = 0;
	if (out)
		out[0] = '\0';
	errbuf[0] = '\0';
	long long deadline = clock_mono_ms() + RUNTIME_CALL_TIMEOUT_MS;
	int timed_out = 0;
	while (orfd >= 0 || erfd >= 0) {
		struct pollfd p[2] = {{orfd, POLLIN, 0}, {erfd, POLLIN, 0}};
		long long left = deadline - clock_mono_ms();
		if (left <= 0) {
			timed_out = 1;
			kill(pid, SIGKILL);
			break;
		}
		int n = poll(p, 2, (int)left);
		if (n < 0 && errno != EINTR)
			break;
		if (orfd >= 0 && p[0].revents && !drain(orfd, out, &olen, RUNTIME_OUT_MAX))
			close(TAKE_FD(orfd));
		if (erfd >= 0 && p[1].revents && !drain(erfd, errbuf, &elen, RUNTIME_ERR_MAX))
			close(TAKE_FD(erfd));
	}
	while (waitpid(pid, status, 0) < 0) {
		if (errno != EINTR)
			return err_sys(e, ERR_INTERNAL, errno, "waiting for '%s'", rt->binary);
	}
	if (timed_out)
		return err_set(e, ERR_TIMEOUT, ETIMEDOUT, "'%s %s' took longer than %d s",
			       rt->binary, argv[3], RUNTIME_CALL_TIMEOUT_MS / 1000);
	return 0;
}

/* Formats a failed call's status and first stderr line into `e`. */
static int call_failed(struct err *e, const char *verb, const char *id, int status,
		       const char *errtext)
{
	char line[320];
	first_line(errtext, line, sizeof(line));
	if (WIFSIGNALED(status))
		return err_set(e, ERR_INTERNAL, EIO, "crun %s '%s' killed by signal %d%s%s", verb,
			       id, WTERMSIG(status), line[0] ? ": " : "", line);
	return err_set(e, ERR_INTERNAL, EIO, "crun %s '%s' failed: %s", verb, id,
		       line[0] ? line : "no message");
}

static int container_known(const struct runtime *rt, const char *id)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/%s", rt->root, id);
	struct stat st;
	return stat(dir, &st) == 0;
}

static int read_pid_file(const char *path, pid_t *pid)
{
	_cleanup_file_ FILE *f = fopen(path, "re");
	long v = 0;
	if (!f || fscanf(f, "%ld", &v) != 1 || v <= 0 || v > INT_MAX)
		return -1;
	*pid = (pid_t)v;
	return 0;
}

/* Reaps the helpers `crun run -d` left as our children: with deskboxd a
 * child subreaper, the process that forked the init is adopted when crun
 * exits.  They are in the session crun made for the container without
 * leading it, so no process another thread waits for (those are in
 * deskboxd's session, or lead their own) is taken. */
static void reap_adopted(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t self = getpid(), own_sid = getsid(0);
	while (d && (de = readdir(d))) {
		char path[64], buf[512];
		pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		const char *rp = strrchr(buf, ')');
		int ppid, pgrp, sid;
		char state;
		if (!rp || sscanf(rp + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4 ||
		    ppid != self || sid == own_sid || sid == pid)
			continue;
		/* It exits right after forking the init: wait a moment for it. */
		_cleanup_fd_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
		struct pollfd p = {pfd, POLLIN, 0};
		if (pfd >= 0)
			poll(&p, 1, 1000);
		waitpid(pid, NULL, WNOHANG);
	}
	if (d)
		closedir(d);
}

int runtime_start(struct runtime *rt, const char *id, const char *bundle_dir, int log_fd,
		  pid_t *init_pid, struct err *e)
{
	char pid_file[PATH_MAX], log_path[PATH_MAX], log_opt[PATH_MAX + 8];
	snprintf(pid_file, sizeof(pid_file), "%s/init.pid", bundle_dir);
	snprintf(log_path, sizeof(log_path), "%s/crun.log", bundle_dir);
	snprintf(log_opt, sizeof(log_opt), "--log=file:%s", log_path);
	unlink(pid_file);
	unlink(log_path);
	/* The container's init inherits crun's stdout and stderr, so they are
	 * the log; crun's own messages go to crun.log (with --log it prints
	 * nothing on stderr). */
	char *argv[] = {"crun",	    "--root",		rt->root,     log_opt,	"run",	    "-d",
			"--bundle", (char *)bundle_dir, "--pid-file", pid_file, (char *)id, NULL};
	pid_t pid;
	int r = spawn(rt, argv, -1, log_fd, log_fd, &pid, e);
	if (r < 0)
		return err_wrap(e, "crun run '%s'", id);
	_cleanup_fd_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd >= 0) {
		struct pollfd p = {pidfd, POLLIN, 0};
		while (poll(&p, 1, RUNTIME_CALL_TIMEOUT_MS) < 0 && errno == EINTR)
			;
		if (!p.revents)
			kill(pid, SIGKILL);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return err_sys(e, ERR_INTERNAL, errno, "waiting for crun run '%s'", id);
	reap_adopted();
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char text[RUNTIME_ERR_MAX] = "";
		_cleanup_fd_ int lfd = open(log_path, O_RDONLY | O_CLOEXEC);
		if (lfd >= 0) {
			ssize_t n = read(lfd, text, sizeof(text) - 1);
			text[n > 0 ? n : 0] = '\0';
		}
		return call_failed(e, "run", id, status, text);
	}
	if (read_pid_file(pid_file, init_pid) < 0)
		return err_set(e, ERR_INTERNAL, EIO, "crun run '%s' wrote no pid to '%s'", id,
			       pid_file);
	return 0;
}

/* Kills a foreground run's container: through crun, and its init by the
 * pid file (the end of a pid namespace's first process ends all in it),
 * for a container crun does not know yet or any more. */
static void kill_run(struct runtime *rt, const char *id, const char *pid_file)
{
	runtime_kill(rt, id, SIGKILL, 1, NULL);
	pid_t init = 0;
	if (read_pid_file(pid_file, &init) == 0 && init > 1)
		kill(init, SIGKILL);
}

/* Waits for crun `pid` to end; past the deadline or once *cancel is set,
 * kills the container (again every 200 ms: it may be starting still).
 * 1: timed out, 2: cancelled, 0: it ended by itself. */
static int wait_run(struct runtime *rt, const char *id, pid_t pid, const char *pid_file,
		    int timeout_ms, const int *cancel)
{
	_cleanup_fd_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct pollfd p = {pidfd, POLLIN, 0};
	long long deadline = clock_mono_ms() + timeout_ms;
	int why = 0;
	while (pidfd >= 0) {
		int n = poll(&p, 1, why || cancel ? 200 : 60000);
		if (n > 0 || (n < 0 && errno != EINTR))
			break;
		if (!why && clock_mono_ms() >= deadline)
			why = 1;
		if (!why && cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE))
			why = 2;
		if (why)
			kill_run(rt, id, pid_file);
	}
	return why;
}

int runtime_run(struct runtime *rt, const char *id, const char *bundle_dir, int log_fd,
		int timeout_ms, const int *cancel, int *status, struct err *e)
{
	char log_path[PATH_MAX], log_opt[PATH_MAX + 8], pid_file[PATH_MAX];
	snprintf(log_path, sizeof(log_path), "%s/crun.log", bundle_dir);
	snprintf(log_opt, sizeof(log_opt), "--log=file:%s", log_path);
	snprintf(pid_file, sizeof(pid_file), "%s/init.pid", bundle_dir);
	unlink(log_path);
	unlink(pid_file);
	char *argv[] = {"crun",	    "--root", rt->root, log_opt,	    "run", "--bundle",
			(char *)bundle_dir, "--pid-file", pid_file, (char *)id, NULL};
	pid_t pid;
	if (spawn(rt, argv, -1, log_fd, log_fd, &pid, e) < 0)
		return err_wrap(e, "crun run '%s'", id);
	int why = wait_run(rt, id, pid, pid_file, timeout_ms, cancel);
	int timed_out = why == 1;
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return err_sys(e, ERR_INTERNAL, errno, "waiting for crun run '%s'", id);
	reap_adopted();
	runtime_delete(rt, id, 1, NULL);
	if (timed_out)
		return err_set(e, ERR_TIMEOUT, ETIMEDOUT, "'%s' ran longer than %d s", id,
			       timeout_ms / 1000);
	if (why == 2)
		return err_set(e, ERR_UNAVAILABLE, ECANCELED, "'%s' was stopped", id);
	/* crun's own complaint (a bad config, a mount it could not make). */
	char text[RUNTIME_ERR_MAX] = "";
	_cleanup_fd_ int lfd = open(log_path, O_RDONLY | O_CLOEXEC);
	ssize_t n = lfd >= 0 ? read(lfd, text, sizeof(text) - 1) : 0;
	if (n > 0 && log_fd >= 0 && *status != 0 && write(log_fd, text, (size_t)n) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "writing the log of '%s'", id);
	return 0;
}

int runtime_kill(struct runtime *rt, const char *id, int sig, int all, struct err *e)
{
	char signum[16];
	snprintf(signum, sizeof(signum), "%d", sig);
	char *argv[] = {"crun",
			"--root",
			rt->root,
			"kill",
			all ? "--all" : (char *)id,
			all ? (char *)id : signum,
			all ? signum : NULL,
			NULL};
	char errbuf[RUNTIME_ERR_MAX];
	int status;
	if (run_call(rt, argv, NULL, errbuf, &status, e) < 0)
		return err_wrap(e, "crun kill '%s'", id);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (!container_known(rt, id))
			return err_set(e, ERR_NOT_FOUND, ENOENT, "no container '%s'", id);
		return call_failed(e, "kill", id, status, errbuf);
	}
	return 0;
}

int runtime_delete(struct runtime *rt, const char *id, int force, struct err *e)
{
	char *argv[] = {"crun",
			"--root",
			rt->root,
			"delete",
			force ? "--force" : (char *)id,
			force ? (char *)id : NULL,
			NULL};
	char errbuf[RUNTIME_ERR_MAX];
	int status;
	if (run_call(rt, argv, NULL, errbuf, &status, e) < 0)
		return err_wrap(e, "crun delete '%s'", id);
	if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && container_known(rt, id))
		return call_failed(e, "delete", id, status, errbuf);
	return 0;
}

int runtime_state(struct runtime *rt, const char *id, int *running, pid_t *init_pid, struct err *e)
{
	char *argv[] = {"crun", "--root", rt->root, "state", (char *)id, NULL};
	char errbuf[RUNTIME_ERR_MAX];
	_cleanup_free_ char *out = malloc(RUNTIME_OUT_MAX);
	int status;
	if (!out)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (run_call(rt, argv, out, errbuf, &status, e) < 0)
		return err_wrap(e, "crun state '%s'", id);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (!container_known(rt, id))
			return err_set(e, ERR_NOT_FOUND, ENOENT, "no container '%s'", id);
		return call_failed(e, "state", id, status, errbuf);
	}
	cJSON *j = cJSON_Parse(out);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
	if (!cJSON_IsString(st)) {
		cJSON_Delete(j);
		return err_set(e, ERR_INTERNAL, EIO, "crun state '%s': unexpected output", id);
	}
	/* "paused": frozen by the cgroup freezer, its processes are there. */
	*running = strcmp(st->valuestring, "running") == 0 || strcmp(st->valuestring, "paused") == 0;
	*init_pid =
	    *running && cJSON_IsNumber(pid) && pid->valuedouble > 0 && pid->valuedouble <= INT_MAX
		? (pid_t)pid->valuedouble
		: 0;
	cJSON_Delete(j);
	return 0;
}

int runtime_exec_spawn(struct runtime *rt, const char *id, const struct runtime_exec *x,
		       pid_t *client_pid, struct err *e)
{
	size_t n_env = 0, n_argv = 0;
	while (x->env && x->env[n_env])
		n_env++;
	while (x->argv && x->argv[n_argv])
		n_argv++;
	if (n_argv == 0)
		return err_set(e, ERR_INVALID, EINVAL, "exec in '%s' without a command", id);
	char user[32], cwd_opt[PATH_MAX + 8], pid_opt[PATH_MAX + 16], cg_opt[PATH_MAX + 16];
	snprintf(user, sizeof(user), "%u:%u", x->uid, x->gid);
	/* crun, --root, R, exec, --no-new-privs, --user U, [--cwd C],
	 * [--pid-file F], [--cgroup C], 2 per env, id, argv, NULL */
	size_t n = 13 + 2 * n_env + n_argv;
	_cleanup_free_ char **argv = calloc(n, sizeof(*argv));
	if (!argv)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	size_t i = 0;
	argv[i++] = "crun";
	argv[i++] = "--root";
	argv[i++] = rt->root;
	argv[i++] = "exec";
	argv[i++] = "--no-new-privs";
	argv[i++] = "--user";
	argv[i++] = user;
	if (x->cwd) {
		snprintf(cwd_opt, sizeof(cwd_opt), "--cwd=%s", x->cwd);
		argv[i++] = cwd_opt;
	}
	if (x->pid_file) {
		snprintf(pid_opt, sizeof(pid_opt), "--pid-file=%s", x->pid_file);
		argv[i++] = pid_opt;
	}
	if (x->cgroup) {
		snprintf(cg_opt, sizeof(cg_opt), "--cgroup=%s", x->cgroup);
		argv[i++] = cg_opt;
	}
	for (size_t k = 0; k < n_env; k++) {
		argv[i++] = "--env";
		argv[i++] = (char *)x->env[k];
	}
	argv[i++] = (char *)id;
	for (size_t k = 0; k < n_argv; k++)
		argv[i++] = (char *)x->argv[k];
	argv[i] = NULL;
	if (spawn(rt, argv, x->stdin_fd, x->stdout_fd, x->stderr_fd, client_pid, e) < 0)
		return err_wrap(e, "crun exec in '%s'", id);
	return 0;
}

/* The OCI linux.resources form of `l`, for `crun update --resources`.
 * Without the CPU limit's lifting: crun 1.8 writes a quota of -1 as an
 * unsigned number, which the kernel refuses (ERANGE). */
static cJSON *limits_json(const struct runtime_limits *l)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	if (l->memory_bytes) {
		/* memory+swap == limit, as at create. */
		cJSON *m = cJSON_AddObjectToObject(j, "memory");
		if (!m || !cJSON_AddNumberToObject(m, "limit", (double)l->memory_bytes) ||
		    !cJSON_AddNumberToObject(m, "swap", (double)l->memory_bytes))
			return cJSON_Delete(j), NULL;
	}
	if (l->pids_max > 0) {
		cJSON *p = cJSON_AddObjectToObject(j, "pids");
		if (!p || !cJSON_AddNumberToObject(p, "limit", (double)l->pids_max))
			return cJSON_Delete(j), NULL;
	}
	if (l->cpu_millis && l->cpu_millis != RUNTIME_CPU_UNLIMITED) {
		double q = (double)l->cpu_millis * (RUNTIME_CPU_PERIOD_US / 1000);
		cJSON *c = cJSON_AddObjectToObject(j, "cpu");
		if (!c || !cJSON_AddNumberToObject(c, "quota", q) ||
		    !cJSON_AddNumberToObject(c, "period", RUNTIME_CPU_PERIOD_US))
			return cJSON_Delete(j), NULL;
	}
	return j;
}

static int write_cgroup(const char *path, const char *value, struct err *e)
{
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, value, strlen(value)) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "writing '%s' to '%s'", value, path);
	return 0;
}

/* Lifts container `id`'s CPU limit by writing its cgroup's file (under
 * the "deskbox" parent, as runtime_write_bundle's callers place it). */
static int cpu_unlimit(const struct runtime *rt, const char *id, struct err *e)
{
	static const char *const v1_dirs[] = {"cpu", "cpu,cpuacct", "cpuacct,cpu", NULL};
	char path[PATH_MAX];
	if (rt->cgroup_mode == RUNTIME_CGROUP_V2) {
		snprintf(path, sizeof(path), "/sys/fs/cgroup/deskbox/%s/cpu.max", id);
		return write_cgroup(path, "max", e);
	}
	for (const char *const *d = v1_dirs; *d; d++) {
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/deskbox/%s/cpu.cfs_quota_us", *d, id);
		if (access(path, F_OK) == 0)
			return write_cgroup(path, "-1", e);
	}
	return err_set(e, ERR_INTERNAL, ENOENT, "no cpu cgroup for container '%s'", id);
}

int runtime_update(struct runtime *rt, const char *id, const struct runtime_limits *l,
		   struct err *e)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/update-%s.json", rt->root, id);
	cJSON *j = limits_json(l);
	char *text = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!text)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r = fs_write_atomic(path, text, strlen(text), 0600, e);
	free(text);
	if (r < 0)
		return r;
	char *argv[] = {"crun", "--root", rt->root, "update", "--resources", path, (char *)id, NULL};
	char errbuf[RUNTIME_ERR_MAX];
	int status;
	r = run_call(rt, argv, NULL, errbuf, &status, e);
	unlink(path);
	if (r < 0)
		return err_wrap(e, "crun update '%s'", id);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return l->cpu_millis == RUNTIME_CPU_UNLIMITED ? cpu_unlimit(rt, id, e) : 0;
	if (!container_known(rt, id))
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no container '%s'", id);
	if (strstr(errbuf, "Device or resource busy"))
		return err_set(e, ERR_CONFLICT, EBUSY,
			       "the sandbox uses more memory than the new limit");
	return call_failed(e, "update", id, status, errbuf);
}
