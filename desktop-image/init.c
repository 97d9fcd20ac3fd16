/* deskbox-init: PID 1 of a sandbox container (see README.md for the
 * contract).  Starts Xvfb, then openbox and the VNC server (deskbox-vnc, or
 * x11vnc with DESKBOX_VNC=x11vnc) in parallel, announces readiness with
 * /run/deskbox/ready, restarts openbox and the VNC server when they die,
 * reaps every orphan, and tears the desktop down when Xvfb dies or on
 * SIGTERM/SIGINT.  Signals arrive through a signalfd; nothing runs in a
 * signal handler. */
#include <X11/Xatom.h>
#include <X11/Xlib.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "exec_agent.h"
#include "vm_exec.h"

#define DISPLAY_NAME ":0"
#define RUN_DIR	     "/run/deskbox"
#define VNC_SOCK     RUN_DIR "/vnc.sock"
#define READY_FILE   RUN_DIR "/ready"
#define VNC_BIN	     "/.deskbox/deskbox-vnc"
/* The host's desktop, for an image without Xvfb or openbox of its own
 * (deskboxd mounts it there read-only, docs/images.md). */
#define HOST_DIR "/.deskbox/host"
/* Xvfb keeps its screen in a file here (-fbdir) that deskbox-vnc maps:
 * the container's own /run tmpfs (charged to the sandbox), root's, 0700. */
#define FB_DIR	  "/run/deskbox-fb"
#define FB_FILE	  FB_DIR "/Xvfb_screen0"
#define HOME_DIR  "/home/user"
#define ROOT_HOME "/root"

/* The session bus of DESKBOX_A11Y=1 (in the sandbox's own /tmp). */
#define A11Y_BUS_ADDR "unix:path=/tmp/.deskbox-session-bus"

#define DEFAULT_WIDTH  1280
#define DEFAULT_HEIGHT 800
#define MAX_SIDE       8192

/* How long Xvfb may take to accept clients. */
#define XVFB_TIMEOUT_MS 10000
/* SIGTERM, then SIGKILL after this long. */
#define STOP_GRACE_MS 2000
/* Restart backoff for openbox and x11vnc: doubles per quick death, reset
 * when the process ran for a while. */
#define BACKOFF_MIN_MS	 100
#define BACKOFF_MAX_MS	 5000
#define BACKOFF_RESET_MS 10000
/* Poll interval for the VNC socket to appear. */
#define SOCK_POLL_MS 5

enum child_kind { XVFB, WM, VNC, N_CHILDREN };

struct child {
	const char *name;
	pid_t pid;	      /* 0: not running */
	long long started;    /* ms */
	long long restart_at; /* ms; 0: no restart pending */
	int backoff_ms;
	int host; /* runs from the host's desktop, chrooted in HOST_DIR */
};

struct init {
	int sigfd;
	int displayfd; /* read end of Xvfb's -displayfd pipe, -1 when done */
	char display_buf[16];
	size_t display_len;
	struct child c[N_CHILDREN];
	char geometry[32];
	Display *dpy;
	Atom wm_check;
	int wm_ready, vnc_ready, ready;
	int deskbox_vnc; /* deskbox-vnc, unless DESKBOX_VNC=x11vnc */
	int fb_file;	 /* Xvfb's screen is in FB_FILE */
	int a11y;	 /* DESKBOX_A11Y=1: the accessibility bus runs */
	int stopping, exit_code;
	long long stop_deadline, t0;
	long long xvfb_timeout_ms; /* XVFB_TIMEOUT_MS, or DESKBOX_XVFB_TIMEOUT_MS */
	int autorepeat;		   /* 0: DESKBOX_XVFB_AUTOREPEAT=0 (Xvfb -r) */
	struct exec_agent *agent; /* NULL: deskboxd falls back to crun exec */
};

/* One line on stderr per event, written at once. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "deskbox-init: ");
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	size_t len =
	    (size_t)n +
	    ((size_t)m < sizeof(line) - (size_t)n - 1 ? (size_t)m : sizeof(line) - (size_t)n - 2);
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

/* Whether the init runs as the container's root, apart from the user
 * (deskboxd gave the container a user namespace); otherwise everything in
 * the sandbox is the user, the init included. */
static int apart;

