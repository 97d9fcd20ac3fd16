/* The bridge's confinement: unprivileged, no_new_privs, seccomp allowlist. */
#include <errno.h>
#include <grp.h>
#include <seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "bridge.h"

/* What the main loop needs once connected: libvncclient reads and writes the
 * socket (read/write, select/poll while waiting), decoders allocate (brk,
 * mmap, munmap, mremap, madvise), the mirror wakes deskboxd (futex), time
 * stamps (clock_gettime, usually in the vDSO), and exiting.  Found with
 * strace -f on tests/unit/test_capture.c's typing, drawing and resizing. */
static const int allowed[] = {
    SCMP_SYS(read),
    SCMP_SYS(readv),
    SCMP_SYS(write),
    SCMP_SYS(writev),
    SCMP_SYS(recvfrom),
    SCMP_SYS(recvmsg),
    SCMP_SYS(sendto),
    SCMP_SYS(sendmsg),
    SCMP_SYS(poll),
    SCMP_SYS(ppoll),
    SCMP_SYS(select),
    SCMP_SYS(pselect6),
    SCMP_SYS(futex),
    SCMP_SYS(mmap),
    SCMP_SYS(munmap),
    SCMP_SYS(mremap),
    SCMP_SYS(brk),
    SCMP_SYS(madvise),
    SCMP_SYS(clock_gettime),
    SCMP_SYS(gettimeofday),
    SCMP_SYS(clock_nanosleep),
    SCMP_SYS(nanosleep),
    SCMP_SYS(close),
    SCMP_SYS(exit),
    SCMP_SYS(exit_group),
    SCMP_SYS(rt_sigreturn),
    SCMP_SYS(rt_sigprocmask),
    SCMP_SYS(restart_syscall),
#ifdef DBX_SANITIZE
    /* ASan tears down its alternate signal stack at exit and CHECK-fails
     * (aborting the bridge) when sigaltstack is refused. */
    SCMP_SYS(sigaltstack),
    SCMP_SYS(rt_sigaction),
    SCMP_SYS(getpid),
    SCMP_SYS(gettid),
    SCMP_SYS(sched_yield),
#endif
};

int bridge_sandbox(void)
{
	if (geteuid() == 0 || getegid() == 0) {
		/* 65534 is nobody/nogroup on Debian; the bridge owns no files. */
		if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0)
			return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
#ifdef DBX_SANITIZE
	/* Sanitizer runtimes open /proc/self/maps, spawn a symbolizer and
	 * stop the world with ptrace when they report; denying with EPERM
	 * instead of killing keeps the allowlist tested while their reports
	 * still come out (degraded) in the sanitizer build. */
	uint32_t deflt = SCMP_ACT_ERRNO(EPERM);
#else
	uint32_t deflt = SCMP_ACT_KILL_PROCESS;
#endif
	scmp_filter_ctx ctx = seccomp_init(deflt);
	if (!ctx)
		return -1;
	int r = 0;
	for (size_t i = 0; r == 0 && i < sizeof(allowed) / sizeof(allowed[0]); i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r == 0 ? 0 : -1;
}
