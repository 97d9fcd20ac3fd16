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
 *
 * A terminal (EXEC_AGENT_PTY set in the length word, no fds attached): the
 * child opens a pseudo-terminal pair itself, so it is the sandbox's own
 * (its /dev/pts, owned by the user), and sends the master back with its pid
 * (SCM_RIGHTS next to SCM_CREDENTIALS); deskboxd sets the window size on it
 * before the 'g'.  The program then runs with the slave as its stdin,
 * stdout, stderr and controlling terminal.
 *
 * Who may ask: only deskboxd.  The socket is 0600 in /run/deskbox, which
 * deskboxd makes the container root's alone (0700) when the sandbox has a
 * user namespace, and the agent refuses any peer whose pid it can see
 * (SO_PEERCRED): every process of the sandbox, root included; deskboxd is
 * outside the pid namespace (pid 0).  When the init runs as the container's
 * root, each child becomes EXEC_AGENT_UID:EXEC_AGENT_GID (the image's
 * "user", IMAGE_USER_UID in deskboxd) before it parses the request's body,
 * unless the length word has EXEC_AGENT_ROOT. */
#ifndef DESKBOX_IMAGE_EXEC_AGENT_H
#define DESKBOX_IMAGE_EXEC_AGENT_H

#include <sys/types.h>

#define EXEC_AGENT_SOCK "/run/deskbox/exec.sock"
#define EXEC_AGENT_UID	1000
#define EXEC_AGENT_GID	1000
/* In the request's length word: the program gets a new terminal. */
#define EXEC_AGENT_PTY 0x80000000u
/* In the request's length word: the program stays the container's root
 * (the "user": "root" of a run, and sudo) instead of becoming the user. */
#define EXEC_AGENT_ROOT 0x40000000u

/* The sudo door: where deskboxd allows root (DESKBOX_SUDO=1 in the
 * init's environment), the init listens here too, for every process of the
 * sandbox (0666): the same request as above (no terminal bit), from the
 * sudo shim (sudo.c, the init under the name "sudo").  The program runs as
 * the container's root in a session of its own; the init's child for the
 * request answers its pid (i32), passes on signals the client sends (one
 * byte, the signal's number), kills the program's session when the client
 * goes away, and answers its wait status (i32). */
#define EXEC_AGENT_SUDO_SOCK "/run/deskbox-sudo.sock"

struct exec_agent;

/* Listens on EXEC_AGENT_SOCK; NULL (after saying why on stderr) if it
 * cannot, and the init carries on without the fast path. */
struct exec_agent *exec_agent_open(void);
/* The listening fd to poll for POLLIN. */
int exec_agent_fd(const struct exec_agent *a);
/* Accepts pending connections and forks a child for each. */
void exec_agent_accept(struct exec_agent *a);
/* The sudo door's listening fd (-1: none) and its accept. */
int exec_agent_sudo_fd(const struct exec_agent *a);
void exec_agent_sudo_accept(struct exec_agent *a);
/* The sudo shim: the init's main when called as "sudo". */
int sudo_main(int argc, char **argv);
/* Called for every reaped pid: 1 if it was one of the agent's children
 * (its status was sent), 0 otherwise. */
int exec_agent_reaped(struct exec_agent *a, pid_t pid, int status);

#endif
