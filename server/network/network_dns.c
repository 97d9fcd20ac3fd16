/* network_dns: each attached sandbox's resolver, a dnsmasq of its own on
 * its gateway address in deskboxd's network namespace.
 *
 * internet: it forwards to the upstream servers.  allow: `--address=/#/`
 * answers NXDOMAIN for every name, and each allowed name (a wildcard
 * "*.example.org" as "example.org", which covers its subdomains too) gets
 * `--server=/name/<upstream>` and `--nftset=/name/4#inet#deskbox#sb<slot>_dns`,
 * so the addresses its answers carry, and only those, enter the set the
 * filter accepts.  AAAA answers are dropped (sandboxes have IPv4 only).
 * No --stop-dns-rebind: the filter drops private and link-local
 * destinations whatever DNS says (a name answered with 10.x or
 * 169.254.169.254 reaches nothing), and dnsmasq's rebind list also holds
 * the documentation ranges (192.0.2/24, 198.51.100/24, 203.0.113/24),
 * which are public as far as the filter is concerned.
 *
 * The attachment owns its dnsmasq: started here, killed and reaped
 * (waitpid on its own pid: nothing in deskboxd reaps with waitpid(-1)) by
 * net_dns_stop().  Its pid file lets a deskboxd started after a kill -9
 * find and kill it. */
#include "internal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"

extern char **environ;

#define DNS_MAX_ARGS (16 + NETWORK_MAX_DNS * (1 + NETWORK_MAX_ALLOW) + NETWORK_MAX_ALLOW)

static void pid_path(const struct network *n, unsigned slot, char *out, size_t size)
{
	snprintf(out, size, "%s/dnsmasq-%u.pid", n->state, slot);
}