/* In a child about to exec a part of the desktop: no capability survives
 * the exec (no_new_privs keeps root's exec from granting new ones), and as
 * root its home is /root, never the user's, whose files (openbox's rc.xml,
 * autostart) would otherwise configure a process of root. */
static int desktop_creds(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capset, &h, d) < 0)
		return -1;
	if (apart && (setenv("HOME", ROOT_HOME, 1) < 0 || chdir(ROOT_HOME) < 0))
		return -1;
	return 0;
}

/* Starts argv with the init's environment (HOME aside, plus `env`,
 * "NAME=VALUE", when not NULL), a clean signal state, its own process group,
 * no capabilities and only fds 0-2 (plus `pass_fd` as fd 3 when >= 0); with
 * `host`, chrooted in HOST_DIR, where the host's programs find their
 * libraries, keymaps and fonts at the paths they were built for, and the
 * image's programs never see them. */
static pid_t start(const char *const argv[], int pass_fd, int host, const char *env)
{
	/* fork, not posix_spawn: the capabilities go between fork and exec.
	 * The init has one thread. */
	pid_t pid = fork();
	if (pid < 0) {
		say("cannot start %s: %s", argv[0], strerror(errno));
		return 0;
	}
	if (pid > 0)
		return pid;
	sigset_t none;
	sigemptyset(&none);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Own process group: a signal to the init's group does not hit them. */
	setpgid(0, 0);
	if ((pass_fd >= 0 && dup2(pass_fd, 3) < 0) ||
	    (host && (chroot(HOST_DIR) < 0 || chdir("/") < 0)) || desktop_creds() < 0 ||
	    (env && putenv((char *)env) != 0)) {
		say("cannot set up %s: %s", argv[0], strerror(errno));
		_exit(126);
	}
	syscall(SYS_close_range, pass_fd >= 0 ? 4 : 3, ~0u, 0);
	execvp(argv[0], (char *const *)argv);
	say("cannot start %s: %s", argv[0], strerror(errno));
	_exit(127);
}

/* Schedules a restart of openbox or x11vnc after a backoff that doubles
 * while it keeps dying quickly. */
static void schedule_restart(struct child *c)
{
	long long ran = clock_mono_ms() - c->started;
	if (ran > BACKOFF_RESET_MS || !c->backoff_ms)
		c->backoff_ms = BACKOFF_MIN_MS;
	else
		c->backoff_ms =
		    c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
	c->restart_at = clock_mono_ms() + c->backoff_ms;
}

/* Whether FB_DIR is a directory of ours that nobody else may enter (made
 * now, or left by an earlier VNC restart of this run). */
static int make_fb_dir(void)
{
	if (mkdir(FB_DIR, 0700) < 0 && errno != EEXIST) {
		say("cannot create %s (%s): Xvfb's screen will be copied", FB_DIR, strerror(errno));
		return 0;
	}
	struct stat st;
	if (lstat(FB_DIR, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
	    (st.st_mode & 077)) {
		say("%s is not a private directory: Xvfb's screen will be copied", FB_DIR);
		return 0;
	}
	return 1;
}

static int start_xvfb(struct init *in)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		say("pipe: %s", strerror(errno));
		return -1;
	}
	/* Keep the write end away from fd 3 so the dup2 to 3 is a real one
	 * (and drops O_CLOEXEC). */
	int w = fcntl(p[1], F_DUPFD_CLOEXEC, 10);
	/* Xvfb (not root) will not create the socket directory itself and
	 * then listens only on the abstract socket; clients that look for
	 * the path socket need the directory. */
	if (mkdir("/tmp/.X11-unix", 01777) == 0)
		chmod("/tmp/.X11-unix", 01777);
	/* /tmp persists across stop and start: a desktop that was killed
	 * leaves its lock, whose pid may well be alive again in this pid
	 * namespace, and Xvfb would refuse to start ("server is already
	 * active").  Nothing else can own display :0 in here. */
	unlink("/tmp/.X0-lock");
	unlink("/tmp/.X11-unix/X0");
	close(p[1]);
	const char *argv[] = {"Xvfb", DISPLAY_NAME, "-screen", "0", in->geometry, "-nolisten",
			      "tcp",
			      /* no reset when the last client leaves (our probe) */
			      "-noreset",
			      /* GLX loads LLVM: twice the start time, +45 MB */
			      "-extension", "GLX", "-displayfd", "3",
			      /* Nothing else can own :0 in here, and a lock the
			       * user left in the sticky /tmp would stop root's
			       * Xvfb.  Only root may pass it. */
			      apart ? "-nolock" : NULL, NULL, NULL, NULL, NULL};
	/* The screen in a mapped file instead of Xvfb's heap: deskbox-vnc
	 * reads it in place rather than keeping a 4 MB copy (README.md).  Not
	 * for the host's Xvfb in its chroot, which has no /run/deskbox-fb. */
	in->fb_file = in->deskbox_vnc && !in->c[XVFB].host && make_fb_dir();
	if (in->fb_file) {
		size_t n = apart ? 13 : 12; /* after -nolock, or in its place */
		argv[n] = "-fbdir";
		argv[n + 1] = FB_DIR;
	}
	if (!in->autorepeat) {
		size_t k = 12;
		while (argv[k])
			k++;
		argv[k] = "-r";
	}
	in->c[XVFB].pid = w >= 0 ? start(argv, w, in->c[XVFB].host, NULL) : 0;
	if (w >= 0)
		close(w);
	if (!in->c[XVFB].pid) {
		close(p[0]);
		return -1;
	}
	in->c[XVFB].started = clock_mono_ms();
	in->displayfd = p[0];
	return 0;
}

