/* deskbox: the command-line client's options, verb table and help. */
#include "cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_URL "http://127.0.0.1:8080"

static const struct cli_verb verbs[] = {
    {"create", cli_cmd_create,
     "create [--display WxH] [--agent-display WxH] [--memory MB] [--env K=V]... [--network N]\n"
     "       [--image NAME] [--name NAME] [--metadata K=V]... [--read-only-root]",
     "create a sandbox and print its id",
     "Creates a sandbox with a desktop and prints its id once the desktop is up.\n"
     "  --display WxH        screen size (default 1280x800)\n"
     "  --agent-display WxH  the size an agent sees and points in\n"
     "  --memory MB          memory limit (default 2048)\n"
     "  --env K=V            an environment variable for every process (repeatable)\n"
     "  --network N          none, internet, or an allow list: NAME,CIDR,ADDR:PORT,...\n"
     "  --image NAME         a stored image (docs/images.md; default: default)\n"
     "  --name NAME          a unique name, usable in place of the id everywhere\n"
     "  --metadata K=V       a label to find it by (repeatable; ls --metadata K=V)\n"
     "  --read-only-root     all but /workspace, /tmp and the home directories read-only\n"},
    {"ls", cli_cmd_ls, "ls [--metadata K=V]...", "list the sandboxes",
     "Lists the sandboxes; with --metadata only those whose metadata has K=V\n"
     "(several: all of them).\n"},
    {"get", cli_cmd_get, "get ID", "show one sandbox", ""},
    {"rm", cli_cmd_rm, "rm ID...", "delete sandboxes (every process and file of them)", ""},
    {"stop", cli_cmd_stop, "stop ID", "stop a sandbox: processes end, files stay", ""},
    {"start", cli_cmd_start, "start ID", "start a stopped sandbox again", ""},
    {"pause", cli_cmd_pause, "pause ID", "freeze every process of a sandbox (memory kept)", ""},
    {"resume", cli_cmd_resume, "resume ID", "continue a paused sandbox", ""},
    {"timeout", cli_cmd_timeout, "timeout ID SECONDS",
     "its on_timeout happens SECONDS from now (0: never)", ""},
    {"limits", cli_cmd_limits, "limits ID [--memory MB] [--pids N] [--cpus X]",
     "change a sandbox's limits while it lives",
     "Changes the memory (MiB), pids and CPU (cores, 0: no limit) limits of a\n"
     "sandbox: at once when it runs or is paused, at its next start when stopped.\n"
     "Prints the sandbox.  See docs/lifecycle.md.\n"},
    {"checkpoint", cli_cmd_checkpoint, "checkpoint ID [NAME]",
     "capture the filesystem as NAME; without NAME list the checkpoints",
     "Captures the sandbox's files as checkpoint NAME (its desktop keeps running);\n"
     "without NAME lists its checkpoints.  See docs/lifecycle.md.\n"},
    {"restore", cli_cmd_restore, "restore ID NAME",
     "roll the filesystem back to checkpoint NAME (the desktop restarts)", ""},
    {"fork", cli_cmd_fork, "fork ID [CHECKPOINT]",
     "a new sandbox with the files of CHECKPOINT (or of ID now); prints its id and status", ""},
    {"exec", cli_cmd_exec, "exec ID [--timeout S] [--cwd DIR] [--env K=V]... -- CMD [ARG]...",
     "run a command; its output as it comes, its exit code",
     "Runs CMD in the sandbox as its user and prints its stdout and stderr as\n"
     "they arrive.  Exits with the command's exit code (124 when it timed out,\n"
     "125 when it was killed otherwise).  --json prints the server's result.\n"
     "  --timeout S          kill it after S seconds (server default 60)\n"
     "  --cwd DIR            working directory (default /workspace)\n"
     "  --env K=V            an environment variable (repeatable)\n"},
    {"run", cli_cmd_run, "run ID [--lang python|bash|node] [--timeout S] FILE|-",
     "run code from FILE (or stdin); exit code as exec",
     "Runs the code in FILE, or read from stdin with -, with python3 (default),\n"
     "bash or node, streaming its output; exit codes as for exec.\n"},
    {"screenshot", cli_cmd_screenshot, "screenshot ID -o FILE [--region x,y,w,h]",
     "save a PNG of the screen or a region", ""},
    {"click", cli_cmd_click, "click ID X Y [--button left|middle|right] [--count N]",
     "click at a point", ""},
    {"type", cli_cmd_type, "type ID TEXT", "type Unicode text exactly (\\n is Return)", ""},
    {"key", cli_cmd_key, "key ID KEYS", "press keys (ctrl+c, Return, \"ctrl+a Delete\")", ""},
    {"upload", cli_cmd_upload, "upload ID LOCAL REMOTE [--parents]",
     "copy a file in (streamed); prints size and sha256",
     "Relative REMOTE paths start at /workspace; --parents creates missing\n"
     "directories.  The sha256 the server computed is checked against the local one.\n"},
    {"download", cli_cmd_download, "download ID REMOTE LOCAL",
     "copy a file out (streamed); prints size and sha256",
     "Writes LOCAL only once the whole file arrived (through a temporary file).\n"
     "A progress bar shows on a terminal.\n"},
    {"archive", cli_cmd_archive, "archive ID REMOTE_DIR -o FILE [--format tar|tar.gz|zip]",
     "save a directory as an archive (streamed); prints size and sha256",
     "Writes FILE only once the whole archive arrived (through a temporary file).\n"
     "  -o, --output FILE    where to write it\n"
     "  --format F           tar, tar.gz (tgz) or zip (default: from FILE's name, else tar)\n"},
    {"unpack", cli_cmd_unpack, "unpack ID LOCAL_ARCHIVE REMOTE_DIR [--format F] [--parents]",
     "unpack a local archive into a new directory, all or nothing",
     "REMOTE_DIR must not exist or be empty; a bad archive leaves nothing.\n"
     "  --format F           tar, tar.gz (tgz) or zip (default: from the name, else tar)\n"
     "  --parents            create REMOTE_DIR's missing parents\n"},
    {"build", cli_cmd_build, "build NAME [CONTEXT_DIR] [--file DOCKERFILE] [--arg K=V]...",
     "build image NAME from a Dockerfile, printing its log",
     "Sends CONTEXT_DIR (as a tar) and the Dockerfile (default CONTEXT_DIR/Dockerfile,\n"
     "or ./Dockerfile without a context), then prints the build's log as it runs.\n"
     "Exits 0 when the image is ready, 5 when the build failed (docs/images.md).\n"
     "  --file DOCKERFILE    the Dockerfile to build\n"
     "  --arg K=V            the value of the Dockerfile's ARG K (repeatable)\n"},
    {"find", cli_cmd_find, "find ID PATH [--name GLOB] [--max-depth N]",
     "list the entries under PATH, one path a line (directories end in /)",
     "  --name GLOB          only entries whose name matches (fnmatch, e.g. '*.py')\n"
     "  --max-depth N        levels below PATH (0: its entries only)\n"},
    {"search", cli_cmd_search, "search ID PATH PATTERN [--regex] [--ignore-case]",
     "print the lines of files under PATH that match, as path:line:text",
     "PATTERN is literal text unless --regex (POSIX extended).  Exits 0 with or\n"
     "without matches.\n"
     "  --regex              PATTERN is a regular expression\n"
     "  --ignore-case        match regardless of case\n"},
    {"mcp", cli_cmd_mcp, "mcp ID",
     "an MCP server on stdin/stdout for that sandbox (for clients that launch MCP servers "
     "as commands); docs/mcp.md",
     ""},
    {"vnc", cli_cmd_vnc, "vnc ID [--view-only] [--ttl S] [--open]",
     "make a browser viewer URL (noVNC) and print it",
     "Creates a viewer token and prints the URL that opens the desktop in a browser.\n"
     "  --view-only          the viewer may watch but not type or click\n"
     "  --ttl S              the token's lifetime (default 3600)\n"
     "  --open               open the URL with xdg-open or sensible-browser\n"},
    {"port", cli_cmd_port, "port ID PORT [--ttl S] [--open]",
     "make a share URL for a port of the sandbox and print it",
     "Creates a share token for 127.0.0.1:PORT inside the sandbox (an app, a dev\n"
     "server) and prints the URL that opens it in any browser without the API token.\n"
     "  --ttl S              the token's lifetime (default 3600)\n"
     "  --open               open the URL with xdg-open or sensible-browser\n"},
};

