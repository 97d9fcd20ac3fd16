/* sandbox_patch: a sandbox's memory, CPU and pids limits, and its
 * metadata, changed while it lives (PATCH /v1/sandboxes/{id},
 * docs/lifecycle.md).
 *
 * Metadata merges as a JSON merge patch (RFC 7396): a key with a string
 * sets it, a key with null removes it, keys not named stay; the result
 * keeps the create's bounds.  It is swapped under sb->mu, which its
 * readers (the JSON view, the list's filter) take.
 *
 * A running or paused sandbox gets the new limits in its cgroup at once
 * (the runtime's `update`: the kernel applies them to every process
 * inside, including the runs' sub-cgroups, which sit below it); a stopped
 * or failed one only in its spec, which its next start writes into the
 * bundle.  Either way the spec is persisted, so the limits outlive a
 * restart of the sandbox and of deskboxd.  The disk and the display are
 * fixed when the sandbox is made and are refused here by name.
 *
 * Order: the cgroup first, the spec after.  When the kernel refuses (a
 * memory limit below what the sandbox uses now, on cgroup v1: v2 reclaims
 * and then kills inside instead), the limits already written are put back
 * and the client hears 409; when the spec cannot be written after the
 * cgroup changed, the cgroup is put back too. */
#include "internal.h"

#include <errno.h>
#include <string.h>

#include "common/text.h"
#include "common/args.h"
#include "common/log.h"
#include "server/runtime/runtime.h"

/* Fields a PATCH may carry. */
static const char *const patch_fields[] = {"memory_mb", "pids_max", "cpu_millis",
					   "metadata",	"secrets",  NULL};

/* Fields of a create that are fixed for the sandbox's life. */
static const char *const fixed_fields[] = {
    "disk_mb", "display",  "agent_display",  "image", "env", "network",
    "name",    "template", "read_only_root", "root",  NULL};

#define PATCH_FIELDS "memory_mb, pids_max, cpu_millis, metadata and secrets"

void sandbox_patch_release(struct sandbox_patch *l)
{
	cJSON_Delete(l->metadata);
	l->metadata = NULL;
}

int sandbox_patch_parse(const cJSON *req, struct sandbox_patch *l, struct err *e)
{
	memset(l, 0, sizeof(*l));
	if (!cJSON_IsObject(req))
		return err_set(e, ERR_INVALID, EINVAL, "the body must be a JSON object");
	const cJSON *it;
	cJSON_ArrayForEach(it, req)
	{
		if (args_listed(patch_fields, it->string))
			continue;
		if (args_listed(fixed_fields, it->string))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field '%s' is fixed when the sandbox is made; a PATCH "
				       "changes " PATCH_FIELDS,
				       it->string);
		return err_set(e, ERR_UNKNOWN_FIELD, EINVAL,
			       "unknown field '%.*s': a PATCH changes " PATCH_FIELDS,
			       UTF8_CUT(it->string, 64));
	}
	int64_t v;
	if (args_int(req, "memory_mb", 128, 1 << 20, 0, 0, &v, e) < 0)
		return err_code(e);
	l->memory_mb = (uint64_t)v;
	if (args_int(req, "pids_max", 32, 1 << 22, 0, 0, &v, e) < 0)
		return err_code(e);
	l->pids_max = v;
	const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(req, "cpu_millis");
	if (cpu) {
		if (args_int(req, "cpu_millis", 0, 256000, 0, 0, &v, e) < 0)
			return err_code(e);
		l->has_cpu = 1;
		l->cpu_millis = (uint32_t)v;
	}
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "metadata");
	if (m && !cJSON_IsObject(m))
		return err_set(e, ERR_INVALID, EINVAL, "field 'metadata' must be an object");
	if (m && !(l->metadata = cJSON_Duplicate(m, 1)))
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (cJSON_GetObjectItemCaseSensitive(req, "secrets")) {
		struct sandbox_spec tmp;
		if (sandbox_spec_parse_secrets(req, &tmp, e) < 0)
			return err_code(e);
		l->has_secrets = 1;
		l->n_secrets = tmp.n_secrets;
		memcpy(l->secrets, tmp.secrets, sizeof(l->secrets));
	}
	if (!l->memory_mb && !l->pids_max && !l->has_cpu && !l->metadata && !l->has_secrets)
		return err_set(e, ERR_INVALID, EINVAL,
			       "nothing to change: give memory_mb, pids_max, cpu_millis, "
			       "metadata or secrets");
	return 0;
}

