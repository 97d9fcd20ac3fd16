/* sandbox_monitor: noticing a sandbox whose init exits.
 *
 * One thread waits (epoll) on a pidfd of every sandbox's init.  When one
 * becomes readable, the thread reaps the init (deskboxd is a child
 * subreaper, so the init crun started detached is its child), turns the
 * wait status into a reason, and, unless someone is stopping the sandbox on
 * purpose (sandbox_init_disown), marks it failed at once.  A short-lived
 * worker then takes the sandbox's exclusive lock, tears down what is left
 * (mirror, runs, the container's state and cgroup; the overlay and files
 * stay), persists "failed" with the reason and, with the "on-failure"
 * policy, starts it again after a backoff, at most RESTART_MAX times in
 * RESTART_WINDOW_MS.
 *
 * Lock order: sb->op before sb->mu before mon->mu; the monitor thread
 * itself takes only sb->mu and mon->mu, so it never waits for a create or
 * a stop. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define RESTART_MAX	  5
#define RESTART_WINDOW_MS (10 * 60 * 1000LL)
/* The first restart waits this long, each further one twice as long. */
#define RESTART_BACKOFF_MS 1000

/* One init being watched; owns its pidfd and a reference to the sandbox. */
struct watch {
	struct sandbox *sb;
	int pidfd;
	uint64_t gen;
	struct watch *next;
};

struct sandbox_monitor {
	int epfd, evfd;
	pthread_t thread;
	int thread_started;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* workers ending, or stopping */
	int stopping;
	unsigned workers;
	uint64_t next_gen;
	struct watch *watches; /* under mu */
};

/* What the wait status says, as the reason a sandbox failed. */
static void describe_exit(const siginfo_t *si, int reaped, char *out, size_t size)
{
	if (!reaped)
		snprintf(out, size, "the init exited");
	else if (si->si_code == CLD_EXITED)
		snprintf(out, size, "the init exited with status %d", si->si_status);
	else
		snprintf(out, size, "the init was killed by signal %d (%s)", si->si_status,
			 strsignal(si->si_status));
}

static void watch_free(struct sandbox_monitor *m, struct watch *w)
{
	pthread_mutex_lock(&m->mu);
	for (struct watch **pp = &m->watches; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	pthread_mutex_unlock(&m->mu);
	epoll_ctl(m->epfd, EPOLL_CTL_DEL, w->pidfd, NULL);
	close(w->pidfd);
	sandbox_put(w->sb);
	free(w);
}

static void *failed_worker(void *arg);

/* A worker for `sb` (failed with watch `gen`); holds a reference. */
static void start_worker(struct sandbox_monitor *m, struct sandbox *sb, uint64_t gen)
{
	uint64_t *job = malloc(sizeof(*job) + sizeof(sb));
	if (!job)
		return;
	job[0] = gen;
	memcpy(job + 1, &sb, sizeof(sb));
	atomic_fetch_add(&sb->refs, 1);
	pthread_mutex_lock(&m->mu);
	m->workers++;
	pthread_mutex_unlock(&m->mu);
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, failed_worker, job) != 0) {
		log_msg(LOG_LEVEL_WARN, "sandbox %s: no thread to clean up after its init", sb->id);
		pthread_mutex_lock(&m->mu);
		m->workers--;
		pthread_cond_broadcast(&m->cv);
		pthread_mutex_unlock(&m->mu);
		sandbox_put(sb);
		free(job);
	}
	pthread_attr_destroy(&attr);
}

/* The init of `w` exited: reap it and tell whoever expects it to run. */
static void on_exit_of(struct sandbox_monitor *m, struct watch *w)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	int reaped = syscall(SYS_waitid, P_PIDFD, w->pidfd, &si, WEXITED | WNOHANG, NULL) == 0 &&
		     si.si_pid != 0;
	char reason[200];
	describe_exit(&si, reaped, reason, sizeof(reason));
	struct sandbox *sb = w->sb;
	int failed = 0;
	pthread_mutex_lock(&sb->mu);
	if (sb->init_gen == w->gen) {
		/* Nobody stopped it: a failure, or an init that died while
		 * its start was under way (sandbox_set_running reports it). */
		sb->init_gen = 0;
		sb->init_pid = -1;
		snprintf(sb->reason, sizeof(sb->reason), "%s", reason);
		if (sb->status == SANDBOX_RUNNING || sb->status == SANDBOX_PAUSED) {
			sb->status = SANDBOX_FAILED;
			sb->fail_gen = w->gen;
			failed = 1;
		}
	}
	pthread_mutex_unlock(&sb->mu);
	if (failed) {
		log_msg(LOG_LEVEL_WARN, "sandbox %s failed: %s", sb->id, reason);
		start_worker(m, sb, w->gen);
	}
	watch_free(m, w);
}

