/* The least of Daytona's socket.io event channel the SDK needs (Engine.IO
 * 4 over a WebSocket, text frames): the open packet, the namespace CONNECT
 * with the API key in it answered, pings every 25 s.  No events are sent:
 * the SDK then polls the sandbox's state, which deskbox's create has made
 * "started" already.  Without this channel the SDK would retry the
 * connection for minutes and keep a script from exiting. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/websocket.h"
#include "internal.h"

#define SIO_PING_MS 25000
/* A client that has not given the key in a CONNECT this long after the
 * upgrade is dropped (the upgrade itself needs no credential). */
#define SIO_CONNECT_MS 10000
#define SIO_MSG_MAX    4096

struct sio {
	const struct http *http; /* checks the key in CONNECT */
	int stop_fd;
	int fd;
	struct ws_parser ps;
	char msg[SIO_MSG_MAX + 1];
	size_t msg_len;
	int too_long;
	int closing;   /* a close was sent: the session ends */
	int connected; /* a CONNECT with the key was answered */
};

static int send_frame(struct sio *s, int opcode, const char *data, size_t len)
{
	unsigned char hdr[WS_MAX_HEADER];
	size_t hl = ws_frame_header(hdr, opcode, len);
	const char *parts[2] = {(const char *)hdr, data};
	size_t lens[2] = {hl, len};
	for (int i = 0; i < 2; i++) {
		size_t off = 0;
		while (off < lens[i]) {
			ssize_t n = write(s->fd, parts[i] + off, lens[i] - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return -1;
			off += (size_t)n;
		}
	}
	return 0;
}

static int send_text(struct sio *s, const char *text)
{
	return send_frame(s, WS_OP_TEXT, text, strlen(text));
}

static void send_close(struct sio *s, int code)
{
	char p[2] = {(char)(code >> 8), (char)(code & 0xff)};
	send_frame(s, WS_OP_CLOSE, p, 2);
	s->closing = 1;
}

/* "40" / "40{"token":...}": the default namespace, with the key. */
static int on_connect(struct sio *s, const char *payload)
{
	cJSON *auth = payload[0] ? cJSON_Parse(payload) : NULL;
	const char *token = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(auth, "token"));
	struct err e = ERR_INIT;
	int ok = http_check_secret(s->http, token, &e) == 0;
	cJSON_Delete(auth);
	if (!ok) {
		int r = send_text(s, "44{\"message\":\"invalid API key\"}");
		send_close(s, WS_CLOSE_POLICY);
		return r;
	}
	s->connected = 1;
	char reply[64];
	snprintf(reply, sizeof(reply), "40{\"sid\":\"%08lx%08lx\"}", random(), random());
	return send_text(s, reply);
}

/* One whole Engine.IO packet from the client. */
static int on_packet(struct sio *s)
{
	const char *m = s->msg;
	if (m[0] == '1') { /* close */
		send_close(s, WS_CLOSE_NORMAL);
		return 0;
	}
	if (m[0] == '2') /* a ping of the client's: pong */
		return send_text(s, "3");
	if (m[0] != '4') /* "3" (pong), "6" (noop) */
		return 0;
	if (m[1] == '0' && (m[2] == '\0' || m[2] == '{'))
		return on_connect(s, m + 2);
	if (m[1] == '1') /* the client leaves the namespace */
		return 0;
	return 0; /* events and acks of the client's: none expected */
}

static int on_text(void *cls, const unsigned char *p, size_t n, int end)
{
	struct sio *s = cls;
	if (s->msg_len + n > SIO_MSG_MAX) {
		s->too_long = 1;
	} else if (n) { /* an empty frame may come with no buffer */
		memcpy(s->msg + s->msg_len, p, n);
		s->msg_len += n;
	}
	if (!end)
		return 0;
	s->msg[s->msg_len] = '\0';
	int r = s->too_long ? (send_close(s, 1009), 0) : on_packet(s);
	s->msg_len = 0;
	s->too_long = 0;
	return r;
}

static int on_data(void *cls, const unsigned char *p, size_t n)
{
	return 0; /* binary attachments: none expected, dropped */
}

