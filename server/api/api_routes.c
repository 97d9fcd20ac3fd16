#include <stddef.h>

#include "api.h"

#define SB "/v1/sandboxes/{id}"
/* A route whose body arrives whole (capped) before the handler runs. */
#define ROUTE(m_, p_, h_, f_)                                                                      \
	{                                                                                          \
		.method = m_, .pattern = p_, .handler = h_, .flags = f_                            \
	}
/* A route whose body streams into begin()'s sink as it arrives. */
#define STREAM(m_, p_, b_, h_)                                                                     \
	{                                                                                          \
		.method = m_, .pattern = p_, .handler = h_, .flags = HTTP_STREAM_BODY, .begin = b_ \
	}

/* Any method, body streamed, credentials checked by the handler. */
#define PROXY(p_, b_, h_)                                                                          \
	{                                                                                          \
		.method = "*", .pattern = p_, .handler = h_,                                       \
		.flags = HTTP_NO_AUTH | HTTP_STREAM_BODY, .begin = b_                              \
	}

const struct http_route api_routes[] = {
    ROUTE("GET", "/healthz", api_health, HTTP_NO_AUTH),
    ROUTE("GET", "/metrics", api_metrics, 0),
    /* This API's description (docs/openapi.yaml), public like /healthz. */
    ROUTE("GET", "/v1/openapi.yaml", api_openapi, HTTP_NO_AUTH),
    ROUTE("POST", "/v1/sandboxes", api_sandbox_create, 0),
    ROUTE("GET", "/v1/sandboxes", api_sandbox_list, 0),
    /* Cluster mode (docs/cluster.md). */
    ROUTE("GET", "/v1/nodes", api_nodes_list, 0),
    ROUTE("POST", "/v1/nodes/{name}/drain", api_node_drain, 0),
    STREAM("POST", "/v1/internal/sandboxes/{id}/move-in", api_move_in_begin, api_move_in),
    ROUTE("GET", SB, api_sandbox_get, 0),
    ROUTE("DELETE", SB, api_sandbox_delete, 0),
    ROUTE("PATCH", SB, api_sandbox_patch, 0),
    ROUTE("POST", SB "/stop", api_sandbox_stop, 0),
    ROUTE("POST", SB "/start", api_sandbox_start, 0),
    /* Lifecycle (docs/lifecycle.md). */
    ROUTE("POST", SB "/timeout", api_sandbox_timeout, 0),
    ROUTE("POST", SB "/pause", api_sandbox_pause, 0),
    ROUTE("POST", SB "/resume", api_sandbox_resume, 0),
    ROUTE("POST", SB "/checkpoints", api_checkpoint_create, 0),
    ROUTE("GET", SB "/checkpoints", api_checkpoint_list, 0),
    ROUTE("POST", SB "/checkpoints/{name}/restore", api_checkpoint_restore, 0),
    ROUTE("DELETE", SB "/checkpoints/{name}", api_checkpoint_delete, 0),
    ROUTE("POST", SB "/fork", api_sandbox_fork, 0),
    ROUTE("POST", "/v1/templates", api_template_put, 0),
    ROUTE("GET", "/v1/templates", api_template_list, 0),
    ROUTE("GET", "/v1/templates/{name}", api_template_get, 0),
    ROUTE("DELETE", "/v1/templates/{name}", api_template_delete, 0),
    ROUTE("PUT", SB "/network", api_sandbox_network, 0),
    /* Secrets (docs/secrets.md): values never come back out. */
    ROUTE("POST", "/v1/secrets", api_secret_put, 0),
    ROUTE("GET", "/v1/secrets", api_secret_list, 0),
    ROUTE("GET", "/v1/secrets/{name}", api_secret_get, 0),
    ROUTE("DELETE", "/v1/secrets/{name}", api_secret_delete, 0),

    /* Images (docs/images.md). */
    ROUTE("GET", "/v1/images", api_image_list, 0),
    ROUTE("POST", "/v1/images", api_image_create, 0),
    ROUTE("GET", "/v1/images/{name}", api_image_get, 0),
    ROUTE("DELETE", "/v1/images/{name}", api_image_delete, 0),
    STREAM("PUT", "/v1/images/{name}/context", api_image_context_begin, api_image_context),
    ROUTE("GET", "/v1/images/{name}/build", api_image_build_log, 0),

    /* Files (docs/files.md): uploads stream to disk as they arrive. */
    STREAM("PUT", SB "/files/upload", api_files_upload_begin, api_files_upload),
    STREAM("POST", SB "/files/upload", api_files_upload_begin, api_files_upload),
    ROUTE("GET", SB "/files/download", api_files_download, 0),
    ROUTE("GET", SB "/files/list", api_files_list, 0),
    ROUTE("GET", SB "/files/stat", api_files_stat, 0),
    ROUTE("POST", SB "/files/mkdir", api_files_mkdir, 0),
    ROUTE("POST", SB "/files/move", api_files_move, 0),
    ROUTE("DELETE", SB "/files", api_files_delete, 0),
    ROUTE("GET", SB "/files/archive", api_files_archive_get, 0),
    STREAM("PUT", SB "/files/archive", api_files_archive_put_begin, api_files_archive_put),
    STREAM("POST", SB "/files/batch", api_files_batch_begin, api_files_batch),
    ROUTE("GET", SB "/files/find", api_files_find, 0),
    ROUTE("GET", SB "/files/search", api_files_search, 0),
    ROUTE("POST", SB "/files/replace", api_files_replace, 0),
    ROUTE("POST", SB "/files/chmod", api_files_chmod, 0),
    ROUTE("POST", SB "/files/chown", api_files_chown, 0),
    ROUTE("GET", SB "/files/watch", api_files_watch, 0),
    ROUTE("GET", SB "/files/upload-status", api_files_upload_status, 0),
    ROUTE("HEAD", SB "/files/upload", api_files_upload_head, 0),

    ROUTE("GET", SB "/desktop/screenshot", api_desktop_screenshot, HTTP_BACKGROUND),
    ROUTE("GET", SB "/desktop/info", api_desktop_info, 0),
    /* Observation (docs/observation.md). */
    ROUTE("GET", SB "/desktop", api_desktop_info, 0),
    ROUTE("POST", SB "/desktop/takeover", api_desktop_takeover, 0),
    ROUTE("DELETE", SB "/desktop/takeover", api_desktop_takeover_end, 0),
    ROUTE("GET", SB "/desktop/events", api_desktop_events, 0),
    ROUTE("POST", SB "/desktop/recordings", api_recording_start, 0),
    ROUTE("GET", SB "/desktop/recordings", api_recording_list, 0),
    ROUTE("GET", SB "/desktop/recordings/{rid}", api_recording_get, 0),
    ROUTE("DELETE", SB "/desktop/recordings/{rid}", api_recording_delete, 0),
    ROUTE("POST", SB "/desktop/recordings/{rid}/stop", api_recording_stop, 0),
    ROUTE("GET", SB "/desktop/recordings/{rid}/actions", api_recording_actions, 0),
    ROUTE("GET", SB "/desktop/accessibility", api_desktop_accessibility, 0),
    ROUTE("POST", SB "/desktop/accessibility/{node}/action", api_desktop_accessibility_action, 0),
    ROUTE("GET", SB "/desktop/cursor", api_desktop_cursor, 0),
    ROUTE("GET", SB "/desktop/windows", api_desktop_windows, 0),
    ROUTE("GET", SB "/desktop/clipboard", api_desktop_clipboard, 0),
    ROUTE("GET", SB "/desktop/apps", api_desktop_apps, 0),
    ROUTE("POST", SB "/desktop/actions", api_desktop_actions, 0),
    ROUTE("POST", SB "/desktop/anthropic", api_desktop_anthropic, 0),
    ROUTE("POST", SB "/desktop/openai", api_desktop_openai, 0),
    ROUTE("POST", SB "/desktop/gemini", api_desktop_gemini, 0),
    ROUTE("POST", SB "/desktop/windows/wait", api_desktop_windows_wait, 0),
    ROUTE("POST", SB "/desktop/windows/{wid}/{op}", api_desktop_window_op, 0),
    /* click, move, drag, scroll, key, type_text, wait, launch, ...: see
     * docs/actions.md; unknown names are 404. */
    ROUTE("POST", SB "/desktop/{action}", api_desktop_action, 0),

    ROUTE("POST", SB "/process/exec", api_process_exec, 0),

    /* MCP's Streamable HTTP transport (docs/mcp.md); GET is 405: no
     * server-initiated stream. */
    ROUTE("POST", SB "/mcp", api_mcp_post, 0),
    ROUTE("DELETE", SB "/mcp", api_mcp_delete, 0),

    /* Browser viewers (docs/vnc.md).  The page, its files and the
     * WebSocket check viewer tokens themselves. */
    ROUTE("POST", SB "/vnc/tokens", api_vnc_token_create, 0),
    ROUTE("DELETE", SB "/vnc/tokens/{token}", api_vnc_token_revoke, 0),
    ROUTE("GET", SB "/vnc/", api_vnc_page, HTTP_NO_AUTH),
    /* The page's takeover button (docs/observation.md). */
    ROUTE("GET", SB "/vnc/takeover", api_vnc_takeover, HTTP_NO_AUTH),
    ROUTE("POST", SB "/vnc/takeover", api_vnc_takeover, HTTP_NO_AUTH),
    ROUTE("DELETE", SB "/vnc/takeover", api_vnc_takeover, HTTP_NO_AUTH),
    ROUTE("GET", SB "/vnc/websockify", api_vnc_websocket, HTTP_NO_AUTH),
    ROUTE("GET", SB "/vnc/{path*}", api_vnc_static, HTTP_NO_AUTH),
    /* Ports (docs/ports.md): share tokens first, since the proxy's
     * pattern would take their paths too; the proxy checks its own
     * credentials (API token or share token) and streams bodies. */
    ROUTE("POST", SB "/ports/{port}/tokens", api_port_token_create, 0),
    ROUTE("DELETE", SB "/ports/{port}/tokens/{token}", api_port_token_revoke, 0),
    ROUTE("*", SB "/ports/{port}", api_port_slash, HTTP_NO_AUTH),
    PROXY(SB "/ports/{port}/", api_port_proxy_begin, api_port_proxy),
    PROXY(SB "/ports/{port}/{path*}", api_port_proxy_begin, api_port_proxy),
    ROUTE("GET", SB "/browser/cdp", api_browser_cdp, 0),
    ROUTE("GET", SB "/browser/cdp/json/{path*}", api_browser_cdp, 0),
    STREAM("GET", SB "/browser/cdp/devtools/{path*}", api_browser_devtools_begin,
	   api_browser_devtools),
    ROUTE("POST", SB "/process/code_run", api_process_code_run, 0),
    /* Before {pid}, which would match "contexts" too. */
    ROUTE("GET", SB "/process/contexts", api_context_list, 0),
    ROUTE("POST", SB "/process/contexts", api_context_create, 0),
    ROUTE("POST", SB "/process/contexts/{cid}/restart", api_context_restart, 0),
    ROUTE("DELETE", SB "/process/contexts/{cid}", api_context_delete, 0),
    ROUTE("GET", SB "/process/{pid}", api_process_status, 0),
    ROUTE("POST", SB "/process/{pid}/kill", api_process_kill, 0),
    ROUTE("GET", SB "/process/{pid}/logs", api_process_logs, 0),
    ROUTE("POST", SB "/process/{pid}/stdin", api_process_stdin, 0),

    /* Terminals (docs/terminals.md).  The page, its files and the
     * WebSocket check viewer tokens themselves, like the desktop's. */
    ROUTE("POST", SB "/terminals", api_terminal_create, 0),
    ROUTE("GET", SB "/terminals", api_terminal_list, 0),
    ROUTE("GET", SB "/terminals/{tid}", api_terminal_get, 0),
    ROUTE("DELETE", SB "/terminals/{tid}", api_terminal_delete, 0),
    ROUTE("POST", SB "/terminals/{tid}/tokens", api_terminal_token_create, 0),
    ROUTE("GET", SB "/terminals/{tid}/", api_terminal_page, HTTP_NO_AUTH),
    ROUTE("GET", SB "/terminals/{tid}/ws", api_terminal_websocket, HTTP_NO_AUTH),
    ROUTE("GET", SB "/terminals/{tid}/{file}", api_terminal_static, HTTP_NO_AUTH),

    /* Shell sessions (docs/terminals.md): cwd and env persist. */
    ROUTE("POST", SB "/sessions", api_session_create, 0),
    ROUTE("GET", SB "/sessions", api_session_list, 0),
    ROUTE("POST", SB "/sessions/{sid}/exec", api_session_exec, 0),
    ROUTE("DELETE", SB "/sessions/{sid}", api_session_delete, 0),
};

const size_t api_n_routes = sizeof(api_routes) / sizeof(api_routes[0]);
