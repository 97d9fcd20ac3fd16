/* Resident helpers (process.h): one long-lived program per name and
 * sandbox, started at the first call and kept, answering one request at
 * a time over its stdin and stdout, each message framed by its length (a
 * u32, big-endian).  A helper that died (its sandbox stopped, it left
 * when idle, a crash), hung past a deadline or answered something it
 * should not is killed with everything it started; the next call starts
 * it afresh. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

#define HELPER_NAME_MAX 32

struct process_helper {
	char name[HELPER_NAME_MAX];
	struct process_helper *next; /* in the table, under table->mu */
	pthread_mutex_t busy;	     /* one request (or start) at a time */
	struct process_run *run;     /* under busy */
};

/* The table's helper `name`, made when there is none (under t->mu). */
static struct process_helper *helper_get(struct process_table *t, const char *name)
{
	pthread_mutex_lock(&t->mu);
	struct process_helper *h = t->helpers;
	while (h && strcmp(h->name, name) != 0)
		h = h->next;
	if (!h && (h = calloc(1, sizeof(*h)))) {
		snprintf(h->name, sizeof(h->name), "%s", name);
		pthread_mutex_init(&h->busy, NULL);
		h->next = t->helpers;
		t->helpers = h;
	}
	pthread_mutex_unlock(&t->mu);
	return h;
}

/* Kills the helper's program and everything it started (under h->busy). */
static void helper_stop(struct process_table *t, struct process_helper *h)
{
	if (!h->run)
		return;
	pthread_mutex_lock(&t->mu);
	if (h->run->cg_live)
		run_cgroup_kill(&h->run->cg);
	pthread_mutex_unlock(&t->mu);
	process_run_free(h->run);
	h->run = NULL;
}

static int helper_start(struct process_table *t, struct process_helper *h,
			const struct process_helper_spec *s, struct err *e)
{
	struct process_opts o = {
	    .argv = s->argv,
	    .env = s->env,
	    .max_output = 4096,
	    .keep_stdin_open = 1,
	};
	return process_start(t, &o, &h->run, e);
}

/* One exchange; -1 when the helper failed it (died, hung, lied). */
static int exchange(struct process_run *run, const char *req, size_t len, long long deadline,
		    size_t max, char **answer, size_t *answer_len)
{
	unsigned char hl[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
			       (unsigned char)(len >> 8), (unsigned char)len};
	if (process_write(run, hl, 4, deadline) < 0 || process_write(run, req, len, deadline) < 0 ||
	    process_read_exact(run, hl, 4, deadline) < 0)
		return -1;
	/* SECURITY: the size comes from inside the sandbox. */
	size_t n = (size_t)hl[0] << 24 | (size_t)hl[1] << 16 | (size_t)hl[2] << 8 | hl[3];
	if (n > max)
		return -1;
	char *buf = malloc(n + 1);
	if (!buf || process_read_exact(run, buf, n, deadline) < 0) {
		free(buf);
		return -1;
	}
	buf[n] = '\0';
	*answer = buf;
	*answer_len = n;
	return 0;
}

int process_helper_call(struct process_table *t, const struct process_helper_spec *s,
			const void *req, size_t len, int timeout_ms, char **answer,
			size_t *answer_len, struct err *e)
{
	*answer = NULL;
	*answer_len = 0;
	if (len > UINT32_MAX)
		return err_set(e, ERR_INVALID, E2BIG, "a request of %zu bytes is too long", len);
	struct process_helper *h = helper_get(t, s->name);
	if (!h)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	long long deadline = clock_mono_ms() + timeout_ms;
	pthread_mutex_lock(&h->busy);
	int r = -1;
	/* A helper kept from before may have gone since (it leaves when idle,
	 * or its sandbox restarted): one more try with a fresh one. */
	for (int attempt = 0; attempt < 2 && r < 0; attempt++) {
		int kept = h->run && !process_client_exited(h->run);
		if (!kept) {
			helper_stop(t, h);
			if (helper_start(t, h, s, e) < 0) {
				pthread_mutex_unlock(&h->busy);
				return err_wrap(e, "starting the sandbox's %s", s->name);
			}
		}
		r = exchange(h->run, req, len, deadline, s->max_answer, answer, answer_len);
		if (r < 0)
			helper_stop(t, h);
		if (!kept || clock_mono_ms() >= deadline)
			break;
	}
	pthread_mutex_unlock(&h->busy);
	if (r == 0)
		return 0;
	if (clock_mono_ms() >= deadline)
		return err_set(e, ERR_TIMEOUT, ETIMEDOUT, "the sandbox's %s took over %d ms",
			       s->name, timeout_ms);
	return err_set(e, ERR_UNAVAILABLE, EPROTO,
		       "the sandbox's %s ended or answered out of turn; it is started afresh at "
		       "the next request",
		       s->name);
}

void process_helper_drop_all(struct process_table *t)
{
	pthread_mutex_lock(&t->mu);
	struct process_helper *h = t->helpers;
	pthread_mutex_unlock(&t->mu);
	/* Helpers stay listed until the table goes: only their programs end. */
	for (; h; h = h->next) {
		pthread_mutex_lock(&h->busy);
		helper_stop(t, h);
		pthread_mutex_unlock(&h->busy);
	}
}

void process_helper_free_all(struct process_table *t)
{
	while (t->helpers) {
		struct process_helper *h = t->helpers;
		t->helpers = h->next;
		process_run_free(h->run);
		pthread_mutex_destroy(&h->busy);
		free(h);
	}
}
