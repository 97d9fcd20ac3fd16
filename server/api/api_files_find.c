/* The files API for finding and changing: find (names), search (lines),
 * replace, chmod, chown (docs/files.md).  The work is in files_find.c and
 * files_replace.c. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal_files.h"

#define FIND_DEFAULT_RESULTS   10000
#define SEARCH_DEFAULT_MATCHES 1000
#define SEARCH_MAX_MATCHES     100000
#define SEARCH_DEFAULT_SIZE    (16 << 20)
#define SEARCH_MAX_SIZE	       (1LL << 30)
/* A search stops (truncated) after this long. */
#define SEARCH_TIMEOUT_MS 20000
#define PATTERN_MAX	  4096
#define REPLACE_MAX_PATHS 1000

int api_files_find(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	int64_t depth, max;
	if (apif_query_path(req, "path", FILES_HOME, path, e) < 0 ||
	    http_query_int(req, "max_depth", 0, 1000, 1000, 0, &depth, e) < 0 ||
	    http_query_int(req, "max_results", 1, FILES_LIST_MAX, FIND_DEFAULT_RESULTS, 0, &max,
			   e) < 0)
		return err_code(e);
	const char *name = http_query(req, "name");
	if (name && strlen(name) > PATTERN_MAX)
		return err_set(e, ERR_INVALID, EINVAL, "query parameter 'name' is too long");
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0)
		return err_code(e);
	cJSON *entries;
	int truncated;
	if (files_find(&root, path, name, (unsigned)depth, (unsigned)max, &entries, &truncated,
		       e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", path);
	cJSON_AddItemToObject(j, "entries", entries);
	cJSON_AddBoolToObject(j, "truncated", truncated);
	return http_reply_json(res, 200, j, e);
}

int api_files_search(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	struct files_search_opts o = {.timeout_ms = SEARCH_TIMEOUT_MS};
	int64_t matches, size, depth;
	if (apif_query_path(req, "path", FILES_HOME, path, e) < 0 ||
	    apif_query_flag(req, "regex", &o.regex, e) < 0 ||
	    apif_query_flag(req, "ignore_case", &o.ignore_case, e) < 0 ||
	    http_query_int(req, "max_matches", 1, SEARCH_MAX_MATCHES, SEARCH_DEFAULT_MATCHES, 0,
			   &matches, e) < 0 ||
	    http_query_int(req, "max_file_size", 1, SEARCH_MAX_SIZE, SEARCH_DEFAULT_SIZE, 0, &size,
			   e) < 0 ||
	    http_query_int(req, "max_depth", 0, 1000, 1000, 0, &depth, e) < 0)
		return err_code(e);
	size_t plen = 0;
	o.pattern = http_query_n(req, "pattern", &plen);
	if (!o.pattern || !*o.pattern)
		return err_set(e, ERR_INVALID, EINVAL, "missing query parameter 'pattern'");
	if (plen > PATTERN_MAX || memchr(o.pattern, '\0', plen))
		return err_set(e, ERR_INVALID, EINVAL,
			       "query parameter 'pattern' is too long or holds a NUL byte");
	o.max_matches = (unsigned)matches;
	o.max_file_size = (uint64_t)size;
	o.max_depth = (unsigned)depth;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0)
		return err_code(e);
	cJSON *found;
	int truncated;
	unsigned files;
	if (files_search(&root, path, &o, &found, &truncated, &files, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", path);
	cJSON_AddItemToObject(j, "matches", found);
	cJSON_AddBoolToObject(j, "truncated", truncated);
	cJSON_AddNumberToObject(j, "files_scanned", files);
	return http_reply_json(res, 200, j, e);
}

/* The "paths" array of a replace body, each made canonical. */
static int replace_paths(const cJSON *body, char (**out)[PATH_MAX], int *n, struct err *e)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(body, "paths");
	if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'paths' must be a non-empty array of paths");
	int count = cJSON_GetArraySize(arr);
	if (count > REPLACE_MAX_PATHS)
		return err_set(e, ERR_INVALID, E2BIG, "field 'paths' holds more than %d paths",
			       REPLACE_MAX_PATHS);
	char(*paths)[PATH_MAX] = calloc((size_t)count, PATH_MAX);
	if (!paths)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		if (!cJSON_IsString(it) ||
		    files_path_normalize(it->valuestring, strlen(it->valuestring), paths[i],
					 PATH_MAX, e) < 0) {
			free(paths);
			if (!cJSON_IsString(it))
				return err_set(e, ERR_INVALID, EINVAL,
					       "field 'paths': item %d is not a string", i);
			return err_wrap(e, "field 'paths', item %d", i);
		}
		i++;
	}
	*out = paths;
	*n = count;
	return 0;
}

