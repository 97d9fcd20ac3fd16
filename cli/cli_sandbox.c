/* Verbs on sandboxes: create, ls, get, rm, stop, start, vnc, port. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"

extern char **environ;

/* "1280x800" into *w, *h; -1 when malformed. */
static int parse_size(const char *s, int *w, int *h)
{
	char *end;
	long a = strtol(s, &end, 10);
	if (end == s || (*end != 'x' && *end != 'X'))
		return -1;
	const char *b = end + 1;
	long bb = strtol(b, &end, 10);
	if (end == b || *end || a <= 0 || bb <= 0 || a > 1 << 20 || bb > 1 << 20)
		return -1;
	*w = (int)a;
	*h = (int)bb;
	return 0;
}

static cJSON *size_object(int w, int h)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "width", w);
	cJSON_AddNumberToObject(o, "height", h);
	return o;
}

int cli_env_add(cJSON *env, const char *kv)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		return -1;
	char *k = strndup(kv, (size_t)(eq - kv));
	cJSON_DeleteItemFromObjectCaseSensitive(env, k);
	cJSON_AddStringToObject(env, k, eq + 1);
	free(k);
	return 0;
}

enum {
	OPT_DISPLAY = 0x200,
	OPT_AGENT,
	OPT_MEMORY,
	OPT_ENV,
	OPT_NETWORK,
	OPT_IMAGE,
	OPT_NAME,
	OPT_METADATA,
	OPT_READ_ONLY_ROOT,
};

/* --network none|internet, or an allow list "NAME,CIDR,ADDR:PORT,...". */
static int network_opt(cJSON *body, const char *arg)
{
	if (!*arg)
		return -1;
	cJSON_DeleteItemFromObjectCaseSensitive(body, "network");
	if (!strcmp(arg, "none") || !strcmp(arg, "internet")) {
		cJSON_AddStringToObject(body, "network", arg);
		return 0;
	}
	cJSON *allow = cJSON_AddArrayToObject(cJSON_AddObjectToObject(body, "network"), "allow");
	for (const char *p = arg; *p;) {
		size_t n = strcspn(p, ",");
		char *entry = strndup(p, n);
		if (entry && *entry)
			cJSON_AddItemToArray(allow, cJSON_CreateString(entry));
		free(entry);
		p += n + (p[n] == ',');
	}
	return 0;
}

static int create_opt(void *ctx, int opt, const char *arg)
{
	cJSON *body = ctx;
	int w, h;
	char *end;
	switch (opt) {
	case OPT_DISPLAY:
	case OPT_AGENT:
		if (parse_size(arg, &w, &h) < 0)
			return -1;
		cJSON_AddItemToObject(body, opt == OPT_DISPLAY ? "display" : "agent_display",
				      size_object(w, h));
		return 0;
	case OPT_MEMORY: {
		long mb = strtol(arg, &end, 10);
		if (end == arg || *end || mb <= 0)
			return -1;
		cJSON_AddNumberToObject(body, "memory_mb", (double)mb);
		return 0;
	}
	case OPT_IMAGE:
		cJSON_DeleteItemFromObjectCaseSensitive(body, "image");
		cJSON_AddStringToObject(body, "image", arg);
		return 0;
	case OPT_ENV: {
		cJSON *env = cJSON_GetObjectItemCaseSensitive(body, "env");
		if (!env)
			env = cJSON_AddObjectToObject(body, "env");
		return cli_env_add(env, arg);
	}
	case OPT_NETWORK:
		return network_opt(body, arg);
	case OPT_NAME:
		cJSON_DeleteItemFromObjectCaseSensitive(body, "name");
		cJSON_AddStringToObject(body, "name", arg);
		return 0;
	case OPT_METADATA: {
		/* K=V like --env; the server checks keys and sizes. */
		cJSON *m = cJSON_GetObjectItemCaseSensitive(body, "metadata");
		if (!m)
			m = cJSON_AddObjectToObject(body, "metadata");
		return cli_env_add(m, arg);
	}
	case OPT_READ_ONLY_ROOT:
		cJSON_DeleteItemFromObjectCaseSensitive(body, "read_only_root");
		cJSON_AddTrueToObject(body, "read_only_root");
		return 0;
	}
	return -1;
}

