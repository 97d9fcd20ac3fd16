/* runtime_vm_exec: a program in a VM sandbox (the "vm" backend's
 * exec_spawn).  The client is deskbox-init run on the host as
 * `deskbox-init vm-exec RUN_DIR REQUEST` (desktop-image/vm_exec.c): it
 * takes a free exec port of the VM (RUN_DIR/exec<i>.sock, one program at a
 * time each), sends the request (JSON: argv, env, cwd) and relays its own
 * stdin, stdout and stderr to the guest's exec agent
 * (desktop-image/vm-agent.py), then exits as the program did: the same
 * contract as `crun exec`'s client.  With a pid file it writes the
 * program's guest pid there (runtime_backend.guest_pids).  A terminal
 * (x->pty): the client's stdio is the slave of the caller's pty, made its
 * controlling terminal (so it gets SIGWINCH at a resize); the request asks
 * the agent for a pty of the guest of the slave's size. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <sys/wait.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "internal.h"

static char *request_json(const struct runtime_exec *x)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *argv = cJSON_AddArrayToObject(o, "argv");
	cJSON *env = cJSON_AddArrayToObject(o, "env");
	for (size_t i = 0; x->argv && x->argv[i]; i++)
		cJSON_AddItemToArray(argv, cJSON_CreateString(x->argv[i]));
	for (size_t i = 0; x->env && x->env[i]; i++)
		cJSON_AddItemToArray(env, cJSON_CreateString(x->env[i]));
	cJSON_AddStringToObject(o, "cwd", x->cwd ? x->cwd : "/workspace");
	cJSON_AddNumberToObject(o, "uid", x->uid);
	cJSON_AddNumberToObject(o, "gid", x->gid);
	/* The program's guest pid, said back once it runs: its argv starts
	 * with the shim that stops it (`kill -STOP $$`), which the agent
	 * continues. */
	if (x->pid_file)
		cJSON_AddTrueToObject(o, "want_pid");
	struct winsize ws;
	if (x->pty)
		cJSON_AddTrueToObject(o, "pty");
	if (x->pty && ioctl(x->stdin_fd, TIOCGWINSZ, &ws) == 0) {
		cJSON_AddNumberToObject(o, "rows", ws.ws_row);
		cJSON_AddNumberToObject(o, "cols", ws.ws_col);
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

#define RUN_CG_MAX 12

/* The cgroup.procs files of the run's cgroup (x->cgroup under the VM's),
 * in every hierarchy that has it: the client joins them, so that killing
 * the run (its cgroup) kills the client, whose end the guest's agent sees
 * and kills the program. */
static int run_cgroups(const char *id, const char *name, char out[RUN_CG_MAX][PATH_MAX])
{
	if (!name)
		return 0;
	char pat[PATH_MAX];
	snprintf(pat, sizeof(pat), "/sys/fs/cgroup/{*/,}deskbox/%s/%s/cgroup.procs", id, name);
	glob_t g;
	int n = 0;
	if (glob(pat, GLOB_BRACE, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc && n < RUN_CG_MAX; i++)
			snprintf(out[n++], PATH_MAX, "%s", g.gl_pathv[i]);
		globfree(&g);
	}
	return n;
}

int runtime_vm_exec(struct runtime *rt, const char *id, const struct runtime_exec *x,
		    pid_t *client_pid, struct err *e)
{
	char run[PATH_MAX];
	if (runtime_vm_run_dir(rt, id, run, sizeof(run)) < 0)
		return err_set(e, ERR_NOT_RUNNING, ESRCH, "the sandbox's VM is not running");
	const char *client = runtime_vm_client();
	if (!client)
		return err_set(e, ERR_INTERNAL, ENOENT, "VM: no exec client configured");
	_cleanup_free_ char *req = request_json(x);
	if (!req)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	const char *argv[] = {client, "vm-exec", run, req, x->pid_file, NULL};
	int fds[3] = {x->stdin_fd, x->stdout_fd, x->stderr_fd};
	_cleanup_free_ char(*cgs)[PATH_MAX] = calloc(RUN_CG_MAX, PATH_MAX);
	if (!cgs)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int n_cg = run_cgroups(id, x->cgroup, cgs);
	pid_t pid = fork();
	if (pid < 0)
		return err_sys(e, ERR_INTERNAL, errno, "fork");
	if (pid == 0) {
		/* Only async-signal-safe calls: deskboxd has threads. */
		for (int i = 0; i < n_cg; i++) {
			int cfd = open(cgs[i], O_WRONLY | O_CLOEXEC);
			if (cfd >= 0) {
				if (write(cfd, "0", 1) < 0) {
					/* outside that hierarchy's run cgroup */
				}
				close(cfd);
			}
		}
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int i = 0; i < 3; i++)
			if (dup2(fds[i] >= 0 ? fds[i] : nul, i) < 0)
				_exit(126);
		if (x->pty && (setsid() < 0 || ioctl(0, TIOCSCTTY, 0) < 0))
			_exit(126);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		static char *const env[] = {"PATH=/usr/bin:/bin", NULL};
		execve(client, (char *const *)argv, env);
		_exit(127);
	}
	*client_pid = pid;
	return 0;
}

/* `sync` in the guest, as its user: the 9p shares' dirty pages (what
 * programs wrote through mmap, /usr's cached writes) reach the host. */
int runtime_vm_quiesce(struct runtime *rt, const char *id, int timeout_ms, struct err *e)
{
	static const char *const argv[] = {"sync", NULL};
	struct runtime_exec x = {.argv = argv,
				 .cwd = "/",
				 .uid = IMAGE_USER_UID,
				 .gid = IMAGE_USER_UID,
				 .stdin_fd = -1,
				 .stdout_fd = -1,
				 .stderr_fd = -1};
	pid_t pid;
	if (runtime_vm_exec(rt, id, &x, &pid, e) < 0)
		return err_code(e);
	long long until = clock_mono_ms() + timeout_ms;
	int status = 0;
	pid_t got = 0;
	while ((got = waitpid(pid, &status, WNOHANG)) == 0 && clock_mono_ms() < until)
		clock_sleep_ms(5);
	if (got == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return err_set(e, ERR_UNAVAILABLE, ETIMEDOUT,
			       "isolation 'vm': the guest did not write back its files in %d ms "
			       "(sync)",
			       timeout_ms);
	}
	if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return err_set(e, ERR_UNAVAILABLE, EIO,
			       "isolation 'vm': the guest's sync failed (status %d)", status);
	return 0;
}
