/* secrets_store: the named secrets in <state>/secrets.json (0600). */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/text.h"
#include "common/args.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"

#define STORE_MAX_BYTES (SECRETS_MAX * (SECRETS_VALUE_MAX * 2 + 16384))

static void rec_free(struct secret_rec *r)
{
	if (!r)
		return;
	if (r->value) {
		explicit_bzero(r->value, strlen(r->value));
		free(r->value);
	}
	free(r);
}

int secrets_name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > SECRETS_NAME_MAX || isdigit((unsigned char)name[0]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '_')
			return 0;
	return 1;
}

/* A host pattern: a DNS name, or "*." and one, lowercased into `out`. */
static int host_pattern(const char *in, char *out, struct err *e)
{
	size_t n = strlen(in);
	const char *name = in;
	if (n > 2 && in[0] == '*' && in[1] == '.')
		name += 2;
	if (n == 0 || n > SECRETS_HOST_MAX || strchr(name, '*'))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'hosts': '%.*s' is not a host name or '*.' and one",
			       UTF8_CUT(in, 64));
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.')
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'hosts': '%.*s' is not a host name",
				       UTF8_CUT(in, 64));
	for (size_t i = 0; i <= n; i++)
		out[i] = (char)tolower((unsigned char)in[i]);
	return 0;
}

int secrets_host_match(const char *pattern, const char *host)
{
	if (pattern[0] == '*' && pattern[1] == '.') {
		size_t pl = strlen(pattern + 1), hl = strlen(host); /* ".example.org" */
		return hl > pl && strcasecmp(host + hl - pl, pattern + 1) == 0;
	}
	return strcasecmp(pattern, host) == 0;
}

static struct secret_rec **find(struct secrets *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->recs[i]->name, name) == 0)
			return &s->recs[i];
	return NULL;
}

static cJSON *rec_json(const struct secret_rec *r, int with_value)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", r->name);
	cJSON *h = cJSON_AddArrayToObject(j, "hosts");
	for (size_t i = 0; i < r->n_hosts; i++)
		cJSON_AddItemToArray(h, cJSON_CreateString(r->hosts[i]));
	cJSON_AddBoolToObject(j, "replace_in_body", r->replace_in_body);
	if (with_value) {
		cJSON_AddStringToObject(j, "value", r->value);
		cJSON_AddNumberToObject(j, "created_ms", (double)r->created_ms);
		cJSON_AddNumberToObject(j, "last_used_ms", (double)r->last_used_ms);
		return j;
	}
	char when[32];
	clock_rfc3339(r->created_ms, when, sizeof(when));
	cJSON_AddStringToObject(j, "created_at", when);
	if (r->last_used_ms) {
		clock_rfc3339(r->last_used_ms, when, sizeof(when));
		cJSON_AddStringToObject(j, "last_used_at", when);
	} else {
		cJSON_AddNullToObject(j, "last_used_at");
	}
	return j;
}

/* Under mu. */
static int save(struct secrets *s, struct err *e)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(j, "secrets");
	for (size_t i = 0; i < s->n; i++)
		cJSON_AddItemToArray(arr, rec_json(s->recs[i], 1));
	char *text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (!text)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	size_t len = strlen(text);
	int r = fs_write_atomic(s->path, text, len, 0600, e);
	explicit_bzero(text, len);
	free(text);
	if (r == 0) {
		s->dirty_use = 0;
		s->saved_ms = clock_wall_ms();
	}
	return r < 0 ? err_wrap(e, "saving secrets") : 0;
}