int cli_cmd_create(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"display", required_argument, NULL, OPT_DISPLAY},
					     {"agent-display", required_argument, NULL, OPT_AGENT},
					     {"memory", required_argument, NULL, OPT_MEMORY},
					     {"env", required_argument, NULL, OPT_ENV},
					     {"network", required_argument, NULL, OPT_NETWORK},
					     {"image", required_argument, NULL, OPT_IMAGE},
					     {"name", required_argument, NULL, OPT_NAME},
					     {"metadata", required_argument, NULL, OPT_METADATA},
					     {"read-only-root", no_argument, NULL, OPT_READ_ONLY_ROOT},
					     {0}};
	cJSON *body = cJSON_CreateObject();
	int first, rc = cli_parse(c, argc, argv, opts, create_opt, body, &first);
	if (rc == 0 && first < argc)
		rc = cli_usage_error(argv[0], "unexpected argument '%s'", argv[first]);
	if (rc) {
		cJSON_Delete(body);
		return rc == 1 ? CLI_OK : rc;
	}
	_cleanup_free_ char *json = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	struct cli_reply r;
	struct err e = ERR_INIT;
	if (cli_request(c, "POST", "/v1/sandboxes", json, &r, &e) < 0)
		return cli_fail(c, &e);
	if (c->json) {
		cli_print_body(&r);
	} else {
		cJSON *j = cJSON_ParseWithLength(r.body, r.len);
		const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "id"));
		printf("%s\n", id ? id : "?");
		cJSON_Delete(j);
	}
	cli_reply_free(&r);
	return CLI_OK;
}

static int no_opts(void *ctx, int opt, const char *arg)
{
	return -1;
}

/* Parses a verb that takes only global options and exactly `want`
 * positional arguments (at least `want` when `more`).  Returns -1 to go
 * on, else the exit code. */
static int simple_args(struct cli *c, int argc, char **argv, int want, int more, int *first)
{
	int rc = cli_parse(c, argc, argv, NULL, no_opts, NULL, first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	int n = argc - *first;
	if (n < want || (!more && n > want))
		return cli_usage_error(argv[0],
				       n < want ? "missing arguments" : "too many arguments");
	return -1;
}

static const char *num_str(const cJSON *o, const char *key, char *buf, size_t cap)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (cJSON_IsNumber(v))
		snprintf(buf, cap, "%.0f", v->valuedouble);
	else
		snprintf(buf, cap, "-");
	return buf;
}

static void print_sandbox_row(const cJSON *s)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(s, "display");
	char w[16], h[16], mem[16], when[32] = "-", disp[40];
	snprintf(disp, sizeof(disp), "%sx%s", num_str(d, "width", w, sizeof(w)),
		 num_str(d, "height", h, sizeof(h)));
	const char *at = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "created_at"));
	long long ms = at ? clock_parse_rfc3339(at) : 0;
	if (ms > 0) {
		time_t t = (time_t)(ms / 1000);
		struct tm tm;
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
	}
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "id"));
	const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "status"));
	printf("%-32s  %-8s  %-9s  %7s  %s\n", id ? id : "?", st ? st : "?", disp,
	       num_str(s, "memory_mb", mem, sizeof(mem)), when);
}

/* ls --metadata K=V: "&metadata.K=V" appended to the query in ctx. */
static int ls_opt(void *ctx, int opt, const char *arg)
{
	char **q = ctx;
	const char *eq = strchr(arg, '=');
	if (opt != OPT_METADATA || !eq || eq == arg)
		return -1;
	char *k = strndup(arg, (size_t)(eq - arg));
	char *ek = k ? cli_escape(k) : NULL, *ev = cli_escape(eq + 1), *nq = NULL;
	int r = ek && ev && asprintf(&nq, "%s%cmetadata.%s=%s", *q ? *q : "/v1/sandboxes",
				     *q ? '&' : '?', ek, ev) >= 0
		    ? 0
		    : -1;
	free(k);
	free(ek);
	free(ev);
	if (r == 0) {
		free(*q);
		*q = nq;
	}
	return r;
}

