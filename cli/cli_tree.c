/* Tree verbs: archive (a directory out as tar, tar.gz or zip), unpack (an
 * archive in), find and search.  Archives are streamed both ways, never
 * held in memory. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

enum { OPT_FORMAT = 0x300, OPT_NAME, OPT_MAX_DEPTH, OPT_REGEX, OPT_IGNORE_CASE, OPT_PARENTS };

struct tree_opts {
	const char *out;
	const char *format;
	const char *name;
	long max_depth;
	int regex, ignore_case, parents;
};

static int tree_opt(void *ctx, int opt, const char *arg)
{
	struct tree_opts *o = ctx;
	char *end;
	switch (opt) {
	case 'o':
		o->out = arg;
		return 0;
	case OPT_FORMAT:
		if (strcmp(arg, "tar") && strcmp(arg, "tar.gz") && strcmp(arg, "tgz") &&
		    strcmp(arg, "zip"))
			return -1;
		o->format = arg;
		return 0;
	case OPT_NAME:
		o->name = arg;
		return 0;
	case OPT_MAX_DEPTH:
		o->max_depth = strtol(arg, &end, 10);
		return end == arg || *end || o->max_depth < 0 || o->max_depth > 1000 ? -1 : 0;
	case OPT_REGEX:
		o->regex = 1;
		return 0;
	case OPT_IGNORE_CASE:
		o->ignore_case = 1;
		return 0;
	case OPT_PARENTS:
		o->parents = 1;
		return 0;
	}
	return -1;
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), m = strlen(tail);
	return n >= m && strcmp(s + n - m, tail) == 0;
}

/* --format, else what the local file's name says, else tar. */
static const char *format_for(const struct tree_opts *o, const char *local)
{
	if (o->format)
		return o->format;
	if (ends_with(local, ".tar.gz") || ends_with(local, ".tgz"))
		return "tar.gz";
	return ends_with(local, ".zip") ? "zip" : "tar";
}

/* "/v1/sandboxes/ID/files/ROUTE?path=P&format=F..." (extra starts with '&'). */
static char *tree_path(const char *id, const char *route, const char *remote, const char *extra)
{
	_cleanup_free_ char *q = cli_escape(remote);
	_cleanup_free_ char *suffix = NULL;
	if (!q || asprintf(&suffix, "/files/%s?path=%s%s", route, q, extra) < 0)
		return NULL;
	return cli_sandbox_path(id, suffix);
}

int cli_cmd_archive(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
					     {"format", required_argument, NULL, OPT_FORMAT},
					     {0}};
	struct tree_opts o = {0};
	int first, rc = cli_parse(c, argc, argv, opts, tree_opt, &o, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first != 2)
		return cli_usage_error(argv[0], "needs a sandbox id and REMOTE_DIR");
	if (!o.out)
		return cli_usage_error(argv[0], "needs -o FILE");
	const char *remote = argv[first + 1];
	char extra[32];
	snprintf(extra, sizeof(extra), "&format=%s", format_for(&o, o.out));
	_cleanup_free_ char *path = tree_path(argv[first], "archive", remote, extra);
	if (!path)
		return CLI_EXIT_LOCAL;
	char sha[65];
	uint64_t size;
	struct err e = ERR_INIT;
	if (cli_save(c, path, o.out, &size, sha, &e) < 0)
		return cli_fail(c, &e);
	if (c->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "path", o.out);
		cJSON_AddNumberToObject(j, "size", (double)size);
		cJSON_AddStringToObject(j, "sha256", sha);
		_cleanup_free_ char *s = cJSON_PrintUnformatted(j);
		printf("%s\n", s);
		cJSON_Delete(j);
	} else {
		printf("%s -> %s: %llu bytes, sha256 %s\n", remote, o.out, (unsigned long long)size,
		       sha);
	}
	return CLI_OK;
}

