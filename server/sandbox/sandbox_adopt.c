/* sandbox_adopt: sandboxes that outlive deskboxd.
 *
 * A deskboxd that is told to stop (SIGTERM) with --on-exit keep leaves
 * running sandboxes running and paused ones paused (sandboxes_detach): their containers, desktops
 * and background programs go on; the mirror (bridge) ends, and so do
 * foreground runs and terminals, whose owners were deskboxd's threads.
 * The container's log pipe would lose its reader, and the desktop's next
 * line to its stdout would then kill it with SIGPIPE, so a keeper process
 * (sh | head | cat, in a session of its own) drains it into init.log,
 * capped, until the next deskboxd takes the pipe back with pidfd_getfd().
 * sandbox.json keeps "running" and the keeper's pid under "detached".
 *
 * The next deskboxd finds them (sandbox_adopt): the runtime says the
 * container still runs, its init is in the container's cgroup, and the
 * sandbox becomes "running" again.  Its mounts lived in the old deskboxd's
 * mount namespace and are gone from this one: the disk is mounted again
 * from the loop device that still backs it (the same filesystem, never a
 * second loop device), the overlay is not (the container holds it; the
 * files API reaches the sandbox through its init's root, as for any
 * running sandbox), and /run/deskbox is reached through the init's root
 * too.  Its network (docs/network.md) is taken down at the detach, since
 * its filter needs a deskboxd, and attached again here.  The mirror
 * reconnects on the first screenshot.  A sandbox whose
 * container ended meanwhile is stopped as after a crash.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "server/process/process.h"

void sandbox_detach(struct sandbox *sb)
{
	struct err e = ERR_INIT;
	capture_free(sb->cap);
	sb->cap = NULL;
	/* Its link, filter and resolver go: with no deskboxd to keep the
	 * filter, it has no network until the next one attaches it again. */
	sandbox_net_detach(sb);
	if (sandbox_log_detach(sb, &sb->log_keeper, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "%s", e.msg);
	err_clear(&e);
	sb->detached = 1;
	/* A paused one stays frozen: its cgroup keeps it so. */
	if (sandbox_persist(sb, sb->status, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
	log_msg(LOG_LEVEL_INFO, "sandbox %s left %s", sb->id, sandbox_status_names[sb->status]);
}

void sandbox_run_dir(const struct sandbox *sb, char *buf, size_t size)
{
	if (sb->adopted && sb->init_pid > 0)
		sandbox_adopted_paths(sb, buf, NULL, size);
	else
		sandbox_path(sb, buf, size, "run");
}

void sandbox_adopted_paths(const struct sandbox *sb, char *run, char *root, size_t size)
{
	char rootfs[PATH_MAX], r[PATH_MAX], d[PATH_MAX];
	sandbox_path(sb, rootfs, sizeof(rootfs), "rootfs");
	sb->be->adopted_paths(sb->init_pid, rootfs, d, r, sizeof(r));
	if (run)
		snprintf(run, size, "%s", d);
	if (root)
		snprintf(root, size, "%s", r);
}

int sandbox_adopt(struct sandbox *sb, const cJSON *detached, struct err *e)
{
	int running = 0;
	pid_t pid = 0;
	if (sb->be->feature(RUNTIME_FEATURE_ADOPT, e) < 0)
		return err_code(e);
	if (sb->be->state(sb->owner->rt, sb->container_id, &running, &pid, e) < 0)
		return err_code(e);
	if (!running || pid <= 0)
		return err_set(e, ERR_NOT_RUNNING, ESRCH, "its container ended meanwhile");
	sb->init_pid = pid;
	sb->adopted = 1;
	sb->status = SANDBOX_RUNNING;
	char run[PATH_MAX];
	sandbox_run_dir(sb, run, sizeof(run));
	process_table_set_run_dir(sb->procs, run);
	/* The watch checks that the pid is the container's init. */
	if (sandbox_monitor_watch(sb, e) < 0)
		goto fail;
	if (sb->spec.disk_mb) {
		char upper[PATH_MAX], work[PATH_MAX];
		pthread_mutex_lock(&sb->mu);
		int r = sandbox_disk_mount(sb, upper, work, sizeof(upper), e);
		pthread_mutex_unlock(&sb->mu);
		if (r < 0)
			goto fail;
	}
	struct err ne = ERR_INIT;
	if (sandbox_net_attach(sb, &ne) < 0 || sandbox_net_ready(sb, &ne) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: no network after the takeover: %s", sb->id,
			ne.msg);
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(detached, "log_keeper");
	struct err le = ERR_INIT;
	if (!cJSON_IsNumber(k) || sandbox_log_adopt(sb, (pid_t)k->valuedouble, &le) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: its log is lost until its next start: %s",
			sb->id, le.msg[0] ? le.msg : "no log keeper");
	return 0;
fail:
	sb->status = SANDBOX_STOPPED;
	return err_code(e);
}

void sandbox_adopt_end(struct sandbox *sb)
{
	if (!sb->adopted)
		return;
	sb->adopted = 0;
	process_table_set_run_dir(sb->procs, NULL);
}