static void start_wm(struct init *in)
{
	/* xfwm4 (DESKBOX_WM): no compositing, which Xvfb has no GL for */
	const char *argv[] = {in->c[WM].name, strcmp(in->c[WM].name, "xfwm4") ? NULL : "--compositor=off",
			      NULL};
	in->c[WM].started = clock_mono_ms();
	/* One malloc arena: a thread openbox starts and ends at start-up
	 * would leave its own arena behind (0.1-0.2 MB, measured). */
	in->c[WM].pid = start(argv, -1, in->c[WM].host, "GLIBC_TUNABLES=glibc.malloc.arena_max=1");
	if (!in->c[WM].pid)
		schedule_restart(&in->c[WM]);
}

/* With DESKBOX_A11Y=1, a D-Bus session bus and the AT-SPI bus on it, for
 * deskbox-a11y.py (docs/observation.md); before any application starts,
 * since toolkits look for the accessibility bus when they start.  They run
 * as the user the exec agent runs programs as (the bus launcher keeps its
 * socket in its user's home, closed to others).  Not restarted: without
 * them only the accessibility tree is missing.  The daemons fork away
 * from the shell and are reaped here as orphans. */
static void start_a11y(struct init *in)
{
	if (!in->a11y)
		return;
	pid_t pid = fork();
	if (pid < 0)
		say("cannot start the accessibility bus: %s", strerror(errno));
	if (pid != 0)
		return;
	sigset_t none;
	sigemptyset(&none);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setpgid(0, 0);
	if (apart &&
	    (setgroups(0, NULL) < 0 || setgid(EXEC_AGENT_GID) < 0 || setuid(EXEC_AGENT_UID) < 0)) {
		say("cannot become the desktop's user for the accessibility bus: %s",
		    strerror(errno));
		_exit(126);
	}
	setenv("HOME", HOME_DIR, 1);
	syscall(SYS_close_range, 3, ~0u, 0);
	execl("/bin/sh", "sh", "-c",
	      "dbus-daemon --session --address=" A11Y_BUS_ADDR
	      " --fork --nopidfile --nosyslog >/dev/null &&"
	      " exec /usr/libexec/at-spi-bus-launcher --launch-immediately",
	      (char *)NULL);
	_exit(127);
}

