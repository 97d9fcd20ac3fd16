/* vnc: browser viewers of a sandbox's desktop, through deskboxd.
 *
 * A viewer token (vnc_token_create) is 256 random bits in hex, bound to one
 * sandbox, valid until it expires or is revoked, interactive or view-only.
 * Only a SHA-1 of each token is kept, in memory: deskboxd restarting ends
 * every token, as it stops every sandbox.  The page and the WebSocket
 * (server/api/api_viewer.c) accept a viewer token (or the API token);
 * vnc_session_run() is the byte pipe of one viewer.
 *
 * Limits: VNC_MAX_TOKENS live tokens and VNC_MAX_VIEWERS connected viewers
 * per sandbox.  Thread-safe; one mutex guards the registry.
 */
#ifndef DESKBOX_SERVER_VNC_H
#define DESKBOX_SERVER_VNC_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "server/process/process.h"

/* The longest sandbox id a viewer may be bound to (server/sandbox/ ids are
 * 32 hex characters). */
#define VNC_SID_MAX	  64
#define VNC_TOKEN_HEX	  64 /* 32 random bytes */
#define VNC_MAX_TOKENS	  64
#define VNC_MAX_VIEWERS	  8
#define VNC_TTL_DEFAULT_S 3600
#define VNC_TTL_MAX_S	  (7 * 86400)
#define VNC_TOKEN_MAX_LEN 256 /* longer presented tokens are refused unread */

struct vnc;
struct vnc_viewer;

/* What a valid token grants. */
struct vnc_grant {
	int view_only;
	long long expires_at; /* unix seconds; 0: never (the API token) */
	unsigned token_id;    /* 0 for the API token */
};

/* `api_token` is copied: viewer tokens are never made equal to it. */
int vnc_new(struct vnc **out, const char *api_token, struct err *e);
/* Ends every connected viewer (their sessions return soon after) and
 * refuses new ones: the first step of shutting down. */
void vnc_stop_all(struct vnc *v);
/* Frees the registry; no viewer may still be connected. */
void vnc_free(struct vnc *v);

/* A new token for sandbox `sid` (which the caller checked exists).  `token`
 * receives VNC_TOKEN_HEX + 1 bytes.  ERR_LIMIT when the sandbox has
 * VNC_MAX_TOKENS live tokens. */
int vnc_token_create(struct vnc *v, const char *sid, int view_only, long long ttl_s, char *token,
		     long long *expires_at, struct err *e);

/* The same for one part of the sandbox only: `scope` names it ("" is the
 * desktop, "terminal/<tid>" one terminal); a token is accepted only where
 * its scope is asked for (vnc_token_check_scoped). */
#define VNC_SCOPE_MAX 48
int vnc_token_create_scoped(struct vnc *v, const char *sid, const char *scope, int view_only,
			    long long ttl_s, char *token, long long *expires_at, struct err *e);

/* Revokes a token of `sid` and disconnects the viewers using it.
 * ERR_NOT_FOUND when there is no such live token. */
int vnc_token_revoke(struct vnc *v, const char *sid, const char *token, struct err *e);

/* Checks a presented token for `sid` in constant time per stored token.
 * ERR_UNAUTHORIZED when it is missing, unknown, for another sandbox,
 * expired or revoked. */
int vnc_token_check(struct vnc *v, const char *sid, const char *token, struct vnc_grant *g,
		    struct err *e);

int vnc_token_check_scoped(struct vnc *v, const char *sid, const char *scope, const char *token,
			   struct vnc_grant *g, struct err *e);

/* 1 when `token` is the API token (constant time). */
int vnc_is_api_token(const struct vnc *v, const char *token);

/* Registers a connected viewer of `sid` (ERR_LIMIT past VNC_MAX_VIEWERS).
 * Its stop fd becomes readable when it must end (its token was revoked);
 * vnc_viewer_remove() unregisters and frees it. */
int vnc_viewer_add(struct vnc *v, const char *sid, const struct vnc_grant *g,
		   struct vnc_viewer **out, struct err *e);
int vnc_viewer_stop_fd(const struct vnc_viewer *vw);
void vnc_viewer_remove(struct vnc *v, struct vnc_viewer *vw);

