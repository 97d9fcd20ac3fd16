/* cli: the `deskbox` command-line client.
 *
 * A client of deskboxd's REST API and nothing more: it speaks HTTP through
 * libcurl and links none of server/, capture/ or input/ (only common/'s
 * error and text helpers).  main.c holds the options and the verb table;
 * cli_http.c the requests (JSON, streamed files, server-sent events); one
 * file per API area holds its verbs.
 *
 * Errors follow common/error.h: the HTTP layer fills a `struct err` and
 * records in `struct cli` what the server answered, and cli_fail() alone
 * turns that into a message on stderr and an exit code.
 */
#ifndef DESKBOX_CLI_CLI_H
#define DESKBOX_CLI_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* Exit codes, as `deskbox --help` documents them.  exec and run exit with
 * the command's own code instead. */
enum cli_exit {
	CLI_OK = 0,
	CLI_EXIT_LOCAL = 1,	/* a local failure: a file could not be read or written */
	CLI_EXIT_USAGE = 2,	/* wrong options or arguments */
	CLI_EXIT_NOT_FOUND = 3, /* 404: no such sandbox (or file) */
	CLI_EXIT_SERVER = 4,	/* no answer (network) or a 5xx answer */
	CLI_EXIT_API = 5,	/* any other error answer (400, 401, 409, ...) */
};

struct cli {
	const char *url;   /* base URL, no trailing slash */
	const char *token; /* bearer token, may be NULL */
	int json;	   /* --json: print the server's JSON as is */
	int progress;	   /* draw progress bars (stderr is a terminal) */
	long status;	   /* HTTP status of the last error answer, 0 for none */
};

/* An answer read whole (JSON); body is malloc'd and NUL-terminated. */
struct cli_reply {
	long status;
	char *body;
	size_t len;
};

void cli_reply_free(struct cli_reply *r);

/* Global set-up and tear-down of libcurl (once per process). */
int cli_http_init(struct err *e);
void cli_http_cleanup(void);

/* Sends `method` to c->url + `path` with an optional JSON `body` and reads
 * the answer into `r` (which the caller frees).  A non-2xx answer is an
 * error whose message is the server's; c->status says which.  On failure
 * `r` holds nothing to free. */
int cli_request(struct cli *c, const char *method, const char *path, const char *body,
		struct cli_reply *r, struct err *e);

/* PUTs `size` bytes read from `fd` to `path`, streamed, reading the answer
 * into `r`; the SHA-256 of what was sent goes to `sha256_hex` (65 bytes). */
int cli_upload(struct cli *c, const char *path, int fd, uint64_t size, char *sha256_hex,
	       struct cli_reply *r, struct err *e);

/* GETs `path` and streams the body into `fd`; *size and `sha256_hex`
 * (65 bytes, may be NULL) describe what was written.  An error answer is
 * never written to `fd`. */
int cli_download(struct cli *c, const char *path, int fd, uint64_t *size, char *sha256_hex,
		 struct err *e);

/* Downloads `path` into the local file `local`, through a temporary file
 * renamed over it on success (nothing is left behind on failure). */
int cli_save(struct cli *c, const char *path, const char *local, uint64_t *size, char *sha256_hex,
	     struct err *e);

/* One server-sent event: its name ("stdout", "result", ...) and data. */
typedef int (*cli_event_fn)(void *ctx, const char *event, const char *data);

/* POSTs the JSON `body` to `path` (which asks for a stream) and calls
 * `fn` for each event as it arrives; a negative return from `fn` stops
 * the stream. */
int cli_stream(struct cli *c, const char *path, const char *body, cli_event_fn fn, void *ctx,
	       struct err *e);

/* "/v1/sandboxes/<id><suffix>" with the id escaped; malloc'd. */
char *cli_sandbox_path(const char *id, const char *suffix);

/* Prints an answer's body on stdout, ending with a newline. */
void cli_print_body(const struct cli_reply *r);

/* Adds "K=V" to the JSON object `env`; -1 when there is no '=' or no name. */
struct cJSON;
int cli_env_add(struct cJSON *env, const char *kv);

/* The path component escaped for a query string; malloc'd. */
char *cli_escape(const char *s);

/* Prints "deskbox: <message>" and returns the exit code for `e`. */
int cli_fail(const struct cli *c, const struct err *e);

/* Prints a usage error and the usage line of `verb`; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes all of `data` to `fd`; -1 on failure (errno set). */
int cli_write_all(int fd, const void *data, size_t len);

/* A verb: argv[0] is the verb's name; returns the exit code. */
struct cli_verb {
	const char *name;
	int (*run)(struct cli *c, int argc, char **argv);
	const char *usage;   /* "create [--display WxH] ..." */
	const char *summary; /* one line for `deskbox --help` */
	const char *help;    /* the rest of `deskbox VERB --help` */
};

/* The verb named `name`, or NULL. */
const struct cli_verb *cli_verb_find(const char *name);

/* The verbs, by file. */
int cli_cmd_create(struct cli *c, int argc, char **argv);
int cli_cmd_ls(struct cli *c, int argc, char **argv);
int cli_cmd_get(struct cli *c, int argc, char **argv);
int cli_cmd_rm(struct cli *c, int argc, char **argv);
int cli_cmd_stop(struct cli *c, int argc, char **argv);
int cli_cmd_start(struct cli *c, int argc, char **argv);
int cli_cmd_pause(struct cli *c, int argc, char **argv);
int cli_cmd_resume(struct cli *c, int argc, char **argv);
int cli_cmd_timeout(struct cli *c, int argc, char **argv);
int cli_cmd_limits(struct cli *c, int argc, char **argv);
int cli_cmd_checkpoint(struct cli *c, int argc, char **argv);
int cli_cmd_restore(struct cli *c, int argc, char **argv);
int cli_cmd_fork(struct cli *c, int argc, char **argv);
int cli_cmd_vnc(struct cli *c, int argc, char **argv);
int cli_cmd_port(struct cli *c, int argc, char **argv);
int cli_cmd_exec(struct cli *c, int argc, char **argv);
int cli_cmd_run(struct cli *c, int argc, char **argv);
int cli_cmd_screenshot(struct cli *c, int argc, char **argv);
int cli_cmd_click(struct cli *c, int argc, char **argv);
int cli_cmd_type(struct cli *c, int argc, char **argv);
int cli_cmd_key(struct cli *c, int argc, char **argv);
int cli_cmd_upload(struct cli *c, int argc, char **argv);
int cli_cmd_download(struct cli *c, int argc, char **argv);
int cli_cmd_mcp(struct cli *c, int argc, char **argv);
int cli_cmd_archive(struct cli *c, int argc, char **argv);
int cli_cmd_unpack(struct cli *c, int argc, char **argv);
int cli_cmd_find(struct cli *c, int argc, char **argv);
int cli_cmd_search(struct cli *c, int argc, char **argv);
int cli_cmd_build(struct cli *c, int argc, char **argv);

/* Parses a verb's options with getopt_long: `opts` may be NULL; the global
 * options (--url, --token, --json, --help) are accepted everywhere.
 * Calls `fn(ctx, opt, optarg)` for each of the verb's own options (a
 * negative return is a usage error) and leaves the positional arguments
 * in argv[*first .. argc).  Returns 0, 1 when --help was printed, or
 * CLI_EXIT_USAGE. */
struct option;
int cli_parse(struct cli *c, int argc, char **argv, const struct option *opts,
	      int (*fn)(void *ctx, int opt, const char *arg), void *ctx, int *first);

#endif
