/* sandbox_load: reading the sandboxes of the state dir back at start-up
 * (sandboxes_open): half-created ones rolled back, half-deleted ones
 * finished, those a stopping deskboxd left running taken over
 * (sandbox_adopt.c), the others listed stopped or failed. */
#include "common/clock.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"

/* The persisted uid range of a sandbox being loaded.  None (made before
 * user namespaces) or one that clashes: host_base stays 0 and
 * migrate_loaded() gives it a fresh one. */
static void load_userns_base(struct sandboxes *s, struct sandbox *sb, const cJSON *v)
{
	if (!cJSON_IsNumber(v))
		return;
	double d = v->valuedouble;
	int r = d >= 1 && d <= UINT32_MAX ? sandbox_userns_take(s, (uint32_t)d) : -EINVAL;
	if (r == 0)
		sb->host_base = (uint32_t)d;
	else
		log_msg(LOG_LEVEL_WARN, "sandbox %s: unusable uid range %.0f: %s", sb->id, d,
			strerror(-r));
}

/* Gives the loaded sandboxes without a uid range one (after all are loaded,
 * so no persisted range is handed out twice). */
static void migrate_loaded(struct sandboxes *s)
{
	for (struct sandbox *sb = s->list; sb; sb = sb->next) {
		struct err e = ERR_INIT;
		if (sb->host_base || !s->cfg.userns_base)
			continue;
		if (sandbox_userns_migrate(sb, &e) < 0 ||
		    sandbox_persist(sb, SANDBOX_STOPPED, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "%s", e.msg);
	}
}

/* A sandbox a stopping deskboxd left running ("detached" in its
 * sandbox.json) is taken over when its container still runs: 0 then.  So
 * is one a killed deskboxd left "running" or "paused", when its backend
 * needs nothing of that deskboxd (a VM: runtime_backend.adopt_after_kill). */
static int load_adopt(struct sandbox *sb, const cJSON *st, const cJSON *j)
{
	const cJSON *det = cJSON_GetObjectItemCaseSensitive(j, "detached");
	int paused = strcmp(st->valuestring, "paused") == 0;
	if (strcmp(st->valuestring, "running") != 0 && !paused)
		return -1;
	if (!cJSON_IsObject(det) && !(sb->be && sb->be->adopt_after_kill))
		return -1;
	struct err e = ERR_INIT;
	if (sandbox_adopt(sb, det, &e) < 0) {
		log_msg(LOG_LEVEL_WARN, "sandbox %s was left %s, but %s", sb->id, st->valuestring,
			e.msg);
		return -1;
	}
	err_clear(&e);
	if (paused) /* still frozen by its cgroup */
		sb->status = SANDBOX_PAUSED;
	if (sandbox_persist(sb, sb->status, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
	log_msg(LOG_LEVEL_INFO, "sandbox %s: taken over, running (init pid %d)", sb->id,
		(int)sb->init_pid);
	return 0;
}

/* The backend of a sandbox whose sandbox.json is not taken as a state (a
 * pool member never handed out, one still "creating"): the isolation it
 * names, if any, else a container's. */
static void rollback_backend(struct sandbox *sb, const cJSON *j)
{
	const cJSON *iso = cJSON_GetObjectItemCaseSensitive(j, "isolation");
	enum runtime_isolation want = RUNTIME_ISOLATION_CONTAINER;
	if (cJSON_IsString(iso) && runtime_isolation_parse(iso->valuestring, &want) < 0)
		want = RUNTIME_ISOLATION_CONTAINER;
	sb->spec.isolation = want;
	struct err e = ERR_INIT;
	if (sandbox_backend_set(sb, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
}

int sandbox_load_one(struct sandboxes *s, const char *id)
{
	struct err e = ERR_INIT;
	struct sandbox *sb = sandbox_alloc(s, id);
	if (!sb)
		return -ENOMEM;
	char path[PATH_MAX];
	sandbox_path(sb, path, sizeof(path), "sandbox.json");
	_cleanup_free_ char *text = NULL;
	cJSON *j = NULL;
	const cJSON *st = NULL;
	/* A warm-pool member is removed unless its claim was recorded
	 * (sandbox_claim.c); then the record is its state. */
	if (fs_read_file(path, 1 << 20, &text, NULL, &e) == 0 && (j = cJSON_Parse(text)) &&
	    (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "pooled")) ||
	     sandbox_claim_load(sb, &j)) &&
	    (st = cJSON_GetObjectItemCaseSensitive(j, "status")) && cJSON_IsString(st) &&
	    strcmp(st->valuestring, "creating") != 0 && sandbox_spec_parse(j, &sb->spec, &e) == 0) {
		const cJSON *ca = cJSON_GetObjectItemCaseSensitive(j, "created_at");
		/* RFC 3339 (unix seconds before). */
		sb->created_at = cJSON_IsNumber(ca)   ? (long long)ca->valuedouble
				 : cJSON_IsString(ca) ? clock_parse_rfc3339(ca->valuestring) / 1000
						      : 0;
		sandbox_disk_loaded(sb);
		/* Made before isolations existed: a container, whatever the
		 * default is now.  Kept when its isolation is unavailable now:
		 * a start says why. */
		if (!sb->spec.isolation)
			sb->spec.isolation = RUNTIME_ISOLATION_CONTAINER;
		if (sandbox_backend_set(sb, &e) < 0) {
			log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", id, e.msg);
			err_clear(&e);
		}
		sandbox_timeout_load(sb, j);
		load_userns_base(s, sb, cJSON_GetObjectItemCaseSensitive(j, "userns_base"));
		if (load_adopt(sb, st, j) == 0) {
			cJSON_Delete(j);
			goto listed;
		}
		/* Whatever ran before this deskboxd started is gone or stale:
		 * make sure of it, keep the files, report it stopped (or
		 * failed, with its reason). */
		sandbox_teardown_ex(sb, 1);
		sandbox_sweep_uploads(sb);
		const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "reason");
		sb->status = strcmp(st->valuestring, "failed") ? SANDBOX_STOPPED : SANDBOX_FAILED;
		if (sb->status == SANDBOX_FAILED && cJSON_IsString(rs))
			snprintf(sb->reason, sizeof(sb->reason), "%s", rs->valuestring);
		if (sandbox_persist(sb, sb->status, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", id, e.msg);
		cJSON_Delete(j);
	listed:
		pthread_mutex_lock(&s->mu);
		if (sandbox_name_claim_locked(s, sb->spec.name, &e) < 0) {
			/* Only a hand-edited state dir has two: the first keeps it. */
			log_msg(LOG_LEVEL_WARN, "sandbox %s: %s; it has no name now", id, e.msg);
			sb->spec.name[0] = '\0';
		}
		sb->next = s->list;
		s->list = sb;
		s->count++;
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	/* Half-created (or unreadable): roll back, through the backend it was
	 * made with (a VM's QEMU runs on after a kill of deskboxd). */
	rollback_backend(sb, j);
	cJSON_Delete(j);
	log_msg(LOG_LEVEL_WARN, "rolling back half-created sandbox %s%s%s", id,
		e.msg[0] ? ": " : "", e.msg);
	err_clear(&e);
	sandbox_teardown_ex(sb, 1);
	if (fs_remove_tree(sb->dir, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "%s", e.msg);
	sandbox_disk_loaded(sb); /* where its disk image is, to remove it */
	sandbox_disk_home_remove(sb);
	sandbox_put(sb);
	return 0;
}

/* Finishes a delete a crash cut short. */
static void sweep_trash(const char *dir, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	struct err e = ERR_INIT;
	/* Its overlay may still be mounted here if the crash came first. */
	char rootfs[PATH_MAX];
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", path);
	if (image_umount_rootfs(rootfs, &e) < 0 || fs_remove_tree(path, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "%s", e.msg);
	else
		log_msg(LOG_LEVEL_INFO, "finished deleting '%s'", name + strlen(TRASH_PREFIX));
}

void sandbox_load_all(struct sandboxes *s, const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (strncmp(de->d_name, TRASH_PREFIX, strlen(TRASH_PREFIX)) == 0) {
				sweep_trash(dir, de->d_name);
				continue;
			}
			if (strlen(de->d_name) != SANDBOX_ID_LEN ||
			    strspn(de->d_name, "0123456789abcdef") != SANDBOX_ID_LEN)
				continue;
			sandbox_load_one(s, de->d_name);
		}
		closedir(d);
	}
	migrate_loaded(s);
}
