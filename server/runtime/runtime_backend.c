/* runtime_backend: the isolation backends behind one ops struct (see
 * runtime.h): "container" (crun, runtime.c) and "vm" (KVM; refused with
 * the reason until it can run a desktop). */
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "internal.h"

static int crun_feature(enum runtime_feature f, struct err *e)
{
	return 0;
}

/* A container's init sees its root at /proc/<pid>/root, with the run
 * dir bind-mounted on it. */
static void crun_adopted_paths(pid_t pid, const char *rootfs, char *run, char *root, size_t size)
{
	snprintf(run, size, "/proc/%d/root/run/deskbox", (int)pid);
	snprintf(root, size, "/proc/%d/root", (int)pid);
}

static int crun_quiesce(struct runtime *rt, const char *id, int timeout_ms, struct err *e)
{
	return 0;
}

static const struct runtime_backend crun_backend = {
    .isolation = RUNTIME_ISOLATION_CONTAINER,
    .start = runtime_start,
    .kill = runtime_kill,
    .remove = runtime_delete,
    .state = runtime_state,
    .update = runtime_update,
    .exec_spawn = runtime_exec_spawn,
    .connect_inside = runtime_connect_inside,
    .feature = crun_feature,
    .ready_timeout_ms = 0,
    .guest_pids = 0,
    .adopted_paths = crun_adopted_paths,
    .quiesce = crun_quiesce,
    /* After a kill its log pipe has no reader: the desktop's next line
     * would end it, so only a detach leaves it to be taken over. */
    .adopt_after_kill = 0,
    .exec_pty = 0,
    .viewer_ports = 0,
};

static const char *const isolation_names[] = {
    [RUNTIME_ISOLATION_CONTAINER] = "container",
    [RUNTIME_ISOLATION_VM] = "vm",
};

const char *runtime_isolation_name(enum runtime_isolation iso)
{
	return iso == RUNTIME_ISOLATION_VM ? isolation_names[RUNTIME_ISOLATION_VM]
					   : isolation_names[RUNTIME_ISOLATION_CONTAINER];
}

int runtime_isolation_parse(const char *name, enum runtime_isolation *out)
{
	for (size_t i = RUNTIME_ISOLATION_CONTAINER; i <= RUNTIME_ISOLATION_VM; i++)
		if (name && strcmp(name, isolation_names[i]) == 0) {
			*out = (enum runtime_isolation)i;
			return 0;
		}
	return -EINVAL;
}

int runtime_kvm_probe(struct err *e)
{
	_cleanup_fd_ int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, ERR_NOT_IMPLEMENTED, errno,
			       "isolation 'vm' needs KVM, and this host has no usable /dev/kvm");
	int v = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (v != KVM_API_VERSION)
		return err_set(e, ERR_NOT_IMPLEMENTED, ENOTSUP,
			       "isolation 'vm' needs KVM API %d, /dev/kvm answers %d",
			       KVM_API_VERSION, v);
	return 0;
}

int runtime_backend_get(enum runtime_isolation iso, const struct runtime_backend **out,
			struct err *e)
{
	if (iso != RUNTIME_ISOLATION_VM) {
		*out = &crun_backend;
		return 0;
	}
	if (runtime_vm_usable(e) < 0)
		return err_code(e);
	*out = &runtime_vm_backend;
	return 0;
}

const struct runtime_backend *runtime_backend_container(void)
{
	return &crun_backend;
}
