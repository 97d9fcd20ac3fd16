/* The egress proxy's pieces without a network: the store, the SNI reader
 * and the request rewriting (server/secrets/), fed the way a sandbox's
 * bytes arrive (whole, and one byte at a time). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/secrets/internal.h"
#include "tests/harness.h"

#define PH_API	"deskbox-secret-00000000000000000000000000000001"
#define PH_BODY "deskbox-secret-00000000000000000000000000000002"
#define PH_NONE "deskbox-secret-00000000000000000000000000000003"

static struct secrets *store(const char *dir)
{
	struct secrets *s;
	struct err e = ERR_INIT;
	if (secrets_open(&s, dir, &e) < 0)
		return NULL;
	static const char *const bodies[] = {
	    "{\"name\":\"API_KEY\",\"value\":\"REAL-API\",\"hosts\":[\"api.test\"]}",
	    "{\"name\":\"BODY_KEY\",\"value\":\"REAL-BODY-LONGER\",\"hosts\":[\"*.test\"],"
	    "\"replace_in_body\":true}",
	    "{\"name\":\"ELSEWHERE\",\"value\":\"NOPE\",\"hosts\":[\"other.example\"]}"};
	for (size_t i = 0; i < 3; i++) {
		cJSON *b = cJSON_Parse(bodies[i]), *out = NULL;
		int r = secrets_put(s, b, &out, &e);
		cJSON_Delete(b);
		cJSON_Delete(out);
		if (r < 0)
			return NULL;
	}
	return s;
}

/* What the real host receives for `in`, fed `step` bytes at a time. */
static char *rewrite(struct egress *g, struct egress_binding *b, const char *host, const char *in,
		     size_t step, int *rc)
{
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	struct egress_conn c = {.g = g, .b = b, .up = {sv[0], NULL}, .client = {-1, NULL}};
	snprintf(c.host, sizeof(c.host), "%s", host);
	struct egress_rw *rw;
	egress_rw_new(&c, &rw);
	size_t len = strlen(in), raw;
	*rc = 0;
	for (size_t i = 0; i < len && *rc == 0; i += step)
		*rc = egress_rw_feed(rw, in + i, len - i < step ? len - i : step, &raw);
	egress_rw_free(rw);
	close(sv[0]);
	char *out = calloc(1, 65536);
	size_t got = 0;
	ssize_t n;
	while ((n = read(sv[1], out + got, 65535 - got)) > 0)
		got += (size_t)n;
	close(sv[1]);
	return out;
}

static void test_rewrite(struct secrets *s)
{
	struct egress g = {.secrets = s};
	struct egress_binding b = {.n = 3};
	const char *names[] = {"API_KEY", "BODY_KEY", "ELSEWHERE"};
	const char *phs[] = {PH_API, PH_BODY, PH_NONE};
	for (size_t i = 0; i < 3; i++) {
		snprintf(b.names[i], sizeof(b.names[i]), "%s", names[i]);
		snprintf(b.placeholders[i], sizeof(b.placeholders[i]), "%s", phs[i]);
		b.name_p[i] = b.names[i];
		b.ph_p[i] = b.placeholders[i];
	}
	const char *req = "POST /v1?key=" PH_API " HTTP/1.1\r\nHost: api.test\r\n"
			  "Authorization: Bearer " PH_API "\r\nX-Other: " PH_NONE "\r\n"
			  "Content-Length: 53\r\n\r\nk=" PH_BODY "&x=1";
	const char *want = "POST /v1?key=REAL-API HTTP/1.1\r\nHost: api.test\r\n"
			   "Authorization: Bearer REAL-API\r\nX-Other: " PH_NONE "\r\n"
			   "Content-Length: 22\r\n\r\nk=REAL-BODY-LONGER&x=1";
	for (size_t step = 1; step <= 4096; step *= 4096) {
		int rc;
		char *out = rewrite(&g, &b, "api.test", req, step, &rc);
		is_int(rc, 0, step == 1 ? "a request fed byte by byte" : "a request fed whole");
		is_str(out, want,
		       "placeholders of the host's secrets replaced, the body's length "
		       "corrected, another's left");
		free(out);
	}
	int rc;
	char *out = rewrite(&g, &b, "", req, 4096, &rc);
	ok(rc == 0 && strstr(out, "Bearer " PH_API) && strstr(out, "k=" PH_BODY) &&
	       strstr(out, "Content-Length: 53"),
	   "plain HTTP (no verified host): nothing replaced");
	free(out);
	out = rewrite(&g, &b, "api.test",
		      "GET / HTTP/1.1\r\nHost: evil.test\r\nAuthorization: " PH_API "\r\n\r\n",
		      4096, &rc);
	ok(rc == 0 && strstr(out, PH_API), "a Host other than the verified one: nothing replaced");
	free(out);
	out = rewrite(&g, &b, "api.test",
		      "POST /c HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n"
		      "5\r\nhello\r\n0\r\n\r\nGET /2 HTTP/1.1\r\nHost: api.test\r\nX: " PH_API
		      "\r\n\r\n",
		      4096, &rc);
	ok(rc == 0 && strstr(out, "5\r\nhello\r\n0\r\n\r\nGET /2") && strstr(out, "X: REAL-API"),
	   "a chunked body chunked again, then the next request on the connection");
	free(out);
	out = rewrite(&g, &b, "api.test", "GARBAGE\r\n\r\n", 4096, &rc);
	ok(rc < 0, "a malformed request ends the connection");
	free(out);
	struct egress_stats st;
	egress_stats(&g, &st);
	/* 2 x (target, header, body), and the second request's header;
	 * refused: 2 x ELSEWHERE's, plain HTTP's 3, the wrong Host's 1. */
	is_int(st.replaced, 7, "every replacement is counted");
	is_int(st.refused, 6, "and every placeholder left as it is");
}

