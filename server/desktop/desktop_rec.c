/* Recordings (desktop.h): one thread per recording looks at the mirror
 * `fps` times a second, copies the screen only when its frame counter
 * moved (only the bands changed since the last copy), and hands it to the
 * encoder (desktop_rec_enc.c) stamped with its time; an idle screen costs
 * a look at a counter per tick.  The thread enters the sandbox only for
 * the copy (host->use), so a recording never holds up stop or delete: when
 * the sandbox stops, the next look fails and the recording ends.
 *
 * Files, in the directory the caller names: <rid>.mp4|.webm, <rid>.json
 * (what the listing says: written at the start and at the end) and
 * <rid>.actions.jsonl (the sidecar: one action log entry a line, with its
 * "offset_ms" from the start). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "common/clock.h"
#include "common/fs.h"
#include "desktop.h"
#include "internal.h"

#define REC_FLUSH_MS 1000

static void rec_path(const char *dir, const char *rid, const char *ext, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s%s", dir, rid, ext);
}

int desk_rec_id_ok(const char *rid)
{
	size_t n = strlen(rid);
	return n == DESK_REC_ID_LEN && strspn(rid, "0123456789abcdef") == n;
}

/* ---- <rid>.json ---- */

static int write_meta(const struct desk_rec *r, const char *state, long long stopped_ms,
		      struct err *e)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", r->id);
	cJSON_AddStringToObject(j, "format", r->webm ? "webm" : "mp4");
	cJSON_AddNumberToObject(j, "fps", r->fps);
	cJSON_AddNumberToObject(j, "width", r->w & ~1u);
	cJSON_AddNumberToObject(j, "height", r->h & ~1u);
	cJSON_AddNumberToObject(j, "started_at", (double)r->started_ms);
	cJSON_AddStringToObject(j, "state", state);
	if (stopped_ms) {
		cJSON_AddNumberToObject(j, "stopped_at", (double)stopped_ms);
		cJSON_AddNumberToObject(j, "duration_ms", (double)(stopped_ms - r->started_ms));
		cJSON_AddNumberToObject(j, "frames", (double)r->frames);
	}
	if (r->reason[0])
		cJSON_AddStringToObject(j, "reason", r->reason);
	char *text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (!text)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	char path[PATH_MAX];
	rec_path(r->dir, r->id, ".json", path, sizeof(path));
	int rc = fs_write_atomic(path, text, strlen(text), 0600, e);
	free(text);
	return rc;
}

/* ---- the sidecar sink (under obs->mu) ---- */

static void sidecar_sink(void *cls, const cJSON *entry)
{
	struct desk_rec *r = cls;
	cJSON *c = cJSON_Duplicate(entry, 1);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(entry, "time");
	if (!c)
		return;
	cJSON_AddNumberToObject(c, "offset_ms",
				cJSON_IsNumber(t) ? t->valuedouble - (double)r->started_ms : 0);
	char *line = cJSON_PrintUnformatted(c);
	cJSON_Delete(c);
	if (line) {
		fputs(line, r->sidecar);
		fputc('\n', r->sidecar);
		fflush(r->sidecar);
	}
	free(line);
}

/* ---- the thread ---- */

/* Waits for the tick at `next` (monotonic ms); 1 when told to stop. */
static int wait_tick(struct desk_rec *r, long long next)
{
	pthread_mutex_lock(&r->mu);
	while (!r->stop && clock_mono_ms() < next) {
		struct timespec ts = clock_wall_after(next - clock_mono_ms());
		pthread_cond_timedwait(&r->cv, &r->mu, &ts);
	}
	int stop = r->stop;
	pthread_mutex_unlock(&r->mu);
	return stop;
}

/* One look at the mirror: copies what changed after *last into `buf`;
 * 1 when it did, 0 when nothing changed, negative when the sandbox is
 * gone. */
