/* The tools that run programs (exec, code_run, through server/process) and
 * use files (read_file, write_file, list_files, through server/files with
 * the sandbox's root fd). */
#include <errno.h>
#include <limits.h>
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/args.h"
#include "common/cleanup.h"
#include "common/text.h"
#include "server/files/files.h"
#include "internal.h"

#define EXEC_MAX_ARGS 4096
#define STDIN_MAX     (1u << 20)
/* One argv string (MAX_ARG_STRLEN is 32 pages including the NUL). */
#define CODE_MAX (128u * 1024 - 1)

static int oom(struct err *e)
{
	return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
}

/* Output as JSON text: bytes that are not UTF-8 become U+FFFD. */
static int add_output(cJSON *j, const char *name, const char *data, size_t len)
{
	char *s = utf8_sanitize(data ? data : "", data ? len : 0);
	int r = s && cJSON_AddStringToObject(j, name, s) ? 0 : -1;
	free(s);
	return r;
}

static cJSON *result_json(const struct process_result *pr)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddNumberToObject(j, "exit_code", pr->exit_code);
	if (add_output(j, "stdout", pr->out, pr->out_len) < 0 ||
	    add_output(j, "stderr", pr->err, pr->err_len) < 0) {
		cJSON_Delete(j);
		return NULL;
	}
	cJSON_AddBoolToObject(j, "timed_out", pr->timed_out);
	cJSON_AddBoolToObject(j, "oom_killed", pr->oom_killed);
	cJSON_AddBoolToObject(j, "truncated", pr->out_truncated || pr->err_truncated);
	cJSON_AddNumberToObject(j, "duration_ms", (double)pr->duration_ms);
	return j;
}

static void release(const struct mcp_ctx *c)
{
	if (c->release)
		c->release(c->release_cls);
}

/* Runs `o` to its end, or in the background; answers the result (or
 * {"pid"}) as JSON text.  The sandbox is held only while the run starts. */
static int run(const struct mcp_ctx *c, const struct process_opts *o, int background,
	       cJSON *content, struct err *e)
{
	cJSON *j = NULL;
	if (background) {
		pid_t pid;
		int r = process_spawn(c->procs, o, &pid, e);
		release(c);
		if (r < 0)
			return r;
		if ((j = cJSON_CreateObject()))
			cJSON_AddNumberToObject(j, "pid", pid);
	} else {
		struct process_run *pr;
		int r = process_start(c->procs, o, &pr, e);
		release(c);
		if (r < 0)
			return r;
		while (!process_step(pr, 1000, NULL, NULL))
			;
		struct process_result res;
		r = process_finish(pr, &res, e);
		process_run_free(pr);
		if (r < 0)
			return r;
		j = result_json(&res);
		process_result_release(&res);
	}
	return mcp_content_json(content, j) < 0 ? oom(e) : 0;
}

/* cwd, stdin and timeout_s, which exec and code_run share. */
static int parse_common(const struct mcp_ctx *c, const cJSON *args, int background,
			struct process_opts *o, struct err *e)
{
	const char *cwd, *in;
	double timeout_s;
	double def = background ? 0 : c->exec_timeout_default_s;
	if (args_string(args, "cwd", PATH_MAX - 1, 0, &cwd, e) < 0 ||
	    args_string(args, "stdin", STDIN_MAX, 0, &in, e) < 0 ||
	    args_double(args, "timeout_s", 0.001, c->exec_timeout_max_s, def, 0, &timeout_s, e) < 0)
		return err_code(e);
	if (cwd && cwd[0] != '/')
		return err_set(e, ERR_INVALID, EINVAL, "field 'cwd' must be an absolute path");
	o->cwd = cwd;
	o->stdin_data = in;
	o->stdin_len = in ? strlen(in) : 0;
	o->timeout_ms = (int)(timeout_s * 1000.0);
	o->max_output = c->max_output;
	return 0;
}

/* argv from "command" (run by /bin/sh -c) or "argv": a malloc'd array of
 * pointers into `args`, which the caller frees. */
