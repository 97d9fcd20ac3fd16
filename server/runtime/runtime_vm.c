/* runtime_vm: the "vm" isolation backend (docs/isolation.md).  One QEMU
 * process per sandbox, a child of deskboxd (its subreaper), running as the
 * sandbox's user uid (host_base + IMAGE_USER_UID) in its own cgroup
 * (/deskbox/<id>, like a container's) and network namespace, under QEMU's
 * seccomp filter.  The guest boots Debian's kernel and the generated
 * initramfs (scripts/vm-initramfs.sh) and takes as its root the sandbox's
 * overlay (the same <dir>/rootfs a container gets) over virtio-9p, with the
 * host's /usr and deskbox's parts read-only beside it.  Its one network
 * device is a virtio-net on a tap in its namespace, which the network
 * layer attaches as a container's (runtime_vm_net.c).  Its other channels
 * are virtio-serial ports, each a unix socket QEMU listens on in the
 * sandbox's run/ directory: vnc.sock (the guest's VNC server, for the
 * bridge), vncview0..N.sock (the same server, one live viewer each) and
 * exec0..N.sock (the
 * guest's exec agent, desktop-image/vm-agent.py, reached by the client in
 * desktop-image/vm_exec.c).
 *
 * What the backend needs of the sandbox comes from the bundle the sandbox
 * layer writes for either backend (config.json: the root, the env, the
 * mounts, the uid mapping and the limits), so the layers above never know
 * which backend they hold. */
#include "runtime.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "internal.h"

#define VM_DEFAULT_MEM_MB  1024
#define VM_ARGV_MAX	   144
#define VM_STOP_TIMEOUT_MS 5000
#define VM_XVFB_TIMEOUT_MS 200000

static struct runtime_vm_opts vm_opts;
static int vm_configured;
static char vm_accel_used[8] = "tcg";

const char *runtime_vm_client(void)
{
	return vm_opts.client;
}

void runtime_vm_configure(const struct runtime_vm_opts *o)
{
	vm_opts = *o;
	vm_configured = 1;
}

/* kvm_pvm (a nested hypervisor without vmx/svm) answers the KVM API but
 * Debian's kernel stops in its earliest boot code on it. */
static int kvm_is_pvm(void)
{
	return access("/sys/module/kvm_pvm", F_OK) == 0;
}

const char *runtime_vm_accel(void)
{
	const char *a = vm_opts.accel ? vm_opts.accel : "auto";
	if (strcmp(a, "auto") != 0)
		return a;
	return runtime_kvm_probe(NULL) == 0 && !kvm_is_pvm() ? "kvm" : "tcg";
}

int runtime_vm_usable(struct err *e)
{
	if (!vm_configured || !vm_opts.kernel || !vm_opts.initrd || !vm_opts.share)
		return err_set(e, ERR_NOT_IMPLEMENTED, ENOTSUP,
			       "isolation 'vm': this deskboxd has no VM kernel and initramfs "
			       "(docs/isolation.md)");
	const char *accel = runtime_vm_accel();
	if (strcmp(accel, "kvm") == 0 && runtime_kvm_probe(e) < 0)
		return err_code(e);
	if (strcmp(accel, "tcg") != 0 && strcmp(accel, "kvm") != 0)
		return err_set(e, ERR_NOT_IMPLEMENTED, EINVAL, "isolation 'vm': unknown accel '%s'",
			       accel);
	const char *need[] = {vm_opts.kernel, vm_opts.initrd, vm_opts.share, vm_opts.qemu};
	for (size_t i = 0; i < sizeof(need) / sizeof(*need); i++)
		if (access(need[i], R_OK) < 0)
			return err_sys(e, ERR_NOT_IMPLEMENTED, errno,
				       "isolation 'vm' needs '%s' (make vm; docs/isolation.md)",
				       need[i]);
	snprintf(vm_accel_used, sizeof(vm_accel_used), "%s", accel);
	return 0;
}

/* <runtime root>/vm-<id>: pid and the run dir's path, root's only. */
static void vm_dir(struct runtime *rt, const char *id, char *out, size_t size)
{
	snprintf(out, size, "%s/vm-%s", runtime_root(rt), id);
}

