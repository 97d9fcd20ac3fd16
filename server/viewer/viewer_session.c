/* One browser viewer: a WebSocket on one side, its own connection to the
 * sandbox's VNC server on the other, bytes piped both ways.  Server-to-client
 * bytes are never parsed; client-to-server bytes of a view-only viewer go
 * through the RFB filter (vnc_rfb.h).
 *
 * Both sockets are non-blocking and served by one poll() loop on the
 * connection's own thread.  The VNC side is always read promptly so the
 * sandbox's x11vnc (single-threaded: a blocked write to one client stalls
 * all of them, the screen mirror included) never waits on a slow browser;
 * a browser that falls VNC_OUT_MAX behind, or takes no bytes for
 * VNC_STALL_MS, is dropped instead. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "viewer.h"
#include "internal.h"
#include "common/websocket.h"

/* SECURITY: per-viewer memory bounds. */
#define VNC_OUT_MAX   (32u << 20)  /* framebuffer updates queued for the browser */
#define VNC_IN_MAX    (256u << 10) /* client bytes queued for the VNC server */
#define VNC_CHUNK     (64u << 10)
#define VNC_STALL_MS  30000 /* a browser that takes nothing for this long */
#define VNC_SILENT_MS 90000 /* a browser that says nothing (not even pong) */
#define VNC_PING_MS   30000
#define VNC_LINGER_MS 2000 /* flushing the last bytes and the close frame */

/* libvncserver (x11vnc) waits up to 100 ms for a new client to speak first,
 * to tell its own WebSocket clients from plain RFB ones, before it sends
 * its ProtocolVersion.  An RFB client's first bytes are always "RFB ", so
 * they are sent ahead at connect (the server only peeks at them and reads
 * them later as part of the client's version) and dropped from what the
 * client then sends, after checking they are what was promised. */
#define RFB_AHEAD "RFB "

/* A byte queue with a hard cap. */
struct bq {
	unsigned char *d;
	size_t start, len, cap, max;
};

static int bq_reserve(struct bq *q, size_t n)
{
	if (n > q->max - q->len)
		return -1;
	if (q->start + q->len + n <= q->cap)
		return 0;
	if (q->start) {
		memmove(q->d, q->d + q->start, q->len);
		q->start = 0;
		if (q->len + n <= q->cap)
			return 0;
	}
	size_t cap = q->cap ? q->cap : VNC_CHUNK;
	while (cap < q->len + n)
		cap *= 2;
	if (cap > q->max)
		cap = q->max;
	unsigned char *nd = realloc(q->d, cap);
	if (!nd)
		return -1;
	q->d = nd;
	q->cap = cap;
	return 0;
}

static int bq_push(struct bq *q, const void *p, size_t n)
{
	if (bq_reserve(q, n) < 0)
		return -1;
	memcpy(q->d + q->start + q->len, p, n);
	q->len += n;
	return 0;
}

static void bq_pop(struct bq *q, size_t n)
{
	q->start += n;
	q->len -= n;
	if (!q->len)
		q->start = 0;
}

/* Writes what it can; -1 on a dead peer. */
static int bq_flush(struct bq *q, int fd, long long *progress_ms)
{
	while (q->len) {
		ssize_t w = send(fd, q->d + q->start, q->len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		}
		bq_pop(q, (size_t)w);
		if (progress_ms)
			*progress_ms = clock_mono_ms();
	}
	return 0;
}

struct session {
	const struct vnc_session_opts *o;
	struct bq to_client, to_vnc;
	struct ws_parser ws;
	struct rfb_filter filter;
	unsigned char filtered[VNC_CHUNK + RFB_FILTER_SLACK];
	size_t ahead;	   /* bytes of RFB_AHEAD the client has confirmed */
	int close_code;	   /* a close frame to send, 0: none */
	int client_closed; /* the client sent its close frame */
	long long last_in_ms, last_out_ms, next_ping_ms;
	const char *why;
};

static int queue_frame(struct session *s, int opcode, const void *p, size_t n)
{
	unsigned char hdr[WS_MAX_HEADER];
	size_t hl = ws_frame_header(hdr, opcode, n);
	if (bq_push(&s->to_client, hdr, hl) < 0 || bq_push(&s->to_client, p, n) < 0) {
		s->why = "browser too slow (output queue full)";
		return -1;
	}
	return 0;
}

static void queue_close(struct session *s, int code)
{
	if (s->close_code)
		return;
	s->close_code = code;
	unsigned char b[2] = {(unsigned char)(code >> 8), (unsigned char)code};
	/* Past the cap the connection just ends without a close frame. */
	queue_frame(s, WS_OP_CLOSE, b, sizeof(b));
}

/* Queues client bytes for the VNC server, minus the "RFB " sent ahead. */
static int to_vnc(struct session *s, const unsigned char *p, size_t n)
{
	while (n && s->ahead < sizeof(RFB_AHEAD) - 1) {
		if (*p != (unsigned char)RFB_AHEAD[s->ahead]) {
			s->why = "client did not start with an RFB ProtocolVersion";
			queue_close(s, WS_CLOSE_PROTOCOL);
			return -1;
		}
		s->ahead++;
		p++;
		n--;
	}
	if (bq_push(&s->to_vnc, p, n) < 0) {
		s->why = "client input queue full";
		return -1;
	}
	return 0;
}

