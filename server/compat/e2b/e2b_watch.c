/* compat/e2b: filesystem.Filesystem/WatchDir, a server stream of
 * {"start":{}}, then {"filesystem":{"name","type"}} per change (names
 * relative to the watched directory; create, modify, delete, move become
 * EVENT_TYPE_CREATE, _WRITE, _REMOVE, _RENAME) and {"keepalive":{}} when
 * idle, onto server/files' watches.  It ends at Connect-Timeout-Ms, when
 * the directory goes away or when the client does. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "common/args.h"
#include "common/clock.h"
#include "server/files/files.h"
#include "server/sandbox/sandbox.h"

#define WAIT_MS	     1000
#define KEEPALIVE_MS 30000

struct wstream {
	struct files_watch *w;
	struct http_frames out;
	char dir[PATH_MAX];
	long long deadline_ms, last_ms;
	int ended;
};

static void message(struct http_frames *f, const char *kind, cJSON *body)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, kind, body);
	http_frames_connect(f, 0, j);
	cJSON_Delete(j);
}

static const char *event_type(const char *t)
{
	if (!t)
		return NULL;
	if (strcmp(t, "create") == 0)
		return "EVENT_TYPE_CREATE";
	if (strcmp(t, "modify") == 0)
		return "EVENT_TYPE_WRITE";
	if (strcmp(t, "delete") == 0)
		return "EVENT_TYPE_REMOVE";
	if (strcmp(t, "move") == 0)
		return "EVENT_TYPE_RENAME";
	return NULL;
}

static void end_stream(struct wstream *s)
{
	cJSON *j = cJSON_CreateObject();
	http_frames_connect(&s->out, HTTP_CONNECT_END_STREAM, j);
	cJSON_Delete(j);
	s->ended = 1;
}

static void change(struct wstream *s, size_t dl, const char *p, const char *type)
{
	if (dl == 1 && p[0] == '/') /* watching "/" */
		p++;
	else if (strncmp(p, s->dir, dl) == 0 && p[dl] == '/')
		p += dl + 1;
	cJSON *fs = cJSON_CreateObject();
	cJSON_AddStringToObject(fs, "name", p);
	cJSON_AddStringToObject(fs, "type", type);
	message(&s->out, "filesystem", fs);
}

static void wait_once(struct wstream *s)
{
	long long now = clock_mono_ms();
	if (s->deadline_ms && now >= s->deadline_ms) {
		end_stream(s);
		return;
	}
	cJSON *events = cJSON_CreateArray();
	int r = files_watch_next(s->w, WAIT_MS, events);
	size_t dl = strlen(s->dir);
	const cJSON *ev;
	cJSON_ArrayForEach(ev, events)
	{
		const char *t = event_type(cJSON_GetStringValue(cJSON_GetObjectItem(ev, "type")));
		const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "path"));
		const char *from = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "from"));
		const char *to = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "to"));
		/* A move is what inotify-based envd reports: the old name
		 * renamed, the new one created. */
		if (t && from)
			change(s, dl, from, t);
		if (t && to)
			change(s, dl, to, "EVENT_TYPE_CREATE");
		if (t && p)
			change(s, dl, p, t);
	}
	cJSON_Delete(events);
	if (r < 0)
		end_stream(s);
	else if (s->out.len == s->out.off && now - s->last_ms > KEEPALIVE_MS)
		message(&s->out, "keepalive", cJSON_CreateObject());
}

static long wstream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct wstream *s = cls;
	size_t n;
	while ((n = http_frames_take(&s->out, buf, max)) == 0) {
		if (s->out.failed)
			return HTTP_STREAM_ERROR;
		if (s->ended)
			return HTTP_STREAM_END;
		wait_once(s);
	}
	s->last_ms = clock_mono_ms();
	return (long)n;
}

static void wstream_release(void *cls)
{
	struct wstream *s = cls;
	files_watch_free(s->w);
	http_frames_release(&s->out);
	free(s);
}

static int watch_args(struct http_request *req, struct wstream *s, int *recursive, struct err *e)
{
	const char *msg, *path;
	size_t len;
	if (http_connect_unwrap(req->body, req->body_len, &msg, &len, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_ParseWithLength(msg, len);
	int r = cJSON_IsObject(j)
		    ? 0
		    : err_set(e, ERR_INVALID, EINVAL, "the message must be a JSON object");
	if (r == 0)
		r = args_string(j, "path", PATH_MAX - 1, ARGS_REQUIRED, &path, e);
	if (r == 0)
		r = files_path_normalize(path, strlen(path), s->dir, sizeof(s->dir), e);
	if (r == 0)
		r = args_bool(j, "recursive", 0, recursive, e);
	cJSON_Delete(j);
	const char *h = http_header(req, "Connect-Timeout-Ms");
	int64_t t = 0;
	if (r == 0 && h && args_parse_int(h, 1, INT32_MAX, &t) < 0)
		r = err_set(e, ERR_INVALID, EINVAL, "bad Connect-Timeout-Ms header");
	s->deadline_ms = t ? clock_mono_ms() + t : 0;
	return r;
}

int e2b_fs_watch(struct http_request *req, struct http_response *res, struct err *e)
{
	struct wstream *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int recursive = 0;
	struct sandbox *sb = NULL;
	struct files_root root = {.fd = -1};
	int r = watch_args(req, s, &recursive, e);
	if (r == 0)
		r = e2b_sandbox_of(req, &sb, e);
	if (r == 0)
		r = sandbox_open_root(sb, &root, e);
	if (r == 0)
		r = files_watch_open(&root, s->dir, recursive, &s->w, e);
	if (sb)
		sandbox_put(sb);
	if (root.fd >= 0)
		close(root.fd);
	if (r < 0) {
		free(s);
		return r;
	}
	message(&s->out, "start", cJSON_CreateObject());
	s->last_ms = clock_mono_ms();
	http_reply_stream(res, 200, "application/connect+json", HTTP_SIZE_UNKNOWN, wstream_read, s,
			  wstream_release);
	return 0;
}