/* A ClientHello with server_name `host` (or none), as a client sends it. */
static size_t client_hello(unsigned char *p, const char *host)
{
	size_t hl = host ? strlen(host) : 0, n = 0;
	unsigned char body[512];
	body[n++] = 3, body[n++] = 3; /* TLS 1.2 */
	memset(body + n, 7, 32), n += 32;
	body[n++] = 0;						       /* session id */
	body[n++] = 0, body[n++] = 2, body[n++] = 0x13, body[n++] = 1; /* one suite */
	body[n++] = 1, body[n++] = 0;				       /* null compression */
	size_t ext = host ? 4 + 2 + 3 + hl : 0;
	body[n++] = (unsigned char)(ext >> 8), body[n++] = (unsigned char)ext;
	if (host) {
		body[n++] = 0, body[n++] = 0; /* server_name */
		body[n++] = (unsigned char)((hl + 5) >> 8), body[n++] = (unsigned char)(hl + 5);
		body[n++] = (unsigned char)((hl + 3) >> 8), body[n++] = (unsigned char)(hl + 3);
		body[n++] = 0, body[n++] = (unsigned char)(hl >> 8), body[n++] = (unsigned char)hl;
		memcpy(body + n, host, hl), n += hl;
	}
	p[0] = 22, p[1] = 3, p[2] = 1;
	p[3] = (unsigned char)((n + 4) >> 8), p[4] = (unsigned char)(n + 4);
	p[5] = 1, p[6] = 0, p[7] = (unsigned char)(n >> 8), p[8] = (unsigned char)n;
	memcpy(p + 9, body, n);
	return n + 9;
}

static void test_sni(void)
{
	unsigned char hello[600];
	char host[256];
	size_t n = client_hello(hello, "API.Secret.TEST");
	is_int(egress_sni(hello, n, host, sizeof(host)), 1, "a ClientHello's server name");
	is_str(host, "api.secret.test", "lowercased");
	is_int(egress_sni(hello, n - 3, host, sizeof(host)), -1, "a cut one asks for more");
	n = client_hello(hello, NULL);
	is_int(egress_sni(hello, n, host, sizeof(host)), 0, "one without a name");
	is_int(egress_sni((const unsigned char *)"GET / HTTP/1.1\r\n", 16, host, sizeof(host)), -2,
	       "plain HTTP is not TLS");
	n = client_hello(hello, "a.test");
	hello[n - 8] = 0xff; /* the name list's length past the end */
	is_int(egress_sni(hello, n, host, sizeof(host)), -2, "a length past the end is refused");
	n = client_hello(hello, "bad host");
	is_int(egress_sni(hello, n, host, sizeof(host)), -2, "a name with a space is refused");
	/* Every cut and every byte changed: never past the buffer (ASan). */
	n = client_hello(hello, "fuzz.example.org");
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char copy[600];
		memcpy(copy, hello, n);
		copy[i] ^= 0x5a;
		int r = egress_sni(copy, n, host, sizeof(host));
		bad += r < -2 || r > 1 || (r == 1 && strlen(host) > SECRETS_HOST_MAX);
		bad += egress_sni(hello, i, host, sizeof(host)) != -1;
	}
	is_int(bad, 0, "every cut asks for more, every flipped byte gives an answer in bounds");
}

static void test_store(const char *dir)
{
	struct secrets *s = store(dir);
	ok(s != NULL, "a store with three secrets");
	if (!s)
		return;
	ok(secrets_host_match("*.test", "a.b.test") && !secrets_host_match("*.test", "test") &&
	       !secrets_host_match("*.test", "atest") && secrets_host_match("API.test", "api.TEST"),
	   "host patterns: a wildcard matches names below it only");
	cJSON *l = secrets_list_json(s);
	char *text = cJSON_PrintUnformatted(l);
	ok(text && !strstr(text, "REAL-"), "the list holds no value");
	free(text);
	cJSON_Delete(l);
	test_rewrite(s);
	secrets_close(s);
	struct err e = ERR_INIT;
	ok(secrets_open(&s, dir, &e) == 0 && secrets_check(s, "BODY_KEY", &e) == 0,
	   "the store read back");
	char path[512];
	snprintf(path, sizeof(path), "%s/secrets.json", dir);
	struct stat st;
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "secrets.json is 0600");
	secrets_close(s);
}

int main(void)
{
	char dir[] = "/tmp/dbx-egress-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	test_sni();
	test_store(dir);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 1;
	return done();
}
