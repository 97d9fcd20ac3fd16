#include "process_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"

#define CGROUP_ROOT "/sys/fs/cgroup"
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
/* How long a freeze or the last exits may take before we go on anyway. */
#define FREEZE_WAIT_MS 1000
#define EMPTY_WAIT_MS  5000
/* What a run's memory limit leaves the desktop: a quarter of the sandbox's
 * limit, at most this much (an idle desktop is ~40-100 MB). */
#define DESKTOP_RESERVE_MAX (256ull << 20)

static int write_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(text);
	ssize_t n = write(fd, text, len);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

/* Reads a small cgroup file into buf (NUL-terminated); -errno on failure. */
static ssize_t read_file(const char *dir, const char *name, char *buf, size_t size)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	while (len + 1 < size) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

/* The number after "key " in a "key value" per line file, or 0. */
static uint64_t keyed_value(const char *text, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = text; p && *p;) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoull(p + kl + 1, NULL, 10);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return 0;
}

static int add_dir(struct run_cgroup *cg, const char *path, struct err *e)
{
	if (cg->n_dirs >= RUN_CGROUP_MAX_HIER)
		return err_set(e, ERR_INTERNAL, E2BIG, "too many cgroup hierarchies");
	if (mkdir(path, 0755) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating cgroup '%s'", path);
	cg->dirs[cg->n_dirs] = strdup(path);
	if (!cg->dirs[cg->n_dirs]) {
		rmdir(path);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	cg->n_dirs++;
	return 0;
}

/* cpuset (v1) refuses tasks until cpus and mems are set. */
static int copy_cpuset(const char *parent, const char *dir, struct err *e)
{
	static const char *const files[] = {"cpuset.cpus", "cpuset.mems"};
	for (size_t i = 0; i < 2; i++) {
		char v[4096];
		if (read_file(parent, files[i], v, sizeof(v)) < 0)
			continue;
		if (v[0] && v[0] != '\n' && write_file(dir, files[i], v) < 0)
			return err_sys(e, ERR_INTERNAL, errno, "setting '%s/%s'", dir, files[i]);
	}
	return 0;
}

/* Memory limit of the run: the sandbox's minus what the desktop needs. */
static void limit_memory(const char *parent, const char *dir)
{
	char v[64];
	if (read_file(parent, "memory.limit_in_bytes", v, sizeof(v)) <= 0)
		return;
	unsigned long long lim = strtoull(v, NULL, 10);
	if (lim == 0 || lim >= (1ull << 60))
		return;
	unsigned long long reserve = lim / 4 < DESKTOP_RESERVE_MAX ? lim / 4 : DESKTOP_RESERVE_MAX;
	snprintf(v, sizeof(v), "%llu", lim - reserve);
	write_file(dir, "memory.limit_in_bytes", v);
	/* Without swap accounting the file is missing, which is fine. */
	write_file(dir, "memory.memsw.limit_in_bytes", v);
}

static int create_v1(struct run_cgroup *cg, const char *parent, const char *cid, struct err *e)
{
	DIR *d = opendir(CGROUP_ROOT);
	if (!d)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", CGROUP_ROOT);
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.' || de->d_type != DT_DIR)
			continue;
		char sb[PATH_MAX], dir[PATH_MAX];
		snprintf(sb, sizeof(sb), "%s/%s", CGROUP_ROOT, de->d_name);
		struct statfs sf;
		/* Only v1 hierarchies: the unmounted v2 one of a hybrid host
		 * is a plain directory here (in which crun makes plain
		 * directories too). */
		if (statfs(sb, &sf) < 0 || sf.f_type != CGROUP_SUPER_MAGIC)
			continue;
		snprintf(sb, sizeof(sb), "%s/%s/%s/%s", CGROUP_ROOT, de->d_name, parent, cid);
		struct stat st;
		/* Hierarchies without the sandbox are not ours to touch. */
		if (stat(sb, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", sb, cg->name);
		if ((r = add_dir(cg, dir, e)) < 0)
			break;
		if (strstr(de->d_name, "cpuset"))
			r = copy_cpuset(sb, dir, e);
		if (strstr(de->d_name, "freezer"))
			cg->kill_idx = cg->n_dirs - 1;
		if (strstr(de->d_name, "memory")) {
			cg->mem_idx = cg->n_dirs - 1;
			limit_memory(sb, dir);
		}
	}
	closedir(d);
	if (r == 0 && cg->kill_idx < 0)
		r = err_set(e, ERR_INTERNAL, ENOENT,
			    "no freezer cgroup for '%s' (needed to kill a run)", cid);
	return r;
}

static int create_v2(struct run_cgroup *cg, const char *parent, const char *cid, struct err *e)
{
	char sb[PATH_MAX], dir[PATH_MAX], v[1024];
	snprintf(sb, sizeof(sb), "%s/%s/%s", CGROUP_ROOT, parent, cid);
	snprintf(dir, sizeof(dir), "%s/%s", sb, cg->name);
	if (read_file(sb, "memory.events", v, sizeof(v)) > 0)
		cg->oom_base = keyed_value(v, "oom_kill");
	int r = add_dir(cg, dir, e);
	if (r == 0)
		cg->kill_idx = 0;
	return r;
}

int run_cgroup_create(struct run_cgroup *cg, enum runtime_cgroup_mode mode, const char *parent,
		      const char *container_id, struct err *e)
{
	memset(cg, 0, sizeof(*cg));
	cg->mode = mode;
	cg->kill_idx = cg->mem_idx = -1;
	char rnd[17];
	if (fs_random_hex(rnd, 8, e) < 0)
		return err_code(e);
	snprintf(cg->name, sizeof(cg->name), "run-%s", rnd);
	int r = mode == RUNTIME_CGROUP_V2 ? create_v2(cg, parent, container_id, e)
					  : create_v1(cg, parent, container_id, e);
	if (r < 0) {
		run_cgroup_destroy(cg);
		return err_wrap(e, "creating the run's cgroup");
	}
	return 0;
}

int run_cgroup_attach(struct run_cgroup *cg, pid_t pid, struct err *e)
{
	char v[32];
	snprintf(v, sizeof(v), "%d", (int)pid);
	for (int i = 0; i < cg->n_dirs; i++) {
		int r = write_file(cg->dirs[i], "cgroup.procs", v);
		if (r < 0)
			return err_sys(e, ERR_INTERNAL, -r, "moving %d into '%s'", (int)pid,
				       cg->dirs[i]);
	}
	return 0;
}

int run_cgroup_empty(struct run_cgroup *cg)
{
	if (cg->kill_idx < 0)
		return 1;
	const char *dir = cg->dirs[cg->kill_idx];
	char buf[256];
	if (cg->mode == RUNTIME_CGROUP_V2) {
		if (read_file(dir, "cgroup.events", buf, sizeof(buf)) < 0)
			return 1;
		return keyed_value(buf, "populated") == 0;
	}
	ssize_t n = read_file(dir, "cgroup.procs", buf, sizeof(buf));
	return n <= 0;
}

static void wait_empty(struct run_cgroup *cg)
{
	long long deadline = clock_mono_ms() + EMPTY_WAIT_MS;
	for (int i = 0; !run_cgroup_empty(cg) && clock_mono_ms() < deadline; i++)
		clock_sleep_us(i < 100 ? 200 : 2000);
}

/* SIGKILLs every pid listed in the cgroup; returns how many. */
static int kill_members(const char *dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	_cleanup_file_ FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	long pid;
	int n = 0;
	while (fscanf(f, "%ld", &pid) == 1)
		if (pid > 1 && kill((pid_t)pid, SIGKILL) == 0)
			n++;
	return n;
}

void run_cgroup_kill(struct run_cgroup *cg)
{
	if (cg->kill_idx < 0 || run_cgroup_empty(cg))
		return;
	const char *dir = cg->dirs[cg->kill_idx];
	if (cg->mode == RUNTIME_CGROUP_V2) {
		if (write_file(dir, "cgroup.kill", "1") < 0)
			kill_members(dir); /* kernels before 5.14 */
		wait_empty(cg);
		return;
	}
	/* Frozen tasks cannot fork, so the member list is complete; they die
	 * of the SIGKILL once thawed. */
	write_file(dir, "freezer.state", "FROZEN");
	char st[64] = "";
	long long deadline = clock_mono_ms() + FREEZE_WAIT_MS;
	for (int i = 0; clock_mono_ms() < deadline; i++) {
		if (read_file(dir, "freezer.state", st, sizeof(st)) < 0 ||
		    strncmp(st, "FROZEN", 6) == 0)
			break;
		clock_sleep_us(i < 100 ? 100 : 1000);
	}
	kill_members(dir);
	write_file(dir, "freezer.state", "THAWED");
	/* If the freeze did not complete, a fork may have slipped through:
	 * kill again until nothing is left. */
	deadline = clock_mono_ms() + EMPTY_WAIT_MS;
	for (int i = 0; !run_cgroup_empty(cg) && clock_mono_ms() < deadline; i++) {
		if (i % 20 == 19)
			kill_members(dir);
		clock_sleep_us(i < 100 ? 200 : 2000);
	}
}

uint64_t run_cgroup_oom_kills(struct run_cgroup *cg)
{
	char buf[1024];
	if (cg->mode == RUNTIME_CGROUP_V2) {
		if (cg->kill_idx < 0)
			return 0;
		char sb[PATH_MAX];
		snprintf(sb, sizeof(sb), "%s/..", cg->dirs[cg->kill_idx]);
		if (read_file(sb, "memory.events", buf, sizeof(buf)) < 0)
			return 0;
		uint64_t v = keyed_value(buf, "oom_kill");
		return v > cg->oom_base ? v - cg->oom_base : 0;
	}
	if (cg->mem_idx < 0 ||
	    read_file(cg->dirs[cg->mem_idx], "memory.oom_control", buf, sizeof(buf)) < 0)
		return 0;
	return keyed_value(buf, "oom_kill");
}

/* Moves every pid listed in `dir` into `to`; returns how many. */
static int move_members(const char *dir, const char *to)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	_cleanup_file_ FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	long pid;
	int n = 0;
	while (fscanf(f, "%ld", &pid) == 1) {
		char v[32];
		snprintf(v, sizeof(v), "%ld", pid);
		if (pid > 1 && write_file(to, "cgroup.procs", v) == 0)
			n++;
	}
	return n;
}

void run_cgroup_release(struct run_cgroup *cg)
{
	for (int i = 0; i < cg->n_dirs; i++) {
		char parent[PATH_MAX];
		snprintf(parent, sizeof(parent), "%s", cg->dirs[i]);
		char *slash = strrchr(parent, '/');
		if (!slash || slash == parent)
			continue;
		*slash = '\0';
		/* again while some were moved: one may have forked meanwhile */
		for (int k = 0; k < 20 && move_members(cg->dirs[i], parent) > 0; k++)
			;
	}
}

void run_cgroup_destroy(struct run_cgroup *cg)
{
	run_cgroup_kill(cg);
	for (int i = cg->n_dirs - 1; i >= 0; i--) {
		/* A task that just died may still be listed for a moment. */
		for (int k = 0; k < 50 && rmdir(cg->dirs[i]) < 0 && errno == EBUSY; k++)
			clock_sleep_us(1000);
		free(cg->dirs[i]);
		cg->dirs[i] = NULL;
	}
	cg->n_dirs = 0;
	cg->kill_idx = cg->mem_idx = -1;
}
