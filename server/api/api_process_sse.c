/* Streamed runs: the output as Server-Sent Events while the run goes on.
 *
 *   event: stdout            event: stderr            event: result
 *   data: {"data":"..."}     data: {"data":"..."}     data: {"exit_code":0,...}
 *
 * A chunk that is not valid UTF-8 also carries "data_b64" with its exact
 * bytes; a multi-byte character split between two reads is held back until
 * it is complete.  The reader runs on the connection's thread and blocks in
 * process_step(); a client that goes away ends the response, and releasing
 * it kills the run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/text.h"
#include "internal.h"

/* Idle comment lines keep proxies from timing the stream out. */
#define KEEPALIVE_MS 15000

struct sse {
	struct process_run *run;
	struct api_sse out; /* pending bytes of the response */
	char carry[2][4];   /* an incomplete UTF-8 tail per stream */
	size_t carry_len[2];
	int finished;
	long long last_ms;
};

/* Queues an event; takes `j`. */
static void event(struct sse *s, const char *name, cJSON *j)
{
	api_sse_event(&s->out, name, j);
	cJSON_Delete(j);
}

/* Length of the tail of data[0..n) that starts a UTF-8 sequence the data
 * does not finish (0-3 bytes). */
static size_t incomplete_tail(const char *data, size_t n)
{
	for (size_t k = 1; k <= 3 && k <= n; k++) {
		unsigned char c = (unsigned char)data[n - k];
		if ((c & 0xC0) == 0x80)
			continue; /* a continuation byte: look further back */
		size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
		return need > k ? k : 0;
	}
	return 0;
}

static void output(void *cls, enum process_stream id, const char *data, size_t n)
{
	struct sse *s = cls;
	int i = id - 1;
	size_t total = s->carry_len[i] + n;
	char *joined = malloc(total + 1);
	if (!joined) {
		s->out.failed = 1;
		return;
	}
	memcpy(joined, s->carry[i], s->carry_len[i]);
	memcpy(joined + s->carry_len[i], data, n);
	size_t tail = incomplete_tail(joined, total);
	memcpy(s->carry[i], joined + total - tail, tail);
	s->carry_len[i] = tail;
	total -= tail;
	joined[total] = '\0';
	if (total) {
		cJSON *j = cJSON_CreateObject();
		api_add_output(j, "data", joined, total);
		event(s, id == PROCESS_STDOUT ? "stdout" : "stderr", j);
	}
	free(joined);
}

static void flush_carry(struct sse *s)
{
	for (int i = 0; i < 2; i++) {
		if (!s->carry_len[i])
			continue;
		/* The run ended inside a character: send the bytes as they
		 * are (text with U+FFFD plus data_b64). */
		size_t n = s->carry_len[i];
		char z[5];
		memcpy(z, s->carry[i], n);
		z[n] = '\0';
		s->carry_len[i] = 0;
		cJSON *j = cJSON_CreateObject();
		api_add_output(j, "data", z, n);
		event(s, i == 0 ? "stdout" : "stderr", j);
	}
}

static long sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *s = cls;
	size_t n;
	while ((n = api_sse_take(&s->out, buf, max)) == 0) {
		if (s->out.failed)
			return HTTP_STREAM_ERROR;
		if (s->finished)
			return HTTP_STREAM_END;
		if (process_step(s->run, 1000, output, s)) {
			flush_carry(s);
			struct process_result pr;
			struct err e = ERR_INIT;
			if (process_finish(s->run, &pr, &e) < 0)
				return HTTP_STREAM_ERROR;
			event(s, "result", api_result_json(&pr, 0));
			process_result_release(&pr);
			s->finished = 1;
		} else if (s->out.len == 0 && clock_mono_ms() - s->last_ms > KEEPALIVE_MS) {
			api_sse_append(&s->out, ": keepalive\n\n", 13);
		}
	}
	s->last_ms = clock_mono_ms();
	return (long)n;
}

static void sse_release(void *cls)
{
	struct sse *s = cls;
	process_run_free(s->run);
	api_sse_release(&s->out);
	free(s);
}

int api_stream_run(struct http_response *res, struct process_run *run, struct err *e)
{
	struct sse *s = calloc(1, sizeof(*s));
	if (!s) {
		process_run_free(run);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	s->run = run;
	s->last_ms = clock_mono_ms();
	http_reply_stream(res, 200, "text/event-stream", HTTP_SIZE_UNKNOWN, sse_read, s,
			  sse_release);
	http_add_header(res, "Cache-Control", "no-cache", NULL);
	return 0;
}