static const char global_help[] =
    "Global options (anywhere before --):\n"
    "  --url URL      deskboxd's address (env DESKBOX_URL, default " DEFAULT_URL ")\n"
    "  --token TOKEN  the API token (env DESKBOX_TOKEN)\n"
    "  --json         print the server's JSON as is, for scripts\n"
    "  -h, --help     help, also after a verb\n";

static const char exit_help[] =
    "Exit codes:\n"
    "  0  ok\n"
    "  1  a local failure (a file could not be read or written)\n"
    "  2  usage: wrong options or arguments\n"
    "  3  not found: no such sandbox (or file)\n"
    "  4  server or network error: no answer, or a 5xx answer\n"
    "  5  any other API error (invalid argument, conflict, unauthorized, ...)\n"
    "  exec and run exit with the command's own exit code\n";

const struct cli_verb *cli_verb_find(const char *name)
{
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(verbs[i].name, name) == 0)
			return &verbs[i];
	return NULL;
}

static void print_main_help(FILE *f)
{
	fprintf(f, "usage: deskbox [--url URL] [--token TOKEN] [--json] VERB [ARGS]...\n\n"
		   "A client for deskboxd, the desktop sandbox server.\n\nVerbs:\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-11s %s\n", verbs[i].name, verbs[i].summary);
	fprintf(f, "\n%s\n%s\n`deskbox VERB --help` describes a verb.\n", global_help, exit_help);
}

