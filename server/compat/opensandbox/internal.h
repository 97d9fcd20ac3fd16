/* OpenSandbox's front-end (docs/compat.md): the lifecycle API
 * and the routes (osb_lifecycle.c), execd (osb_execd.c).  Shared by those
 * files only. */
#ifndef DESKBOX_SERVER_COMPAT_OPENSANDBOX_INTERNAL_H
#define DESKBOX_SERVER_COMPAT_OPENSANDBOX_INTERNAL_H

#include "server/compat/internal.h"

#define OSB	  "/opensandbox"
#define OSB_EXECD OSB "/execd/{id}"

/* 0 when the request carries deskbox's token as OPEN-SANDBOX-API-KEY
 * (the SDK's header; Authorization: Bearer is taken too). */
int osb_auth(struct http_request *req, struct err *e);

/* osb_execd.c */
int osb_ping(struct http_request *req, struct http_response *res, struct err *e);
int osb_command(struct http_request *req, struct http_response *res, struct err *e);
int osb_upload_begin(struct http_request *req, struct http_body_sink *sink, struct err *e);
int osb_upload(struct http_request *req, struct http_response *res, struct err *e);
int osb_download(struct http_request *req, struct http_response *res, struct err *e);
int osb_file_info(struct http_request *req, struct http_response *res, struct err *e);
/* osb_files.c */
int osb_remove(struct http_request *req, struct http_response *res, struct err *e);
int osb_mkdirs(struct http_request *req, struct http_response *res, struct err *e);
int osb_move(struct http_request *req, struct http_response *res, struct err *e);
int osb_unsupported(struct http_request *req, struct http_response *res, struct err *e);

#endif
