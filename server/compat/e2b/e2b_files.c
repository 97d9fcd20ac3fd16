/* compat/e2b: envd's filesystem.Filesystem service (Connect JSON, unary),
 * its /files route (GET raw bytes, POST multipart/form-data) and /health,
 * onto server/files.  Relative paths start at the files API's home. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "common/args.h"
#include "server/files/files.h"
#include "server/sandbox/sandbox.h"

/* With --ports-domain D, the {id} of a Host "{port}-{id}.D[:port]" into
 * out: a plain client of a signed /files URL sends no E2b-Sandbox-Id. */
static int host_sandbox(const struct http_request *req, const char *domain, char *out, size_t size)
{
	const char *host = http_header(req, "Host");
	if (!domain || !host)
		return 0;
	size_t hl = strcspn(host, ":"), dl = strlen(domain);
	const char *dash = memchr(host, '-', hl);
	if (!dash || hl <= dl + 1 || host[hl - dl - 1] != '.' ||
	    strncasecmp(host + hl - dl, domain, dl) != 0)
		return 0;
	const char *id = dash + 1, *end = host + hl - dl - 1;
	if (end <= id || (size_t)(end - id) >= size || memchr(id, '.', (size_t)(end - id)))
		return 0;
	memcpy(out, id, (size_t)(end - id));
	out[end - id] = '\0';
	return 1;
}

int e2b_sandbox_of(struct http_request *req, struct sandbox **sb, struct err *e)
{
	struct compat *c = req->app;
	const char *id = http_header(req, "E2b-Sandbox-Id");
	char by_host[80];
	if ((!id || !*id) && host_sandbox(req, c->ports_domain, by_host, sizeof(by_host)))
		id = by_host;
	if (!id || !*id)
		return err_set(e, ERR_INVALID, EINVAL, "missing 'E2b-Sandbox-Id' header");
	return sandbox_get(c->sandboxes, id, sb, e);
}

int e2b_enter(struct http_request *req, struct sandbox **sb, struct err *e)
{
	if (e2b_sandbox_of(req, sb, e) < 0)
		return err_code(e);
	if (sandbox_use(*sb, 0, NULL, e) < 0) {
		sandbox_put(*sb);
		*sb = NULL;
		return err_code(e);
	}
	return 0;
}

static void root_close(struct files_root *r)
{
	if (r->fd >= 0)
		close(r->fd);
}
#define _cleanup_root_ __attribute__((cleanup(root_close)))

static int open_root(struct http_request *req, struct files_root *root, struct err *e)
{
	struct sandbox *sb;
	if (e2b_sandbox_of(req, &sb, e) < 0)
		return err_code(e);
	int r = sandbox_open_root(sb, root, e);
	sandbox_put(sb);
	return r;
}

static int path_arg(const char *v, size_t len, const char *name, char *out, struct err *e)
{
	if (!v)
		return err_set(e, ERR_INVALID, EINVAL, "missing '%s'", name);
	if (files_path_normalize(v, len, out, PATH_MAX, e) < 0)
		return err_wrap(e, "'%s'", name);
	return 0;
}

static int body_path(const cJSON *body, const char *name, char *out, struct err *e)
{
	const char *v;
	if (args_string(body, name, PATH_MAX - 1, ARGS_REQUIRED, &v, e) < 0)
		return err_code(e);
	return path_arg(v, strlen(v), name, out, e);
}

static void permissions(unsigned mode, int dir, int link, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	out[0] = link ? 'l' : dir ? 'd' : '-';
	for (int i = 0; i < 9; i++)
		out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
	out[10] = '\0';
}

/* envd's EntryInfo for the files API's view `f` of `path`. */
static cJSON *entry_info(const cJSON *f, const char *path)
{
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "type"));
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "name"));
	double size = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "size"));
	double mode = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "mode"));
	double mtime = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "mtime"));
	int dir = type && strcmp(type, "dir") == 0, link = type && strcmp(type, "symlink") == 0;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", name ? name : "");
	cJSON_AddStringToObject(j, "type",
				dir				    ? "FILE_TYPE_DIRECTORY"
				: link				    ? "FILE_TYPE_SYMLINK"
				: type && strcmp(type, "file") == 0 ? "FILE_TYPE_FILE"
								    : "FILE_TYPE_UNSPECIFIED");
	cJSON_AddStringToObject(j, "path", path);
	cJSON_AddNumberToObject(j, "size", size == size ? size : 0);
	unsigned m = mode == mode ? (unsigned)mode : 0;
	cJSON_AddNumberToObject(j, "mode", m);
	char perm[11];
	permissions(m, dir, link, perm);
	cJSON_AddStringToObject(j, "permissions", perm);
	cJSON_AddStringToObject(j, "owner", "user");
	cJSON_AddStringToObject(j, "group", "user");
	char when[40];
	time_t t = mtime == mtime ? (time_t)mtime : 0;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	cJSON_AddStringToObject(j, "modifiedTime", when);
	return j;
}

