#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int status;
} kinds[] = {
    [ERR_NONE] = {"internal", 500},
    [ERR_INVALID] = {"invalid_argument", 400},
    [ERR_UNAUTHORIZED] = {"unauthorized", 401},
    [ERR_FORBIDDEN] = {"forbidden", 403},
    [ERR_NOT_FOUND] = {"not_found", 404},
    [ERR_METHOD] = {"method_not_allowed", 405},
    [ERR_CONFLICT] = {"conflict", 409},
    [ERR_TOO_LARGE] = {"payload_too_large", 413},
    [ERR_UNSUPPORTED] = {"unsupported_media_type", 415},
    [ERR_RANGE] = {"range_not_satisfiable", 416},
    [ERR_LIMIT] = {"limit_exceeded", 429},
    [ERR_INTERNAL] = {"internal", 500},
    [ERR_UNAVAILABLE] = {"unavailable", 503},
    [ERR_TIMEOUT] = {"timeout", 504},
    [ERR_NO_SPACE] = {"insufficient_storage", 507},
};

int err_code(const struct err *e)
{
	if (e && e->sys_errno > 0)
		return -e->sys_errno;
	return -EIO;
}

static int err_vset(struct err *e, enum err_kind kind, int sys_errno, int add_strerror,
		    const char *fmt, va_list ap)
{
	if (!e)
		return sys_errno > 0 ? -sys_errno : -EIO;
	e->kind = kind;
	e->sys_errno = sys_errno;
	int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	if (add_strerror && sys_errno > 0 && n >= 0 && (size_t)n < sizeof(e->msg))
		snprintf(e->msg + n, sizeof(e->msg) - (size_t)n, ": %s", strerror(sys_errno));
	return err_code(e);
}

int err_set(struct err *e, enum err_kind kind, int sys_errno, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = err_vset(e, kind, sys_errno, 0, fmt, ap);
	va_end(ap);
	return r;
}

int err_sys(struct err *e, enum err_kind kind, int sys_errno, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = err_vset(e, kind, sys_errno, 1, fmt, ap);
	va_end(ap);
	return r;
}

int err_wrap(struct err *e, const char *fmt, ...)
{
	if (!e)
		return -EIO;
	char prefix[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	if (e->kind == ERR_NONE)
		e->kind = ERR_INTERNAL;
	char old[ERR_MSG_MAX];
	memcpy(old, e->msg, sizeof(old));
	snprintf(e->msg, sizeof(e->msg), "%s: %s", prefix, old);
	return err_code(e);
}

const char *err_kind_name(enum err_kind kind)
{
	if ((size_t)kind >= sizeof(kinds) / sizeof(kinds[0]))
		return "internal";
	return kinds[kind].name;
}

int err_http_status(enum err_kind kind)
{
	if ((size_t)kind >= sizeof(kinds) / sizeof(kinds[0]))
		return 500;
	return kinds[kind].status;
}

void err_clear(struct err *e)
{
	e->kind = ERR_NONE;
	e->sys_errno = 0;
	e->msg[0] = '\0';
}
