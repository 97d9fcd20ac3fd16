#include "common/text.h"
#include "sandbox.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "server/files/files.h"
#include "server/runtime/runtime.h"
#include "server/process/process.h"
#include "common/metrics.h"

#define RECONNECT_TIMEOUT_MS 3000
/* A sandbox's directory while delete removes it (swept at start-up). */

const char *const sandbox_status_names[] = {
    [SANDBOX_CREATING] = "creating", [SANDBOX_RUNNING] = "running", [SANDBOX_STOPPED] = "stopped",
    [SANDBOX_FAILED] = "failed",     [SANDBOX_PAUSED] = "paused",   [SANDBOX_DELETING] = "deleting",
};

const char *sandbox_status_name(enum sandbox_status status)
{
	return sandbox_status_names[status];
}

const char *sandbox_id(const struct sandbox *sb)
{
	return sb->id;
}

const char *sandbox_container_id(const struct sandbox *sb)
{
	return sb->container_id;
}

const char *sandbox_dir(const struct sandbox *sb)
{
	return sb->dir;
}

struct runtime *sandbox_runtime(const struct sandbox *sb)
{
	return sb->owner->rt;
}

struct process_table *sandbox_procs(const struct sandbox *sb)
{
	return sb->procs;
}

uint32_t sandbox_width(const struct sandbox *sb)
{
	return sb->spec.width;
}

uint32_t sandbox_height(const struct sandbox *sb)
{
	return sb->spec.height;
}

void sandbox_agent_display(const struct sandbox *sb, uint32_t *w, uint32_t *h)
{
	*w = sb->spec.agent_width;
	*h = sb->spec.agent_height;
}

/* ---- persistence ---- */

/* `reason`: why it failed, shown with that status only. */
static cJSON *spec_json(struct sandbox *sb, enum sandbox_status status, const char *reason)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", sb->id);
	cJSON_AddStringToObject(j, "status", sandbox_status_names[status]);
	if (status == SANDBOX_FAILED && reason[0])
		cJSON_AddStringToObject(j, "reason", reason);
	cJSON_AddStringToObject(j, "restart", sb->spec.restart_on_failure ? "on-failure" : "no");
	cJSON *d = cJSON_AddObjectToObject(j, "display");
	cJSON_AddNumberToObject(d, "width", sb->spec.width);
	cJSON_AddNumberToObject(d, "height", sb->spec.height);
	cJSON_AddNumberToObject(j, "memory_mb", (double)sb->spec.memory_mb);
	cJSON_AddNumberToObject(j, "pids_max", (double)sb->spec.pids_max);
	cJSON_AddNumberToObject(j, "cpu_millis", sb->spec.cpu_millis);
	cJSON_AddNumberToObject(j, "disk_mb", (double)sb->spec.disk_mb);
	cJSON_AddStringToObject(j, "image", sb->spec.image[0] ? sb->spec.image : IMAGE_DEFAULT);
	cJSON_AddStringToObject(j, "isolation", runtime_isolation_name(sb->spec.isolation));
	if (sb->spec.agent_width) {
		cJSON *ad = cJSON_AddObjectToObject(j, "agent_display");
		cJSON_AddNumberToObject(ad, "width", sb->spec.agent_width);
		cJSON_AddNumberToObject(ad, "height", sb->spec.agent_height);
	}
	char t_s[CLOCK_RFC3339_MAX];
	clock_rfc3339(sb->created_at * 1000, t_s, sizeof(t_s));
	cJSON_AddStringToObject(j, "created_at", t_s);
	sandbox_timeout_json((struct sandbox *)sb, j);
	sandbox_net_json((struct sandbox *)sb, j);
	sandbox_labels_json(sb, j);
	sandbox_secrets_json(&sb->spec, j);
	return j;
}