static void *monitor_main(void *arg)
{
	struct sandbox_monitor *m = arg;
	for (;;) {
		struct epoll_event ev[16];
		int n = epoll_wait(m->epfd, ev, 16, -1);
		if (n < 0 && errno != EINTR) {
			log_msg(LOG_LEVEL_ERROR, "sandbox monitor: epoll_wait: %s",
				strerror(errno));
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			if (!ev[i].data.ptr)
				return NULL; /* the eventfd: stopping */
			on_exit_of(m, ev[i].data.ptr);
		}
	}
}

int sandbox_monitor_new(struct sandboxes *s, struct err *e)
{
	struct sandbox_monitor *m = calloc(1, sizeof(*m));
	if (!m)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	m->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->mon = m;
	if (m->epfd < 0 || m->evfd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating the sandbox monitor");
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->evfd, &ev) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating the sandbox monitor");
	/* The inits (crun run -d exits at once) become our children: their
	 * exit status is ours to read and their pids stay theirs until then. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "becoming a child subreaper");
	int r = pthread_create(&m->thread, NULL, monitor_main, m);
	if (r != 0)
		return err_sys(e, ERR_INTERNAL, r, "starting the sandbox monitor");
	m->thread_started = 1;
	return 0;
}

void sandbox_monitor_stop(struct sandboxes *s)
{
	struct sandbox_monitor *m = s->mon;
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->stopping = 1;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	if (m->thread_started) {
		uint64_t one = 1;
		if (write(m->evfd, &one, sizeof(one)) < 0)
			log_msg(LOG_LEVEL_WARN, "sandbox monitor: %s", strerror(errno));
		pthread_join(m->thread, NULL);
		m->thread_started = 0;
	}
	pthread_mutex_lock(&m->mu);
	while (m->workers)
		pthread_cond_wait(&m->cv, &m->mu);
	pthread_mutex_unlock(&m->mu);
}

void sandbox_monitor_free(struct sandboxes *s)
{
	struct sandbox_monitor *m = s->mon;
	if (!m)
		return;
	sandbox_monitor_stop(s);
	while (m->watches) {
		struct watch *w = m->watches;
		siginfo_t si;
		syscall(SYS_waitid, P_PIDFD, w->pidfd, &si, WEXITED | WNOHANG, NULL);
		watch_free(m, w);
	}
	if (m->epfd >= 0)
		close(m->epfd);
	if (m->evfd >= 0)
		close(m->evfd);
	pthread_mutex_destroy(&m->mu);
	pthread_cond_destroy(&m->cv);
	free(m);
	s->mon = NULL;
}

/* 1 when host process `pid` is in the container's cgroup. */
int sandbox_pid_in_container(pid_t pid, const char *cid)
{
	char path[64], line[512], want[128];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	snprintf(want, sizeof(want), "/deskbox/%s", cid);
	size_t wl = strlen(want);
	_cleanup_file_ FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, want);
		if (p && (p[wl] == '\n' || p[wl] == '/' || p[wl] == '\0'))
			return 1;
	}
	return 0;
}

int sandbox_monitor_watch(struct sandbox *sb, struct err *e)
{
	struct sandbox_monitor *m = sb->owner->mon;
	pid_t pid = sb->init_pid;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "watching the sandbox's init (pid %d)",
			       (int)pid);
	/* SECURITY: the pid came from crun's pid file.  The pidfd is taken
	 * first; the process it names was alive (or is our zombie) while its
	 * cgroup was checked if a signal 0 still reaches it afterwards, so a
	 * reused pid is never watched (or reaped) in the init's place. */
	if (!sandbox_pid_in_container(pid, sb->container_id) ||
	    syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0) < 0) {
		close(fd);
		return err_set(e, ERR_INTERNAL, ESRCH, "the sandbox's init (pid %d) went away",
			       (int)pid);
	}
	struct watch *w = calloc(1, sizeof(*w));
	if (!w) {
		close(fd);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	w->sb = sb;
	w->pidfd = fd;
	atomic_fetch_add(&sb->refs, 1);
	pthread_mutex_lock(&sb->mu);
	pthread_mutex_lock(&m->mu);
	w->gen = ++m->next_gen;
	w->next = m->watches;
	m->watches = w;
	pthread_mutex_unlock(&m->mu);
	sb->init_gen = w->gen;
	pthread_mutex_unlock(&sb->mu);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
	if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int saved = errno;
		sandbox_init_disown(sb);
		watch_free(m, w);
		return err_sys(e, ERR_INTERNAL, saved, "watching the sandbox's init");
	}
	return 0;
}

void sandbox_init_disown(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->mu);
	sb->init_gen = 0;
	pthread_mutex_unlock(&sb->mu);
}

int sandbox_init_gone(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->mu);
	int gone = sb->init_gen == 0;
	pthread_mutex_unlock(&sb->mu);
	return gone;
}

