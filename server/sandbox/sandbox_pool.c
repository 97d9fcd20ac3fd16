/* sandbox_pool: warm desktops (sandbox.h, "the warm pool").
 *
 * A slot is one pool: a --warm-pool display size, or a template with a
 * warm_pool.  Each slot has a generation, unique for the pool's life: a
 * member started for a slot that was replaced or deleted meanwhile finds
 * no slot of its generation and is deleted instead of being kept. */
#include "sandbox.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/args.h"
#include "common/clock.h"
#include "common/log.h"

/* After a failed start, that slot waits this long before trying again
 * (the others go on). */
#define POOL_RETRY_MS 2000
/* A replacement starts this long after the last claim, so that a burst of
 * claims is answered before starts compete with it for the cores. */
#define POOL_QUIET_MS 20

struct pool_slot {
	struct pool_size size; /* size.count: how many to keep */
	/* The template (a template slot), "" for a --warm-pool size. */
	char tmpl[SANDBOX_TEMPLATE_NAME_MAX + 1];
	uint64_t gen;
	struct sandbox *ready[POOL_MAX_PER_SIZE];
	unsigned n;
	long long retry_at; /* monotonic ms; 0: no failure to wait out */
	char error[256];    /* why the last start failed; "" after a success */
	struct pool_slot *next;
};

struct pool {
	struct sandboxes *s;
	struct sandbox_templates *templates;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stopping;
	pthread_t thread;
	struct pool_slot slots[POOL_MAX_SIZES];
	size_t n_slots;
	struct pool_slot *tslots; /* the templates', allocated */
	uint64_t next_gen;
	long long quiet_until; /* monotonic ms */
};

int pool_size_parse(const char *arg, struct pool_size *out, struct err *e)
{
	int64_t v;
	char count[32];
	const char *colon = strchr(arg, ':');
	size_t cl = colon ? (size_t)(colon - arg) : strlen(arg);
	if (cl == 0 || cl >= sizeof(count))
		return err_set(e, ERR_INVALID, EINVAL, "warm pool '%s' is not N or N:WxH", arg);
	memcpy(count, arg, cl);
	count[cl] = '\0';
	if (args_parse_int(count, 0, POOL_MAX_PER_SIZE, &v) < 0)
		return err_set(e, ERR_INVALID, EINVAL, "warm pool count '%s' must be 0 to %d",
			       count, POOL_MAX_PER_SIZE);
	out->count = (unsigned)v;
	out->width = 1280;
	out->height = 800;
	if (colon) {
		unsigned w, h;
		char tail;
		if (sscanf(colon + 1, "%ux%u%c", &w, &h, &tail) != 2 || w < 320 || w > 4096 ||
		    h < 200 || h > 4096)
			return err_set(e, ERR_INVALID, EINVAL,
				       "warm pool size '%s' must be WxH within 320x200-4096x4096",
				       colon + 1);
		out->width = w;
		out->height = h;
	}
	return 0;
}

static void pool_free_slots(struct pool *p);

/* The slot of generation `gen`, or NULL; p->mu held. */
static struct pool_slot *slot_by_gen(struct pool *p, uint64_t gen)
{
	for (size_t i = 0; i < p->n_slots; i++)
		if (p->slots[i].gen == gen)
			return &p->slots[i];
	for (struct pool_slot *t = p->tslots; t; t = t->next)
		if (t->gen == gen)
			return t;
	return NULL;
}

static struct pool_slot *slot_by_template(struct pool *p, const char *name)
{
	for (struct pool_slot *t = p->tslots; t; t = t->next)
		if (strcmp(t->tmpl, name) == 0)
			return t;
	return NULL;
}

/* A --warm-pool member: the create defaults at the slot's size. */
static int start_sized(struct pool *p, const struct pool_size *size, struct sandbox **out,
		       struct err *e)
{
	struct sandbox_spec spec;
	cJSON *empty = cJSON_CreateObject();
	int r = empty ? sandbox_spec_parse(empty, &spec, e)
		      : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_Delete(empty);
	if (r < 0)
		return r;
	spec.width = size->width;
	spec.height = size->height;
	return sandbox_create_pooled(p->s, &spec, 0, out, e);
}