/* What the VM takes from the bundle. */
struct vm_spec {
	char rootfs[PATH_MAX], run[PATH_MAX], userns[PATH_MAX], display[32];
	uint32_t uid; /* the sandbox's root: host_base */
	int fds[4];   /* root, guest/, the user namespace and /usr, passed to QEMU */
	/* The image's /usr: the host's (read-only) or the sandbox's own
	 * overlay of it on <rootfs>/usr. */
	char usr[PATH_MAX]; /* "": a stored image's own, in the root */
	int usr_ro;
	char share[PATH_MAX]; /* the guest's /.deskbox */
	char resolv[PATH_MAX]; /* the sandbox's resolv.conf, rewritten in place */
	int netns, tap;	       /* its network namespace and tap (runtime_vm_net.c) */
	uint64_t mem_mb;
	int64_t pids_max;
	long cpu_quota, cpu_period;
	struct runtime_vm_ro ro; /* a read-only root (runtime_vm_ro.c) */
};

static const char *env_value(const cJSON *env, const char *key)
{
	size_t kl = strlen(key);
	const cJSON *it;
	cJSON_ArrayForEach(it, env)
	{
		if (cJSON_IsString(it) && strncmp(it->valuestring, key, kl) == 0 &&
		    it->valuestring[kl] == '=')
			return it->valuestring + kl + 1;
	}
	return NULL;
}

static double num_at(const cJSON *o, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(o, a), b);
	return cJSON_IsNumber(x) ? x->valuedouble : 0;
}

/* The env for the guest's init: one "K=V" a line (<run>/guest/env). */
static int write_env(const char *guest, const cJSON *env, struct err *e)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/env", guest);
	_cleanup_file_ FILE *f = fopen(path, "we");
	if (!f)
		return err_sys(e, ERR_INTERNAL, errno, "writing '%s'", path);
	/* Xvfb takes seconds under emulation, more on a loaded host: the
	 * init's 10 s for a container would fail a boot (the sandbox's own
	 * env, next, may say otherwise). */
	fprintf(f, "DESKBOX_XVFB_TIMEOUT_MS=%d\n", VM_XVFB_TIMEOUT_MS);
	/* Nor may a key's release come in time for the X server's repeat
	 * (660 ms): typed "-9" arrived as "----9" once under load. */
	fprintf(f, "DESKBOX_XVFB_AUTOREPEAT=0\n");
	const cJSON *it;
	cJSON_ArrayForEach(it, env)
	{
		if (cJSON_IsString(it) && !strchr(it->valuestring, '\n'))
			fprintf(f, "%s\n", it->valuestring);
	}
	return 0;
}

static int mount_ro(const cJSON *m)
{
	const cJSON *o;
	cJSON_ArrayForEach(o, cJSON_GetObjectItem(m, "options"))
	{
		if (cJSON_IsString(o) && !strcmp(o->valuestring, "ro"))
			return 1;
	}
	return 0;
}

static int read_bundle(const char *bundle_dir, struct vm_spec *v, cJSON **env, struct err *e)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/config.json", bundle_dir);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (fs_read_file(path, 1 << 20, &text, &len, e) < 0)
		return err_code(e);
	cJSON *c = cJSON_Parse(text);
	if (!c)
		return err_set(e, ERR_INTERNAL, EINVAL, "VM: unreadable '%s'", path);
	const cJSON *root = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "root"), "path");
	const cJSON *lx = cJSON_GetObjectItem(c, "linux");
	const cJSON *map = cJSON_GetArrayItem(cJSON_GetObjectItem(lx, "uidMappings"), 0);
	const cJSON *host = cJSON_GetObjectItem(map, "hostID");
	const cJSON *res = cJSON_GetObjectItem(lx, "resources");
	const cJSON *m;
	cJSON_ArrayForEach(m, cJSON_GetObjectItem(lx, "namespaces"))
	{
		const cJSON *t = cJSON_GetObjectItem(m, "type");
		const cJSON *p = cJSON_GetObjectItem(m, "path");
		if (cJSON_IsString(t) && cJSON_IsString(p) && !strcmp(t->valuestring, "user"))
			snprintf(v->userns, sizeof(v->userns), "%s", p->valuestring);
	}
	cJSON_ArrayForEach(m, cJSON_GetObjectItem(c, "mounts"))
	{
		const cJSON *d = cJSON_GetObjectItem(m, "destination");
		const cJSON *s = cJSON_GetObjectItem(m, "source");
		if (cJSON_IsString(d) && cJSON_IsString(s) &&
		    !strcmp(d->valuestring, "/run/deskbox"))
			snprintf(v->run, sizeof(v->run), "%s", s->valuestring);
		if (cJSON_IsString(d) && cJSON_IsString(s) && !strcmp(d->valuestring, "/usr")) {
			snprintf(v->usr, sizeof(v->usr), "%s", s->valuestring);
			v->usr_ro = mount_ro(m);
		}
		if (cJSON_IsString(d) && cJSON_IsString(s) &&
		    !strcmp(d->valuestring, "/etc/resolv.conf"))
			snprintf(v->resolv, sizeof(v->resolv), "%s", s->valuestring);
	}
	int r = 0;
	if (!cJSON_IsString(root) || !v->run[0])
		r = err_set(e, ERR_INTERNAL, EINVAL, "VM: the bundle names no root or run dir");
	else if (!v->usr[0])
		r = runtime_vm_image_share(c, root->valuestring, vm_opts.share, v->share,
					   sizeof(v->share), e);
	else if (!cJSON_IsNumber(host) || host->valuedouble <= 0 || !v->userns[0])
		r = err_set(e, ERR_UNAVAILABLE, EPERM,
			    "isolation 'vm' needs the sandbox's own uid range (deskboxd with "
			    "user namespaces)");
	if (r == 0) {
		snprintf(v->rootfs, sizeof(v->rootfs), "%s", root->valuestring);
		v->uid = (uint32_t)host->valuedouble;
		v->mem_mb = (uint64_t)num_at(res, "memory", "limit") >> 20;
		v->pids_max = (int64_t)num_at(res, "pids", "limit");
		v->cpu_quota = (long)num_at(res, "cpu", "quota");
		v->cpu_period = (long)num_at(res, "cpu", "period");
		const cJSON *pe = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "process"), "env");
		const char *d = env_value(pe, "DESKBOX_DISPLAY");
		snprintf(v->display, sizeof(v->display), "%s", d ? d : "1280x800");
		*env = cJSON_Duplicate(pe, 1);
		runtime_vm_ro_read(c, v->rootfs, &v->ro);
	}
	cJSON_Delete(c);
	return r;
}