static cJSON *replace_one(const struct files_root *root, const char *path, const char *pattern,
			  const char *rep, int regex, unsigned *total)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", path);
	unsigned count;
	struct err fe = ERR_INIT;
	if (files_replace(root, path, pattern, rep, regex, &count, &fe) < 0) {
		cJSON *er = cJSON_AddObjectToObject(j, "error");
		cJSON_AddStringToObject(er, "code", err_kind_name(fe.kind));
		cJSON_AddStringToObject(er, "message", fe.msg);
		return j;
	}
	cJSON_AddNumberToObject(j, "replacements", count);
	*total += count;
	return j;
}

int api_files_replace(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (apif_json_body(req,
			   (const char *const[]){"paths", "pattern", "replacement", "regex", NULL},
			   &body, e) < 0)
		return err_code(e);
	const char *pattern, *rep;
	int regex = 0, n = 0;
	char(*paths)[PATH_MAX] = NULL;
	int r = args_string(body, "pattern", PATTERN_MAX, ARGS_REQUIRED, &pattern, e);
	if (r == 0)
		r = args_string(body, "replacement", FILES_REPLACE_MAX_SIZE, ARGS_REQUIRED, &rep, e);
	if (r == 0)
		r = args_bool(body, "regex", 0, &regex, e);
	if (r == 0 && !*pattern)
		r = err_set(e, ERR_INVALID, EINVAL, "field 'pattern' must not be empty");
	/* A bad regex is the request's fault, not each file's. */
	if (r == 0 && regex)
		r = files_regex_check(pattern, e);
	if (r == 0)
		r = replace_paths(body, &paths, &n, e);
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (r == 0)
		r = apif_open_root(req, &root, NULL, e);
	cJSON *files = r == 0 ? cJSON_CreateArray() : NULL;
	unsigned total = 0;
	for (int i = 0; files && i < n; i++) {
		cJSON *one = replace_one(&root, paths[i], pattern, rep, regex, &total);
		cJSON_AddItemToArray(files, one);
	}
	free(paths);
	cJSON_Delete(body);
	if (r < 0) {
		cJSON_Delete(files);
		return r;
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "files", files);
	cJSON_AddNumberToObject(j, "replacements", total);
	return http_reply_json(res, 200, j, e);
}

/* "mode": a number (420) or an octal string ("0644"). */
static int body_mode(const cJSON *body, unsigned *out, struct err *e)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(body, "mode");
	if (cJSON_IsString(m)) {
		const char *v = m->valuestring;
		char *end;
		errno = 0;
		unsigned long x = strtoul(v, &end, 8);
		if (!*v || *end || errno || x > 07777 || strspn(v, "01234567") != strlen(v))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'mode' must be octal permission bits (0 to 07777)");
		*out = (unsigned)x;
		return 0;
	}
	int64_t v;
	if (args_int(body, "mode", 0, 07777, 0, ARGS_REQUIRED, &v, e) < 0)
		return err_code(e);
	*out = (unsigned)v;
	return 0;
}

int api_files_chmod(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (apif_json_body(req, (const char *const[]){"path", "mode", NULL}, &body, e) < 0)
		return err_code(e);
	char path[PATH_MAX];
	unsigned mode = 0;
	int r = apif_body_path(body, "path", 1, path, e);
	if (r == 0)
		r = body_mode(body, &mode, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0 || files_chmod(&root, path, mode, e) < 0)
		return err_code(e);
	return apif_reply_stat(res, 200, &root, path, e);
}

int api_files_chown(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (apif_json_body(req, (const char *const[]){"path", "uid", "gid", NULL}, &body, e) < 0)
		return err_code(e);
	char path[PATH_MAX];
	int64_t uid = -1, gid = -1;
	int r = apif_body_path(body, "path", 1, path, e);
	if (r == 0)
		r = args_int(body, "uid", -1, UINT32_MAX, -1, 0, &uid, e);
	if (r == 0)
		r = args_int(body, "gid", -1, UINT32_MAX, -1, 0, &gid, e);
	if (r == 0 && uid < 0 && gid < 0)
		r = err_set(e, ERR_INVALID, EINVAL, "give 'uid', 'gid' or both");
	cJSON_Delete(body);
	if (r < 0)
		return r;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0 || files_chown(&root, path, uid, gid, e) < 0)
		return err_code(e);
	return apif_reply_stat(res, 200, &root, path, e);
}
