/* Observation routes (docs/observation.md): takeover, the events stream,
 * and the hook-up of every desktop request to its sandbox's observer.
 *
 * The events stream:
 *
 *   id: N                 one per backlog event (Last-Event-ID resumes)
 *   event: frame | pointer | action | takeover | window
 *   data: {...}
 *
 * plus "ready" first, "reset" when a Last-Event-ID has left the backlog,
 * and a final "end" (the sandbox stopped) or "dropped" (the client read so
 * slowly that the backlog passed it).  The reader runs on the connection's
 * thread: between short waits on the mirror it enters the sandbox, looks at
 * the mirror (desk_obs_poll), leaves and copies new events out, so a stream
 * never holds the sandbox for long and its memory is what one read copies
 * (READ_MAX events). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <poll.h>
#include <sys/socket.h>

#include "common/args.h"
#include "common/clock.h"
#include "common/websocket.h"
#include "server/desktop/desktop.h"
#include "server/viewer/viewer.h"
#include "internal.h"

#define READ_MAX       64
#define WAIT_MS	       25
#define KEEPALIVE_MS   5000
#define DEFAULT_TTL_S  300
#define DEFAULT_MAX_HZ 10
#define MAX_HZ	       60

void api_desk_observe(struct http_request *req, struct sandbox *sb, struct desk *d, int sensitive)
{
	struct api *api = req->app;
	/* The route past /v1/sandboxes/{id}: "POST /desktop/click". */
	const char *p = req->path;
	if (strncmp(p, "/v1/sandboxes/", 14) == 0 && strchr(p + 14, '/'))
		p = strchr(p + 14, '/');
	char route[80];
	snprintf(route, sizeof(route), "%s %s", req->method, p);
	struct desk_obs *o =
	    api->observers ? desk_obs_get(api->observers, sandbox_id(sb), sandbox_dir(sb)) : NULL;
	desk_observe(d, o, route, sensitive);
}