/* Forgets the tokens of sandboxes for which alive(cls, sid) says 0, and
 * expired tokens everywhere. */
void vnc_sweep(struct vnc *v, int (*alive)(void *cls, const char *sid), void *cls);

/* One viewer's pipe: WebSocket client on `ws_fd` (after the 101), the
 * sandbox's VNC server on `vnc_fd`.  `extra` holds bytes the client sent
 * right after the request.  Runs until either side closes, the client
 * breaks the protocol, stalls or goes silent, `stop_fd` becomes readable or
 * the grant expires.  Owns neither fd. */
struct vnc_session_opts {
	int ws_fd, vnc_fd, stop_fd;
	int view_only;
	long long expires_at; /* unix seconds, 0: none */
	const char *extra;
	size_t extra_len;
	const char *sid; /* for log lines */
};
void vnc_session_run(const struct vnc_session_opts *o);

/* ---- terminals (viewer_term.c, viewer_term_page.c) ---- */

struct process_term_client;

/* One terminal client over a WebSocket on `ws_fd` (after the 101); the
 * protocol is in viewer_term.c and docs/terminals.md.  Runs until the
 * browser leaves, the terminal ends, `stop_fd` becomes readable (-1: none)
 * or the grant expires.  Owns neither the fd nor the client. */
struct vnc_term_session_opts {
	int ws_fd, stop_fd;
	int view_only;
	long long expires_at; /* unix seconds, 0: none */
	const char *extra;
	size_t extra_len;
	struct process_term_client *client;
	const char *sid; /* for log lines */
};
void vnc_term_session_run(const struct vnc_term_session_opts *o);

/* The terminal page (xterm.js, built in): "%s" in the template stands for
 * "1" (view-only) or "0".  malloc'd, NULL without memory. */
char *vnc_term_page_render(int view_only, size_t *len);
/* The files next to the page ("xterm.js", "xterm.css", "addon-fit.js",
 * "terminal.js"), built in: NULL for any other name. */
const char *vnc_term_static(const char *name, size_t *len, const char **type);

/* ---- the viewer page (viewer_page.c) ---- */

/* vnc_page: the viewer page and its script, built into deskboxd.  The page
 * loads noVNC's core (served from the Debian novnc package's files next to
 * it) and connects to the WebSocket next to it. */
/* The page's template: "%s" stands for "1" (view-only) or "0", "%p" for the
 * modulepreload links of noVNC's modules. */
extern const char vnc_page_html[];
/* The page for a viewer; malloc'd, NUL-terminated, NULL without memory. */
char *vnc_page_render(int view_only, size_t *len);
/* The page's style and script (served as "viewer.css" and "viewer.js"
 * next to the page). */
extern const char vnc_page_css[];
extern const char vnc_page_js[];

/* ---- share tokens for ports (viewer_share.c) ---- */

/* shares: tokens that open one port of one sandbox (its
 * /v1/sandboxes/{id}/ports/{port}/ URLs) without the API token, so a link
 * works in any browser.  Like viewer tokens: 256 random bits in hex, only
 * a SHA-256 kept, in memory, valid until expired or revoked. */
#define SHARE_MAX_TOKENS      256
#define SHARE_MAX_PER_SANDBOX 32

struct shares;

int shares_new(struct shares **out, struct err *e);
void shares_free(struct shares *s);
/* A new token for `port` of `sid`, valid `ttl_s` seconds; `token`
 * receives VNC_TOKEN_HEX + 1 bytes.  ERR_LIMIT past the caps. */
int share_token_create(struct shares *s, const char *sid, unsigned port, long long ttl_s,
		       char *token, long long *expires_at, struct err *e);
/* 0 when `token` is live for exactly (sid, port), else ERR_UNAUTHORIZED. */
int share_token_check(struct shares *s, const char *sid, unsigned port, const char *token,
		      struct err *e);
/* ERR_NOT_FOUND when no such live token. */
int share_token_revoke(struct shares *s, const char *sid, unsigned port, const char *token,
		       struct err *e);
/* Forgets expired tokens and those of sandboxes for which alive() is 0. */
void shares_sweep(struct shares *s, int (*alive)(void *cls, const char *sid), void *cls);

#endif
