/* compat/e2b: who may use /files.  The SDK's calls carry the access token
 * the create handed out (deskboxd's API token) in X-Access-Token; the URLs
 * of uploadUrl()/downloadUrl() carry, in its place, a signature of what
 * they allow, as E2B's envd checks it (e2b:src/sandbox/signature.ts):
 *   signature = "v1_" + base64(sha256("path:operation:user:token[:exp]"))
 * with the base64 padding stripped, `operation` "read" or "write", `user`
 * the ?username= ("" when absent) and `exp` ?signature_expiration=, a Unix
 * time after which the URL is refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nettle/base64.h>
#include <nettle/sha2.h>

#include "common/text.h"
#include "internal.h"

#define ACCESS_TOKEN "X-Access-Token"

/* A query parameter decoded, or "" when absent; over 4 KiB is refused. */
static int query_arg(struct http_request *req, const char *name, char *out, size_t size,
		     int *present, struct err *e)
{
	size_t len = 0;
	const char *v = http_query_n(req, name, &len);
	*present = v != NULL;
	if (!v)
		len = 0;
	if (len >= size)
		return err_set(e, ERR_INVALID, E2BIG, "query parameter '%s' over %zu bytes", name,
			       size - 1);
	if (v && memchr(v, '\0', len))
		return err_set(e, ERR_INVALID, EINVAL, "query parameter '%s' holds a NUL", name);
	memcpy(out, v ? v : "", len);
	out[len] = '\0';
	return 0;
}

static int parse_expiration(const char *s, long long *out, struct err *e)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || errno || v < 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "query parameter 'signature_expiration' is not a Unix time");
	*out = v;
	return 0;
}

/* "v1_" + unpadded base64 of the SHA-256 of `raw` into out (>= 48 bytes). */
static void sign(const char *raw, char *out)
{
	uint8_t digest[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;
	sha256_init(&ctx);
	sha256_update(&ctx, strlen(raw), (const uint8_t *)raw);
	sha256_digest(&ctx, sizeof(digest), digest);
	char b64[BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE) + 1];
	base64_encode_raw(b64, sizeof(digest), digest);
	size_t n = BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE);
	while (n && b64[n - 1] == '=')
		n--;
	b64[n] = '\0';
	snprintf(out, 48, "v1_%s", b64);
}

static int check_signature(struct http_request *req, const char *op, struct err *e)
{
	const struct compat *c = req->app;
	char sig[128], path[4096], user[256], exp_s[32];
	int has_sig, has_path, has_user, has_exp;
	if (query_arg(req, "signature", sig, sizeof(sig), &has_sig, e) < 0 ||
	    query_arg(req, "path", path, sizeof(path), &has_path, e) < 0 ||
	    query_arg(req, "username", user, sizeof(user), &has_user, e) < 0 ||
	    query_arg(req, "signature_expiration", exp_s, sizeof(exp_s), &has_exp, e) < 0)
		return err_code(e);
	long long exp = 0;
	if (has_exp && parse_expiration(exp_s, &exp, e) < 0)
		return err_code(e);
	if (!c->token || !*c->token)
		return err_set(e, ERR_UNAUTHORIZED, 0, "signed URLs are not available");
	size_t rl = strlen(path) + strlen(user) + strlen(c->token) + 64;
	char *raw = malloc(rl);
	if (!raw)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (has_exp)
		snprintf(raw, rl, "%s:%s:%s:%s:%lld", path, op, user, c->token, exp);
	else
		snprintf(raw, rl, "%s:%s:%s:%s", path, op, user, c->token);
	char want[48];
	sign(raw, want);
	explicit_bzero(raw, rl);
	free(raw);
	if (!text_equal_secret(sig, want))
		return err_set(e, ERR_UNAUTHORIZED, 0, "invalid signature for %s of this path", op);
	if (has_exp && exp < (long long)time(NULL))
		return err_set(e, ERR_UNAUTHORIZED, 0, "the signature expired at %lld", exp);
	return 0;
}

int e2b_files_auth(struct http_request *req, const char *op, struct err *e)
{
	/* As in envd: the header, when sent, is the credential. */
	const char *tok = http_header(req, ACCESS_TOKEN);
	int r;
	if (tok && *tok)
		r = http_check_secret(http_of(req), tok, e);
	else if (http_query_n(req, "signature", &(size_t){0}))
		r = check_signature(req, op, e);
	else
		r = err_set(e, ERR_UNAUTHORIZED, 0,
			    "missing '" ACCESS_TOKEN "' header (or a signed URL's 'signature')");
	if (r == 0)
		http_request_trusted(req);
	return r;
}
