/* Live test of the runtime and the default image: a real crun container
 * running deskbox-init (Xvfb, openbox, deskbox-vnc) as uid 1000.
 *
 * Needs root and crun; skipped otherwise.  Uses the deskbox-init next to
 * this binary's build dir (<BUILD>/deskbox-init) or $DESKBOX_INIT. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fs.h"
#include "server/runtime/runtime.h"
#include "tests/harness.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

struct ctx {
	enum runtime_cgroup_mode mode;
	struct runtime *rt;
	char state[PATH_MAX], sbx[PATH_MAX], rootfs[PATH_MAX], run_dir[PATH_MAX],
	    crun_root[PATH_MAX], id[64], cgroup_parent[64];
	int mounted, started;
	pid_t init_pid;
};

static long long ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	diag(buf);
}

/* Runs argv in the container; stdout into out (NUL-terminated, trailing
 * newline stripped), stderr to ours.  Returns the exit status or -1. */
static int run_in(struct ctx *c, const char *const *argv, char *out, size_t size)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	struct runtime_exec x = {.argv = argv,
				 .cwd = "/workspace",
				 .uid = IMAGE_USER_UID,
				 .gid = IMAGE_USER_GID,
				 .stdin_fd = -1,
				 .stdout_fd = p[1],
				 .stderr_fd = STDERR_FILENO};
	struct err e = ERR_INIT;
	pid_t pid;
	int r = runtime_exec_spawn(c->rt, c->id, &x, &pid, &e);
	close(p[1]);
	if (r < 0) {
		note("exec: %s", e.msg);
		close(p[0]);
		return -1;
	}
	size_t len = 0;
	ssize_t n;
	while ((n = read(p[0], out + len, size - 1 - len)) > 0 && len + (size_t)n < size - 1)
		len += (size_t)n;
	if (n > 0)
		len += (size_t)n;
	close(p[0]);
	out[len] = '\0';
	while (len && out[len - 1] == '\n')
		out[--len] = '\0';
	int status;
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char *cgroup_file(struct ctx *c, const char *controller, const char *file, char *buf,
			       size_t size)
{
	if (c->mode == RUNTIME_CGROUP_V2)
		snprintf(buf, size, "/sys/fs/cgroup/%s/%s/%s", c->cgroup_parent, c->id, file);
	else
		snprintf(buf, size, "/sys/fs/cgroup/%s/%s/%s/%s", controller, c->cgroup_parent,
			 c->id, file);
	return buf;
}

static long long read_ll(const char *path)
{
	FILE *f = fopen(path, "re");
	long long v = -1;
	char word[32];
	if (f && fscanf(f, "%31s", word) == 1)
		v = strcmp(word, "max") == 0 ? LLONG_MAX : atoll(word);
	if (f)
		fclose(f);
	return v;
}

/* Sum of Pss over the container's processes (kB). */
static long long container_pss_kb(struct ctx *c, int *nprocs)
{
	char path[PATH_MAX];
	FILE *f = fopen(cgroup_file(c, "pids", "cgroup.procs", path, sizeof(path)), "re");
	long long total = 0;
	int pid;
	*nprocs = 0;
	while (f && fscanf(f, "%d", &pid) == 1) {
		char sp[64], line[256];
		snprintf(sp, sizeof(sp), "/proc/%d/smaps_rollup", pid);
		FILE *s = fopen(sp, "re");
		while (s && fgets(line, sizeof(line), s)) {
			long long kb;
			if (sscanf(line, "Pss: %lld kB", &kb) == 1)
				total += kb;
		}
		if (s)
			fclose(s);
		(*nprocs)++;
	}
	if (f)
		fclose(f);
	return total;
}

static int wait_file(const char *path, int timeout_ms)
{
	long long end = ms() + timeout_ms;
	struct stat st;
	while (stat(path, &st) < 0) {
		if (ms() > end)
			return -1;
		usleep(2000);
	}
	return 0;
}