/* A template's member: made as a create naming the template would be,
 * its files placed and its startup commands run. */
static int start_templated(struct pool *p, const char *name, struct sandbox **out, struct err *e)
{
	cJSON *req = cJSON_CreateObject(), *create = NULL;
	struct sandbox_template_extra extra = {0};
	struct sandbox_spec spec;
	int r = req && cJSON_AddStringToObject(req, "template", name)
		    ? 0
		    : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	r = r ?: sandbox_template_expand(p->templates, req, &create, &extra, e);
	cJSON_Delete(req);
	r = r ?: sandbox_spec_parse(create, &spec, e);
	cJSON_Delete(create);
	r = r ?: sandbox_create_pooled(p->s, &spec, 1, out, e);
	if (r == 0 && sandbox_template_apply(*out, &extra, e) < 0) {
		r = err_code(e);
		sandbox_discard(p->s, *out);
		sandbox_put(*out);
		*out = NULL;
	}
	sandbox_template_extra_release(&extra);
	return r;
}

/* The next slot to start a member for, or NULL with *wait_ms how long to
 * wait (-1: until woken); p->mu held.  Slots that failed wait out their
 * retry time without holding the others up. */
static struct pool_slot *next_slot(struct pool *p, long long now, long long *wait_ms)
{
	*wait_ms = -1;
	if (now < p->quiet_until) {
		*wait_ms = p->quiet_until - now;
		return NULL;
	}
	struct pool_slot *t = p->tslots;
	for (size_t i = 0; i < p->n_slots || t; i++) {
		struct pool_slot *slot = i < p->n_slots ? &p->slots[i] : t;
		if (i >= p->n_slots)
			t = t->next;
		if (slot->n >= slot->size.count)
			continue;
		if (slot->retry_at <= now)
			return slot;
		if (*wait_ms < 0 || slot->retry_at - now < *wait_ms)
			*wait_ms = slot->retry_at - now;
	}
	return NULL;
}

/* Keeps the new member `sb` started for generation `gen`, or deletes it
 * when its slot is gone or full; p->mu held, dropped while deleting. */
static void keep_member(struct pool *p, uint64_t gen, struct sandbox *sb)
{
	struct pool_slot *slot = p->stopping ? NULL : slot_by_gen(p, gen);
	if (slot && slot->n < slot->size.count && slot->n < POOL_MAX_PER_SIZE) {
		slot->ready[slot->n++] = sb;
		slot->error[0] = '\0';
		slot->retry_at = 0;
		return;
	}
	pthread_mutex_unlock(&p->mu);
	sandbox_discard(p->s, sb);
	sandbox_put(sb);
	pthread_mutex_lock(&p->mu);
}

/* Keeps every slot full, one start at a time (starts compete for the same
 * cores as the requests being served). */
