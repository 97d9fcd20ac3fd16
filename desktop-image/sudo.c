/* sudo: the init under the name "sudo" (/usr/bin/sudo links to it in the
 * default image), for the user: asks the init's root side, through the
 * sudo door (exec_agent.h), to run a command as the sandbox's root.  A
 * set-user-ID sudo cannot work in a sandbox (no_new_privs, nosuid mounts);
 * the door does what Debian's sudo with "user ALL=(ALL) NOPASSWD: ALL"
 * would, and is not there at all when the sandbox was made with
 * "root": false.
 *
 * Understood: -u root (or #0), -g root, -i (root's login shell), -s (a
 * shell), -E, -H, -n, -S, -k, -K, -v, -l, -V, -h, --.  The command keeps
 * the caller's environment and working directory (-i: /root) with HOME,
 * USER and LOGNAME root's and Debian's secure_path as PATH.  Signals the
 * shim gets (Ctrl-C in a terminal, a kill) go on to the command; the
 * command ends when the shim is killed. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec_agent.h"

#define SECURE_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define ROOT_SHELL  "/bin/bash"

extern char **environ;

static int conn_fd = -1;

static void usage(void)
{
	fprintf(stderr, "usage: sudo [-EHnS] [-u root] [-i | -s] [--] command [args...]\n"
			"       sudo -l | -v | -k | -V | -h\n"
			"(deskbox's sudo: runs commands as the sandbox's root, no password)\n");
}

/* Handlers only write a byte: async-signal-safe. */
static void forward(int sig)
{
	unsigned char b = (unsigned char)sig;
	ssize_t w = write(conn_fd, &b, 1);
	(void)w;
}

static int is_root_name(const char *v)
{
	return strcmp(v, "root") == 0 || strcmp(v, "#0") == 0 || strcmp(v, "0") == 0;
}

/* The request body of exec_agent.h into a malloc'd buffer. */
static char *build(char **argv, char **env, const char *cwd, uint32_t *len)
{
	uint32_t argc = 0, envc = 0;
	size_t n = 8 + strlen(cwd) + 1;
	for (; argv[argc]; argc++)
		n += strlen(argv[argc]) + 1;
	for (; env[envc]; envc++)
		n += strlen(env[envc]) + 1;
	char *b = malloc(n), *p = b + 8;
	if (!b || n > UINT32_MAX / 4)
		return free(b), NULL;
	memcpy(b, &argc, 4);
	memcpy(b + 4, &envc, 4);
	p = stpcpy(p, cwd) + 1;
	for (uint32_t i = 0; i < argc; i++)
		p = stpcpy(p, argv[i]) + 1;
	for (uint32_t i = 0; i < envc; i++)
		p = stpcpy(p, env[i]) + 1;
	*len = (uint32_t)n;
	return b;
}

/* The caller's environment, with root's HOME, USER, LOGNAME and PATH. */
static char **root_env(void)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 5, sizeof(char *));
	if (!env)
		return NULL;
	size_t k = 0;
	env[k++] = "HOME=/root";
	env[k++] = "USER=root";
	env[k++] = "LOGNAME=root";
	env[k++] = SECURE_PATH;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "HOME=", 5) && strncmp(environ[i], "USER=", 5) &&
		    strncmp(environ[i], "LOGNAME=", 8) && strncmp(environ[i], "PATH=", 5))
			env[k++] = environ[i];
	env[k] = NULL;
	return env;
}

static int door(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", EXEC_AGENT_SUDO_SOCK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = errno;
		if (err == ENOENT || err == ECONNREFUSED)
			fprintf(stderr,
				"sudo: root is turned off in this sandbox (it was made with "
				"\"root\": false, or deskboxd runs without user namespaces)\n");
		else
			fprintf(stderr, "sudo: %s: %s\n", EXEC_AGENT_SUDO_SOCK, strerror(err));
		return -1;
	}
	return fd;
}

static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Sends the request `req` with our stdio, forwards signals, returns the
 * exit code sudo exits with. */
