/* exec_agent: deskbox-init's fast path for running programs (what `crun
 * exec` does in ~30 ms, in about one).
 *
 * deskboxd connects to /run/deskbox/exec.sock and sends one request:
 *   u32 length (little endian), then `length` bytes:
 *   u32 argc, u32 envc, cwd\0, argv[0]\0 ..., env[0]\0 ... ("K=V", added
 *   to the init's environment)
 * with the program's stdin, stdout and stderr attached (SCM_RIGHTS).
 * The init forks a child for the connection and goes back to its loop; the
 * child reads the request, answers with its pid inside the sandbox as an
 * i32, sent with SCM_CREDENTIALS (the kernel translates the pid into
 * deskboxd's pid namespace, so deskboxd learns the host pid without
 * trusting the payload), and waits for one byte: deskboxd moves it into
 * the run's cgroup before sending it, so everything the program forks
 * stays there.  Then it execs the program (a new session, the signal state
 * reset, only fds 0-2).  When the init reaps the child it writes the wait
 * status (i32) to the connection and closes it.  deskboxd closing the
 * connection early changes nothing: runs are killed through their cgroup.
 *
 * The socket is inside the sandbox, so the sandbox's own processes can use
 * it too: that gives them nothing they could not do themselves. */
#ifndef DESKBOX_IMAGE_EXEC_AGENT_H
#define DESKBOX_IMAGE_EXEC_AGENT_H

#include <sys/types.h>

#define EXEC_AGENT_SOCK "/run/deskbox/exec.sock"

struct exec_agent;

/* Listens on EXEC_AGENT_SOCK; NULL (after saying why on stderr) if it
 * cannot, and the init carries on without the fast path. */
struct exec_agent *exec_agent_open(void);
/* The listening fd to poll for POLLIN. */
int exec_agent_fd(const struct exec_agent *a);
/* Accepts pending connections and forks a child for each. */
void exec_agent_accept(struct exec_agent *a);
/* Called for every reaped pid: 1 if it was one of the agent's children
 * (its status was sent), 0 otherwise. */
int exec_agent_reaped(struct exec_agent *a, pid_t pid, int status);

#endif