/* The {id} sandbox and its observer (both to be put). */
static int get_obs(struct http_request *req, struct sandbox **sb, struct desk_obs **o,
		   struct err *e)
{
	struct api *api = req->app;
	if (sandbox_get(api->sandboxes, req->captures[0], sb, e) < 0)
		return err_code(e);
	*o =
	    api->observers ? desk_obs_get(api->observers, sandbox_id(*sb), sandbox_dir(*sb)) : NULL;
	if (!*o) {
		sandbox_put(*sb);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

int api_desktop_takeover(struct http_request *req, struct http_response *res, struct err *e)
{
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	static const char *const fields[] = {"ttl_s", "by", NULL};
	int64_t ttl;
	const char *by;
	if (args_only(body, NULL, fields, e) < 0 ||
	    args_int(body, "ttl_s", 1, DESK_TAKEOVER_MAX_S, DEFAULT_TTL_S, 0, &ttl, e) < 0 ||
	    args_string(body, "by", 60, 0, &by, e) < 0) {
		cJSON_Delete(body);
		return err_code(e);
	}
	struct sandbox *sb;
	struct desk_obs *o;
	cJSON *j = NULL;
	int r = get_obs(req, &sb, &o, e);
	if (r == 0) {
		if (sandbox_current_status(sb) != SANDBOX_RUNNING)
			r = err_set(e, ERR_NOT_RUNNING, EINVAL, "sandbox '%s' is not running",
				    sandbox_id(sb));
		if (r == 0)
			r = desk_obs_takeover(o, ttl, by ? by : "api", e);
		if (r == 0)
			j = desk_obs_takeover_json(o);
		desk_obs_put(o);
		sandbox_put(sb);
	}
	cJSON_Delete(body);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, j, e);
}

int api_desktop_takeover_end(struct http_request *req, struct http_response *res, struct err *e)
{
	struct sandbox *sb;
	struct desk_obs *o;
	if (get_obs(req, &sb, &o, e) < 0)
		return err_code(e);
	int was = desk_obs_release(o);
	cJSON *j = desk_obs_takeover_json(o);
	if (j)
		cJSON_AddBoolToObject(j, "released", was);
	desk_obs_put(o);
	sandbox_put(sb);
	return http_reply_json(res, 200, j, e);
}

/* ---- the events stream ---- */

struct events_sse {
	struct sandbox *sb;
	struct desk_obs *o;
	enum sandbox_status status; /* at the start */
	struct api_sse out;
	uint64_t after; /* the last event id sent (or skipped) */
	int ended;
	long long last_ms;
	/* Frames coalesced for max_hz: the pending one (its latest event id,
	 * frame and the union of the rectangles), and when one was sent. */
	int max_hz;
	int pending;
	uint64_t pend_id, pend_frame;
	int64_t px0, py0, px1, py1;
	long long frame_sent_ms;
	uint64_t seen_frame;
	long long deadline_ms; /* timeout_s; 0: none */
	int ws;		       /* over a WebSocket: one text message an event */
	int ws_fd, stop_fd;
	int ws_closing; /* the client sent a close */
	struct ws_parser ps;
};

/* A WebSocket message: {"id":N,"event":TYPE,"data":JSON} ("id" only for
 * backlog events, as in the SSE form). */
static void send_ws_event(struct events_sse *s, uint64_t id, const char *type, const char *json)
{
	char head[96];
	int n = snprintf(head, sizeof(head), "{");
	if (id)
		n += snprintf(head + n, sizeof(head) - (size_t)n, "\"id\":%llu,",
			      (unsigned long long)id);
	n += snprintf(head + n, sizeof(head) - (size_t)n, "\"event\":\"%.40s\",\"data\":", type);
	size_t len = (size_t)n + strlen(json) + 1;
	unsigned char fh[WS_MAX_HEADER];
	size_t fl = ws_frame_header(fh, WS_OP_TEXT, len);
	api_sse_append(&s->out, (const char *)fh, fl);
	api_sse_append(&s->out, head, (size_t)n);
	api_sse_append(&s->out, json, strlen(json));
	api_sse_append(&s->out, "}", 1);
}

static void send_event(struct events_sse *s, uint64_t id, const char *type, const char *json)
{
	if (s->ws) {
		send_ws_event(s, id, type, json);
		return;
	}
	char head[64];
	int n = id ? snprintf(head, sizeof(head), "id: %llu\n", (unsigned long long)id) : 0;
	api_sse_append(&s->out, head, (size_t)n);
	api_sse_append(&s->out, "event: ", 7);
	api_sse_append(&s->out, type, strlen(type));
	api_sse_append(&s->out, "\ndata: ", 7);
	api_sse_append(&s->out, json, strlen(json));
	api_sse_append(&s->out, "\n\n", 2);
}

static void send_json(struct events_sse *s, const char *type, cJSON *j)
{
	char *t = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!t) {
		s->out.failed = 1;
		return;
	}
	send_event(s, 0, type, t);
	free(t);
}

static void end(struct events_sse *s, const char *type, const char *reason)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "reason", reason);
	send_json(s, type, j);
	s->ended = 1;
}

static void flush_frame(struct events_sse *s)
{
	if (!s->pending)
		return;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "frame", (double)s->pend_frame);
	cJSON *rects = cJSON_AddArrayToObject(j, "rects");
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "x", (double)s->px0);
	cJSON_AddNumberToObject(r, "y", (double)s->py0);
	cJSON_AddNumberToObject(r, "w", (double)(s->px1 - s->px0));
	cJSON_AddNumberToObject(r, "h", (double)(s->py1 - s->py0));
	cJSON_AddItemToArray(rects, r);
	char *t = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (t)
		send_event(s, s->pend_id, "frame", t);
	else
		s->out.failed = 1;
	free(t);
	s->pending = 0;
	s->frame_sent_ms = clock_mono_ms();
}

