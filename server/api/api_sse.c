/* Server-Sent Events bodies (internal.h, "api_sse"): one growing buffer of
 * pending bytes, filled by events and drained by a streamed response's
 * reader. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void api_sse_append(struct api_sse *s, const char *data, size_t n)
{
	if (s->failed || n == 0) /* nothing, perhaps into no buffer yet */
		return;
	if (s->len + n > s->cap) {
		size_t ncap = s->cap ? s->cap : 8192;
		while (ncap < s->len + n)
			ncap *= 2;
		char *nb = realloc(s->buf, ncap);
		if (!nb) {
			s->failed = 1;
			return;
		}
		s->buf = nb;
		s->cap = ncap;
	}
	memcpy(s->buf + s->len, data, n);
	s->len += n;
}

void api_sse_event(struct api_sse *s, const char *name, const cJSON *j)
{
	char *text = j ? cJSON_PrintUnformatted(j) : NULL;
	if (!text) {
		s->failed = 1;
		return;
	}
	api_sse_append(s, "event: ", 7);
	api_sse_append(s, name, strlen(name));
	api_sse_append(s, "\ndata: ", 7);
	api_sse_append(s, text, strlen(text));
	api_sse_append(s, "\n\n", 2);
	free(text);
}

size_t api_sse_take(struct api_sse *s, char *buf, size_t max)
{
	if (s->off == s->len) {
		s->off = s->len = 0;
		return 0;
	}
	size_t n = s->len - s->off < max ? s->len - s->off : max;
	memcpy(buf, s->buf + s->off, n);
	s->off += n;
	return n;
}

void api_sse_release(struct api_sse *s)
{
	free(s->buf);
	*s = (struct api_sse){0};
}
