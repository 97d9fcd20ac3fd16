/* The OCI bundle of one sandbox: <bundle_dir>/config.json.
 *
 * Mounts, masked and read-only paths follow runc's default spec (what
 * Docker uses); the seccomp profile is in runtime_seccomp.c. */
#include "runtime.h"
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "common/cleanup.h"
#include "common/fs.h"

/* What a process may open; a sandbox runs browsers and language servers,
 * so the hard limit is generous, the soft one the usual. */
#define NOFILE_SOFT 1024
#define NOFILE_HARD 65536

static const char *const masked_paths[] = {
    "/proc/asound",	 "/proc/acpi",		"/proc/interrupts", "/proc/kcore",
    "/proc/keys",	 "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
    "/proc/sched_debug", "/proc/scsi",		"/sys/firmware",    "/sys/devices/virtual/powercap",
};

static const char *const readonly_paths[] = {
    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

static void cleanup_json(cJSON **j)
{
	cJSON_Delete(*j);
}
#define _cleanup_json_ __attribute__((cleanup(cleanup_json)))

static void cleanup_json_str(char **s)
{
	if (*s)
		cJSON_free(*s);
}

/* A NULL-terminated string list as a JSON array. */
static cJSON *str_list(const char *const *v)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a && v && v[i]; i++) {
		cJSON *s = cJSON_CreateString(v[i]);
		if (!s) {
			cJSON_Delete(a);
			return NULL;
		}
		cJSON_AddItemToArray(a, s);
	}
	return a;
}

static cJSON *add_mount(cJSON *mounts, const char *dst, const char *type, const char *src,
			const char *const *options)
{
	cJSON *m = cJSON_CreateObject();
	if (!m)
		return NULL;
	cJSON_AddItemToArray(mounts, m);
	if (!cJSON_AddStringToObject(m, "destination", dst) ||
	    !cJSON_AddStringToObject(m, "type", type) ||
	    !cJSON_AddStringToObject(m, "source", src) ||
	    !cJSON_AddItemToObject(m, "options", str_list(options)))
		return NULL;
	return m;
}

