/* api: the REST handlers, one file per API area (api_sandboxes.c,
 * api_desktop.c, api_process.c), and the route table (routes.c). */
#ifndef DESKBOX_SERVER_API_H
#define DESKBOX_SERVER_API_H

#include "http.h"
#include "sandbox.h"

/* What every handler reaches through http_request.app. */
struct api {
	struct sandboxes *sandboxes;
	int exec_timeout_default_s;
	int exec_timeout_max_s;
	size_t exec_max_output;
	int png_level;
};

extern const struct http_route api_routes[];
extern const size_t api_n_routes;

/* Looks up the {id} capture (the first one) and enters an operation on it
 * (sandbox_use): on success the caller must api_release(). */
int api_enter(struct http_request *req, int need_capture, struct sandbox **sb, struct capture **cap,
	      struct err *e);
void api_release(struct sandbox *sb);

int api_health(struct http_request *req, struct http_response *res, struct err *e);

int api_sandbox_create(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_list(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_get(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_delete(struct http_request *req, struct http_response *res, struct err *e);

int api_desktop_screenshot(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_click(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_type_text(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_key(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_move(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_info(struct http_request *req, struct http_response *res, struct err *e);

int api_process_exec(struct http_request *req, struct http_response *res, struct err *e);

#endif