/* Appends one formatted argument; the strings are freed by the caller. */
static int arg(char **argv, size_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int arg(char **argv, size_t *n, const char *fmt, ...)
{
	if (*n + 1 >= DNS_MAX_ARGS)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	int r = vasprintf(&argv[*n], fmt, ap);
	va_end(ap);
	if (r < 0) {
		argv[*n] = NULL;
		return -1;
	}
	argv[++*n] = NULL;
	return 0;
}

static int build_argv(struct network *n, const struct network_attachment *a,
		      const struct network_policy *p, char **argv)
{
	size_t c = 0;
	char pid[PATH_MAX];
	pid_path(n, a->slot, pid, sizeof(pid));
	int r = arg(argv, &c, "%s", n->dnsmasq);
	r = r ?: arg(argv, &c, "--keep-in-foreground");
	r = r ?: arg(argv, &c, "--conf-file=/dev/null");
	r = r ?: arg(argv, &c, "--no-resolv");
	r = r ?: arg(argv, &c, "--no-hosts");
	r = r ?: arg(argv, &c, "--bind-interfaces");
	r = r ?: arg(argv, &c, "--listen-address=%s", a->gw);
	r = r ?: arg(argv, &c, "--filter-AAAA");
	r = r ?: arg(argv, &c, "--log-facility=-");
	r = r ?: arg(argv, &c, "--pid-file=%s", pid);
	if (p->mode == NETWORK_INTERNET) {
		for (size_t i = 0; i < n->n_dns; i++)
			r = r ?: arg(argv, &c, "--server=%s", n->dns[i]);
		return r;
	}
	r = r ?: arg(argv, &c, "--address=/#/");
	for (size_t i = 0; i < p->n_rules; i++) {
		const struct network_rule *rule = &p->rules[i];
		if (!rule->is_name)
			continue;
		for (size_t j = 0; j < n->n_dns; j++)
			r = r ?: arg(argv, &c, "--server=/%s/%s", rule->name, n->dns[j]);
		r = r
			?: arg(argv, &c, "--nftset=/%s/4#inet#" NETWORK_TABLE "#sb%u_dns",
			       rule->name, a->slot);
	}
	return r;
}

int net_dns_start(struct network *n, struct network_attachment *a, const struct network_policy *p,
		  struct err *e)
{
	char *argv[DNS_MAX_ARGS] = {NULL};
	int r = build_argv(n, a, p, argv);
	pid_t pid = -1;
	if (r == 0) {
		posix_spawn_file_actions_t fa;
		posix_spawnattr_t at;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
		posix_spawnattr_init(&at);
		/* deskboxd blocks its stop signals and ignores SIGPIPE: the
		 * child must not inherit either, or SIGTERM would not stop it. */
		sigset_t none, def;
		sigemptyset(&none);
		sigemptyset(&def);
		sigaddset(&def, SIGPIPE);
		posix_spawnattr_setsigmask(&at, &none);
		posix_spawnattr_setsigdefault(&at, &def);
		posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
		r = posix_spawnp(&pid, n->dnsmasq, &fa, &at, argv, environ);
		posix_spawn_file_actions_destroy(&fa);
		posix_spawnattr_destroy(&at);
		r = r ? err_sys(e, ERR_UNAVAILABLE, r, "starting '%s'", n->dnsmasq) : 0;
	} else {
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	for (size_t i = 0; argv[i]; i++)
		free(argv[i]);
	if (r == 0)
		a->dnsmasq = pid;
	return r;
}

void net_dns_stop(struct network *n, struct network_attachment *a)
{
	if (a->dnsmasq <= 0)
		return;
	kill(a->dnsmasq, SIGTERM);
	long long deadline = clock_mono_ms() + 1000;
	int killed = 0;
	for (;;) {
		pid_t r = waitpid(a->dnsmasq, NULL, WNOHANG);
		if (r == a->dnsmasq || (r < 0 && errno != EINTR))
			break;
		if (!killed && clock_mono_ms() > deadline) {
			kill(a->dnsmasq, SIGKILL);
			killed = 1;
		}
		clock_sleep_ms(2);
	}
	a->dnsmasq = -1;
	char path[PATH_MAX];
	pid_path(n, a->slot, path, sizeof(path));
	unlink(path);
}

/* A CHAOS TXT query for version.bind: dnsmasq answers it itself, in
 * every mode, so an answer means it listens. */
static size_t probe_query(unsigned char *q, unsigned id)
{
	static const unsigned char tail[] = {7,	  'v', 'e', 'r', 's', 'i', 'o', 'n', 4,
					     'b', 'i', 'n', 'd', 0,   0,   16,	0,   3};
	q[0] = (unsigned char)(id >> 8);
	q[1] = (unsigned char)id;
	q[2] = 1; /* RD */
	q[3] = 0;
	q[4] = 0;
	q[5] = 1; /* one question */
	memset(q + 6, 0, 6);
	memcpy(q + 12, tail, sizeof(tail));
	return 12 + sizeof(tail);
}

int net_dns_probe(const struct network_attachment *a, int timeout_ms, struct err *e)
{
	long long deadline = clock_mono_ms() + timeout_ms;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
	sa.sin_addr.s_addr = htonl(a->gw_n);
	for (unsigned id = 1;; id++) {
		_cleanup_fd_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return err_sys(e, ERR_INTERNAL, errno, "socket");
		unsigned char q[64], ans[512];
		size_t len = probe_query(q, id);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		    send(fd, q, len, 0) == (ssize_t)len) {
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			/* A refusal (not listening yet) comes back at once as
			 * ECONNREFUSED; an answer within a few ms. */
			if (poll(&pfd, 1, 20) == 1 && recv(fd, ans, sizeof(ans), 0) >= 12 &&
			    ans[0] == q[0] && ans[1] == q[1])
				return 0;
		}
		if (a->dnsmasq > 0 && waitpid(a->dnsmasq, NULL, WNOHANG) == a->dnsmasq)
			return err_set(e, ERR_UNAVAILABLE, ECHILD,
				       "the sandbox's resolver (dnsmasq) exited at start");
		if (clock_mono_ms() > deadline)
			return err_set(e, ERR_UNAVAILABLE, ETIMEDOUT,
				       "the sandbox's resolver did not answer within %d ms",
				       timeout_ms);
		clock_sleep_ms(1);
	}
}

/* Kills the dnsmasq of a pid file if it still is one of ours. */
static void sweep_one(const char *path)
{
	_cleanup_free_ char *text = NULL;
	if (fs_read_file(path, 64, &text, NULL, NULL) < 0)
		return;
	long pid = strtol(text, NULL, 10);
	if (pid > 1) {
		char cl[64], cmd[4096];
		snprintf(cl, sizeof(cl), "/proc/%ld/cmdline", pid);
		_cleanup_fd_ int fd = open(cl, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd >= 0 ? read(fd, cmd, sizeof(cmd) - 1) : -1;
		if (k > 0) {
			cmd[k] = '\0';
			for (ssize_t i = 0; i < k; i++)
				if (!cmd[i])
					cmd[i] = ' ';
			/* Its own pid file on its command line: it is ours. */
			if (strstr(cmd, "dnsmasq") && strstr(cmd, path)) {
				kill((pid_t)pid, SIGKILL);
				log_msg(LOG_LEVEL_INFO, "killed a stale sandbox resolver (pid %ld)",
					pid);
			}
		}
	}
	unlink(path);
}

void net_dns_sweep(struct network *n)
{
	DIR *d = opendir(n->state);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "dnsmasq-", 8) != 0)
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", n->state, de->d_name);
		sweep_one(path);
	}
	closedir(d);
}
