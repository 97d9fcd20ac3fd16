/* The observation of one sandbox's desktop (desktop.h): the observers'
 * table, the action log every action passes (desk_obs_begin/end), the
 * takeover lease and the sinks of the recordings.  The event backlog is in
 * desktop_events.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs.h"
#include "desktop.h"
#include "internal.h"

/* A logged parameter string longer than this is cut (the backlog and the
 * sidecar hold what happened, not a copy of every upload). */
#define PARAM_STR_MAX 1024

struct desk_observers {
	pthread_mutex_t mu;
	struct desk_obs *list;
};

int desk_observers_new(struct desk_observers **out, struct err *e)
{
	struct desk_observers *t = calloc(1, sizeof(*t));
	if (!t)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_init(&t->mu, NULL);
	*out = t;
	return 0;
}

void desk_observers_free(struct desk_observers *t)
{
	if (!t)
		return;
	while (t->list) {
		struct desk_obs *o = t->list;
		t->list = o->next;
		desk_obs_stop_recordings(o);
		desk_obs_put(o);
	}
	pthread_mutex_destroy(&t->mu);
	free(t);
}

static void lease_load(struct desk_obs *o);

static struct desk_obs *obs_new(const char *id, const char *dir)
{
	struct desk_obs *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	snprintf(o->id, sizeof(o->id), "%s", id);
	if (dir && *dir)
		snprintf(o->lease_path, sizeof(o->lease_path), "%s/takeover.json", dir);
	atomic_init(&o->refs, 1);
	pthread_mutex_init(&o->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&o->cv, &ca);
	pthread_condattr_destroy(&ca);
	o->next_id = 1;
	lease_load(o);
	return o;
}

struct desk_obs *desk_obs_get(struct desk_observers *t, const char *id, const char *dir)
{
	pthread_mutex_lock(&t->mu);
	struct desk_obs *o = t->list;
	while (o && strcmp(o->id, id) != 0)
		o = o->next;
	if (!o && (o = obs_new(id, dir))) {
		o->next = t->list;
		t->list = o;
	}
	if (o)
		atomic_fetch_add(&o->refs, 1);
	pthread_mutex_unlock(&t->mu);
	return o;
}

void desk_obs_put(struct desk_obs *o)
{
	if (!o || atomic_fetch_sub(&o->refs, 1) != 1)
		return;
	for (size_t i = 0; i < DESK_OBS_BACKLOG; i++)
		free(o->ring[i].json);
	cJSON_Delete(o->windows);
	pthread_cond_destroy(&o->cv);
	pthread_mutex_destroy(&o->mu);
	free(o);
}

void desk_observers_forget(struct desk_observers *t, const char *id)
{
	pthread_mutex_lock(&t->mu);
	struct desk_obs **pp = &t->list, *gone = NULL;
	while (*pp && strcmp((*pp)->id, id) != 0)
		pp = &(*pp)->next;
	if (*pp) {
		gone = *pp;
		*pp = gone->next;
	}
	pthread_mutex_unlock(&t->mu);
	if (gone) {
		desk_obs_stop_recordings(gone);
		desk_obs_wake(gone);
		desk_obs_put(gone);
	}
}

void desk_observe(struct desk *d, struct desk_obs *o, const char *route, int sensitive)
{
	d->obs = o;
	snprintf(d->route, sizeof(d->route), "%s", route ? route : "");
	d->sensitive = sensitive;
}

int desk_obs_sink_add(struct desk_obs *o, desk_obs_sink_fn fn, void *cls, struct err *e)
{
	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < DESK_OBS_SINKS; i++) {
		if (!o->sinks[i].fn) {
			o->sinks[i].fn = fn;
			o->sinks[i].cls = cls;
			pthread_mutex_unlock(&o->mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&o->mu);
	return err_set(e, ERR_LIMIT, EBUSY, "at most %d recordings at once", DESK_OBS_SINKS);
}

void desk_obs_sink_remove(struct desk_obs *o, desk_obs_sink_fn fn, void *cls)
{
	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < DESK_OBS_SINKS; i++)
		if (o->sinks[i].fn == fn && o->sinks[i].cls == cls)
			o->sinks[i].fn = NULL, o->sinks[i].cls = NULL;
	pthread_mutex_unlock(&o->mu);
}

/* ---- takeover ---- */

/* The lease is kept in the sandbox's state dir too (takeover.json: "by",
 * "since", "expires_at" in unix ms), so that a restarted deskboxd still
 * refuses the agent until the lease ends.  Written when taken or renewed,
 * removed when released or over; under mu.  A write that fails leaves
 * the lease in force in this deskboxd only. */
