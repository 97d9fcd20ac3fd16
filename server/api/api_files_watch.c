/* GET …/files/watch: a directory's changes as Server-Sent Events.
 *
 *   event: ready                      event: create | modify | delete | move
 *   data: {"path":..,"recursive":..}  data: {"type":..,"path":..,"dir":..}
 *
 *   event: overflow                   event: end
 *   data: {"type":"overflow"}         data: {"reason":"..."}
 *
 * The reader runs on the connection's thread and blocks in
 * files_watch_next() for up to a second at a time; between waits it checks
 * the sandbox's status, so the stream ends (with "end") when the sandbox
 * stops, starts or goes away, when the directory itself is deleted, or
 * after `timeout_s` seconds when the client asked for that.  A
 * keepalive comment every few seconds finds a client that went away: the
 * write fails and the response, with its inotify instance, is released. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "internal.h"
#include "internal_files.h"

#define WAIT_MS	     1000
#define KEEPALIVE_MS 5000

struct watch_sse {
	struct files_watch *w;
	struct sandbox *sb;
	enum sandbox_status status; /* at the start */
	struct api_sse out;
	int ended;
	long long last_ms;
	long long deadline_ms; /* timeout_s; 0: none */
};

static void end(struct watch_sse *s, const char *reason)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "reason", reason);
	api_sse_event(&s->out, "end", j);
	cJSON_Delete(j);
	s->ended = 1;
}

/* Waits once for events and queues them. */
static void wait_once(struct watch_sse *s)
{
	if (sandbox_current_status(s->sb) != s->status) {
		end(s, "the sandbox stopped, started or is going away");
		return;
	}
	if (s->deadline_ms && clock_mono_ms() >= s->deadline_ms) {
		end(s, "timeout_s passed");
		return;
	}
	cJSON *events = cJSON_CreateArray();
	if (!events) {
		s->out.failed = 1;
		return;
	}
	int r = files_watch_next(s->w, WAIT_MS, events);
	const cJSON *ev;
	cJSON_ArrayForEach(ev, events)
	{
		api_sse_event(&s->out, cJSON_GetObjectItem(ev, "type")->valuestring, ev);
	}
	cJSON_Delete(events);
	if (r < 0)
		end(s, "the directory was deleted or moved away");
	else if (s->out.len == 0 && clock_mono_ms() - s->last_ms > KEEPALIVE_MS)
		api_sse_append(&s->out, ": keepalive\n\n", 13);
}

static long watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct watch_sse *s = cls;
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

static void watch_release(void *cls)
{
	struct watch_sse *s = cls;
	files_watch_free(s->w);
	sandbox_put(s->sb);
	api_sse_release(&s->out);
	free(s);
}

int api_files_watch(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	int recursive;
	int64_t timeout_s;
	if (apif_query_path(req, "path", FILES_HOME, path, e) < 0 ||
	    apif_query_flag(req, "recursive", &recursive, e) < 0 ||
	    http_query_int(req, "timeout_s", 0, 86400 * 7, 0, 0, &timeout_s, e) < 0)
		return err_code(e);
	struct watch_sse *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, &s->sb, e) < 0) {
		free(s);
		return err_code(e);
	}
	s->status = sandbox_current_status(s->sb);
	if (files_watch_open(&root, path, recursive, &s->w, e) < 0) {
		sandbox_put(s->sb);
		free(s);
		return err_code(e);
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", path);
	cJSON_AddBoolToObject(j, "recursive", recursive);
	api_sse_event(&s->out, "ready", j);
	cJSON_Delete(j);
	s->last_ms = clock_mono_ms();
	if (timeout_s)
		s->deadline_ms = s->last_ms + timeout_s * 1000;
	http_reply_stream(res, 200, "text/event-stream", HTTP_SIZE_UNKNOWN, watch_read, s,
			  watch_release);
	http_add_header(res, "Cache-Control", "no-cache", NULL);
	return 0;
}
