#include "error.h"
#include "text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const kind_names[] = {
    [ERR_NONE] = "internal",
    [ERR_INVALID] = "invalid_argument",
    [ERR_UNAUTHORIZED] = "unauthorized",
    [ERR_FORBIDDEN] = "forbidden",
    [ERR_NOT_FOUND] = "not_found",
    [ERR_METHOD] = "method_not_allowed",
    [ERR_CONFLICT] = "conflict",
    [ERR_TOO_LARGE] = "payload_too_large",
    [ERR_UNSUPPORTED] = "unsupported_media_type",
    [ERR_RANGE] = "range_not_satisfiable",
    [ERR_LIMIT] = "limit_exceeded",
    [ERR_INTERNAL] = "internal",
    [ERR_UNAVAILABLE] = "unavailable",
    [ERR_TIMEOUT] = "timeout",
    [ERR_NO_SPACE] = "insufficient_storage",
    [ERR_NOT_RUNNING] = "sandbox_not_running",
    [ERR_BAD_GATEWAY] = "bad_gateway",
    [ERR_PAUSED] = "sandbox_paused",
    [ERR_NAME_TAKEN] = "name_taken",
    [ERR_UNKNOWN_FIELD] = "unknown_field",
    [ERR_TAKEN_OVER] = "taken_over",
    [ERR_NOT_IMPLEMENTED] = "not_implemented",
    [ERR_ROOT_DISABLED] = "root_disabled",
    [ERR_NO_QUORUM] = "cluster_unavailable",
};

int err_code(const struct err *e)
{
	if (e && e->sys_errno > 0)
		return -e->sys_errno;
	return -EIO;
}

/* Formatting goes through a buffer a few bytes longer than the message, so
 * that a message that does not fit is cut at a character boundary: the bytes
 * past the cut show whether it falls inside a character. */
#define CUT_SLACK 4

static void set_msg(struct err *e, const char *buf)
{
	size_t n = utf8_cut(buf, sizeof(e->msg) - 1);
	memcpy(e->msg, buf, n);
	e->msg[n] = '\0';
}

static int err_vset(struct err *e, enum err_kind kind, int sys_errno, int add_strerror,
		    const char *fmt, va_list ap)
{
	if (!e)
		return sys_errno > 0 ? -sys_errno : -EIO;
	e->kind = kind;
	e->sys_errno = sys_errno;
	char buf[ERR_MSG_MAX + CUT_SLACK];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (add_strerror && sys_errno > 0 && n >= 0 && (size_t)n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - (size_t)n, ": %s", strerror(sys_errno));
	set_msg(e, buf);
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
	char prefix[ERR_MSG_MAX + CUT_SLACK];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	if (e->kind == ERR_NONE)
		e->kind = ERR_INTERNAL;
	/* The prefix is cut with the whole message below: it holds a few
	 * bytes more than the message can. */
	char buf[2 * ERR_MSG_MAX + CUT_SLACK];
	snprintf(buf, sizeof(buf), "%s: %s", prefix, e->msg);
	set_msg(e, buf);
	return err_code(e);
}

const char *err_kind_name(enum err_kind kind)
{
	if ((size_t)kind >= sizeof(kind_names) / sizeof(kind_names[0]))
		return "internal";
	return kind_names[kind];
}

void err_clear(struct err *e)
{
	e->kind = ERR_NONE;
	e->sys_errno = 0;
	e->msg[0] = '\0';
}