static int look(struct desk_rec *r, uint8_t *buf, uint8_t *rows, uint64_t *last, struct err *e)
{
	struct capture *cap;
	if (r->host.use(r->host.cls, &cap, e) < 0)
		return err_code(e);
	int got = 0;
	uint64_t f = capture_frame(cap);
	if (f != *last && capture_width(cap) == r->w && capture_height(cap) == r->h) {
		struct capture_rect full = {0, 0, r->w, r->h};
		memset(rows, 0, r->h);
		if (capture_snapshot_since(cap, full, buf, (size_t)r->w * 4, *last, rows, &f, e) ==
		    0) {
			*last = f;
			got = 1;
		}
		err_clear(e);
	}
	r->host.unuse(r->host.cls);
	return got;
}

static void finish(struct desk_rec *r, uint8_t *buf, int have, long long t0)
{
	struct err e = ERR_INIT;
	long long end = clock_mono_ms() - t0;
	/* The last image again at the end, so the file lasts as long as the
	 * recording did. */
	if (have && end > rec_enc_last_pts(r->enc) && !r->reason[0])
		rec_enc_frame(r->enc, buf, (size_t)r->w * 4, end, &e);
	err_clear(&e);
	if (rec_enc_close(r->enc, &e) < 0 && !r->reason[0])
		snprintf(r->reason, sizeof(r->reason), "%s", e.msg);
	r->enc = NULL;
	desk_obs_sink_remove(r->obs, sidecar_sink, r);
	fclose(r->sidecar);
	r->sidecar = NULL;
	err_clear(&e);
	write_meta(r, r->reason[0] && strncmp(r->reason, "the sandbox", 11) ? "failed" : "stopped",
		   clock_wall_ms(), &e);
}

