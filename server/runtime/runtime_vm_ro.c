/* runtime_vm_ro: a VM's read-only root ("read_only_root": true), the view
 * a container gets (server/sandbox/sandbox_readonly.c).  The bundle's
 * root says "readonly" and its writable places are binds of the root's
 * own directories (<rootfs>/workspace on /workspace, ...).  QEMU exports
 * the root share read-only (readonly=on: every write through it is
 * EROFS, whatever the guest's kernel is told, so its root cannot mount
 * it writable again) and each writable place as a share of its own,
 * which the guest's init mounts over the root (deskbox_rw=, in order:
 * tags rw0, rw1, ...).  The init mounts the root itself read-only too,
 * so that a write fails with EROFS before any permission check, as in a
 * container (the export alone gives the image's user EACCES first).  What is written there lands in the same overlay,
 * as in a container. */
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* A writable place's path: absolute, plain characters only (it goes on
 * the guest's kernel command line), no "..". */
static int place_ok(const char *d)
{
	if (d[0] != '/' || strlen(d) >= 64 || strstr(d, ".."))
		return 0;
	for (const char *p = d; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("/_.-", *p)))
			return 0;
	return 1;
}

void runtime_vm_ro_read(const cJSON *config, const char *rootfs, struct runtime_vm_ro *ro)
{
	const cJSON *root = cJSON_GetObjectItem(config, "root");
	ro->on = cJSON_IsTrue(cJSON_GetObjectItem(root, "readonly"));
	ro->n = 0;
	if (!ro->on)
		return;
	size_t rl = strlen(rootfs);
	const cJSON *m;
	cJSON_ArrayForEach(m, cJSON_GetObjectItem(config, "mounts"))
	{
		const char *d = cJSON_GetStringValue(cJSON_GetObjectItem(m, "destination"));
		const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(m, "source"));
		/* Only the root's own directories: /usr, the run dir and the
		 * resolver have shares of their own. */
		if (!d || !s || ro->n >= RUNTIME_VM_RW_MAX || strncmp(s, rootfs, rl) != 0 ||
		    strcmp(s + rl, d) != 0 || !place_ok(d) || !strncmp(d, "/usr", 4))
			continue;
		snprintf(ro->dest[ro->n], sizeof(ro->dest[ro->n]), "%s", d);
		ro->fds[ro->n++] = -1;
	}
}

int runtime_vm_ro_open(const char *rootfs, struct runtime_vm_ro *ro, struct err *e)
{
	for (int i = 0; i < ro->n; i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s%s", rootfs, ro->dest[i]);
		ro->fds[i] = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (ro->fds[i] < 0)
			return err_sys(e, ERR_INTERNAL, errno, "VM: opening the writable place '%s'",
				       p);
	}
	return 0;
}

void runtime_vm_ro_close(struct runtime_vm_ro *ro)
{
	for (int i = 0; i < ro->n; i++)
		if (ro->fds[i] >= 0)
			close(ro->fds[i]), ro->fds[i] = -1;
}

void runtime_vm_ro_cmdline(const struct runtime_vm_ro *ro, char *out, size_t size)
{
	out[0] = '\0';
	if (!ro->on)
		return;
	size_t n = (size_t)snprintf(out, size, " deskbox_ro=1 deskbox_rw=");
	for (int i = 0; i < ro->n && n < size; i++)
		n += (size_t)snprintf(out + n, size - n, "%s%s", i ? "," : "", ro->dest[i]);
}
