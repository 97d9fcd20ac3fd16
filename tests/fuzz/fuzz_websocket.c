/* Fuzzes the WebSocket frame parser (common/websocket.c ws_parse).  The
 * first input byte seeds how the rest is split; the rest is what a client
 * sends after the handshake.  Invariants: the outcome (0, the protocol error
 * with its close code, or a callback's stop), the unmasked data and the
 * control frames are the same whether the bytes come in one call, byte by
 * byte or in random pieces; control payloads are at most 125 bytes; the
 * data is never more than the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/websocket.h"
#include "tests/fuzz/split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STOP_ON_CLOSE (-7) /* what a handler returns to stop at a close */

struct run {
	unsigned char *data; /* binary payload, in order */
	size_t data_len;
	unsigned char *ctl; /* per control frame: opcode, length, payload */
	size_t ctl_len, cap;
	int result, close_code;
};

static int on_data(void *cls, const unsigned char *p, size_t n)
{
	struct run *r = cls;
	if (n == 0 || r->data_len + n > r->cap)
		abort();
	memcpy(r->data + r->data_len, p, n);
	r->data_len += n;
	return 0;
}

static int on_control(void *cls, int opcode, const unsigned char *p, size_t n)
{
	struct run *r = cls;
	if (n > WS_MAX_CONTROL ||
	    (opcode != WS_OP_CLOSE && opcode != WS_OP_PING && opcode != WS_OP_PONG) ||
	    r->ctl_len + 2 + n > r->cap + 2)
		abort();
	r->ctl[r->ctl_len++] = (unsigned char)opcode;
	r->ctl[r->ctl_len++] = (unsigned char)n;
	memcpy(r->ctl + r->ctl_len, p, n);
	r->ctl_len += n;
	return opcode == WS_OP_CLOSE ? STOP_ON_CLOSE : 0;
}

/* Feeds a copy of `in` (the parser unmasks in place) in pieces from `sp`,
 * or in one call when sp is NULL, until the end or the first non-zero
 * result. */
static void parse(const unsigned char *in, size_t n, struct split *sp, struct run *r)
{
	memset(r, 0, sizeof(*r));
	r->cap = n;
	r->data = malloc(n + 1);
	r->ctl = malloc(n + 2);
	unsigned char *buf = malloc(n + 1);
	memcpy(buf, in, n);
	struct ws_parser ps;
	ws_parser_init(&ps);
	struct ws_handler h = {.data = on_data, .control = on_control, .cls = r};
	for (size_t off = 0; off < n && r->result == 0;) {
		size_t k = sp ? split_next(sp, n - off) : n;
		r->result = ws_parse(&ps, buf + off, k, &h, &r->close_code);
		off += k;
	}
	if (r->result != 0 && r->result != WS_ERR_PROTOCOL && r->result != STOP_ON_CLOSE)
		abort();
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct split sp, one = {.max = 1};
	split_init(&sp, data[0]);
	struct run r[3];
	parse(data + 1, size - 1, NULL, &r[0]);
	parse(data + 1, size - 1, &one, &r[1]);
	parse(data + 1, size - 1, &sp, &r[2]);
	for (int i = 1; i < 3; i++) {
		if (r[i].result != r[0].result || r[i].data_len != r[0].data_len ||
		    r[i].ctl_len != r[0].ctl_len ||
		    memcmp(r[i].data, r[0].data, r[0].data_len) != 0 ||
		    memcmp(r[i].ctl, r[0].ctl, r[0].ctl_len) != 0)
			abort();
		if (r[0].result == WS_ERR_PROTOCOL && r[i].close_code != r[0].close_code)
			abort();
	}
	for (int i = 0; i < 3; i++) {
		free(r[i].data);
		free(r[i].ctl);
	}
	return 0;
}
