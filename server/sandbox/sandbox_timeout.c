/* sandbox_timeout: every sandbox's deadline ("timeout_s", "on_timeout"),
 * fired by one thread.
 *
 * A deadline is wall-clock milliseconds (sb->expires_ms), persisted in
 * sandbox.json as "expires_at" (RFC 3339, UTC), so it survives a restart of
 * deskboxd; one that passed while deskboxd was down fires at start.  The
 * thread sleeps on a condition variable until the earliest deadline or a
 * change (a new sandbox, POST /timeout), then scans the registry once: no
 * polling.  The action (stop, delete, pause) runs in a short-lived worker of
 * its own, so a slow stop does not delay the next deadline. */
#include "common/text.h"
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"

struct sandbox_timer {
	struct sandboxes *s;
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* a deadline changed, or stopping */
	pthread_cond_t idle; /* no worker left */
	int stopping, changed;
	unsigned workers;
	pthread_t thread;
};

static const char *const on_timeout_names[] = {
    [SANDBOX_ON_TIMEOUT_STOP] = "stop",
    [SANDBOX_ON_TIMEOUT_DELETE] = "delete",
    [SANDBOX_ON_TIMEOUT_PAUSE] = "pause",
};

static void timer_kick(struct sandboxes *s)
{
	struct sandbox_timer *t = s->timer;
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	t->changed = 1;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

/* Writes sandbox.json again with its status now (its deadline cleared). */
static void persist_now(struct sandbox *sb)
{
	pthread_rwlock_wrlock(&sb->op);
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status st = sb->status;
	pthread_mutex_unlock(&sb->mu);
	struct err e = ERR_INIT;
	if (st != SANDBOX_DELETING && sandbox_persist(sb, st, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
	pthread_rwlock_unlock(&sb->op);
}

struct fire {
	struct sandbox_timer *t;
	struct sandbox *sb;
};

static void *fire_main(void *arg)
{
	struct fire *f = arg;
	struct sandbox_timer *t = f->t;
	struct sandbox *sb = f->sb, *got = NULL;
	struct err e = ERR_INIT;
	enum sandbox_on_timeout what = sb->spec.on_timeout;
	log_msg(LOG_LEVEL_INFO, "sandbox %s: its timeout passed: %s", sb->id,
		on_timeout_names[what]);
	int r;
	if (what == SANDBOX_ON_TIMEOUT_DELETE)
		r = sandbox_delete(t->s, sb->id, &e);
	else if (what == SANDBOX_ON_TIMEOUT_PAUSE)
		r = sandbox_pause(t->s, sb->id, &got, &e);
	else
		r = sandbox_stop(t->s, sb->id, &got, &e);
	if (r < 0)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: on timeout: %s", sb->id, e.msg);
	if (what != SANDBOX_ON_TIMEOUT_DELETE)
		persist_now(sb);
	sandbox_put(got);
	sandbox_put(sb);
	free(f);
	pthread_mutex_lock(&t->mu);
	if (--t->workers == 0)
		pthread_cond_broadcast(&t->idle);
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

/* Starts the worker for `sb` (whose reference it takes); t->mu held. */
static void start_fire(struct sandbox_timer *t, struct sandbox *sb)
{
	struct fire *f = malloc(sizeof(*f));
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t th;
	if (f) {
		*f = (struct fire){t, sb};
		t->workers++;
		if (pthread_create(&th, &attr, fire_main, f) != 0) {
			t->workers--;
			free(f);
			f = NULL;
		}
	}
	pthread_attr_destroy(&attr);
	if (!f) {
		log_msg(LOG_LEVEL_ERROR, "sandbox %s: cannot start its timeout action", sb->id);
		sandbox_put(sb);
	}
}

/* The earliest deadline still to come (0: none).  A sandbox whose deadline
 * has passed is handed out in *due (a reference, its deadline cleared so it
 * fires once), at most one per call. */
static long long scan(struct sandboxes *s, long long now, struct sandbox **due)
{
	long long next = 0;
	*due = NULL;
	pthread_mutex_lock(&s->mu);
	for (struct sandbox *sb = s->list; sb; sb = sb->next) {
		if (sb->pooled)
			continue;
		pthread_mutex_lock(&sb->mu);
		long long x = sb->status == SANDBOX_DELETING ? 0 : sb->expires_ms;
		if (x && x <= now && !*due) {
			sb->expires_ms = 0;
			atomic_fetch_add(&sb->refs, 1);
			*due = sb;
		} else if (x && x > now && (!next || x < next)) {
			next = x;
		} else if (x && x <= now) {
			next = now; /* another one due: scan again at once */
		}
		pthread_mutex_unlock(&sb->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return next;
}

static void *timer_main(void *arg)
{
	struct sandbox_timer *t = arg;
	pthread_mutex_lock(&t->mu);
	while (!t->stopping) {
		t->changed = 0;
		pthread_mutex_unlock(&t->mu);
		struct sandbox *due;
		long long next = scan(t->s, clock_wall_ms(), &due);
		pthread_mutex_lock(&t->mu);
		if (due) {
			if (t->stopping)
				sandbox_put(due);
			else
				start_fire(t, due);
			continue;
		}
		if (t->changed || t->stopping)
			continue;
		if (!next) {
			pthread_cond_wait(&t->cv, &t->mu);
		} else {
			/* The condition variable's clock is CLOCK_REALTIME, the
			 * deadlines' own. */
			struct timespec ts = {.tv_sec = next / 1000,
					      .tv_nsec = (next % 1000) * 1000000};
			pthread_cond_timedwait(&t->cv, &t->mu, &ts);
		}
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

int sandbox_timer_new(struct sandboxes *s, struct err *e)
{
	struct sandbox_timer *t = calloc(1, sizeof(*t));
	if (!t)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	t->s = s;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	pthread_cond_init(&t->idle, NULL);
	int r = pthread_create(&t->thread, NULL, timer_main, t);
	if (r != 0) {
		free(t);
		return err_sys(e, ERR_INTERNAL, r, "starting the timeout thread");
	}
	s->timer = t;
	return 0;
}

void sandbox_timer_free(struct sandboxes *s)
{
	struct sandbox_timer *t = s->timer;
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	t->stopping = 1;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->thread, NULL);
	pthread_mutex_lock(&t->mu);
	while (t->workers)
		pthread_cond_wait(&t->idle, &t->mu);
	pthread_mutex_unlock(&t->mu);
	s->timer = NULL;
	pthread_cond_destroy(&t->cv);
	pthread_cond_destroy(&t->idle);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

void sandbox_timeout_arm(struct sandbox *sb)
{
	if (sb->spec.timeout_s == SANDBOX_TIMEOUT_DEFAULT)
		sb->spec.timeout_s = sb->owner->cfg.default_timeout_s;
	int64_t t = sb->spec.timeout_s;
	pthread_mutex_lock(&sb->mu);
	sb->expires_ms = t > 0 ? clock_wall_ms() + t * 1000 : 0;
	pthread_mutex_unlock(&sb->mu);
	if (t > 0)
		timer_kick(sb->owner);
}

int sandbox_set_timeout(struct sandboxes *s, const char *id, int64_t timeout_s,
			struct sandbox **out, struct err *e)
{
	struct sandbox *sb;
	enum sandbox_status st;
	/* Exclusive: no other write of sandbox.json in between. */
	if (sandbox_get_exclusive(s, id, &sb, &st, e) < 0)
		return err_code(e);
	if (st != SANDBOX_DELETING) {
		pthread_mutex_lock(&sb->mu);
		sb->spec.timeout_s = timeout_s;
		sb->expires_ms = timeout_s > 0 ? clock_wall_ms() + timeout_s * 1000 : 0;
		pthread_mutex_unlock(&sb->mu);
	}
	int r = st == SANDBOX_DELETING ? err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", id)
				       : sandbox_persist(sb, st, e);
	if (sandbox_put_exclusive(sb, r, out) < 0)
		return err_wrap(e, "setting the timeout");
	timer_kick(s);
	return 0;
}

void sandbox_timeout_json(struct sandbox *sb, cJSON *j)
{
	pthread_mutex_lock(&sb->mu);
	long long x = sb->expires_ms;
	pthread_mutex_unlock(&sb->mu);
	int64_t t = sb->spec.timeout_s;
	cJSON_AddNumberToObject(j, "timeout_s", t > 0 ? (double)t : 0);
	cJSON_AddStringToObject(j, "on_timeout", on_timeout_names[sb->spec.on_timeout]);
	cJSON_AddBoolToObject(j, "auto_resume", sb->spec.auto_resume);
	if (!x) {
		cJSON_AddNullToObject(j, "expires_at");
		return;
	}
	char when[CLOCK_RFC3339_MAX];
	clock_rfc3339(x, when, sizeof(when));
	cJSON_AddStringToObject(j, "expires_at", when);
}

void sandbox_timeout_load(struct sandbox *sb, const cJSON *j)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "expires_at");
	sb->expires_ms = cJSON_IsString(v) ? clock_parse_rfc3339(v->valuestring) : 0;
	if (cJSON_IsString(v) && !sb->expires_ms)
		log_msg(LOG_LEVEL_WARN, "sandbox %s: unreadable expires_at '%.*s'", sb->id,
			UTF8_CUT(v->valuestring, 40));
}
