/* compat/e2b: the server stream of process.Process Start and Connect.
 *
 * {"event":{"start":{"pid"}}}, then {"event":{"data":{"stdout"|"stderr"|
 * "pty":base64}}} as output comes ({"event":{"keepalive":{}}} when idle),
 * {"event":{"end":{"exitCode","exited","status"}}} and the end-of-stream
 * envelope.  The program is a deskbox background run (followed through
 * process_bg_follow) or a terminal (a client of it): it outlives the
 * stream, as in E2B's envd, and any number of streams may follow it. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "common/clock.h"
#include "common/text.h"
#include "server/process/process.h"
#include "server/sandbox/sandbox.h"

#define KEEPALIVE_MS 30000
#define DATA_CHUNK   (64u << 10) /* raw bytes per data event */
#define STEP_MS	     1000

struct pstream {
	struct sandbox *sb; /* a reference */
	pid_t pid;
	struct process_term_client *term; /* a PTY's client, else NULL */
	uint64_t pos[2];
	int started, finished;
	struct http_frames out;
	long long last_ms;
};

static void event(struct http_frames *f, const char *kind, cJSON *body)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(cJSON_AddObjectToObject(j, "event"), kind, body);
	http_frames_connect(f, 0, j);
	cJSON_Delete(j);
}

static void data_events(struct pstream *s, const char *kind, const char *p, size_t n)
{
	while (n) {
		size_t k = n > DATA_CHUNK ? DATA_CHUNK : n;
		char *b64 = base64_encode(p, k);
		if (!b64) {
			s->out.failed = 1;
			return;
		}
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, kind, b64);
		free(b64);
		event(&s->out, "data", d);
		p += k;
		n -= k;
	}
}

static void end_event(struct pstream *s, int exit_code, int killed, const char *error)
{
	char status[64];
	if (killed)
		snprintf(status, sizeof(status), "signal: killed");
	else
		snprintf(status, sizeof(status), "exit status %d", exit_code);
	cJSON *end = cJSON_CreateObject();
	cJSON_AddNumberToObject(end, "exitCode", killed ? -1 : exit_code);
	cJSON_AddBoolToObject(end, "exited", !killed);
	cJSON_AddStringToObject(end, "status", status);
	if (error)
		cJSON_AddStringToObject(end, "error", error);
	event(&s->out, "end", end);
	cJSON *tail = cJSON_CreateObject();
	http_frames_connect(&s->out, HTTP_CONNECT_END_STREAM, tail);
	cJSON_Delete(tail);
	s->finished = 1;
}

/* The stream ends without an end event (the record is gone). */
static void end_error(struct pstream *s, const char *code, const char *msg)
{
	cJSON *tail = cJSON_CreateObject();
	cJSON *er = cJSON_AddObjectToObject(tail, "error");
	cJSON_AddStringToObject(er, "code", code);
	cJSON_AddStringToObject(er, "message", msg);
	http_frames_connect(&s->out, HTTP_CONNECT_END_STREAM, tail);
	cJSON_Delete(tail);
	s->finished = 1;
}

static void step_bg(struct pstream *s)
{
	struct process_logs l;
	struct process_info in;
	struct err e = ERR_INIT;
	if (process_bg_follow(sandbox_procs(s->sb), s->pid, s->pos, STEP_MS, &l, &in, &e) < 0) {
		end_error(s, e.kind == ERR_NOT_FOUND ? "not_found" : "internal", e.msg);
		return;
	}
	data_events(s, "stdout", l.out, l.out_len);
	data_events(s, "stderr", l.err, l.err_len);
	process_logs_release(&l);
	if (!in.running)
		end_event(s, in.exit_code, in.killed || in.timed_out,
			  in.timed_out	   ? "deadline exceeded"
			  : in.oom_killed ? "out of memory"
					  : NULL);
}