/* ro: 0 writable, 1 read-only (the host's files: owners as they are), 2
 * read-only with the sandbox's owners (a read-only root). */
static int add_share(const char **argv, int n, char bufs[][PATH_MAX], int *nb, const char *tag,
		     const char *path, int ro)
{
	snprintf(bufs[*nb], PATH_MAX, "local,id=%s,path=%s,multidevs=remap,security_model=%s%s",
		 tag, path, ro == 1 ? "none" : "passthrough", ro ? ",readonly=on" : "");
	argv[n++] = "-fsdev";
	argv[n++] = bufs[(*nb)++];
	snprintf(bufs[*nb], PATH_MAX, "virtio-9p-pci,fsdev=%s,mount_tag=%s", tag, tag);
	argv[n++] = "-device";
	argv[n++] = bufs[(*nb)++];
	return n;
}

static int add_port(const char **argv, int n, char bufs[][PATH_MAX], int *nb, const char *name,
		    const char *sock)
{
	snprintf(bufs[*nb], PATH_MAX, "socket,id=%s,path=%s,server=on,wait=off", name, sock);
	argv[n++] = "-chardev";
	argv[n++] = bufs[(*nb)++];
	snprintf(bufs[*nb], PATH_MAX, "virtserialport,chardev=%s,name=deskbox.%s", name, name);
	argv[n++] = "-device";
	argv[n++] = bufs[(*nb)++];
	return n;
}

/* The sandbox's directory is root's only: the VM opens its shares
 * through the fds deskboxd passes (v->fds; a read-only root's writable
 * places: v->ro.fds). */
static int add_shares(const struct vm_spec *v, const char **argv, int n, char bufs[][PATH_MAX],
		      int *nb)
{
	char root[32], run[32], usr[32];
	snprintf(root, sizeof(root), "/proc/self/fd/%d", v->fds[0]);
	snprintf(run, sizeof(run), "/proc/self/fd/%d", v->fds[1]);
	snprintf(usr, sizeof(usr), "/proc/self/fd/%d", v->fds[3]);
	n = add_share(argv, n, bufs, nb, "root", root, v->ro.on ? 2 : 0);
	for (int i = 0; i < v->ro.n; i++) {
		char tag[8], p[32];
		snprintf(tag, sizeof(tag), "rw%d", i);
		snprintf(p, sizeof(p), "/proc/self/fd/%d", v->ro.fds[i]);
		n = add_share(argv, n, bufs, nb, tag, p, 0);
	}
	if (v->usr[0])
		n = add_share(argv, n, bufs, nb, "usr", usr, v->usr_ro);
	n = add_share(argv, n, bufs, nb, "deskbox", v->share[0] ? v->share : vm_opts.share, 1);
	return add_share(argv, n, bufs, nb, "run", run, 0);
}

