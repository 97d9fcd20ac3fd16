/* OpenSandbox's execd, served by deskboxd itself for each sandbox under
 * /opensandbox/execd/{id} (the endpoint of port 44772): ping, commands as
 * a stream of events, file upload, download and info. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/args.h"
#include "common/clock.h"
#include "internal.h"
#include "server/files/files.h"

#define OSB_COMMAND_MAX (128u * 1024 - 1)
#define OSB_MAX_ENV	128
#define OSB_META_MAX	8192

int osb_ping(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (osb_auth(req, e) < 0 || compat_enter(api, req->captures[0], &sb, e) < 0)
		return err_code(e);
	compat_release(sb);
	char *pong = strdup("pong");
	http_reply_data(res, 200, "text/plain", pong, pong ? 4 : 0);
	return 0;
}

/* ---- commands ---- */

struct cmd_stream {
	struct process_run *run;
	char **env;
	struct {
		char *buf;
		size_t len, off, cap;
	} out;
	long long t0;
	int done, failed;
};

static void out_add(struct cmd_stream *c, cJSON *ev)
{
	cJSON_AddNumberToObject(ev, "timestamp", (double)clock_wall_ms());
	char *s = cJSON_PrintUnformatted(ev);
	cJSON_Delete(ev);
	size_t n = s ? strlen(s) : 0;
	if (!s || c->out.len + n + 2 > (64u << 20)) {
		free(s);
		c->failed = 1;
		return;
	}
	if (c->out.len + n + 2 > c->out.cap) {
		size_t cap = c->out.cap ? c->out.cap : 4096;
		while (cap < c->out.len + n + 2)
			cap *= 2;
		char *nb = realloc(c->out.buf, cap);
		if (!nb) {
			free(s);
			c->failed = 1;
			return;
		}
		c->out.buf = nb;
		c->out.cap = cap;
	}
	/* Bare JSON and a blank line per event, as execd writes them. */
	memcpy(c->out.buf + c->out.len, s, n);
	memcpy(c->out.buf + c->out.len + n, "\n\n", 2);
	c->out.len += n + 2;
	free(s);
}

static void on_output(void *cls, enum process_stream st, const char *data, size_t len)
{
	struct cmd_stream *c = cls;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", st == PROCESS_STDERR ? "stderr" : "stdout");
	char *text = strndup(data, len);
	cJSON_AddStringToObject(ev, "text", text ? text : "");
	free(text);
	out_add(c, ev);
}

/* The end: execution_complete for exit 0, else execd's CommandExecError
 * with the code as evalue. */
static void finish(struct cmd_stream *c)
{
	struct process_result pr;
	struct err e = ERR_INIT;
	cJSON *ev = cJSON_CreateObject();
	int r = process_finish(c->run, &pr, &e);
	int code = r == 0 ? (pr.timed_out ? 124 : pr.exit_code < 0 ? 137 : pr.exit_code) : 1;
	if (r == 0)
		process_result_release(&pr);
	if (code == 0) {
		cJSON_AddStringToObject(ev, "type", "execution_complete");
		cJSON_AddNumberToObject(ev, "execution_time", (double)(clock_mono_ms() - c->t0));
	} else {
		char v[16];
		snprintf(v, sizeof(v), "%d", code);
		cJSON_AddStringToObject(ev, "type", "error");
		cJSON *er = cJSON_AddObjectToObject(ev, "error");
		cJSON_AddStringToObject(er, "ename", "CommandExecError");
		cJSON_AddStringToObject(er, "evalue", v);
		cJSON_AddItemToObject(er, "traceback", cJSON_CreateArray());
	}
	out_add(c, ev);
	c->done = 1;
}

static long cmd_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct cmd_stream *c = cls;
	while (c->out.off == c->out.len) {
		if (c->failed)
			return HTTP_STREAM_ERROR;
		if (c->done)
			return HTTP_STREAM_END;
		c->out.off = c->out.len = 0;
		if (process_step(c->run, 1000, on_output, c))
			finish(c);
	}
	size_t n = c->out.len - c->out.off < max ? c->out.len - c->out.off : max;
	memcpy(buf, c->out.buf + c->out.off, n);
	c->out.off += n;
	return (long)n;
}

static void cmd_free(void *cls)
{
	struct cmd_stream *c = cls;
	if (c->run)
		process_run_free(c->run);
	compat_env_free(c->env);
	free(c->out.buf);
	free(c);
}

/* POST /command {command, cwd?, background?, timeout? (ms), envs?}: runs
 * `bash -c COMMAND` (sh without bash), its output as events. */