static void step_term(struct pstream *s)
{
	struct pollfd pf = {process_term_client_fd(s->term), POLLIN, 0};
	poll(&pf, 1, STEP_MS);
	char buf[16384];
	uint64_t lost = 0;
	int code = 0;
	long n;
	while ((n = process_term_read(s->term, buf, sizeof(buf), &lost, &code)) > 0)
		data_events(s, "pty", buf, (size_t)n);
	if (n < 0)
		end_event(s, code < 0 ? -1 : code, code < 0, NULL);
}

static long pstream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct pstream *s = cls;
	size_t n;
	(void)pos;
	while ((n = http_frames_take(&s->out, buf, max)) == 0) {
		if (s->out.failed)
			return HTTP_STREAM_ERROR;
		if (s->finished)
			return HTTP_STREAM_END;
		if (!s->started) {
			cJSON *st = cJSON_CreateObject();
			cJSON_AddNumberToObject(st, "pid", s->pid);
			event(&s->out, "start", st);
			s->started = 1;
			continue;
		}
		if (s->term)
			step_term(s);
		else
			step_bg(s);
		if (!s->finished && clock_mono_ms() - s->last_ms > KEEPALIVE_MS) {
			event(&s->out, "keepalive", cJSON_CreateObject());
			s->last_ms = clock_mono_ms();
		}
	}
	s->last_ms = clock_mono_ms();
	return (long)n;
}

static void pstream_release(void *cls)
{
	struct pstream *s = cls;
	process_term_detach(s->term);
	if (s->sb)
		sandbox_put(s->sb);
	http_frames_release(&s->out);
	free(s);
}

int e2b_connect_message(struct http_request *req, cJSON **msg, struct err *e)
{
	const char *m;
	size_t len;
	if (http_connect_unwrap(req->body, req->body_len, &m, &len, e) < 0)
		return err_code(e);
	*msg = cJSON_ParseWithLength(m, len);
	if (cJSON_IsObject(*msg))
		return 0;
	cJSON_Delete(*msg);
	*msg = NULL;
	return err_set(e, ERR_INVALID, EINVAL, "the message must be a JSON object");
}

int e2b_pstream_reply(struct http_response *res, struct sandbox *sb, pid_t pid,
		      const char *term, int from_now, struct err *e)
{
	struct pstream *s = calloc(1, sizeof(*s));
	if (!s) {
		sandbox_put(sb);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	s->sb = sb;
	s->pid = pid;
	s->last_ms = clock_mono_ms();
	if (from_now)
		s->pos[0] = s->pos[1] = UINT64_MAX;
	if (term && process_term_attach(sandbox_procs(sb), term, &s->term, e) < 0) {
		pstream_release(s);
		return err_code(e);
	}
	http_reply_stream(res, 200, "application/connect+json", HTTP_SIZE_UNKNOWN, pstream_read, s,
			  pstream_release);
	return 0;
}

int e2b_pstream_error(struct http_response *res, const struct err *err, struct err *e)
{
	struct pstream *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	s->started = 1;
	const char *code = "internal";
	switch (err->kind) {
	case ERR_NOT_FOUND:
		code = "not_found";
		break;
	case ERR_INVALID:
	case ERR_UNKNOWN_FIELD:
	case ERR_UNSUPPORTED:
		code = "invalid_argument";
		break;
	case ERR_LIMIT:
	case ERR_TOO_LARGE:
	case ERR_NO_SPACE:
		code = "resource_exhausted";
		break;
	case ERR_FORBIDDEN:
	case ERR_ROOT_DISABLED:
		code = "permission_denied";
		break;
	case ERR_CONFLICT:
	case ERR_NOT_RUNNING:
	case ERR_PAUSED:
		code = "failed_precondition";
		break;
	case ERR_UNAVAILABLE:
		code = "unavailable";
		break;
	case ERR_TIMEOUT:
		code = "deadline_exceeded";
		break;
	default:
		break;
	}
	end_error(s, code, err->msg);
	http_reply_stream(res, 200, "application/connect+json", HTTP_SIZE_UNKNOWN, pstream_read, s,
			  pstream_release);
	return 0;
}