int cli_cmd_ls(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"metadata", required_argument, NULL, OPT_METADATA},
					     {0}};
	_cleanup_free_ char *path = NULL;
	int first, rc = cli_parse(c, argc, argv, opts, ls_opt, &path, &first);
	if (rc == 0 && first < argc)
		rc = cli_usage_error(argv[0], "unexpected argument '%s'", argv[first]);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	struct cli_reply r;
	struct err e = ERR_INIT;
	if (cli_request(c, "GET", path ? path : "/v1/sandboxes", NULL, &r, &e) < 0)
		return cli_fail(c, &e);
	if (c->json) {
		cli_print_body(&r);
	} else {
		cJSON *j = cJSON_ParseWithLength(r.body, r.len);
		const cJSON *s;
		printf("%-32s  %-8s  %-9s  %7s  %s\n", "ID", "STATUS", "DISPLAY", "MEM(MB)",
		       "CREATED");
		cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(j, "sandboxes"))
		    print_sandbox_row(s);
		cJSON_Delete(j);
	}
	cli_reply_free(&r);
	return CLI_OK;
}

/* One request on a sandbox; prints the answer as JSON with --json, else
 * calls `human` on it (NULL: print nothing). */
static int on_sandbox(struct cli *c, const char *method, const char *id, const char *suffix,
		      const char *body, void (*human)(const cJSON *))
{
	_cleanup_free_ char *path = cli_sandbox_path(id, suffix);
	struct cli_reply r;
	struct err e = ERR_INIT;
	if (cli_request(c, method, path, body, &r, &e) < 0)
		return cli_fail(c, &e);
	if (c->json && r.len) {
		cli_print_body(&r);
	} else if (human) {
		cJSON *j = cJSON_ParseWithLength(r.body, r.len);
		human(j);
		cJSON_Delete(j);
	}
	cli_reply_free(&r);
	return CLI_OK;
}

static void print_details(const cJSON *s)
{
	const cJSON *f;
	cJSON_ArrayForEach(f, s)
	{
		if (cJSON_IsString(f)) {
			printf("%-14s %s\n", f->string, f->valuestring);
		} else if (cJSON_IsNumber(f)) {
			printf("%-14s %.0f\n", f->string, f->valuedouble);
		} else {
			char *v = cJSON_PrintUnformatted(f);
			printf("%-14s %s\n", f->string, v ? v : "?");
			free(v);
		}
	}
}

static void print_status(const cJSON *s)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "id"));
	const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "status"));
	printf("%s %s\n", id ? id : "?", st ? st : "?");
}

int cli_cmd_get(struct cli *c, int argc, char **argv)
{
	int first, rc = simple_args(c, argc, argv, 1, 0, &first);
	return rc >= 0 ? rc : on_sandbox(c, "GET", argv[first], "", NULL, print_details);
}

int cli_cmd_stop(struct cli *c, int argc, char **argv)
{
	int first, rc = simple_args(c, argc, argv, 1, 0, &first);
	return rc >= 0 ? rc : on_sandbox(c, "POST", argv[first], "/stop", NULL, print_status);
}

int cli_cmd_start(struct cli *c, int argc, char **argv)
{
	int first, rc = simple_args(c, argc, argv, 1, 0, &first);
	return rc >= 0 ? rc : on_sandbox(c, "POST", argv[first], "/start", NULL, print_status);
}

int cli_cmd_rm(struct cli *c, int argc, char **argv)
{
	int first, rc = simple_args(c, argc, argv, 1, 1, &first);
	if (rc >= 0)
		return rc;
	/* Every id is tried; the exit code is the first failure's. */
	int worst = CLI_OK;
	for (int i = first; i < argc; i++) {
		rc = on_sandbox(c, "DELETE", argv[i], "", NULL, NULL);
		if (rc && !worst)
			worst = rc;
	}
	return worst;
}

struct vnc_opts {
	int view_only;
	int open;
	long ttl;
};

enum { OPT_VIEW_ONLY = 0x200, OPT_OPEN, OPT_TTL };

static int vnc_opt(void *ctx, int opt, const char *arg)
{
	struct vnc_opts *o = ctx;
	char *end;
	if (opt == OPT_VIEW_ONLY)
		o->view_only = 1;
	else if (opt == OPT_OPEN)
		o->open = 1;
	else if (opt == OPT_TTL && (o->ttl = strtol(arg, &end, 10)) > 0 && !*end)
		return 0;
	else
		return -1;
	return 0;
}

