/* The bridge never waits for the VNC server while the server waits for it.
 * This test plays a VNC server that behaves like deskbox-vnc and x11vnc
 * (single-threaded): it writes a framebuffer update far larger than the
 * socket holds and reads nothing until the whole update is out, while
 * deskboxd sends the bridge 40000 key events.  A bridge that blocked on
 * writing those events and stopped reading deadlocked with such a server
 * (type_text's 504 "the capture bridge did not take input in 5000 ms");
 * it must read the update meanwhile, then every event must arrive, in
 * order.  And a server that reads slowly but steadily is waited for, even
 * when a message waits longer than deskboxd's 5 s for room in the socket.
 * Needs no X server. */
#include <errno.h>
#include <limits.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "capture/capture.h"
#include "common/clock.h"
#include "tests/harness.h"

#define W	 64
#define H	 32
#define RECTS	 200 /* one update of RECTS full-screen raw rectangles: 1.6 MB */
#define N_EVENTS 40000

static char bridge[PATH_MAX];

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int send_all(int fd, const void *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

static int recv_all(int fd, void *p, size_t n)
{
	size_t got = 0;
	long long deadline = clock_mono_ms() + 5000;
	while (got < n) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		long long left = deadline - clock_mono_ms();
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			return -1;
		ssize_t r = recv(fd, (char *)p + got, n - got, 0);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* RFB 3.8 up to and including ServerInit. */
static int server_handshake(int srv)
{
	uint8_t ver[12], sec[2] = {1, 1}, choice, shared, ok32[4] = {0};
	if (send_all(srv, "RFB 003.008\n", 12) < 0 || recv_all(srv, ver, 12) < 0 ||
	    send_all(srv, sec, 2) < 0 || recv_all(srv, &choice, 1) < 0 || choice != 1 ||
	    send_all(srv, ok32, 4) < 0 || recv_all(srv, &shared, 1) < 0)
		return -1;
	uint8_t init[24 + 4] = {0};
	put16(init, W);
	put16(init + 2, H);
	const uint8_t pf[16] = {32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0};
	memcpy(init + 4, pf, sizeof(pf));
	put32(init + 20, 4);
	memcpy(init + 24, "test", 4);
	return send_all(srv, init, sizeof(init));
}

/* A FramebufferUpdate of `rects` full-screen raw rectangles, the last one
 * of colour `last` (B, G, R), the others grey. */
static uint8_t *make_update(int rects, const char *last, size_t *len)
{
	size_t rect = 12 + (size_t)W * H * 4;
	*len = 4 + (size_t)rects * rect;
	uint8_t *m = calloc(1, *len);
	if (!m)
		return NULL;
	put16(m + 2, (unsigned)rects);
	for (int r = 0; r < rects; r++) {
		uint8_t *p = m + 4 + (size_t)r * rect;
		put16(p + 4, W);
		put16(p + 6, H);
		for (size_t i = 0; i < (size_t)W * H; i++)
			memcpy(p + 12 + i * 4, r == rects - 1 ? last : "\x80\x80\x80", 3);
	}
	return m;
}

/* The server's reading side: parses the client's messages, counting key
 * presses and checking their keysyms come in order. */
struct reader {
	int fd;
	uint8_t buf[1 << 16];
	size_t have;
	int presses, misordered, bad;
};

/* Handles the complete messages in r->buf; returns bytes used. */
static size_t parse(struct reader *r)
{
	size_t off = 0;
	for (;;) {
		size_t left = r->have - off, need;
		if (left < 1)
			break;
		const uint8_t *m = r->buf + off;
		switch (m[0]) {
		case 0:
			need = 20;
			break; /* SetPixelFormat */
		case 2:
			need = left >= 4 ? 4 + 4 * (size_t)(m[2] << 8 | m[3]) : 4;
			break;
		case 3:
			need = 10;
			break; /* FramebufferUpdateRequest */
		case 4:
			need = 8;
			break; /* KeyEvent */
		case 5:
			need = 6;
			break; /* PointerEvent */
		default:
			r->bad++;
			return r->have;
		}
		if (left < need)
			break;
		if (m[0] == 4 && m[1]) {
			if (get32(m + 4) != 0x20 + (uint32_t)(r->presses % 90))
				r->misordered++;
			r->presses++;
		}
		off += need;
	}
	return off;
}

static int read_some(struct reader *r, int ms)
{
	struct pollfd pf = {.fd = r->fd, .events = POLLIN};
	if (poll(&pf, 1, ms) <= 0)
		return 0;
	ssize_t n = recv(r->fd, r->buf + r->have, sizeof(r->buf) - r->have, 0);
	if (n <= 0)
		return -1;
	r->have += (size_t)n;
	size_t used = parse(r);
	memmove(r->buf, r->buf + used, r->have - used);
	r->have -= used;
	return 1;
}

/* The single-threaded server: writes the whole update (reading nothing
 * meanwhile), then reads until every key press arrived. */
struct server {
	struct reader rd;
	const uint8_t *update;
	size_t update_len;
	int wrote;	    /* the update went out */
	long long write_ms; /* how long that took */
};

static void *serve(void *arg)
{
	struct server *s = arg;
	long long t0 = clock_mono_ms();
	s->wrote = send_all(s->rd.fd, s->update, s->update_len) == 0;
	s->write_ms = clock_mono_ms() - t0;
	long long deadline = clock_mono_ms() + 20000;
	while (s->rd.presses < N_EVENTS / 2 && clock_mono_ms() < deadline)
		if (read_some(&s->rd, 100) < 0)
			break;
	return NULL;
}

static void test_no_deadlock(void)
{
	int sp[2];
	if (!ok(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0, "socketpair"))
		return;
	struct capture *c = NULL;
	struct err e = ERR_INIT;
	struct capture_opts o = {.bridge_path = bridge, .width = W, .height = H};
	if (!ok(capture_start(&c, &o, sp[1], &e) == 0, "bridge started")) {
		printf("# %s\n", e.msg);
		return;
	}
	int srv = sp[0];
	/* A stuck write must not hang the test: it fails after 8 s. */
	struct timeval tv = {.tv_sec = 8};
	setsockopt(srv, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	size_t first_len, big_len;
	uint8_t *first = make_update(1, "\x80\x80\x80", &first_len);
	uint8_t *big = make_update(RECTS, "\x99\x66\x33", &big_len);
	int r = server_handshake(srv) == 0 && send_all(srv, first, first_len) == 0 &&
		capture_wait_ready(c, 5000, &e) == 0;
	ok(r, "handshake and first frame");
	if (!r)
		goto out;

	struct input_event *ev = calloc(N_EVENTS, sizeof(*ev));
	for (int i = 0; i < N_EVENTS; i++)
		ev[i] = (struct input_event){
		    .type = INPUT_KEY, .down = !(i & 1), .keysym = 0x20 + (uint32_t)((i / 2) % 90)};
	struct server s = {.rd = {.fd = srv}, .update = big, .update_len = big_len};
	pthread_t th;
	pthread_create(&th, NULL, serve, &s);
	long long t0 = clock_mono_ms();
	r = capture_send(c, ev, N_EVENTS, &e);
	long long send_ms = clock_mono_ms() - t0;
	pthread_join(th, NULL);
	char title[160];
	snprintf(title, sizeof(title),
		 "%d key events sent while the server wrote a %zu KB update without reading "
		 "(%lld ms)",
		 N_EVENTS, big_len / 1024, send_ms);
	if (!ok(r == 0, title))
		printf("# %s\n", e.msg);
	snprintf(title, sizeof(title),
		 "the server's update went out, the bridge reading it (%lld ms)", s.write_ms);
	ok(s.wrote, title);
	is_int(s.rd.presses, N_EVENTS / 2, "every key press reached the server");
	is_int(s.rd.misordered + s.rd.bad, 0, "in order, in well-formed messages");
	uint8_t px[4] = {0};
	ok(capture_wait_frame(c, 1, 5000, &e) >= 0 &&
	       capture_snapshot(c, (struct capture_rect){0, 0, 1, 1}, px, 4, NULL, &e) == 0 &&
	       memcmp(px, "\x99\x66\x33", 3) == 0,
	   "the update's last rectangle is mirrored");
	ok(capture_alive(c), "the bridge is alive");
	free(ev);
out:
	free(first);
	free(big);
	capture_free(c);
	close(srv);
}

/* A server that reads, but slowly (SLOW_BYTES every 100 ms): the last of
 * SLOW_EVENTS events waits longer than deskboxd's 5 s for room in the
 * socket, and must arrive anyway (the bridge's progress notes say the
 * server is reading). */
#define SLOW_EVENTS 2048
#define SLOW_BYTES  150

struct slow {
	struct reader rd;
	int stop;
};

static void *serve_slowly(void *arg)
{
	struct slow *s = arg;
	long long deadline = clock_mono_ms() + 30000;
	while (!s->stop && s->rd.presses < SLOW_EVENTS / 2 && clock_mono_ms() < deadline) {
		clock_sleep_ms(100);
		ssize_t n = recv(s->rd.fd, s->rd.buf + s->rd.have, SLOW_BYTES, MSG_DONTWAIT);
		if (n == 0)
			break;
		if (n < 0)
			continue;
		s->rd.have += (size_t)n;
		size_t used = parse(&s->rd);
		memmove(s->rd.buf, s->rd.buf + used, s->rd.have - used);
		s->rd.have -= used;
	}
	return NULL;
}

static void test_slow_server(void)
{
	int sp[2];
	if (!ok(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0, "socketpair"))
		return;
	struct capture *c = NULL;
	struct err e = ERR_INIT;
	struct capture_opts o = {.bridge_path = bridge, .width = W, .height = H};
	if (!ok(capture_start(&c, &o, sp[1], &e) == 0, "bridge started")) {
		printf("# %s\n", e.msg);
		return;
	}
	int srv = sp[0];
	size_t first_len;
	uint8_t *first = make_update(1, "\x80\x80\x80", &first_len);
	int r = server_handshake(srv) == 0 && send_all(srv, first, first_len) == 0 &&
		capture_wait_ready(c, 5000, &e) == 0;
	ok(r, "handshake and first frame");
	struct input_event *ev = calloc(SLOW_EVENTS, sizeof(*ev));
	for (int i = 0; r && i < SLOW_EVENTS; i++)
		ev[i] = (struct input_event){
		    .type = INPUT_KEY, .down = !(i & 1), .keysym = 0x20 + (uint32_t)((i / 2) % 90)};
	struct slow s = {.rd = {.fd = srv}};
	pthread_t th;
	if (r) {
		pthread_create(&th, NULL, serve_slowly, &s);
		long long t0 = clock_mono_ms();
		r = capture_send(c, ev, SLOW_EVENTS, &e);
		long long ms = clock_mono_ms() - t0;
		char title[160];
		snprintf(title, sizeof(title),
			 "%d events to a server reading %d bytes every 100 ms: sent (%lld ms)",
			 SLOW_EVENTS, SLOW_BYTES, ms);
		if (!ok(r == 0, title))
			printf("# %s\n", e.msg);
		if (r != 0)
			s.stop = 1;
		pthread_join(th, NULL);
		is_int(s.rd.presses, SLOW_EVENTS / 2, "every key press reached the slow server");
		is_int(s.rd.misordered + s.rd.bad, 0, "in order");
	}
	free(ev);
	free(first);
	capture_free(c);
	close(srv);
}

int main(int argc, char **argv)
{
	const char *build = getenv("BUILD");
	char self[PATH_MAX];
	snprintf(self, sizeof(self), "%s", argv[0]);
	if (build)
		snprintf(bridge, sizeof(bridge), "%s/deskbox-bridge", build);
	else
		snprintf(bridge, sizeof(bridge), "%s/../deskbox-bridge", dirname(self));
	if (access(bridge, X_OK) != 0)
		skip_all("deskbox-bridge not built next to the test (set BUILD)");
	signal(SIGPIPE, SIG_IGN);
	test_no_deadlock();
	test_slow_server();
	return done();
}
