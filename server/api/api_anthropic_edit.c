/* Anthropic's text editor tool (str_replace_based_edit_tool) on the
 * computer-use adapter's route, onto the sandbox's files: view (a file,
 * with view_range), create, str_replace and insert, with the reference's
 * messages (anthropic-quickstarts computer_use_demo/tools/edit.py: `cat -n`
 * output, 4 snippet lines around an edit, old_str that must occur exactly
 * once).  Docs: docs/actions.md. */
#include "internal.h"
#include "internal_files.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/args.h"
#include "common/text.h"
#include "server/files/files.h"

#define EDIT_FILE_MAX (16u << 20)
#define SNIPPET_LINES 4

struct sbuf {
	char *p;
	size_t n, cap;
	int oom;
};

static void add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = (b->n + n + 1) * 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void adds(struct sbuf *b, const char *s)
{
	add(b, s, strlen(s));
}

/* The reference's _make_output: a header, then lines [first, last] of
 * `text` (1-based; last 0: to the end) numbered as `cat -n` does. */
static void numbered(struct sbuf *b, const char *what, const char *text, long first, long last)
{
	char line[64];
	adds(b, "Here's the result of running `cat -n` on ");
	adds(b, what);
	adds(b, ":\n");
	long no = 1;
	for (const char *p = text;; no++) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (no >= first && (last == 0 || no <= last)) {
			snprintf(line, sizeof(line), "%6ld\t", no);
			adds(b, line);
			add(b, p, len);
			adds(b, "\n");
		}
		if (!nl)
			break;
		p = nl + 1;
	}
}

static long count_lines(const char *s, size_t n)
{
	long c = 0;
	for (size_t i = 0; i < n; i++)
		c += s[i] == '\n';
	return c;
}

