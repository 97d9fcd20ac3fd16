#include "common/text.h"
#include "common/args.h"
#include "server/http/http.h"
#include "tests/harness.h"

static int match(const char *pattern, const char *path, const char **c0, size_t *n)
{
	static char buf[256];
	static const char *caps[HTTP_MAX_CAPTURES];
	int r = http_route_match(pattern, path, buf, sizeof(buf), caps, n);
	*c0 = *n ? caps[0] : NULL;
	return r;
}

int main(void)
{
	const char *c0;
	size_t n;
	ok(match("/v1/sandboxes", "/v1/sandboxes", &c0, &n) && n == 0, "literal route matches");
	ok(!match("/v1/sandboxes", "/v1/sandboxes/", &c0, &n), "trailing slash differs");
	ok(!match("/v1/sandboxes", "/v1/sandbox", &c0, &n), "prefix does not match");
	ok(match("/v1/sandboxes/{id}", "/v1/sandboxes/abc", &c0, &n) && n == 1, "capture matches");
	is_str(c0, "abc", "capture value");
	ok(!match("/v1/sandboxes/{id}", "/v1/sandboxes/", &c0, &n), "empty capture refused");
	ok(match("/v1/sandboxes/{id}/desktop/click", "/v1/sandboxes/x1/desktop/click", &c0, &n),
	   "capture in the middle");
	is_str(c0, "x1", "capture in the middle is cut at the slash");
	ok(!match("/v1/sandboxes/{id}/desktop/click", "/v1/sandboxes/x1/desktop", &c0, &n),
	   "shorter path refused");
	ok(!match("/v1/sandboxes/{id}", "/v1/sandboxes/a/b", &c0, &n), "longer path refused");
	ok(!match("/v1/x", "v1/x", &c0, &n), "relative path refused");
	ok(match("/v1/x/", "/v1/x/", &c0, &n), "pattern with trailing slash");

	ok(text_equal_secret("secret-token", "secret-token"), "equal tokens");
	ok(!text_equal_secret("secret-tokeN", "secret-token"), "different tokens");
	ok(!text_equal_secret("secret", "secret-token"), "prefix token");
	ok(!text_equal_secret("secret-token-longer", "secret-token"), "longer token");
	ok(!text_equal_secret("", "secret-token"), "empty token");

	int64_t v;
	is_int(args_parse_int("42", 0, 100, &v), 0, "parse int");
	is_int(v, 42, "parsed value");
	ok(args_parse_int("4x", 0, 100, &v) < 0, "trailing junk refused");
	ok(args_parse_int("", 0, 100, &v) < 0, "empty refused");
	ok(args_parse_int("101", 0, 100, &v) < 0, "out of range refused");
	ok(args_parse_int(" 1", 0, 100, &v) < 0, "leading space refused");
	ok(args_parse_int("99999999999999999999999", 0, 100, &v) < 0, "overflow refused");

	cJSON *j = cJSON_Parse("{\"a\":1.5,\"b\":7,\"s\":\"hi\",\"t\":true}");
	struct err e = ERR_INIT;
	ok(args_int(j, "a", 0, 10, 0, 0, &v, &e) < 0, "fraction refused as integer");
	is_int(args_int(j, "b", 0, 10, 0, 0, &v, &e), 0, "integer accepted");
	ok(args_int(j, "b", 0, 5, 0, 0, &v, &e) < 0, "integer out of range refused");
	ok(args_int(j, "zz", 0, 5, 3, ARGS_REQUIRED, &v, &e) < 0, "missing required refused");
	is_int(args_int(j, "zz", 0, 5, 3, 0, &v, &e), 0, "missing optional accepted");
	is_int(v, 3, "default used");
	const char *s;
	ok(args_string(j, "b", 10, 0, &s, &e) < 0, "number is not a string");
	ok(args_string(j, "s", 1, 0, &s, &e) < 0, "string over max length refused");
	static const char *const choices[] = {"left", "right", NULL};
	int idx;
	ok(args_enum(j, "s", choices, 0, 0, &idx, &e) < 0, "value outside the enum refused");
	ok(strstr(e.msg, "left, right") != NULL, "enum error lists the choices");
	static const char *const known[] = {"a", "b", "s", "t", NULL};
	static const char *const also[] = {"zz", NULL};
	is_int(args_only(j, NULL, known, &e), 0, "every field known");
	ok(args_only(j, NULL, choices, &e) < 0, "a field not in the list refused");
	is_int(e.kind, ERR_UNKNOWN_FIELD, "as unknown_field");
	is_str(e.msg, "unknown field 'a'", "naming the field");
	ok(args_only(j, "display", also, &e) < 0, "nested: refused");
	is_str(e.msg, "unknown field 'display.a'", "naming where it sits");
	cJSON_AddNumberToObject(j, "zz", 1);
	ok(args_only(j, NULL, known, &e) < 0, "one field more is refused");
	is_int(args_only2(j, NULL, known, also, &e), 0, "the names of two lists");
	is_int(args_only(NULL, NULL, known, &e), 0, "no object: nothing to refuse");
	cJSON_Delete(j);

	ok(utf8_valid("h\xc3\xa9llo \xe4\xbd\xa0 \xf0\x9f\x98\x80", 15), "valid UTF-8");
	ok(!utf8_valid("\xc0\xaf", 2), "overlong refused");
	ok(!utf8_valid("\xed\xa0\x80", 3), "surrogate refused");
	ok(!utf8_valid("\xe4\xbd", 2), "truncated refused");
	ok(!utf8_valid("\xf4\x90\x80\x80", 4), "past U+10FFFF refused");
	char *clean = utf8_sanitize("a\xff"
				    "b",
				    3);
	is_str(clean,
	       "a\xef\xbf\xbd"
	       "b",
	       "invalid byte replaced by U+FFFD");
	free(clean);
	char *b = base64_encode("foobar", 6);
	is_str(b, "Zm9vYmFy", "base64 of 6 bytes");
	free(b);
	b = base64_encode("fooba", 5);
	is_str(b, "Zm9vYmE=", "base64 with padding");
	free(b);
	size_t bn = 0;
	b = base64_decode("Zm9vYmE=", &bn);
	ok(b && bn == 5 && strcmp(b, "fooba") == 0, "base64 decoded, padding and all");
	free(b);
	b = base64_decode("_-8", &bn);
	ok(b && bn == 2 && (unsigned char)b[0] == 0xff && (unsigned char)b[1] == 0xef,
	   "URL-safe base64 without padding decoded");
	free(b);
	ok(base64_decode("Zm9v!", &bn) == NULL, "a character outside base64 is refused");
	b = base64_decode("", &bn);
	ok(b && bn == 0 && b[0] == '\0', "empty base64 is no bytes");
	free(b);
	return done();
}
