/* capture: deskboxd's side of the bridge (process, shared memory, input). */
#include "capture.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "internal.h"

struct capture {
	pid_t pid; /* -1 once reaped */
	int pidfd; /* readable once the bridge exited; used to signal it safely */
	int ctl;   /* our end of the control socket */
	uint8_t *map;
	size_t map_len;
	struct capture_hdr *hdr;
	uint32_t width, height; /* our own copy: never trust the header's */
	pthread_mutex_t send_lock;
	uint32_t send_seq; /* under send_lock */
	struct capture_shots *shots;
};

struct capture_shots *capture_shots_of(struct capture *c)
{
	return c->shots;
}

/* Snapshot retries before giving up on a bridge that keeps the seqlock odd. */
#define SNAPSHOT_TRIES 1000
/* Bridge liveness is checked at least this often while waiting on the futex. */
#define WAIT_SLICE_MS 20
/* How long one message of events may wait for its ack with the VNC server
 * reading none of the input before it (progress notes restart the wait),
 * and how long it may wait in all. */
#define SEND_ACK_TIMEOUT_MS 5000
#define SEND_MAX_MS	    60000
/* SO_SNDBUF of the bridge's VNC socket (the kernel doubles it): input the
 * VNC server has not read yet waits there.  The bridge acks a message once
 * the socket took it, and a full unix socket reports room again only when
 * three quarters of it were read: with the default 208 KB, ~25000 queued
 * events, a busy VNC server (~500 characters a second under load) took
 * over 5 s to get there, and type_text answered 504 although nothing was
 * stuck.  32 KB hold ~7 messages of 256 events (~900 characters): an ack
 * waits for at most ~6 messages to be read, and type_text answers close to
 * when its text is typed. */
#define VNC_SNDBUF (16 * 1024)

static int pidfd_exited(int pidfd)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}

uint32_t capture_width(const struct capture *c)
{
	return c->width;
}

uint32_t capture_height(const struct capture *c)
{
	return c->height;
}

uint64_t capture_frame(const struct capture *c)
{
	return atomic_load_explicit(&c->hdr->frame, memory_order_acquire);
}

uint64_t capture_last_change_ns(const struct capture *c)
{
	return atomic_load_explicit(&c->hdr->last_change_ns, memory_order_acquire);
}

void capture_pointer(const struct capture *c, int32_t *x, int32_t *y)
{
	/* Written by the bridge: keep it on the screen. */
	int32_t px = atomic_load_explicit(&c->hdr->pointer_x, memory_order_relaxed);
	int32_t py = atomic_load_explicit(&c->hdr->pointer_y, memory_order_relaxed);
	*x = px < 0 ? 0 : px >= (int32_t)c->width ? (int32_t)c->width - 1 : px;
	*y = py < 0 ? 0 : py >= (int32_t)c->height ? (int32_t)c->height - 1 : py;
}

/* Grows [*y0, *y1) to the rows of every strip changed after `since`. */
static void changed_strips(const struct capture *c, uint64_t since, uint32_t *y0, uint32_t *y1)
{
	uint32_t n = (c->height + CAPTURE_STRIP_ROWS - 1) / CAPTURE_STRIP_ROWS;
	for (uint32_t s = 0; s < n; s++) {
		uint32_t sf = atomic_load_explicit(&c->hdr->strip_frame[s], memory_order_relaxed);
		if ((int32_t)(sf - (uint32_t)since) <= 0)
			continue;
		uint32_t a = s * CAPTURE_STRIP_ROWS, b = a + CAPTURE_STRIP_ROWS;
		if (*y1 <= *y0)
			*y0 = a, *y1 = b;
		*y0 = a < *y0 ? a : *y0;
		*y1 = b > *y1 ? b : *y1;
	}
}

