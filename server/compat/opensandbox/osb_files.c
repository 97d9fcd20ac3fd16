/* execd's file-tree calls: delete files and directories, make directories,
 * move.  Paths are absolute; each call stops at the first that fails. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "server/files/files.h"

/* The files root of the request's sandbox (the caller closes root->fd). */
static int open_root(struct http_request *req, struct files_root *root, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	int r = sandbox_open_root(sb, root, e);
	sandbox_put(sb);
	return r;
}

static int canon_of(const char *path, char *canon, struct err *e)
{
	if (!path || path[0] != '/')
		return err_set(e, ERR_INVALID, EINVAL, "paths must be absolute");
	return files_path_normalize(path, strlen(path), canon, PATH_MAX, e);
}

struct rm_q {
	struct files_root *root;
	int recursive;
	struct err *e;
};

static int rm_one(void *cls, const char *name, const char *value)
{
	struct rm_q *q = cls;
	char canon[PATH_MAX];
	if (strcmp(name, "path") != 0)
		return 0;
	if (canon_of(value, canon, q->e) < 0 ||
	    files_remove(q->root, canon, q->recursive, q->e) < 0)
		return -1;
	return 0;
}

/* DELETE /files?path=a&path=b, DELETE /directories?path=… (recursive). */
int osb_remove(struct http_request *req, struct http_response *res, struct err *e)
{
	struct files_root root = {.fd = -1};
	if (osb_auth(req, e) < 0 || open_root(req, &root, e) < 0)
		return err_code(e);
	struct rm_q q = {&root, strstr(req->path, "/directories") != NULL, e};
	int r = http_each_query(req, rm_one, &q) != 0 ? err_code(e) : 0;
	close(root.fd);
	if (r < 0)
		return r;
	http_reply_empty(res, 200);
	return 0;
}

/* POST /directories {"<path>":{"mode":755,...}}: made with their parents. */
int osb_mkdirs(struct http_request *req, struct http_response *res, struct err *e)
{
	struct files_root root = {.fd = -1};
	cJSON *body;
	if (osb_auth(req, e) < 0 || http_json_body(req, &body, e) < 0)
		return err_code(e);
	int r = open_root(req, &root, e);
	const cJSON *it, *list = r == 0 ? body : NULL;
	cJSON_ArrayForEach(it, list)
	{
		char canon[PATH_MAX], digits[16];
		int created;
		const cJSON *mode = cJSON_GetObjectItemCaseSensitive(it, "mode");
		if ((r = canon_of(it->string, canon, e)) < 0 ||
		    (r = files_mkdir(&root, canon, 1, &created, e)) < 0)
			break;
		if (cJSON_IsNumber(mode)) {
			/* Octal digits written as a decimal number (755). */
			snprintf(digits, sizeof(digits), "%d", (int)mode->valuedouble);
			char *end;
			long m = strtol(digits, &end, 8);
			r = *end || m < 0 || m > 07777 ? err_set(e, ERR_INVALID, EINVAL, "bad mode")
						       : files_chmod(&root, canon, (unsigned)m, e);
			if (r < 0)
				break;
		}
	}
	if (root.fd >= 0)
		close(root.fd);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	http_reply_empty(res, 200);
	return 0;
}

/* POST /files/mv [{"src","dest"}]. */
int osb_move(struct http_request *req, struct http_response *res, struct err *e)
{
	struct files_root root = {.fd = -1};
	cJSON *body;
	if (osb_auth(req, e) < 0)
		return err_code(e);
	body = cJSON_ParseWithLength(req->body ? req->body : "", req->body_len);
	int r = cJSON_IsArray(body)
		    ? open_root(req, &root, e)
		    : err_set(e, ERR_INVALID, EINVAL, "the body must be [{src,dest}]");
	const cJSON *it, *list = r == 0 ? body : NULL;
	cJSON_ArrayForEach(it, list)
	{
		char from[PATH_MAX], to[PATH_MAX];
		const char *src = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "src"));
		const char *dest =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "dest"));
		if ((r = canon_of(src, from, e)) < 0 || (r = canon_of(dest, to, e)) < 0 ||
		    (r = files_move(&root, from, to, e)) < 0)
			break;
	}
	if (root.fd >= 0)
		close(root.fd);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	http_reply_empty(res, 200);
	return 0;
}
