/* Connect RPC envelopes and the frames buffer (server/http/http_connect.c):
 * what the front-ends parse from untrusted peers and what they send. */
#include <stdlib.h>
#include <string.h>

#include "server/http/http.h"
#include "tests/harness.h"

static int unwrap(const char *body, size_t len, const char **msg, size_t *n, enum err_kind *kind)
{
	struct err e = ERR_INIT;
	int r = http_connect_unwrap(body, len, msg, n, &e);
	*kind = e.kind;
	return r;
}

int main(void)
{
	const char *msg;
	size_t n;
	enum err_kind k;
	const char good[] = "\0\0\0\0\2{}";
	ok(unwrap(good, 7, &msg, &n, &k) == 0 && n == 2 && memcmp(msg, "{}", 2) == 0,
	   "one envelope: its message");
	ok(unwrap(good, 4, &msg, &n, &k) < 0 && k == ERR_INVALID, "a head shorter than 5 bytes");
	ok(unwrap(good, 6, &msg, &n, &k) < 0 && k == ERR_INVALID, "a message cut short");
	const char two[] = "\0\0\0\0\2{}\0\0\0\0\2{}";
	ok(unwrap(two, 14, &msg, &n, &k) < 0 && k == ERR_INVALID, "two envelopes are refused");
	const char gz[] = "\1\0\0\0\2{}";
	ok(unwrap(gz, 7, &msg, &n, &k) < 0 && k == ERR_INVALID, "a compressed envelope is refused");
	const char end[] = "\2\0\0\0\2{}";
	ok(unwrap(end, 7, &msg, &n, &k) < 0 && k == ERR_INVALID,
	   "an end-stream flag from a client");
	const char huge[] = "\0\xff\xff\xff\xff{}";
	ok(unwrap(huge, 7, &msg, &n, &k) < 0 && k == ERR_TOO_LARGE,
	   "a length of 4 GiB is refused, not trusted");
	ok(unwrap("\0\0\0\0\0", 5, &msg, &n, &k) == 0 && n == 0, "an empty message");

	struct http_frames f = {0};
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", 7);
	http_frames_connect(&f, 0, j);
	http_frames_connect(&f, HTTP_CONNECT_END_STREAM, j);
	http_frames_ndjson(&f, j);
	cJSON_Delete(j);
	char out[64];
	size_t got = http_frames_take(&f, out, sizeof(out));
	ok(got == 2 * (5 + 9) + 10 && !f.failed, "two envelopes and a line, all taken");
	ok(out[0] == 0 && out[4] == 9 && memcmp(out + 5, "{\"pid\":7}", 9) == 0,
	   "an envelope: flags, big-endian length, message");
	ok(out[14] == HTTP_CONNECT_END_STREAM, "the end-stream envelope's flags");
	ok(memcmp(out + 28, "{\"pid\":7}\n", 10) == 0, "an NDJSON line ends with a newline");
	ok(unwrap(out, 14, &msg, &n, &k) == 0 && n == 9, "what is sent unwraps again");
	ok(http_frames_take(&f, out, sizeof(out)) == 0, "nothing left");
	http_frames_add(&f, "abc", 3);
	ok(http_frames_take(&f, out, 2) == 2 && http_frames_take(&f, out + 2, 8) == 1 &&
	       memcmp(out, "abc", 3) == 0,
	   "taken in pieces");
	http_frames_release(&f);
	return done();
}