static void *refill(void *arg)
{
	struct pool *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stopping) {
		long long wait_ms;
		struct pool_slot *slot = next_slot(p, clock_mono_ms(), &wait_ms);
		if (!slot) {
			if (wait_ms < 0) {
				pthread_cond_wait(&p->cv, &p->mu);
			} else {
				struct timespec until = clock_wall_after(wait_ms);
				pthread_cond_timedwait(&p->cv, &p->mu, &until);
			}
			continue;
		}
		uint64_t gen = slot->gen;
		struct pool_size size = slot->size;
		char tmpl[sizeof(slot->tmpl)];
		memcpy(tmpl, slot->tmpl, sizeof(tmpl));
		pthread_mutex_unlock(&p->mu);
		struct err e = ERR_INIT;
		struct sandbox *sb = NULL;
		int r =
		    tmpl[0] ? start_templated(p, tmpl, &sb, &e) : start_sized(p, &size, &sb, &e);
		pthread_mutex_lock(&p->mu);
		if (r == 0) {
			keep_member(p, gen, sb);
			continue;
		}
		log_msg(LOG_LEVEL_WARN, "warm pool%s%s: %s", tmpl[0] ? " of template " : "", tmpl,
			e.msg);
		if ((slot = slot_by_gen(p, gen))) {
			slot->retry_at = clock_mono_ms() + POOL_RETRY_MS;
			snprintf(slot->error, sizeof(slot->error), "%s", e.msg);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Deletes the members of `slot` (p->mu held, dropped meanwhile: `slot`
 * must be out of the pool's lists or have its gen changed first). */
static void drain(struct pool *p, struct sandbox **ready, unsigned n)
{
	pthread_mutex_unlock(&p->mu);
	for (unsigned k = 0; k < n; k++) {
		sandbox_discard(p->s, ready[k]);
		sandbox_put(ready[k]);
	}
	pthread_mutex_lock(&p->mu);
}

void pool_template_sync(struct pool *p, const char *name)
{
	if (!p || !p->templates)
		return;
	cJSON *t = NULL;
	struct err e = ERR_INIT;
	unsigned want = 0;
	if (sandbox_template_get(p->templates, name, &t, &e) == 0) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, "warm_pool");
		want = cJSON_IsNumber(v) && v->valuedouble > 0 ? (unsigned)v->valuedouble : 0;
	}
	cJSON_Delete(t);
	if (want > POOL_TEMPLATE_MAX)
		want = POOL_TEMPLATE_MAX;
	pthread_mutex_lock(&p->mu);
	struct pool_slot **pp = &p->tslots;
	while (*pp && strcmp((*pp)->tmpl, name) != 0)
		pp = &(*pp)->next;
	struct pool_slot *slot = *pp;
	struct sandbox *old[POOL_MAX_PER_SIZE];
	unsigned n_old = 0;
	if (slot) {
		/* The template changed: what was made from it is stale. */
		n_old = slot->n;
		memcpy(old, slot->ready, sizeof(old[0]) * n_old);
		slot->n = 0;
		slot->gen = ++p->next_gen;
		slot->size.count = want;
		slot->retry_at = 0;
		slot->error[0] = '\0';
		if (!want) {
			*pp = slot->next;
			free(slot);
		}
	} else if (want && (slot = calloc(1, sizeof(*slot)))) {
		snprintf(slot->tmpl, sizeof(slot->tmpl), "%s", name);
		slot->size.count = want;
		slot->gen = ++p->next_gen;
		slot->next = p->tslots;
		p->tslots = slot;
	}
	pthread_cond_signal(&p->cv);
	drain(p, old, n_old);
	pthread_mutex_unlock(&p->mu);
}

int pool_new(struct pool **out, struct sandboxes *s, struct sandbox_templates *t,
	     const struct pool_size *sizes, size_t n, struct err *e)
{
	if (n > POOL_MAX_SIZES)
		return err_set(e, ERR_INVALID, E2BIG, "at most %d warm pool sizes", POOL_MAX_SIZES);
	struct pool *p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	p->s = s;
	p->templates = t;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	for (size_t i = 0; i < n; i++) {
		p->slots[p->n_slots].size = sizes[i];
		p->slots[p->n_slots++].gen = ++p->next_gen;
	}
	cJSON *list = t ? sandbox_templates_json(t) : NULL;
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		const char *name =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
		if (name && cJSON_GetObjectItemCaseSensitive(it, "warm_pool"))
			pool_template_sync(p, name);
	}
	cJSON_Delete(list);
	int r = pthread_create(&p->thread, NULL, refill, p);
	if (r != 0) {
		pool_free_slots(p);
		free(p);
		return err_set(e, ERR_INTERNAL, r, "starting the warm pool thread");
	}
	*out = p;
	return 0;
}

/* Claims `sb`, taken from the slot of generation `gen`. */
static int claim(struct pool *p, struct sandbox *sb, uint64_t gen, const struct sandbox_spec *spec,
		 struct sandbox **out, struct err *e)
{
	int r = sandbox_claim(p->s, sb, spec, e);
	/* The replacement starts once the claim is answered, not competing
	 * with it for the cores. */
	pthread_mutex_lock(&p->mu);
	p->quiet_until = clock_mono_ms() + POOL_QUIET_MS;
	pthread_cond_signal(&p->cv);
	if (r < 0 && e->kind != ERR_NOT_RUNNING) {
		/* Over the limit: it goes back for the next request. */
		struct pool_slot *slot = slot_by_gen(p, gen);
		if (slot && slot->n < POOL_MAX_PER_SIZE) {
			slot->ready[slot->n++] = sb;
			sb = NULL;
		}
	}
	pthread_mutex_unlock(&p->mu);
	if (r == 0) {
		*out = sb;
		return 1;
	}
	if (sb) {
		/* It failed while waiting (or its slot went): deleted. */
		sandbox_discard(p->s, sb);
		sandbox_put(sb);
	}
	if (e->kind == ERR_NOT_RUNNING) {
		err_clear(e); /* the request is served cold */
		return 0;
	}
	return err_code(e);
}

