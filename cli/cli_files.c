/* upload and download: files streamed between here and a sandbox, never
 * read whole into memory. */
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

int cli_save(struct cli *c, const char *path, const char *local, uint64_t *size, char *sha_hex,
	     struct err *e)
{
	/* A temporary file beside `local`, renamed over it once the whole
	 * answer arrived: a failed transfer leaves no half file behind. */
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.deskbox-XXXXXX", local) < 0)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	_cleanup_fd_ int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "cannot write '%s'", local);
	int rc = cli_download(c, path, fd, size, sha_hex, e);
	mode_t mask = umask(0);
	umask(mask);
	if (rc == 0 && fchmod(fd, 0666 & ~mask) < 0)
		rc = err_sys(e, ERR_INTERNAL, errno, "chmod '%s'", tmp);
	if (rc == 0 && close(TAKE_FD(fd)) < 0)
		rc = err_sys(e, ERR_INTERNAL, errno, "writing '%s'", local);
	if (rc == 0 && rename(tmp, local) < 0)
		rc = err_sys(e, ERR_INTERNAL, errno, "cannot rename to '%s'", local);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

static void print_transfer(const struct cli *c, const char *from, const char *to, uint64_t size,
			   const char *sha)
{
	if (c->json)
		return;
	printf("%s -> %s: %llu bytes, sha256 %s\n", from, to, (unsigned long long)size, sha);
}

static int upload_opt(void *ctx, int opt, const char *arg)
{
	if (opt != 'p')
		return -1;
	*(int *)ctx = 1;
	return 0;
}

int cli_cmd_upload(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {{"parents", no_argument, NULL, 'p'}, {0}};
	int parents = 0;
	int first, rc = cli_parse(c, argc, argv, opts, upload_opt, &parents, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first != 3)
		return cli_usage_error(argv[0], "needs a sandbox id, LOCAL and REMOTE");
	const char *local = argv[first + 1], *remote = argv[first + 2];
	struct err e = ERR_INIT;
	struct stat st;
	_cleanup_fd_ int fd = open(local, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err_sys(&e, ERR_INVALID, fd < 0 ? errno : EINVAL, "cannot read '%s'", local);
		return cli_fail(c, &e);
	}
	_cleanup_free_ char *q = cli_escape(remote);
	char *suffix = NULL;
	if (!q || asprintf(&suffix, "/files/upload?path=%s%s", q, parents ? "&parents=1" : "") < 0)
		return CLI_EXIT_LOCAL;
	_cleanup_free_ char *path = cli_sandbox_path(argv[first], suffix);
	free(suffix);
	char sha[65];
	struct cli_reply r;
	rc = cli_upload(c, path, fd, (uint64_t)st.st_size, sha, &r, &e);
	cJSON *j = rc == 0 ? cJSON_ParseWithLength(r.body, r.len) : NULL;
	const char *theirs = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "sha256"));
	if (rc == 0 && (!theirs || strcmp(theirs, sha) != 0)) {
		c->status = 500;
		rc = err_set(&e, ERR_INTERNAL, EIO, "the server stored sha256 %s, we sent %s",
			     theirs ? theirs : "(none)", sha);
	}
	if (rc == 0 && c->json)
		cli_print_body(&r);
	else if (rc == 0)
		print_transfer(c, local, remote, (uint64_t)st.st_size, sha);
	cJSON_Delete(j);
	cli_reply_free(&r);
	return rc < 0 ? cli_fail(c, &e) : CLI_OK;
}

int cli_cmd_download(struct cli *c, int argc, char **argv)
{
	int first, rc = cli_parse(c, argc, argv, NULL, upload_opt, NULL, &first);
	if (rc)
		return rc == 1 ? CLI_OK : rc;
	if (argc - first != 3)
		return cli_usage_error(argv[0], "needs a sandbox id, REMOTE and LOCAL");
	const char *remote = argv[first + 1], *local = argv[first + 2];
	_cleanup_free_ char *q = cli_escape(remote);
	char *suffix = NULL;
	if (!q || asprintf(&suffix, "/files/download?path=%s", q) < 0)
		return CLI_EXIT_LOCAL;
	_cleanup_free_ char *path = cli_sandbox_path(argv[first], suffix);
	free(suffix);
	char sha[65];
	uint64_t size;
	struct err e = ERR_INIT;
	if (cli_save(c, path, local, &size, sha, &e) < 0)
		return cli_fail(c, &e);
	if (c->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "path", local);
		cJSON_AddNumberToObject(j, "size", (double)size);
		cJSON_AddStringToObject(j, "sha256", sha);
		_cleanup_free_ char *s = cJSON_PrintUnformatted(j);
		printf("%s\n", s);
		cJSON_Delete(j);
	}
	print_transfer(c, remote, local, size, sha);
	return CLI_OK;
}
