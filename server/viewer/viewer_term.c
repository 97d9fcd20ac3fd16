/* One client of a terminal over a WebSocket (docs/terminals.md): binary
 * frames carry bytes both ways (the program's output; keystrokes), text
 * frames carry JSON control messages.  From the client:
 *   {"type":"resize","cols":C,"rows":R}
 * From the server:
 *   {"type":"lost","bytes":N}      output that fell out of the replay ring
 *                                  before this client read it
 *   {"type":"exit","exit_code":N}  the program ended (then a close 1000)
 * A view-only client's input and resizes are dropped.
 *
 * One poll() loop on the connection's thread; output is read from the
 * terminal only while the queue toward the browser is short, so a slow
 * browser costs bounded memory and the program never waits for it. */
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

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/websocket.h"
#include "viewer.h"

#define TERM_CHUNK	(32u << 10)
#define TERM_OUT_LOW	(64u << 10) /* read the terminal while less is queued */
#define TERM_OUT_MAX	(TERM_OUT_LOW + TERM_CHUNK + 256)
#define TERM_TEXT_MAX	512 /* a control message */
#define TERM_PING_MS	30000
#define TERM_SILENT_MS	90000
#define TERM_INPUT_WAIT 5000 /* for a program that reads no input */
#define TERM_SIZE_MAX	1000

struct tsession {
	const struct vnc_term_session_opts *o;
	unsigned char *out; /* to the browser */
	size_t out_len;
	struct ws_parser ws;
	char text[TERM_TEXT_MAX + 1];
	size_t text_len;
	int text_over;
	uint64_t lost, lost_told;
	int closing;
	long long last_in_ms, next_ping_ms;
	const char *why;
};

static int queue(struct tsession *s, int opcode, const void *p, size_t n)
{
	unsigned char hdr[WS_MAX_HEADER];
	size_t hl = ws_frame_header(hdr, opcode, n);
	if (s->out_len + hl + n > TERM_OUT_MAX) {
		s->why = "browser too slow";
		return -1;
	}
	memcpy(s->out + s->out_len, hdr, hl);
	memcpy(s->out + s->out_len + hl, p, n);
	s->out_len += hl + n;
	return 0;
}

static void queue_close(struct tsession *s, int code)
{
	if (s->closing)
		return;
	s->closing = 1;
	unsigned char b[2] = {(unsigned char)(code >> 8), (unsigned char)code};
	queue(s, WS_OP_CLOSE, b, 2);
}

/* {"type":type, key:v} */
static int queue_json(struct tsession *s, const char *type, const char *key, long long v)
{
	char buf[128];
	int n = snprintf(buf, sizeof(buf), "{\"type\":\"%s\",\"%s\":%lld}", type, key, v);
	return queue(s, WS_OP_TEXT, buf, (size_t)n);
}

static int on_data(void *cls, const unsigned char *p, size_t n)
{
	struct tsession *s = cls;
	if (s->o->view_only)
		return 0;
	struct err e = ERR_INIT;
	if (process_term_write(s->o->client, p, n, TERM_INPUT_WAIT, &e) < 0) {
		s->why = "the terminal takes no input";
		queue_close(s, WS_CLOSE_GOING_AWAY);
		return -1;
	}
	return 0;
}

/* A complete control message: only resize is known; others are ignored so
 * that newer clients still work. */
static int on_message(struct tsession *s)
{
	cJSON *j = cJSON_ParseWithLength(s->text, s->text_len);
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
	const cJSON *cols = cJSON_GetObjectItemCaseSensitive(j, "cols");
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "rows");
	int rc = 0;
	if (!j || !cJSON_IsString(type)) {
		s->why = "a text message that is not a JSON control message";
		queue_close(s, 1007);
		rc = -1;
	} else if (strcmp(type->valuestring, "resize") == 0 && !s->o->view_only) {
		if (!cJSON_IsNumber(cols) || !cJSON_IsNumber(rows) || cols->valuedouble < 1 ||
		    rows->valuedouble < 1 || cols->valuedouble > TERM_SIZE_MAX ||
		    rows->valuedouble > TERM_SIZE_MAX) {
			s->why = "a resize without cols and rows in 1..1000";
			queue_close(s, 1007);
			rc = -1;
		} else {
			struct err e = ERR_INIT;
			process_term_resize(s->o->client, (unsigned)cols->valuedouble,
					    (unsigned)rows->valuedouble, &e);
		}
	}
	cJSON_Delete(j);
	return rc;
}

static int on_text(void *cls, const unsigned char *p, size_t n, int end)
{
	struct tsession *s = cls;
	if (!end) {
		if (n > TERM_TEXT_MAX - s->text_len) {
			s->why = "a control message over 512 bytes";
			queue_close(s, 1009);
			return -1;
		}
		memcpy(s->text + s->text_len, p, n);
		s->text_len += n;
		return 0;
	}
	int rc = on_message(s);
	s->text_len = 0;
	return rc;
}

static int on_control(void *cls, int opcode, const unsigned char *p, size_t n)
{
	struct tsession *s = cls;
	if (opcode == WS_OP_PING)
		return queue(s, WS_OP_PONG, p, n);
	if (opcode == WS_OP_CLOSE) {
		s->why = NULL; /* an ordinary end */
		int code = n >= 2 ? (p[0] << 8 | p[1]) : WS_CLOSE_NORMAL;
		queue_close(s,
			    code == 1005 || code == 1006 || code == 1015 ? WS_CLOSE_NORMAL : code);
		return -1;
	}
	return 0;
}

