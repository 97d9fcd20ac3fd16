/* sandbox_name: what a create says about a sandbox besides its resources:
 * its "name" (unique, usable in place of the id), its "metadata" (string
 * labels a list can filter on) and "read_only_root".  Parsed into the
 * spec, so sandbox.json keeps them like the rest of it (docs/lifecycle.md,
 * "Names and metadata"). */
#include "common/text.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"

static int is_lower(char c)
{
	return c >= 'a' && c <= 'z';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* 32 lowercase hex digits: what sandbox ids are (SANDBOX_ID_LEN). */
static int looks_like_id(const char *s)
{
	return strlen(s) == SANDBOX_ID_LEN && strspn(s, "0123456789abcdef") == SANDBOX_ID_LEN;
}

int sandbox_name_ok(const char *name)
{
	/* A DNS label, so that "{port}-{name}.DOMAIN" hosts work too
	 * (--ports-domain), starting with a letter. */
	size_t n = strlen(name);
	if (n == 0 || n > SANDBOX_NAME_MAX || !is_lower(name[0]) || name[n - 1] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_lower(name[i]) && !is_digit(name[i]) && name[i] != '-')
			return 0;
	return !looks_like_id(name);
}

int sandbox_metadata_key_ok(const char *key)
{
	size_t n = strlen(key);
	if (n == 0 || n > SANDBOX_META_KEY_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = key[i];
		if (!is_lower(c) && !is_digit(c) && !(c >= 'A' && c <= 'Z') && !strchr("._-/", c))
			return 0;
	}
	return 1;
}

static int parse_name(const cJSON *req, struct sandbox_spec *spec, struct err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, "name");
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v) || !sandbox_name_ok(v->valuestring))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'name' must be 1-%d of a-z 0-9 '-', starting with a letter, "
			       "not ending with '-', and not 32 hex digits (an id)",
			       SANDBOX_NAME_MAX);
	snprintf(spec->name, sizeof(spec->name), "%s", v->valuestring);
	return 0;
}

/* Checks the entries of metadata object `m` (a create's, or a PATCH's
 * when `patch`: a null value there deletes the key). */
static int check_metadata(const cJSON *m, int patch, struct err *e)
{
	if (!cJSON_IsObject(m))
		return err_set(e, ERR_INVALID, EINVAL, "field 'metadata' must be an object");
	int n = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, m)
	{
		if (++n > SANDBOX_META_MAX_KEYS)
			return err_set(e, ERR_INVALID, E2BIG, "field 'metadata': more than %d keys",
				       SANDBOX_META_MAX_KEYS);
		if (!sandbox_metadata_key_ok(it->string))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'metadata': bad key '%.*s' (1-%d of A-Z a-z 0-9 . _ "
				       "- /)",
				       UTF8_CUT(it->string, 80), SANDBOX_META_KEY_MAX);
		if (!(patch && cJSON_IsNull(it)) &&
		    (!cJSON_IsString(it) || strlen(it->valuestring) > SANDBOX_META_VALUE_MAX))
			return err_set(
			    e, ERR_INVALID, EINVAL,
			    "field 'metadata': '%s' must be a string of at most %d bytes%s",
			    it->string, SANDBOX_META_VALUE_MAX, patch ? " or null" : "");
		for (const cJSON *o = m->child; o != it; o = o->next)
			if (strcmp(o->string, it->string) == 0)
				return err_set(e, ERR_INVALID, EINVAL,
					       "field 'metadata': key '%s' given twice",
					       it->string);
	}
	return 0;
}

/* Checks "metadata" ({key: string}) and keeps a copy in spec->metadata. */
static int parse_metadata(const cJSON *req, struct sandbox_spec *spec, struct err *e)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "metadata");
	if (!m || cJSON_IsNull(m))
		return 0;
	if (check_metadata(m, 0, e) < 0)
		return err_code(e);
	spec->metadata = cJSON_Duplicate(m, 1);
	if (!spec->metadata)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

