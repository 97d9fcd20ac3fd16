/* Sprites' exec: a WebSocket whose binary messages carry a one-byte stream
 * id, 0 stdin (client to server), 1 stdout, 2 stderr, 3 exit (one byte, the
 * code), 4 stdin EOF.  The command (?cmd=argv0&cmd=argv1..., env=K=V,
 * dir=) runs as one deskbox run, foreground, its output sent as it comes;
 * an empty message every 15 s keeps the SDK's 45 s idle timer from firing
 * while a command is quiet.  Text messages: {"type":"signal"} ends the
 * run, {"type":"resize"} is ignored (no TTY). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/websocket.h"
#include "internal.h"

#define SX_MAX_ARGS	256
#define SX_MAX_ENV	128
#define SX_KEEPALIVE_MS 15000
#define SX_TEXT_MAX	1024

enum { SX_STDIN = 0, SX_STDOUT = 1, SX_STDERR = 2, SX_EXIT = 3, SX_STDIN_EOF = 4 };

struct sx {
	struct process_run *run;
	char *argv[SX_MAX_ARGS + 1];
	size_t argc;
	char *env[SX_MAX_ENV + 1];
	size_t envc;
	char *cwd;
	int fd, stop_fd;
	struct ws_parser ps;
	int msg_start; /* the next binary byte is a message's stream id */
	int msg_stream;
	char text[SX_TEXT_MAX + 1];
	size_t text_len;
	int broken, closing, killed;
	long long last_sent;
};

static void sx_free(void *cls)
{
	struct sx *s = cls;
	if (s->run)
		process_run_free(s->run);
	for (size_t i = 0; i < s->argc; i++)
		free(s->argv[i]);
	for (size_t i = 0; i < s->envc; i++)
		free(s->env[i]);
	free(s->cwd);
	free(s);
}

