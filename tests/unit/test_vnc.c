/* Units of the browser viewer: the WebSocket handshake key and frame
 * parser, the view-only RFB filter, viewer tokens, static path routing. */
#include <string.h>

#include "server/http/http.h"
#include "server/viewer/viewer.h"
#include "server/viewer/internal.h"
#include "common/websocket.h"
#include "tests/harness.h"

struct sink {
	unsigned char data[4096];
	size_t len;
	int controls, last_op;
	unsigned char ctl[128];
	size_t ctl_len;
	int data_ends; /* binary messages complete (ws_handler.data_end) */
};

static int on_data_end(void *cls)
{
	((struct sink *)cls)->data_ends++;
	return 0;
}

static int on_data(void *cls, const unsigned char *p, size_t n)
{
	struct sink *s = cls;
	memcpy(s->data + s->len, p, n);
	s->len += n;
	return 0;
}

static int on_control(void *cls, int op, const unsigned char *p, size_t n)
{
	struct sink *s = cls;
	s->controls++;
	s->last_op = op;
	memcpy(s->ctl, p, n);
	s->ctl_len = n;
	return 0;
}

/* Text messages next to a sink for the rest. */
struct text_sink {
	struct sink *s;
	char text[64];
	size_t len;
	int ends;
};

static int on_text(void *cls, const unsigned char *p, size_t n, int end)
{
	struct text_sink *t = cls;
	if (end) {
		t->ends++;
		return 0;
	}
	if (t->len + n > sizeof(t->text))
		return -1;
	memcpy(t->text + t->len, p, n);
	t->len += n;
	return 0;
}

static int on_data_ts(void *cls, const unsigned char *p, size_t n)
{
	return on_data(((struct text_sink *)cls)->s, p, n);
}

static int on_control_ts(void *cls, int op, const unsigned char *p, size_t n)
{
	return on_control(((struct text_sink *)cls)->s, op, p, n);
}

/* A masked client frame. */
static size_t client_frame(unsigned char *out, int fin, int op, const void *payload, size_t n)
{
	static const unsigned char mask[4] = {0x37, 0xfa, 0x21, 0x3d};
	size_t o = 0;
	out[o++] = (unsigned char)((fin ? 0x80 : 0) | op);
	if (n < 126) {
		out[o++] = (unsigned char)(0x80 | n);
	} else {
		out[o++] = 0x80 | 126;
		out[o++] = (unsigned char)(n >> 8);
		out[o++] = (unsigned char)n;
	}
	memcpy(out + o, mask, 4);
	o += 4;
	for (size_t i = 0; i < n; i++)
		out[o + i] = ((const unsigned char *)payload)[i] ^ mask[i & 3];
	return o + n;
}

/* Feeds `buf` one byte at a time (the worst split). */
static int parse_bytewise(struct ws_parser *ps, unsigned char *buf, size_t n, struct sink *s,
			  int *code)
{
	struct ws_handler h = {on_data, on_control, s, NULL, NULL};
	for (size_t i = 0; i < n; i++) {
		int r = ws_parse(ps, buf + i, 1, &h, code);
		if (r < 0)
			return r;
	}
	return 0;
}

static long filter_all(const unsigned char *in, size_t n, unsigned char *out, size_t split)
{
	struct rfb_filter f;
	rfb_filter_init(&f);
	size_t o = 0;
	for (size_t i = 0; i < n; i += split) {
		size_t take = n - i < split ? n - i : split;
		long k = rfb_filter_feed(&f, in + i, take, out + o);
		if (k < 0)
			return -1;
		o += (size_t)k;
	}
	return (long)o;
}

