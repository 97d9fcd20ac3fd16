/* Framings of streamed bodies shared by the front-ends: Connect RPC's
 * envelopes and NDJSON lines (http.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int http_connect_unwrap(const char *body, size_t len, const char **msg, size_t *msg_len,
			struct err *e)
{
	const unsigned char *b = (const unsigned char *)body;
	if (len < 5)
		return err_set(e, ERR_INVALID, EINVAL, "a Connect envelope needs 5 bytes of head");
	if (b[0] & 0x01)
		return err_set(e, ERR_INVALID, EINVAL,
			       "compressed Connect messages are not accepted");
	if (b[0] != 0)
		return err_set(e, ERR_INVALID, EINVAL, "unknown Connect envelope flags 0x%02x",
			       b[0]);
	/* SECURITY: the length is the peer's; checked against what came. */
	uint32_t n = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
	if (n > HTTP_CONNECT_MAX_MESSAGE)
		return err_set(e, ERR_TOO_LARGE, E2BIG, "Connect message over %u bytes",
			       HTTP_CONNECT_MAX_MESSAGE);
	if (n != len - 5)
		return err_set(e, ERR_INVALID, EINVAL,
			       "the body must be exactly one Connect envelope (%u bytes announced, "
			       "%zu sent)",
			       n, len - 5);
	*msg = body + 5;
	*msg_len = n;
	return 0;
}

void http_frames_add(struct http_frames *f, const void *data, size_t n)
{
	if (f->failed || n == 0)
		return;
	if (f->off == f->len)
		f->off = f->len = 0;
	if (f->len + n > f->cap) {
		size_t cap = f->cap ? f->cap : 1024;
		while (cap < f->len + n)
			cap *= 2;
		char *nb = realloc(f->buf, cap);
		if (!nb) {
			f->failed = 1;
			return;
		}
		f->buf = nb;
		f->cap = cap;
	}
	memcpy(f->buf + f->len, data, n);
	f->len += n;
}

void http_frames_connect(struct http_frames *f, unsigned flags, const cJSON *j)
{
	char *s = cJSON_PrintUnformatted(j);
	if (!s) {
		f->failed = 1;
		return;
	}
	size_t n = strlen(s);
	unsigned char head[5] = {(unsigned char)flags, (unsigned char)(n >> 24),
				 (unsigned char)(n >> 16), (unsigned char)(n >> 8),
				 (unsigned char)n};
	http_frames_add(f, head, sizeof(head));
	http_frames_add(f, s, n);
	free(s);
}

void http_frames_ndjson(struct http_frames *f, const cJSON *j)
{
	char *s = cJSON_PrintUnformatted(j);
	if (!s) {
		f->failed = 1;
		return;
	}
	http_frames_add(f, s, strlen(s));
	http_frames_add(f, "\n", 1);
	free(s);
}

size_t http_frames_take(struct http_frames *f, char *buf, size_t max)
{
	size_t n = f->len - f->off;
	if (n > max)
		n = max;
	if (n == 0) /* also before anything was added: no buffer yet */
		return 0;
	memcpy(buf, f->buf + f->off, n);
	f->off += n;
	return n;
}

void http_frames_release(struct http_frames *f)
{
	free(f->buf);
	*f = (struct http_frames){0};
}