/* Validates `body` into a new record (the caller's). */
static int parse(const cJSON *body, struct secret_rec **out, struct err *e)
{
	static const char *const known[] = {"name", "value", "hosts", "replace_in_body", NULL};
	const cJSON *it;
	if (!cJSON_IsObject(body))
		return err_set(e, ERR_INVALID, EINVAL, "the body must be a JSON object");
	if (args_only(body, NULL, known, e) < 0)
		return err_code(e);
	const char *name, *value;
	int in_body;
	if (args_string(body, "name", SECRETS_NAME_MAX, ARGS_REQUIRED, &name, e) < 0 ||
	    args_string(body, "value", SECRETS_VALUE_MAX, ARGS_REQUIRED, &value, e) < 0 ||
	    args_bool(body, "replace_in_body", 0, &in_body, e) < 0)
		return err_code(e);
	if (!secrets_name_valid(name))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'name': '%s' is not an environment variable name", name);
	if (!value[0])
		return err_set(e, ERR_INVALID, EINVAL, "field 'value' is empty");
	const cJSON *hosts = cJSON_GetObjectItemCaseSensitive(body, "hosts");
	int nh = cJSON_IsArray(hosts) ? cJSON_GetArraySize(hosts) : -1;
	if (nh < 1 || nh > SECRETS_MAX_HOSTS)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'hosts' must be an array of 1 to %d host names",
			       SECRETS_MAX_HOSTS);
	struct secret_rec *r = calloc(1, sizeof(*r));
	if (!r || !(r->value = strdup(value))) {
		free(r);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->replace_in_body = in_body;
	cJSON_ArrayForEach(it, hosts)
	{
		if (!cJSON_IsString(it) ||
		    host_pattern(it->valuestring, r->hosts[r->n_hosts], e) < 0) {
			rec_free(r);
			return cJSON_IsString(it) ? err_code(e)
						  : err_set(e, ERR_INVALID, EINVAL,
							    "field 'hosts' must hold strings");
		}
		r->n_hosts++;
	}
	*out = r;
	return 0;
}

int secrets_put(struct secrets *s, const cJSON *body, cJSON **out, struct err *e)
{
	struct secret_rec *r;
	if (parse(body, &r, e) < 0)
		return err_code(e);
	r->created_ms = clock_wall_ms();
	pthread_mutex_lock(&s->mu);
	struct secret_rec **slot = find(s, r->name), *old = NULL;
	if (!slot && s->n == SECRETS_MAX) {
		pthread_mutex_unlock(&s->mu);
		rec_free(r);
		return err_set(e, ERR_LIMIT, ENOSPC, "at most %d secrets", SECRETS_MAX);
	}
	if (slot) {
		old = *slot;
		*slot = r;
	} else {
		s->recs[s->n++] = r;
	}
	int rc = save(s, e);
	if (rc < 0) { /* as before */
		if (slot)
			*slot = old, old = r;
		else
			s->n--, old = r;
	}
	if (rc == 0)
		*out = rec_json(r, 0);
	pthread_mutex_unlock(&s->mu);
	rec_free(old);
	return rc;
}

int secrets_delete(struct secrets *s, const char *name, struct err *e)
{
	pthread_mutex_lock(&s->mu);
	struct secret_rec **slot = find(s, name);
	if (!slot) {
		pthread_mutex_unlock(&s->mu);
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no secret '%.*s'", UTF8_CUT(name, 64));
	}
	struct secret_rec *r = *slot;
	*slot = s->recs[--s->n];
	int rc = save(s, e);
	if (rc < 0) /* still stored */
		s->recs[s->n++] = r, r = NULL;
	pthread_mutex_unlock(&s->mu);
	rec_free(r);
	return rc;
}

int secrets_get_json(struct secrets *s, const char *name, cJSON **out, struct err *e)
{
	pthread_mutex_lock(&s->mu);
	struct secret_rec **slot = find(s, name);
	if (slot)
		*out = rec_json(*slot, 0);
	pthread_mutex_unlock(&s->mu);
	return slot ? 0 : err_set(e, ERR_NOT_FOUND, ENOENT, "no secret '%.*s'", UTF8_CUT(name, 64));
}

cJSON *secrets_list_json(struct secrets *s)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(j, "secrets");
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n; i++)
		cJSON_AddItemToArray(arr, rec_json(s->recs[i], 0));
	pthread_mutex_unlock(&s->mu);
	return j;
}

int secrets_check(struct secrets *s, const char *name, struct err *e)
{
	pthread_mutex_lock(&s->mu);
	int found = find(s, name) != NULL;
	pthread_mutex_unlock(&s->mu);
	return found ? 0
		     : err_set(e, ERR_NOT_FOUND, ENOENT, "no secret '%.*s'", UTF8_CUT(name, 64));
}

static int rec_allows(const struct secret_rec *r, const char *host)
{
	for (size_t i = 0; i < r->n_hosts; i++)
		if (secrets_host_match(r->hosts[i], host))
			return 1;
	return 0;
}