/* QEMU's argv; its sockets are relative to the run dir, its cwd. */
static void qemu_argv(const struct vm_spec *v, const char **argv, char bufs[][PATH_MAX])
{
	int n = 0, nb = 0;
	int kvm = strcmp(vm_accel_used, "kvm") == 0;
	argv[n++] = vm_opts.qemu;
	argv[n++] = "-M";
	argv[n++] = "q35";
	argv[n++] = "-accel";
	argv[n++] = kvm ? "kvm" : "tcg,tb-size=64";
	argv[n++] = "-cpu";
	argv[n++] = kvm ? "host,-arch-capabilities" : "max";
	snprintf(bufs[nb], PATH_MAX, "%llu", (unsigned long long)v->mem_mb);
	argv[n++] = "-m";
	argv[n++] = bufs[nb++];
	const char *fixed[] = {"-smp",
			       "1",
			       "-nodefaults",
			       "-no-user-config",
			       "-display",
			       "none",
			       "-no-reboot",
			       "-sandbox",
			       "on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
			       "resourcecontrol=deny",
			       "-kernel",
			       vm_opts.kernel,
			       "-initrd",
			       vm_opts.initrd,
			       "-append"};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++)
		argv[n++] = fixed[i];
	char ro[RUNTIME_VM_RW_MAX * 65 + 32];
	runtime_vm_ro_cmdline(&v->ro, ro, sizeof(ro));
	snprintf(bufs[nb], PATH_MAX,
		 "console=ttyS0 quiet panic=-1 deskbox_display=%s deskbox_usr=%s "
		 "deskbox_ip=" RUNTIME_VM_NET_GUEST "/30 deskbox_gw=" RUNTIME_VM_NET_HOST "%s",
		 v->display, !v->usr[0] ? "none" : v->usr_ro ? "ro" : "rw", ro);
	argv[n++] = bufs[nb++];
	/* The tap deskboxd made (fd passed): QEMU opens no network device. */
	snprintf(bufs[nb], PATH_MAX, "tap,id=net0,fd=%d,vhost=off", v->tap);
	argv[n++] = "-netdev";
	argv[n++] = bufs[nb++];
	argv[n++] = "-device";
	argv[n++] = "virtio-net-pci,netdev=net0,mac=" RUNTIME_VM_MAC;
	argv[n++] = "-chardev";
	argv[n++] = "stdio,id=con,signal=off";
	argv[n++] = "-serial";
	argv[n++] = "chardev:con";
	/* QMP for the balloon (live memory_mb: runtime_vm_limits.c); without
	 * deflate-on-oom, what it takes is off the guest's MemTotal and the
	 * guest cannot take it back. */
	argv[n++] = "-qmp";
	argv[n++] = "unix:qmp.sock,server=on,wait=off";
	argv[n++] = "-device";
	argv[n++] = "virtio-balloon-pci,id=balloon0";
	argv[n++] = "-device";
	argv[n++] = "virtio-serial-pci,max_ports=16";
	n = add_port(argv, n, bufs, &nb, "vnc", "vnc.sock");
	for (int i = 0; i < RUNTIME_VM_EXEC_PORTS + RUNTIME_VM_VIEWER_PORTS; i++) {
		char name[16], sock[32];
		int k = i < RUNTIME_VM_EXEC_PORTS ? i : i - RUNTIME_VM_EXEC_PORTS;
		snprintf(name, sizeof(name), "%s%d", i < RUNTIME_VM_EXEC_PORTS ? "exec" : "vncview",
			 k);
		snprintf(sock, sizeof(sock), "%s.sock", name);
		n = add_port(argv, n, bufs, &nb, name, sock);
	}
	n = add_shares(v, argv, n, bufs, &nb);
	argv[n] = NULL;
}

static void child_fail(const char *what)
{
	static const char pre[] = "deskbox: starting the VM: ";
	if (write(2, pre, sizeof(pre) - 1) < 0 || write(2, what, strlen(what)) < 0 ||
	    write(2, "\n", 1) < 0)
		_exit(126);
	_exit(126);
}

/* The child: its cgroup, the sandbox's user namespace (as its root, so
 * that the guest sees the owners a container sees and files it makes get
 * the sandbox's ids), stdio to the log.  Only async-signal-safe calls
 * (deskboxd has threads). */
