/* Share tokens for the ports of a sandbox (viewer.h, "share tokens").
 * A fixed table under one mutex: SHARE_MAX_TOKENS is small, and a check is
 * one pass comparing hashes in constant time each. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nettle/sha2.h>

#include "viewer.h"
#include "common/fs.h"
#include "common/text.h"

struct share_token {
	int used;
	char hash[2 * SHA256_DIGEST_SIZE + 1];
	char sid[VNC_SID_MAX + 1];
	unsigned port;
	long long expires_at;
};

struct shares {
	pthread_mutex_t mu;
	struct share_token t[SHARE_MAX_TOKENS];
};

int shares_new(struct shares **out, struct err *e)
{
	struct shares *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_init(&s->mu, NULL);
	*out = s;
	return 0;
}

void shares_free(struct shares *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static void share_hash(const char *token, char *out)
{
	struct sha256_ctx c;
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_init(&c);
	sha256_update(&c, strlen(token), (const uint8_t *)token);
	sha256_digest(&c, sizeof(d), d);
	hex_encode(d, sizeof(d), out);
}

/* Frees expired tokens and those of sandboxes gone (mu held). */
static void share_expire(struct shares *s, long long now, int (*alive)(void *, const char *),
			 void *cls)
{
	for (size_t i = 0; i < SHARE_MAX_TOKENS; i++)
		if (s->t[i].used && (s->t[i].expires_at <= now || (alive && !alive(cls, s->t[i].sid))))
			s->t[i].used = 0;
}

int share_token_create(struct shares *s, const char *sid, unsigned port, long long ttl_s,
		       char *token, long long *expires_at, struct err *e)
{
	if (strlen(sid) > VNC_SID_MAX)
		return err_set(e, ERR_INVALID, 0, "sandbox id too long");
	if (fs_random_hex(token, VNC_TOKEN_HEX / 2, e) < 0)
		return err_code(e);
	long long now = (long long)time(NULL);
	pthread_mutex_lock(&s->mu);
	share_expire(s, now, NULL, NULL);
	struct share_token *slot = NULL;
	unsigned mine = 0;
	for (size_t i = 0; i < SHARE_MAX_TOKENS; i++) {
		if (!s->t[i].used && !slot)
			slot = &s->t[i];
		else if (s->t[i].used && strcmp(s->t[i].sid, sid) == 0)
			mine++;
	}
	if (!slot || mine >= SHARE_MAX_PER_SANDBOX) {
		pthread_mutex_unlock(&s->mu);
		return err_set(e, ERR_LIMIT, EAGAIN, "too many live share tokens (%s); revoke some",
			       slot ? "for this sandbox" : "in all");
	}
	*slot = (struct share_token){.used = 1, .port = port, .expires_at = now + ttl_s};
	share_hash(token, slot->hash);
	snprintf(slot->sid, sizeof(slot->sid), "%s", sid);
	*expires_at = slot->expires_at;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* The live token of (sid, port) whose hash is `hash`, or NULL (mu held). */
static struct share_token *share_find(struct shares *s, const char *sid, unsigned port,
				      const char *hash)
{
	struct share_token *hit = NULL;
	for (size_t i = 0; i < SHARE_MAX_TOKENS; i++)
		if (s->t[i].used && text_equal_secret(s->t[i].hash, hash) &&
		    strcmp(s->t[i].sid, sid) == 0 && s->t[i].port == port)
			hit = &s->t[i];
	return hit;
}

int share_token_check(struct shares *s, const char *sid, unsigned port, const char *token,
		      struct err *e)
{
	if (!token || !*token)
		return err_set(e, ERR_UNAUTHORIZED, 0, "missing API token or share token");
	if (strlen(token) > VNC_TOKEN_MAX_LEN)
		return err_set(e, ERR_UNAUTHORIZED, 0, "invalid share token");
	char hash[2 * SHA256_DIGEST_SIZE + 1];
	share_hash(token, hash);
	pthread_mutex_lock(&s->mu);
	share_expire(s, (long long)time(NULL), NULL, NULL);
	int ok = share_find(s, sid, port, hash) != NULL;
	pthread_mutex_unlock(&s->mu);
	return ok ? 0 : err_set(e, ERR_UNAUTHORIZED, 0, "invalid, expired or revoked share token");
}

int share_token_revoke(struct shares *s, const char *sid, unsigned port, const char *token,
		       struct err *e)
{
	char hash[2 * SHA256_DIGEST_SIZE + 1];
	share_hash(token, hash);
	pthread_mutex_lock(&s->mu);
	struct share_token *t = share_find(s, sid, port, hash);
	if (t)
		t->used = 0;
	pthread_mutex_unlock(&s->mu);
	return t ? 0 : err_set(e, ERR_NOT_FOUND, 0, "no live share token like that for port %u", port);
}

void shares_sweep(struct shares *s, int (*alive)(void *cls, const char *sid), void *cls)
{
	pthread_mutex_lock(&s->mu);
	share_expire(s, (long long)time(NULL), alive, cls);
	pthread_mutex_unlock(&s->mu);
}