static void start_vnc(struct init *in)
{
	/* A stale socket would look like a ready server. */
	unlink(VNC_SOCK);
	in->vnc_ready = 0;
	/* -rfbport 0: no TCP at all; -safer -nocmds: no remote control or
	 * command execution channels; -norc: ignore ~/.x11vncrc, which the
	 * sandbox's user could write; -nonap: x11vnc's idle naps otherwise
	 * stretch a new client's handshake to 1.5-2.6 s (measured: 150 ms
	 * without them); -noscr -nowf: x11vnc's scroll and window-drag
	 * detection holds wheel and drag events back, so a modifier pressed
	 * around a wheel click landed after it (measured). */
	const char *argv[] = {"x11vnc", "-display", DISPLAY_NAME, "-unixsock", VNC_SOCK, "-rfbport",
			      "0",	"-shared",  "-forever",	  "-nopw",     "-norc",	 "-quiet",
			      "-safer", "-nocmds",  "-nonap",	  "-noscr",    "-nowf",	 NULL};
	/* deskbox-vnc (vnc.c, bind-mounted by deskboxd), the default:
	 * damage-driven, key to frame ~3 ms instead of ~30-50, no idle CPU,
	 * banner at once (README.md); x11vnc with DESKBOX_VNC=x11vnc. */
	const char *dargv[] = {VNC_BIN, "-display", DISPLAY_NAME, VNC_SOCK, NULL, NULL, NULL};
	if (in->fb_file) {
		dargv[3] = "-fbfile";
		dargv[4] = FB_FILE;
		dargv[5] = VNC_SOCK;
	}
	in->c[VNC].started = clock_mono_ms();
	/* libvncserver links GnuTLS, which deskbox-vnc never uses (no TLS, no
	 * WebSocket): no load-time initialisation, ~140 KB less. */
	in->c[VNC].pid = start(in->deskbox_vnc ? dargv : argv, -1, 0,
			       in->deskbox_vnc ? "GNUTLS_NO_IMPLICIT_INIT=1" : NULL);
	if (!in->c[VNC].pid)
		schedule_restart(&in->c[VNC]);
}

static void begin_stop(struct init *in, int code, const char *why)
{
	if (in->stopping)
		return;
	say("stopping (%s)", why);
	in->stopping = 1;
	in->exit_code = code;
	in->stop_deadline = clock_mono_ms() + STOP_GRACE_MS;
	if (getpid() == 1) {
		/* PID 1 of a pid namespace: -1 is every other process in it. */
		kill(-1, SIGTERM);
	} else {
		for (int i = 0; i < N_CHILDREN; i++)
			if (in->c[i].pid > 0)
				kill(in->c[i].pid, SIGTERM);
	}
}

static void finish(struct init *in)
{
	if (getpid() == 1)
		kill(-1, SIGKILL);
	else
		for (int i = 0; i < N_CHILDREN; i++)
			if (in->c[i].pid > 0)
				kill(in->c[i].pid, SIGKILL);
	say("exit %d", in->exit_code);
	exit(in->exit_code);
}

static void describe(int status, char *buf, size_t size)
{
	if (WIFEXITED(status))
		snprintf(buf, size, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, size, "signal %d", WTERMSIG(status));
	else
		snprintf(buf, size, "status 0x%x", status);
}

/* Reaps every child that exited; returns 1 when no child is left. */
static int reap(struct init *in)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid < 0)
			return errno == ECHILD;
		if (pid == 0)
			return 0;
		for (int i = 0; i < N_CHILDREN; i++) {
			struct child *c = &in->c[i];
			if (c->pid != pid)
				continue;
			c->pid = 0;
			char how[48];
			describe(status, how, sizeof(how));
			say("%s (pid %d) exited: %s", c->name, (int)pid, how);
			if (in->stopping)
				break;
			if (i == XVFB) {
				begin_stop(in, 1, "the X server died");
				break;
			}
			schedule_restart(c);
			if (i == WM)
				in->wm_ready = in->ready ? in->wm_ready : 0;
		}
		exec_agent_reaped(in->agent, pid, status);
	}
}

static int x_io_error(Display *dpy)
{
	(void)dpy;
	say("lost the connection to the X server");
	if (getpid() == 1)
		kill(-1, SIGKILL);
	_exit(1);
}

/* The empty desktop's colour: an all-black screen looks like a viewer that
 * lost its connection.  openbox leaves the root window's background alone,
 * and it outlives this connection (it is the window's attribute). */
#define ROOT_RGB 0x2f3e4e

