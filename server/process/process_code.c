/* code_run's languages: which interpreter runs a piece of code. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "process.h"

const char *const process_languages[] = {"python", "bash", "node", NULL};
/* Looked up on the host: the default image's /usr is the host's. */
static const char *const interpreters[] = {"/usr/bin/python3", "/usr/bin/bash", "/usr/bin/node"};
static const char *const code_flags[] = {"-c", "-c", "-e"};

int process_code_argv(int language, const char *code, const char *argv[4], struct err *e)
{
	if (language < 0 || language >= (int)(sizeof(interpreters) / sizeof(interpreters[0])))
		return err_set(e, ERR_INVALID, EINVAL, "unknown language");
	if (access(interpreters[language], X_OK) != 0)
		return err_set(e, ERR_INVALID, ENOENT,
			       "language '%s' is not available in this sandbox ('%s' is missing)",
			       process_languages[language], interpreters[language]);
	argv[0] = interpreters[language];
	argv[1] = code_flags[language];
	argv[2] = code;
	argv[3] = NULL;
	return 0;
}
