/* The toolbox's process and file calls (under <toolboxProxyUrl>/{id}):
 * execute and code-run onto deskbox's runs, the file calls onto the files
 * subsystem.  Output is stdout and stderr together, as Daytona's daemon
 * answers it. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/args.h"
#include "internal.h"
#include "server/files/files.h"

#define DT_COMMAND_MAX (128u * 1024 - 1)
#define DT_MAX_ENV     128
#define DT_MAX_ARGS    16

/* The fields execute and code-run share: envs, cwd, timeout (s, 0: the
 * server's default). */
struct dt_run {
	char **env;
	const char *args[DT_MAX_ARGS + 1];
	struct compat_run run;
};

static int parse_run(const cJSON *body, struct dt_run *d, struct err *e)
{
	int64_t timeout;
	const char *cwd;
	memset(d, 0, sizeof(*d));
	if (args_string(body, "cwd", PATH_MAX - 1, 0, &cwd, e) < 0 ||
	    args_int(body, "timeout", 0, 24 * 3600, 0, 0, &timeout, e) < 0 ||
	    compat_env(cJSON_GetObjectItemCaseSensitive(body, "envs"), &d->env, DT_MAX_ENV, e) < 0)
		return err_code(e);
	if (cwd && cwd[0] && cwd[0] != '/')
		return err_set(e, ERR_INVALID, EINVAL, "'cwd' must be an absolute path");
	d->run.cwd = cwd && cwd[0] ? cwd : NULL;
	d->run.env = (const char *const *)d->env;
	d->run.timeout_ms = (int)timeout * 1000;
	d->run.merge_stderr = 1;
	return 0;
}

/* {"exitCode","result"[,"artifacts"]}; a run past its timeout is 408. */
static int reply_run(struct http_response *res, struct process_result *pr, int artifacts,
		     struct err *e)
{
	if (pr->timed_out) {
		process_result_release(pr);
		return daytona_daemon_error(res, 408, "TIMEOUT", "command timed out", e);
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "exitCode", pr->exit_code);
	cJSON_AddStringToObject(j, "result", pr->out ? pr->out : "");
	if (artifacts) {
		cJSON *a = cJSON_AddObjectToObject(j, "artifacts");
		cJSON_AddStringToObject(a, "stdout", pr->out ? pr->out : "");
		cJSON_AddItemToObject(a, "charts", cJSON_CreateArray());
	}
	process_result_release(pr);
	return http_reply_json(res, 200, j, e);
}

/* POST process/execute {"command","cwd"?,"envs"?,"timeout"?}: the command
 * line runs under sh -c (Daytona's daemon splits it itself; a shell takes
 * every line that does). */
int dt_execute(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct dt_run d;
	struct process_result pr;
	const char *cmd;
	int r = args_string(body, "command", DT_COMMAND_MAX, ARGS_REQUIRED, &cmd, e);
	if (r == 0)
		r = parse_run(body, &d, e);
	if (r == 0) {
		d.run.language = -1;
		d.run.command = cmd;
		r = compat_run(req->app, req->captures[0], &d.run, &pr, e);
		compat_env_free(d.env);
	}
	cJSON_Delete(body);
	return r < 0 ? r : reply_run(res, &pr, 0, e);
}

static int parse_args(const cJSON *body, struct dt_run *d, struct err *e)
{
	const cJSON *argv = cJSON_GetObjectItemCaseSensitive(body, "argv"), *it;
	if (!argv || cJSON_IsNull(argv))
		return 0;
	if (!cJSON_IsArray(argv) || cJSON_GetArraySize(argv) > DT_MAX_ARGS)
		return err_set(e, ERR_INVALID, EINVAL,
			       "'argv' must be an array of at most %d strings", DT_MAX_ARGS);
	size_t n = 0;
	cJSON_ArrayForEach(it, argv)
	{
		if (!cJSON_IsString(it))
			return err_set(e, ERR_INVALID, EINVAL, "'argv' must hold strings");
		d->args[n++] = it->valuestring;
	}
	d->run.args = d->args;
	return 0;
}