static void *rec_main(void *arg)
{
	struct desk_rec *r = arg;
	uint8_t *buf = calloc((size_t)r->w * r->h, 4), *rows = malloc(r->h);
	long long t0 = clock_mono_ms(), next = t0;
	uint64_t last = 0;
	int have = 0, period = 1000 / r->fps, unflushed = 0;
	long long flushed = t0;
	if (!buf || !rows)
		snprintf(r->reason, sizeof(r->reason), "out of memory");
	while (buf && rows && !wait_tick(r, next)) {
		long long now = clock_mono_ms();
		next += period;
		if (next <= now)
			next = now + period; /* late (a loaded machine): skip ticks */
		struct err e = ERR_INIT;
		int got = look(r, buf, rows, &last, &e);
		if (got < 0) {
			snprintf(r->reason, sizeof(r->reason), "the sandbox stopped: %s", e.msg);
			break;
		}
		if (got && rec_enc_frame(r->enc, buf, (size_t)r->w * 4, now - t0, &e) < 0) {
			snprintf(r->reason, sizeof(r->reason), "%s", e.msg);
			break;
		}
		r->frames += (uint64_t)got;
		have |= got;
		unflushed |= got;
		/* A cut file (deskboxd killed) loses at most the last second. */
		if (unflushed && now - flushed >= REC_FLUSH_MS) {
			if (rec_enc_flush(r->enc, &e) < 0) {
				snprintf(r->reason, sizeof(r->reason), "%s", e.msg);
				break;
			}
			flushed = now;
			unflushed = 0;
		}
	}
	finish(r, buf, have, t0);
	free(buf);
	free(rows);
	r->host.release(r->host.cls);
	pthread_mutex_lock(&r->mu);
	r->done = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* ---- start, stop ---- */

int desk_rec_done(struct desk_rec *r)
{
	pthread_mutex_lock(&r->mu);
	int done = r->done;
	pthread_mutex_unlock(&r->mu);
	return done;
}

static void rec_free(struct desk_rec *r)
{
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

static struct desk_rec *rec_alloc(struct desk_obs *o, const char *dir,
				  const struct desk_rec_opts *ro, uint32_t w, uint32_t h)
{
	struct desk_rec *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	r->webm = ro->webm;
	r->fps = ro->fps;
	r->w = w;
	r->h = h;
	r->obs = o;
	r->started_ms = clock_wall_ms();
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	return r;
}

/* Opens the files and starts the thread; on failure everything is undone
 * but the host, which the caller releases. */
static int rec_begin(struct desk_rec *r, struct err *e)
{
	char path[PATH_MAX];
	if (fs_random_hex(r->id, DESK_REC_ID_LEN / 2, e) < 0 || fs_mkdir_p(r->dir, 0700, e) < 0)
		return err_code(e);
	rec_path(r->dir, r->id, ".actions.jsonl", path, sizeof(path));
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || !(r->sidecar = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", path);
	}
	rec_path(r->dir, r->id, r->webm ? ".webm" : ".mp4", path, sizeof(path));
	int rc = rec_enc_open(&r->enc, path, r->webm, r->w, r->h, r->fps, e);
	if (rc == 0)
		rc = write_meta(r, "recording", 0, e);
	if (rc == 0)
		rc = desk_obs_sink_add(r->obs, sidecar_sink, r, e);
	if (rc == 0 && (errno = pthread_create(&r->thread, NULL, rec_main, r)) != 0) {
		desk_obs_sink_remove(r->obs, sidecar_sink, r);
		rc = err_sys(e, ERR_INTERNAL, errno, "starting the recorder");
	}
	if (rc < 0) {
		rec_enc_free(r->enc);
		fclose(r->sidecar);
		const char *exts[] = {".actions.jsonl", ".json", ".mp4", ".webm"};
		for (size_t i = 0; i < 4; i++) {
			rec_path(r->dir, r->id, exts[i], path, sizeof(path));
			unlink(path);
		}
	}
	return rc;
}

static void reap(struct desk_obs *o);

int desk_rec_start(struct desk_obs *o, const char *dir, const struct desk_rec_opts *ro, uint32_t w,
		   uint32_t h, const struct desk_rec_host *host, cJSON **out, struct err *e)
{
	struct desk_rec *r = rec_alloc(o, dir, ro, w, h);
	if (!r) {
		host->release(host->cls);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	r->host = *host;
	if (rec_begin(r, e) < 0) {
		host->release(host->cls);
		rec_free(r);
		return err_code(e);
	}
	atomic_fetch_add(&o->refs, 1);
	pthread_mutex_lock(&o->mu);
	r->next = o->recs;
	o->recs = r;
	pthread_mutex_unlock(&o->mu);
	reap(o);
	return desk_rec_get(o, dir, r->id, out, e);
}

/* Takes recording `rid` (NULL: any) off o's list; NULL when none. */
static struct desk_rec *unlink_rec(struct desk_obs *o, const char *rid)
{
	pthread_mutex_lock(&o->mu);
	struct desk_rec **pp = &o->recs;
	while (*pp && rid && strcmp((*pp)->id, rid) != 0)
		pp = &(*pp)->next;
	struct desk_rec *r = *pp;
	if (r)
		*pp = r->next;
	pthread_mutex_unlock(&o->mu);
	return r;
}

static void stop_join(struct desk_rec *r)
{
	pthread_mutex_lock(&r->mu);
	r->stop = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	struct desk_obs *o = r->obs;
	rec_free(r);
	desk_obs_put(o);
}

/* Joins the recordings that ended on their own (their sandbox stopped). */
static void reap(struct desk_obs *o)
{
	for (;;) {
		pthread_mutex_lock(&o->mu);
		struct desk_rec *r = o->recs;
		while (r && !desk_rec_done(r))
			r = r->next;
		char rid[DESK_REC_ID_LEN + 1];
		if (r)
			memcpy(rid, r->id, sizeof(rid));
		pthread_mutex_unlock(&o->mu);
		if (!r || !(r = unlink_rec(o, rid)))
			return;
		stop_join(r);
	}
}

int desk_rec_stop(struct desk_obs *o, const char *dir, const char *rid, cJSON **out, struct err *e)
{
	if (!desk_rec_id_ok(rid))
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no recording '%.*s'", UTF8_CUT(rid, 40));
	struct desk_rec *r = unlink_rec(o, rid);
	if (r)
		stop_join(r);
	return desk_rec_get(o, dir, rid, out, e);
}

void desk_obs_stop_recordings(struct desk_obs *o)
{
	struct desk_rec *r;
	while ((r = unlink_rec(o, NULL)))
		stop_join(r);
}
