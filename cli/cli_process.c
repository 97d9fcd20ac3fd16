/* exec and run: a command or code in a sandbox, its output streamed as it
 * comes (server-sent events), the command's exit code as ours. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/text.h"

/* What the exit code is when the command has none of its own: timed out
 * as timeout(1) says, killed otherwise (deleted sandbox, OOM). */
#define EXIT_TIMED_OUT 124
#define EXIT_KILLED    125

/* The server's code_run takes at most 128 KiB; a larger file is refused
 * there with a message, this only bounds what is read. */
#define CODE_MAX (4 << 20)

struct run_opts {
	cJSON *body;
	const char *lang;
};

enum { OPT_TIMEOUT = 0x200, OPT_CWD, OPT_ENV, OPT_LANG };

static int run_opt(void *ctx, int opt, const char *arg)
{
	struct run_opts *o = ctx;
	char *end;
	switch (opt) {
	case OPT_TIMEOUT: {
		double t = strtod(arg, &end);
		if (end == arg || *end || t <= 0)
			return -1;
		cJSON_AddNumberToObject(o->body, "timeout_s", t);
		return 0;
	}
	case OPT_CWD:
		cJSON_AddStringToObject(o->body, "cwd", arg);
		return 0;
	case OPT_ENV: {
		cJSON *env = cJSON_GetObjectItemCaseSensitive(o->body, "env");
		if (!env)
			env = cJSON_AddObjectToObject(o->body, "env");
		return cli_env_add(env, arg);
	}
	case OPT_LANG:
		if (strcmp(arg, "python") && strcmp(arg, "bash") && strcmp(arg, "node"))
			return -1;
		o->lang = arg;
		return 0;
	}
	return -1;
}

/* The exit code for a result object. */
static int result_exit(const cJSON *res)
{
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(res, "exit_code");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "timed_out"))) {
		fprintf(stderr, "deskbox: the command timed out and was killed\n");
		return EXIT_TIMED_OUT;
	}
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "oom_killed")))
		fprintf(stderr, "deskbox: the command ran out of memory and was killed\n");
	if (!cJSON_IsNumber(code) || code->valuedouble < 0 || code->valuedouble > 255)
		return EXIT_KILLED;
	return (int)code->valuedouble;
}

struct stream_state {
	int exit_code; /* -1 until the result arrived */
};

/* One event: output goes to our stdout or stderr byte for byte (data_b64
 * when the output was not UTF-8), the result gives the exit code. */
static int on_event(void *ctx, const char *event, const char *data)
{
	struct stream_state *s = ctx;
	int fd = strcmp(event, "stdout") == 0 ? 1 : strcmp(event, "stderr") == 0 ? 2 : -1;
	cJSON *j = cJSON_Parse(data);
	int rc = 0;
	if (fd >= 0) {
		const char *b64 =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "data_b64"));
		const char *text =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "data"));
		size_t n = 0;
		char *raw = b64 ? base64_decode(b64, &n) : NULL;
		if (raw)
			rc = cli_write_all(fd, raw, n);
		else if (text)
			rc = cli_write_all(fd, text, strlen(text));
		free(raw);
	} else if (strcmp(event, "result") == 0) {
		s->exit_code = result_exit(j);
	}
	cJSON_Delete(j);
	return rc;
}

/* Sends the run; streamed unless --json, where the server's result is
 * printed as it is. */
static int send_run(struct cli *c, const char *id, const char *route, cJSON *body)
{
	_cleanup_free_ char *json = cJSON_PrintUnformatted(body);
	struct err e = ERR_INIT;
	if (c->json) {
		_cleanup_free_ char *path = cli_sandbox_path(id, route);
		struct cli_reply r;
		if (cli_request(c, "POST", path, json, &r, &e) < 0)
			return cli_fail(c, &e);
		cli_print_body(&r);
		cJSON *j = cJSON_ParseWithLength(r.body, r.len);
		int code = result_exit(j);
		cJSON_Delete(j);
		cli_reply_free(&r);
		return code;
	}
	char suffix[64];
	snprintf(suffix, sizeof(suffix), "%s?stream=1", route);
	_cleanup_free_ char *path = cli_sandbox_path(id, suffix);
	struct stream_state s = {.exit_code = -1};
	if (cli_stream(c, path, json, on_event, &s, &e) < 0)
		return cli_fail(c, &e);
	if (s.exit_code < 0) {
		err_set(&e, ERR_UNAVAILABLE, EIO, "the stream ended without a result");
		return cli_fail(c, &e);
	}
	return s.exit_code;
}

int cli_cmd_exec(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"timeout", required_argument, NULL, OPT_TIMEOUT},
					     {"cwd", required_argument, NULL, OPT_CWD},
					     {"env", required_argument, NULL, OPT_ENV},
					     {0}};
	struct run_opts o = {.body = cJSON_CreateObject()};
	int first, rc = cli_parse(c, argc, argv, opts, run_opt, &o, &first);
	if (rc == 0 && argc - first < 2)
		rc = cli_usage_error(argv[0], "needs a sandbox id and a command after --");
	if (rc == 0) {
		cJSON *av = cJSON_AddArrayToObject(o.body, "argv");
		for (int i = first + 1; i < argc; i++)
			cJSON_AddItemToArray(av, cJSON_CreateString(argv[i]));
		rc = send_run(c, argv[first], "/process/exec", o.body);
	} else if (rc == 1) {
		rc = CLI_OK;
	}
	cJSON_Delete(o.body);
	return rc;
}

/* The code in `file` ("-": stdin), malloc'd and NUL-terminated. */
static char *read_code(const char *file, struct err *e)
{
	_cleanup_fd_ int fd = strcmp(file, "-") == 0 ? dup(0) : open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err_sys(e, ERR_INVALID, errno, "cannot open '%s'", file);
		return NULL;
	}
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap + 1);
	while (buf) {
		if (len == cap && (cap >= CODE_MAX || !(buf = realloc(buf, (cap *= 2) + 1))))
			break;
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err_sys(e, ERR_INVALID, errno, "reading '%s'", file);
			free(buf);
			return NULL;
		}
		if (n == 0) {
			buf[len] = 0;
			return buf;
		}
		len += (size_t)n;
	}
	err_set(e, ERR_INVALID, EFBIG, "'%s' is too large for code_run", file);
	free(buf);
	return NULL;
}

int cli_cmd_run(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"lang", required_argument, NULL, OPT_LANG},
					     {"timeout", required_argument, NULL, OPT_TIMEOUT},
					     {"cwd", required_argument, NULL, OPT_CWD},
					     {"env", required_argument, NULL, OPT_ENV},
					     {0}};
	struct run_opts o = {.body = cJSON_CreateObject(), .lang = "python"};
	int first, rc = cli_parse(c, argc, argv, opts, run_opt, &o, &first);
	if (rc == 0 && argc - first != 2)
		rc = cli_usage_error(argv[0], "needs a sandbox id and a FILE (or - for stdin)");
	if (rc == 0) {
		struct err e = ERR_INIT;
		char *code = read_code(argv[first + 1], &e);
		if (!code) {
			rc = cli_fail(c, &e);
		} else {
			cJSON_AddStringToObject(o.body, "code", code);
			cJSON_AddStringToObject(o.body, "language", o.lang);
			free(code);
			rc = send_run(c, argv[first], "/process/code_run", o.body);
		}
	} else if (rc == 1) {
		rc = CLI_OK;
	}
	cJSON_Delete(o.body);
	return rc;
}