static int send_parts(struct sx *s, int opcode, const void *a, size_t an, const void *b, size_t bn)
{
	unsigned char hdr[WS_MAX_HEADER];
	struct iovec iov[3] = {
	    {hdr, ws_frame_header(hdr, opcode, an + bn)}, {(void *)a, an}, {(void *)b, bn}};
	int n = 3;
	struct iovec *v = iov;
	while (!s->broken && n > 0) {
		ssize_t w = writev(s->fd, v, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			s->broken = 1;
			break;
		}
		while (n > 0 && (size_t)w >= v->iov_len) {
			w -= (ssize_t)v->iov_len;
			v++;
			n--;
		}
		if (n > 0) {
			v->iov_base = (char *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	s->last_sent = clock_mono_ms();
	return s->broken ? -1 : 0;
}

static void on_output(void *cls, enum process_stream st, const char *data, size_t len)
{
	struct sx *s = cls;
	unsigned char id = st == PROCESS_STDERR ? SX_STDERR : SX_STDOUT;
	send_parts(s, WS_OP_BINARY, &id, 1, data, len);
}

static int on_data(void *cls, const unsigned char *p, size_t n)
{
	struct sx *s = cls;
	if (n && s->msg_start) {
		s->msg_start = 0;
		s->msg_stream = p[0];
		p++;
		n--;
		if (s->msg_stream == SX_STDIN_EOF)
			process_close_stdin(s->run);
	}
	if (n && s->msg_stream == SX_STDIN &&
	    process_write(s->run, p, n, clock_mono_ms() + 10000) < 0)
		process_close_stdin(s->run); /* the program stopped reading */
	return 0;
}

static int on_data_end(void *cls)
{
	struct sx *s = cls;
	s->msg_start = 1;
	return 0;
}

static int on_text(void *cls, const unsigned char *p, size_t n, int end)
{
	struct sx *s = cls;
	if (s->text_len + n <= SX_TEXT_MAX) {
		memcpy(s->text + s->text_len, p, n);
		s->text_len += n;
	}
	if (!end)
		return 0;
	s->text[s->text_len] = '\0';
	s->text_len = 0;
	cJSON *j = cJSON_Parse(s->text);
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "type"));
	/* Any signal ends the run and everything it started. */
	if (type && strcmp(type, "signal") == 0)
		s->killed = 1;
	cJSON_Delete(j);
	return 0;
}

static int on_control(void *cls, int opcode, const unsigned char *p, size_t n)
{
	struct sx *s = cls;
	if (opcode == WS_OP_PING)
		return send_parts(s, WS_OP_PONG, p, n, NULL, 0);
	if (opcode == WS_OP_CLOSE) {
		send_parts(s, WS_OP_CLOSE, p, n >= 2 ? 2 : 0, NULL, 0);
		s->closing = 1;
	}
	return 0;
}

/* Reads what the client sent, without waiting. */
static void pump_in(struct sx *s)
{
	unsigned char buf[16384];
	struct ws_handler h = {.data = on_data,
			       .control = on_control,
			       .cls = s,
			       .text = on_text,
			       .data_end = on_data_end};
	for (;;) {
		struct pollfd p[2] = {{s->fd, POLLIN, 0}, {s->stop_fd, POLLIN, 0}};
		if (poll(p, s->stop_fd >= 0 ? 2 : 1, 0) <= 0)
			return;
		if (s->stop_fd >= 0 && p[1].revents) {
			s->closing = 1;
			return;
		}
		ssize_t n = read(s->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			s->broken = 1;
			return;
		}
		int code = 0;
		if (ws_parse(&s->ps, buf, (size_t)n, &h, &code) < 0) {
			unsigned char c[2] = {(unsigned char)(code >> 8), (unsigned char)code};
			send_parts(s, WS_OP_CLOSE, c, 2, NULL, 0);
			s->closing = 1;
			return;
		}
		if (s->closing)
			return;
	}
}

static void sx_run(void *cls, int fd, const char *extra, size_t extra_len)
{
	struct sx *s = cls;
	s->fd = fd;
	ws_parser_init(&s->ps);
	s->msg_start = 1;
	s->last_sent = clock_mono_ms();
	if (extra_len) {
		struct ws_handler h = {.data = on_data,
				       .control = on_control,
				       .cls = s,
				       .text = on_text,
				       .data_end = on_data_end};
		unsigned char *copy = malloc(extra_len);
		int code;
		if (copy) {
			memcpy(copy, extra, extra_len);
			ws_parse(&s->ps, copy, extra_len, &h, &code);
			free(copy);
		}
	}
	int done = 0;
	while (!done && !s->broken && !s->closing && !s->killed) {
		pump_in(s);
		done = process_step(s->run, 20, on_output, s);
		if (!done && clock_mono_ms() - s->last_sent >= SX_KEEPALIVE_MS)
			send_parts(s, WS_OP_BINARY, NULL, 0, NULL, 0);
	}
	struct process_result pr;
	struct err e = ERR_INIT;
	int code = 1;
	if (done && process_finish(s->run, &pr, &e) == 0) {
		code = pr.exit_code < 0 ? 137 : pr.exit_code;
		process_result_release(&pr);
	} else if (s->killed) {
		code = 143;
	}
	process_run_free(s->run); /* kills what is left of it */
	s->run = NULL;
	if (s->broken || s->closing)
		return;
	unsigned char exit_msg[2] = {SX_EXIT, (unsigned char)code};
	send_parts(s, WS_OP_BINARY, exit_msg, 2, NULL, 0);
	unsigned char c[2] = {WS_CLOSE_NORMAL >> 8, WS_CLOSE_NORMAL & 0xff};
	send_parts(s, WS_OP_CLOSE, c, 2, NULL, 0);
}

struct query_ctx {
	struct sx *s;
	struct err *e;
	int tty;
};

static int query_arg(void *cls, const char *name, const char *value)
{
	struct query_ctx *q = cls;
	struct sx *s = q->s;
	if (strcmp(name, "cmd") == 0) {
		if (s->argc >= SX_MAX_ARGS)
			return err_set(q->e, ERR_INVALID, E2BIG, "more than %d 'cmd'", SX_MAX_ARGS);
		if (!(s->argv[s->argc++] = strdup(value)))
			return err_set(q->e, ERR_INTERNAL, ENOMEM, "out of memory");
	} else if (strcmp(name, "env") == 0) {
		const char *eq = strchr(value, '=');
		if (!eq || eq == value)
			return err_set(q->e, ERR_INVALID, EINVAL, "'env' must be K=V");
		if (s->envc >= SX_MAX_ENV)
			return err_set(q->e, ERR_INVALID, E2BIG, "more than %d 'env'", SX_MAX_ENV);
		if (!(s->env[s->envc++] = strdup(value)))
			return err_set(q->e, ERR_INTERNAL, ENOMEM, "out of memory");
	} else if (strcmp(name, "dir") == 0) {
		if (value[0] != '/')
			return err_set(q->e, ERR_INVALID, EINVAL, "'dir' must be an absolute path");
		free(s->cwd);
		if (!(s->cwd = strdup(value)))
			return err_set(q->e, ERR_INTERNAL, ENOMEM, "out of memory");
	} else if (strcmp(name, "tty") == 0 && strcmp(value, "true") == 0) {
		q->tty = 1;
	}
	return 0;
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

/* Starts the command of the request in its sandbox. */
static int sx_start(struct http_request *req, struct sx *s, struct err *e)
{
	struct api *api = req->app;
	struct process_opts o = {
	    .argv = (const char *const *)s->argv,
	    .env = (const char *const *)s->env,
	    .cwd = s->cwd,
	    .max_output = api->exec_max_output,
	    .timeout_ms = api->exec_timeout_max_s * 1000,
	    .keep_stdin_open = 1,
	};
	struct sandbox *sb;
	if (compat_enter(api, req->captures[0], &sb, e) < 0)
		return err_code(e);
	int r = process_start(sandbox_procs(sb), &o, &s->run, e);
	compat_release(sb);
	return r;
}

int sp_exec(struct http_request *req, struct http_response *res, struct err *e)
{
	const char *key = http_header(req, "Sec-WebSocket-Key");
	char accept[WS_ACCEPT_LEN + 1];
	if (!has_token(http_header(req, "Upgrade"), "websocket") ||
	    !has_token(http_header(req, "Connection"), "upgrade") || !key ||
	    ws_accept_key(key, accept) < 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "exec is a WebSocket (HTTP exec and the session list are not "
			       "supported by deskbox)");
	struct sx *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	s->fd = s->stop_fd = -1;
	struct query_ctx q = {s, e, 0};
	int r = http_each_query(req, query_arg, &q) != 0 ? err_code(e) : 0;
	if (r == 0 && !s->argc)
		r = err_set(e, ERR_INVALID, EINVAL, "no 'cmd'");
	if (r == 0 && q.tty)
		r = err_set(e, ERR_INVALID, ENOTSUP, "tty=true is not supported by deskbox");
	if (r == 0)
		r = sx_start(req, s, e);
	if (r < 0) {
		sx_free(s);
		return r;
	}
	s->stop_fd = http_stop_fd(req);
	http_reply_upgrade(res, sx_run, s, sx_free);
	if (http_add_header(res, "Upgrade", "websocket", e) < 0 ||
	    http_add_header(res, "Sec-WebSocket-Accept", accept, e) < 0)
		return err_code(e);
	return 0;
}