static void print_verb_help(const struct cli_verb *v)
{
	printf("usage: deskbox %s\n\n%s.\n", v->usage, v->summary);
	if (v->help[0])
		printf("\n%s", v->help);
	printf("\n%s", global_help);
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
	const struct cli_verb *v = cli_verb_find(verb);
	va_list ap;
	fprintf(stderr, "deskbox: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	if (v)
		fprintf(stderr, "usage: deskbox %s\n", v->usage);
	return CLI_EXIT_USAGE;
}

int cli_fail(const struct cli *c, const struct err *e)
{
	fprintf(stderr, "deskbox: %s\n", e->msg);
	if (c->status == 404)
		return CLI_EXIT_NOT_FOUND;
	if (c->status >= 500 || (c->status == 0 && e->kind == ERR_UNAVAILABLE))
		return CLI_EXIT_SERVER;
	if (c->status)
		return CLI_EXIT_API;
	return CLI_EXIT_LOCAL;
}

enum { OPT_URL = 0x100, OPT_TOKEN, OPT_JSON };

static const struct option global_opts[] = {
    {"url", required_argument, NULL, OPT_URL},
    {"token", required_argument, NULL, OPT_TOKEN},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
};
#define N_GLOBAL (sizeof(global_opts) / sizeof(global_opts[0]))
#define MAX_OPTS 16

/* Takes a global option; 1 when `opt` was one. */
static int global_option(struct cli *c, int opt, const char *arg)
{
	switch (opt) {
	case OPT_URL:
		c->url = arg;
		return 1;
	case OPT_TOKEN:
		c->token = arg;
		return 1;
	case OPT_JSON:
		c->json = 1;
		return 1;
	}
	return 0;
}

/* The getopt short-option string for `opts`: "o:" for {"output", 1, 'o'}. */
static void short_opts(const struct option *all, char *out, size_t cap)
{
	size_t n = 0;
	out[n++] = ':';
	for (; all->name; all++) {
		if (all->val <= 0 || all->val > 127 || n + 3 >= cap)
			continue;
		out[n++] = (char)all->val;
		if (all->has_arg == required_argument)
			out[n++] = ':';
	}
	out[n] = 0;
}

int cli_parse(struct cli *c, int argc, char **argv, const struct option *opts,
	      int (*fn)(void *ctx, int opt, const char *arg), void *ctx, int *first)
{
	struct option all[MAX_OPTS + N_GLOBAL + 1] = {0};
	size_t n = 0;
	for (; opts && opts->name && n < MAX_OPTS; opts++)
		all[n++] = *opts;
	memcpy(all + n, global_opts, sizeof(global_opts));
	char shorts[64];
	short_opts(all, shorts, sizeof(shorts));

	optind = 0; /* glibc: start afresh, permuting, for every verb */
	opterr = 0;
	int opt;
	while ((opt = getopt_long(argc, argv, shorts, all, NULL)) != -1) {
		if (opt == 'h') {
			print_verb_help(cli_verb_find(argv[0]));
			return 1;
		}
		if (opt == '?')
			return cli_usage_error(argv[0], "unknown option '%s'", argv[optind - 1]);
		if (opt == ':')
			return cli_usage_error(argv[0], "option '%s' needs a value",
					       argv[optind - 1]);
		if (global_option(c, opt, optarg))
			continue;
		if (fn(ctx, opt, optarg) < 0)
			return cli_usage_error(argv[0], "bad value '%s' for option '%s'",
					       optarg ? optarg : "", argv[optind - 1]);
	}
	*first = optind;
	return 0;
}

/* Global options before the verb; returns the verb's index or -1. */
static int parse_globals(struct cli *c, int argc, char **argv, int *rc)
{
	struct option all[N_GLOBAL + 1] = {0};
	memcpy(all, global_opts, sizeof(global_opts));
	opterr = 0;
	int opt;
	*rc = CLI_OK;
	while ((opt = getopt_long(argc, argv, "+:h", all, NULL)) != -1) {
		if (opt == 'h') {
			print_main_help(stdout);
			return -1;
		}
		if (opt == '?' || opt == ':') {
			*rc = cli_usage_error("", "bad option '%s'", argv[optind - 1]);
			return -1;
		}
		global_option(c, opt, optarg);
	}
	if (optind >= argc) {
		print_main_help(stderr);
		*rc = CLI_EXIT_USAGE;
		return -1;
	}
	return optind;
}

int main(int argc, char **argv)
{
	struct cli c = {0};
	c.url = getenv("DESKBOX_URL");
	if (!c.url || !*c.url)
		c.url = DEFAULT_URL;
	c.token = getenv("DESKBOX_TOKEN");
	c.progress = isatty(STDERR_FILENO);

	int rc;
	int at = parse_globals(&c, argc, argv, &rc);
	if (at < 0)
		return rc;
	const struct cli_verb *v = cli_verb_find(argv[at]);
	if (!v)
		return cli_usage_error("", "unknown verb '%s' (deskbox --help lists them)",
				       argv[at]);

	struct err e = ERR_INIT;
	if (cli_http_init(&e) < 0)
		return cli_fail(&c, &e);
	rc = v->run(&c, argc - at, argv + at);
	cli_http_cleanup();
	return rc;
}