int pool_take(struct pool *p, const struct sandbox_spec *spec, struct sandbox **out, struct err *e)
{
	if (!p)
		return 0;
	pthread_mutex_lock(&p->mu);
	struct sandbox *sb = NULL;
	uint64_t gen = 0;
	for (size_t i = 0; i < p->n_slots && !sb; i++) {
		struct pool_slot *slot = &p->slots[i];
		if (slot->n && sandbox_spec_matches_pool(spec, slot->ready[slot->n - 1])) {
			sb = slot->ready[--slot->n];
			gen = slot->gen;
		}
	}
	pthread_mutex_unlock(&p->mu);
	return sb ? claim(p, sb, gen, spec, out, e) : 0;
}

int pool_template_claimable(const cJSON *req)
{
	/* What a claim sets (sandbox_claim); the rest was fixed when the
	 * member was made. */
	static const char *const fields[] = {"template",      "timeout_s", "on_timeout",
					     "auto_resume",   "restart",   "agent_display",
					     "name",	      "metadata"};
	const cJSON *it;
	cJSON_ArrayForEach(it, req)
	{
		size_t i = 0;
		while (i < sizeof(fields) / sizeof(fields[0]) && strcmp(fields[i], it->string))
			i++;
		if (i == sizeof(fields) / sizeof(fields[0]))
			return 0;
	}
	return cJSON_IsObject(req);
}

int pool_take_template(struct pool *p, const char *name, const struct sandbox_spec *spec,
		       struct sandbox **out, struct err *e)
{
	if (!p)
		return 0;
	pthread_mutex_lock(&p->mu);
	struct pool_slot *slot = slot_by_template(p, name);
	struct sandbox *sb = slot && slot->n ? slot->ready[--slot->n] : NULL;
	uint64_t gen = slot ? slot->gen : 0;
	pthread_mutex_unlock(&p->mu);
	return sb ? claim(p, sb, gen, spec, out, e) : 0;
}

void pool_template_json(struct pool *p, const char *name, cJSON *j)
{
	unsigned n = 0;
	char error[256] = "";
	if (p) {
		pthread_mutex_lock(&p->mu);
		struct pool_slot *slot = slot_by_template(p, name);
		if (slot) {
			n = slot->n;
			memcpy(error, slot->error, sizeof(error));
		}
		pthread_mutex_unlock(&p->mu);
	}
	cJSON_AddNumberToObject(j, "warm_pool_ready", n);
	if (error[0])
		cJSON_AddStringToObject(j, "warm_pool_error", error);
}

/* Deletes every member and frees the template slots (no thread runs). */
static void pool_free_slots(struct pool *p)
{
	for (size_t i = 0; i < p->n_slots; i++)
		for (unsigned k = 0; k < p->slots[i].n; k++) {
			sandbox_discard(p->s, p->slots[i].ready[k]);
			sandbox_put(p->slots[i].ready[k]);
		}
	while (p->tslots) {
		struct pool_slot *t = p->tslots;
		p->tslots = t->next;
		for (unsigned k = 0; k < t->n; k++) {
			sandbox_discard(p->s, t->ready[k]);
			sandbox_put(t->ready[k]);
		}
		free(t);
	}
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
}

void pool_free(struct pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	pool_free_slots(p);
	free(p);
}

unsigned pool_ready(struct pool *p)
{
	if (!p)
		return 0;
	unsigned n = 0;
	pthread_mutex_lock(&p->mu);
	for (size_t i = 0; i < p->n_slots; i++)
		n += p->slots[i].n;
	for (struct pool_slot *t = p->tslots; t; t = t->next)
		n += t->n;
	pthread_mutex_unlock(&p->mu);
	return n;
}