/* Merges a frame event into the pending one. */
static void merge_frame(struct events_sse *s, const struct desk_obs_event *ev)
{
	cJSON *j = cJSON_Parse(ev->json);
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "frame");
	const cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "rects"), 0);
	int64_t x = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "x"));
	int64_t y = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "y"));
	int64_t w = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "w"));
	int64_t h = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "h"));
	if (!s->pending || s->px1 <= s->px0) {
		s->px0 = x, s->py0 = y, s->px1 = x + w, s->py1 = y + h;
	} else if (w > 0 && h > 0) {
		s->px0 = x < s->px0 ? x : s->px0;
		s->py0 = y < s->py0 ? y : s->py0;
		s->px1 = x + w > s->px1 ? x + w : s->px1;
		s->py1 = y + h > s->py1 ? y + h : s->py1;
	}
	s->pend_frame = cJSON_IsNumber(f) ? (uint64_t)f->valuedouble : s->pend_frame;
	s->pend_id = ev->id;
	s->pending = 1;
	cJSON_Delete(j);
}

/* Looks at the mirror for up to WAIT_MS (holding the sandbox only then). */
static void look(struct events_sse *s)
{
	struct capture *cap;
	struct err e = ERR_INIT;
	if (sandbox_use(s->sb, 1, &cap, &e) < 0) {
		clock_sleep_ms(WAIT_MS);
		return;
	}
	if (capture_wait_frame(cap, s->seen_frame, WAIT_MS, &e) >= 0)
		s->seen_frame = capture_frame(cap);
	desk_obs_poll(s->o, cap);
	struct desk d;
	desk_init(&d, cap, sandbox_procs(s->sb), 0, 0, 1);
	desk_obs_windows(s->o, &d);
	sandbox_unuse(s->sb);
}

static void wait_once(struct events_sse *s)
{
	if (sandbox_current_status(s->sb) != s->status) {
		flush_frame(s);
		end(s, "end", "the sandbox stopped, started or is going away");
		return;
	}
	if (s->deadline_ms && clock_mono_ms() >= s->deadline_ms) {
		flush_frame(s);
		end(s, "end", "timeout_s passed");
		return;
	}
	look(s);
	struct desk_obs_event ev[READ_MAX];
	uint64_t next;
	int n = desk_obs_read(s->o, s->after, ev, READ_MAX, 0, &next);
	if (n == -ERANGE) {
		flush_frame(s);
		end(s, "dropped", "the client read too slowly: events left the backlog unread");
		return;
	}
	for (int i = 0; i < n; i++) {
		if (strcmp(ev[i].type, "frame") == 0) {
			merge_frame(s, &ev[i]);
		} else {
			flush_frame(s);
			send_event(s, ev[i].id, ev[i].type, ev[i].json);
		}
		s->after = ev[i].id;
		free(ev[i].json);
	}
	if (s->pending && clock_mono_ms() - s->frame_sent_ms >= 1000 / s->max_hz)
		flush_frame(s);
	if (s->out.len == 0 && clock_mono_ms() - s->last_ms > KEEPALIVE_MS) {
		unsigned char ping[2] = {0x80 | WS_OP_PING, 0};
		if (s->ws)
			api_sse_append(&s->out, (const char *)ping, 2);
		else
			api_sse_append(&s->out, ": keepalive\n\n", 13);
	}
}

static long events_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct events_sse *s = cls;
	size_t n;
	while ((n = api_sse_take(&s->out, buf, max)) == 0) {
		if (s->out.failed)
			return HTTP_STREAM_ERROR;
		if (s->ended)
			return HTTP_STREAM_END;
		wait_once(s);
	}
	s->last_ms = clock_mono_ms();
	return (long)n;
}

static void events_release(void *cls)
{
	struct events_sse *s = cls;
	desk_obs_put(s->o);
	sandbox_put(s->sb);
	api_sse_release(&s->out);
	free(s);
}

/* ---- the same stream over a WebSocket ---- */

#define WS_STALL_MS 60000

/* Writes all of `n` bytes; -1 when the client went, stalled past
 * WS_STALL_MS or deskboxd stops.  While it waits no events are taken, so
 * a client that reads too slowly falls behind the backlog and is dropped
 * (the final event goes out once it reads again), as with SSE. */
