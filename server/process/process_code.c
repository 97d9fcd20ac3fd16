/* code_run's languages: which interpreter runs a piece of code. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "process.h"

const char *const process_languages[] = {"python", "bash", "node", NULL};
/* Where each interpreter may be, the first found wins: Debian's place,
 * then where the official python and node images install theirs. */
static const char *const interpreters[][2] = {
    {"/usr/bin/python3", "/usr/local/bin/python3"},
    {"/usr/bin/bash", "/bin/bash"},
    {"/usr/bin/node", "/usr/local/bin/node"},
};
static const char *const code_flags[] = {"-c", "-c", "-e"};

/* 1 if `path` is an executable regular file in the tree of `root_fd`
 * (symlinks resolved inside it), or on the host with root_fd -1. */
static int runnable(int root_fd, const char *path)
{
	if (root_fd < 0)
		return access(path, X_OK) == 0;
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
	_cleanup_fd_ int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

int process_code_argv(int language, const char *code, int root_fd, const char *argv[4],
		      struct err *e)
{
	if (language < 0 || language >= (int)(sizeof(interpreters) / sizeof(interpreters[0])))
		return err_set(e, ERR_INVALID, EINVAL, "unknown language");
	const char *const *c = interpreters[language];
	const char *found = runnable(root_fd, c[0]) ? c[0] : runnable(root_fd, c[1]) ? c[1] : NULL;
	if (!found)
		return err_set(e, ERR_INVALID, ENOENT,
			       "language '%s' is not available in this sandbox (no '%s' or '%s')",
			       process_languages[language], c[0], c[1]);
	argv[0] = found;
	argv[1] = code_flags[language];
	argv[2] = code;
	argv[3] = NULL;
	return 0;
}