static cJSON *stat_entry(const struct files_root *root, const char *path, struct err *e)
{
	struct stat st;
	if (files_stat(root, path, &st, e) < 0)
		return NULL;
	const char *slash = strrchr(path, '/');
	cJSON *f = files_stat_json(path, slash && slash[1] ? slash + 1 : "/", &st);
	cJSON *j = f ? entry_info(f, path) : NULL;
	cJSON_Delete(f);
	if (!j)
		err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	return j;
}

/* {"entry": EntryInfo of `path`} as the answer. */
static int reply_entry(struct http_response *res, const struct files_root *root, const char *path,
		       struct err *e)
{
	cJSON *en = stat_entry(root, path, e);
	if (!en)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "entry", en);
	return http_reply_json(res, 200, j, e);
}

/* A unary call: the JSON message and the sandbox's root. */
static int unary(struct http_request *req, cJSON **body, struct files_root *root, struct err *e)
{
	if (http_json_body(req, body, e) < 0)
		return err_code(e);
	if (open_root(req, root, e) < 0) {
		cJSON_Delete(*body);
		return err_code(e);
	}
	return 0;
}

int e2b_fs_stat(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (unary(req, &body, &root, e) < 0)
		return err_code(e);
	char path[PATH_MAX];
	int r = body_path(body, "path", path, e);
	cJSON_Delete(body);
	return r < 0 ? r : reply_entry(res, &root, path, e);
}

int e2b_fs_list(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body, *entries;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (unary(req, &body, &root, e) < 0)
		return err_code(e);
	char path[PATH_MAX];
	int64_t depth;
	int truncated, r = body_path(body, "path", path, e);
	if (r == 0)
		r = args_int(body, "depth", 0, 1, 1, 0, &depth, e);
	cJSON_Delete(body);
	if (r < 0 || files_list(&root, path, &entries, &truncated, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject(), *out = cJSON_AddArrayToObject(j, "entries");
	const cJSON *f;
	cJSON_ArrayForEach(f, entries)
	{
		const char *name =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "name"));
		char full[PATH_MAX];
		snprintf(full, sizeof(full), "%s/%s", strcmp(path, "/") ? path : "",
			 name ? name : "");
		cJSON_AddItemToArray(out, entry_info(f, full));
	}
	cJSON_Delete(entries);
	return http_reply_json(res, 200, j, e);
}

int e2b_fs_mkdir(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (unary(req, &body, &root, e) < 0)
		return err_code(e);
	char path[PATH_MAX];
	int created = 0, r = body_path(body, "path", path, e);
	cJSON_Delete(body);
	if (r < 0 || files_mkdir(&root, path, 1, &created, e) < 0)
		return err_code(e);
	if (!created)
		return err_set(e, ERR_CONFLICT, EEXIST, "'%s' already exists", path);
	return reply_entry(res, &root, path, e);
}

int e2b_fs_move(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (unary(req, &body, &root, e) < 0)
		return err_code(e);
	char from[PATH_MAX], to[PATH_MAX];
	int r = body_path(body, "source", from, e);
	if (r == 0)
		r = body_path(body, "destination", to, e);
	cJSON_Delete(body);
	if (r < 0 || files_move(&root, from, to, e) < 0)
		return err_code(e);
	return reply_entry(res, &root, to, e);
}

int e2b_fs_remove(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (unary(req, &body, &root, e) < 0)
		return err_code(e);
	char path[PATH_MAX];
	int r = body_path(body, "path", path, e);
	cJSON_Delete(body);
	if (r < 0 || files_remove(&root, path, 1, e) < 0)
		return err_code(e);
	return http_reply_json(res, 200, cJSON_CreateObject(), e);
}

int e2b_health(struct http_request *req, struct http_response *res, struct err *e)
{
	http_reply_empty(res, 204);
	return 0;
}