/* POST process/code-run {"code","language","argv"?,"envs"?,"timeout"?}. */
int dt_code_run(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct dt_run d;
	struct process_result pr;
	const char *code, *lang;
	int r = 0;
	if (args_string(body, "code", DT_COMMAND_MAX, ARGS_REQUIRED, &code, e) < 0 ||
	    args_string(body, "language", 32, 0, &lang, e) < 0)
		r = err_code(e);
	int l = r == 0 ? compat_language(lang ? lang : "python") : -1;
	if (r == 0 && (l < 0 || (lang && strcmp(lang, "typescript") == 0)))
		r = err_set(e, ERR_INVALID, ENOTSUP,
			    "language '%s' is not supported by deskbox (python, javascript)",
			    lang ? lang : "");
	if (r == 0 && (r = parse_run(body, &d, e)) == 0) {
		d.run.language = l;
		d.run.code = code;
		r = parse_args(body, &d, e);
		if (r == 0)
			r = compat_run(req->app, req->captures[0], &d.run, &pr, e);
		compat_env_free(d.env);
	}
	cJSON_Delete(body);
	return r < 0 ? r : reply_run(res, &pr, 1, e);
}

/* The sandbox's files root and the canonical form of query parameter
 * `param` (relative paths are under /workspace, Daytona's work dir). */
static int open_path(struct http_request *req, const char *param, struct files_root *root,
		     char *canon, struct err *e)
{
	struct api *api = req->app;
	const char *path = http_query(req, param);
	if (!path || !path[0])
		return err_set(e, ERR_INVALID, EINVAL, "query parameter '%s' is required", param);
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	int r = compat_path(sb, path, NULL, root, canon, e);
	sandbox_put(sb);
	return r;
}

/* Daytona's FileInfo for deskbox's files_stat_json() view `f`. */
static cJSON *file_info(const cJSON *f, const char *dir)
{
	cJSON *j = cJSON_CreateObject();
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "name"));
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "type"));
	const cJSON *size = cJSON_GetObjectItemCaseSensitive(f, "size");
	const cJSON *mode = cJSON_GetObjectItemCaseSensitive(f, "mode");
	const cJSON *mtime = cJSON_GetObjectItemCaseSensitive(f, "mtime");
	int isdir = type && strcmp(type, "dir") == 0;
	unsigned m = cJSON_IsNumber(mode) ? (unsigned)mode->valuedouble : 0;
	char perm[16], ls[16], when[40];
	snprintf(perm, sizeof(perm), "%04o", m & 07777);
	snprintf(ls, sizeof(ls), "%c%c%c%c%c%c%c%c%c%c", isdir ? 'd' : '-', m & 0400 ? 'r' : '-',
		 m & 0200 ? 'w' : '-', m & 0100 ? 'x' : '-', m & 040 ? 'r' : '-',
		 m & 020 ? 'w' : '-', m & 010 ? 'x' : '-', m & 04 ? 'r' : '-', m & 02 ? 'w' : '-',
		 m & 01 ? 'x' : '-');
	clock_rfc3339(cJSON_IsNumber(mtime) ? (long long)mtime->valuedouble * 1000 : 0, when,
		      sizeof(when));
	cJSON_AddStringToObject(j, "name", name ? name : "");
	if (dir) {
		char full[PATH_MAX];
		snprintf(full, sizeof(full), "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/",
			 name ? name : "");
		cJSON_AddStringToObject(j, "path", full);
	}
	cJSON_AddNumberToObject(j, "size", cJSON_IsNumber(size) ? size->valuedouble : 0);
	cJSON_AddStringToObject(j, "mode", ls);
	cJSON_AddStringToObject(j, "permissions", perm);
	cJSON_AddStringToObject(j, "modTime", when);
	cJSON_AddStringToObject(j, "modifiedAt", when);
	cJSON_AddBoolToObject(j, "isDir", isdir);
	cJSON_AddStringToObject(j, "owner", "user");
	cJSON_AddStringToObject(j, "group", "user");
	return j;
}

int dt_files_list(struct http_request *req, struct http_response *res, struct err *e)
{
	char canon[PATH_MAX];
	struct files_root root = {.fd = -1};
	cJSON *list;
	int truncated;
	if (open_path(req, "path", &root, canon, e) < 0)
		return err_code(e);
	int r = files_list(&root, canon, &list, &truncated, e);
	close(root.fd);
	if (r < 0)
		return r;
	cJSON *j = cJSON_CreateArray();
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		cJSON_AddItemToArray(j, file_info(it, canon));
	}
	cJSON_Delete(list);
	return http_reply_json(res, 200, j, e);
}

int dt_files_info(struct http_request *req, struct http_response *res, struct err *e)
{
	char canon[PATH_MAX];
	struct files_root root = {.fd = -1};
	struct stat st;
	if (open_path(req, "path", &root, canon, e) < 0)
		return err_code(e);
	int r = files_stat(&root, canon, &st, e);
	close(root.fd);
	if (r < 0)
		return r;
	const char *slash = strrchr(canon, '/');
	cJSON *f = files_stat_json(NULL, slash && slash[1] ? slash + 1 : "/", &st);
	cJSON *j = f ? file_info(f, NULL) : NULL;
	cJSON_Delete(f);
	if (j)
		cJSON_AddStringToObject(j, "path", canon);
	return http_reply_json(res, 200, j, e);
}

