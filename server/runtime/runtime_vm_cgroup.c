/* runtime_vm_cgroup: a VM's cgroup (/deskbox/<id> under each v1
 * controller, or the one v2 hierarchy), as a container's: QEMU joins it
 * before it runs, its limits are the guest's memory plus QEMU's overhead,
 * the guest's CPU quota, and a pids limit for QEMU's threads. */
#include "runtime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "internal.h"

#define VM_OVERHEAD_MB 384 /* QEMU and TCG's translation cache, in the cgroup's limit */

static const char *const cg_ctrls[] = {"memory", "pids", "cpu", "freezer"};
#define N_CG RUNTIME_VM_CG_N
_Static_assert(sizeof(cg_ctrls) / sizeof(*cg_ctrls) == N_CG, "one procs file a controller");

static void cg_path(struct runtime *rt, const char *ctrl, const char *id, const char *file,
		    char *out, size_t size)
{
	if (runtime_cgroup_mode(rt) == RUNTIME_CGROUP_V2)
		snprintf(out, size, "/sys/fs/cgroup/deskbox/%s%s%s", id, file ? "/" : "",
			 file ? file : "");
	else
		snprintf(out, size, "/sys/fs/cgroup/%s/deskbox/%s%s%s", ctrl, id, file ? "/" : "",
			 file ? file : "");
}

static void cg_write(const char *path, long long v)
{
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%lld", v);
	if (fd >= 0 && write(fd, buf, (size_t)n) < 0) {
		/* a limit the kernel refuses is left out */
	}
}

/* The VM's cgroup (its limits: the guest's memory plus QEMU's overhead);
 * the cgroup.procs files the child joins go to `procs`. */
int runtime_vm_cg_make(struct runtime *rt, const char *id, const struct runtime_vm_cg *v,
		       char procs[N_CG][PATH_MAX], struct err *e)
{
	int v2 = runtime_cgroup_mode(rt) == RUNTIME_CGROUP_V2;
	char p[PATH_MAX];
	for (size_t i = 0; i < (v2 ? 1 : N_CG); i++) {
		cg_path(rt, cg_ctrls[i], id, NULL, p, sizeof(p));
		if (fs_mkdir_p(p, 0755, e) < 0)
			return err_code(e);
		cg_path(rt, cg_ctrls[i], id, "cgroup.procs", procs[i], PATH_MAX);
	}
	long long mem = (long long)(v->mem_mb + VM_OVERHEAD_MB) << 20;
	cg_path(rt, "memory", id, v2 ? "memory.max" : "memory.limit_in_bytes", p, sizeof(p));
	cg_write(p, mem);
	if (v->pids_max > 0) {
		cg_path(rt, "pids", id, "pids.max", p, sizeof(p));
		cg_write(p, 64 + v->pids_max / 16);
	}
	if (v->cpu_quota > 0 && !v2) {
		cg_path(rt, "cpu", id, "cpu.cfs_period_us", p, sizeof(p));
		cg_write(p, v->cpu_period > 0 ? v->cpu_period : RUNTIME_CPU_PERIOD_US);
		cg_path(rt, "cpu", id, "cpu.cfs_quota_us", p, sizeof(p));
		cg_write(p, v->cpu_quota);
	}
	return 0;
}

/* The VM's cgroups, with what runs left under them (the process layer's
 * run-* cgroups of exec clients that were killed with the VM). */
void runtime_vm_cg_remove(struct runtime *rt, const char *id)
{
	int v2 = runtime_cgroup_mode(rt) == RUNTIME_CGROUP_V2;
	char p[PATH_MAX], sub[PATH_MAX];
	for (size_t i = 0; i < (v2 ? 1 : N_CG); i++) {
		cg_path(rt, cg_ctrls[i], id, NULL, p, sizeof(p));
		for (int k = 0; k < 50; k++) {
			DIR *d = opendir(p);
			struct dirent *de;
			while (d && (de = readdir(d)))
				if (de->d_type == DT_DIR && strncmp(de->d_name, "run-", 4) == 0) {
					snprintf(sub, sizeof(sub), "%s/%s", p, de->d_name);
					rmdir(sub);
				}
			if (d)
				closedir(d);
			if (rmdir(p) == 0 || errno != EBUSY)
				break;
			clock_sleep_ms(20); /* a killed client still leaving */
		}
	}
}
