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
/* The JSON body, refusing "\u0000" (cJSON would cut the string there). */
int apif_json_body(const struct http_request *req, cJSON **out, struct err *e);

/* The request's sandbox and an fd of its "/"; with `keep`, the reference
 * is handed to the caller (sandbox_put), else dropped here. */
int apif_open_root(struct http_request *req, struct files_root *root, struct sandbox **keep,
		   struct err *e);
/* Answers `status` with the stat of `path`. */
int apif_reply_stat(struct http_response *res, int status, const struct files_root *root,
		    const char *path, struct err *e);
void apif_root_close(struct files_root *r);
#define _cleanup_root_ __attribute__((cleanup(apif_root_close)))

#endif