static int ws_write(struct events_sse *s, const char *p, size_t n)
{
	long long stalled_at = clock_mono_ms();
	while (n) {
		ssize_t w = send(s->ws_fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			stalled_at = clock_mono_ms();
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if (clock_mono_ms() - stalled_at > WS_STALL_MS)
			return -1;
		struct pollfd pf[2] = {{s->ws_fd, POLLOUT, 0}, {s->stop_fd, POLLIN, 0}};
		if (poll(pf, s->stop_fd >= 0 ? 2 : 1, 1000) > 0 && s->stop_fd >= 0 && pf[1].revents)
			return -1;
	}
	return 0;
}

static int ws_control(void *cls, int opcode, const unsigned char *p, size_t n)
{
	struct events_sse *s = cls;
	unsigned char hdr[WS_MAX_HEADER];
	if (opcode == WS_OP_PING) {
		size_t hl = ws_frame_header(hdr, WS_OP_PONG, n);
		api_sse_append(&s->out, (const char *)hdr, hl);
		api_sse_append(&s->out, (const char *)p, n);
	} else if (opcode == WS_OP_CLOSE) {
		s->ws_closing = 1;
	}
	return 0;
}

static int ws_ignore_text(void *cls, const unsigned char *p, size_t n, int end)
{
	return 0; /* the stream takes no messages: they are read and dropped */
}

static int ws_ignore_data(void *cls, const unsigned char *p, size_t n)
{
	return 0;
}

/* Reads what the client sent, if anything: -1 once it is gone or broke
 * the protocol. */
static int ws_read_client(struct events_sse *s, unsigned char *buf, size_t n)
{
	if (n == 0) {
		struct pollfd pf = {s->ws_fd, POLLIN, 0};
		if (poll(&pf, 1, 0) <= 0)
			return 0;
		ssize_t r = recv(s->ws_fd, buf, 4096, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (r <= 0)
			return -1;
		n = (size_t)r;
	}
	struct ws_handler h = {
	    .data = ws_ignore_data, .control = ws_control, .text = ws_ignore_text, .cls = s};
	int code = 0;
	return ws_parse(&s->ps, buf, n, &h, &code) < 0 ? -1 : 0;
}

static void ws_close(struct events_sse *s, int code)
{
	unsigned char f[4] = {0x80 | WS_OP_CLOSE, 2, (unsigned char)(code >> 8),
			      (unsigned char)code};
	ws_write(s, (const char *)f, sizeof(f));
}

static void events_ws_run(void *cls, int fd, const char *extra, size_t extra_len)
{
	struct events_sse *s = cls;
	s->ws_fd = fd;
	ws_parser_init(&s->ps);
	unsigned char in[4096];
	char out[16384];
	if (extra_len) {
		size_t n = extra_len < sizeof(in) ? extra_len : sizeof(in);
		memcpy(in, extra, n);
		if (ws_read_client(s, in, n) < 0)
			return;
	}
	for (;;) {
		size_t n = api_sse_take(&s->out, out, sizeof(out));
		if (n) {
			if (ws_write(s, out, n) < 0)
				return;
			s->last_ms = clock_mono_ms();
			continue;
		}
		if (s->out.failed || s->ended || s->ws_closing)
			break;
		struct pollfd pf = {s->stop_fd, POLLIN, 0};
		if (s->stop_fd >= 0 && poll(&pf, 1, 0) > 0) {
			ws_close(s, WS_CLOSE_GOING_AWAY);
			return;
		}
		if (ws_read_client(s, in, 0) < 0)
			return;
		if (!s->ws_closing)
			wait_once(s);
	}
	ws_close(s, s->out.failed ? WS_CLOSE_INTERNAL : WS_CLOSE_NORMAL);
}

/* Where a stream starts: after Last-Event-ID (header) or ?last_event_id,
 * else after the newest event; *reset when that id has left the backlog. */
static int start_after(struct http_request *req, struct desk_obs *o, uint64_t *after, int *reset,
		       struct err *e)
{
	const char *h = http_header(req, "Last-Event-ID");
	int64_t id = 0;
	if (h && *h && args_parse_int(h, 0, INT64_MAX / 2, &id) < 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "header 'Last-Event-ID' must be an event id");
	if (!h && http_query_int(req, "last_event_id", 0, INT64_MAX / 2, 0, 0, &id, e) < 0)
		return err_code(e);
	int given = (h && *h) || http_query(req, "last_event_id");
	struct desk_obs_event none[1];
	uint64_t next;
	int r = desk_obs_read(o, (uint64_t)id, none, 0, 0, &next);
	*reset = given && r == -ERANGE;
	*after = given && r != -ERANGE ? (uint64_t)id : next - 1;
	return 0;
}

int api_desktop_events(struct http_request *req, struct http_response *res, struct err *e)
{
	int64_t hz, timeout_s;
	if (http_query_int(req, "max_hz", 1, MAX_HZ, DEFAULT_MAX_HZ, 0, &hz, e) < 0 ||
	    http_query_int(req, "timeout_s", 0, 86400 * 7, 0, 0, &timeout_s, e) < 0)
		return err_code(e);
	struct events_sse *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int reset = 0;
	char accept[WS_ACCEPT_LEN + 1];
	s->ws = http_header(req, "Upgrade") != NULL;
	s->ws_fd = -1;
	s->stop_fd = http_stop_fd(req);
	if (s->ws && api_ws_handshake(req, accept, e) < 0) {
		free(s);
		return err_code(e);
	}
	if (get_obs(req, &s->sb, &s->o, e) < 0) {
		free(s);
		return err_code(e);
	}
	if (start_after(req, s->o, &s->after, &reset, e) < 0) {
		events_release(s);
		return err_code(e);
	}
	s->status = sandbox_current_status(s->sb);
	s->max_hz = (int)hz;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "after", (double)s->after);
	cJSON_AddNumberToObject(j, "max_hz", (double)hz);
	cJSON_AddItemToObject(j, "takeover", desk_obs_takeover_json(s->o));
	send_json(s, "ready", j);
	if (reset) {
		j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "reason",
					"the events after Last-Event-ID left the "
					"backlog: the stream goes on from now");
		send_json(s, "reset", j);
	}
	s->last_ms = clock_mono_ms();
	if (timeout_s)
		s->deadline_ms = s->last_ms + timeout_s * 1000;
	if (s->ws) {
		http_reply_upgrade(res, events_ws_run, s, events_release);
		return api_ws_accept(req, res, accept, e);
	}
	http_reply_stream(res, 200, "text/event-stream", HTTP_SIZE_UNKNOWN, events_read, s,
			  events_release);
	http_add_header(res, "Cache-Control", "no-cache", NULL);
	return 0;
}