static void paint_root(Display *dpy)
{
	XColor c = {.red = ((ROOT_RGB >> 16) & 0xff) * 0x101,
		    .green = ((ROOT_RGB >> 8) & 0xff) * 0x101,
		    .blue = (ROOT_RGB & 0xff) * 0x101,
		    .flags = DoRed | DoGreen | DoBlue};
	if (!XAllocColor(dpy, DefaultColormap(dpy, DefaultScreen(dpy)), &c)) {
		say("cannot allocate the desktop's background colour");
		return;
	}
	XSetWindowBackground(dpy, DefaultRootWindow(dpy), c.pixel);
	XClearWindow(dpy, DefaultRootWindow(dpy));
	XSync(dpy, False);
}

static void check_wm(struct init *in)
{
	Atom type;
	int format;
	unsigned long n, after;
	unsigned char *data = NULL;
	if (XGetWindowProperty(in->dpy, DefaultRootWindow(in->dpy), in->wm_check, 0, 1, False,
			       XA_WINDOW, &type, &format, &n, &after, &data) == Success &&
	    type == XA_WINDOW && n == 1)
		in->wm_ready = 1;
	if (data)
		XFree(data);
}

/* Xvfb wrote (part of) its display number: once the newline is there it
 * accepts clients, and the rest of the desktop starts. */
static void on_displayfd(struct init *in)
{
	char ch;
	ssize_t n = read(in->displayfd, &ch, 1);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(in->displayfd);
		in->displayfd = -1;
		begin_stop(in, 1, "Xvfb did not start");
		return;
	}
	if (ch != '\n') {
		if (in->display_len < sizeof(in->display_buf) - 1)
			in->display_buf[in->display_len++] = ch;
		return;
	}
	close(in->displayfd);
	in->displayfd = -1;
	say("Xvfb ready on :%s after %lld ms", in->display_buf, clock_mono_ms() - in->t0);
	in->dpy = XOpenDisplay(DISPLAY_NAME);
	if (!in->dpy) {
		begin_stop(in, 1, "cannot connect to Xvfb");
		return;
	}
	/* Before the VNC server starts, whose first picture of the screen
	 * then has the colour already (painted later, the first screenshot
	 * could still show black). */
	paint_root(in->dpy);
	start_a11y(in);
	start_wm(in);
	start_vnc(in);
	in->wm_check = XInternAtom(in->dpy, "_NET_SUPPORTING_WM_CHECK", False);
	XSelectInput(in->dpy, DefaultRootWindow(in->dpy), PropertyChangeMask);
	check_wm(in);
	XFlush(in->dpy);
}

static void on_x(struct init *in)
{
	while (in->dpy && XPending(in->dpy)) {
		XEvent ev;
		XNextEvent(in->dpy, &ev);
		if (ev.type == PropertyNotify && ev.xproperty.atom == in->wm_check)
			check_wm(in);
	}
}

static void check_ready(struct init *in)
{
	if (!in->vnc_ready && in->c[VNC].pid > 0) {
		struct stat st;
		in->vnc_ready = stat(VNC_SOCK, &st) == 0 && S_ISSOCK(st.st_mode);
	}
	if (in->ready || !in->wm_ready || !in->vnc_ready)
		return;
	int fd = open(READY_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		say("cannot create %s: %s", READY_FILE, strerror(errno));
		begin_stop(in, 1, "cannot announce readiness");
		return;
	}
	close(fd);
	in->ready = 1;
	say("ready after %lld ms", clock_mono_ms() - in->t0);
	/* The window manager check was the only use of this connection. */
	XCloseDisplay(in->dpy);
	in->dpy = NULL;
}

static int parse_display(const char *s, int *w, int *h)
{
	char *end;
	long a = strtol(s, &end, 10);
	if (end == s || (*end != 'x' && *end != 'X'))
		return -1;
	const char *t = end + 1;
	long b = strtol(t, &end, 10);
	if (end == t || *end || a < 64 || b < 64 || a > MAX_SIDE || b > MAX_SIDE)
		return -1;
	*w = (int)a;
	*h = (int)b;
	return 0;
}

/* The poll timeout until the next deadline: stop grace, Xvfb start,
 * socket check or a pending restart; -1 when there is none. */
