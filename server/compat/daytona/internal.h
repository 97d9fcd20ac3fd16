/* Daytona's front-end (docs/compat.md): the control plane
 * (daytona_sandbox.c), the toolbox's process and file calls
 * (daytona_toolbox.c, daytona_files.c), computer use (daytona_computer.c),
 * the socket.io event channel (daytona_socketio.c) and the route table
 * (daytona_routes.c).  Shared by those files only. */
#ifndef DESKBOX_SERVER_COMPAT_DAYTONA_INTERNAL_H
#define DESKBOX_SERVER_COMPAT_DAYTONA_INTERNAL_H

#include "server/compat/internal.h"

/* The control plane is under DAYTONA_API, the toolbox under
 * DAYTONA_TOOLBOX/{id} (the toolboxProxyUrl every sandbox carries). */
#define DAYTONA_API	"/daytona/api"
#define DAYTONA_TOOLBOX "/daytona/toolbox"

/* The label Daytona's SDK takes a sandbox's code language from. */
#define DAYTONA_LANGUAGE_LABEL "code-toolbox-language"

/* Answers an error in the daemon's shape with a Daytona code
 * ("FILE_NOT_FOUND"...) and source "DAYTONA_DAEMON" (the SDK picks its
 * error class by the pair). */
int daytona_daemon_error(struct http_response *res, int status, const char *code,
			 const char *message, struct err *e);

/* daytona_sandbox.c */
int dt_sandbox_create(struct http_request *req, struct http_response *res, struct err *e);
int dt_sandbox_list(struct http_request *req, struct http_response *res, struct err *e);
int dt_sandbox_get(struct http_request *req, struct http_response *res, struct err *e);
int dt_sandbox_delete(struct http_request *req, struct http_response *res, struct err *e);
int dt_sandbox_start(struct http_request *req, struct http_response *res, struct err *e);
int dt_sandbox_stop(struct http_request *req, struct http_response *res, struct err *e);
int dt_sandbox_labels(struct http_request *req, struct http_response *res, struct err *e);
int dt_sandbox_autostop(struct http_request *req, struct http_response *res, struct err *e);
int dt_sandbox_proxy_url(struct http_request *req, struct http_response *res, struct err *e);
/* What deskbox cannot do (archive, snapshots, volumes, ...): 501. */
int dt_unsupported(struct http_request *req, struct http_response *res, struct err *e);

/* daytona_toolbox.c */
int dt_execute(struct http_request *req, struct http_response *res, struct err *e);
int dt_code_run(struct http_request *req, struct http_response *res, struct err *e);
int dt_files_list(struct http_request *req, struct http_response *res, struct err *e);
int dt_files_info(struct http_request *req, struct http_response *res, struct err *e);
int dt_files_folder(struct http_request *req, struct http_response *res, struct err *e);
int dt_files_delete(struct http_request *req, struct http_response *res, struct err *e);
int dt_files_move(struct http_request *req, struct http_response *res, struct err *e);
int dt_files_find(struct http_request *req, struct http_response *res, struct err *e);
int dt_files_search(struct http_request *req, struct http_response *res, struct err *e);
int dt_files_replace(struct http_request *req, struct http_response *res, struct err *e);
int dt_files_permissions(struct http_request *req, struct http_response *res, struct err *e);
int dt_home_dir(struct http_request *req, struct http_response *res, struct err *e);

/* daytona_files.c */
int dt_upload_begin(struct http_request *req, struct http_body_sink *sink, struct err *e);
int dt_upload(struct http_request *req, struct http_response *res, struct err *e);
int dt_download(struct http_request *req, struct http_response *res, struct err *e);

/* daytona_computer.c */
int dt_screenshot(struct http_request *req, struct http_response *res, struct err *e);
int dt_mouse(struct http_request *req, struct http_response *res, struct err *e);
int dt_mouse_position(struct http_request *req, struct http_response *res, struct err *e);
int dt_keyboard(struct http_request *req, struct http_response *res, struct err *e);
int dt_display_info(struct http_request *req, struct http_response *res, struct err *e);
int dt_windows(struct http_request *req, struct http_response *res, struct err *e);
int dt_computer_status(struct http_request *req, struct http_response *res, struct err *e);

/* daytona_sessions.c; sessions' names are kept in metadata under this
 * key (hidden from the labels). */
#define DT_SESSION_KEY "daytona/session/"
int dt_session_create(struct http_request *req, struct http_response *res, struct err *e);
int dt_session_exec(struct http_request *req, struct http_response *res, struct err *e);
int dt_session_get(struct http_request *req, struct http_response *res, struct err *e);
int dt_session_delete(struct http_request *req, struct http_response *res, struct err *e);

/* daytona_socketio.c */
int dt_socketio(struct http_request *req, struct http_response *res, struct err *e);

#endif