static int send_and_wait(char *req, uint32_t len)
{
	if ((conn_fd = door()) < 0)
		return 1;
	int fds[3] = {0, 1, 2};
	char cbuf[CMSG_SPACE(sizeof(fds))];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = {&len, sizeof(len)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	int32_t pid, status;
	if (sendmsg(conn_fd, &mh, MSG_NOSIGNAL) != sizeof(len) ||
	    send(conn_fd, req, len, MSG_NOSIGNAL) != (ssize_t)len ||
	    read_full(conn_fd, &pid, sizeof(pid)) < 0) {
		fprintf(stderr, "sudo: the sandbox's init did not take the command\n");
		return 1;
	}
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
	struct sigaction sa = {.sa_handler = forward};
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	if (read_full(conn_fd, &status, sizeof(status)) < 0)
		return 1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

static int run_as_root(char **argv, const char *cwd)
{
	char **env = root_env();
	uint32_t len = 0;
	char *req = env ? build(argv, env, cwd, &len) : NULL;
	int rc = req ? send_and_wait(req, len) : 1;
	free(req);
	free(env);
	return rc;
}

/* argv for -i / -s: the shell, with the command joined for -c (*line,
 * malloc'd like the vector, for the caller to free). */
static char **shell_argv(char **cmd, int login, char **line_out)
{
	size_t n = 0, len = 1;
	for (; cmd[n]; n++)
		len += strlen(cmd[n]) + 1;
	char **v = calloc(5, sizeof(char *));
	char *line = calloc(1, len);
	if (!v || !line) {
		free(v);
		free(line);
		return NULL;
	}
	*line_out = line;
	for (size_t i = 0; i < n; i++) {
		strcat(line, cmd[i]);
		if (i + 1 < n)
			strcat(line, " ");
	}
	const char *sh = getenv("SHELL");
	size_t k = 0;
	v[k++] = (char *)(login || !sh || !*sh ? ROOT_SHELL : sh);
	if (login)
		v[k++] = "-l";
	if (n) {
		v[k++] = "-c";
		v[k++] = line;
	}
	return v;
}

int sudo_main(int argc, char **argv)
{
	int login = 0, shell = 0, i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		const char *o = argv[i];
		if (strcmp(o, "--") == 0) {
			i++;
			break;
		}
		if ((!strcmp(o, "-u") || !strcmp(o, "-g")) && i + 1 < argc) {
			if (!is_root_name(argv[++i])) {
				fprintf(stderr, "sudo: only root is available here, not '%s'\n",
					argv[i]);
				return 1;
			}
		} else if (!strcmp(o, "-i") || !strcmp(o, "--login")) {
			login = 1;
		} else if (!strcmp(o, "-s") || !strcmp(o, "--shell")) {
			shell = 1;
		} else if (!strcmp(o, "-l") || !strcmp(o, "--list")) {
			printf("User may run the following commands on this sandbox:\n"
			       "    (ALL : ALL) NOPASSWD: ALL\n");
			return 0;
		} else if (!strcmp(o, "-v") || !strcmp(o, "-k") || !strcmp(o, "-K")) {
			return 0;
		} else if (!strcmp(o, "-V") || !strcmp(o, "--version")) {
			printf("deskbox sudo (the sandbox init's root door)\n");
			return 0;
		} else if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			usage();
			return 0;
		} else if (strspn(o + 1, "EHnSAP") != strlen(o + 1)) {
			fprintf(stderr, "sudo: option '%s' is not supported here\n", o);
			usage();
			return 1;
		}
	}
	char **cmd = argv + i;
	if (!cmd[0] && !login && !shell) {
		usage();
		return 1;
	}
	char **made = NULL, *line = NULL; /* shell_argv's, freed after the run */
	if (login || shell)
		cmd = made = shell_argv(cmd, login, &line);
	if (!cmd)
		return 1;
	/* Root already: nothing to ask. */
	if (getuid() == 0) {
		execvp(cmd[0], cmd);
		int err = errno;
		fprintf(stderr, "sudo: %s: %s\n", cmd[0], strerror(err));
		free(made);
		free(line);
		return err == ENOENT ? 127 : 126;
	}
	char cwd[4096];
	if (login)
		snprintf(cwd, sizeof(cwd), "/root");
	else if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "/");
	int rc = run_as_root(cmd, cwd);
	free(made);
	free(line);
	return rc;
}
