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

/* After a failed start, wait this long before trying again. */
#define POOL_RETRY_MS 2000

struct pool_slot {
	struct pool_size size;
	struct sandbox *ready[POOL_MAX_PER_SIZE];
	unsigned n;
};

struct pool {
	struct sandboxes *s;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stopping;
	pthread_t thread;
	struct pool_slot slots[POOL_MAX_SIZES];
	size_t n_slots;
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

/* The spec a pool member is started with: the create defaults at this
 * size. */
static int slot_spec(const struct pool_slot *slot, struct sandbox_spec *spec, struct err *e)
{
	cJSON *empty = cJSON_CreateObject();
	int r = empty ? sandbox_spec_parse(empty, spec, e)
		      : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_Delete(empty);
	spec->width = slot->size.width;
	spec->height = slot->size.height;
	return r;
}

/* Keeps every slot full, one start at a time (starts compete for the same
 * cores as the requests being served). */
static void *refill(void *arg)
{
	struct pool *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stopping) {
		struct pool_slot *slot = NULL;
		for (size_t i = 0; i < p->n_slots && !slot; i++)
			if (p->slots[i].n < p->slots[i].size.count)
				slot = &p->slots[i];
		if (!slot) {
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		struct err e = ERR_INIT;
		struct sandbox_spec spec;
		struct sandbox *sb = NULL;
		int r = slot_spec(slot, &spec, &e);
		if (r == 0)
			r = sandbox_create_pooled(p->s, &spec, &sb, &e);
		if (r < 0) {
			log_msg(LOG_LEVEL_WARN, "warm pool: %s", e.msg);
			clock_sleep_ms(POOL_RETRY_MS);
		}
		pthread_mutex_lock(&p->mu);
		if (r == 0) {
			if (p->stopping || slot->n >= POOL_MAX_PER_SIZE) {
				pthread_mutex_unlock(&p->mu);
				sandbox_discard(p->s, sb);
				sandbox_put(sb);
				pthread_mutex_lock(&p->mu);
			} else {
				slot->ready[slot->n++] = sb;
			}
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int pool_new(struct pool **out, struct sandboxes *s, const struct pool_size *sizes, size_t n,
	     struct err *e)
{
	if (n > POOL_MAX_SIZES)
		return err_set(e, ERR_INVALID, E2BIG, "at most %d warm pool sizes", POOL_MAX_SIZES);
	struct pool *p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	p->s = s;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	for (size_t i = 0; i < n; i++)
		p->slots[p->n_slots++].size = sizes[i];
	int r = pthread_create(&p->thread, NULL, refill, p);
	if (r != 0) {
		free(p);
		return err_set(e, ERR_INTERNAL, r, "starting the warm pool thread");
	}
	*out = p;
	return 0;
}

int pool_take(struct pool *p, const struct sandbox_spec *spec, struct sandbox **out, struct err *e)
{
	if (!p)
		return 0;
	pthread_mutex_lock(&p->mu);
	struct sandbox *sb = NULL;
	struct pool_slot *from = NULL;
	for (size_t i = 0; i < p->n_slots && !sb; i++) {
		struct pool_slot *slot = &p->slots[i];
		if (slot->n && sandbox_spec_matches_pool(spec, slot->ready[slot->n - 1])) {
			sb = slot->ready[--slot->n];
			from = slot;
		}
	}
	if (sb)
		pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (!sb)
		return 0;
	int r = sandbox_claim(p->s, sb, spec, e);
	if (r < 0 && e->kind == ERR_NOT_RUNNING) {
		/* It failed while waiting: gone, and the request is served cold. */
		err_clear(e);
		sandbox_discard(p->s, sb);
		sandbox_put(sb);
		return 0;
	}
	if (r < 0) {
		/* Over the limit: it goes back for the next request. */
		pthread_mutex_lock(&p->mu);
		if (from->n < POOL_MAX_PER_SIZE)
			from->ready[from->n++] = sb;
		else
			sb = NULL;
		pthread_mutex_unlock(&p->mu);
		return err_code(e);
	}
	*out = sb;
	return 1;
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
	for (size_t i = 0; i < p->n_slots; i++) {
		for (unsigned k = 0; k < p->slots[i].n; k++) {
			sandbox_discard(p->s, p->slots[i].ready[k]);
			sandbox_put(p->slots[i].ready[k]);
		}
	}
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
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
	pthread_mutex_unlock(&p->mu);
	return n;
}