/* GET, POST and DELETE …/vnc/takeover?token=: the viewer page's takeover
 * button.  A viewer token (or the API token) says who; only one with
 * control may take over or give back, any may ask the state. */
int api_vnc_takeover(struct http_request *req, struct http_response *res, struct err *e)
{
	struct vnc_grant g;
	int64_t ttl;
	if (api_viewer_authorize(req, "", &g, e) < 0 ||
	    http_query_int(req, "ttl_s", 1, DESK_TAKEOVER_MAX_S, DEFAULT_TTL_S, 0, &ttl, e) < 0)
		return err_code(e);
	int get = strcmp(req->method, "GET") == 0, post = strcmp(req->method, "POST") == 0;
	if (!get && g.view_only)
		return err_set(e, ERR_FORBIDDEN, EPERM,
			       "a view-only viewer cannot take the desktop over");
	struct sandbox *sb;
	struct desk_obs *o;
	if (get_obs(req, &sb, &o, e) < 0)
		return err_code(e);
	int r = 0;
	if (post && sandbox_current_status(sb) != SANDBOX_RUNNING)
		r = err_set(e, ERR_NOT_RUNNING, EINVAL, "sandbox '%s' is not running",
			    sandbox_id(sb));
	else if (post)
		r = desk_obs_takeover(o, ttl, "viewer", e);
	else if (!get)
		desk_obs_release(o);
	cJSON *j = r == 0 ? desk_obs_takeover_json(o) : NULL;
	desk_obs_put(o);
	sandbox_put(sb);
	if (r < 0)
		return r;
	return http_reply_json(res, 200, j, e);
}