static void lease_save_locked(struct desk_obs *o)
{
	if (!o->lease_path[0])
		return;
	if (!o->take_until_ms) {
		unlink(o->lease_path);
		return;
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "by", o->take_by);
	cJSON_AddNumberToObject(j, "since", (double)o->take_since_ms);
	cJSON_AddNumberToObject(j, "expires_at", (double)o->take_until_ms);
	char *text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	struct err e = ERR_INIT;
	if (text)
		fs_write_atomic(o->lease_path, text, strlen(text), 0600, &e);
	free(text);
}

/* A lease a deskboxd before this one granted, if it still runs. */
static void lease_load(struct desk_obs *o)
{
	char *text = NULL;
	size_t len;
	struct err e = ERR_INIT;
	if (!o->lease_path[0] || fs_read_file(o->lease_path, 4096, &text, &len, &e) < 0)
		return;
	cJSON *j = cJSON_ParseWithLength(text, len);
	free(text);
	const cJSON *by = cJSON_GetObjectItemCaseSensitive(j, "by");
	const cJSON *since = cJSON_GetObjectItemCaseSensitive(j, "since");
	const cJSON *until = cJSON_GetObjectItemCaseSensitive(j, "expires_at");
	long long now = clock_wall_ms();
	/* SECURITY: the file is deskboxd's own, but a lease is never longer
	 * than the longest a request may ask for. */
	if (cJSON_IsString(by) && cJSON_IsNumber(since) && cJSON_IsNumber(until) &&
	    until->valuedouble > (double)now &&
	    until->valuedouble <= (double)now + DESK_TAKEOVER_MAX_S * 1000.0) {
		o->take_until_ms = (long long)until->valuedouble;
		o->take_since_ms = (long long)since->valuedouble;
		snprintf(o->take_by, sizeof(o->take_by), "%s", by->valuestring);
	} else {
		unlink(o->lease_path);
	}
	cJSON_Delete(j);
}

/* Ends a lease whose time is up, with its event; under mu. */
static void expire_locked(struct desk_obs *o)
{
	if (!o->take_until_ms || clock_wall_ms() < o->take_until_ms)
		return;
	o->take_until_ms = 0;
	lease_save_locked(o);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddFalseToObject(j, "active");
	cJSON_AddStringToObject(j, "reason", "expired");
	desk_obs_emit_locked(o, "takeover", j);
	cJSON_Delete(j);
}

void desk_obs_expire(struct desk_obs *o)
{
	pthread_mutex_lock(&o->mu);
	expire_locked(o);
	pthread_mutex_unlock(&o->mu);
}

static cJSON *takeover_json_locked(struct desk_obs *o)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	long long now = clock_wall_ms();
	cJSON_AddBoolToObject(j, "active", o->take_until_ms != 0);
	if (o->take_until_ms) {
		cJSON_AddStringToObject(j, "by", o->take_by);
		cJSON_AddNumberToObject(j, "since", (double)o->take_since_ms);
		cJSON_AddNumberToObject(j, "expires_at", (double)o->take_until_ms);
		cJSON_AddNumberToObject(
		    j, "ttl_left_ms",
		    (double)(o->take_until_ms > now ? o->take_until_ms - now : 0));
	}
	return j;
}

int desk_obs_takeover(struct desk_obs *o, int64_t ttl_s, const char *by, struct err *e)
{
	if (ttl_s < 1 || ttl_s > DESK_TAKEOVER_MAX_S)
		return err_set(e, ERR_INVALID, EINVAL, "field 'ttl_s' must be 1-%d",
			       DESK_TAKEOVER_MAX_S);
	pthread_mutex_lock(&o->mu);
	expire_locked(o);
	long long now = clock_wall_ms();
	if (!o->take_until_ms)
		o->take_since_ms = now;
	o->take_until_ms = now + ttl_s * 1000;
	snprintf(o->take_by, sizeof(o->take_by), "%s", by ? by : "api");
	lease_save_locked(o);
	cJSON *j = takeover_json_locked(o);
	desk_obs_emit_locked(o, "takeover", j);
	cJSON_Delete(j);
	pthread_mutex_unlock(&o->mu);
	return 0;
}

int desk_obs_release(struct desk_obs *o)
{
	pthread_mutex_lock(&o->mu);
	expire_locked(o);
	int was = o->take_until_ms != 0;
	if (was) {
		o->take_until_ms = 0;
		lease_save_locked(o);
		cJSON *j = cJSON_CreateObject();
		cJSON_AddFalseToObject(j, "active");
		cJSON_AddStringToObject(j, "reason", "released");
		desk_obs_emit_locked(o, "takeover", j);
		cJSON_Delete(j);
	}
	pthread_mutex_unlock(&o->mu);
	return was;
}