static int cmd_start(struct http_request *req, const cJSON *body, struct cmd_stream *c,
		     struct err *e)
{
	struct api *api = req->app;
	const char *cmd, *cwd;
	int64_t timeout_ms;
	int background;
	if (args_string(body, "command", OSB_COMMAND_MAX, ARGS_REQUIRED, &cmd, e) < 0 ||
	    args_string(body, "cwd", PATH_MAX - 1, 0, &cwd, e) < 0 ||
	    args_bool(body, "background", 0, &background, e) < 0 ||
	    args_int(body, "timeout", 0, (int64_t)api->exec_timeout_max_s * 1000, 0, 0, &timeout_ms,
		     e) < 0 ||
	    compat_env(cJSON_GetObjectItemCaseSensitive(body, "envs"), &c->env, OSB_MAX_ENV, e) < 0)
		return err_code(e);
	if (background)
		return err_set(e, ERR_INVALID, ENOTSUP,
			       "background commands are not supported by deskbox");
	if (cwd && cwd[0] != '/')
		return err_set(e, ERR_INVALID, EINVAL, "'cwd' must be an absolute path");
	const char *argv[] = {"/bin/sh", "-c",
			      "command -v bash >/dev/null && exec bash --noprofile --norc -c "
			      "\"$0\" || exec sh -c \"$0\"",
			      cmd, NULL};
	struct process_opts o = {
	    .argv = argv,
	    .env = (const char *const *)c->env,
	    .cwd = cwd,
	    .max_output = api->exec_max_output,
	    .timeout_ms = timeout_ms ? (int)timeout_ms : api->exec_timeout_max_s * 1000,
	};
	struct sandbox *sb;
	if (compat_enter(api, req->captures[0], &sb, e) < 0)
		return err_code(e);
	int r = process_start(sandbox_procs(sb), &o, &c->run, e);
	compat_release(sb);
	return r;
}

int osb_command(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (osb_auth(req, e) < 0 || http_json_body(req, &body, e) < 0)
		return err_code(e);
	struct cmd_stream *c = calloc(1, sizeof(*c));
	int r = c ? cmd_start(req, body, c, e) : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_Delete(body);
	if (r < 0) {
		if (c)
			cmd_free(c);
		return r;
	}
	c->t0 = clock_mono_ms();
	char id[24];
	snprintf(id, sizeof(id), "%d", (int)process_pid(c->run));
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "init");
	cJSON_AddStringToObject(ev, "text", id);
	out_add(c, ev);
	http_reply_stream(res, 200, "text/event-stream", HTTP_SIZE_UNKNOWN, cmd_read, c, cmd_free);
	return http_add_header(res, "Cache-Control", "no-cache", e);
}

/* ---- files ---- */

/* POST /files/upload: part "metadata" ({"path","mode":644,...}) then part
 * "file", streamed to disk (parents made). */
struct osb_upload {
	struct compat_upload up; /* first: the sandbox, its root, the parser, the file */
	char meta[OSB_META_MAX + 1];
	size_t meta_len;
	int file_seen;
};

/* The file part begins: where it goes comes from the metadata. */
static int upload_open(struct osb_upload *u, struct err *e)
{
	u->meta[u->meta_len] = '\0';
	cJSON *m = cJSON_Parse(u->meta);
	const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "path"));
	const cJSON *mode = cJSON_GetObjectItemCaseSensitive(m, "mode");
	char canon[PATH_MAX];
	int r = 0, octal = -1;
	if (!path || path[0] != '/')
		r = err_set(e, ERR_INVALID, EINVAL, "the 'metadata' part needs an absolute 'path'");
	/* execd's mode is octal digits written as a decimal number (644). */
	if (r == 0 && cJSON_IsNumber(mode)) {
		char digits[16];
		snprintf(digits, sizeof(digits), "%d", (int)mode->valuedouble);
		char *end;
		long v = strtol(digits, &end, 8);
		if (*end || v < 0 || v > 07777)
			r = err_set(e, ERR_INVALID, EINVAL, "bad 'mode' %s", digits);
		octal = (int)v;
	}
	if (r == 0)
		r = files_path_normalize(path, strlen(path), canon, sizeof(canon), e);
	if (r == 0)
		r = compat_upload_open(&u->up, canon, octal, e);
	cJSON_Delete(m);
	return r;
}

static int upload_part(void *cls, const char *name, const char *filename, const char *data,
		       uint64_t off, size_t size, struct err *e)
{
	struct osb_upload *u = cls;
	if (name && strcmp(name, "metadata") == 0) {
		if (u->meta_len + size > OSB_META_MAX)
			return err_set(e, ERR_TOO_LARGE, E2BIG, "the 'metadata' part is too large");
		memcpy(u->meta + u->meta_len, data, size);
		u->meta_len += size;
		return 0;
	}
	if (!name || strcmp(name, "file") != 0)
		return 0;
	if (!u->file_seen) {
		u->file_seen = 1;
		if (upload_open(u, e) < 0)
			return err_code(e);
	}
	return compat_upload_write(&u->up, data, size, e);
}