static int build_mounts(cJSON *root, const struct runtime_spec *s)
{
	cJSON *mounts = cJSON_AddArrayToObject(root, "mounts");
	if (!mounts)
		return -1;
	static const struct {
		const char *dst, *type, *src;
		const char *opts[8];
	} std[] = {
	    {"/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}},
	    {"/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}},
	    {"/dev/pts",
	     "devpts",
	     "devpts",
	     {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
	    {"/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
	    {"/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}},
	    {"/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}},
	    {"/sys/fs/cgroup", "cgroup", "cgroup", {"nosuid", "noexec", "nodev", "relatime", "ro"}},
	    /* /tmp is not a tmpfs: it is part of the persistent overlay,
	     * so the whole filesystem survives stop and start.  /run stays
	     * a tmpfs (its pages are charged to the sandbox's memory
	     * cgroup): pid files and sockets must not outlive a run. */
	    {"/run", "tmpfs", "tmpfs", {"nosuid", "nodev", "mode=755"}},
	};
	for (size_t i = 0; i < sizeof(std) / sizeof(std[0]); i++)
		if (!add_mount(mounts, std[i].dst, std[i].type, std[i].src, std[i].opts))
			return -1;
	for (size_t i = 0; i < s->n_mounts; i++) {
		const struct runtime_mount *m = &s->mounts[i];
		const char *rw[] = {"rbind", "rprivate", "nosuid", "nodev", NULL};
		const char *ro[] = {"rbind", "rprivate", "nosuid", "nodev", "ro", NULL};
		if (!add_mount(mounts, m->destination, "bind", m->source, m->read_only ? ro : rw))
			return -1;
	}
	return 0;
}

static int build_process(cJSON *root, const struct runtime_spec *s)
{
	cJSON *p = cJSON_AddObjectToObject(root, "process");
	if (!p || !cJSON_AddFalseToObject(p, "terminal"))
		return -1;
	cJSON *u = cJSON_AddObjectToObject(p, "user");
	if (!u || !cJSON_AddNumberToObject(u, "uid", s->uid) ||
	    !cJSON_AddNumberToObject(u, "gid", s->gid))
		return -1;
	if (!cJSON_AddItemToObject(p, "args", str_list(s->argv)) ||
	    !cJSON_AddItemToObject(p, "env", str_list(s->env)) ||
	    !cJSON_AddStringToObject(p, "cwd", s->cwd ? s->cwd : "/"))
		return -1;
	cJSON *caps = cJSON_AddObjectToObject(p, "capabilities");
	/* Inheritable and ambient stay empty: nothing the init starts inherits
	 * a capability through exec. */
	static const char *const sets[] = {"bounding", "effective", "permitted", "inheritable",
					   "ambient"};
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
		if (!caps ||
		    !cJSON_AddItemToObject(caps, sets[i], str_list(i < 3 ? s->caps : NULL)))
			return -1;
	cJSON *rl = cJSON_AddArrayToObject(p, "rlimits");
	cJSON *nofile = cJSON_CreateObject();
	if (!rl || !nofile)
		return cJSON_Delete(nofile), -1;
	cJSON_AddItemToArray(rl, nofile);
	/* crun sets rlimits without CAP_SYS_RESOURCE: never above ours. */
	struct rlimit cur;
	double hard = NOFILE_HARD, soft = NOFILE_SOFT;
	if (getrlimit(RLIMIT_NOFILE, &cur) == 0 && cur.rlim_max != RLIM_INFINITY &&
	    (double)cur.rlim_max < hard)
		hard = (double)cur.rlim_max;
	if (soft > hard)
		soft = hard;
	if (!cJSON_AddStringToObject(nofile, "type", "RLIMIT_NOFILE") ||
	    !cJSON_AddNumberToObject(nofile, "soft", soft) ||
	    !cJSON_AddNumberToObject(nofile, "hard", hard))
		return -1;
	if (!cJSON_AddTrueToObject(p, "noNewPrivileges"))
		return -1;
	return 0;
}

static int build_resources(cJSON *lx, const struct runtime_spec *s)
{
	cJSON *r = cJSON_AddObjectToObject(lx, "resources");
	if (!r)
		return -1;
	/* Deny every device; crun adds allow rules for the default ones. */
	cJSON *devs = cJSON_AddArrayToObject(r, "devices");
	cJSON *deny = cJSON_CreateObject();
	if (!devs || !deny)
		return cJSON_Delete(deny), -1;
	cJSON_AddItemToArray(devs, deny);
	if (!cJSON_AddFalseToObject(deny, "allow") ||
	    !cJSON_AddStringToObject(deny, "access", "rwm"))
		return -1;
	if (s->memory_bytes) {
		cJSON *m = cJSON_AddObjectToObject(r, "memory");
		/* swap == limit: memory+swap may not exceed the limit either. */
		if (!m || !cJSON_AddNumberToObject(m, "limit", (double)s->memory_bytes) ||
		    !cJSON_AddNumberToObject(m, "swap", (double)s->memory_bytes))
			return -1;
	}
	if (s->pids_max > 0) {
		cJSON *pd = cJSON_AddObjectToObject(r, "pids");
		if (!pd || !cJSON_AddNumberToObject(pd, "limit", (double)s->pids_max))
			return -1;
	}
	if (s->cpu_millis) {
		cJSON *c = cJSON_AddObjectToObject(r, "cpu");
		double quota = (double)s->cpu_millis * (RUNTIME_CPU_PERIOD_US / 1000);
		if (!c || !cJSON_AddNumberToObject(c, "quota", quota) ||
		    !cJSON_AddNumberToObject(c, "period", RUNTIME_CPU_PERIOD_US))
			return -1;
	}
	return 0;
}

/* One {"containerID","hostID","size"} mapping. */
static int add_mapping(cJSON *lx, const char *name, uint32_t host_base)
{
	cJSON *a = cJSON_AddArrayToObject(lx, name);
	cJSON *m = cJSON_CreateObject();
	if (!a || !m)
		return cJSON_Delete(m), -1;
	cJSON_AddItemToArray(a, m);
	if (!cJSON_AddNumberToObject(m, "containerID", 0) ||
	    !cJSON_AddNumberToObject(m, "hostID", host_base) ||
	    !cJSON_AddNumberToObject(m, "size", RUNTIME_USERNS_SIZE))
		return -1;
	return 0;
}

/* A user namespace of its own: container ids 0..65535 are host ids
 * host_base.., which nothing else on the host uses, so no process of the
 * sandbox shares a uid (and its per-uid kernel limits, signals, ptrace)
 * with the host or another sandbox. */
static int build_userns(cJSON *lx, cJSON *ns, const struct runtime_spec *s)
{
	cJSON *n = cJSON_CreateObject();
	if (!n)
		return -1;
	cJSON_AddItemToArray(ns, n);
	if (!cJSON_AddStringToObject(n, "type", "user") ||
	    (s->userns_path && !cJSON_AddStringToObject(n, "path", s->userns_path)))
		return -1;
	return add_mapping(lx, "uidMappings", s->userns_host_base) ||
	       add_mapping(lx, "gidMappings", s->userns_host_base);
}

static int build_linux(cJSON *root, const struct runtime_spec *s)
{
	cJSON *lx = cJSON_AddObjectToObject(root, "linux");
	if (!lx)
		return -1;
	cJSON *ns = cJSON_AddArrayToObject(lx, "namespaces");
	static const char *const types[] = {"pid", "mount", "ipc", "uts", "network", "cgroup"};
	for (size_t i = 0; ns && i < sizeof(types) / sizeof(types[0]); i++) {
		cJSON *n = cJSON_CreateObject();
		if (!n)
			return -1;
		cJSON_AddItemToArray(ns, n);
		if (!cJSON_AddStringToObject(n, "type", types[i]))
			return -1;
	}
	if (!ns || build_resources(lx, s) || (s->userns_host_base && build_userns(lx, ns, s)))
		return -1;
	/* cgroupfs manager: an absolute path below each v1 hierarchy's root
	 * (or below the v2 root), e.g. /deskbox/<id>. */
	char cg[PATH_MAX];
	const char *parent = s->cgroup_parent ? s->cgroup_parent : "deskbox";
	while (*parent == '/')
		parent++;
	snprintf(cg, sizeof(cg), "/%s/%s", parent, s->id);
	if (!cJSON_AddStringToObject(lx, "cgroupsPath", cg))
		return -1;
	cJSON *masked = cJSON_CreateStringArray(
	    masked_paths, (int)(sizeof(masked_paths) / sizeof(masked_paths[0])));
	if (!cJSON_AddItemToObject(lx, "maskedPaths", masked))
		return cJSON_Delete(masked), -1;
	cJSON *ro = cJSON_CreateStringArray(
	    readonly_paths, (int)(sizeof(readonly_paths) / sizeof(readonly_paths[0])));
	if (!cJSON_AddItemToObject(lx, "readonlyPaths", ro))
		return cJSON_Delete(ro), -1;
	cJSON *sec = runtime_seccomp_json(s->allow_chroot);
	if (!cJSON_AddItemToObject(lx, "seccomp", sec))
		return cJSON_Delete(sec), -1;
	return 0;
}

static int valid_id(const char *id)
{
	if (!id || !*id || strlen(id) > 64)
		return 0;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
			return 0;
	return 1;
}

int runtime_write_bundle(const struct runtime_spec *s, struct err *e)
{
	if (!valid_id(s->id))
		return err_set(e, ERR_INVALID, EINVAL, "invalid container id '%s'",
			       s->id ? s->id : "");
	if (!s->bundle_dir || !s->rootfs || s->rootfs[0] != '/' || !s->argv || !s->argv[0])
		return err_set(e, ERR_INVALID, EINVAL, "incomplete bundle spec for '%s'", s->id);
	for (size_t i = 0; i < s->n_mounts; i++)
		if (!s->mounts[i].source || !s->mounts[i].destination ||
		    s->mounts[i].destination[0] != '/')
			return err_set(e, ERR_INVALID, EINVAL, "invalid mount %zu for '%s'", i,
				       s->id);
	if (s->userns_host_base && s->userns_host_base > UINT32_MAX - RUNTIME_USERNS_SIZE)
		return err_set(e, ERR_INVALID, EINVAL, "invalid uid range for '%s'", s->id);

	_cleanup_json_ cJSON *root = cJSON_CreateObject();
	int bad = !root || !cJSON_AddStringToObject(root, "ociVersion", "1.0.2");
	cJSON *rootfs = bad ? NULL : cJSON_AddObjectToObject(root, "root");
	bad = bad || !rootfs || !cJSON_AddStringToObject(rootfs, "path", s->rootfs) ||
	      !cJSON_AddBoolToObject(rootfs, "readonly", s->read_only_root) ||
	      !cJSON_AddStringToObject(root, "hostname", s->hostname ? s->hostname : s->id) ||
	      build_process(root, s) || build_mounts(root, s) || build_linux(root, s);
	if (bad)
		return err_set(e, ERR_INTERNAL, ENOMEM, "building config.json for '%s'", s->id);
	__attribute__((cleanup(cleanup_json_str))) char *text = cJSON_Print(root);
	if (!text)
		return err_set(e, ERR_INTERNAL, ENOMEM, "printing config.json for '%s'", s->id);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/config.json", s->bundle_dir);
	if (fs_write_atomic(path, text, strlen(text), 0644, e) < 0)
		return err_wrap(e, "writing bundle of '%s'", s->id);
	return 0;
}