static void child(const char *const *argv, const struct vm_spec *v, int log_fd, int go)
{
	const int pass[] = {v->fds[0], v->fds[1], v->fds[3], v->tap};
	for (int i = 0; i < 4; i++)
		if (pass[i] >= 0 && fcntl(pass[i], F_SETFD, 0) < 0)
			_exit(126);
	for (int i = 0; i < v->ro.n; i++)
		if (fcntl(v->ro.fds[i], F_SETFD, 0) < 0)
			_exit(126);
	/* The parent puts us in the VM's cgroup first. */
	char c;
	if (read(go, &c, 1) != 1)
		_exit(126);
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	int out = log_fd >= 0 ? log_fd : nul;
	if (nul < 0 || dup2(nul, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(126);
	if (out == log_fd)
		fcntl(1, F_SETFD, 0), fcntl(2, F_SETFD, 0);
	setsid();
	/* deskboxd blocks the signals its threads wait for: QEMU must get
	 * SIGTERM (a stop) with the default handling. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	/* Its network namespace first: entering it needs deskboxd's rights. */
	if (chdir(v->run) < 0 || setns(v->netns, CLONE_NEWNET) < 0 ||
	    setns(v->fds[2], CLONE_NEWUSER) < 0 || setgroups(0, NULL) < 0 ||
	    setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail("chdir or the sandbox's namespaces");
	static char *const env[] = {"PATH=/usr/bin:/bin", NULL};
	execve(argv[0], (char *const *)argv, env);
	child_fail(argv[0]);
}

/* The run dir becomes the VM's (its sockets), with guest/ (the guest's
 * one writable place on the host beside its root: the ready flag, the
 * env) and ready -> guest/ready for the sandbox layer's wait. */
static int prepare_run(const struct vm_spec *v, const cJSON *env, char *guest, struct err *e)
{
	snprintf(guest, PATH_MAX, "%s/guest", v->run);
	char ready[PATH_MAX];
	snprintf(ready, sizeof(ready), "%s/ready", v->run);
	unlink(ready);
	if (chown(v->run, v->uid, v->uid) < 0 || chmod(v->run, 0700) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "VM: giving '%s' to the VM", v->run);
	if ((mkdir(guest, 0700) < 0 && errno != EEXIST) || symlink("guest/ready", ready) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "VM: preparing '%s'", guest);
	char flag[PATH_MAX];
	snprintf(flag, sizeof(flag), "%s/ready", guest);
	unlink(flag);
	if (write_env(guest, env, e) < 0 ||
	    (v->resolv[0] && runtime_vm_net_resolv(guest, v->resolv, e) < 0))
		return err_code(e);
	char envp[PATH_MAX];
	snprintf(envp, sizeof(envp), "%s/env", guest);
	if (chown(guest, v->uid, v->uid) < 0 || chown(envp, v->uid, v->uid) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "VM: giving '%s' to the VM", guest);
	return 0;
}

static void close_fds(struct vm_spec *v)
{
	int *fds[] = {&v->fds[0], &v->fds[1], &v->fds[2], &v->fds[3], &v->netns, &v->tap};
	for (size_t i = 0; i < sizeof(fds) / sizeof(*fds); i++)
		if (*fds[i] >= 0)
			close(*fds[i]), *fds[i] = -1;
	runtime_vm_ro_close(&v->ro);
}

/* The host's /usr on the root (read-only), in deskboxd's namespace, as a
 * container gets it: the files API and code_run's interpreter lookup see
 * the tree the guest sees (which mounts its own 9p share of /usr there). */
static int bind_usr(const char *rootfs, struct err *e)
{
	char usr[PATH_MAX];
	snprintf(usr, sizeof(usr), "%s/usr", rootfs);
	umount2(usr, MNT_DETACH);
	if (mount("/usr", usr, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, usr, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
		0)
		return err_sys(e, ERR_INTERNAL, errno, "VM: the host's /usr on '%s'", usr);
	return 0;
}

static int write_state(struct runtime *rt, const char *id, pid_t pid, const struct vm_spec *v,
		       struct err *e)
{
	char dir[PATH_MAX], p[PATH_MAX], buf[2 * PATH_MAX + 32];
	vm_dir(rt, id, dir, sizeof(dir));
	if (fs_mkdir_p(dir, 0700, e) < 0)
		return err_code(e);
	/* The rootfs only when its /usr is our bind mount, for the remove. */
	int n = snprintf(buf, sizeof(buf), "%d\n%s\n%s\n", (int)pid, v->run,
			 strcmp(v->usr, "/usr") ? "" : v->rootfs);
	snprintf(p, sizeof(p), "%s/state", dir);
	return fs_write_atomic(p, buf, (size_t)n, 0600, e);
}

/* Forks QEMU's child into the VM's cgroup and waits until it has exec'd:
 * from then on /proc/<pid>/ns/net is the VM's namespace, which the
 * network layer attaches right after the start (checked, since an attach
 * to deskboxd's own namespace would put the sandbox's eth0 and route
 * there). */
static int spawn(const char *const *argv, const struct vm_spec *v, int log_fd,
		 char procs[RUNTIME_VM_N_CG][PATH_MAX], pid_t *out, struct err *e)
{
	int go[2], execd[2];
	struct stat ns, got;
	if (fstat(v->netns, &ns) < 0 || pipe2(go, O_CLOEXEC) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	if (pipe2(execd, O_CLOEXEC) < 0) {
		close(go[0]);
		close(go[1]);
		return err_sys(e, ERR_INTERNAL, errno, "pipe");
	}
	pid_t pid = fork();
	if (pid == 0)
		child(argv, v, log_fd, go[0]);
	int r = pid < 0 ? err_sys(e, ERR_INTERNAL, errno, "fork") : 0;
	close(go[0]);
	close(execd[1]);
	/* In its cgroup before it runs (the monitor checks it is there). */
	for (size_t i = 0; r == 0 && i < RUNTIME_VM_N_CG && procs[i][0]; i++) {
		_cleanup_fd_ int fd = open(procs[i], O_WRONLY | O_CLOEXEC);
		if (fd < 0 || dprintf(fd, "%d", (int)pid) < 0)
			r = err_sys(e, ERR_INTERNAL, errno, "VM: joining '%s'", procs[i]);
	}
	if (r == 0 && write(go[1], "g", 1) != 1)
		r = err_sys(e, ERR_INTERNAL, errno, "VM: starting");
	close(go[1]);
	char c, nsp[64];
	while (r == 0 && read(execd[0], &c, 1) < 0 && errno == EINTR)
		;
	close(execd[0]);
	snprintf(nsp, sizeof(nsp), "/proc/%d/ns/net", (int)pid);
	if (r == 0 && (stat(nsp, &got) < 0 || got.st_ino != ns.st_ino || got.st_dev != ns.st_dev))
		r = err_set(e, ERR_INTERNAL, ESRCH,
			    "VM: QEMU did not start in its network namespace "
			    "(see the sandbox's log)");
	if (r < 0 && pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	*out = pid;
	return r;
}

static int vm_start(struct runtime *rt, const char *id, const char *bundle_dir, int log_fd,
		    pid_t *init_pid, struct err *e)
{
	if (runtime_vm_usable(e) < 0)
		return err_code(e);
	struct vm_spec v = {.fds = {-1, -1, -1, -1}, .netns = -1, .tap = -1};
	cJSON *env = NULL;
	if (read_bundle(bundle_dir, &v, &env, e) < 0)
		return err_code(e);
	if (!v.mem_mb)
		v.mem_mb = VM_DEFAULT_MEM_MB;
	if (v.mem_mb < RUNTIME_VM_MIN_MEM_MB)
		v.mem_mb = RUNTIME_VM_MIN_MEM_MB;
	char guest[PATH_MAX], procs[RUNTIME_VM_N_CG][PATH_MAX] = {{0}};
	const struct runtime_vm_cg lim = {.mem_mb = v.mem_mb,
					  .pids_max = v.pids_max,
					  .cpu_quota = v.cpu_quota,
					  .cpu_period = v.cpu_period};
	int r = prepare_run(&v, env, guest, e);
	cJSON_Delete(env);
	if (r < 0 || (!strcmp(v.usr, "/usr") && bind_usr(v.rootfs, e) < 0) ||
	    runtime_vm_cg_make(rt, id, &lim, procs, e) < 0)
		return err_code(e);
	const char *argv[VM_ARGV_MAX];
	/* On the heap: 192 KiB of thread-local storage would be part of every
	 * thread's static TLS, more than the 256 KiB stacks of the process
	 * layer's threads hold (pthread_create answers EINVAL). */
	_cleanup_free_ char(*bufs)[PATH_MAX] = malloc(48 * sizeof(*bufs));
	if (!bufs)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	v.fds[0] = open(v.rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	v.fds[1] = open(guest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	v.fds[2] = open(v.userns, O_RDONLY | O_CLOEXEC);
	/* (a stored image has no /usr share: its own is in the root) */
	v.fds[3] = v.usr[0] ? open(v.usr, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (v.fds[0] < 0 || v.fds[1] < 0 || v.fds[2] < 0 || (v.usr[0] && v.fds[3] < 0)) {
		r = err_sys(e, ERR_INTERNAL, errno, "VM: opening its shares");
		close_fds(&v);
		return r;
	}
	if (runtime_vm_ro_open(v.rootfs, &v.ro, e) < 0) {
		close_fds(&v);
		return err_code(e);
	}
	if (runtime_vm_net_make(&v.netns, &v.tap, e) < 0) {
		close_fds(&v);
		return err_code(e);
	}
	qemu_argv(&v, argv, bufs);
	pid_t pid = 0;
	r = spawn(argv, &v, log_fd, procs, &pid, e);
	close_fds(&v);
	if (r < 0)
		return r;
	*init_pid = pid;
	return write_state(rt, id, pid, &v, e);
}

/* The VM's pid from its state file, if that QEMU still runs (its cgroup
 * is the sandbox's: a reused pid is not taken for it). */
static pid_t vm_pid(struct runtime *rt, const char *id, char *run, size_t run_size,
		    char rootfs[PATH_MAX])
{
	char dir[PATH_MAX], p[PATH_MAX];
	vm_dir(rt, id, dir, sizeof(dir));
	snprintf(p, sizeof(p), "%s/state", dir);
	_cleanup_file_ FILE *f = fopen(p, "re");
	int pid = 0;
	char line[PATH_MAX] = "";
	if (!f || fscanf(f, "%d\n", &pid) != 1 || !fgets(line, sizeof(line), f))
		return 0;
	line[strcspn(line, "\n")] = '\0';
	if (run)
		snprintf(run, run_size, "%s", line);
	if (rootfs && fgets(rootfs, PATH_MAX, f))
		rootfs[strcspn(rootfs, "\n")] = '\0';
	char cg[PATH_MAX], want[128], buf[4096];
	snprintf(cg, sizeof(cg), "/proc/%d/cgroup", pid);
	snprintf(want, sizeof(want), "/deskbox/%s\n", id);
	_cleanup_fd_ int fd = open(cg, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strstr(buf, want) ? pid : 0;
}

/* QEMU's cwd is the run dir (its sockets): reached that way, it is the
 * same whether this deskboxd started the VM or took it over, with the
 * run dir's tmpfs in the earlier deskboxd's mount namespace. */
int runtime_vm_run_dir(struct runtime *rt, const char *id, char *out, size_t size)
{
	pid_t pid = vm_pid(rt, id, NULL, 0, NULL);
	if (pid <= 0)
		return -ESRCH;
	snprintf(out, size, "/proc/%d/cwd", (int)pid);
	return 0;
}

static void vm_adopted_paths(pid_t pid, const char *rootfs, char *run, char *root, size_t size)
{
	snprintf(run, size, "/proc/%d/cwd", (int)pid);
	/* QEMU is not chrooted: its root is "/" of the namespace that holds
	 * the overlay (and the host's /usr bound on it). */
	snprintf(root, size, "/proc/%d/root%s", (int)pid, rootfs);
}

static int vm_kill(struct runtime *rt, const char *id, int sig, int all, struct err *e)
{
	pid_t pid = vm_pid(rt, id, NULL, 0, NULL);
	if (pid <= 0)
		return err_set(e, ERR_NOT_FOUND, ESRCH, "VM '%s' is not running", id);
	if (kill(pid, sig) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "signalling VM '%s'", id);
	return 0;
}

/* Kills QEMU and waits for its end: reaped by the monitor (deskboxd is
 * its subreaper) or here; one taken over from an earlier deskboxd is not
 * our child, and its pidfd says when it has ended (a zombie until the
 * machine's init reaps it). */
static void vm_kill_wait(pid_t pid)
{
	_cleanup_fd_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return; /* gone already */
	syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
	struct pollfd p = {.fd = pfd, .events = POLLIN};
	if (poll(&p, 1, VM_STOP_TIMEOUT_MS) > 0)
		waitpid(pid, NULL, WNOHANG); /* ours, unless the monitor was first */
}

static int vm_remove(struct runtime *rt, const char *id, int force, struct err *e)
{
	char run[PATH_MAX] = "", rootfs[PATH_MAX] = "", dir[PATH_MAX], p[PATH_MAX];
	pid_t pid = vm_pid(rt, id, run, sizeof(run), rootfs);
	if (pid > 0)
		vm_kill_wait(pid);
	if (run[0]) {
		static const char *const names[] = {"vnc.sock", "qmp.sock", "ready", "guest/env",
						    "guest/ready"};
		for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
			snprintf(p, sizeof(p), "%s/%s", run, names[i]);
			unlink(p);
		}
		for (int i = 0; i < RUNTIME_VM_EXEC_PORTS + RUNTIME_VM_VIEWER_PORTS; i++) {
			const char *kind = i < RUNTIME_VM_EXEC_PORTS ? "exec" : "vncview";
			int k = i < RUNTIME_VM_EXEC_PORTS ? i : i - RUNTIME_VM_EXEC_PORTS;
			snprintf(p, sizeof(p), "%s/%s%d.sock", run, kind, k);
			unlink(p);
			snprintf(p, sizeof(p), "%s/%s%d.lock", run, kind, k);
			unlink(p);
		}
		runtime_vm_net_unresolv(run);
		snprintf(p, sizeof(p), "%s/guest", run);
		rmdir(p);
	}
	if (rootfs[0]) {
		snprintf(p, sizeof(p), "%s/usr", rootfs);
		umount2(p, MNT_DETACH);
	}
	runtime_vm_cg_remove(rt, id);
	vm_dir(rt, id, dir, sizeof(dir));
	snprintf(p, sizeof(p), "%s/state", dir);
	unlink(p);
	rmdir(dir);
	return 0;
}

static int vm_state(struct runtime *rt, const char *id, int *running, pid_t *init_pid,
		    struct err *e)
{
	pid_t pid = vm_pid(rt, id, NULL, 0, NULL);
	*running = pid > 0;
	*init_pid = pid > 0 ? pid : 0;
	return 0;
}


/* From the VM's network namespace to the guest's address there: a
 * service the guest binds to 0.0.0.0 (or its eth0) answers; one bound to
 * the guest's 127.0.0.1 does not (docs/isolation.md). */
static int vm_connect_inside(pid_t pid, uint16_t port, int timeout_ms, int *fd, struct err *e)
{
	struct in_addr a;
	inet_pton(AF_INET, RUNTIME_VM_NET_GUEST, &a);
	if (runtime_connect_inside_to(pid, ntohl(a.s_addr), port, timeout_ms, fd, e) < 0)
		return err_wrap(e, "the VM's port %u (served on its eth0 or 0.0.0.0?)", port);
	return 0;
}

static int vm_feature(enum runtime_feature f, struct err *e)
{
	/* Every feature the layers above ask about works for a VM: pause
	 * freezes QEMU in its cgroup's freezer, as a container's processes
	 * are (the guest's clock jumps at the resume); a takeover reaches
	 * QEMU's sockets and the overlay through /proc/<pid>
	 * (vm_adopted_paths); terminals run on a pty of the guest (exec_pty);
	 * live viewers have ports of their own (viewer_ports); checkpoints
	 * are of the files, after the guest's sync (quiesce); the read-only
	 * root is runtime_vm_ro.c's.  What differs still is refused where it
	 * is asked for (a pause or checkpoint with "memory":true). */
	switch (f) {
	case RUNTIME_FEATURE_NETWORK:
	case RUNTIME_FEATURE_CHECKPOINT:
	case RUNTIME_FEATURE_PAUSE:
	case RUNTIME_FEATURE_TERMINAL:
	case RUNTIME_FEATURE_ADOPT:
	case RUNTIME_FEATURE_READ_ONLY_ROOT:
	case RUNTIME_FEATURE_VNC_VIEWER:
		return 0;
	}
	return err_set(e, ERR_NOT_IMPLEMENTED, ENOTSUP,
		       "isolation 'vm': this operation is not implemented for VM sandboxes "
		       "(docs/isolation.md)");
}

static int vm_exec_spawn(struct runtime *rt, const char *id, const struct runtime_exec *x,
			 pid_t *client_pid, struct err *e)
{
	return runtime_vm_exec(rt, id, x, client_pid, e);
}

const struct runtime_backend runtime_vm_backend = {
    .isolation = RUNTIME_ISOLATION_VM,
    .start = vm_start,
    .kill = vm_kill,
    .remove = vm_remove,
    .state = vm_state,
    .update = runtime_vm_update,
    .exec_spawn = vm_exec_spawn,
    .connect_inside = vm_connect_inside,
    .feature = vm_feature,
    .ready_timeout_ms = 240000,
    .guest_pids = 1,
    .adopted_paths = vm_adopted_paths,
    .quiesce = runtime_vm_quiesce,
    /* QEMU needs nothing of deskboxd once it runs (it ignores SIGPIPE, so
     * a console line to a log pipe without a reader is only lost). */
    .adopt_after_kill = 1,
    .exec_pty = 1,
    .viewer_ports = RUNTIME_VM_VIEWER_PORTS,
};