static void cleanup(struct ctx *c)
{
	struct err e = ERR_INIT;
	if (c->started && runtime_delete(c->rt, c->id, 1, &e) < 0)
		note("cleanup delete: %s", e.msg);
	if (c->mounted && image_umount_rootfs(c->rootfs, &e) < 0)
		note("cleanup umount: %s", e.msg);
	if (c->state[0] && fs_remove_tree(c->state, &e) < 0)
		note("cleanup: %s", e.msg);
	/* The parent cgroup crun created (empty unless another run uses it). */
	static const char *const ctrl[] = {"blkio",   "cpu",	"cpuacct", "cpuset",  "devices",
					   "freezer", "memory", "pids",	   "systemd", ""};
	for (size_t i = 0; i < sizeof(ctrl) / sizeof(ctrl[0]); i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "/sys/fs/cgroup/%s%s%s", ctrl[i], ctrl[i][0] ? "/" : "",
			 c->cgroup_parent);
		rmdir(p);
	}
	runtime_free(c->rt);
}

static void test_banner(struct ctx *c)
{
	char sock_path[PATH_MAX];
	snprintf(sock_path, sizeof(sock_path), "%s/vnc.sock", c->run_dir);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	long long t = ms();
	int r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	ok(r == 0, "connect to the VNC socket from the host");
	char banner[13] = "";
	size_t got = 0;
	while (r == 0 && got < 12) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 3000) <= 0)
			break;
		ssize_t n = read(fd, banner + got, 12 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	banner[got] = '\0';
	ok(strncmp(banner, "RFB 003.00", 10) == 0, "RFB banner over the unix socket");
	note("banner '%.11s' after %lld ms (libvncserver waits ~100 ms for WebSocket)", banner,
	     ms() - t);
	close(fd);
}

static void test_inside(struct ctx *c)
{
	char out[4096];
	const char *id_u[] = {"id", "-u", NULL};
	ok(run_in(c, id_u, out, sizeof(out)) == 0, "exec id -u");
	is_str(out, "1000", "runs as uid 1000");
	const char *hn[] = {"hostname", NULL};
	run_in(c, hn, out, sizeof(out));
	is_str(out, "deskbox", "hostname");
	const char *procs[] = {"sh", "-c", "ls /proc | grep -c '^[0-9]'", NULL};
	run_in(c, procs, out, sizeof(out));
	int n = atoi(out);
	ok(n > 2 && n < 20, "pid namespace: only the sandbox's processes");
	note("processes visible inside: %d", n);
	const char *cap[] = {"grep", "^CapEff", "/proc/self/status", NULL};
	run_in(c, cap, out, sizeof(out));
	is_str(out, "CapEff:\t0000000000000000", "no effective capabilities");
	const char *cap_b[] = {"grep", "^CapBnd", "/proc/self/status", NULL};
	run_in(c, cap_b, out, sizeof(out));
	is_str(out, "CapBnd:\t0000000000000000", "empty bounding set");
	const char *nnp[] = {"grep", "^NoNewPrivs", "/proc/self/status", NULL};
	run_in(c, nnp, out, sizeof(out));
	is_str(out, "NoNewPrivs:\t1", "no_new_privs");
	const char *sec[] = {"grep", "^Seccomp:", "/proc/self/status", NULL};
	run_in(c, sec, out, sizeof(out));
	is_str(out, "Seccomp:\t2", "seccomp filter on");
	const char *net[] = {"ls", "/sys/class/net", NULL};
	run_in(c, net, out, sizeof(out));
	is_str(out, "lo", "network namespace with only lo");
	const char *hidden[] = {"sh", "-c",
				"ls -A /var/lib /home; test ! -e /work; test ! -e /etc/shadow; "
				"test ! -e /etc/ssh; ls -ld /root | cut -c1-10",
				NULL};
	ok(run_in(c, hidden, out, sizeof(out)) == 0, "host /work, shadow, ssh not visible");
	/* /var/lib holds only the image's own apt and dpkg state. */
	is_str(out, "/home:\nuser\n\n/var/lib:\napt\ndpkg\ndrwx------",
	       "no host /home, /var/lib or /root");
	const char *unsh[] = {"unshare", "-U", "true", NULL};
	ok(run_in(c, unsh, out, sizeof(out)) != 0, "seccomp refuses unshare");
	const char *py[] = {"python3", "-c",
			    "import os, threading; "
			    "t = threading.Thread(target=print, args=('py', os.getuid())); "
			    "t.start(); t.join()",
			    NULL};
	run_in(c, py, out, sizeof(out));
	is_str(out, "py 1000", "python3 with threads runs under the seccomp profile");
	const char *xt[] = {"sh", "-c",
			    "xdpyinfo 2>/dev/null | grep -c 'dimensions:.*1024x768' "
			    "|| DISPLAY=:0 xprop -root _NET_SUPPORTING_WM_CHECK",
			    NULL};
	run_in(c, xt, out, sizeof(out));
	ok(strcmp(out, "1") == 0 || strstr(out, "window id"), "X display reachable from exec");
	const char *ws[] = {"sh", "-c", "echo hello > /workspace/hello.txt", NULL};
	ok(run_in(c, ws, out, sizeof(out)) == 0, "write into /workspace");
	char upper_file[PATH_MAX];
	snprintf(upper_file, sizeof(upper_file), "%s/upper/workspace/hello.txt", c->sbx);
	char *data = NULL;
	struct err e = ERR_INIT;
	ok(fs_read_file(upper_file, 64, &data, NULL, &e) == 0 && data &&
	       strcmp(data, "hello\n") == 0,
	   "the file is in the overlay's upper layer");
	free(data);
}