/* POST files/folder?path=&mode=755 (parents made too, as MkdirAll). */
int dt_files_folder(struct http_request *req, struct http_response *res, struct err *e)
{
	char canon[PATH_MAX];
	struct files_root root = {.fd = -1};
	const char *mode = http_query(req, "mode");
	char *end = NULL;
	unsigned long m = mode ? strtoul(mode, &end, 8) : 0755;
	if (mode && (!mode[0] || *end || m > 07777))
		return err_set(e, ERR_INVALID, EINVAL, "'mode' must be octal permission bits");
	if (open_path(req, "path", &root, canon, e) < 0)
		return err_code(e);
	int created;
	int r = files_mkdir(&root, canon, 1, &created, e);
	if (r == 0 && mode)
		r = files_chmod(&root, canon, (unsigned)m, e);
	close(root.fd);
	if (r < 0)
		return r;
	http_reply_empty(res, 200);
	return 0;
}

int dt_files_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	char canon[PATH_MAX];
	struct files_root root = {.fd = -1};
	const char *rec = http_query(req, "recursive");
	if (open_path(req, "path", &root, canon, e) < 0)
		return err_code(e);
	int r = files_remove(&root, canon, rec && strcmp(rec, "true") == 0, e);
	close(root.fd);
	if (r < 0)
		return r;
	http_reply_empty(res, 204);
	return 0;
}

/* POST files/move?source=&destination= */
int dt_files_move(struct http_request *req, struct http_response *res, struct err *e)
{
	char from[PATH_MAX], to[PATH_MAX];
	struct files_root root = {.fd = -1};
	const char *dst = http_query(req, "destination");
	if (!dst || !dst[0])
		return err_set(e, ERR_INVALID, EINVAL, "query parameter 'destination' is required");
	if (open_path(req, "source", &root, from, e) < 0)
		return err_code(e);
	int r = dst[0] == '/' ? files_path_normalize(dst, strlen(dst), to, sizeof(to), e)
			      : err_set(e, ERR_INVALID, EINVAL, "'destination' must be absolute");
	if (r == 0)
		r = files_move(&root, from, to, e);
	close(root.fd);
	if (r < 0)
		return r;
	http_reply_empty(res, 200);
	return 0;
}

/* GET user-home-dir and work-dir: {"dir"}. */
int dt_home_dir(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	sandbox_put(sb);
	int work = strstr(req->path, "/work-dir") != NULL;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "dir", work ? "/workspace" : "/home/user");
	return http_reply_json(res, 200, j, e);
}

/* GET files/find?path=&pattern=: lines holding `pattern` (literal text, as
 * grep -F) in the files under path: [{"file","line","content"}]. */
int dt_files_find(struct http_request *req, struct http_response *res, struct err *e)
{
	char canon[PATH_MAX];
	struct files_root root = {.fd = -1};
	const char *pattern = http_query(req, "pattern");
	if (!pattern || !pattern[0])
		return err_set(e, ERR_INVALID, EINVAL, "query parameter 'pattern' is required");
	if (open_path(req, "path", &root, canon, e) < 0)
		return err_code(e);
	struct files_search_opts o = {.pattern = pattern,
				      .max_matches = 10000,
				      .max_file_size = 64u << 20,
				      .max_depth = 64,
				      .timeout_ms = 30000};
	cJSON *found;
	int truncated;
	unsigned scanned;
	int r = files_search(&root, canon, &o, &found, &truncated, &scanned, e);
	close(root.fd);
	if (r < 0)
		return r;
	cJSON *j = cJSON_CreateArray();
	const cJSON *it;
	cJSON_ArrayForEach(it, found)
	{
		cJSON *m = cJSON_CreateObject();
		const cJSON *line = cJSON_GetObjectItemCaseSensitive(it, "line");
		const char *path =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "path"));
		const char *text =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "text"));
		cJSON_AddStringToObject(m, "file", path ? path : "");
		cJSON_AddNumberToObject(m, "line", cJSON_IsNumber(line) ? line->valuedouble : 0);
		cJSON_AddStringToObject(m, "content", text ? text : "");
		cJSON_AddItemToArray(j, m);
	}
	cJSON_Delete(found);
	return http_reply_json(res, 200, j, e);
}