void secrets_subst_for(struct secrets *s, const char *host, size_t n, const char *const *names,
		       const char *const *placeholders, struct secrets_subst *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n && out->n < SECRETS_PER_SANDBOX; i++) {
		struct secret_rec **slot = find(s, names[i]);
		if (!slot || !rec_allows(*slot, host))
			continue;
		char *v = strdup((*slot)->value);
		if (!v)
			continue;
		out->placeholder[out->n] = placeholders[i];
		out->value[out->n] = v;
		out->in_body[out->n] = (*slot)->replace_in_body;
		out->n++;
	}
	pthread_mutex_unlock(&s->mu);
}

void secrets_subst_release(struct secrets_subst *sub)
{
	for (size_t i = 0; i < sub->n; i++) {
		explicit_bzero(sub->value[i], strlen(sub->value[i]));
		free(sub->value[i]);
	}
	sub->n = 0;
}

int secrets_any_for(struct secrets *s, const char *host, size_t n, const char *const *names)
{
	int any = 0;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n && !any; i++) {
		struct secret_rec **slot = find(s, names[i]);
		any = slot && rec_allows(*slot, host);
	}
	pthread_mutex_unlock(&s->mu);
	return any;
}

void secrets_touch(struct secrets *s, const char *name)
{
	long long now = clock_wall_ms();
	pthread_mutex_lock(&s->mu);
	struct secret_rec **slot = find(s, name);
	if (slot) {
		(*slot)->last_used_ms = now;
		s->dirty_use = 1;
	}
	/* Saved at most once a minute: a busy client would otherwise
	 * rewrite the file on every request (secrets_close() saves the
	 * rest). */
	if (slot && now - s->saved_ms >= 60000) {
		struct err e = ERR_INIT;
		if (save(s, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "secrets: %s", e.msg);
	}
	pthread_mutex_unlock(&s->mu);
}

int secrets_placeholder_new(char *out, struct err *e)
{
	char hex[33];
	if (fs_random_hex(hex, 16, e) < 0)
		return err_code(e);
	snprintf(out, SECRETS_PLACEHOLDER_LEN + 1, "deskbox-secret-%s", hex);
	return 0;
}

static int load_rec(const cJSON *it, struct secrets *s, struct err *e)
{
	cJSON *body = cJSON_Duplicate(it, 1);
	cJSON *created = cJSON_DetachItemFromObjectCaseSensitive(body, "created_ms");
	cJSON *used = cJSON_DetachItemFromObjectCaseSensitive(body, "last_used_ms");
	struct secret_rec *r = NULL;
	int rc = parse(body, &r, e);
	if (rc == 0 && s->n < SECRETS_MAX) {
		r->created_ms = cJSON_IsNumber(created) ? (long long)created->valuedouble : 0;
		r->last_used_ms = cJSON_IsNumber(used) ? (long long)used->valuedouble : 0;
		s->recs[s->n++] = r;
	} else {
		rec_free(r);
	}
	cJSON_Delete(created);
	cJSON_Delete(used);
	cJSON_Delete(body);
	return rc;
}

int secrets_open(struct secrets **out, const char *state_dir, struct err *e)
{
	struct secrets *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_init(&s->mu, NULL);
	snprintf(s->path, sizeof(s->path), "%s/secrets.json", state_dir);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct err re = ERR_INIT;
	if (fs_read_file(s->path, STORE_MAX_BYTES, &text, &len, &re) == 0) {
		cJSON *j = cJSON_ParseWithLength(text, len);
		explicit_bzero(text, len);
		const cJSON *it;
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "secrets"))
		{
			struct err le = ERR_INIT;
			if (load_rec(it, s, &le) < 0)
				log_msg(LOG_LEVEL_WARN, "secrets: skipping a stored secret: %s",
					le.msg);
		}
		cJSON_Delete(j);
	} else if (re.sys_errno != ENOENT) {
		secrets_close(s);
		return err_set(e, re.kind, re.sys_errno, "reading '%s': %s", "secrets.json",
			       re.msg);
	}
	*out = s;
	return 0;
}

void secrets_close(struct secrets *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	if (s->dirty_use) {
		struct err e = ERR_INIT;
		save(s, &e);
	}
	for (size_t i = 0; i < s->n; i++)
		rec_free(s->recs[i]);
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