int cli_cmd_unpack(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"format", required_argument, NULL, OPT_FORMAT},
					     {"parents", no_argument, NULL, OPT_PARENTS},
					     {0}};
	struct tree_opts o = {0};
	int first, rc = cli_parse(c, argc, argv, opts, tree_opt, &o, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first != 3)
		return cli_usage_error(argv[0], "needs a sandbox id, LOCAL_ARCHIVE and REMOTE_DIR");
	const char *local = argv[first + 1], *remote = argv[first + 2];
	struct err e = ERR_INIT;
	struct stat st;
	_cleanup_fd_ int fd = open(local, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err_sys(&e, ERR_INVALID, fd < 0 ? errno : EINVAL, "cannot read '%s'", local);
		return cli_fail(c, &e);
	}
	char extra[48];
	snprintf(extra, sizeof(extra), "&format=%s%s", format_for(&o, local),
		 o.parents ? "&parents=1" : "");
	_cleanup_free_ char *path = tree_path(argv[first], "archive", remote, extra);
	if (!path)
		return CLI_EXIT_LOCAL;
	char sha[65];
	struct cli_reply r;
	rc = cli_upload(c, path, fd, (uint64_t)st.st_size, sha, &r, &e);
	if (rc == 0 && c->json) {
		cli_print_body(&r);
	} else if (rc == 0) {
		cJSON *j = cJSON_ParseWithLength(r.body, r.len);
		double members =
		    cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "members"));
		double bytes = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "bytes"));
		printf("%s -> %s: %.0f members, %.0f bytes\n", local, remote, members, bytes);
		cJSON_Delete(j);
	}
	cli_reply_free(&r);
	return rc < 0 ? cli_fail(c, &e) : CLI_OK;
}

/* GETs `path` and prints the answer: as it is with --json, else `line`
 * for each member of the array `key`; a truncated answer is noted on
 * stderr. */
static int list_answer(struct cli *c, const char *path, const char *key,
		       void (*line)(const cJSON *item))
{
	struct cli_reply r;
	struct err e = ERR_INIT;
	if (cli_request(c, "GET", path, NULL, &r, &e) < 0)
		return cli_fail(c, &e);
	if (c->json) {
		cli_print_body(&r);
		cli_reply_free(&r);
		return CLI_OK;
	}
	cJSON *j = cJSON_ParseWithLength(r.body, r.len);
	const cJSON *item;
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(j, key))
	{
		line(item);
	}
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "truncated")))
		fprintf(stderr, "deskbox: the answer was truncated (a limit was reached)\n");
	cJSON_Delete(j);
	cli_reply_free(&r);
	return CLI_OK;
}

static const char *str_of(const cJSON *o, const char *k)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
	return s ? s : "";
}

static void find_line(const cJSON *item)
{
	printf("%s%s\n", str_of(item, "path"), strcmp(str_of(item, "type"), "dir") ? "" : "/");
}

int cli_cmd_find(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"name", required_argument, NULL, OPT_NAME},
					     {"max-depth", required_argument, NULL, OPT_MAX_DEPTH},
					     {0}};
	struct tree_opts o = {.max_depth = -1};
	int first, rc = cli_parse(c, argc, argv, opts, tree_opt, &o, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first != 2)
		return cli_usage_error(argv[0], "needs a sandbox id and PATH");
	_cleanup_free_ char *name = o.name ? cli_escape(o.name) : NULL;
	_cleanup_free_ char *extra = NULL;
	char depth[32] = "";
	if (o.max_depth >= 0)
		snprintf(depth, sizeof(depth), "&max_depth=%ld", o.max_depth);
	if ((o.name && !name) ||
	    asprintf(&extra, "%s%s%s", name ? "&name=" : "", name ? name : "", depth) < 0)
		return CLI_EXIT_LOCAL;
	_cleanup_free_ char *path = tree_path(argv[first], "find", argv[first + 1], extra);
	return path ? list_answer(c, path, "entries", find_line) : CLI_EXIT_LOCAL;
}

static void search_line(const cJSON *item)
{
	double line = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(item, "line"));
	printf("%s:%.0f:%s\n", str_of(item, "path"), line, str_of(item, "text"));
}

int cli_cmd_search(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"regex", no_argument, NULL, OPT_REGEX},
					     {"ignore-case", no_argument, NULL, OPT_IGNORE_CASE},
					     {0}};
	struct tree_opts o = {0};
	int first, rc = cli_parse(c, argc, argv, opts, tree_opt, &o, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first != 3)
		return cli_usage_error(argv[0], "needs a sandbox id, PATH and PATTERN");
	_cleanup_free_ char *pat = cli_escape(argv[first + 2]);
	_cleanup_free_ char *extra = NULL;
	if (!pat || asprintf(&extra, "&pattern=%s%s%s", pat, o.regex ? "&regex=1" : "",
			     o.ignore_case ? "&ignore_case=1" : "") < 0)
		return CLI_EXIT_LOCAL;
	_cleanup_free_ char *path = tree_path(argv[first], "search", argv[first + 1], extra);
	return path ? list_answer(c, path, "matches", search_line) : CLI_EXIT_LOCAL;
}
