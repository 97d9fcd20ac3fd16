/* The observer's event backlog (desktop.h): a ring of the last
 * DESK_OBS_BACKLOG events, each at most EVENT_MAX bytes of JSON, so its
 * memory is bounded whatever the readers do; readers copy events out and
 * never hold the ring. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "desktop.h"
#include "internal.h"

/* An event longer than this (an action with long parameters) is kept as
 * its type and ids only. */
#define EVENT_MAX 8192

void desk_obs_emit_locked(struct desk_obs *o, const char *type, const cJSON *j)
{
	char *text = cJSON_PrintUnformatted(j);
	if (text && strlen(text) > EVENT_MAX) {
		free(text);
		cJSON *s = cJSON_CreateObject();
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "action");
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "frame");
		if (cJSON_IsString(a))
			cJSON_AddStringToObject(s, "action", a->valuestring);
		if (cJSON_IsNumber(f))
			cJSON_AddNumberToObject(s, "frame", f->valuedouble);
		cJSON_AddTrueToObject(s, "truncated");
		text = cJSON_PrintUnformatted(s);
		cJSON_Delete(s);
	}
	if (!text)
		return;
	struct desk_obs_event *ev = &o->ring[o->next_id % DESK_OBS_BACKLOG];
	free(ev->json);
	ev->id = o->next_id++;
	snprintf(ev->type, sizeof(ev->type), "%s", type);
	ev->json = text;
	pthread_cond_broadcast(&o->cv);
}

void desk_obs_emit(struct desk_obs *o, const char *type, const cJSON *j)
{
	pthread_mutex_lock(&o->mu);
	desk_obs_emit_locked(o, type, j);
	pthread_mutex_unlock(&o->mu);
}

void desk_obs_wake(struct desk_obs *o)
{
	pthread_mutex_lock(&o->mu);
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

void desk_obs_poll(struct desk_obs *o, struct capture *cap)
{
	desk_obs_expire(o);
	pthread_mutex_lock(&o->mu);
	uint64_t frame = capture_frame(cap);
	if (frame != o->seen_frame) {
		/* A frame counter that went back is a new mirror (the bridge
		 * was restarted): everything may have changed. */
		uint64_t since = frame > o->seen_frame ? o->seen_frame : 0;
		struct capture_rect r;
		capture_damage(cap, since, &r);
		cJSON *j = cJSON_CreateObject();
		cJSON_AddNumberToObject(j, "frame", (double)frame);
		cJSON *rects = cJSON_AddArrayToObject(j, "rects");
		cJSON *one = cJSON_CreateObject();
		cJSON_AddNumberToObject(one, "x", r.x);
		cJSON_AddNumberToObject(one, "y", r.y);
		cJSON_AddNumberToObject(one, "w", r.w);
		cJSON_AddNumberToObject(one, "h", r.h);
		cJSON_AddItemToArray(rects, one);
		desk_obs_emit_locked(o, "frame", j);
		cJSON_Delete(j);
		o->seen_frame = frame;
	}
	int32_t x, y;
	capture_pointer(cap, &x, &y);
	if (!o->seen_pointer || x != o->seen_x || y != o->seen_y) {
		if (o->seen_pointer) {
			cJSON *j = cJSON_CreateObject();
			cJSON_AddNumberToObject(j, "x", x);
			cJSON_AddNumberToObject(j, "y", y);
			desk_obs_emit_locked(o, "pointer", j);
			cJSON_Delete(j);
		}
		o->seen_pointer = 1;
		o->seen_x = x;
		o->seen_y = y;
	}
	pthread_mutex_unlock(&o->mu);
}

static struct timespec mono_after(int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

int desk_obs_read(struct desk_obs *o, uint64_t after, struct desk_obs_event *ev, int max,
		  int timeout_ms, uint64_t *next_id)
{
	struct timespec until = mono_after(timeout_ms);
	pthread_mutex_lock(&o->mu);
	/* An id not given yet is from before a restart of deskboxd. */
	while (after < o->next_id && o->next_id == after + 1 && timeout_ms > 0) {
		if (pthread_cond_timedwait(&o->cv, &o->mu, &until) == ETIMEDOUT)
			break;
	}
	*next_id = o->next_id;
	uint64_t oldest = o->next_id > DESK_OBS_BACKLOG ? o->next_id - DESK_OBS_BACKLOG : 1;
	if (after >= o->next_id || after + 1 < oldest) {
		pthread_mutex_unlock(&o->mu);
		return -ERANGE;
	}
	int n = 0;
	for (uint64_t id = after + 1; id < o->next_id && n < max; id++) {
		const struct desk_obs_event *src = &o->ring[id % DESK_OBS_BACKLOG];
		char *copy = strdup(src->json);
		if (!copy)
			break;
		ev[n] = (struct desk_obs_event){.id = src->id, .json = copy};
		memcpy(ev[n].type, src->type, sizeof(ev[n].type));
		n++;
	}
	pthread_mutex_unlock(&o->mu);
	return n;
}

/* ---- windows ---- */

static const cJSON *by_id(const cJSON *list, double id)
{
	const cJSON *w;
	cJSON_ArrayForEach(w, list)
	{
		const cJSON *i = cJSON_GetObjectItemCaseSensitive(w, "id");
		if (cJSON_IsNumber(i) && i->valuedouble == id)
			return w;
	}
	return NULL;
}

static void window_event(struct desk_obs *o, const char *change, const cJSON *w,
			 const char *old_title)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "change", change);
	cJSON_AddItemToObject(j, "window", cJSON_Duplicate(w, 1));
	if (old_title)
		cJSON_AddStringToObject(j, "old_title", old_title);
	desk_obs_emit_locked(o, "window", j);
	cJSON_Delete(j);
}