/* Runs the first of xdg-open and sensible-browser on the PATH with `url`. */
static void open_browser(const char *url)
{
	static const char *const openers[] = {"xdg-open", "sensible-browser"};
	for (size_t i = 0; i < 2; i++) {
		char *argv[] = {(char *)openers[i], (char *)url, NULL};
		pid_t pid;
		if (posix_spawnp(&pid, openers[i], NULL, NULL, argv, environ) != 0)
			continue;
		int st;
		waitpid(pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			return;
	}
	fprintf(stderr, "deskbox: found no xdg-open or sensible-browser that opened the URL\n");
}

/* POSTs `body` to the sandbox's `tokens` path and prints the server URL of
 * the answer's "url" (the whole answer with --json); opens it with
 * `open`. */
static int print_token_url(struct cli *c, const char *id, const char *tokens, const char *body,
			   int open)
{
	_cleanup_free_ char *path = cli_sandbox_path(id, tokens);
	struct cli_reply r;
	struct err e = ERR_INIT;
	if (cli_request(c, "POST", path, body, &r, &e) < 0)
		return cli_fail(c, &e);
	cJSON *j = cJSON_ParseWithLength(r.body, r.len);
	const char *rel = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "url"));
	size_t ulen = strlen(c->url);
	while (ulen && c->url[ulen - 1] == '/')
		ulen--;
	char *url = NULL;
	if (asprintf(&url, "%.*s%s", (int)ulen, c->url, rel ? rel : "") < 0)
		url = NULL;
	if (c->json)
		cli_print_body(&r);
	else
		printf("%s\n", url ? url : "?");
	fflush(stdout);
	if (open && url)
		open_browser(url);
	free(url);
	cJSON_Delete(j);
	cli_reply_free(&r);
	return CLI_OK;
}

int cli_cmd_vnc(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"view-only", no_argument, NULL, OPT_VIEW_ONLY},
					     {"open", no_argument, NULL, OPT_OPEN},
					     {"ttl", required_argument, NULL, OPT_TTL},
					     {0}};
	struct vnc_opts o = {.ttl = 3600};
	int first, rc = cli_parse(c, argc, argv, opts, vnc_opt, &o, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first != 1)
		return cli_usage_error(argv[0], "needs exactly one sandbox id");
	char body[96];
	snprintf(body, sizeof(body), "{\"view_only\":%s,\"ttl_s\":%ld}",
		 o.view_only ? "true" : "false", o.ttl);
	return print_token_url(c, argv[first], "/vnc/tokens", body, o.open);
}

int cli_cmd_port(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"open", no_argument, NULL, OPT_OPEN}, {"ttl", required_argument, NULL, OPT_TTL}, {0}};
	struct vnc_opts o = {.ttl = 3600};
	int first, rc = cli_parse(c, argc, argv, opts, vnc_opt, &o, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first != 2)
		return cli_usage_error(argv[0], "needs a sandbox id and a port");
	char *end;
	long port = strtol(argv[first + 1], &end, 10);
	if (*end || port < 1 || port > 65535)
		return cli_usage_error(argv[0], "the port must be a number from 1 to 65535");
	char body[64], tokens[64];
	snprintf(body, sizeof(body), "{\"ttl_s\":%ld}", o.ttl);
	snprintf(tokens, sizeof(tokens), "/ports/%ld/tokens", port);
	return print_token_url(c, argv[first], tokens, body, o.open);
}

/* ---- lifecycle (docs/lifecycle.md) ---- */

static void print_expiry(const cJSON *s)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "id"));
	const char *at = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "expires_at"));
	printf("%s expires %s\n", id ? id : "?", at ? at : "never");
}

static void print_checkpoint(const cJSON *s)
{
	char size[32];
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "name"));
	const char *at = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "created_at"));
	printf("%-24s  %12s  %s\n", name ? name : "?", num_str(s, "size_bytes", size, sizeof(size)),
	       at ? at : "-");
}

static void print_checkpoints(const cJSON *j)
{
	const cJSON *s;
	printf("%-24s  %12s  %s\n", "NAME", "BYTES", "CREATED");
	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(j, "checkpoints"))
	    print_checkpoint(s);
}

int cli_cmd_pause(struct cli *c, int argc, char **argv)
{
	int first, rc = simple_args(c, argc, argv, 1, 0, &first);
	return rc >= 0 ? rc : on_sandbox(c, "POST", argv[first], "/pause", NULL, print_status);
}

int cli_cmd_resume(struct cli *c, int argc, char **argv)
{
	int first, rc = simple_args(c, argc, argv, 1, 0, &first);
	return rc >= 0 ? rc : on_sandbox(c, "POST", argv[first], "/resume", NULL, print_status);
}