static int parse_argv(const cJSON *args, const char ***argv, struct err *e)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(args, "argv");
	const char *cmd;
	if (args_string(args, "command", SIZE_MAX, 0, &cmd, e) < 0)
		return err_code(e);
	if (!cmd == !list)
		return err_set(e, ERR_INVALID, EINVAL, "give either 'command' or 'argv'");
	if (cmd && !cmd[0])
		return err_set(e, ERR_INVALID, EINVAL, "field 'command' must not be empty");
	int n = cmd ? 3 : cJSON_GetArraySize(list);
	if (!cmd && (!cJSON_IsArray(list) || n < 1 || n > EXEC_MAX_ARGS))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'argv' must be an array of 1 to %d strings", EXEC_MAX_ARGS);
	const char **a = calloc((size_t)n + 1, sizeof(*a));
	if (!a)
		return oom(e);
	if (cmd) {
		a[0] = "/bin/sh";
		a[1] = "-c";
		a[2] = cmd;
	} else {
		int i = 0;
		const cJSON *it;
		cJSON_ArrayForEach(it, list)
		{
			if (!cJSON_IsString(it) || (i == 0 && !it->valuestring[0])) {
				free(a);
				return err_set(e, ERR_INVALID, EINVAL,
					       "argv[%d] must be a non-empty string", i);
			}
			a[i++] = it->valuestring;
		}
	}
	*argv = a;
	return 0;
}

int mcp_tool_exec(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	struct process_opts o = {0};
	const char **argv = NULL;
	int background;
	if (args_bool(args, "background", 0, &background, e) < 0 ||
	    parse_common(c, args, background, &o, e) < 0 || parse_argv(args, &argv, e) < 0)
		return err_code(e);
	o.argv = argv;
	int r = run(c, &o, background, content, e);
	free(argv);
	return r;
}

int mcp_tool_code_run(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	struct process_opts o = {0};
	const char *code, *argv[4];
	int lang;
	if (args_string(args, "code", CODE_MAX, ARGS_REQUIRED, &code, e) < 0 ||
	    args_enum(args, "language", process_languages, 0, 0, &lang, e) < 0 ||
	    parse_common(c, args, 0, &o, e) < 0 ||
	    process_code_argv(lang, code, c->root.fd, argv, e) < 0)
		return err_code(e);
	o.argv = argv;
	return run(c, &o, 0, content, e);
}

/* ---- files ---- */

static int arg_path(const cJSON *args, const char *def, char *out, struct err *e)
{
	const char *p;
	if (args_string(args, "path", PATH_MAX - 1, def ? 0 : ARGS_REQUIRED, &p, e) < 0)
		return err_code(e);
	if (!p)
		p = def;
	if (files_path_normalize(p, strlen(p), out, PATH_MAX, e) < 0)
		return err_wrap(e, "field 'path'");
	return 0;
}

/* A file's bytes as an embedded resource: {"type":"resource","resource":
 * {"uri":"file://...","mimeType","blob"}}. */
static int add_blob(cJSON *content, const char *path, const char *data, size_t len)
{
	static const char hexd[] = "0123456789ABCDEF";
	/* file:// URI: every byte outside the unreserved set and "/" escaped. */
	char *uri = malloc(7 + 3 * strlen(path) + 1);
	char *b64 = base64_encode(data, len);
	cJSON *item = cJSON_CreateObject();
	cJSON *res = item ? cJSON_AddObjectToObject(item, "resource") : NULL;
	int r = -1;
	if (uri && b64 && res) {
		char *u = uri + sprintf(uri, "file://");
		for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
			if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || strchr("/-._~", *p)) {
				*u++ = (char)*p;
			} else {
				*u++ = '%';
				*u++ = hexd[*p >> 4];
				*u++ = hexd[*p & 15];
			}
		}
		*u = '\0';
		cJSON_AddStringToObject(item, "type", "resource");
		cJSON_AddStringToObject(res, "uri", uri);
		cJSON_AddStringToObject(res, "mimeType", "application/octet-stream");
		if (cJSON_AddStringToObject(res, "blob", b64)) {
			cJSON_AddItemToArray(content, item);
			item = NULL;
			r = 0;
		}
	}
	cJSON_Delete(item);
	free(uri);
	free(b64);
	return r;
}