static void test_limits(struct ctx *c)
{
	char p[PATH_MAX];
	if (c->mode == RUNTIME_CGROUP_V1) {
		is_int(read_ll(cgroup_file(c, "memory", "memory.limit_in_bytes", p, sizeof(p))),
		       512ll << 20, "memory limit in the container's cgroup");
		is_int(read_ll(cgroup_file(c, "pids", "pids.max", p, sizeof(p))), 256,
		       "pids limit in the container's cgroup");
		is_int(read_ll(cgroup_file(c, "cpu", "cpu.cfs_quota_us", p, sizeof(p))), 100000,
		       "cpu quota in the container's cgroup");
	} else {
		is_int(read_ll(cgroup_file(c, "", "memory.max", p, sizeof(p))), 512ll << 20,
		       "memory limit in the container's cgroup");
		is_int(read_ll(cgroup_file(c, "", "pids.max", p, sizeof(p))), 256,
		       "pids limit in the container's cgroup");
	}
	int running = 0;
	pid_t pid = 0;
	struct err e = ERR_INIT;
	ok(runtime_state(c->rt, c->id, &running, &pid, &e) == 0 && running && pid == c->init_pid,
	   "state: running with the init's pid");
	int nprocs;
	long long pss = container_pss_kb(c, &nprocs);
	note("PSS of the container's %d processes: %lld kB (%.1f MiB)", nprocs, pss,
	     (double)pss / 1024);
}

/* Counts the mounts of this namespace that still propagate to or from a
 * peer group (a "shared:N" optional field in mountinfo), or -1. */
static int shared_mounts(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof(line), f)) {
		char *end = strstr(line, " - ");
		if (end)
			*end = '\0';
		if (strstr(line, " shared:"))
			n++;
	}
	fclose(f);
	return n;
}