static int client_bytes(struct tsession *s, unsigned char *buf, size_t n)
{
	struct ws_handler h = {on_data, on_control, s, on_text, NULL};
	int code = 0;
	int r = ws_parse(&s->ws, buf, n, &h, &code);
	if (r == WS_ERR_PROTOCOL) {
		s->why = "WebSocket protocol error";
		queue_close(s, code);
	}
	return r < 0 ? -1 : 0;
}

static int flush_out(struct tsession *s)
{
	while (s->out_len) {
		ssize_t w = send(s->o->ws_fd, s->out, s->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		memmove(s->out, s->out + w, s->out_len - (size_t)w);
		s->out_len -= (size_t)w;
	}
	return 0;
}

/* Output of the terminal into the queue; -1 once it ended. */
static int from_terminal(struct tsession *s, char *buf)
{
	int code = 0;
	long n = process_term_read(s->o->client, buf, TERM_CHUNK, &s->lost, &code);
	if (s->lost != s->lost_told) {
		if (queue_json(s, "lost", "bytes", (long long)s->lost) < 0)
			return -1;
		s->lost_told = s->lost;
	}
	if (n > 0)
		return queue(s, WS_OP_BINARY, buf, (size_t)n);
	if (n < 0) {
		queue_json(s, "exit", "exit_code", code);
		queue_close(s, WS_CLOSE_NORMAL);
		s->why = NULL;
		return -1;
	}
	return 0;
}

static int from_browser(struct tsession *s, unsigned char *buf)
{
	ssize_t n = recv(s->o->ws_fd, buf, TERM_CHUNK, MSG_DONTWAIT);
	if (n > 0) {
		s->last_in_ms = clock_mono_ms();
		return client_bytes(s, buf, (size_t)n);
	}
	if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		s->why = NULL; /* the browser went away: the terminal stays */
		return -1;
	}
	return 0;
}

static int timers(struct tsession *s, long long now)
{
	const struct vnc_term_session_opts *o = s->o;
	if (o->expires_at && (long long)time(NULL) >= o->expires_at) {
		s->why = "viewer token expired";
		queue_close(s, WS_CLOSE_POLICY);
		return -1;
	}
	if (now - s->last_in_ms > TERM_SILENT_MS) {
		s->why = "browser silent for 90 s";
		return -1;
	}
	if (now >= s->next_ping_ms) {
		s->next_ping_ms = now + TERM_PING_MS;
		return queue(s, WS_OP_PING, "", 0);
	}
	return 0;
}

/* One round: wait, then serve the token's revocation, the terminal and the
 * browser.  -1 ends the session. */
static int round_trip(struct tsession *s, unsigned char *buf)
{
	const struct vnc_term_session_opts *o = s->o;
	long long now = clock_mono_ms();
	if (timers(s, now) < 0)
		return -1;
	struct pollfd p[3] = {
	    {o->ws_fd, (short)(POLLIN | (s->out_len ? POLLOUT : 0)), 0},
	    {s->out_len < TERM_OUT_LOW ? process_term_client_fd(o->client) : -1, POLLIN, 0},
	    {o->stop_fd, POLLIN, 0},
	};
	if (poll(p, 3, 1000) < 0 && errno != EINTR) {
		s->why = "poll failed";
		return -1;
	}
	if (p[2].revents & POLLIN) {
		s->why = "viewer token revoked";
		queue_close(s, WS_CLOSE_POLICY);
		return -1;
	}
	if ((p[1].revents & POLLIN) && from_terminal(s, (char *)buf) < 0)
		return -1;
	if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && from_browser(s, buf) < 0)
		return -1;
	if (flush_out(s) < 0) {
		s->why = NULL;
		return -1;
	}
	return 0;
}

/* The close frame and what is queued before it, for at most 2 s. */
static void linger(struct tsession *s)
{
	long long until = clock_mono_ms() + 2000;
	while (s->out_len && clock_mono_ms() < until) {
		if (flush_out(s) < 0)
			return;
		struct pollfd p = {s->o->ws_fd, POLLOUT, 0};
		poll(&p, 1, 100);
	}
}

void vnc_term_session_run(const struct vnc_term_session_opts *o)
{
	struct tsession *s = calloc(1, sizeof(*s));
	unsigned char *buf = malloc(TERM_CHUNK);
	if (!s || !buf || !(s->out = malloc(TERM_OUT_MAX))) {
		if (s)
			free(s->out);
		free(s);
		free(buf);
		return;
	}
	s->o = o;
	ws_parser_init(&s->ws);
	int fl = fcntl(o->ws_fd, F_GETFL);
	if (fl >= 0)
		fcntl(o->ws_fd, F_SETFL, fl | O_NONBLOCK);
	int one = 1;
	setsockopt(o->ws_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->last_in_ms = clock_mono_ms();
	s->next_ping_ms = s->last_in_ms + TERM_PING_MS;
	int ok = 1;
	/* SECURITY: bounded by MHD's connection memory limit. */
	for (size_t off = 0; ok && off < o->extra_len; off += TERM_CHUNK) {
		size_t take = o->extra_len - off < TERM_CHUNK ? o->extra_len - off : TERM_CHUNK;
		memcpy(buf, o->extra + off, take);
		ok = client_bytes(s, buf, take) == 0;
	}
	while (ok && round_trip(s, buf) == 0)
		;
	linger(s);
	if (s->why)
		log_msg(LOG_LEVEL_INFO, "sandbox %s: terminal client disconnected: %s", o->sid,
			s->why);
	free(s->out);
	free(s);
	free(buf);
}