/* GET files/search?path=&pattern=: names matching the glob: {"files"}. */
int dt_files_search(struct http_request *req, struct http_response *res, struct err *e)
{
	char canon[PATH_MAX];
	struct files_root root = {.fd = -1};
	const char *pattern = http_query(req, "pattern");
	if (!pattern || !pattern[0])
		return err_set(e, ERR_INVALID, EINVAL, "query parameter 'pattern' is required");
	if (open_path(req, "path", &root, canon, e) < 0)
		return err_code(e);
	cJSON *found;
	int truncated;
	int r = files_find(&root, canon, pattern, 64, 10000, &found, &truncated, e);
	close(root.fd);
	if (r < 0)
		return r;
	cJSON *j = cJSON_CreateObject(), *files = cJSON_AddArrayToObject(j, "files");
	const cJSON *it;
	cJSON_ArrayForEach(it, found)
	{
		const char *path =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "path"));
		cJSON_AddItemToArray(files, cJSON_CreateString(path ? path : ""));
	}
	cJSON_Delete(found);
	return http_reply_json(res, 200, j, e);
}

/* POST files/replace {"files":[...],"pattern","newValue"}: literal text
 * replaced in each file: [{"file","success","error"?}]. */
int dt_files_replace(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(body, "files"), *it;
	const char *pattern, *value;
	struct sandbox *sb = NULL;
	struct files_root root = {.fd = -1};
	int r = 0;
	if (args_string(body, "pattern", 4096, ARGS_REQUIRED, &pattern, e) < 0 ||
	    args_string(body, "newValue", 1u << 20, ARGS_REQUIRED, &value, e) < 0)
		r = err_code(e);
	if (r == 0 && (!cJSON_IsArray(files) || cJSON_GetArraySize(files) > 1000))
		r = err_set(e, ERR_INVALID, EINVAL,
			    "'files' must be an array of at most 1000 paths");
	if (r == 0 && !pattern[0])
		r = err_set(e, ERR_INVALID, EINVAL, "'pattern' must not be empty");
	if (r == 0 && (r = sandbox_get(api->sandboxes, req->captures[0], &sb, e)) == 0) {
		r = sandbox_open_root(sb, &root, e);
		sandbox_put(sb);
	}
	if (r < 0) {
		cJSON_Delete(body);
		return r;
	}
	cJSON *j = cJSON_CreateArray();
	cJSON_ArrayForEach(it, files)
	{
		struct err fe = ERR_INIT;
		char canon[PATH_MAX];
		unsigned count;
		const char *p = cJSON_GetStringValue(it);
		int fr = p && p[0] == '/'
			     ? files_path_normalize(p, strlen(p), canon, sizeof(canon), &fe)
			     : err_set(&fe, ERR_INVALID, EINVAL, "not an absolute path");
		if (fr == 0)
			fr = files_replace(&root, canon, pattern, value, 0, &count, &fe);
		cJSON *one = cJSON_CreateObject();
		cJSON_AddStringToObject(one, "file", p ? p : "");
		cJSON_AddBoolToObject(one, "success", fr == 0);
		if (fr < 0)
			cJSON_AddStringToObject(one, "error", fe.msg);
		cJSON_AddItemToArray(j, one);
	}
	close(root.fd);
	cJSON_Delete(body);
	return http_reply_json(res, 200, j, e);
}

/* POST files/permissions?path=&mode=&owner=&group=: the mode (octal); an
 * owner or group only as numeric ids of the sandbox. */
int dt_files_permissions(struct http_request *req, struct http_response *res, struct err *e)
{
	char canon[PATH_MAX];
	struct files_root root = {.fd = -1};
	const char *mode = http_query(req, "mode"), *owner = http_query(req, "owner");
	const char *group = http_query(req, "group");
	char *end = NULL;
	unsigned long m = mode && mode[0] ? strtoul(mode, &end, 8) : 0;
	if (mode && mode[0] && (*end || m > 07777))
		return err_set(e, ERR_INVALID, EINVAL, "'mode' must be octal permission bits");
	long long uid = -1, gid = -1;
	if ((owner && owner[0] && (uid = strtoll(owner, &end, 10), *end || uid < 0)) ||
	    (group && group[0] && (gid = strtoll(group, &end, 10), *end || gid < 0)))
		return err_set(e, ERR_INVALID, ENOTSUP,
			       "owner and group by name are not supported by deskbox: give "
			       "numeric ids");
	if (open_path(req, "path", &root, canon, e) < 0)
		return err_code(e);
	int r = 0;
	if (mode && mode[0])
		r = files_chmod(&root, canon, (unsigned)m, e);
	if (r == 0 && (uid >= 0 || gid >= 0))
		r = files_chown(&root, canon, uid, gid, e);
	close(root.fd);
	if (r < 0)
		return r;
	http_reply_empty(res, 200);
	return 0;
}