void capture_damage(const struct capture *c, uint64_t since, struct capture_rect *r)
{
	*r = (struct capture_rect){0};
	uint64_t frame = capture_frame(c);
	if (frame == since)
		return;
	/* Written by the bridge: clip to the display we fixed. */
	int64_t x = atomic_load_explicit(&c->hdr->damage_x, memory_order_relaxed);
	int64_t y = atomic_load_explicit(&c->hdr->damage_y, memory_order_relaxed);
	int64_t w = atomic_load_explicit(&c->hdr->damage_w, memory_order_relaxed);
	int64_t h = atomic_load_explicit(&c->hdr->damage_h, memory_order_relaxed);
	int64_t x1 = x + w, y1 = y + h;
	x = x < 0 ? 0 : x > c->width ? c->width : x;
	y = y < 0 ? 0 : y > c->height ? c->height : y;
	x1 = x1 < x ? x : x1 > c->width ? c->width : x1;
	y1 = y1 < y ? y : y1 > c->height ? c->height : y1;
	uint32_t sy0 = (uint32_t)y, sy1 = (uint32_t)y1;
	if (frame - since > 1 || since == 0) {
		changed_strips(c, since, &sy0, &sy1);
		if (sy1 > c->height)
			sy1 = c->height;
		if (sy0 < (uint32_t)y || sy1 > (uint32_t)y1)
			x = 0, x1 = c->width;
	}
	*r = (struct capture_rect){(uint32_t)x, sy0, (uint32_t)(x1 - x), sy1 - sy0};
}

pid_t capture_pid(const struct capture *c)
{
	if (c->pid < 0 || pidfd_exited(c->pidfd))
		return -1;
	return c->pid;
}

int capture_alive(struct capture *c)
{
	if (!c || c->pid < 0 || pidfd_exited(c->pidfd))
		return 0;
	return atomic_load(&c->hdr->state) != CAPTURE_FAILED;
}

/* Builds the bridge's environment before fork (no allocation after it).
 * The bridge faces the sandbox, so it gets nothing of deskboxd's environment
 * except, in sanitizer builds, the sanitizer options.  GnuTLS, which
 * libvncclient links but the bridge never uses (security type None only),
 * skips its load-time initialisation: ~140 KB less per bridge. */
static void bridge_env(char **env, size_t max)
{
	size_t n = 0;
	env[n++] = "GNUTLS_NO_IMPLICIT_INIT=1";
#ifdef DBX_SANITIZE
	static const char *const keep[] = {"ASAN_OPTIONS=", "UBSAN_OPTIONS=", "LSAN_OPTIONS="};
	extern char **environ;
	for (char **p = environ; p && *p && n + 1 < max; p++)
		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			if (strncmp(*p, keep[i], strlen(keep[i])) == 0)
				env[n++] = *p;
#endif
	(void)max;
	env[n] = NULL;
}

/* In the child after fork: only async-signal-safe calls.  Moves the three
 * fds to 3, 4, 5 without CLOEXEC, closes everything else, execs. */
static void __attribute__((noreturn))
child_exec(const char *path, int vnc, int mem, int ctl, char **env)
{
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* deskboxd may ignore SIGPIPE; the bridge should die of a broken pipe
	 * like any client whose server went away. */
	signal(SIGPIPE, SIG_DFL);
	int fds[3] = {vnc, mem, ctl};
	/* Copy above 5 first so a source that is already 3..5 is not
	 * clobbered by an earlier dup2. */
	for (int i = 0; i < 3; i++) {
		fds[i] = fcntl(fds[i], F_DUPFD, 10);
		if (fds[i] < 0)
			_exit(127);
	}
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], 3 + i) < 0)
			_exit(127);
	if (syscall(SYS_close_range, 6u, ~0u, 0u) < 0)
		for (int fd = 6; fd < 1024; fd++)
			close(fd);
	char *argv[] = {(char *)"deskbox-bridge", NULL};
	execve(path, argv, env);
	_exit(127);
}

/* The shared frame's size for the display size in `o`: header, cursor and
 * pixels. */