char *sandbox_persist_text(struct sandbox *sb, enum sandbox_status status)
{
	char reason[sizeof(sb->reason)];
	pthread_mutex_lock(&sb->mu);
	memcpy(reason, sb->reason, sizeof(reason));
	pthread_mutex_unlock(&sb->mu);
	cJSON *j = spec_json(sb, status, reason);
	/* A pool member found at start-up was never handed out: removed. */
	if (sb->pooled)
		cJSON_AddTrueToObject(j, "pooled");
	if (sb->host_base)
		cJSON_AddNumberToObject(j, "userns_base", sb->host_base);
	if (sb->detached && (status == SANDBOX_RUNNING || status == SANDBOX_PAUSED))
		cJSON_AddNumberToObject(cJSON_AddObjectToObject(j, "detached"), "log_keeper",
					sb->log_keeper);
	cJSON *env = cJSON_AddObjectToObject(j, "env");
	for (size_t i = 0; i < SANDBOX_MAX_ENV && sb->spec.env[i]; i++) {
		const char *kv = sb->spec.env[i];
		const char *eq = strchr(kv, '=');
		char *key = strndup(kv, (size_t)(eq - kv));
		if (key)
			cJSON_AddStringToObject(env, key, eq + 1);
		free(key);
	}
	char *s = cJSON_Print(j);
	cJSON_Delete(j);
	return s;
}

int sandbox_persist(struct sandbox *sb, enum sandbox_status status, struct err *e)
{
	_cleanup_free_ char *s = sandbox_persist_text(sb, status);
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/sandbox.json", sb->dir);
	return fs_write_atomic(path, s, strlen(s), 0600, e);
}

/* ---- lifecycle helpers ---- */

/* The process table's way into the sandbox (struct process_host). */
static int procs_enter(void *cls, struct err *e)
{
	return sandbox_use(cls, 0, NULL, e);
}

static void procs_leave(void *cls)
{
	sandbox_unuse(cls);
}

struct sandbox *sandbox_alloc(struct sandboxes *s, const char *id)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	snprintf(sb->container_id, sizeof(sb->container_id), "dbx-%s", id);
	snprintf(sb->dir, sizeof(sb->dir), "%s/sandboxes/%s", s->cfg.state_dir, id);
	sb->owner = s;
	sb->disk_pooled = s->store_new; /* a load finds out (sandbox_disk_loaded) */
	sb->be = runtime_backend_container();
	struct process_host host = {
	    .rt = s->rt,
	    .be = sb->be,
	    .cgroup_mode = s->cfg.cgroup_mode,
	    .container_id = sb->container_id,
	    .dir = sb->dir,
	    .enter = procs_enter,
	    .leave = procs_leave,
	    .cls = sb,
	};
	sb->procs = process_table_new(&host);
	if (!sb->procs) {
		free(sb);
		return NULL;
	}
	atomic_init(&sb->refs, 1);
	pthread_mutex_init(&sb->mu, NULL);
	pthread_rwlockattr_t attr;
	pthread_rwlockattr_init(&attr);
	/* Writers (delete) must not starve behind a stream of screenshots. */
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&sb->op, &attr);
	pthread_rwlockattr_destroy(&attr);
	sb->init_pid = -1;
	return sb;
}

void sandbox_put(struct sandbox *sb)
{
	if (!sb || atomic_fetch_sub(&sb->refs, 1) != 1)
		return;
	capture_free(sb->cap);
	process_table_unref(sb->procs);
	sandbox_spec_release(&sb->spec);
	pthread_mutex_destroy(&sb->mu);
	pthread_rwlock_destroy(&sb->op);
	free(sb);
}

void sandbox_path(const struct sandbox *sb, char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", sb->dir, name);
}