static int on_data(void *cls, const unsigned char *p, size_t n)
{
	struct session *s = cls;
	if (!s->o->view_only)
		return to_vnc(s, p, n);
	while (n) {
		size_t take = n > VNC_CHUNK ? VNC_CHUNK : n;
		long k = rfb_filter_feed(&s->filter, p, take, s->filtered);
		if (k < 0) {
			s->why = "view-only viewer sent a message that is not allowed";
			queue_close(s, WS_CLOSE_POLICY);
			return -1;
		}
		if (to_vnc(s, s->filtered, (size_t)k) < 0)
			return -1;
		p += take;
		n -= take;
	}
	return 0;
}

static int on_control(void *cls, int opcode, const unsigned char *p, size_t n)
{
	struct session *s = cls;
	if (opcode == WS_OP_PING)
		return queue_frame(s, WS_OP_PONG, p, n);
	if (opcode == WS_OP_CLOSE) {
		s->client_closed = 1;
		s->why = "browser closed the connection";
		/* Echo the status code (RFC 6455 5.5.1). */
		int code = n >= 2 ? (p[0] << 8 | p[1]) : WS_CLOSE_NORMAL;
		queue_close(s,
			    code == 1005 || code == 1006 || code == 1015 ? WS_CLOSE_NORMAL : code);
		return -1;
	}
	return 0; /* pong: last_in_ms already moved */
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Feeds client bytes through the WebSocket parser; -1 ends the session. */
static int client_bytes(struct session *s, unsigned char *buf, size_t n)
{
	struct ws_handler h = {on_data, on_control, s, NULL, NULL};
	int code = 0;
	int r = ws_parse(&s->ws, buf, n, &h, &code);
	if (r == WS_ERR_PROTOCOL) {
		s->why = "WebSocket protocol error";
		queue_close(s, code);
	}
	return r < 0 ? -1 : 0;
}

/* Sends what is queued for the browser for at most VNC_LINGER_MS. */
static void linger(struct session *s)
{
	long long deadline = clock_mono_ms() + VNC_LINGER_MS;
	while (s->to_client.len) {
		if (bq_flush(&s->to_client, s->o->ws_fd, NULL) < 0)
			return;
		long long left = deadline - clock_mono_ms();
		if (!s->to_client.len || left <= 0)
			return;
		struct pollfd p = {s->o->ws_fd, POLLOUT, 0};
		poll(&p, 1, (int)left);
	}
}

/* The session's state for `o`, both sockets made non-blocking; NULL when
 * out of memory. */
static struct session *session_new(const struct vnc_session_opts *o)
{
	struct session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->o = o;
	s->to_client.max = VNC_OUT_MAX;
	s->to_vnc.max = VNC_IN_MAX;
	ws_parser_init(&s->ws);
	rfb_filter_init(&s->filter);
	set_nonblock(o->ws_fd);
	set_nonblock(o->vnc_fd);
	/* RFB is many small request/answer messages: no Nagle delay on them
	 * (fails harmlessly on a non-TCP socket). */
	int one = 1;
	setsockopt(o->ws_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	long long now = clock_mono_ms();
	s->last_in_ms = s->last_out_ms = now;
	s->next_ping_ms = now + VNC_PING_MS;
	return s;
}

/* Client bytes read along with the upgrade request, through `buf`. */
static int client_extra(struct session *s, unsigned char *buf)
{
	const struct vnc_session_opts *o = s->o;
	/* SECURITY: bounded by MHD's connection memory limit. */
	size_t n = o->extra_len;
	while (n) {
		size_t take = n > VNC_CHUNK ? VNC_CHUNK : n;
		memcpy(buf, o->extra + (o->extra_len - n), take);
		if (client_bytes(s, buf, take) < 0)
			return -1;
		n -= take;
	}
	return 0;
}

/* The session's clocks at `now`: the token's expiry, a stalled or silent
 * browser, the keep-alive ping.  -1 ends the session. */
static int session_timers(struct session *s, long long now)
{
	const struct vnc_session_opts *o = s->o;
	if (o->expires_at && (long long)time(NULL) >= o->expires_at) {
		s->why = "viewer token expired";
		queue_close(s, WS_CLOSE_POLICY);
		return -1;
	}
	if (s->to_client.len && now - s->last_out_ms > VNC_STALL_MS) {
		s->why = "browser took no data for 30 s";
		return -1;
	}
	if (now - s->last_in_ms > VNC_SILENT_MS) {
		s->why = "browser silent for 90 s";
		return -1;
	}
	if (now >= s->next_ping_ms) {
		if (queue_frame(s, WS_OP_PING, "", 0) < 0)
			return -1;
		s->next_ping_ms = now + VNC_PING_MS;
	}
	if (!s->to_client.len)
		s->last_out_ms = now;
	return 0;
}

/* Waits on both sockets (reading the browser only while the VNC queue has
 * room, writing where bytes are queued) and the stop fd, until the next
 * ping, the token's expiry or 1 s.  poll()'s result. */
static int session_poll(struct session *s, long long now, struct pollfd p[3])
{
	const struct vnc_session_opts *o = s->o;
	p[0] = (struct pollfd){o->ws_fd,
			       (short)((s->to_vnc.len < VNC_IN_MAX / 2 ? POLLIN : 0) |
				       (s->to_client.len ? POLLOUT : 0)),
			       0};
	p[1] = (struct pollfd){o->vnc_fd, (short)(POLLIN | (s->to_vnc.len ? POLLOUT : 0)), 0};
	p[2] = (struct pollfd){o->stop_fd, POLLIN, 0};
	long long wait = s->next_ping_ms - now;
	if (o->expires_at) {
		long long exp_ms = (o->expires_at - (long long)time(NULL)) * 1000;
		if (exp_ms < wait)
			wait = exp_ms < 0 ? 0 : exp_ms;
	}
	return poll(p, o->stop_fd >= 0 ? 3 : 2, (int)(wait > 1000 ? 1000 : wait));
}

/* Reads from the VNC server into the browser's queue.  -1 ends the
 * session. */
static int from_vnc(struct session *s, unsigned char *buf)
{
	ssize_t n = recv(s->o->vnc_fd, buf, VNC_CHUNK, MSG_DONTWAIT);
	if (n > 0)
		return queue_frame(s, WS_OP_BINARY, buf, (size_t)n) < 0 ? -1 : 0;
	if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		/* x11vnc went away (restarted, or the sandbox stopped): the
		 * page reconnects. */
		s->why = "the sandbox's VNC server closed the connection";
		queue_close(s, WS_CLOSE_GOING_AWAY);
		return -1;
	}
	return 0;
}

/* Reads from the browser through the WebSocket parser.  -1 ends the
 * session. */
static int from_browser(struct session *s, unsigned char *buf)
{
	ssize_t n = recv(s->o->ws_fd, buf, VNC_CHUNK, MSG_DONTWAIT);
	if (n > 0) {
		s->last_in_ms = clock_mono_ms();
		return client_bytes(s, buf, (size_t)n);
	}
	if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		s->why = "browser went away";
		return -1;
	}
	return 0;
}