int mcp_tool_read_file(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	char path[PATH_MAX];
	_cleanup_fd_ int fd = -1;
	struct stat st;
	if (arg_path(args, NULL, path, e) < 0 || files_open_read(&c->root, path, &fd, &st, e) < 0)
		return err_code(e);
	if ((uint64_t)st.st_size > MCP_READ_MAX)
		return err_set(e, ERR_TOO_LARGE, EFBIG,
			       "'%s' is %lld bytes, over read_file's %u MiB: download it through "
			       "the files API",
			       path, (long long)st.st_size, MCP_READ_MAX >> 20);
	/* One byte more than allowed tells a file that grew meanwhile. */
	char *buf = malloc(MCP_READ_MAX + 2);
	if (!buf)
		return oom(e);
	size_t n = 0;
	while (n <= MCP_READ_MAX) {
		ssize_t k = read(fd, buf + n, MCP_READ_MAX + 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			free(buf);
			return err_sys(e, ERR_INTERNAL, errno, "reading '%s'", path);
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	int r = 0;
	if (n > MCP_READ_MAX) {
		r = err_set(e, ERR_TOO_LARGE, EFBIG, "'%s' grew past read_file's %u MiB", path,
			    MCP_READ_MAX >> 20);
	} else {
		buf[n] = '\0';
		/* JSON strings carry no NUL: such a file goes as bytes. */
		int text = utf8_valid(buf, n) && !memchr(buf, 0, n);
		if ((text ? mcp_content_text(content, buf) : add_blob(content, path, buf, n)) < 0)
			r = oom(e);
	}
	free(buf);
	return r;
}

/* The bytes to write: the text itself, or decoded base64 (malloc'd). */
static int write_data(const cJSON *args, char **data, size_t *len, struct err *e)
{
	static const char *const encodings[] = {"text", "base64", NULL};
	const char *s;
	int enc;
	if (args_string(args, "content", SIZE_MAX, ARGS_REQUIRED, &s, e) < 0 ||
	    args_enum(args, "encoding", encodings, 0, 0, &enc, e) < 0)
		return err_code(e);
	size_t sl = strlen(s);
	if (enc == 0) {
		*data = strdup(s);
		*len = sl;
		return *data ? 0 : oom(e);
	}
	struct base64_decode_ctx bc;
	*data = malloc(BASE64_DECODE_LENGTH(sl) + 1);
	if (!*data)
		return oom(e);
	base64_decode_init(&bc);
	*len = BASE64_DECODE_LENGTH(sl);
	if (!base64_decode_update(&bc, len, (uint8_t *)*data, sl, s) || !base64_decode_final(&bc)) {
		free(*data);
		*data = NULL;
		return err_set(e, ERR_INVALID, EINVAL, "field 'content' is not valid base64");
	}
	return 0;
}

int mcp_tool_write_file(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	char path[PATH_MAX];
	char *data = NULL;
	size_t len = 0;
	int parents;
	if (arg_path(args, NULL, path, e) < 0 || args_bool(args, "parents", 0, &parents, e) < 0 ||
	    write_data(args, &data, &len, e) < 0)
		return err_code(e);
	struct files_upload *u = NULL;
	int r = c->reserve ? c->reserve(c->reserve_cls, len, e) : 0;
	if (r < 0) {
		free(data);
		return err_wrap(e, "writing '%s'", path);
	}
	if ((r = files_upload_begin(&c->root, path, parents, -1, &u, e)) == 0 &&
	    (r = files_upload_write(u, data, len, e)) == 0)
		r = files_upload_commit(u, e);
	files_upload_free(u);
	if (c->reserve)
		c->unreserve(c->reserve_cls, len);
	free(data);
	if (r < 0)
		return r;
	cJSON *j = cJSON_CreateObject();
	if (j) {
		cJSON_AddStringToObject(j, "path", path);
		cJSON_AddNumberToObject(j, "size", (double)len);
	}
	return mcp_content_json(content, j) < 0 ? oom(e) : 0;
}

int mcp_tool_list_files(const struct mcp_ctx *c, const cJSON *args, cJSON *content, struct err *e)
{
	char path[PATH_MAX];
	cJSON *entries;
	int truncated;
	if (arg_path(args, FILES_HOME, path, e) < 0 ||
	    files_list(&c->root, path, &entries, &truncated, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	if (!j) {
		cJSON_Delete(entries);
		return oom(e);
	}
	cJSON_AddStringToObject(j, "path", path);
	cJSON_AddItemToObject(j, "entries", entries);
	if (truncated)
		cJSON_AddTrueToObject(j, "truncated");
	return mcp_content_json(content, j) < 0 ? oom(e) : 0;
}
