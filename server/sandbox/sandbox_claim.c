/* sandbox_claim: a warm-pool member becomes an ordinary sandbox.
 *
 * The claim is on the path of a create's answer, so it does not rename and
 * fsync a new sandbox.json (a file and a directory sync: two journal
 * commits, ~4 ms on a virtio disk).  Every pool member gets instead, while
 * it is made in the background, a claim record: <dir>/claim.json,
 * CLAIM_BYTES of zeros, written and synced.  A claim overwrites its first
 * bytes with what sandbox.json would now hold and fdatasync()s it: an
 * overwrite of allocated blocks leaves no metadata that fdatasync must
 * write (only the mtime changes), so it costs one data write and a cache
 * flush (~0.3 ms), and the create is answered only after it, so a crash
 * of deskboxd or of the machine never loses a sandbox a client was told
 * about.
 *
 * sandbox.json keeps saying "pooled" until the sandbox's next write of it.
 * At start-up (sandbox_load.c) a "pooled" sandbox.json with a claim record
 * that is not all zeros is a claimed sandbox, with the record's state; one
 * whose record is all zeros was never handed out and is removed.  A record
 * torn by a power cut (a device that writes a 4 KiB block in parts) still
 * counts as claimed: the sandbox keeps the pool's spec rather than being
 * lost. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"

/* Room for sandbox.json with its env; a bigger one is written the slow
 * way (sandbox_persist). */
#define CLAIM_BYTES 16384

static void claim_path(const struct sandbox *sb, char *buf, size_t size)
{
	sandbox_path(sb, buf, size, "claim.json");
}

static int write_all_at(int fd, const char *p, size_t n)
{
	off_t off = 0;
	while (n) {
		ssize_t w = pwrite(fd, p, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		off += w;
		n -= (size_t)w;
	}
	return 0;
}

int sandbox_claim_prepare(struct sandbox *sb, struct err *e)
{
	char path[PATH_MAX];
	claim_path(sb, path, sizeof(path));
	_cleanup_fd_ int fd =
	    open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", path);
	/* Written, not ftruncate()d: the blocks must be allocated now so that
	 * the claim's overwrite changes no block map. */
	_cleanup_free_ char *zeros = calloc(1, CLAIM_BYTES);
	if (!zeros)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r = write_all_at(fd, zeros, CLAIM_BYTES);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r < 0)
		return err_sys(e, ERR_INTERNAL, -r, "writing '%s'", path);
	return 0;
}

/* Records the claim durably (see the top of the file). */
static int claim_record(struct sandbox *sb, struct err *e)
{
	_cleanup_free_ char *text = sandbox_persist_text(sb, SANDBOX_RUNNING);
	if (!text)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	size_t n = strlen(text);
	if (n >= CLAIM_BYTES)
		return sandbox_persist(sb, SANDBOX_RUNNING, e);
	char path[PATH_MAX];
	claim_path(sb, path, sizeof(path));
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening '%s'", path);
	int r = write_all_at(fd, text, n);
	if (r == 0 && fdatasync(fd) < 0)
		r = -errno;
	if (r < 0)
		return err_sys(e, ERR_INTERNAL, -r, "writing '%s'", path);
	return 0;
}

int sandbox_claim_load(struct sandbox *sb, cJSON **j)
{
	char path[PATH_MAX];
	claim_path(sb, path, sizeof(path));
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct err e = ERR_INIT;
	if (fs_read_file(path, CLAIM_BYTES + 1, &text, &len, &e) < 0)
		return 0; /* no record (or an unreadable one): never claimed */
	size_t used = strnlen(text, len);
	int any = used > 0;
	for (size_t i = used; i < len && !any; i++)
		any = text[i] != '\0';
	if (!any)
		return 0;
	cJSON *rec = used ? cJSON_ParseWithLength(text, used) : NULL;
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(rec, "id");
	if (cJSON_IsObject(rec) && cJSON_IsString(id) && strcmp(id->valuestring, sb->id) == 0) {
		cJSON_Delete(*j);
		*j = rec;
		return 1;
	}
	cJSON_Delete(rec);
	log_msg(LOG_LEVEL_WARN,
		"sandbox %s: its claim record is unreadable; keeping it with the "
		"warm pool's settings",
		sb->id);
	cJSON_DeleteItemFromObjectCaseSensitive(*j, "pooled");
	return 1;
}

/* Back into the pool after a failed claim; with s->mu and op held. */
static void unclaim(struct sandboxes *s, struct sandbox *sb)
{
	s->count--;
	sb->pooled = 1;
	sb->spec.name[0] = '\0';
	pthread_mutex_lock(&sb->mu);
	cJSON_Delete(sb->spec.metadata);
	sb->spec.metadata = NULL;
	pthread_mutex_unlock(&sb->mu);
}

int sandbox_claim(struct sandboxes *s, struct sandbox *sb, const struct sandbox_spec *req,
		  struct err *e)
{
	pthread_mutex_lock(&s->mu);
	if (s->count >= s->cfg.max_sandboxes) {
		pthread_mutex_unlock(&s->mu);
		return err_set(e, ERR_LIMIT, EAGAIN, "sandbox limit of %u reached",
			       s->cfg.max_sandboxes);
	}
	/* The name's check and its taking are one step under s->mu. */
	if (sandbox_name_claim_locked(s, req->name, e) < 0) {
		pthread_mutex_unlock(&s->mu);
		return err_code(e);
	}
	pthread_rwlock_wrlock(&sb->op);
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status st = sb->status;
	pthread_mutex_unlock(&sb->mu);
	if (st != SANDBOX_RUNNING) {
		/* Its init died while it waited in the pool. */
		pthread_rwlock_unlock(&sb->op);
		pthread_mutex_unlock(&s->mu);
		return sandbox_not_running(sb, st, e);
	}
	s->count++;
	sb->pooled = 0;
	sb->created_at = (long long)time(NULL);
	sb->spec.agent_width = req->agent_width;
	sb->spec.agent_height = req->agent_height;
	sb->spec.restart_on_failure = req->restart_on_failure;
	sb->spec.timeout_s = req->timeout_s;
	sb->spec.on_timeout = req->on_timeout;
	sb->spec.auto_resume = req->auto_resume;
	memcpy(sb->spec.name, req->name, sizeof(sb->spec.name));
	cJSON *meta = req->metadata ? cJSON_Duplicate(req->metadata, 1) : NULL;
	pthread_mutex_lock(&sb->mu);
	sb->spec.metadata = meta;
	pthread_mutex_unlock(&sb->mu);
	pthread_mutex_unlock(&s->mu);
	int r = sb->net_at_claim ? sandbox_net_claim(sb, req, e) : 0;
	const char *what = "network at claim";
	if (r == 0) {
		sandbox_timeout_arm(sb);
		r = claim_record(sb, e);
		what = "claim record";
	}
	if (r < 0) {
		/* Served cold instead (pool_take), where the error shows. */
		pthread_mutex_lock(&s->mu);
		unclaim(s, sb);
		pthread_mutex_unlock(&s->mu);
		pthread_rwlock_unlock(&sb->op);
		log_msg(LOG_LEVEL_WARN, "sandbox %s: %s: %s", sb->id, what, e->msg);
		return err_set(e, ERR_NOT_RUNNING, EAGAIN, "%s failed", what);
	}
	pthread_rwlock_unlock(&sb->op);
	return 0;
}