static void registry_remove(struct sandboxes *s, struct sandbox *sb)
{
	pthread_mutex_lock(&s->mu);
	for (struct sandbox **pp = &s->list; *pp; pp = &(*pp)->next) {
		if (*pp == sb) {
			*pp = sb->next;
			if (!sb->pooled)
				s->count--;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
}

/* Lists a new sandbox (the registry takes a reference): ERR_LIMIT past
 * max_sandboxes (pool members do not count), ERR_INVALID for an image
 * that cannot be used, ERR_NAME_TAKEN for a name in use. */
static int registry_add(struct sandboxes *s, struct sandbox *sb, int pooled, struct err *e)
{
	pthread_mutex_lock(&s->mu);
	int r = 0;
	if (!pooled && s->count >= s->cfg.max_sandboxes)
		r = err_set(e, ERR_LIMIT, EAGAIN, "sandbox limit of %u reached",
			    s->cfg.max_sandboxes);
	/* Under the registry's lock: an image is deleted only while no
	 * listed sandbox names it (sandbox_image_delete). */
	else if (sandbox_image_check(s, sb->spec.image, e) < 0)
		r = err_code(e);
	/* Checked and listed under one lock: of concurrent creates with one
	 * name, exactly one gets it. */
	else if (sandbox_name_claim_locked(s, sb->spec.name, e) < 0)
		r = err_code(e);
	if (r == 0) {
		sb->next = s->list;
		s->list = sb;
		if (!pooled)
			s->count++;
		atomic_fetch_add(&sb->refs, 1); /* the registry's */
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

int sandbox_backend_set(struct sandbox *sb, struct err *e)
{
	if (!sb->spec.isolation)
		sb->spec.isolation =
		    sb->owner->cfg.default_isolation ?: RUNTIME_ISOLATION_CONTAINER;
	const struct runtime_backend *be;
	if (runtime_backend_get(sb->spec.isolation, &be, e) < 0)
		return err_code(e);
	sb->be = be;
	process_table_set_backend(sb->procs, be);
	return 0;
}

/* `pooled`: 0, POOLED_BARE (no network until the claim) or POOLED_OWN_NET. */
enum { POOLED_BARE = 1, POOLED_OWN_NET = 2 };

static int create(struct sandboxes *s, struct sandbox_spec *spec, int pooled,
		  const struct sandbox_seed *seed, struct sandbox **out, struct err *e)
{
	char id[SANDBOX_ID_LEN + 1];
	if (fs_random_hex(id, SANDBOX_ID_LEN / 2, e) < 0) {
		sandbox_spec_release(spec);
		return err_code(e);
	}
	struct sandbox *sb = sandbox_alloc(s, id);
	if (!sb) {
		sandbox_spec_release(spec);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	sb->spec = *spec;
	memset(spec->env, 0, sizeof(spec->env));
	memset(&spec->network, 0, sizeof(spec->network));
	spec->metadata = NULL;
	if (sb->spec.disk_mb == SANDBOX_DISK_DEFAULT)
		sb->spec.disk_mb = s->cfg.disk_mb;
	sb->created_at = (long long)time(NULL);
	sb->status = SANDBOX_CREATING;
	sb->pooled = pooled != 0;
	sb->net_at_claim = pooled == POOLED_BARE;
	if (sandbox_backend_set(sb, e) < 0 || sandbox_net_resolve(sb, sb->net_at_claim, e) < 0 ||
	    (sb->spec.network.mode != NETWORK_NONE &&
	     sb->be->feature(RUNTIME_FEATURE_NETWORK, e) < 0) ||
	    (sb->spec.read_only_root && sb->be->feature(RUNTIME_FEATURE_READ_ONLY_ROOT, e) < 0) ||
	    sandbox_secrets_resolve(sb, e) < 0 || sandbox_userns_claim(s, &sb->host_base, e) < 0) {
		sandbox_put(sb);
		return err_code(e);
	}

	if (registry_add(s, sb, pooled, e) < 0) {
		sandbox_userns_release(s, sb->host_base);
		sandbox_put(sb);
		return err_code(e);
	}

	/* Exclusive while starting: operations that find it wait or see
	 * "creating", delete waits for the start to finish. */
	pthread_rwlock_wrlock(&sb->op);
	int r;
	if (fs_mkdir_p(sb->dir, 0700, e) < 0 || sandbox_persist(sb, SANDBOX_CREATING, e) < 0 ||
	    (pooled && sandbox_claim_prepare(sb, e) < 0) ||
	    (seed && seed->fill(sb, seed->cls, e) < 0))
		r = err_code(e);
	else
		r = sandbox_start_container(sb, e);
	if (r == 0 && !pooled)
		sandbox_timeout_arm(sb);
	if (r == 0)
		r = sandbox_persist(sb, SANDBOX_RUNNING, e);
	if (r == 0)
		r = sandbox_set_running(sb, e);
	if (r < 0) {
		err_wrap(e, "creating sandbox");
		sandbox_teardown_ex(sb, 1);
		struct err e2 = ERR_INIT;
		if (fs_remove_tree(sb->dir, &e2) < 0)
			log_msg(LOG_LEVEL_WARN, "%s", e2.msg);
		sandbox_disk_home_remove(sb);
		sandbox_userns_release(s, sb->host_base);
		pthread_mutex_lock(&sb->mu);
		sb->status = SANDBOX_FAILED;
		pthread_mutex_unlock(&sb->mu);
		pthread_rwlock_unlock(&sb->op);
		registry_remove(s, sb);
		sandbox_put(sb); /* the registry's */
		sandbox_put(sb);
		return r;
	}
	pthread_rwlock_unlock(&sb->op);
	*out = sb;
	return 0;
}

int sandbox_create(struct sandboxes *s, struct sandbox_spec *spec, struct sandbox **out,
		   struct err *e)
{
	return create(s, spec, 0, NULL, out, e);
}

int sandbox_create_seeded(struct sandboxes *s, struct sandbox_spec *spec,
			  const struct sandbox_seed *seed, struct sandbox **out, struct err *e)
{
	return create(s, spec, 0, seed, out, e);
}

int sandbox_create_pooled(struct sandboxes *s, struct sandbox_spec *spec, int own_network,
			  struct sandbox **out, struct err *e)
{
	return create(s, spec, own_network ? POOLED_OWN_NET : POOLED_BARE, NULL, out, e);
}

int sandbox_spec_matches_pool(const struct sandbox_spec *req, const struct sandbox *sb)
{
	/* Everything fixed when the container started must be equal; the
	 * agent's display is only a mapping and is taken from the request,
	 * as is the restart policy. */
	uint64_t disk =
	    req->disk_mb == SANDBOX_DISK_DEFAULT ? sb->owner->cfg.disk_mb : req->disk_mb;
	enum runtime_isolation iso = req->isolation ?: sb->owner->cfg.default_isolation
							  ?: RUNTIME_ISOLATION_CONTAINER;
	return req->width == sb->spec.width && req->height == sb->spec.height &&
	       disk == sb->spec.disk_mb && req->memory_mb == sb->spec.memory_mb &&
	       req->pids_max == sb->spec.pids_max && req->cpu_millis == sb->spec.cpu_millis &&
	       !req->env[0] && !sb->spec.env[0] && !req->n_secrets &&
	       strcmp(req->image, sb->spec.image) == 0 &&
	       req->read_only_root == sb->spec.read_only_root && iso == sb->spec.isolation &&
	       req->no_root == sb->spec.no_root;
}

int sandbox_get(struct sandboxes *s, const char *id, struct sandbox **out, struct err *e)
{
	pthread_mutex_lock(&s->mu);
	struct sandbox *sb = sandbox_find_locked(s, id);
	if (sb) {
		atomic_fetch_add(&sb->refs, 1);
		pthread_mutex_unlock(&s->mu);
		*out = sb;
		return 0;
	}
	pthread_mutex_unlock(&s->mu);
	return err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%.*s'", UTF8_CUT(id, 64));
}

int sandbox_get_exclusive(struct sandboxes *s, const char *id, struct sandbox **out,
			  enum sandbox_status *st, struct err *e)
{
	if (sandbox_get(s, id, out, e) < 0)
		return err_code(e);
	struct sandbox *sb = *out;
	pthread_rwlock_wrlock(&sb->op);
	pthread_mutex_lock(&sb->mu);
	*st = sb->status;
	pthread_mutex_unlock(&sb->mu);
	return 0;
}

int sandbox_put_exclusive(struct sandbox *sb, int r, struct sandbox **out)
{
	pthread_rwlock_unlock(&sb->op);
	if (r < 0 || !out) {
		sandbox_put(sb);
		return r;
	}
	*out = sb;
	return 0;
}

static int delete_ref(struct sandboxes *s, struct sandbox *sb, struct err *e);

int sandbox_delete(struct sandboxes *s, const char *id, struct err *e)
{
	struct sandbox *sb;
	if (sandbox_get(s, id, &sb, e) < 0)
		return err_code(e);
	return delete_ref(s, sb, e);
}

void sandbox_discard(struct sandboxes *s, struct sandbox *sb)
{
	struct err e = ERR_INIT;
	atomic_fetch_add(&sb->refs, 1);
	if (delete_ref(s, sb, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "%s", e.msg);
}

/* Deletes `sb`, consuming the caller's reference. */
static int delete_ref(struct sandboxes *s, struct sandbox *sb, struct err *e)
{
	const char *id = sb->id;
	pthread_mutex_lock(&sb->mu);
	if (sb->status == SANDBOX_DELETING) {
		pthread_mutex_unlock(&sb->mu);
		sandbox_put(sb);
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", id);
	}
	sb->status = SANDBOX_DELETING;
	pthread_mutex_unlock(&sb->mu);
	registry_remove(s, sb);

	pthread_rwlock_wrlock(&sb->op);
	sandbox_teardown_ex(sb, 1);
	/* Out of the registry's sight in one step: a crash while the tree is
	 * being removed leaves a directory the next start sweeps, not a
	 * sandbox with half its files. */
	char trash[PATH_MAX];
	snprintf(trash, sizeof(trash), "%s/sandboxes/%s%s", s->cfg.state_dir, TRASH_PREFIX, id);
	int r = 0;
	if (rename(sb->dir, trash) < 0)
		r = err_sys(e, ERR_INTERNAL, errno, "renaming '%s'", sb->dir);
	else
		r = fs_remove_tree(trash, e);
	sandbox_disk_home_remove(sb); /* its image and checkpoints in the store */
	/* Only now: no process of it is left to share the ids with the next. */
	sandbox_userns_release(s, sb->host_base);
	pthread_rwlock_unlock(&sb->op);
	sandbox_put(sb); /* the registry's */
	sandbox_put(sb);
	return r < 0 ? err_wrap(e, "deleting sandbox '%s'", id) : 0;
}

/* The error for an operation that needs `sb` running while it is `st`. */
int sandbox_not_running(struct sandbox *sb, enum sandbox_status st, struct err *e)
{
	if (st == SANDBOX_DELETING)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", sb->id);
	if (st == SANDBOX_CREATING)
		return err_set(e, ERR_CONFLICT, EBUSY, "sandbox '%s' is being created", sb->id);
	if (st == SANDBOX_PAUSED)
		return err_set(e, ERR_PAUSED, EAGAIN, "sandbox '%s' is paused; resume it first",
			       sb->id);
	char reason[sizeof(sb->reason)];
	pthread_mutex_lock(&sb->mu);
	memcpy(reason, sb->reason, sizeof(reason));
	pthread_mutex_unlock(&sb->mu);
	if (st == SANDBOX_FAILED)
		return err_set(e, ERR_NOT_RUNNING, ESRCH,
			       "sandbox '%s' is not running: it failed (%s); start it again",
			       sb->id, reason[0] ? reason : "no reason known");
	return err_set(e, ERR_NOT_RUNNING, ESRCH, "sandbox '%s' is not running: it is %s", sb->id,
		       sandbox_status_names[st]);
}

int sandbox_use(struct sandbox *sb, int need_capture, struct capture **cap, struct err *e)
{
	int resumes = 0;
	for (int attempt = 0;; attempt++) {
		pthread_rwlock_rdlock(&sb->op);
		pthread_mutex_lock(&sb->mu);
		enum sandbox_status st = sb->status;
		struct capture *c = sb->cap;
		pthread_mutex_unlock(&sb->mu);
		if (st == SANDBOX_PAUSED && sb->spec.auto_resume && resumes++ < 3) {
			pthread_rwlock_unlock(&sb->op);
			pthread_rwlock_wrlock(&sb->op);
			int r = sandbox_resume_locked(sb, e);
			pthread_rwlock_unlock(&sb->op);
			if (r < 0)
				return r;
			attempt--; /* not a reconnect */
			continue;
		}
		if (st != SANDBOX_RUNNING) {
			pthread_rwlock_unlock(&sb->op);
			return sandbox_not_running(sb, st, e);
		}
		if (!need_capture)
			return 0;
		if (c && capture_alive(c)) {
			*cap = c;
			return 0;
		}
		pthread_rwlock_unlock(&sb->op);
		if (attempt > 0)
			return err_set(e, ERR_UNAVAILABLE, EAGAIN,
				       "the sandbox's screen mirror is reconnecting");

		/* The bridge died (VNC server restarted, or a crash in the
		 * parser): start a new one, once, exclusively. */
		pthread_rwlock_wrlock(&sb->op);
		pthread_mutex_lock(&sb->mu);
		int still_dead =
		    sb->status == SANDBOX_RUNNING && !(sb->cap && capture_alive(sb->cap));
		pthread_mutex_unlock(&sb->mu);
		if (still_dead) {
			struct capture *fresh = NULL;
			struct err e2 = ERR_INIT;
			if (sandbox_capture_connect(sb, RECONNECT_TIMEOUT_MS, &fresh, &e2) < 0)
				log_msg(LOG_LEVEL_WARN, "sandbox %s: reconnect: %s", sb->id,
					e2.msg);
			else
				metrics_count("deskbox_bridge_reconnects_total", "", 1);
			pthread_mutex_lock(&sb->mu);
			capture_free(sb->cap);
			sb->cap = fresh;
			pthread_mutex_unlock(&sb->mu);
		}
		pthread_rwlock_unlock(&sb->op);
	}
}

void sandbox_unuse(struct sandbox *sb)
{
	pthread_rwlock_unlock(&sb->op);
}

cJSON *sandbox_json(struct sandbox *sb)
{
	char reason[sizeof(sb->reason)];
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status st = sb->status;
	memcpy(reason, sb->reason, sizeof(reason));
	pthread_mutex_unlock(&sb->mu);
	cJSON *j = spec_json(sb, st, reason);
	sandbox_net_json_address(sb, j);
	return j;
}

void sandboxes_count(struct sandboxes *s, unsigned counts[SANDBOX_DELETING + 1])
{
	memset(counts, 0, sizeof(unsigned) * (SANDBOX_DELETING + 1));
	pthread_mutex_lock(&s->mu);
	for (struct sandbox *sb = s->list; sb; sb = sb->next) {
		if (sb->pooled)
			continue;
		pthread_mutex_lock(&sb->mu);
		counts[sb->status]++;
		pthread_mutex_unlock(&sb->mu);
	}
	pthread_mutex_unlock(&s->mu);
}

cJSON *sandboxes_json_where(struct sandboxes *s, const struct sandbox_filter *f, size_t n)
{
	cJSON *arr = cJSON_CreateArray();
	pthread_mutex_lock(&s->mu);
	for (struct sandbox *sb = s->list; sb; sb = sb->next)
		if (!sb->pooled && sandbox_matches(sb, f, n))
			cJSON_AddItemToArray(arr, sandbox_json(sb));
	pthread_mutex_unlock(&s->mu);
	return arr;
}

cJSON *sandboxes_json(struct sandboxes *s)
{
	return sandboxes_json_where(s, NULL, 0);
}

/* ---- opening and closing the registry ---- */

int sandboxes_open(struct sandboxes **out, const struct sandboxes_config *cfg, struct err *e)
{
	struct sandboxes *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	s->cfg = *cfg;
	pthread_mutex_init(&s->mu, NULL);
	char dir[PATH_MAX], rtroot[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/sandboxes", cfg->state_dir);
	snprintf(rtroot, sizeof(rtroot), "%s/runtime", cfg->state_dir);
	struct runtime_opts ro = {
	    .binary = cfg->runtime_binary,
	    .root = rtroot,
	    .cgroup_mode = cfg->cgroup_mode,
	};
	/* 0711 with user namespaces: the containers' roots must pass through
	 * it to their own directories (sandbox_userns_dirs()). */
	if (fs_mkdir_p(dir, 0700, e) < 0 ||
	    (chmod(dir, cfg->userns_base ? 0711 : 0700) < 0 &&
	     err_sys(e, ERR_INTERNAL, errno, "chmod '%s'", dir) < 0) ||
	    image_prepare_default(cfg->state_dir, s->lower, sizeof(s->lower), e) < 0 ||
	    image_prepare_usr_extra(cfg->state_dir, s->usr_extra, sizeof(s->usr_extra), e) < 0 ||
	    sandbox_store_open(s, e) < 0) {
		free(s);
		return err_code(e);
	}
	if (runtime_new(&s->rt, &ro, e) < 0) {
		sandbox_store_close(s);
		free(s);
		return err_code(e);
	}
	images_recover(cfg->state_dir);
	if (sandbox_monitor_new(s, e) < 0) {
		sandbox_monitor_free(s);
		runtime_free(s->rt);
		sandbox_store_close(s);
		free(s);
		return err_code(e);
	}
	sandbox_load_all(s, dir);
	sandbox_store_sweep(s);
	/* After the load: deadlines that passed while deskboxd was down fire
	 * now. */
	if (sandbox_timer_new(s, e) < 0) {
		sandboxes_close(s);
		return err_code(e);
	}
	*out = s;
	return 0;
}

void sandboxes_kill_runs(struct sandboxes *s, int foreground_only)
{
	pthread_mutex_lock(&s->mu);
	for (struct sandbox *sb = s->list; sb; sb = sb->next)
		process_table_kill_all(sb->procs, foreground_only);
	pthread_mutex_unlock(&s->mu);
}

/* Frees the registry; each running or paused sandbox is stopped, or with
 * `keep` left as it is for the next deskboxd (sandbox_detach). */
static void registry_end(struct sandboxes *s, int keep)
{
	if (!s)
		return;
	/* No deadline fires, failure is reported, nor restart made, from here
	 * on. */
	sandbox_timer_free(s);
	sandbox_monitor_stop(s);
	pthread_mutex_lock(&s->mu);
	struct sandbox *list = s->list;
	s->list = NULL;
	s->count = 0;
	pthread_mutex_unlock(&s->mu);
	while (list) {
		struct sandbox *sb = list;
		list = sb->next;
		pthread_rwlock_wrlock(&sb->op);
		int live = sb->status == SANDBOX_RUNNING || sb->status == SANDBOX_PAUSED;
		/* One the next deskboxd could not take over is stopped now
		 * rather than left to run unreachable until then. */
		if (keep && live && sb->be->feature(RUNTIME_FEATURE_ADOPT, NULL) == 0) {
			sandbox_detach(sb);
		} else if (live) {
			/* A paused one's memory cannot outlive its processes. */
			sandbox_teardown_ex(sb, 1);
			struct err e = ERR_INIT;
			if (sandbox_persist(sb, SANDBOX_STOPPED, &e) < 0)
				log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
		} else if (sb->status == SANDBOX_FAILED) {
			sandbox_teardown_ex(sb, 1); /* sandbox.json keeps "failed" */
		}
		sb->status = SANDBOX_STOPPED;
		pthread_rwlock_unlock(&sb->op);
		sandbox_put(sb);
	}
	sandbox_monitor_free(s);
	sandbox_store_close(s);
	/* Builds end with deskboxd: cancelled, each cleans up in its thread
	 * (a few seconds at most: its container is killed). */
	image_builds_cancel();
	unsigned builds = 1;
	for (int i = 0; i < 200 && builds; i++) {
		pthread_mutex_lock(&s->mu);
		builds = s->builds;
		pthread_mutex_unlock(&s->mu);
		if (builds)
			usleep(50 * 1000);
	}
	if (builds) {
		log_msg(LOG_LEVEL_WARN, "%u image build(s) still running end with deskboxd", builds);
		return;
	}
	runtime_free(s->rt);
	free(s->ranges);
	free(s);
}

void sandboxes_close(struct sandboxes *s)
{
	registry_end(s, 0);
}

void sandboxes_detach(struct sandboxes *s)
{
	registry_end(s, 1);
}
