#include <errno.h>

#include "common/error.h"
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
	return done();
}
