/* The bridge's confinement: unprivileged, not dumpable, no_new_privs,
 * seccomp allowlist; in place before the first byte from the VNC server. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <seccomp.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <linux/sockios.h>
#include <unistd.h>

#include "bridge.h"

/* nobody and nogroup on Debian. */
#define BRIDGE_ID 65534

/* What the handshake and the main loop need: libvncclient reads and writes
 * the socket (read/write, select/poll while waiting), allocates (brk, mmap,
 * munmap, mremap, madvise), the mirror wakes deskboxd (futex), time stamps
 * (clock_gettime, usually in the vDSO), and exiting; fcntl (F_GETFL and
 * F_SETFL only) makes the socket non-blocking after the handshake, ioctl
 * (SIOCOUTQ only) tells how much input the server has read.  Found
 * with strace -f on tests/unit/test_capture.c's typing, drawing and
 * resizing; tests/unit/test_capture_confine.c runs handshakes, accepted
 * and refused, under the filter, where any other call kills the bridge. */
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
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return -1;
	if (!ru || !eu || !su || !rg || !eg || !sg) {
		/* The bridge owns no files, so nobody suits it.
		 * Groups first: root's supplementary groups would survive the
		 * uid change, and setgroups needs the privilege being dropped. */
		if (setgroups(0, NULL) < 0 || setresgid(BRIDGE_ID, BRIDGE_ID, BRIDGE_ID) < 0 ||
		    setresuid(BRIDGE_ID, BRIDGE_ID, BRIDGE_ID) < 0)
			return -1;
		/* SECURITY: a silent half-drop would leave a way back. */
		if (setresuid(0, 0, 0) == 0 || getuid() != BRIDGE_ID || getgid() != BRIDGE_ID)
			return -1;
	}
	/* Not dumpable: no other process of uid 65534 (another sandbox's
	 * bridge) may ptrace this one or read its memory through /proc. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
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
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1,
				     SCMP_A1(SCMP_CMP_EQ, F_GETFL));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1,
				     SCMP_A1(SCMP_CMP_EQ, F_SETFL));
	/* SIOCOUTQ: how much of the input the VNC server has read (the
	 * progress notes, capture/internal.h). */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_EQ, SIOCOUTQ));
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r == 0 ? 0 : -1;
}