int sandbox_set_running(struct sandbox *sb, struct err *e)
{
	pthread_mutex_lock(&sb->mu);
	int alive = sb->init_gen != 0;
	if (alive) {
		sb->status = SANDBOX_RUNNING;
		sb->reason[0] = '\0';
	}
	pthread_mutex_unlock(&sb->mu);
	if (!alive)
		return err_set(e, ERR_INTERNAL, ECHILD, "the sandbox's init exited: %s",
			       sb->reason);
	return 0;
}

/* ---- after a failure: clean up, maybe restart ---- */

/* How long to wait before the next automatic restart, or -1 when the cap
 * is reached.  Under sb->op. */
static long long restart_delay(struct sandbox *sb)
{
	long long now = clock_mono_ms();
	unsigned recent = 0;
	unsigned n = sb->n_restarts < RESTART_MAX ? sb->n_restarts : RESTART_MAX;
	for (unsigned i = 0; i < n; i++)
		if (now - sb->restarts[i] < RESTART_WINDOW_MS)
			recent++;
	if (recent >= RESTART_MAX)
		return -1;
	return (long long)RESTART_BACKOFF_MS << recent;
}

/* Waits `ms` unless the monitor stops first (then returns -1). */
static int backoff(struct sandbox_monitor *m, long long ms)
{
	struct timespec until = clock_wall_after((int)ms);
	pthread_mutex_lock(&m->mu);
	int r = 0;
	while (!m->stopping && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&m->cv, &m->mu, &until);
	int stopping = m->stopping;
	pthread_mutex_unlock(&m->mu);
	return stopping ? -1 : 0;
}

/* Under sb->op: 1 while `sb` is still failed by the exit of watch `gen`
 * (nobody started, stopped or deleted it since). */
static int still_failed(struct sandbox *sb, uint64_t gen)
{
	pthread_mutex_lock(&sb->mu);
	int r = sb->status == SANDBOX_FAILED && sb->fail_gen == gen;
	pthread_mutex_unlock(&sb->mu);
	return r;
}

/* One attempt of the "on-failure" policy; 1 when it is running again, 0
 * to try again, -1 to give up. */
static int restart_once(struct sandbox_monitor *m, struct sandbox *sb, uint64_t gen)
{
	pthread_rwlock_wrlock(&sb->op);
	long long delay = still_failed(sb, gen) ? restart_delay(sb) : -2;
	if (delay == -1) {
		pthread_mutex_lock(&sb->mu);
		size_t l = strlen(sb->reason);
		snprintf(sb->reason + l, sizeof(sb->reason) - l,
			 "; not restarted again after %d restarts in %lld minutes", RESTART_MAX,
			 RESTART_WINDOW_MS / 60000);
		pthread_mutex_unlock(&sb->mu);
		struct err e = ERR_INIT;
		if (sandbox_persist(sb, SANDBOX_FAILED, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
	}
	pthread_rwlock_unlock(&sb->op);
	if (delay < 0 || backoff(m, delay) < 0)
		return -1;
	pthread_rwlock_wrlock(&sb->op);
	int r = -1;
	if (still_failed(sb, gen)) {
		sb->restarts[sb->n_restarts++ % RESTART_MAX] = clock_mono_ms();
		struct err e = ERR_INIT;
		r = sandbox_start_locked(sb, &e) == 0;
		if (r)
			log_msg(LOG_LEVEL_INFO, "sandbox %s restarted", sb->id);
		else
			log_msg(LOG_LEVEL_WARN, "sandbox %s: restart: %s", sb->id, e.msg);
	}
	pthread_rwlock_unlock(&sb->op);
	return r;
}

static void *failed_worker(void *arg)
{
	uint64_t *job = arg;
	uint64_t gen = job[0];
	struct sandbox *sb;
	memcpy(&sb, job + 1, sizeof(sb));
	free(job);
	struct sandbox_monitor *m = sb->owner->mon;

	pthread_rwlock_wrlock(&sb->op);
	int again = still_failed(sb, gen);
	if (again) {
		/* What is left: the mirror, runs, crun's state, the cgroup.
		 * The overlay stays mounted for the files API, as when
		 * stopped. */
		sandbox_teardown_ex(sb, 0);
		struct err e = ERR_INIT;
		if (sandbox_persist(sb, SANDBOX_FAILED, &e) < 0)
			log_msg(LOG_LEVEL_WARN, "sandbox %s: %s", sb->id, e.msg);
		again = sb->spec.restart_on_failure && !sb->pooled;
	}
	pthread_rwlock_unlock(&sb->op);
	while (again && restart_once(m, sb, gen) == 0)
		;
	sandbox_put(sb);
	pthread_mutex_lock(&m->mu);
	m->workers--;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	return NULL;
}
