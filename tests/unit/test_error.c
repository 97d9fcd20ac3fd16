#include <errno.h>

#include <string.h>

#include "common/error.h"
#include "common/text.h"
#include "tests/harness.h"

int main(void)
{
	struct err e = ERR_INIT;
	int r = err_set(&e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", "abc");
	is_int(r, -ENOENT, "err_set returns -errno");
	is_str(e.msg, "no sandbox 'abc'", "message formatted");
	err_wrap(&e, "deleting");
	is_str(e.msg, "deleting: no sandbox 'abc'", "wrap prefixes context");
	is_int(e.kind, ERR_NOT_FOUND, "wrap keeps the kind");
	is_str(err_kind_name(ERR_TOO_LARGE), "payload_too_large", "kind name");
	r = err_sys(&e, ERR_INTERNAL, EACCES, "opening '%s'", "/x");
	is_int(r, -EACCES, "err_sys code");
	is_str(e.msg, "opening '/x': Permission denied", "err_sys appends strerror");
	is_int(err_set(&e, ERR_INVALID, 0, "bad"), -EIO, "no errno gives -EIO");
	is_str(err_kind_name(ERR_NO_SPACE), "insufficient_storage", "quota's code name");
	is_str(err_kind_name(ERR_NONE), "internal", "no kind is internal");
	is_str(err_kind_name(ERR_TAKEN_OVER), "taken_over", "takeover's code name");
	/* cuts at a character boundary */
	is_int((int)utf8_cut("h\xc3\xa9llo", 2), 1, "a cut inside \"\xc3\xa9\" goes before it");
	is_int((int)utf8_cut("h\xc3\xa9llo", 3), 3, "a cut after it keeps it");
	is_int((int)utf8_cut("\xf0\x9f\x98\x80x", 3), 0, "inside a 4-byte character");
	is_int((int)utf8_cut("abc", 64), 3, "a short string whole");
	char name[200];
	for (int i = 0; i < 90; i++)
		memcpy(name + 2 * i, "\xc3\xa9", 2);
	name[180] = '\0';
	err_set(&e, ERR_INVALID, EINVAL, "unknown key '%.*s'", UTF8_CUT(name, 63));
	ok(utf8_valid(e.msg, strlen(e.msg)) && strlen(e.msg) == 13 + 62 + 1,
	   "UTF8_CUT in a message: 31 whole characters");
	char big[ERR_MSG_MAX * 2];
	/* "aa" then "é"s: the buffer's last byte is the first of an "é" */
	memset(big, 'a', 2);
	for (size_t i = 2; i + 2 < sizeof(big); i += 2)
		memcpy(big + i, "\xc3\xa9", 2);
	big[sizeof(big) - 1] = '\0';
	err_set(&e, ERR_INVALID, EINVAL, "%s", big);
	err_wrap(&e, "x");
	ok(utf8_valid(e.msg, strlen(e.msg)), "a message cut by the buffer stays valid UTF-8");
	err_set(&e, ERR_INVALID, EINVAL, "inner");
	err_wrap(&e, "%s", big);
	ok(utf8_valid(e.msg, strlen(e.msg)), "a wrap prefix cut by the buffer stays valid UTF-8");
	return done();
}