int sandbox_metadata_merge(const cJSON *cur, const cJSON *patch, cJSON **out, struct err *e)
{
	*out = NULL;
	if (check_metadata(patch, 1, e) < 0)
		return err_code(e);
	cJSON *m = cur ? cJSON_Duplicate(cur, 1) : cJSON_CreateObject();
	if (!m)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	const cJSON *it;
	cJSON_ArrayForEach(it, patch)
	{
		cJSON_DeleteItemFromObjectCaseSensitive(m, it->string);
		cJSON *v = cJSON_IsNull(it) ? NULL : cJSON_CreateString(it->valuestring);
		if (!cJSON_IsNull(it) && (!v || !cJSON_AddItemToObject(m, it->string, v))) {
			cJSON_Delete(v);
			cJSON_Delete(m);
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		}
	}
	if (cJSON_GetArraySize(m) > SANDBOX_META_MAX_KEYS) {
		cJSON_Delete(m);
		return err_set(e, ERR_INVALID, E2BIG,
			       "field 'metadata': the sandbox would have more than %d keys",
			       SANDBOX_META_MAX_KEYS);
	}
	*out = m;
	return 0;
}

int sandbox_spec_parse_labels(const cJSON *req, struct sandbox_spec *spec, struct err *e)
{
	if (parse_name(req, spec, e) < 0 ||
	    args_bool(req, "read_only_root", 0, &spec->read_only_root, e) < 0)
		return err_code(e);
	int root;
	if (args_bool(req, "root", 1, &root, e) < 0)
		return err_code(e);
	spec->no_root = !root;
	return parse_metadata(req, spec, e);
}

void sandbox_labels_json(struct sandbox *sb, cJSON *j)
{
	if (sb->spec.name[0])
		cJSON_AddStringToObject(j, "name", sb->spec.name);
	/* Under mu: a PATCH replaces the metadata. */
	pthread_mutex_lock(&sb->mu);
	cJSON *m = sb->spec.metadata ? cJSON_Duplicate(sb->spec.metadata, 1) : cJSON_CreateObject();
	pthread_mutex_unlock(&sb->mu);
	cJSON_AddItemToObject(j, "metadata", m);
	cJSON_AddBoolToObject(j, "read_only_root", sb->spec.read_only_root);
	cJSON_AddBoolToObject(j, "root", !sb->spec.no_root);
}

struct sandbox *sandbox_find_locked(struct sandboxes *s, const char *ref)
{
	/* Names never look like ids (sandbox_name_ok): no ref matches both. */
	int by_id = looks_like_id(ref);
	for (struct sandbox *sb = s->list; sb; sb = sb->next) {
		if (sb->pooled)
			continue;
		if (by_id ? strcmp(sb->id, ref) == 0
			  : sb->spec.name[0] && strcmp(sb->spec.name, ref) == 0)
			return sb;
	}
	return NULL;
}

int sandbox_name_claim_locked(struct sandboxes *s, const char *name, struct err *e)
{
	if (!name[0] || !sandbox_find_locked(s, name))
		return 0;
	return err_set(e, ERR_NAME_TAKEN, EEXIST, "the name '%s' is taken by another sandbox",
		       name);
}

int sandbox_resolve(struct sandboxes *s, const char *ref, char *id, size_t size)
{
	pthread_mutex_lock(&s->mu);
	struct sandbox *sb = sandbox_find_locked(s, ref);
	int r = sb ? 0 : -ENOENT;
	if (sb)
		snprintf(id, size, "%s", sb->id);
	pthread_mutex_unlock(&s->mu);
	return r;
}

int sandbox_matches(struct sandbox *sb, const struct sandbox_filter *f, size_t n)
{
	int all = 1;
	pthread_mutex_lock(&sb->mu);
	for (size_t i = 0; i < n && all; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(sb->spec.metadata, f[i].key);
		all = cJSON_IsString(v) && strcmp(v->valuestring, f[i].value) == 0;
	}
	pthread_mutex_unlock(&sb->mu);
	return all;
}
