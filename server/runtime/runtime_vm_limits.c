/* runtime_vm_limits: a VM's cgroup and its live limits (the "vm"
 * backend's update; docs/isolation.md).  QEMU runs in /deskbox/<id> in
 * every hierarchy, like a container's processes: its memory limit is the
 * guest's RAM plus QEMU's own overhead, its pids limit bounds QEMU's
 * threads, its CPU quota is the VM's share.  A PATCH changes them live:
 * cpu_millis and pids_max in the cgroup; memory_mb through the guest's
 * virtio balloon (runtime_vm_qmp.c), up to the RAM the VM booted with,
 * and then the cgroup's limit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "internal.h"

static const char *const cg_ctrls[] = {"memory", "pids", "cpu", "freezer"};

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

/* -errno when the kernel refuses the value (a memory limit below what the
 * cgroup uses, in v1). */
static int cg_write(const char *path, const char *v)
{
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return write(fd, v, strlen(v)) < 0 ? -errno : 0;
}

static int cg_set(struct runtime *rt, const char *ctrl, const char *id, const char *file,
		  long long v)
{
	char p[PATH_MAX], buf[32];
	cg_path(rt, ctrl, id, file, p, sizeof(p));
	snprintf(buf, sizeof(buf), "%lld", v);
	return cg_write(p, buf);
}

static int set_memory(struct runtime *rt, const char *id, uint64_t mem_mb)
{
	int v2 = runtime_cgroup_mode(rt) == RUNTIME_CGROUP_V2;
	long long bytes = (long long)(mem_mb + RUNTIME_VM_OVERHEAD_MB) << 20;
	return cg_set(rt, "memory", id, v2 ? "memory.max" : "memory.limit_in_bytes", bytes);
}

static void set_pids(struct runtime *rt, const char *id, int64_t pids_max)
{
	if (pids_max > 0)
		cg_set(rt, "pids", id, "pids.max", 64 + pids_max / 16);
}

/* quota <= 0: no limit. */
static void set_cpu(struct runtime *rt, const char *id, long quota, long period)
{
	if (period <= 0)
		period = RUNTIME_CPU_PERIOD_US;
	if (runtime_cgroup_mode(rt) == RUNTIME_CGROUP_V2) {
		char p[PATH_MAX], buf[64];
		cg_path(rt, "cpu", id, "cpu.max", p, sizeof(p));
		if (quota > 0)
			snprintf(buf, sizeof(buf), "%ld %ld", quota, period);
		else
			snprintf(buf, sizeof(buf), "max %ld", period);
		cg_write(p, buf);
		return;
	}
	cg_set(rt, "cpu", id, "cpu.cfs_period_us", period);
	cg_set(rt, "cpu", id, "cpu.cfs_quota_us", quota > 0 ? quota : -1);
}

int runtime_vm_cg_make(struct runtime *rt, const char *id, const struct runtime_vm_cg *l,
		       char procs[RUNTIME_VM_N_CG][PATH_MAX], struct err *e)
{
	int v2 = runtime_cgroup_mode(rt) == RUNTIME_CGROUP_V2;
	char p[PATH_MAX];
	for (size_t i = 0; i < (v2 ? 1 : RUNTIME_VM_N_CG); i++) {
		cg_path(rt, cg_ctrls[i], id, NULL, p, sizeof(p));
		if (fs_mkdir_p(p, 0755, e) < 0)
			return err_code(e);
		cg_path(rt, cg_ctrls[i], id, "cgroup.procs", procs[i], PATH_MAX);
	}
	/* A limit the kernel refuses is left out. */
	set_memory(rt, id, l->mem_mb);
	set_pids(rt, id, l->pids_max);
	if (l->cpu_quota > 0)
		set_cpu(rt, id, l->cpu_quota, l->cpu_period);
	return 0;
}