static int on_control(void *cls, int opcode, const unsigned char *p, size_t n)
{
	struct sio *s = cls;
	if (opcode == WS_OP_PING)
		return send_frame(s, WS_OP_PONG, (const char *)p, n);
	if (opcode == WS_OP_CLOSE) {
		send_frame(s, WS_OP_CLOSE, (const char *)p, n >= 2 ? 2 : 0);
		s->closing = 1;
	}
	return 0;
}

static int feed(struct sio *s, unsigned char *buf, size_t n)
{
	struct ws_handler h = {.data = on_data, .control = on_control, .text = on_text, .cls = s};
	int code = 0;
	int r = ws_parse(&s->ps, buf, n, &h, &code);
	if (r == WS_ERR_PROTOCOL)
		send_close(s, code);
	return r < 0 ? -1 : 0;
}

static void sio_run(void *cls, int fd, const char *extra, size_t extra_len)
{
	struct sio *s = cls;
	s->fd = fd;
	ws_parser_init(&s->ps);
	char open_pkt[160];
	snprintf(
	    open_pkt, sizeof(open_pkt),
	    "0{\"sid\":\"%08lx%08lx\",\"upgrades\":[],\"pingInterval\":%d,\"pingTimeout\":20000,"
	    "\"maxPayload\":%d}",
	    random(), random(), SIO_PING_MS, SIO_MSG_MAX);
	unsigned char buf[4096];
	if (send_text(s, open_pkt) < 0)
		return;
	if (extra_len) {
		size_t n = extra_len < sizeof(buf) ? extra_len : sizeof(buf);
		memcpy(buf, extra, n);
		if (feed(s, buf, n) < 0)
			return;
	}
	long long next_ping = clock_mono_ms() + SIO_PING_MS;
	long long connect_by = clock_mono_ms() + SIO_CONNECT_MS;
	while (!s->closing) {
		if (!s->connected && clock_mono_ms() >= connect_by) {
			send_close(s, WS_CLOSE_POLICY);
			return;
		}
		struct pollfd p[2] = {{fd, POLLIN, 0}, {s->stop_fd, POLLIN, 0}};
		long long wait = (s->connected ? next_ping : connect_by) - clock_mono_ms();
		int r = poll(p, s->stop_fd >= 0 ? 2 : 1, wait > 0 ? (int)wait : 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || (s->stop_fd >= 0 && p[1].revents)) {
			send_close(s, WS_CLOSE_GOING_AWAY);
			return;
		}
		if (r == 0 && !s->connected)
			continue;
		if (r == 0) {
			if (send_text(s, "2") < 0)
				return;
			next_ping = clock_mono_ms() + SIO_PING_MS;
			continue;
		}
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || feed(s, buf, (size_t)n) < 0)
			return;
	}
}

static void sio_free(void *cls)
{
	free(cls);
}

static int has_token(const char *list, const char *word)
{
	for (const char *p = list; p && *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t n = strcspn(p, ", ");
		if (n == strlen(word) && strncasecmp(p, word, n) == 0)
			return 1;
		p += n;
	}
	return 0;
}

/* GET …/socket.io/?EIO=4&transport=websocket (upgrade, no Authorization:
 * the key comes in CONNECT). */
int dt_socketio(struct http_request *req, struct http_response *res, struct err *e)
{
	const char *eio = http_query(req, "EIO"), *transport = http_query(req, "transport");
	const char *key = http_header(req, "Sec-WebSocket-Key");
	char accept[WS_ACCEPT_LEN + 1];
	if (!eio || strcmp(eio, "4") != 0 || !transport || strcmp(transport, "websocket") != 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "only Engine.IO 4 over a WebSocket (EIO=4&transport=websocket)");
	if (!has_token(http_header(req, "Upgrade"), "websocket") ||
	    !has_token(http_header(req, "Connection"), "upgrade") || !key ||
	    ws_accept_key(key, accept) < 0)
		return err_set(e, ERR_INVALID, EINVAL, "a WebSocket upgrade is required here");
	struct sio *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	s->http = http_of(req);
	s->stop_fd = http_stop_fd(req);
	http_reply_upgrade(res, sio_run, s, sio_free);
	if (http_add_header(res, "Upgrade", "websocket", e) < 0 ||
	    http_add_header(res, "Sec-WebSocket-Accept", accept, e) < 0)
		return err_code(e);
	return 0;
}