static int frame_size(const struct capture_opts *o, size_t *px, struct err *e)
{
	if (o->width == 0 || o->height == 0 || o->width > CAPTURE_MAX_DIM ||
	    o->height > CAPTURE_MAX_DIM)
		return err_set(e, ERR_INVALID, EINVAL, "display size %ux%u out of range 1-%u",
			       o->width, o->height, CAPTURE_MAX_DIM);
	/* SECURITY: w*h*4 + header with both dimensions <= 8192 fits easily in
	 * 64-bit size_t, checked anyway so the limit can change safely. */
	if (__builtin_mul_overflow((size_t)o->width, (size_t)o->height, px) ||
	    __builtin_mul_overflow(*px, (size_t)4, px) ||
	    __builtin_add_overflow(*px, (size_t)CAPTURE_HDR_SIZE + CAPTURE_CURSOR_SIZE, px) ||
	    *px > (size_t)LLONG_MAX)
		return err_set(e, ERR_INVALID, EOVERFLOW, "display size %ux%u too large", o->width,
			       o->height);
	return 0;
}

/* A sealed memfd of `px` bytes, *memfd, mapped shared at *map. */
static int map_frame(size_t px, int *memfd, void **map, struct err *e)
{
	_cleanup_fd_ int mem = memfd_create("deskbox-capture", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mem < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating the capture memfd");
	if (ftruncate(mem, (off_t)px) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "sizing the capture memfd to %zu bytes", px);
	/* SECURITY: a bridge that shrank the file would make our reads fault
	 * (SIGBUS) and kill deskboxd; seal its size. */
	if (fcntl(mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "sealing the capture memfd");
	*map = mmap(NULL, px, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
	if (*map == MAP_FAILED)
		return err_sys(e, ERR_INTERNAL, errno, "mapping the capture memfd");
	*memfd = TAKE_FD(mem);
	return 0;
}

int capture_start(struct capture **out, const struct capture_opts *o, int vnc_fd, struct err *e)
{
	_cleanup_fd_ int vnc = vnc_fd;
	*out = NULL;
	if (!o || !o->bridge_path)
		return err_set(e, ERR_INVALID, EINVAL, "no bridge binary configured");
	int sndbuf = VNC_SNDBUF;
	if (setsockopt(vnc, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) < 0 &&
	    errno != ENOTSOCK)
		return err_sys(e, ERR_INTERNAL, errno, "sizing the vnc socket's buffer");
	size_t px = 0;
	if (frame_size(o, &px, e) < 0)
		return err_code(e);
	_cleanup_fd_ int mem = -1;
	void *map;
	if (map_frame(px, &mem, &map, e) < 0)
		return err_code(e);

	struct capture_hdr *h = map;
	h->magic = CAPTURE_MAGIC;
	h->version = CAPTURE_VERSION;
	h->width = o->width;
	h->height = o->height;
	atomic_store(&h->state, CAPTURE_CONNECTING);

	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		int r = err_sys(e, ERR_INTERNAL, errno, "creating the bridge control socket");
		munmap(map, px);
		return r;
	}
	_cleanup_fd_ int ctl = sp[0];
	_cleanup_fd_ int ctl_child = sp[1];

	struct capture *c = calloc(1, sizeof(*c));
	if (!c) {
		munmap(map, px);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	c->pid = -1;
	c->pidfd = -1;
	c->ctl = -1;
	c->map = map;
	c->map_len = px;
	c->hdr = h;
	c->width = o->width;
	c->height = o->height;
	pthread_mutex_init(&c->send_lock, NULL);
	if (capture_shots_new(&c->shots, e) < 0) {
		capture_free(c);
		return err_code(e);
	}

	char *env[5];
	bridge_env(env, sizeof(env) / sizeof(env[0]));
	pid_t pid = fork();
	if (pid < 0) {
		int r = err_sys(e, ERR_INTERNAL, errno, "forking the bridge");
		capture_free(c);
		return r;
	}
	if (pid == 0)
		child_exec(o->bridge_path, vnc, mem, ctl_child, env);
	c->pid = pid;
	/* Only we reap this child, so the pid cannot be reused before this. */
	c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (c->pidfd < 0) {
		int r = err_sys(e, ERR_INTERNAL, errno, "pidfd_open of the bridge");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		c->pid = -1;
		capture_free(c);
		return r;
	}
	c->ctl = TAKE_FD(ctl);
	*out = c;
	return 0;
}

void capture_free(struct capture *c)
{
	if (!c)
		return;
	if (c->pid > 0) {
		if (c->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (c->pidfd >= 0)
		close(c->pidfd);
	if (c->ctl >= 0)
		close(c->ctl);
	if (c->map)
		munmap(c->map, c->map_len);
	pthread_mutex_destroy(&c->send_lock);
	capture_shots_free(c->shots);
	free(c);
}

static int futex_wait(_Atomic uint32_t *addr, uint32_t val, int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	/* Shared mapping between processes: not FUTEX_PRIVATE_FLAG. */
	return (int)syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

/* Waits until `done(c, arg)` or the bridge dies or the time runs out.
 * Returns 1 when done, 0 on timeout, negative when the bridge is gone. */
static int wait_until(struct capture *c, int (*done)(struct capture *, uint64_t), uint64_t arg,
		      int timeout_ms, struct err *e)
{
	uint64_t deadline = (uint64_t)clock_mono_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	for (;;) {
		uint32_t fw = atomic_load(&c->hdr->frame_futex);
		if (done(c, arg))
			return 1;
		if (!capture_alive(c))
			return err_set(e, ERR_UNAVAILABLE, EPIPE, "the capture bridge is gone");
		uint64_t now = (uint64_t)clock_mono_ms();
		if (now >= deadline)
			return 0;
		uint64_t left = deadline - now;
		futex_wait(&c->hdr->frame_futex, fw,
			   left < WAIT_SLICE_MS ? (int)left : WAIT_SLICE_MS);
	}
}

static int is_ready(struct capture *c, uint64_t unused)
{
	return atomic_load(&c->hdr->state) == CAPTURE_READY;
}

int capture_wait_ready(struct capture *c, int timeout_ms, struct err *e)
{
	int r = wait_until(c, is_ready, 0, timeout_ms, e);
	if (r < 0)
		return err_wrap(e, "waiting for the first frame");
	if (r == 0)
		return err_set(e, ERR_TIMEOUT, ETIMEDOUT,
			       "no first frame from the vnc server in %d ms", timeout_ms);
	return 0;
}

static int frame_differs(struct capture *c, uint64_t since)
{
	return capture_frame(c) != since;
}

int capture_wait_frame(struct capture *c, uint64_t since, int timeout_ms, struct err *e)
{
	return wait_until(c, frame_differs, since, timeout_ms, e);
}

/* Marks in `rows` (r.h bytes, region-relative) the rows of strips changed
 * after frame `since` (all when `since` is 0 or too far back), then widens
 * every mark to its whole band of CAPTURE_BAND_ROWS rows.  Runs inside the
 * reader's seqlock section. */
static void mark_rows(const struct capture *c, struct capture_rect r, uint64_t since,
		      uint64_t frame, uint8_t *rows, uint8_t *band_rows)
{
	int all = since == 0 || frame - since >= (1u << 30);
	for (uint32_t y = 0; y < r.h;) {
		uint32_t s = (r.y + y) / CAPTURE_STRIP_ROWS;
		uint32_t end = (s + 1) * CAPTURE_STRIP_ROWS - r.y;
		end = end > r.h ? r.h : end;
		uint32_t sf = atomic_load_explicit(&c->hdr->strip_frame[s], memory_order_relaxed);
		int changed = all || (int32_t)(sf - (uint32_t)since) > 0;
		for (; y < end; y++)
			band_rows[y] = (uint8_t)(rows[y] | changed);
	}
	for (uint32_t y0 = 0; y0 < r.h; y0 += CAPTURE_BAND_ROWS) {
		uint32_t y1 = y0 + CAPTURE_BAND_ROWS > r.h ? r.h : y0 + CAPTURE_BAND_ROWS;
		uint8_t any = 0;
		for (uint32_t y = y0; y < y1; y++)
			any |= band_rows[y];
		if (any)
			memset(band_rows + y0, 1, y1 - y0);
	}
}

/* The seqlock reader behind capture_snapshot and capture_snapshot_since:
 * copies the rows of `r` that `copy` marks (every row when NULL). */
static int snapshot(struct capture *c, struct capture_rect r, uint8_t *dst, size_t dst_stride,
		    uint64_t since, uint8_t *rows, uint8_t *copy, uint64_t *frame, struct err *e)
{
	if (r.w == 0 || r.h == 0 || r.x >= c->width || r.y >= c->height || r.w > c->width - r.x ||
	    r.h > c->height - r.y)
		return err_set(e, ERR_INVALID, EINVAL,
			       "region %ux%u+%u+%u outside the %ux%u display", r.w, r.h, r.x, r.y,
			       c->width, c->height);
	size_t row = (size_t)r.w * 4;
	if (dst_stride < row)
		return err_set(e, ERR_INVALID, EINVAL, "destination stride %zu below %zu",
			       dst_stride, row);
	size_t src_stride = (size_t)c->width * 4;
	const uint8_t *src = c->map + CAPTURE_HDR_SIZE + (size_t)r.y * src_stride + (size_t)r.x * 4;
	for (int i = 0; i < SNAPSHOT_TRIES; i++) {
		uint64_t s1 = atomic_load_explicit(&c->hdr->seq, memory_order_acquire);
		if (s1 & 1) {
			if (i > 16) {
				clock_sleep_us(50);
			} else {
				sched_yield();
			}
			continue;
		}
		uint64_t f = atomic_load_explicit(&c->hdr->frame, memory_order_relaxed);
		if (copy)
			mark_rows(c, r, since, f, rows, copy);
		for (uint32_t y = 0; y < r.h; y++)
			if (!copy || copy[y])
				memcpy(dst + (size_t)y * dst_stride, src + (size_t)y * src_stride,
				       row);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&c->hdr->seq, memory_order_relaxed) == s1) {
			if (frame)
				*frame = f;
			return 0;
		}
	}
	return err_set(e, ERR_UNAVAILABLE, EAGAIN, "the framebuffer did not settle after %d tries",
		       SNAPSHOT_TRIES);
}

int capture_snapshot(struct capture *c, struct capture_rect r, uint8_t *dst, size_t dst_stride,
		     uint64_t *frame, struct err *e)
{
	return snapshot(c, r, dst, dst_stride, 0, NULL, NULL, frame, e);
}

int capture_snapshot_since(struct capture *c, struct capture_rect r, uint8_t *dst,
			   size_t dst_stride, uint64_t since, uint8_t *rows, uint64_t *frame,
			   struct err *e)
{
	if (r.h == 0 || r.h > c->height)
		return snapshot(c, r, dst, dst_stride, since, rows, NULL, frame, e);
	uint8_t *copy = malloc(r.h);
	if (!copy)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int ret = snapshot(c, r, dst, dst_stride, since, rows, copy, frame, e);
	if (ret == 0)
		memcpy(rows, copy, r.h);
	free(copy);
	return ret;
}

/* Receives acks until the one for `seq`.  Returns 0, or negative. */
static int wait_ack(struct capture *c, uint32_t seq, struct err *e)
{
	uint64_t start = (uint64_t)clock_mono_ms();
	uint64_t deadline = start + SEND_ACK_TIMEOUT_MS, last = start + SEND_MAX_MS;
	for (;;) {
		uint64_t now = (uint64_t)clock_mono_ms();
		if (now >= deadline && deadline == last)
			return err_set(e, ERR_TIMEOUT, ETIMEDOUT,
				       "the vnc server took input for %d ms without catching up",
				       SEND_MAX_MS);
		if (now >= deadline)
			return err_set(e, ERR_TIMEOUT, ETIMEDOUT,
				       "the capture bridge did not take input in %d ms",
				       SEND_ACK_TIMEOUT_MS);
		struct pollfd p = {.fd = c->ctl, .events = POLLIN};
		int n = poll(&p, 1, (int)(deadline - now));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_sys(e, ERR_INTERNAL, errno, "waiting for the capture bridge");
		if (n == 0)
			continue;
		struct capture_ack ack;
		ssize_t got = recv(c->ctl, &ack, sizeof(ack), MSG_DONTWAIT);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			return err_sys(e, ERR_UNAVAILABLE, errno,
				       "reading from the capture bridge");
		if (got == 0)
			return err_set(e, ERR_UNAVAILABLE, EPIPE, "the capture bridge is gone");
		if (got != (ssize_t)sizeof(ack) || ack.magic != CAPTURE_ACK_MAGIC)
			return err_set(e, ERR_INTERNAL, EPROTO,
				       "malformed reply from the capture bridge");
		/* An ack for an earlier message that timed out: skip it. */
		if (ack.seq != seq)
			continue;
		if (ack.status == CAPTURE_ACK_PROGRESS) {
			deadline =
			    now + SEND_ACK_TIMEOUT_MS < last ? now + SEND_ACK_TIMEOUT_MS : last;
			continue;
		}
		if (ack.status != 0)
			return err_set(e, ERR_UNAVAILABLE, EPIPE,
				       "the vnc server connection failed");
		return 0;
	}
}

int capture_send(struct capture *c, const struct input_event *ev, size_t n, struct err *e)
{
	pthread_mutex_lock(&c->send_lock);
	int r = 0;
	for (size_t off = 0; r == 0 && off < n;) {
		if (ev[off].type == INPUT_PAUSE) {
			int ms = ev[off].x;
			if (ms > 0)
				clock_sleep_ms(ms > INPUT_PAUSE_MAX_MS ? INPUT_PAUSE_MAX_MS : ms);
			off++;
			continue;
		}
		size_t k = 0;
		while (off + k < n && k < CAPTURE_MSG_EVENTS && ev[off + k].type != INPUT_PAUSE)
			k++;
		struct capture_msg msg = {
		    .magic = CAPTURE_MSG_MAGIC, .seq = ++c->send_seq, .n = (uint32_t)k};
		struct iovec iov[2] = {{&msg, sizeof(msg)}, {(void *)(ev + off), k * sizeof(*ev)}};
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
		ssize_t w = sendmsg(c->ctl, &mh, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			r = err_sys(e, ERR_UNAVAILABLE, errno,
				    "sending input to the capture bridge");
			break;
		}
		r = wait_ack(c, msg.seq, e);
		off += k;
	}
	pthread_mutex_unlock(&c->send_lock);
	return r;
}

int capture_cursor(struct capture *c, uint8_t *dst, uint32_t *w, uint32_t *h, int32_t *hot_x,
		   int32_t *hot_y, uint64_t *serial)
{
	const uint8_t *src = c->map + c->map_len - CAPTURE_CURSOR_SIZE;
	for (int i = 0; i < SNAPSHOT_TRIES; i++) {
		uint64_t s1 = atomic_load_explicit(&c->hdr->cursor_seq, memory_order_acquire);
		if (s1 & 1) {
			sched_yield();
			continue;
		}
		uint32_t cw = atomic_load_explicit(&c->hdr->cursor_w, memory_order_relaxed);
		uint32_t ch = atomic_load_explicit(&c->hdr->cursor_h, memory_order_relaxed);
		int32_t hx = atomic_load_explicit(&c->hdr->cursor_hot_x, memory_order_relaxed);
		int32_t hy = atomic_load_explicit(&c->hdr->cursor_hot_y, memory_order_relaxed);
		/* SECURITY: the bridge wrote these; the copy below must stay
		 * inside the cursor area and `dst`. */
		if (cw == 0 || ch == 0 || cw > CAPTURE_CURSOR_MAX || ch > CAPTURE_CURSOR_MAX)
			return 0;
		memcpy(dst, src, (size_t)cw * ch * 4);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&c->hdr->cursor_seq, memory_order_relaxed) != s1)
			continue;
		*w = cw;
		*h = ch;
		*hot_x = hx < 0 ? 0 : hx >= (int32_t)cw ? (int32_t)cw - 1 : hx;
		*hot_y = hy < 0 ? 0 : hy >= (int32_t)ch ? (int32_t)ch - 1 : hy;
		if (serial)
			*serial = s1;
		return 1;
	}
	return 0;
}