int osb_upload_begin(struct http_request *req, struct http_body_sink *sink, struct err *e)
{
	if (osb_auth(req, e) < 0)
		return err_code(e);
	http_request_trusted(req);
	struct osb_upload *u = calloc(1, sizeof(*u));
	if (!u)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	return compat_upload_begin(req, &u->up, upload_part, sink, e);
}

int osb_upload(struct http_request *req, struct http_response *res, struct err *e)
{
	struct osb_upload *u = req->stream;
	if (http_multipart_finish(u->up.mp, e) < 0)
		return err_code(e);
	if (!u->file_seen && upload_open(u, e) < 0) /* an empty file */
		return err_code(e);
	if (compat_upload_commit(&u->up, e) < 0)
		return err_code(e);
	compat_upload_free(&u->up);
	return http_reply_json(res, 200, cJSON_CreateObject(), e);
}

/* The files root of the request's sandbox and ?path= made canonical. */
static int open_path(struct http_request *req, const char *path, struct files_root *root,
		     char *canon, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (!path || path[0] != '/')
		return err_set(e, ERR_INVALID, EINVAL, "'path' must be an absolute path");
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	int r = compat_path(sb, path, NULL, root, canon, e);
	sandbox_put(sb);
	return r;
}

struct dl {
	int fd;
	uint64_t size;
};

static long dl_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct dl *d = cls;
	for (;;) {
		ssize_t n = pread(d->fd, buf, max, (off_t)pos);
		if (n < 0 && errno == EINTR)
			continue;
		return n > 0 ? (long)n : HTTP_STREAM_ERROR;
	}
}

static void dl_free(void *cls)
{
	struct dl *d = cls;
	close(d->fd);
	free(d);
}

int osb_download(struct http_request *req, struct http_response *res, struct err *e)
{
	char canon[PATH_MAX];
	struct files_root root = {.fd = -1};
	if (osb_auth(req, e) < 0)
		return err_code(e);
	if (http_header(req, "Range") || http_query(req, "offset") || http_query(req, "limit"))
		return err_set(e, ERR_INVALID, ENOTSUP,
			       "partial downloads are not supported by deskbox here");
	if (open_path(req, http_query(req, "path"), &root, canon, e) < 0)
		return err_code(e);
	struct stat st;
	int fd = -1;
	int r = files_open_read(&root, canon, &fd, &st, e);
	close(root.fd);
	if (r < 0)
		return r;
	struct dl *d = malloc(sizeof(*d));
	if (!d || !S_ISREG(st.st_mode)) {
		close(fd);
		free(d);
		return d ? err_set(e, ERR_INVALID, EISDIR, "'%s' is not a file", canon)
			 : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	*d = (struct dl){fd, (uint64_t)st.st_size};
	if (!d->size) {
		dl_free(d);
		http_reply_data(res, 200, "application/octet-stream", NULL, 0);
		return 0;
	}
	http_reply_stream(res, 200, "application/octet-stream", d->size, dl_read, d, dl_free);
	return 0;
}

struct info_q {
	struct http_request *req;
	cJSON *out;
	struct err *e;
};

static int info_one(void *cls, const char *name, const char *value)
{
	struct info_q *q = cls;
	if (strcmp(name, "path") != 0)
		return 0;
	char canon[PATH_MAX], when[40];
	struct files_root root = {.fd = -1};
	struct stat st;
	if (open_path(q->req, value, &root, canon, q->e) < 0)
		return -1;
	int r = files_stat(&root, canon, &st, q->e);
	close(root.fd);
	if (r < 0)
		return -1;
	cJSON *j = cJSON_AddObjectToObject(q->out, value);
	cJSON_AddStringToObject(j, "path", canon);
	cJSON_AddStringToObject(j, "type",
				S_ISDIR(st.st_mode)   ? "directory"
				: S_ISREG(st.st_mode) ? "file"
				: S_ISLNK(st.st_mode) ? "symlink"
						      : "other");
	cJSON_AddNumberToObject(j, "size", (double)st.st_size);
	clock_rfc3339((long long)st.st_mtime * 1000, when, sizeof(when));
	cJSON_AddStringToObject(j, "modified_at", when);
	cJSON_AddStringToObject(j, "created_at", when);
	cJSON_AddStringToObject(j, "owner", "user");
	cJSON_AddStringToObject(j, "group", "user");
	char mode[8];
	snprintf(mode, sizeof(mode), "%o", st.st_mode & 07777);
	cJSON_AddNumberToObject(j, "mode", atoi(mode));
	return 0;
}

/* GET /files/info?path=a&path=b: {"a":FileInfo,"b":FileInfo}. */
int osb_file_info(struct http_request *req, struct http_response *res, struct err *e)
{
	if (osb_auth(req, e) < 0)
		return err_code(e);
	struct info_q q = {req, cJSON_CreateObject(), e};
	if (http_each_query(req, info_one, &q) != 0) {
		cJSON_Delete(q.out);
		return err_code(e);
	}
	return http_reply_json(res, 200, q.out, e);
}