static int next_timeout(struct init *in)
{
	long long now = clock_mono_ms(), when = -1;
	if (in->stopping)
		when = in->stop_deadline;
	else if (in->displayfd >= 0)
		when = in->c[XVFB].started + in->xvfb_timeout_ms;
	else if (!in->ready && !in->vnc_ready)
		when = now + SOCK_POLL_MS;
	for (int i = WM; !in->stopping && i < N_CHILDREN; i++)
		if (in->c[i].restart_at && (when < 0 || in->c[i].restart_at < when))
			when = in->c[i].restart_at;
	if (when < 0)
		return -1;
	return when <= now ? 0 : (int)(when - now);
}

/* The choices the environment makes: DESKBOX_VNC (which VNC server) and
 * DESKBOX_DISPLAY (the screen size); then DISPLAY, HOME and the working
 * directory for the children. */
static int configure(struct init *in)
{
	in->c[XVFB].name = "Xvfb";
	/* The window manager: openbox, or xfwm4 with DESKBOX_WM=xfwm4 (an XFCE
	 * session, as E2B's desktop SDK expects, then finds its own running). */
	const char *wm = getenv("DESKBOX_WM");
	in->c[WM].name = wm && strcmp(wm, "xfwm4") == 0 ? "xfwm4" : "openbox";
	if (wm && *wm && strcmp(wm, in->c[WM].name) != 0)
		say("unknown DESKBOX_WM '%s' (openbox | xfwm4), using openbox", wm);
	char bin[64], host_bin[64 + sizeof(HOST_DIR)];
	snprintf(bin, sizeof(bin), "/usr/bin/%s", in->c[WM].name);
	snprintf(host_bin, sizeof(host_bin), HOST_DIR "%s", bin);
	/* What the image lacks comes from the host, when deskboxd gave it. */
	in->c[XVFB].host =
	    access("/usr/bin/Xvfb", X_OK) < 0 && access(HOST_DIR "/usr/bin/Xvfb", X_OK) == 0;
	in->c[WM].host = access(bin, X_OK) < 0 && access(host_bin, X_OK) == 0;
	if (in->c[XVFB].host || in->c[WM].host)
		say("the image lacks%s%s%s: the host's from %s", in->c[XVFB].host ? " Xvfb" : "",
		    in->c[WM].host ? " " : "", in->c[WM].host ? in->c[WM].name : "", HOST_DIR);
	const char *vnc = getenv("DESKBOX_VNC");
	in->deskbox_vnc = !vnc || strcmp(vnc, "x11vnc") != 0;
	if (vnc && *vnc && in->deskbox_vnc && strcmp(vnc, "deskbox"))
		say("unknown DESKBOX_VNC '%s' (deskbox | x11vnc), using deskbox-vnc", vnc);
	in->c[VNC].name = in->deskbox_vnc ? "deskbox-vnc" : "x11vnc";

	int w = DEFAULT_WIDTH, h = DEFAULT_HEIGHT;
	const char *size = getenv("DESKBOX_DISPLAY");
	if (size && *size && parse_display(size, &w, &h) < 0) {
		say("invalid DESKBOX_DISPLAY '%s' (want WxH, 64..%d)", size, MAX_SIDE);
		return -1;
	}
	snprintf(in->geometry, sizeof(in->geometry), "%dx%dx24", w, h);
	/* A slower machine's (a VM under emulation: tens of seconds). */
	const char *xt = getenv("DESKBOX_XVFB_TIMEOUT_MS");
	char *end = NULL;
	long long t = xt && *xt ? strtoll(xt, &end, 10) : 0;
	in->xvfb_timeout_ms = t >= 1000 && t <= 600000 && end && !*end ? t : XVFB_TIMEOUT_MS;
	if (xt && *xt && in->xvfb_timeout_ms != t)
		say("invalid DESKBOX_XVFB_TIMEOUT_MS '%s' (1000..600000), using %d", xt,
		    XVFB_TIMEOUT_MS);
	/* A desktop whose X server may not run for a while between a key's
	 * press and its release (a VM under emulation) would repeat it. */
	const char *ar = getenv("DESKBOX_XVFB_AUTOREPEAT");
	in->autorepeat = !ar || strcmp(ar, "0") != 0;
	setenv("DISPLAY", DISPLAY_NAME, 1);
	setenv("HOME", HOME_DIR, 1);
	const char *a11y = getenv("DESKBOX_A11Y");
	in->a11y = a11y && strcmp(a11y, "1") == 0;
	if (in->a11y)
		setenv("DBUS_SESSION_BUS_ADDRESS", A11Y_BUS_ADDR, 1);
	if (chdir(HOME_DIR) < 0)
		say("cannot enter %s: %s", HOME_DIR, strerror(errno));
	unlink(READY_FILE);
	unlink(VNC_SOCK);
	return 0;
}