int main(void)
{
	char accept[WS_ACCEPT_LEN + 1];
	is_int(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", accept), 0, "accept key computed");
	is_str(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "RFC 6455 example accept key");
	ok(ws_accept_key("short", accept) < 0, "bad key refused");

	/* Frames: a binary message in two fragments with a ping between,
	 * fed one byte at a time. */
	unsigned char buf[1024];
	size_t n = 0;
	n += client_frame(buf + n, 0, WS_OP_BINARY, "RFB 003", 7);
	n += client_frame(buf + n, 1, WS_OP_PING, "hi", 2);
	n += client_frame(buf + n, 1, WS_OP_CONT, ".008\n", 5);
	struct ws_parser ps;
	struct sink s = {0};
	int code = 0;
	ws_parser_init(&ps);
	is_int(parse_bytewise(&ps, buf, n, &s, &code), 0, "fragmented message with a ping parses");
	ok(s.len == 12 && memcmp(s.data, "RFB 003.008\n", 12) == 0, "payload reassembled");
	ok(s.controls == 1 && s.last_op == WS_OP_PING && s.ctl_len == 2, "ping delivered whole");

	/* data_end: once per binary message, after its last fragment. */
	n = client_frame(buf, 0, WS_OP_BINARY, "ab", 2);
	n += client_frame(buf + n, 1, WS_OP_CONT, "c", 1);
	n += client_frame(buf + n, 1, WS_OP_BINARY, "d", 1);
	memset(&s, 0, sizeof(s));
	ws_parser_init(&ps);
	struct ws_handler hend = {on_data, on_control, &s, NULL, on_data_end};
	is_int(ws_parse(&ps, buf, 4, &hend, &code), 0, "a message's first bytes");
	is_int(s.data_ends, 0, "no data_end inside a message");
	is_int(ws_parse(&ps, buf + 4, n - 4, &hend, &code), 0, "the rest");
	ok(s.data_ends == 2 && s.len == 4 && memcmp(s.data, "abcd", 4) == 0,
	   "data_end after a fragmented message and after a whole one");

	unsigned char big[300];
	memset(big, 'x', sizeof(big));
	n = client_frame(buf, 1, WS_OP_BINARY, big, sizeof(big));
	memset(&s, 0, sizeof(s));
	ws_parser_init(&ps);
	is_int(parse_bytewise(&ps, buf, n, &s, &code), 0, "16-bit length frame");
	is_int(s.len, 300, "16-bit length payload");

	n = client_frame(buf, 1, WS_OP_BINARY, "a", 1);
	buf[1] &= 0x7f; /* unmasked */
	ws_parser_init(&ps);
	ok(parse_bytewise(&ps, buf, n, &s, &code) == WS_ERR_PROTOCOL && code == WS_CLOSE_PROTOCOL,
	   "unmasked client frame refused");
	n = client_frame(buf, 1, WS_OP_CONT, "a", 1);
	ws_parser_init(&ps);
	ok(parse_bytewise(&ps, buf, n, &s, &code) == WS_ERR_PROTOCOL,
	   "continuation without a message refused");
	n = client_frame(buf, 0, WS_OP_PING, "a", 1);
	ws_parser_init(&ps);
	ok(parse_bytewise(&ps, buf, n, &s, &code) == WS_ERR_PROTOCOL,
	   "fragmented control frame refused");
	n = client_frame(buf, 1, WS_OP_TEXT, "a", 1);
	ws_parser_init(&ps);
	ok(parse_bytewise(&ps, buf, n, &s, &code) == WS_ERR_PROTOCOL &&
	       code == WS_CLOSE_UNSUPPORTED,
	   "text frame refused");
	{
		/* With a text handler: a fragmented text message with a binary
		 * message after it, byte by byte. */
		struct text_sink ts = {0};
		struct ws_handler th = {on_data, on_control, &s, on_text, NULL};
		memset(&s, 0, sizeof(s));
		ts.s = &s;
		th.cls = &ts;
		th.data = on_data_ts;
		th.control = on_control_ts;
		n = client_frame(buf, 0, WS_OP_TEXT, "{\"type\":", 8);
		n += client_frame(buf + n, 1, WS_OP_CONT, "\"resize\"}", 10);
		n += client_frame(buf + n, 1, WS_OP_BINARY, "ab", 2);
		ws_parser_init(&ps);
		int r = 0;
		for (size_t i = 0; i < n && r == 0; i++)
			r = ws_parse(&ps, buf + i, 1, &th, &code);
		is_int(r, 0, "text message with a handler parses");
		ok(ts.len == 18 && memcmp(ts.text, "{\"type\":\"resize\"}", 18) == 0 &&
		       ts.ends == 1,
		   "text payload reassembled, its end reported once");
		ok(s.len == 2 && memcmp(s.data, "ab", 2) == 0,
		   "the binary message after it is data");
		n = client_frame(buf, 0, WS_OP_TEXT, "a", 1);
		n += client_frame(buf + n, 1, WS_OP_BINARY, "b", 1);
		ws_parser_init(&ps);
		ok(ws_parse(&ps, buf, n, &th, &code) == WS_ERR_PROTOCOL,
		   "a new message inside a fragmented text message refused");
	}
	n = client_frame(buf, 1, WS_OP_BINARY, "a", 1);
	buf[0] |= 0x40;
	ws_parser_init(&ps);
	ok(parse_bytewise(&ps, buf, n, &s, &code) == WS_ERR_PROTOCOL, "RSV bit refused");
	unsigned char hdr[WS_MAX_HEADER];
	is_int(ws_frame_header(hdr, WS_OP_BINARY, 5), 2, "short server header");
	is_int(ws_frame_header(hdr, WS_OP_BINARY, 70000), 10, "64-bit server header");

	/* The view-only filter. */
	static const unsigned char hello[] = "RFB 003.008\n\x01\x01";
	unsigned char stream[512], out[600];
	size_t sl = 0;
	memcpy(stream, hello, 14);
	sl = 14;
	static const unsigned char setenc[] = {2, 0, 0, 2, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0x21};
	static const unsigned char key[] = {4, 1, 0, 0, 0, 0, 0, 0x61};
	static const unsigned char ptr[] = {5, 1, 0, 10, 0, 20};
	static const unsigned char cut[] = {6, 0, 0, 0, 0, 0, 0, 3, 'a', 'b', 'c'};
	static const unsigned char fbur[] = {3, 1, 0, 0, 0, 0, 4, 0, 3, 0x20};
	unsigned char pixfmt[20] = {0};
	size_t want_len = 14;
	unsigned char want[512];
	memcpy(want, hello, 14);
#define ADD(m, keep)                                                                               \
	do {                                                                                       \
		memcpy(stream + sl, m, sizeof(m));                                                 \
		sl += sizeof(m);                                                                   \
		if (keep) {                                                                        \
			memcpy(want + want_len, m, sizeof(m));                                     \
			want_len += sizeof(m);                                                     \
		}                                                                                  \
	} while (0)
	ADD(pixfmt, 1);
	ADD(setenc, 1);
	ADD(key, 0);
	ADD(fbur, 1);
	ADD(ptr, 0);
	ADD(cut, 0);
	ADD(fbur, 1);
	size_t splits[] = {1, 2, 3, 7, 64, 512};
	for (size_t i = 0; i < sizeof(splits) / sizeof(splits[0]); i++) {
		long k = filter_all(stream, sl, out, splits[i]);
		char name[64];
		snprintf(name, sizeof(name), "filter drops 4/5/6, keeps 0/2/3 (split %zu)",
			 splits[i]);
		ok(k == (long)want_len && memcmp(out, want, want_len) == 0, name);
	}
	unsigned char bad[20];
	memcpy(bad, hello, 14);
	bad[14] = 250; /* xvp: not allowed */
	ok(filter_all(bad, 15, out, 1) < 0, "unknown message type ends the stream");
	ok(filter_all((const unsigned char *)"RFB 003.003\n", 12, out, 12) < 0,
	   "RFB 3.3 refused for view-only");
	memcpy(bad, "RFB 003.008\n\x02", 13);
	ok(filter_all(bad, 13, out, 13) < 0, "security type other than None refused");
	unsigned char hugecut[22];
	memcpy(hugecut, hello, 14);
	memcpy(hugecut + 14, (unsigned char[]){6, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff}, 8);
	ok(filter_all(hugecut, 22, out, 22) < 0, "oversized ClientCutText refused");
	unsigned char extcut[14 + 8 + 4 + 10];
	memcpy(extcut, hello, 14);
	memcpy(extcut + 14, (unsigned char[]){6, 0, 0, 0, 0xff, 0xff, 0xff, 0xfc, 1, 2, 3, 4}, 12);
	memcpy(extcut + 26, fbur, 10);
	ok(filter_all(extcut, sizeof(extcut), out, 5) == 24 && memcmp(out + 14, fbur, 10) == 0,
	   "ExtendedClipboard (negative length) ClientCutText dropped whole");

	/* Tokens. */
	struct vnc *v;
	struct err e = ERR_INIT;
	const char *sid = "0123456789abcdef0123456789abcdef";
	is_int(vnc_new(&v, "the-api-token-xxxxxxxx", &e), 0, "registry");
	char tok[VNC_TOKEN_HEX + 1], tok2[VNC_TOKEN_HEX + 1];
	long long exp;
	is_int(vnc_token_create(v, sid, 1, 60, tok, &exp, &e), 0, "token created");
	is_int(strlen(tok), 64, "token is 256 bits of hex");
	is_int(vnc_token_create(v, sid, 0, 60, tok2, &exp, &e), 0, "second token");
	ok(strcmp(tok, tok2) != 0, "tokens differ");
	struct vnc_grant g;
	ok(vnc_token_check(v, sid, tok, &g, &e) == 0 && g.view_only, "token valid, view-only");
	ok(vnc_token_check(v, sid, tok2, &g, &e) == 0 && !g.view_only, "second is interactive");
	ok(vnc_token_check(v, "ffffffffffffffffffffffffffffffff", tok, &g, &e) < 0 &&
	       e.kind == ERR_UNAUTHORIZED,
	   "token of another sandbox refused");
	ok(vnc_token_check(v, sid, "the-api-token-xxxxxxxx", &g, &e) < 0,
	   "API token is not a viewer token");
	ok(vnc_is_api_token(v, "the-api-token-xxxxxxxx"), "API token recognised");
	ok(vnc_token_check(v, sid, NULL, &g, &e) < 0, "no token refused");
	is_int(vnc_token_revoke(v, sid, tok, &e), 0, "revoke");
	ok(vnc_token_check(v, sid, tok, &g, &e) < 0, "revoked token refused");
	ok(vnc_token_revoke(v, sid, tok, &e) < 0 && e.kind == ERR_NOT_FOUND, "revoke twice: 404");
	int made = 1;
	for (int i = 0; i < VNC_MAX_TOKENS + 1; i++)
		if (vnc_token_create(v, sid, 1, 60, tok, &exp, &e) == 0)
			made++;
	is_int(made, VNC_MAX_TOKENS, "live tokens per sandbox are capped");
	struct vnc_viewer *vw[VNC_MAX_VIEWERS + 1];
	int added = 0;
	for (int i = 0; i < VNC_MAX_VIEWERS + 1; i++)
		if (vnc_viewer_add(v, sid, &g, &vw[added], &e) == 0)
			added++;
	is_int(added, VNC_MAX_VIEWERS, "viewers per sandbox are capped");
	for (int i = 0; i < added; i++)
		vnc_viewer_remove(v, vw[i]);
	vnc_free(v);

	/* Static file routes. */
	char pb[256];
	const char *caps[HTTP_MAX_CAPTURES];
	size_t nc;
	ok(http_route_match("/v1/s/{id}/vnc/{path*}", "/v1/s/x/vnc/core/util/a.js", pb, sizeof(pb),
			    caps, &nc) &&
	       nc == 2 && strcmp(caps[1], "core/util/a.js") == 0,
	   "rest-of-path capture");
	ok(!http_route_match("/v1/s/{id}/vnc/{path*}", "/v1/s/x/vnc/", pb, sizeof(pb), caps, &nc),
	   "rest-of-path capture is never empty");
	return done();
}