static int is_cgroup2(const char *path)
{
	struct statfs sf;
	return statfs(path, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

/* runtime_host_setup() left this process in a new, private mount
 * namespace and named the cgroup layout the host really has. */
/* The image's dpkg database is the host's status and file lists, not its
 * maintainer scripts. */
static void test_image_dpkg(const char *lower)
{
	struct stat host, img;
	char p[PATH_MAX];
	if (stat("/var/lib/dpkg/info/python3.list", &host) < 0) {
		note("no host dpkg database with python3: image dpkg checks skipped");
		return;
	}
	snprintf(p, sizeof(p), "%s/var/lib/dpkg/info/python3.list", lower);
	ok(stat(p, &img) == 0 && img.st_size == host.st_size, "the image has python3's file list");
	snprintf(p, sizeof(p), "%s/var/lib/dpkg/status", lower);
	ok(stat(p, &img) == 0 && stat("/var/lib/dpkg/status", &host) == 0 &&
	       img.st_size == host.st_size,
	   "the image's dpkg status is the host's");
	snprintf(p, sizeof(p), "%s/var/lib/dpkg/info/python3.postinst", lower);
	ok(access(p, F_OK) < 0 && errno == ENOENT, "no maintainer scripts copied");
}

static void test_host_setup(struct ctx *c, const char *ns_before)
{
	char ns_after[64] = "";
	ssize_t n = readlink("/proc/self/ns/mnt", ns_after, sizeof(ns_after) - 1);
	if (n > 0)
		ns_after[n] = '\0';
	ok(n > 0 && strcmp(ns_before, ns_after) != 0, "host setup: a new mount namespace");
	if (strcmp(ns_before, ns_after) == 0)
		note("still in %s", ns_before);
	int shared = shared_mounts();
	is_int(shared, 0, "host setup: no mount propagates to the host");
	int v2 = is_cgroup2("/sys/fs/cgroup");
	ok(c->mode == (v2 ? RUNTIME_CGROUP_V2 : RUNTIME_CGROUP_V1),
	   v2 ? "host setup: cgroup v2 detected" : "host setup: cgroup v1 detected");
	if (!v2)
		ok(!is_cgroup2("/sys/fs/cgroup/unified"),
		   "host setup: hybrid host's v2 hierarchy hidden from crun");
}

/* The isolation names, and the backends behind them: the container's is
 * the crun calls; "vm" is refused saying why (ERR_NOT_IMPLEMENTED). */
static void test_backends(void)
{
	enum runtime_isolation iso = 0;
	ok(runtime_isolation_parse("container", &iso) == 0 && iso == RUNTIME_ISOLATION_CONTAINER,
	   "isolation: \"container\" parses");
	ok(runtime_isolation_parse("vm", &iso) == 0 && iso == RUNTIME_ISOLATION_VM,
	   "isolation: \"vm\" parses");
	ok(runtime_isolation_parse("kvm", &iso) == -EINVAL &&
	       runtime_isolation_parse("", &iso) < 0 && runtime_isolation_parse(NULL, &iso) < 0,
	   "isolation: anything else is -EINVAL");
	ok(strcmp(runtime_isolation_name(RUNTIME_ISOLATION_VM), "vm") == 0 &&
	       strcmp(runtime_isolation_name(RUNTIME_ISOLATION_CONTAINER), "container") == 0 &&
	       strcmp(runtime_isolation_name(0), "container") == 0,
	   "isolation: names");
	const struct runtime_backend *be = NULL;
	struct err e = ERR_INIT;
	ok(runtime_backend_get(RUNTIME_ISOLATION_CONTAINER, &be, &e) == 0 &&
	       be == runtime_backend_container() && be->start == runtime_start &&
	       be->exec_spawn == runtime_exec_spawn && be->remove == runtime_delete,
	   "backend: the container's is the crun calls");
	be = NULL;
	int r = runtime_backend_get(RUNTIME_ISOLATION_VM, &be, &e);
	ok(r < 0 && !be && e.kind == ERR_NOT_IMPLEMENTED && strstr(e.msg, "vm"),
	   "backend: vm is refused with not_implemented, saying why");
	note("vm: %s", e.msg);
	ok(runtime_backend_container()->feature(RUNTIME_FEATURE_CHECKPOINT, NULL) == 0,
	   "backend: the container lacks no feature");

	/* Configured with parts that are not there: refused naming the part. */
	struct runtime_vm_opts vo = {.qemu = "/usr/bin/qemu-system-x86_64",
				     .kernel = "/nonexistent/vmlinuz",
				     .initrd = "/nonexistent/initrd",
				     .share = "/nonexistent/share",
				     .accel = "tcg",
				     .client = "/bin/false"};
	runtime_vm_configure(&vo);
	ok(strcmp(runtime_vm_accel(), "tcg") == 0, "vm: --vm-accel tcg is what a VM gets");
	err_clear(&e);
	be = NULL;
	r = runtime_backend_get(RUNTIME_ISOLATION_VM, &be, &e);
	ok(r < 0 && !be && e.kind == ERR_NOT_IMPLEMENTED && strstr(e.msg, "/nonexistent/vmlinuz") &&
	       strstr(e.msg, "make vm"),
	   "vm: a missing kernel is not_implemented naming it and `make vm`");
	note("vm: %s", e.msg);
	vo.accel = "auto";
	runtime_vm_configure(&vo);
	const char *a = runtime_vm_accel();
	ok(strcmp(a, "kvm") == 0 || strcmp(a, "tcg") == 0, "vm: auto picks kvm or tcg");
	note("vm: auto picks %s here%s", a,
	     access("/sys/module/kvm_pvm", F_OK) == 0
		 ? " (kvm_pvm: a stock kernel does not boot on it)"
		 : "");
}

int main(void)
{
	if (geteuid() != 0)
		skip_all("needs root (mount namespaces, overlayfs, crun)");
	test_backends();
	struct ctx c = {0};
	struct err e = ERR_INIT;
	snprintf(c.id, sizeof(c.id), "rt-test-%d", (int)getpid());
	snprintf(c.cgroup_parent, sizeof(c.cgroup_parent), "deskbox-test");
	char init_bin[PATH_MAX];
	const char *env_init = getenv("DESKBOX_INIT");
	const char *build = getenv("BUILD");
	if (env_init)
		snprintf(init_bin, sizeof(init_bin), "%s", env_init);
	else
		snprintf(init_bin, sizeof(init_bin), "%s/%s/deskbox-init",
			 getcwd(c.state, sizeof(c.state)) ? c.state : ".", build ? build : "build");
	c.state[0] = '\0';
	if (access(init_bin, X_OK) < 0)
		skip_all("no deskbox-init binary (set BUILD= or DESKBOX_INIT=)");

	char ns_before[64] = "";
	ssize_t ns_len = readlink("/proc/self/ns/mnt", ns_before, sizeof(ns_before) - 1);
	if (ns_len > 0)
		ns_before[ns_len] = '\0';
	if (runtime_host_setup(&c.mode, &e) < 0) {
		printf("# %s\n", e.msg);
		skip_all("cannot set up a private mount namespace");
	}
	snprintf(c.state, sizeof(c.state), "/tmp/deskbox-rt-XXXXXX");
	if (!mkdtemp(c.state))
		skip_all("cannot create a temporary directory");
	snprintf(c.crun_root, sizeof(c.crun_root), "%s/crun", c.state);
	struct runtime_opts o = {.binary = "crun", .root = c.crun_root, .cgroup_mode = c.mode};
	if (runtime_new(&c.rt, &o, &e) < 0) {
		fs_remove_tree(c.state, NULL);
		printf("# %s\n", e.msg);
		skip_all("no crun");
	}
	test_host_setup(&c, ns_before);

	char lower[PATH_MAX], lower2[PATH_MAX];
	long long t = ms();
	int r = image_prepare_default(c.state, lower, sizeof(lower), &e);
	ok(r == 0, "image_prepare_default");
	if (r < 0)
		note("%s", e.msg);
	note("image prepared in %lld ms: %s", ms() - t, lower);
	ok(image_prepare_default(c.state, lower2, sizeof(lower2), &e) == 0 &&
	       strcmp(lower, lower2) == 0,
	   "image_prepare_default is idempotent");
	test_image_dpkg(lower);

	snprintf(c.sbx, sizeof(c.sbx), "%s/sandboxes/%s", c.state, c.id);
	char upper[PATH_MAX], work[PATH_MAX], bundle[PATH_MAX], log_path[PATH_MAX];
	snprintf(upper, sizeof(upper), "%s/upper", c.sbx);
	snprintf(work, sizeof(work), "%s/work", c.sbx);
	snprintf(c.rootfs, sizeof(c.rootfs), "%s/rootfs", c.sbx);
	snprintf(bundle, sizeof(bundle), "%s/bundle", c.sbx);
	snprintf(c.run_dir, sizeof(c.run_dir), "%s/run", c.sbx);
	snprintf(log_path, sizeof(log_path), "%s/init.log", c.sbx);
	r = image_mount_rootfs(lower, upper, work, c.rootfs, &e);
	ok(r == 0, "overlay rootfs mounted");
	if (r < 0) {
		note("%s", e.msg);
		goto out;
	}
	c.mounted = 1;
	/* No user namespace here: the user's directories go to host uid 1000. */
	ok(image_own_dirs(c.rootfs, 0, &e) == 0, "the user's directories are the user's");
	if (fs_mkdir_p(bundle, 0700, &e) < 0 || fs_mkdir_p(c.run_dir, 0755, &e) < 0 ||
	    chown(c.run_dir, IMAGE_USER_UID, IMAGE_USER_GID) < 0) {
		ok(0, "sandbox directories");
		goto out;
	}

	const char *argv[] = {"/.deskbox/init", NULL};
	const char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/user", "LANG=C.UTF-8",
			     "DESKBOX_DISPLAY=1024x768", NULL};
	/* The init's default VNC server, next to it (as deskboxd mounts it). */
	char vnc_bin[PATH_MAX];
	const char *slash = strrchr(init_bin, '/');
	snprintf(vnc_bin, sizeof(vnc_bin), "%.*sdeskbox-vnc",
		 slash ? (int)(slash - init_bin + 1) : 0, init_bin);
	const struct runtime_mount mounts[] = {
	    {init_bin, "/.deskbox/init", 1},
	    {"/usr", "/usr", 1},
	    {c.run_dir, "/run/deskbox", 0},
	    {vnc_bin, "/.deskbox/deskbox-vnc", 1},
	};
	struct runtime_spec spec = {.id = c.id,
				    .bundle_dir = bundle,
				    .rootfs = c.rootfs,
				    .hostname = "deskbox",
				    .uid = IMAGE_USER_UID,
				    .gid = IMAGE_USER_GID,
				    .argv = argv,
				    .env = env,
				    .cwd = "/home/user",
				    .mounts = mounts,
				    .n_mounts = sizeof(mounts) / sizeof(mounts[0]),
				    .memory_bytes = 512ull << 20,
				    .pids_max = 256,
				    .cpu_millis = 1000,
				    .cgroup_parent = c.cgroup_parent};
	r = runtime_write_bundle(&spec, &e);
	ok(r == 0, "bundle written");
	if (r < 0) {
		note("%s", e.msg);
		goto out;
	}

	int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	long long t0 = ms();
	c.started = 1;
	r = runtime_start(c.rt, c.id, bundle, log_fd, &c.init_pid, &e);
	long long t_run = ms() - t0;
	close(log_fd);
	ok(r == 0 && c.init_pid > 0, "runtime_start");
	if (r < 0) {
		note("%s", e.msg);
		goto out;
	}
	char ready[PATH_MAX], sock_path[PATH_MAX];
	snprintf(ready, sizeof(ready), "%s/ready", c.run_dir);
	snprintf(sock_path, sizeof(sock_path), "%s/vnc.sock", c.run_dir);
	r = wait_file(ready, 10000);
	long long t_ready = ms() - t0;
	ok(r == 0, "desktop ready within 10 s");
	ok(wait_file(sock_path, 0) == 0, "vnc.sock exists");
	note("crun run: %lld ms; start to ready: %lld ms", t_run, t_ready);
	if (r < 0)
		goto out;

	test_banner(&c);
	test_inside(&c);
	test_limits(&c);

	struct err e2 = ERR_INIT;
	ok(runtime_delete(c.rt, "no-such-container", 0, &e2) == 0,
	   "deleting an unknown container is not an error");
	int running = 1;
	pid_t pid;
	ok(runtime_state(c.rt, "no-such-container", &running, &pid, &e2) < 0 &&
	       e2.kind == ERR_NOT_FOUND,
	   "state of an unknown container: not found");

	t = ms();
	r = runtime_kill(c.rt, c.id, SIGTERM, 0, &e);
	ok(r == 0, "runtime_kill SIGTERM");
	while (ms() - t < 5000 && kill(c.init_pid, 0) == 0)
		usleep(2000);
	ok(kill(c.init_pid, 0) < 0, "init exited on SIGTERM");
	note("SIGTERM to init gone: %lld ms", ms() - t);
	t = ms();
	r = runtime_delete(c.rt, c.id, 0, &e);
	ok(r == 0, "runtime_delete");
	if (r < 0)
		note("%s", e.msg);
	note("crun delete: %lld ms", ms() - t);
	c.started = 0;
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", c.crun_root, c.id);
	ok(stat(p, &st) < 0, "no crun state left");
	ok(stat(cgroup_file(&c, "pids", "", p, sizeof(p)), &st) < 0, "no cgroup left");
	r = image_umount_rootfs(c.rootfs, &e);
	ok(r == 0, "overlay unmounted");
	c.mounted = 0;
	ok(image_umount_rootfs(c.rootfs, &e) == 0, "unmounting twice is not an error");
	{
		char logbuf[4096];
		int fd = open(log_path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, logbuf, sizeof(logbuf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		logbuf[n > 0 ? n : 0] = '\0';
		for (char *line = strtok(logbuf, "\n"); line; line = strtok(NULL, "\n"))
			if (strncmp(line, "deskbox-init:", 13) == 0)
				note("%s", line);
	}
out:
	cleanup(&c);
	return done();
}