cJSON *desk_obs_takeover_json(struct desk_obs *o)
{
	pthread_mutex_lock(&o->mu);
	expire_locked(o);
	cJSON *j = takeover_json_locked(o);
	pthread_mutex_unlock(&o->mu);
	return j;
}

/* ---- the action log ---- */

/* What only looks: neither logged nor refused during a takeover. */
static int is_read(const char *name)
{
	static const char *const reads[] = {"cursor",	     "windows", "wait_window", "wait",
					    "get_clipboard", "apps",	NULL};
	for (size_t i = 0; reads[i]; i++)
		if (strcmp(name, reads[i]) == 0)
			return 1;
	return 0;
}

int desk_obs_begin(struct desk *d, const char *name, struct desk_obs_act *a, struct err *e)
{
	*a = (struct desk_obs_act){.name = name};
	if (!d->obs || d->depth++ > 0 || is_read(name))
		return 0;
	struct desk_obs *o = d->obs;
	pthread_mutex_lock(&o->mu);
	expire_locked(o);
	long long until = o->take_until_ms;
	pthread_mutex_unlock(&o->mu);
	if (until) {
		d->depth--;
		return err_set(e, ERR_TAKEN_OVER, EBUSY,
			       "a person has taken the desktop over (for %lld s more): agent "
			       "actions are refused until it is released",
			       (until - clock_wall_ms() + 999) / 1000);
	}
	a->logged = 1;
	a->time_ms = clock_wall_ms();
	a->frame_before = capture_frame(d->cap);
	return 0;
}

/* A copy of `v` fit for the log: long strings cut, typed text redacted. */
static cJSON *param_copy(const cJSON *v, int sensitive)
{
	if (cJSON_IsString(v)) {
		size_t n = strlen(v->valuestring);
		if (n <= PARAM_STR_MAX)
			return cJSON_CreateString(v->valuestring);
		char *cut = strndup(v->valuestring, PARAM_STR_MAX);
		cJSON *s = cut ? cJSON_CreateString(cut) : NULL;
		free(cut);
		return s;
	}
	if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
		return cJSON_Duplicate(v, 0);
	cJSON *c = cJSON_IsObject(v) ? cJSON_CreateObject() : cJSON_CreateArray();
	const cJSON *it;
	cJSON_ArrayForEach(it, v)
	{
		cJSON *x;
		if (sensitive && it->string && strcmp(it->string, "text") == 0)
			x = cJSON_CreateString("[redacted]");
		else
			x = param_copy(it, sensitive);
		if (!x)
			continue;
		if (it->string)
			cJSON_AddItemToObject(c, it->string, x);
		else
			cJSON_AddItemToArray(c, x);
	}
	return c;
}

static int is_sensitive(const struct desk *d, const cJSON *args)
{
	return d->sensitive || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "sensitive"));
}

void desk_obs_end(struct desk *d, struct desk_obs_act *a, const cJSON *args, int r,
		  const struct err *e)
{
	if (!d->obs)
		return;
	d->depth--;
	if (!a->logged)
		return;
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return;
	cJSON_AddNumberToObject(j, "time", (double)a->time_ms);
	cJSON_AddStringToObject(j, "route", d->route);
	cJSON_AddStringToObject(j, "action", a->name);
	cJSON *p = args ? param_copy(args, is_sensitive(d, args)) : cJSON_CreateObject();
	cJSON_DeleteItemFromObjectCaseSensitive(p, "agent_display");
	cJSON_AddItemToObject(j, "params", p);
	cJSON_AddNumberToObject(j, "frame_before", (double)a->frame_before);
	cJSON_AddNumberToObject(j, "frame", (double)capture_frame(d->cap));
	cJSON_AddBoolToObject(j, "ok", r == 0);
	if (r < 0)
		cJSON_AddStringToObject(j, "error", e && e->msg[0] ? e->msg : "failed");
	struct desk_obs *o = d->obs;
	pthread_mutex_lock(&o->mu);
	desk_obs_emit_locked(o, "action", j);
	for (size_t i = 0; i < DESK_OBS_SINKS; i++)
		if (o->sinks[i].fn)
			o->sinks[i].fn(o->sinks[i].cls, j);
	pthread_mutex_unlock(&o->mu);
	cJSON_Delete(j);
}
