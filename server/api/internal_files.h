/* Shared by the files route files (api_files*.c); not used elsewhere. */
#ifndef DESKBOX_SERVER_API_INTERNAL_FILES_H
#define DESKBOX_SERVER_API_INTERNAL_FILES_H

#include <cjson/cJSON.h>

#include "api.h"
#include "server/files/files.h"

/* Query parameter `name` as a canonical path (`def` when absent, NULL:
 * required). */
int apif_query_path(const struct http_request *req, const char *name, const char *def, char *out,
		    struct err *e);
/* 1/true or 0/false (absent: 0). */
int apif_query_flag(const struct http_request *req, const char *name, int *out, struct err *e);
/* `mode=0644`: octal permission bits; -1 when absent. */
int apif_query_mode(const struct http_request *req, int *out, struct err *e);
/* A JSON string field as a canonical path: 0, 1 when absent and optional. */
int apif_body_path(const cJSON *body, const char *name, int required, char *out, struct err *e);
/* The JSON body, refusing "\u0000" (cJSON would cut the string there)
 * and any member not in `fields` (args_only()). */
int apif_json_body(const struct http_request *req, const char *const *fields, cJSON **out,
		   struct err *e);

/* The request's sandbox and an fd of its "/"; with `keep`, the reference
 * is handed to the caller (sandbox_put), else dropped here. */
int apif_open_root(struct http_request *req, struct files_root *root, struct sandbox **keep,
		   struct err *e);
/* Answers `status` with the stat of `path`. */
int apif_reply_stat(struct http_response *res, int status, const struct files_root *root,
		    const char *path, struct err *e);
void apif_root_close(struct files_root *r);
#define _cleanup_root_ __attribute__((cleanup(apif_root_close)))

/* Bytes on the sandbox's disk reserved and not yet written (see the
 * upload in api_files.c): the declared Content-Length up front, else
 * chunk by chunk.  `sb` is a reference the hold drops in apif_hold_free(). */
struct hold {
	struct sandbox *sb;
	uint64_t held;
};
int apif_hold_reserve(struct hold *h, uint64_t bytes, struct err *e);
/* Before writing `len` bytes: enough is held. */
int apif_hold_before(struct hold *h, size_t len, struct err *e);
/* After writing them: the filesystem counts them now. */
void apif_hold_after(struct hold *h, size_t len);
/* Reserves the request's Content-Length, when it has one. */
int apif_hold_declared(struct hold *h, const struct http_request *req, struct err *e);
/* Gives back what is held and drops the sandbox reference. */
void apif_hold_free(struct hold *h);

#endif
