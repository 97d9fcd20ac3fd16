/* deskbox's one error contract.
 *
 * Every fallible function returns 0 (or a non-negative value) on success and a
 * negative errno-style code on failure, and describes the failure in a
 * caller-owned `struct err`.  As the error climbs, callers may add context with
 * err_wrap().  Exactly one place (server/http/http.c) turns a `struct err` into an
 * HTTP status and the JSON body {"error":{"code":"...","message":"..."}}.
 * Library code never prints or exits.
 *
 * Messages are lowercase, have no final period and quote their subject:
 *   err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", id);
 */
#ifndef DESKBOX_COMMON_ERROR_H
#define DESKBOX_COMMON_ERROR_H

#include <stddef.h>

/* What kind of failure this is; decides the HTTP status and the JSON code. */
enum err_kind {
	ERR_NONE = 0,
	ERR_INVALID,	  /* 400 invalid_argument: the request is wrong */
	ERR_UNAUTHORIZED, /* 401 unauthorized */
	ERR_FORBIDDEN,	  /* 403 forbidden */
	ERR_NOT_FOUND,	  /* 404 not_found */
	ERR_METHOD,	  /* 405 method_not_allowed */
	ERR_CONFLICT,	  /* 409 conflict: wrong state for this operation */
	ERR_TOO_LARGE,	  /* 413 payload_too_large */
	ERR_UNSUPPORTED,  /* 415 unsupported_media_type */
	ERR_RANGE,	  /* 416 range_not_satisfiable: a byte range past the end */
	ERR_LIMIT,	  /* 429 limit_exceeded: a configured cap was hit */
	ERR_INTERNAL,	  /* 500 internal */
	ERR_UNAVAILABLE,  /* 503 unavailable: retry later (e.g. VNC reconnecting) */
	ERR_TIMEOUT,	  /* 504 timeout */
	ERR_NO_SPACE,	  /* 507 insufficient_storage: quota */
};

#define ERR_MSG_MAX 512

struct err {
	enum err_kind kind;
	int sys_errno; /* the errno behind it, 0 when there is none */
	char msg[ERR_MSG_MAX];
};

#define ERR_INIT                                                                                   \
	{                                                                                          \
		ERR_NONE, 0,                                                                       \
		{                                                                                  \
			0                                                                          \
		}                                                                                  \
	}

/* Records an error and returns -errno (or -EIO when sys_errno is 0), so a
 * function can `return err_set(e, ...);`.  `e` may be NULL. */
int err_set(struct err *e, enum err_kind kind, int sys_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Like err_set(), appending ": strerror(sys_errno)" to the message. */
int err_sys(struct err *e, enum err_kind kind, int sys_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prefixes context to the message already in `e` ("creating sandbox: ...") and
 * returns the same negative code err_set() did. */
int err_wrap(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The negative code for `e` (what err_set() returned). */
int err_code(const struct err *e);

/* "invalid_argument", "not_found", ... for `kind`. */
const char *err_kind_name(enum err_kind kind);

/* The HTTP status for `kind` (500 for ERR_NONE: a failure without a recorded
 * error is a bug). */
int err_http_status(enum err_kind kind);

void err_clear(struct err *e);

#endif