static const char *str(const cJSON *w, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(w, name);
	return cJSON_IsString(v) ? v->valuestring : "";
}

/* The events from `old` to `now` (both lists of windows); under mu. */
static void diff_windows(struct desk_obs *o, const cJSON *old, const cJSON *now)
{
	const cJSON *w;
	cJSON_ArrayForEach(w, now)
	{
		double id = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(w, "id"));
		const cJSON *was = by_id(old, id);
		int focused = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(w, "focused"));
		if (!was) {
			window_event(o, "opened", w, NULL);
		} else if (strcmp(str(w, "title"), str(was, "title")) != 0) {
			window_event(o, "retitled", w, str(was, "title"));
		}
		if (focused &&
		    (!was || !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(was, "focused"))))
			window_event(o, "focused", w, NULL);
	}
	cJSON_ArrayForEach(w, old)
	{
		double id = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(w, "id"));
		if (!by_id(now, id))
			window_event(o, "closed", w, NULL);
	}
}

void desk_obs_windows(struct desk_obs *o, struct desk *d)
{
	long long now = clock_mono_ms();
	pthread_mutex_lock(&o->mu);
	int due = !o->windows_at || now - o->windows_at >= DESK_OBS_WINDOWS_MS;
	if (due)
		o->windows_at = now;
	pthread_mutex_unlock(&o->mu);
	if (!due)
		return;
	cJSON *none = cJSON_CreateObject(), *res = cJSON_CreateObject();
	struct err e = ERR_INIT;
	int r = none && res ? desk_x_action(d, "windows", NULL, none, res, &e) : -ENOMEM;
	cJSON *list = r == 0 ? cJSON_DetachItemFromObjectCaseSensitive(res, "windows") : NULL;
	cJSON_Delete(none);
	cJSON_Delete(res);
	if (!cJSON_IsArray(list)) {
		cJSON_Delete(list);
		return;
	}
	pthread_mutex_lock(&o->mu);
	if (o->windows)
		diff_windows(o, o->windows, list);
	cJSON_Delete(o->windows);
	o->windows = list;
	pthread_mutex_unlock(&o->mu);
}