/* The runtime's form of `l` (0 = unchanged; cpu 0 = no limit). */
static struct runtime_limits runtime_form(const struct sandbox_patch *l)
{
	struct runtime_limits r = {.memory_bytes = l->memory_mb << 20, .pids_max = l->pids_max};
	if (l->has_cpu)
		r.cpu_millis = l->cpu_millis ? l->cpu_millis : RUNTIME_CPU_UNLIMITED;
	return r;
}

/* The limits `sb` has now, in the form of a change to them. */
static struct sandbox_patch current(const struct sandbox *sb)
{
	return (struct sandbox_patch){.memory_mb = sb->spec.memory_mb,
				      .pids_max = sb->spec.pids_max,
				      .has_cpu = 1,
				      .cpu_millis = sb->spec.cpu_millis};
}

static void apply_to_spec(struct sandbox *sb, const struct sandbox_patch *l)
{
	pthread_mutex_lock(&sb->mu);
	if (l->memory_mb)
		sb->spec.memory_mb = l->memory_mb;
	if (l->pids_max)
		sb->spec.pids_max = l->pids_max;
	if (l->has_cpu)
		sb->spec.cpu_millis = l->cpu_millis;
	pthread_mutex_unlock(&sb->mu);
}

/* Writes the limits `before` into the running container's cgroup again. */
static void put_back(struct sandbox *sb, const struct sandbox_patch *before)
{
	struct runtime_limits back = runtime_form(before);
	struct err e = ERR_INIT;
	if (sb->be->update(sb->owner->rt, sb->container_id, &back, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: putting the limits back: %s", sb->id, e.msg);
}

/* Swaps sb's metadata for `m` (which it then owns); returns the old. */
static cJSON *swap_metadata(struct sandbox *sb, cJSON *m)
{
	pthread_mutex_lock(&sb->mu);
	cJSON *old = sb->spec.metadata;
	sb->spec.metadata = m;
	pthread_mutex_unlock(&sb->mu);
	return old;
}

/* With sb->op held exclusively: the change, in the cgroup if a container
 * runs, then in the persisted spec. */
static int update_locked(struct sandbox *sb, enum sandbox_status st, const struct sandbox_patch *l,
			 struct err *e)
{
	cJSON *meta = NULL;
	if (l->has_secrets && sandbox_secrets_change(sb, st, l->secrets, l->n_secrets, e) < 0)
		return err_code(e);
	if (l->metadata && sandbox_metadata_merge(sb->spec.metadata, l->metadata, &meta, e) < 0)
		return err_code(e);
	int live = (st == SANDBOX_RUNNING || st == SANDBOX_PAUSED) &&
		   (l->memory_mb || l->pids_max || l->has_cpu);
	struct sandbox_patch before = current(sb);
	struct runtime_limits rl = runtime_form(l);
	if (live && sb->be->update(sb->owner->rt, sb->container_id, &rl, e) < 0) {
		cJSON_Delete(meta);
		/* The runtime writes one file after another: a refusal may
		 * come after some of them took. */
		put_back(sb, &before);
		return err_wrap(e, "changing the limits of sandbox '%s'", sb->id);
	}
	apply_to_spec(sb, l);
	cJSON *old = meta ? swap_metadata(sb, meta) : NULL;
	if (sandbox_persist(sb, st, e) == 0) {
		cJSON_Delete(old);
		return 0;
	}
	apply_to_spec(sb, &before);
	if (meta)
		cJSON_Delete(swap_metadata(sb, old));
	if (live)
		put_back(sb, &before);
	return err_wrap(e, "saving the limits of sandbox '%s'", sb->id);
}

int sandbox_patch_apply(struct sandboxes *s, const char *id, const struct sandbox_patch *l,
			struct sandbox **out, struct err *e)
{
	struct sandbox *sb;
	enum sandbox_status st;
	if (sandbox_get_exclusive(s, id, &sb, &st, e) < 0)
		return err_code(e);
	int r;
	if (st == SANDBOX_DELETING)
		r = err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", id);
	else if (st == SANDBOX_CREATING)
		r = err_set(e, ERR_CONFLICT, EBUSY, "sandbox '%s' is being created", id);
	else
		r = update_locked(sb, st, l, e);
	return sandbox_put_exclusive(sb, r, out);
}