/* A request on `id` whose body is {key: value} (value a string, or the
 * number it spells with `number`). */
static int on_sandbox_with(struct cli *c, const char *id, const char *suffix, const char *key,
			   const char *value, int number, void (*human)(const cJSON *))
{
	cJSON *b = cJSON_CreateObject();
	if (number) {
		char *end;
		errno = 0;
		double v = strtod(value, &end);
		if (errno || *end || end == value || v < 0) {
			cJSON_Delete(b);
			return cli_usage_error("timeout", "'%s' is not a number of seconds", value);
		}
		cJSON_AddNumberToObject(b, key, v);
	} else if (value) {
		cJSON_AddStringToObject(b, key, value);
	}
	_cleanup_free_ char *body = cJSON_PrintUnformatted(b);
	cJSON_Delete(b);
	return on_sandbox(c, "POST", id, suffix, body, human);
}

int cli_cmd_timeout(struct cli *c, int argc, char **argv)
{
	int first, rc = simple_args(c, argc, argv, 2, 0, &first);
	return rc >= 0 ? rc
		       : on_sandbox_with(c, argv[first], "/timeout", "timeout_s", argv[first + 1],
					 1, print_expiry);
}

int cli_cmd_checkpoint(struct cli *c, int argc, char **argv)
{
	int first, rc = simple_args(c, argc, argv, 1, 1, &first);
	if (rc >= 0)
		return rc;
	if (argc - first == 1)
		return on_sandbox(c, "GET", argv[first], "/checkpoints", NULL, print_checkpoints);
	if (argc - first > 2)
		return cli_usage_error(argv[0], "too many arguments");
	return on_sandbox_with(c, argv[first], "/checkpoints", "name", argv[first + 1], 0,
			       print_checkpoint);
}

int cli_cmd_restore(struct cli *c, int argc, char **argv)
{
	int first, rc = simple_args(c, argc, argv, 2, 0, &first);
	if (rc >= 0)
		return rc;
	_cleanup_free_ char *name = cli_escape(argv[first + 1]);
	_cleanup_free_ char *suffix = NULL;
	if (!name || asprintf(&suffix, "/checkpoints/%s/restore", name) < 0)
		return cli_usage_error(argv[0], "out of memory");
	return on_sandbox(c, "POST", argv[first], suffix, NULL, print_status);
}

int cli_cmd_fork(struct cli *c, int argc, char **argv)
{
	int first, rc = simple_args(c, argc, argv, 1, 1, &first);
	if (rc >= 0)
		return rc;
	if (argc - first > 2)
		return cli_usage_error(argv[0], "too many arguments");
	return on_sandbox_with(c, argv[first], "/fork", "checkpoint",
			       argc - first == 2 ? argv[first + 1] : NULL, 0, print_status);
}

enum { OPT_LIM_MEMORY = 0x300, OPT_LIM_PIDS, OPT_LIM_CPUS };

/* One option of `limits` into the PATCH body; -1 on a bad value. */
static int limits_opt(void *ctx, int opt, const char *arg)
{
	cJSON *body = ctx;
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno || end == arg || *end || v < 0)
		return -1;
	if (opt == OPT_LIM_MEMORY)
		cJSON_AddNumberToObject(body, "memory_mb", v);
	else if (opt == OPT_LIM_PIDS)
		cJSON_AddNumberToObject(body, "pids_max", v);
	else if (opt == OPT_LIM_CPUS)
		cJSON_AddNumberToObject(body, "cpu_millis", (double)(long long)(v * 1000 + 0.5));
	else
		return -1;
	return 0;
}

int cli_cmd_limits(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"memory", required_argument, NULL, OPT_LIM_MEMORY},
					     {"pids", required_argument, NULL, OPT_LIM_PIDS},
					     {"cpus", required_argument, NULL, OPT_LIM_CPUS},
					     {0}};
	cJSON *body = cJSON_CreateObject();
	int first, rc = cli_parse(c, argc, argv, opts, limits_opt, body, &first);
	if (rc == 0 && argc - first != 1)
		rc = cli_usage_error(argv[0], argc - first < 1 ? "missing the sandbox id"
							      : "too many arguments");
	if (rc) {
		cJSON_Delete(body);
		return rc == 1 ? CLI_OK : rc;
	}
	_cleanup_free_ char *json = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	return on_sandbox(c, "PATCH", argv[first], "", json, print_details);
}
