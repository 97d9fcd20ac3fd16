/* deskbox's one error contract.
 *
 * Every fallible function returns 0 (or a non-negative value) on success and a
 * negative errno-style code on failure, and describes the failure in a
 * caller-owned `struct err`.  As the error climbs, callers may add context with
 * err_wrap().  Exactly one place (server/http/http.c) turns a `struct err`
 * into an HTTP status and the JSON body
 * {"error":{"code":"...","message":"..."}}; the kinds and their code names
 * here know nothing of HTTP.  Library code never prints or exits: what no
 * caller can act on goes to the logger (log.h).
 *
 * Messages are lowercase, have no final period and quote their subject:
 *   err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", id);
 */
#ifndef DESKBOX_COMMON_ERROR_H
#define DESKBOX_COMMON_ERROR_H

#include <stddef.h>

/* What kind of failure this is, with its code name (err_kind_name()). */
enum err_kind {
	ERR_NONE = 0,
	ERR_INVALID,	     /* invalid_argument: the request is wrong */
	ERR_UNAUTHORIZED,    /* unauthorized: no or a wrong credential */
	ERR_FORBIDDEN,	     /* forbidden: the credential does not allow it */
	ERR_NOT_FOUND,	     /* not_found */
	ERR_METHOD,	     /* method_not_allowed */
	ERR_CONFLICT,	     /* conflict: wrong state for this operation */
	ERR_TOO_LARGE,	     /* payload_too_large */
	ERR_UNSUPPORTED,     /* unsupported_media_type */
	ERR_RANGE,	     /* range_not_satisfiable: a byte range past the end */
	ERR_LIMIT,	     /* limit_exceeded: a configured cap was hit */
	ERR_INTERNAL,	     /* internal */
	ERR_UNAVAILABLE,     /* unavailable: retry later (e.g. VNC reconnecting) */
	ERR_TIMEOUT,	     /* timeout */
	ERR_NO_SPACE,	     /* insufficient_storage: quota */
	ERR_NOT_RUNNING,     /* sandbox_not_running: stopped or failed; start it first */
	ERR_BAD_GATEWAY,     /* bad_gateway: a service in the sandbox did not answer */
	ERR_PAUSED,	     /* sandbox_paused: frozen; resume it first */
	ERR_NAME_TAKEN,	     /* name_taken: another sandbox has that name */
	ERR_UNKNOWN_FIELD,   /* unknown_field: a request member deskbox does not know */
	ERR_TAKEN_OVER,	     /* taken_over: a person holds the desktop; agent actions wait */
	ERR_NOT_IMPLEMENTED, /* not_implemented: this server or host cannot do it */
	ERR_ROOT_DISABLED,   /* root_disabled: the sandbox runs without root ("root": false) */
	ERR_NO_QUORUM,	     /* cluster_unavailable: etcd has no quorum: no creates now */
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

/* "invalid_argument", "not_found", ... for `kind` ("internal" for ERR_NONE). */
const char *err_kind_name(enum err_kind kind);

void err_clear(struct err *e);

#endif