/* SIGCHLD and the stop signals arrive on in->sigfd, read by the loop. */
static int watch_signals(struct init *in)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	in->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (in->sigfd < 0) {
		say("signalfd: %s", strerror(errno));
		return -1;
	}
	signal(SIGPIPE, SIG_IGN);
	XSetIOErrorHandler(x_io_error);
	return 0;
}

/* Reads the pending signals: a stop signal begins the stop; 1 when a child
 * exited. */
static int read_signals(struct init *in)
{
	struct signalfd_siginfo si;
	int chld = 0;
	while (read(in->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			chld = 1;
		else
			begin_stop(in, 0, strsignal((int)si.ssi_signo));
	}
	return chld;
}

/* Restarts openbox and the VNC server when their restart time has come. */
static void restart_due(struct init *in)
{
	long long now = clock_mono_ms();
	if (in->c[WM].restart_at && now >= in->c[WM].restart_at && !in->stopping) {
		in->c[WM].restart_at = 0;
		say("restarting openbox");
		start_wm(in);
	}
	if (in->c[VNC].restart_at && now >= in->c[VNC].restart_at && !in->stopping) {
		in->c[VNC].restart_at = 0;
		say("restarting %s", in->c[VNC].name);
		start_vnc(in);
	}
}

/* One turn of the init's loop: waits for signals, Xvfb's display number,
 * X events, exec agent connections or the next deadline, and serves them.
 * Exits (finish()) once stopped. */
static void serve(struct init *in)
{
	struct pollfd p[5] = {{in->sigfd, POLLIN, 0},
			      {in->displayfd, POLLIN, 0},
			      {in->dpy ? ConnectionNumber(in->dpy) : -1, POLLIN, 0},
			      {in->stopping ? -1 : exec_agent_fd(in->agent), POLLIN, 0},
			      {in->stopping ? -1 : exec_agent_sudo_fd(in->agent), POLLIN, 0}};
	int n = poll(p, 5, next_timeout(in));
	if (n < 0 && errno != EINTR) {
		say("poll: %s", strerror(errno));
		in->exit_code = 1;
		finish(in);
	}
	int chld = read_signals(in);
	if (chld || in->stopping) {
		if (reap(in) && in->stopping)
			finish(in);
	}
	if (in->stopping) {
		if (clock_mono_ms() >= in->stop_deadline)
			finish(in);
		return;
	}
	if (p[3].revents)
		exec_agent_accept(in->agent);
	if (p[4].revents)
		exec_agent_sudo_accept(in->agent);
	if (in->displayfd >= 0 && p[1].revents)
		on_displayfd(in);
	else if (in->displayfd >= 0 && clock_mono_ms() - in->c[XVFB].started > in->xvfb_timeout_ms)
		begin_stop(in, 1, "Xvfb did not start in time");
	if (in->dpy)
		on_x(in);
	restart_due(in);
	if (!in->stopping && in->displayfd < 0)
		check_ready(in);
}

int main(int argc, char **argv)
{
	const char *name = argc > 0 ? strrchr(argv[0], '/') : NULL;
	name = name ? name + 1 : argc > 0 ? argv[0] : "";
	if (strcmp(name, "sudo") == 0)
		return sudo_main(argc, argv);
	if (argc > 1 && strcmp(argv[1], "vm-exec") == 0)
		return vm_exec_main(argc, argv);
	struct init in = {.displayfd = -1, .exit_code = 0};
	in.t0 = clock_mono_ms();
	apart = getuid() == 0;
	/* SECURITY: the user may not ptrace the init (or read its memory
	 * through /proc) even were it the same uid; it is not, when apart. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (configure(&in) < 0)
		return 2;
	if (watch_signals(&in) < 0)
		return 1;
	in.agent = exec_agent_open();
	say("starting %s desktop", in.geometry);
	if (start_xvfb(&in) < 0)
		return 1;
	for (;;)
		serve(&in);
}