/* Serves what poll() reported: a revoked token, bytes from either side;
 * then writes what is queued both ways.  -1 ends the session. */
static int session_io(struct session *s, const struct pollfd p[3], unsigned char *buf)
{
	const struct vnc_session_opts *o = s->o;
	if (o->stop_fd >= 0 && (p[2].revents & POLLIN)) {
		s->why = "viewer token revoked";
		queue_close(s, WS_CLOSE_POLICY);
		return -1;
	}
	if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && from_vnc(s, buf) < 0)
		return -1;
	if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && from_browser(s, buf) < 0)
		return -1;
	if (bq_flush(&s->to_vnc, o->vnc_fd, NULL) < 0) {
		s->why = "the sandbox's VNC server closed the connection";
		queue_close(s, WS_CLOSE_GOING_AWAY);
		return -1;
	}
	if (bq_flush(&s->to_client, o->ws_fd, &s->last_out_ms) < 0) {
		s->why = "browser went away";
		return -1;
	}
	return 0;
}

/* Logs why the session ended and frees it. */
static void session_free(struct session *s)
{
	const struct vnc_session_opts *o = s->o;
	if (s->filter.dropped)
		log_msg(LOG_LEVEL_INFO, "sandbox %s: viewer: dropped %llu input messages", o->sid,
			(unsigned long long)s->filter.dropped);
	if (s->filter.refused_type >= 0)
		log_msg(LOG_LEVEL_INFO, "sandbox %s: view-only viewer sent RFB message type %d",
			o->sid, s->filter.refused_type);
	if (s->why)
		log_msg(LOG_LEVEL_INFO, "sandbox %s: viewer disconnected: %s", o->sid, s->why);
	free(s->to_client.d);
	free(s->to_vnc.d);
	free(s);
}

void vnc_session_run(const struct vnc_session_opts *o)
{
	struct session *s = session_new(o);
	if (!s)
		return;
	unsigned char *buf = malloc(VNC_CHUNK);
	if (!buf || bq_push(&s->to_vnc, RFB_AHEAD, sizeof(RFB_AHEAD) - 1) < 0 ||
	    client_extra(s, buf) < 0)
		goto out;
	for (;;) {
		long long now = clock_mono_ms();
		struct pollfd p[3];
		if (session_timers(s, now) < 0)
			break;
		if (session_poll(s, now, p) < 0) {
			if (errno == EINTR)
				continue;
			s->why = "poll failed";
			break;
		}
		if (session_io(s, p, buf) < 0)
			break;
	}
	/* Let go of the VNC server first: lingering must never leave x11vnc
	 * blocked on this viewer.  The close frame is worth waiting for only
	 * behind a short queue (not behind a slow reader's backlog). */
	shutdown(o->vnc_fd, SHUT_RDWR);
	if (s->to_client.len <= 2 * VNC_CHUNK)
		linger(s);
out:
	free(buf);
	session_free(s);
}
