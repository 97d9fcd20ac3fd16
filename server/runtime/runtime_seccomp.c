/* The seccomp profile of every sandbox.
 *
 * It follows Docker's default profile (moby profiles/seccomp/default.json)
 * for a container without capabilities: an allowlist, every other syscall
 * fails with EPERM.  Left out on purpose: mount, umount2, pivot_root,
 * chroot (but see allow_chroot), unshare, setns, kexec_*, *_module, bpf, perf_event_open, keyctl,
 * add_key, request_key, open_by_handle_at, userfaultfd, fanotify_init,
 * io_uring_* (a steady source of kernel bugs; Docker dropped it in 2023),
 * acct, quotactl, swapon/off, reboot, settimeofday, clock_settime, lookup_dcookie,
 * nfsservctl, vm86, uselib, ustat, sysfs, _sysctl, kcmp, pidfd_getfd.
 * ptrace, process_vm_readv and process_vm_writev are allowed as Docker does
 * on kernels >= 4.8 (where ptrace can no longer bypass seccomp).
 */
#include "internal.h"

#include <stddef.h>

static const char *const allowed[] = {
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "bind",
    "brk",
    "cachestat",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "chown32",
    "clock_adjtime",
    "clock_adjtime64",
    "clock_getres",
    "clock_getres_time64",
    "clock_gettime",
    "clock_gettime64",
    "clock_nanosleep",
    "clock_nanosleep_time64",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_ctl_old",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "epoll_wait_old",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fadvise64_64",
    "fallocate",
    "fanotify_mark",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchown32",
    "fchownat",
    "fcntl",
    "fcntl64",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstat64",
    "fstatat64",
    "fstatfs",
    "fstatfs64",
    "fsync",
    "ftruncate",
    "ftruncate64",
    "futex",
    "futex_requeue",
    "futex_time64",
    "futex_wait",
    "futex_waitv",
    "futex_wake",
    "futimesat",
    "get_mempolicy",
    "get_robust_list",
    "get_thread_area",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "getegid32",
    "geteuid",
    "geteuid32",
    "getgid",
    "getgid32",
    "getgroups",
    "getgroups32",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresgid32",
    "getresuid",
    "getresuid32",
    "getrlimit",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "gettid",
    "gettimeofday",
    "getuid",
    "getuid32",
    "getxattr",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_pgetevents_time64",
    "io_setup",
    "io_submit",
    "ioctl",
    "ioprio_get",
    "ioprio_set",
    "ipc",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lchown32",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listxattr",
    "llistxattr",
    "_llseek",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "lstat64",
    "madvise",
    "map_shadow_stack",
    "mbind",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mmap2",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedreceive_time64",
    "mq_timedsend",
    "mq_timedsend_time64",
    "mq_unlink",
    "mremap",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "name_to_handle_at",
    "nanosleep",
    "newfstatat",
    "_newselect",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "ppoll_time64",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "process_vm_readv",
    "process_vm_writev",
    "pselect6",
    "pselect6_time64",
    "ptrace",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recv",
    "recvfrom",
    "recvmmsg",
    "recvmmsg_time64",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_sigtimedwait_time64",
    "rt_tgsigqueueinfo",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_rr_get_interval_time64",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "semtimedop_time64",
    "send",
    "sendfile",
    "sendfile64",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "set_mempolicy",
    "set_robust_list",
    "set_thread_area",
    "set_tid_address",
    "setfsgid",
    "setfsgid32",
    "setfsuid",
    "setfsuid32",
    "setgid",
    "setgid32",
    "setgroups",
    "setgroups32",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setregid32",
    "setresgid",
    "setresgid32",
    "setresuid",
    "setresuid32",
    "setreuid",
    "setreuid32",
    "setrlimit",
    "setsid",
    "setsockopt",
    "setuid",
    "setuid32",
    "setxattr",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "sigprocmask",
    "sigreturn",
    "socketcall",
    "socketpair",
    "splice",
    "stat",
    "stat64",
    "statfs",
    "statfs64",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_gettime64",
    "timer_settime",
    "timer_settime64",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_gettime64",
    "timerfd_settime",
    "timerfd_settime64",
    "times",
    "tkill",
    "truncate",
    "truncate64",
    "ugetrlimit",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "utime",
    "utimensat",
    "utimensat_time64",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "waitpid",
    "write",
    "writev",
#if defined(__x86_64__) || defined(__i386__)
    "arch_prctl",
    "modify_ldt",
#endif
#if defined(__aarch64__) || defined(__arm__)
    "arm_fadvise64_64",
    "arm_sync_file_range",
    "breakpoint",
    "cacheflush",
    "set_tls",
    "sync_file_range2",
#endif
};

/* personality(2) values Docker allows: PER_LINUX, PER_LINUX32, UNAME26,
 * UNAME26|PER_LINUX32 and the query 0xffffffff. */
static const double personalities[] = {0, 8, 131072, 131080, 4294967295.0};

/* clone(2) without any of CLONE_NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID,
 * NEWNET, NEWCGROUP (flags & 0x7E020000 == 0). */
#define CLONE_NS_MASK 2114060288.0

#define ENOSYS_NUM 38

/* The socket families allowed: AF_UNIX (X11, D-Bus), AF_INET and AF_INET6
 * (loopback, and the network when a sandbox gets one), AF_NETLINK
 * (getaddrinfo's interface list, udev). */
