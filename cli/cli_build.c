/* deskbox build: an image from a Dockerfile (docs/images.md), as
 * `docker build` does it: the context directory is sent as a tar
 * (PUT /v1/images/NAME/context), the Dockerfile posted, the build's log
 * printed as it streams, and the exit status says how the build ended. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"

extern char **environ;

enum { OPT_FILE = 0x400, OPT_ARG };

struct build_opts {
	const char *file;
	cJSON *args;
	int bad_arg;
};

static int build_opt(void *ctx, int opt, const char *arg)
{
	struct build_opts *o = ctx;
	if (opt == OPT_FILE) {
		o->file = arg;
		return 0;
	}
	if (opt == OPT_ARG && cli_env_add(o->args, arg) == 0)
		return 0;
	return -1;
}

/* The context directory as a tar in an unlinked temporary file (`tar -C
 * DIR -cf - .`), its size in *size. */
static int context_tar(const char *dir, int *out, uint64_t *size, struct err *e)
{
	char tmp[] = "/tmp/deskbox-context-XXXXXX";
	_cleanup_fd_ int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating a temporary file");
	unlink(tmp);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, 1);
	char *argv[] = {"tar", "-C", (char *)dir, "-cf", "-", ".", NULL};
	pid_t pid;
	int rc = posix_spawnp(&pid, "tar", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return err_sys(e, ERR_INTERNAL, rc, "running tar");
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return err_sys(e, ERR_INTERNAL, errno, "waiting for tar");
	struct stat st;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || fstat(fd, &st) < 0 ||
	    lseek(fd, 0, SEEK_SET) < 0)
		return err_set(e, ERR_INTERNAL, EIO, "tar of the context '%s' failed", dir);
	*size = (uint64_t)st.st_size;
	*out = fd;
	fd = -1;
	return 0;
}

static int send_context(struct cli *c, const char *name, const char *dir, struct err *e)
{
	int fd = -1;
	uint64_t size = 0;
	if (context_tar(dir, &fd, &size, e) < 0)
		return err_code(e);
	_cleanup_free_ char *esc = cli_escape(name);
	_cleanup_free_ char *path = NULL;
	char sha[65];
	struct cli_reply r;
	int rc = esc && asprintf(&path, "/v1/images/%s/context", esc) >= 0
		     ? cli_upload(c, path, fd, size, sha, &r, e)
		     : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	close(fd);
	if (rc == 0)
		cli_reply_free(&r);
	return rc;
}

static int start_build(struct cli *c, const char *name, const char *file, cJSON *args,
		       struct err *e)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (fs_read_file(file, 65536, &text, &len, e) < 0)
		return err_wrap(e, "the Dockerfile");
	cJSON *body = cJSON_CreateObject();
	cJSON_AddStringToObject(body, "name", name);
	cJSON_AddStringToObject(body, "dockerfile", text);
	if (cJSON_GetArraySize(args) > 0)
		cJSON_AddItemReferenceToObject(body, "args", args);
	_cleanup_free_ char *json = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	struct cli_reply r;
	int rc = json ? cli_request(c, "POST", "/v1/images", json, &r, e)
		      : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (rc == 0)
		cli_reply_free(&r);
	return rc;
}

/* The log to stdout until the build ends, then its outcome. */
static int follow(struct cli *c, const char *name, struct err *e)
{
	_cleanup_free_ char *esc = cli_escape(name);
	_cleanup_free_ char *log = NULL, *img = NULL;
	if (!esc || asprintf(&log, "/v1/images/%s/build", esc) < 0 ||
	    asprintf(&img, "/v1/images/%s", esc) < 0)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	uint64_t size;
	struct cli_reply r;
	if (cli_download(c, log, 1, &size, NULL, e) < 0 ||
	    cli_request(c, "GET", img, NULL, &r, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_ParseWithLength(r.body, r.len);
	const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "status"));
	const char *why = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "error"));
	int rc = status && strcmp(status, "ready") == 0
		     ? 0
		     : err_set(e, ERR_INVALID, EIO, "the build of '%s' failed: %s", name,
			       why ? why : (status ? status : "no status"));
	cJSON_Delete(j);
	cli_reply_free(&r);
	return rc;
}

int cli_cmd_build(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"file", required_argument, NULL, OPT_FILE},
					     {"arg", required_argument, NULL, OPT_ARG},
					     {0}};
	struct build_opts o = {.args = cJSON_CreateObject()};
	int first, rc = cli_parse(c, argc, argv, opts, build_opt, &o, &first);
	if (rc || argc - first < 1 || argc - first > 2) {
		cJSON_Delete(o.args);
		return rc == 1 ? CLI_OK
		       : rc    ? rc
			    : cli_usage_error(argv[0], "needs an image NAME and at most a CONTEXT");
	}
	const char *name = argv[first], *dir = argc - first == 2 ? argv[first + 1] : NULL;
	char file[4096];
	snprintf(file, sizeof(file), "%s%s%s",
		 o.file ? o.file
		 : dir	? dir
			: ".",
		 o.file ? "" : "/", o.file ? "" : "Dockerfile");
	struct err e = ERR_INIT;
	int sent = !(dir && send_context(c, name, dir, &e) < 0) &&
		   start_build(c, name, file, o.args, &e) == 0;
	rc = !sent || follow(c, name, &e) < 0 ? cli_fail(c, &e) : CLI_OK;
	/* A build that ran and failed is an answer of the API (5), not a
	 * local failure. */
	if (sent && rc != CLI_OK && e.kind == ERR_INVALID && e.sys_errno == EIO)
		rc = CLI_EXIT_API;
	cJSON_Delete(o.args);
	return rc;
}