static int read_file(const struct files_root *root, const char *canon, char **out, size_t *len,
		     struct err *e)
{
	int fd;
	struct stat st;
	if (files_open_read(root, canon, &fd, &st, e) < 0)
		return err_code(e);
	if ((size_t)st.st_size > EDIT_FILE_MAX) {
		close(fd);
		return err_set(e, ERR_TOO_LARGE, EFBIG, "the file is over %u bytes", EDIT_FILE_MAX);
	}
	char *buf = malloc((size_t)st.st_size + 1);
	size_t n = 0;
	ssize_t r = 1;
	while (buf && r > 0 && n < (size_t)st.st_size) {
		r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r > 0)
			n += (size_t)r;
	}
	close(fd);
	if (!buf || r < 0) {
		free(buf);
		return err_set(e, ERR_INTERNAL, buf ? EIO : ENOMEM, "cannot read the file");
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

static int write_file(const struct files_root *root, const char *canon, const char *data,
		      size_t len, struct err *e)
{
	struct files_upload *u;
	if (files_upload_begin(root, canon, 1, -1, &u, e) < 0)
		return err_code(e);
	int r = files_upload_write(u, data, len, e);
	if (r == 0)
		r = files_upload_commit(u, e);
	files_upload_free(u);
	return r;
}

/* The reference's path checks: absolute, and existing unless `create`
 * (which refuses an existing one); directories only for view. */
static int check_path(const struct files_root *root, const char *path, const char *cmd, char *canon,
		      struct err *e)
{
	if (path[0] != '/')
		return err_set(e, ERR_INVALID, EINVAL,
			       "The path %.*s is not an absolute path, it should start with `/`. "
			       "Maybe you meant /%.*s?",
			       UTF8_CUT(path, 300), UTF8_CUT(path, 300));
	if (files_path_normalize(path, strlen(path), canon, PATH_MAX, e) < 0)
		return err_code(e);
	struct stat st;
	struct err ignore = ERR_INIT;
	int exists = files_stat(root, canon, &st, &ignore) == 0;
	if (strcmp(cmd, "create") == 0 && exists)
		return err_set(e, ERR_INVALID, EEXIST,
			       "File already exists at: %.*s. Cannot overwrite files using command "
			       "`create`.",
			       UTF8_CUT(path, 300));
	if (strcmp(cmd, "create") != 0 && !exists)
		return err_set(e, ERR_INVALID, ENOENT,
			       "The path %.*s does not exist. Please provide a valid path.",
			       UTF8_CUT(path, 300));
	if (exists && S_ISDIR(st.st_mode) && strcmp(cmd, "view") == 0)
		return err_set(
		    e, ERR_INVALID, EISDIR,
		    "The path %.*s is a directory: this adapter does not list directories "
		    "(GET .../files?path= does)",
		    UTF8_CUT(path, 300));
	if (exists && S_ISDIR(st.st_mode))
		return err_set(
		    e, ERR_INVALID, EISDIR,
		    "The path %.*s is a directory and only the `view` command can be used "
		    "on directories",
		    UTF8_CUT(path, 300));
	return 0;
}

static int view(const cJSON *in, const char *path, const char *text, struct sbuf *b, struct err *e)
{
	const cJSON *range = cJSON_GetObjectItemCaseSensitive(in, "view_range");
	long first = 1, last = 0, n = count_lines(text, strlen(text)) + 1;
	if (range && !cJSON_IsNull(range)) {
		const cJSON *a = cJSON_GetArrayItem(range, 0), *z = cJSON_GetArrayItem(range, 1);
		if (!cJSON_IsArray(range) || cJSON_GetArraySize(range) != 2 || !cJSON_IsNumber(a) ||
		    !cJSON_IsNumber(z))
			return err_set(
			    e, ERR_INVALID, EINVAL,
			    "Invalid `view_range`. It should be a list of two integers.");
		first = (long)a->valuedouble;
		last = (long)z->valuedouble;
		if (first < 1 || first > n || (last != -1 && (last < first || last > n)))
			return err_set(e, ERR_INVALID, EINVAL,
				       "Invalid `view_range`: [%ld, %ld]. The file has %ld lines.",
				       first, last, n);
		if (last == -1)
			last = 0;
	}
	numbered(b, path, text, first, last);
	return 0;
}

/* str_replace: `old_str` must occur exactly once. */
static int replace(const cJSON *in, const char *path, char **text, struct sbuf *b, struct err *e)
{
	const char *old, *new = "";
	if (args_string(in, "old_str", EDIT_FILE_MAX, ARGS_REQUIRED, &old, e) < 0 ||
	    args_string(in, "new_str", EDIT_FILE_MAX, 0, &new, e) < 0)
		return err_code(e);
	new = new ? new : "";
	const char *at = old[0] ? strstr(*text, old) : NULL;
	if (!at)
		return err_set(
		    e, ERR_INVALID, EINVAL,
		    "No replacement was performed, old_str `%.*s` did not appear verbatim "
		    "in %.*s.",
		    UTF8_CUT(old, 300), UTF8_CUT(path, 300));
	if (strstr(at + 1, old))
		return err_set(
		    e, ERR_INVALID, EINVAL,
		    "No replacement was performed. Multiple occurrences of old_str `%.*s`. "
		    "Please ensure it is unique",
		    UTF8_CUT(old, 300));
	size_t pre = (size_t)(at - *text), ol = strlen(old), nl = strlen(new),
	       rest = strlen(at + ol);
	char *out = malloc(pre + nl + rest + 1);
	if (!out)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	memcpy(out, *text, pre);
	memcpy(out + pre, new, nl);
	memcpy(out + pre + nl, at + ol, rest + 1);
	long line = count_lines(*text, pre);
	free(*text);
	*text = out;
	long first = line - SNIPPET_LINES < 0 ? 0 : line - SNIPPET_LINES;
	long last = line + SNIPPET_LINES + count_lines(new, nl);
	char what[PATH_MAX + 16];
	snprintf(what, sizeof(what), "a snippet of %s", path);
	adds(b, "The file ");
	adds(b, path);
	adds(b, " has been edited. ");
	numbered(b, what, out, first + 1, last + 1);
	adds(b, "Review the changes and make sure they are as expected. Edit the file again if "
		"necessary.");
	return 0;
}

static int insert(const cJSON *in, const char *path, char **text, struct sbuf *b, struct err *e)
{
	const char *new;
	int64_t at;
	long n = count_lines(*text, strlen(*text)) + 1;
	if (args_string(in, "new_str", EDIT_FILE_MAX, ARGS_REQUIRED, &new, e) < 0)
		return err_code(e);
	if (args_int(in, "insert_line", 0, n, 0, ARGS_REQUIRED, &at, e) < 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "Invalid `insert_line` parameter. It should be within the range of "
			       "lines of the file: [0, %ld]",
			       n);
	/* After line `at`: the offset where line at + 1 starts. */
	size_t off = 0, len = strlen(*text);
	for (long l = 0; l < at && off <= len; l++) {
		const char *nl = strchr(*text + off, '\n');
		off = nl ? (size_t)(nl - *text) + 1 : len;
	}
	size_t nlen = strlen(new);
	int need_nl = off == len && len && (*text)[len - 1] != '\n';
	char *out = malloc(len + nlen + 3);
	if (!out)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	size_t o = 0;
	memcpy(out, *text, off);
	o = off;
	if (need_nl)
		out[o++] = '\n';
	memcpy(out + o, new, nlen);
	o += nlen;
	if (off < len || !need_nl)
		out[o++] = '\n';
	memcpy(out + o, *text + off, len - off + 1);
	free(*text);
	*text = out;
	long first = at - SNIPPET_LINES + 1 < 1 ? 1 : at - SNIPPET_LINES + 1;
	adds(b, "The file ");
	adds(b, path);
	adds(b, " has been edited. ");
	numbered(b, "a snippet of the edited file", out, first,
		 at + SNIPPET_LINES + count_lines(new, nlen) + 1);
	adds(b, "Review the changes and make sure they are as expected (correct indentation, no "
		"duplicate lines, etc). Edit the file again if necessary.");
	return 0;
}

/* One command on the root; the tool_result's text in `b`. */
static int command(const struct files_root *root, const cJSON *in, struct sbuf *b, struct err *e)
{
	static const char *const cmds[] = {"view", "create", "str_replace", "insert", NULL};
	const char *path, *cmd_name;
	int cmd;
	if (!cJSON_IsObject(in) || args_string(in, "command", 32, ARGS_REQUIRED, &cmd_name, e) < 0)
		return err_code(e) ? err_code(e) : -EINVAL;
	if (args_enum(in, "command", cmds, 0, ARGS_REQUIRED, &cmd, e) < 0)
		return err_set(
		    e, ERR_INVALID, EINVAL,
		    "Unrecognized command %.*s. The allowed commands for the %s tool are: "
		    "view, create, str_replace, insert",
		    UTF8_CUT(cmd_name, 32), "str_replace_based_edit_tool");
	if (args_string(in, "path", PATH_MAX - 1, ARGS_REQUIRED, &path, e) < 0)
		return err_code(e);
	char canon[PATH_MAX];
	if (check_path(root, path, cmds[cmd], canon, e) < 0)
		return err_code(e);
	if (cmd == 1) {
		const char *t;
		if (args_string(in, "file_text", EDIT_FILE_MAX, ARGS_REQUIRED, &t, e) < 0 ||
		    write_file(root, canon, t, strlen(t), e) < 0)
			return err_code(e);
		adds(b, "File created successfully at: ");
		adds(b, path);
		return 0;
	}
	char *text = NULL;
	size_t len = 0;
	if (read_file(root, canon, &text, &len, e) < 0)
		return err_code(e);
	int r = cmd == 0   ? view(in, path, text, b, e)
		: cmd == 2 ? replace(in, path, &text, b, e)
			   : insert(in, path, &text, b, e);
	if (r == 0 && cmd != 0)
		r = write_file(root, canon, text, strlen(text), e);
	free(text);
	return r;
}

int api_anthropic_edit(struct http_request *req, const cJSON *input, cJSON *out, char *why,
		       size_t why_size)
{
	struct err e = ERR_INIT;
	_cleanup_root_ struct files_root root = {.fd = -1};
	struct sbuf b = {0};
	int r = apif_open_root(req, &root, NULL, &e);
	if (r == 0)
		r = command(&root, input, &b, &e);
	if (r == 0 && b.oom)
		r = err_set(&e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON *content = cJSON_AddArrayToObject(out, "content");
	cJSON *t = cJSON_CreateObject();
	cJSON_AddItemToArray(content, t);
	cJSON_AddStringToObject(t, "type", "text");
	if (r < 0) {
		snprintf(why, why_size, "%s", e.msg[0] ? e.msg : "the command failed");
		cJSON_AddStringToObject(t, "text", why);
		cJSON_AddBoolToObject(out, "is_error", 1);
	} else {
		cJSON_AddStringToObject(t, "text", b.p ? b.p : "");
	}
	free(b.p);
	return r;
}