void runtime_vm_cg_remove(struct runtime *rt, const char *id)
{
	int v2 = runtime_cgroup_mode(rt) == RUNTIME_CGROUP_V2;
	char p[PATH_MAX], sub[PATH_MAX];
	for (size_t i = 0; i < (v2 ? 1 : RUNTIME_VM_N_CG); i++) {
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

static int frozen(struct runtime *rt, const char *id)
{
	char p[PATH_MAX], buf[16] = "";
	int v2 = runtime_cgroup_mode(rt) == RUNTIME_CGROUP_V2;
	cg_path(rt, "freezer", id, v2 ? "cgroup.freeze" : "freezer.state", p, sizeof(p));
	_cleanup_fd_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	return n > 0 && (buf[0] == '1' || strncmp(buf, "FROZEN", 6) == 0);
}

/* The guest's RAM to `mem_mb` (balloon), with the cgroup's limit raised
 * first or lowered after, so QEMU never holds more than it allows. */
static int update_memory(struct runtime *rt, const char *id, uint64_t mem_mb, struct err *e)
{
	char run[PATH_MAX];
	if (runtime_vm_run_dir(rt, id, run, sizeof(run)) < 0)
		return err_set(e, ERR_NOT_RUNNING, ESRCH, "the sandbox's VM is not running");
	if (frozen(rt, id))
		return err_set(e, ERR_CONFLICT, EBUSY,
			       "isolation 'vm': the memory of a paused VM changes only while it "
			       "runs (its balloon needs the guest): resume it first");
	uint64_t base_mb = 0, now_mb = 0;
	if (runtime_vm_qmp_memory(run, &base_mb, &now_mb, e) < 0)
		return err_code(e);
	if (mem_mb < RUNTIME_VM_MIN_MEM_MB)
		return err_set(e, ERR_CONFLICT, ERANGE,
			       "isolation 'vm': memory_mb %llu is less than the %d MiB a VM keeps "
			       "(its kernel and desktop)",
			       (unsigned long long)mem_mb, RUNTIME_VM_MIN_MEM_MB);
	if (mem_mb > base_mb)
		return err_set(e, ERR_CONFLICT, ERANGE,
			       "isolation 'vm': memory_mb %llu is more than the %llu MiB this VM "
			       "booted with; a VM's RAM grows back up to that, not past it (stop "
			       "it, change memory_mb, start it)",
			       (unsigned long long)mem_mb, (unsigned long long)base_mb);
	if (mem_mb > now_mb && set_memory(rt, id, mem_mb) < 0)
		return err_set(e, ERR_INTERNAL, EIO, "VM: raising its cgroup's memory limit");
	if (runtime_vm_qmp_balloon(run, mem_mb, RUNTIME_VM_BALLOON_MS, NULL, e) < 0)
		return err_code(e);
	/* Lowered at once, as a container's: refused (cgroup v1) while QEMU
	 * holds more, and then the balloon goes back. */
	if (mem_mb < now_mb && set_memory(rt, id, mem_mb) < 0) {
		runtime_vm_qmp_balloon(run, now_mb, 0, NULL, NULL);
		return err_set(e, ERR_CONFLICT, EBUSY,
			       "isolation 'vm': QEMU uses more than %llu MiB (the guest's RAM plus "
			       "%d MiB) now; its limit is unchanged",
			       (unsigned long long)mem_mb + RUNTIME_VM_OVERHEAD_MB,
			       RUNTIME_VM_OVERHEAD_MB);
	}
	return 0;
}

int runtime_vm_update(struct runtime *rt, const char *id, const struct runtime_limits *l,
		      struct err *e)
{
	if (l->memory_bytes && update_memory(rt, id, l->memory_bytes >> 20, e) < 0)
		return err_code(e);
	set_pids(rt, id, l->pids_max);
	if (l->cpu_millis == RUNTIME_CPU_UNLIMITED)
		set_cpu(rt, id, 0, RUNTIME_CPU_PERIOD_US);
	else if (l->cpu_millis)
		set_cpu(rt, id, (long)l->cpu_millis * (RUNTIME_CPU_PERIOD_US / 1000),
			RUNTIME_CPU_PERIOD_US);
	return 0;
}
