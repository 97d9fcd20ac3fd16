/* runtime_userns: the user namespaces of containers, made by deskboxd.
 *
 * The kernel charges per-uid counts (inotify instances, RLIMIT_NPROC, ...)
 * at every level up to the host: inside, to the container's uid; on the
 * host, to the uid that created the user namespace.  Were crun (host root)
 * to create it, every sandbox would share host root's budget.  So a child
 * of deskboxd that has become the sandbox's own host id creates it, deskboxd
 * writes its id maps and keeps it on a bind mount that config.json names
 * ("path"); crun joins it. */
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"

/* In the forked child (deskboxd has threads: raw syscalls only): becomes
 * host id `id`, makes a user namespace, says so on `ready` and waits for
 * `done` to close.  Never returns. */
static void userns_child(uint32_t id, int ready, int done)
{
	/* The fork copied every thread's descriptors, and this child runs no
	 * exec to drop the O_CLOEXEC ones: keep only its own two pipes (as 3
	 * and 4), or it would hold a concurrent start's `done` pipe open, and
	 * that start's child would wait for its end forever. */
	int r = fcntl(ready, F_DUPFD, 1000), d = fcntl(done, F_DUPFD, 1000);
	if (r < 0 || d < 0 || dup2(r, 3) < 0 || dup2(d, 4) < 0 ||
	    syscall(SYS_close_range, 5, ~0U, 0) < 0)
		_exit(1);
	ready = 3;
	done = 4;
	char c = 0;
	if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, id, id, id) < 0 ||
	    syscall(SYS_setresuid, id, id, id) < 0 || unshare(CLONE_NEWUSER) < 0)
		c = (char)(errno ? errno : EPERM);
	if (write(ready, &c, 1) != 1 || c)
		_exit(1);
	while (read(done, &c, 1) < 0 && errno == EINTR)
		;
	_exit(0);
}

static int write_map(pid_t pid, const char *name, uint32_t host_base, struct err *e)
{
	char path[64], line[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	int n = snprintf(line, sizeof(line), "0 %u %u\n", host_base, RUNTIME_USERNS_SIZE);
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		return err_sys(e, ERR_INTERNAL, errno, "writing %s", path);
	return 0;
}

/* Maps the child's namespace and bind-mounts it on `path`. */
static int keep_userns(pid_t pid, const char *path, uint32_t host_base, struct err *e)
{
	if (write_map(pid, "uid_map", host_base, e) < 0 ||
	    write_map(pid, "gid_map", host_base, e) < 0)
		return err_code(e);
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", path);
	char ns[64];
	snprintf(ns, sizeof(ns), "/proc/%d/ns/user", (int)pid);
	if (mount(ns, path, NULL, MS_BIND, NULL) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "keeping the user namespace on '%s'", path);
	return 0;
}

int runtime_userns_make(const char *path, uint32_t host_base, struct err *e)
{
	runtime_userns_drop(path);
	int ready[2], done[2];
	if (pipe2(ready, O_CLOEXEC) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	if (pipe2(done, O_CLOEXEC) < 0) {
		close(ready[0]);
		close(ready[1]);
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(ready[0]);
		close(done[1]);
		userns_child(host_base, ready[1], done[0]);
	}
	close(ready[1]);
	close(done[0]);
	char c = 1;
	int r = 0;
	if (pid < 0)
		r = err_sys(e, ERR_INTERNAL, errno, "fork");
	else if (read(ready[0], &c, 1) != 1 || c)
		r = err_sys(e, ERR_UNAVAILABLE, c > 1 ? c : EPERM,
			    "host id %u cannot create a user namespace", host_base);
	else
		r = keep_userns(pid, path, host_base, e);
	close(ready[0]);
	close(done[1]);
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	if (r < 0)
		runtime_userns_drop(path);
	return r;
}

void runtime_userns_drop(const char *path)
{
	umount2(path, MNT_DETACH);
	unlink(path);
}
