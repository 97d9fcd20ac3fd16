/* Daytona's routes: the control plane under /daytona/api, the toolbox
 * under /daytona/toolbox/{id} (docs/compat.md).  Credentials are
 * deskbox's API token as Daytona's API key (Authorization: Bearer), checked
 * by the http layer; the socket.io channel checks the key it carries. */
#include "internal.h"

#define API "/daytona/api"
#define SBX API "/sandbox/{id}"
#define TB  "/daytona/toolbox/{id}"

const struct http_route daytona_routes[] = {
    {"POST", API "/sandbox", dt_sandbox_create, 0, NULL, NULL, NULL},
    {"GET", API "/sandbox", dt_sandbox_list, 0, NULL, NULL, NULL},
    {"GET", API "/sandbox/paginated", dt_sandbox_list, 0, NULL, NULL, NULL},
    {"GET", SBX, dt_sandbox_get, 0, NULL, NULL, NULL},
    {"DELETE", SBX, dt_sandbox_delete, 0, NULL, NULL, NULL},
    {"POST", SBX "/start", dt_sandbox_start, 0, NULL, NULL, NULL},
    {"POST", SBX "/stop", dt_sandbox_stop, 0, NULL, NULL, NULL},
    {"PUT", SBX "/labels", dt_sandbox_labels, 0, NULL, NULL, NULL},
    {"POST", SBX "/autostop/{n}", dt_sandbox_autostop, 0, NULL, NULL, NULL},
    {"GET", SBX "/toolbox-proxy-url", dt_sandbox_proxy_url, 0, NULL, NULL, NULL},
    /* Cloud features deskbox has no counterpart for. */
    {"POST", SBX "/archive", dt_unsupported, 0, NULL, NULL, NULL},
    {"POST", SBX "/autoarchive/{n}", dt_unsupported, 0, NULL, NULL, NULL},
    {"POST", SBX "/autodelete/{n}", dt_unsupported, 0, NULL, NULL, NULL},
    {"POST", SBX "/autopause/{n}", dt_unsupported, 0, NULL, NULL, NULL},
    {"POST", SBX "/resize", dt_unsupported, 0, NULL, NULL, NULL},
    {"POST", SBX "/public/{v}", dt_unsupported, 0, NULL, NULL, NULL},
    {"GET", SBX "/ports/{port}/preview-url", dt_unsupported, 0, NULL, NULL, NULL},
    {"GET", SBX "/signing-key", dt_unsupported, 0, NULL, NULL, NULL},
    {"*", API "/snapshots", dt_unsupported, 0, NULL, NULL, NULL},
    {"*", API "/volumes", dt_unsupported, 0, NULL, NULL, NULL},
    {"GET", API "/socket.io/", dt_socketio, HTTP_NO_AUTH, NULL, NULL, NULL},

    {"POST", TB "/process/execute", dt_execute, 0, NULL, NULL, NULL},
    {"POST", TB "/process/code-run", dt_code_run, 0, NULL, NULL, NULL},
    {"POST", TB "/process/session", dt_session_create, 0, NULL, NULL, NULL},
    {"GET", TB "/process/session", dt_session_get, 0, NULL, NULL, NULL},
    {"GET", TB "/process/session/{name}", dt_session_get, 0, NULL, NULL, NULL},
    {"DELETE", TB "/process/session/{name}", dt_session_delete, 0, NULL, NULL, NULL},
    {"POST", TB "/process/session/{name}/exec", dt_session_exec, 0, NULL, NULL, NULL},
    {"*", TB "/process/session/{name}/command/{path*}", dt_unsupported, 0, NULL, NULL, NULL},
    {"POST", TB "/files/bulk-upload", dt_upload, HTTP_STREAM_BODY, dt_upload_begin, NULL, NULL},
    {"POST", TB "/files/bulk-download", dt_download, 0, NULL, NULL, NULL},
    {"GET", TB "/files", dt_files_list, 0, NULL, NULL, NULL},
    {"DELETE", TB "/files", dt_files_delete, 0, NULL, NULL, NULL},
    {"GET", TB "/files/info", dt_files_info, 0, NULL, NULL, NULL},
    {"POST", TB "/files/folder", dt_files_folder, 0, NULL, NULL, NULL},
    {"POST", TB "/files/move", dt_files_move, 0, NULL, NULL, NULL},
    {"GET", TB "/files/find", dt_files_find, 0, NULL, NULL, NULL},
    {"GET", TB "/files/search", dt_files_search, 0, NULL, NULL, NULL},
    {"POST", TB "/files/replace", dt_files_replace, 0, NULL, NULL, NULL},
    {"POST", TB "/files/permissions", dt_files_permissions, 0, NULL, NULL, NULL},
    {"GET", TB "/user-home-dir", dt_home_dir, 0, NULL, NULL, NULL},
    {"GET", TB "/computeruse/screenshot", dt_screenshot, HTTP_BACKGROUND, NULL, NULL, NULL},
    {"GET", TB "/computeruse/screenshot/region", dt_screenshot, HTTP_BACKGROUND, NULL, NULL, NULL},
    {"GET", TB "/computeruse/screenshot/compressed", dt_screenshot, HTTP_BACKGROUND, NULL, NULL,
     NULL},
    {"GET", TB "/computeruse/screenshot/region/compressed", dt_screenshot, HTTP_BACKGROUND, NULL,
     NULL, NULL},
    {"GET", TB "/computeruse/mouse/position", dt_mouse_position, 0, NULL, NULL, NULL},
    {"POST", TB "/computeruse/mouse/{op}", dt_mouse, 0, NULL, NULL, NULL},
    {"POST", TB "/computeruse/keyboard/{op}", dt_keyboard, 0, NULL, NULL, NULL},
    {"GET", TB "/computeruse/display/info", dt_display_info, 0, NULL, NULL, NULL},
    {"GET", TB "/computeruse/display/windows", dt_windows, 0, NULL, NULL, NULL},
    {"POST", TB "/computeruse/start", dt_computer_status, 0, NULL, NULL, NULL},
    {"GET", TB "/computeruse/status", dt_computer_status, 0, NULL, NULL, NULL},
    {"GET", TB "/computeruse/process-status", dt_computer_status, 0, NULL, NULL, NULL},
    /* The desktop is the sandbox's own: it ends with the sandbox. */
    {"POST", TB "/computeruse/stop", dt_unsupported, 0, NULL, NULL, NULL},
    {"*", TB "/computeruse/recordings", dt_unsupported, 0, NULL, NULL, NULL},
    {"*", TB "/computeruse/recordings/{path*}", dt_unsupported, 0, NULL, NULL, NULL},
    {"*", TB "/computeruse/a11y/{path*}", dt_unsupported, 0, NULL, NULL, NULL},
    {"GET", TB "/work-dir", dt_home_dir, 0, NULL, NULL, NULL},
};
const size_t daytona_n_routes = sizeof(daytona_routes) / sizeof(daytona_routes[0]);