static const double socket_families[] = {1, 2, 10, 16};

static cJSON *rule(const char *const *names, size_t n, const char *action)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *a = cJSON_CreateStringArray(names, (int)n);
	if (!r || !a || !cJSON_AddItemToObject(r, "names", a) ||
	    !cJSON_AddStringToObject(r, "action", action)) {
		cJSON_Delete(r);
		return NULL;
	}
	return r;
}

/* One argument comparison: {"index":i,"value":v,"valueTwo":0,"op":op}. */
static int add_arg(cJSON *r, int index, double value, const char *op)
{
	cJSON *args = cJSON_GetObjectItem(r, "args");
	if (!args && !(args = cJSON_AddArrayToObject(r, "args")))
		return -1;
	cJSON *c = cJSON_CreateObject();
	if (!c || !cJSON_AddNumberToObject(c, "index", index) ||
	    !cJSON_AddNumberToObject(c, "value", value) ||
	    !cJSON_AddNumberToObject(c, "valueTwo", 0) || !cJSON_AddStringToObject(c, "op", op)) {
		cJSON_Delete(c);
		return -1;
	}
	cJSON_AddItemToArray(args, c);
	return 0;
}

/* Appends `r` to `rules` when `ok`, else frees it.  Takes ownership. */
static int push(cJSON *rules, cJSON *r, int ok)
{
	if (!r || !ok) {
		cJSON_Delete(r);
		return -1;
	}
	cJSON_AddItemToArray(rules, r);
	return 0;
}

cJSON *runtime_seccomp_json(int allow_chroot)
{
	cJSON *s = cJSON_CreateObject();
	if (!s || !cJSON_AddStringToObject(s, "defaultAction", "SCMP_ACT_ERRNO") ||
	    !cJSON_AddNumberToObject(s, "defaultErrnoRet", 1))
		goto fail;
	/* The native table only: the 32-bit (int 0x80) and x32 entry points
	 * have syscall numbers and argument layouts of their own, which the
	 * rules below were not written for; libseccomp kills a caller that
	 * uses any other table. */
#if defined(__x86_64__)
	static const char *const arches[] = {"SCMP_ARCH_X86_64"};
#elif defined(__aarch64__)
	static const char *const arches[] = {"SCMP_ARCH_AARCH64"};
#else
#error "add this architecture's SCMP_ARCH_* names"
#endif
	cJSON *a = cJSON_CreateStringArray(arches, (int)(sizeof(arches) / sizeof(arches[0])));
	if (!a || !cJSON_AddItemToObject(s, "architectures", a))
		goto fail;
	cJSON *rules = cJSON_AddArrayToObject(s, "syscalls");
	if (!rules)
		goto fail;
	cJSON *r = rule(allowed, sizeof(allowed) / sizeof(allowed[0]), "SCMP_ACT_ALLOW");
	if (push(rules, r, 1))
		goto fail;

	/* Only for a sandbox whose init chroots the host's desktop parts
	 * (docs/images.md): the call still needs CAP_SYS_CHROOT, which no
	 * program but that init holds (Docker allows it on the same terms). */
	static const char *const chroot_call[] = {"chroot"};
	r = allow_chroot ? rule(chroot_call, 1, "SCMP_ACT_ALLOW") : NULL;
	if (allow_chroot && push(rules, r, 1))
		goto fail;
	static const char *const clone[] = {"clone"};
	r = rule(clone, 1, "SCMP_ACT_ALLOW");
	if (push(rules, r, add_arg(r, 0, CLONE_NS_MASK, "SCMP_CMP_MASKED_EQ") == 0))
		goto fail;
	/* clone3 passes its flags in memory seccomp cannot read: make glibc
	 * fall back to clone by answering ENOSYS (EPERM would be final). */
	static const char *const clone3[] = {"clone3"};
	r = rule(clone3, 1, "SCMP_ACT_ERRNO");
	if (push(rules, r, r && cJSON_AddNumberToObject(r, "errnoRet", ENOSYS_NUM) != NULL))
		goto fail;
	static const char *const personality[] = {"personality"};
	for (size_t i = 0; i < sizeof(personalities) / sizeof(personalities[0]); i++) {
		r = rule(personality, 1, "SCMP_ACT_ALLOW");
		if (push(rules, r, add_arg(r, 0, personalities[i], "SCMP_CMP_EQ") == 0))
			goto fail;
	}
	/* socket(2) for the families a desktop uses; any other family fails
	 * with the default EPERM, as Docker does for AF_VSOCK.  Each is a
	 * kernel surface of its own (AF_ALG, AF_TIPC, AF_RDS, AF_CAN... are
	 * open to an unprivileged user and a recurring source of bugs), and
	 * vsock is not isolated by network namespaces at all.  SECURITY:
	 * equality on the whole 64-bit argument: the kernel truncates the
	 * family to an int, so a "not equal" rule would let 0x1_0000_0028
	 * through as AF_VSOCK. */
	static const char *const sock[] = {"socket"};
	for (size_t i = 0; i < sizeof(socket_families) / sizeof(socket_families[0]); i++) {
		r = rule(sock, 1, "SCMP_ACT_ALLOW");
		if (push(rules, r, add_arg(r, 0, socket_families[i], "SCMP_CMP_EQ") == 0))
			goto fail;
	}
	return s;

fail:
	cJSON_Delete(s);
	return NULL;
}
