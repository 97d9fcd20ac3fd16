#include "viewer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <nettle/sha1.h>

#include "common/fs.h"
#include "common/text.h"

struct vnc_token {
	char hash[2 * SHA1_DIGEST_SIZE + 1]; /* hex SHA-1 of the token */
	char scope[VNC_SCOPE_MAX + 1];	     /* "": the desktop */
	int view_only;
	long long expires_at;
	unsigned id;
};

struct vnc_viewer {
	struct vnc_entry *entry;
	unsigned token_id;
	int stop_fd; /* eventfd */
	struct vnc_viewer *next;
};

/* One sandbox's tokens and viewers; exists while it has either. */
struct vnc_entry {
	char sid[VNC_SID_MAX + 1];
	struct vnc_token tokens[VNC_MAX_TOKENS];
	size_t n_tokens;
	struct vnc_viewer *viewers;
	unsigned n_viewers;
	struct vnc_entry *next;
};

struct vnc {
	pthread_mutex_t mu;
	char *api_token;
	struct vnc_entry *entries;
	unsigned next_id;
	int stopping;
};

int vnc_new(struct vnc **out, const char *api_token, struct err *e)
{
	struct vnc *v = calloc(1, sizeof(*v));
	if (!v || !(v->api_token = strdup(api_token))) {
		free(v);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	pthread_mutex_init(&v->mu, NULL);
	v->next_id = 1;
	*out = v;
	return 0;
}

void vnc_free(struct vnc *v)
{
	if (!v)
		return;
	while (v->entries) {
		struct vnc_entry *en = v->entries;
		v->entries = en->next;
		free(en);
	}
	pthread_mutex_destroy(&v->mu);
	free(v->api_token);
	free(v);
}

/* Tokens are random 256-bit values, so only preimage resistance matters,
 * which SHA-1 still has. */
static void hash_hex(const char *token, char *out)
{
	struct sha1_ctx s;
	uint8_t d[SHA1_DIGEST_SIZE];
	sha1_init(&s);
	sha1_update(&s, strlen(token), (const uint8_t *)token);
	sha1_digest(&s, sizeof(d), d);
	hex_encode(d, sizeof(d), out);
}

static long long now_s(void)
{
	return (long long)time(NULL);
}

/* Drops expired tokens (mu held). */
static void entry_expire(struct vnc_entry *en, long long now)
{
	size_t k = 0;
	for (size_t i = 0; i < en->n_tokens; i++)
		if (en->tokens[i].expires_at > now)
			en->tokens[k++] = en->tokens[i];
	en->n_tokens = k;
}

static struct vnc_entry *entry_find(struct vnc *v, const char *sid, int create)
{
	for (struct vnc_entry *en = v->entries; en; en = en->next)
		if (strcmp(en->sid, sid) == 0)
			return en;
	if (!create || strlen(sid) > VNC_SID_MAX)
		return NULL;
	struct vnc_entry *en = calloc(1, sizeof(*en));
	if (!en)
		return NULL;
	snprintf(en->sid, sizeof(en->sid), "%s", sid);
	en->next = v->entries;
	v->entries = en;
	return en;
}

/* Frees an entry with neither tokens nor viewers (mu held). */
static void entry_gc(struct vnc *v, struct vnc_entry *en)
{
	if (en->n_tokens || en->viewers)
		return;
	for (struct vnc_entry **pp = &v->entries; *pp; pp = &(*pp)->next) {
		if (*pp == en) {
			*pp = en->next;
			free(en);
			return;
		}
	}
}

int vnc_is_api_token(const struct vnc *v, const char *token)
{
	return token && text_equal_secret(token, v->api_token);
}

int vnc_token_create(struct vnc *v, const char *sid, int view_only, long long ttl_s, char *token,
		     long long *expires_at, struct err *e)
{
	return vnc_token_create_scoped(v, sid, "", view_only, ttl_s, token, expires_at, e);
}

int vnc_token_create_scoped(struct vnc *v, const char *sid, const char *scope, int view_only,
			    long long ttl_s, char *token, long long *expires_at, struct err *e)
{
	if (strlen(scope) > VNC_SCOPE_MAX)
		return err_set(e, ERR_INVALID, EINVAL, "viewer token scope too long");
	char hash[2 * SHA1_DIGEST_SIZE + 1];
	do {
		if (fs_random_hex(token, VNC_TOKEN_HEX / 2, e) < 0)
			return err_code(e);
		/* An API token given on the command line could be anything,
		 * even 64 hex digits: a viewer token must never open the API. */
	} while (vnc_is_api_token(v, token));
	hash_hex(token, hash);
	long long now = now_s();
	pthread_mutex_lock(&v->mu);
	struct vnc_entry *en = entry_find(v, sid, 1);
	if (!en) {
		pthread_mutex_unlock(&v->mu);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	entry_expire(en, now);
	if (en->n_tokens >= VNC_MAX_TOKENS) {
		pthread_mutex_unlock(&v->mu);
		return err_set(e, ERR_LIMIT, EAGAIN,
			       "sandbox '%s' has %d live viewer tokens; revoke some first", sid,
			       VNC_MAX_TOKENS);
	}
	struct vnc_token *t = &en->tokens[en->n_tokens++];
	memcpy(t->hash, hash, sizeof(hash));
	snprintf(t->scope, sizeof(t->scope), "%s", scope);
	t->view_only = view_only;
	t->expires_at = now + ttl_s;
	t->id = v->next_id++;
	*expires_at = t->expires_at;
	pthread_mutex_unlock(&v->mu);
	return 0;
}

/* Index of the token with hash `hash` in `en`, or -1.  Every stored hash is
 * compared in full whatever matched, so timing says nothing about which. */
static long token_lookup(const struct vnc_entry *en, const char *hash)
{
	long found = -1;
	for (size_t i = 0; i < en->n_tokens; i++)
		if (text_equal_secret(hash, en->tokens[i].hash))
			found = (long)i;
	return found;
}

static void viewer_wake(struct vnc_viewer *vw)
{
	uint64_t one = 1;
	if (write(vw->stop_fd, &one, sizeof(one)) < 0) {
		/* An eventfd write fails only at a counter of 2^64-1. */
	}
}

int vnc_token_revoke(struct vnc *v, const char *sid, const char *token, struct err *e)
{
	if (strlen(token) > VNC_TOKEN_MAX_LEN)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no such viewer token");
	char hash[2 * SHA1_DIGEST_SIZE + 1];
	hash_hex(token, hash);
	pthread_mutex_lock(&v->mu);
	struct vnc_entry *en = entry_find(v, sid, 0);
	long i = -1;
	if (en) {
		entry_expire(en, now_s());
		i = token_lookup(en, hash);
	}
	if (i < 0) {
		pthread_mutex_unlock(&v->mu);
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no such viewer token");
	}
	unsigned id = en->tokens[i].id;
	en->tokens[i] = en->tokens[--en->n_tokens];
	for (struct vnc_viewer *vw = en->viewers; vw; vw = vw->next)
		if (vw->token_id == id)
			viewer_wake(vw);
	entry_gc(v, en);
	pthread_mutex_unlock(&v->mu);
	return 0;
}

int vnc_token_check(struct vnc *v, const char *sid, const char *token, struct vnc_grant *g,
		    struct err *e)
{
	return vnc_token_check_scoped(v, sid, "", token, g, e);
}

int vnc_token_check_scoped(struct vnc *v, const char *sid, const char *scope, const char *token,
			   struct vnc_grant *g, struct err *e)
{
	if (!token || !*token)
		return err_set(e, ERR_UNAUTHORIZED, 0, "a viewer token is required");
	if (strlen(token) > VNC_TOKEN_MAX_LEN)
		return err_set(e, ERR_UNAUTHORIZED, 0, "invalid viewer token");
	char hash[2 * SHA1_DIGEST_SIZE + 1];
	hash_hex(token, hash);
	pthread_mutex_lock(&v->mu);
	struct vnc_entry *en = entry_find(v, sid, 0);
	long i = -1;
	if (en) {
		entry_expire(en, now_s());
		i = token_lookup(en, hash);
	}
	/* A token opens what it was made for only: a terminal's token not
	 * the desktop, nor another terminal. */
	if (i >= 0 && strcmp(en->tokens[i].scope, scope) != 0)
		i = -1;
	if (i >= 0) {
		g->view_only = en->tokens[i].view_only;
		g->expires_at = en->tokens[i].expires_at;
		g->token_id = en->tokens[i].id;
	}
	pthread_mutex_unlock(&v->mu);
	if (i < 0)
		return err_set(e, ERR_UNAUTHORIZED, 0,
			       "invalid viewer token (unknown, expired, revoked or for another "
			       "sandbox)");
	return 0;
}

int vnc_viewer_add(struct vnc *v, const char *sid, const struct vnc_grant *g,
		   struct vnc_viewer **out, struct err *e)
{
	struct vnc_viewer *vw = calloc(1, sizeof(*vw));
	if (!vw)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	vw->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vw->stop_fd < 0) {
		int saved = errno;
		free(vw);
		return err_sys(e, ERR_INTERNAL, saved, "eventfd");
	}
	vw->token_id = g->token_id;
	pthread_mutex_lock(&v->mu);
	struct vnc_entry *en = entry_find(v, sid, 1);
	int r = 0;
	if (!en)
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	else if (v->stopping)
		r = err_set(e, ERR_UNAVAILABLE, ESHUTDOWN, "deskboxd is shutting down");
	else if (en->n_viewers >= VNC_MAX_VIEWERS)
		r = err_set(e, ERR_LIMIT, EAGAIN, "sandbox '%s' already has %d viewers", sid,
			    VNC_MAX_VIEWERS);
	if (r < 0) {
		if (en)
			entry_gc(v, en);
		pthread_mutex_unlock(&v->mu);
		close(vw->stop_fd);
		free(vw);
		return r;
	}
	vw->entry = en;
	vw->next = en->viewers;
	en->viewers = vw;
	en->n_viewers++;
	pthread_mutex_unlock(&v->mu);
	*out = vw;
	return 0;
}

int vnc_viewer_stop_fd(const struct vnc_viewer *vw)
{
	return vw->stop_fd;
}

void vnc_viewer_remove(struct vnc *v, struct vnc_viewer *vw)
{
	if (!vw)
		return;
	pthread_mutex_lock(&v->mu);
	struct vnc_entry *en = vw->entry;
	for (struct vnc_viewer **pp = &en->viewers; *pp; pp = &(*pp)->next) {
		if (*pp == vw) {
			*pp = vw->next;
			en->n_viewers--;
			break;
		}
	}
	entry_gc(v, en);
	pthread_mutex_unlock(&v->mu);
	close(vw->stop_fd);
	free(vw);
}

void vnc_stop_all(struct vnc *v)
{
	pthread_mutex_lock(&v->mu);
	v->stopping = 1;
	for (struct vnc_entry *en = v->entries; en; en = en->next)
		for (struct vnc_viewer *vw = en->viewers; vw; vw = vw->next)
			viewer_wake(vw);
	pthread_mutex_unlock(&v->mu);
}

void vnc_sweep(struct vnc *v, int (*alive)(void *cls, const char *sid), void *cls)
{
	long long now = now_s();
	pthread_mutex_lock(&v->mu);
	struct vnc_entry *en = v->entries;
	while (en) {
		struct vnc_entry *next = en->next;
		entry_expire(en, now);
		if (!alive(cls, en->sid))
			en->n_tokens = 0;
		entry_gc(v, en);
		en = next;
	}
	pthread_mutex_unlock(&v->mu);
}
