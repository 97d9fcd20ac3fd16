/* Desktop verbs: screenshot, click, type, key. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

enum { OPT_REGION = 0x200, OPT_BUTTON, OPT_COUNT };

struct shot_opts {
	const char *out;
	char query[128];
};

static int shot_opt(void *ctx, int opt, const char *arg)
{
	struct shot_opts *o = ctx;
	if (opt == 'o') {
		o->out = arg;
		return 0;
	}
	unsigned x, y, w, h;
	char end;
	if (opt != OPT_REGION || sscanf(arg, "%u,%u,%u,%u%c", &x, &y, &w, &h, &end) != 4)
		return -1;
	snprintf(o->query, sizeof(o->query), "?x=%u&y=%u&w=%u&h=%u", x, y, w, h);
	return 0;
}

int cli_cmd_screenshot(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
					     {"region", required_argument, NULL, OPT_REGION},
					     {0}};
	struct shot_opts o = {0};
	int first, rc = cli_parse(c, argc, argv, opts, shot_opt, &o, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first != 1)
		return cli_usage_error(argv[0], "needs exactly one sandbox id");
	if (!o.out)
		return cli_usage_error(argv[0], "needs -o FILE");
	char suffix[160];
	snprintf(suffix, sizeof(suffix), "/desktop/screenshot%s", o.query);
	_cleanup_free_ char *path = cli_sandbox_path(argv[first], suffix);
	uint64_t size;
	struct err e = ERR_INIT;
	if (cli_save(c, path, o.out, &size, NULL, &e) < 0)
		return cli_fail(c, &e);
	if (c->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "path", o.out);
		cJSON_AddNumberToObject(j, "size", (double)size);
		_cleanup_free_ char *s = cJSON_PrintUnformatted(j);
		printf("%s\n", s);
		cJSON_Delete(j);
	} else {
		printf("%s: %llu bytes\n", o.out, (unsigned long long)size);
	}
	return CLI_OK;
}

/* POSTs `body` to the desktop action; prints the answer with --json. */
static int action(struct cli *c, const char *id, const char *name, cJSON *body)
{
	char suffix[64];
	snprintf(suffix, sizeof(suffix), "/desktop/%s", name);
	_cleanup_free_ char *path = cli_sandbox_path(id, suffix);
	_cleanup_free_ char *json = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	struct cli_reply r;
	struct err e = ERR_INIT;
	int rc = cli_request(c, "POST", path, json, &r, &e);
	if (rc == 0 && c->json)
		cli_print_body(&r);
	cli_reply_free(&r);
	return rc < 0 ? cli_fail(c, &e) : CLI_OK;
}

static int click_opt(void *ctx, int opt, const char *arg)
{
	cJSON *body = ctx;
	char *end;
	if (opt == OPT_BUTTON) {
		cJSON_AddStringToObject(body, "button", arg);
		return 0;
	}
	long n = strtol(arg, &end, 10);
	if (opt != OPT_COUNT || end == arg || *end || n < 1 || n > 3)
		return -1;
	cJSON_AddNumberToObject(body, "count", (double)n);
	return 0;
}

static int parse_coord(const char *s, long *v)
{
	char *end;
	*v = strtol(s, &end, 10);
	return end == s || *end || *v < 0 ? -1 : 0;
}

int cli_cmd_click(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"button", required_argument, NULL, OPT_BUTTON},
					     {"count", required_argument, NULL, OPT_COUNT},
					     {0}};
	cJSON *body = cJSON_CreateObject();
	long x = 0, y = 0;
	int first, rc = cli_parse(c, argc, argv, opts, click_opt, body, &first);
	if (rc == 0 && argc - first != 3)
		rc = cli_usage_error(argv[0], "needs a sandbox id, X and Y");
	if (rc == 0 &&
	    (parse_coord(argv[first + 1], &x) < 0 || parse_coord(argv[first + 2], &y) < 0))
		rc = cli_usage_error(argv[0], "X and Y are pixel coordinates (0 or more)");
	if (rc) {
		cJSON_Delete(body);
		return rc == 1 ? CLI_OK : rc;
	}
	cJSON_AddNumberToObject(body, "x", (double)x);
	cJSON_AddNumberToObject(body, "y", (double)y);
	return action(c, argv[first], "click", body);
}

static int no_opts(void *ctx, int opt, const char *arg)
{
	return -1;
}

int cli_cmd_type(struct cli *c, int argc, char **argv)
{
	int first, rc = cli_parse(c, argc, argv, NULL, no_opts, NULL, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first != 2)
		return cli_usage_error(argv[0], "needs a sandbox id and one TEXT (quote it)");
	cJSON *body = cJSON_CreateObject();
	cJSON_AddStringToObject(body, "text", argv[first + 1]);
	return action(c, argv[first], "type_text", body);
}

int cli_cmd_key(struct cli *c, int argc, char **argv)
{
	int first, rc = cli_parse(c, argc, argv, NULL, no_opts, NULL, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first < 2)
		return cli_usage_error(argv[0], "needs a sandbox id and KEYS");
	/* Several arguments are pressed one after the other, as one string
	 * with spaces would be. */
	cJSON *body = cJSON_CreateObject();
	cJSON *keys = cJSON_AddArrayToObject(body, "keys");
	for (int i = first + 1; i < argc; i++)
		cJSON_AddItemToArray(keys, cJSON_CreateString(argv[i]));
	return action(c, argv[first], "key", body);
}
