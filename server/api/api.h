/* api: the REST handlers, one file per API area (api_sandboxes.c,
 * api_desktop.c, api_process.c), and the route table (routes.c). */
#ifndef DESKBOX_SERVER_API_H
#define DESKBOX_SERVER_API_H

#include "server/http/http.h"
#include "server/sandbox/sandbox.h"

struct vnc;
struct mcp_sessions;
struct shares;

/* What every handler reaches through http_request.app. */
struct pool;

struct api {
	struct sandboxes *sandboxes;
	int exec_timeout_default_s;
	int exec_timeout_max_s;
	size_t exec_max_output;
	int png_level;
	struct vnc *vnc;	  /* browser viewers: tokens and connected viewers */
	struct pool *pool;	  /* warm desktops (server/sandbox/sandbox.h); NULL: none */
	struct mcp_sessions *mcp; /* MCP sessions (server/mcp/mcp.h) */
	struct shares *shares;	  /* share tokens of ports (server/viewer/viewer.h) */
	const char *ports_domain; /* --ports-domain, or NULL */
	struct sandbox_templates *templates; /* server/sandbox/sandbox.h */
	struct secrets *secrets;	     /* server/secrets/secrets.h */
	struct desk_observers *observers;    /* server/desktop/desktop.h: logs, takeover, events */
	struct cluster *cluster;	     /* server/cluster/cluster.h; NULL: a single node */
	unsigned max_sandboxes;		     /* --max-sandboxes, published as capacity */
};

extern const struct http_route api_routes[];
extern const size_t api_n_routes;

/* Looks up the {id} capture (the first one) and enters an operation on it
 * (sandbox_use): on success the caller must api_release(). */
int api_enter(struct http_request *req, int need_capture, struct sandbox **sb, struct capture **cap,
	      struct err *e);
void api_release(struct sandbox *sb);

int api_health(struct http_request *req, struct http_response *res, struct err *e);
int api_metrics(struct http_request *req, struct http_response *res, struct err *e);
/* api_openapi.c: docs/openapi.yaml, built in. */
int api_openapi(struct http_request *req, struct http_response *res, struct err *e);

/* api_secrets.c: /v1/secrets (docs/secrets.md). */
int api_secret_put(struct http_request *req, struct http_response *res, struct err *e);
int api_secret_list(struct http_request *req, struct http_response *res, struct err *e);
int api_secret_get(struct http_request *req, struct http_response *res, struct err *e);
int api_secret_delete(struct http_request *req, struct http_response *res, struct err *e);

int api_sandbox_create(struct http_request *req, struct http_response *res, struct err *e);
/* The create of `body` (consumed) here: its view in *out. */
int api_sandbox_create_json(struct api *api, cJSON *body, cJSON **out, struct err *e);

/* api_cluster.c: cluster mode (docs/cluster.md).  The node's capacity and
 * sandboxes for server/cluster's thread (cls is the api); the forward hook
 * (http_opts.forward) sending a sandbox's requests to its node; a create
 * placed on a node (`body` consumed); the other nodes' sandboxes added to
 * a list; the view of a sandbox whose node is lost (1 with *out). */
cJSON *api_cluster_capacity(void *cls);
cJSON *api_cluster_local(void *cls);
int api_cluster_forward(void *app, struct http_request *req, const char *pattern,
			struct http_forward *out, struct err *e);
int api_cluster_create(struct http_request *req, cJSON *body, struct http_response *res,
		       struct err *e);
void api_cluster_list(struct http_request *req, cJSON *list);
int api_cluster_lost_view(struct api *api, const char *ref, cJSON **out);
int api_nodes_list(struct http_request *req, struct http_response *res, struct err *e);
int api_node_drain(struct http_request *req, struct http_response *res, struct err *e);
/* api_cluster_move.c: drain with "migrate" (the node drained moves its
 * stopped sandboxes away), and the route taking one in. */
int api_node_migrate(struct api *api, const char *node, struct http_response *res, struct err *e);
int api_move_in_begin(struct http_request *req, struct http_body_sink *sink, struct err *e);
int api_move_in(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_list(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_get(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_delete(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_stop(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_start(struct http_request *req, struct http_response *res, struct err *e);
/* A sandbox as every sandbox route answers it: sandbox_json plus the
 * viewer URLs. */
cJSON *api_sandbox_view(struct sandbox *sb);

/* api_lifecycle.c (docs/lifecycle.md): timeouts, pause and resume … */
int api_sandbox_patch(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_timeout(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_pause(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_resume(struct http_request *req, struct http_response *res, struct err *e);
/* … and checkpoints, restore, forks. */
int api_checkpoint_create(struct http_request *req, struct http_response *res, struct err *e);
int api_checkpoint_list(struct http_request *req, struct http_response *res, struct err *e);
int api_checkpoint_restore(struct http_request *req, struct http_response *res, struct err *e);
int api_checkpoint_delete(struct http_request *req, struct http_response *res, struct err *e);
int api_sandbox_fork(struct http_request *req, struct http_response *res, struct err *e);

/* api_templates.c: sandbox templates (docs/lifecycle.md). */
int api_template_put(struct http_request *req, struct http_response *res, struct err *e);
int api_template_list(struct http_request *req, struct http_response *res, struct err *e);
int api_template_get(struct http_request *req, struct http_response *res, struct err *e);
int api_template_delete(struct http_request *req, struct http_response *res, struct err *e);
/* A create body naming a template ({"template":N, …}): replaced by the
 * expanded request; `extra` gets the files and startup commands. */
int api_template_expand(struct api *api, cJSON **body, struct sandbox_template_extra *extra,
			struct err *e);
int api_sandbox_network(struct http_request *req, struct http_response *res, struct err *e);

/* api_images.c (docs/images.md) */
int api_image_list(struct http_request *req, struct http_response *res, struct err *e);
int api_image_create(struct http_request *req, struct http_response *res, struct err *e);
int api_image_get(struct http_request *req, struct http_response *res, struct err *e);
int api_image_delete(struct http_request *req, struct http_response *res, struct err *e);
int api_image_context_begin(struct http_request *req, struct http_body_sink *sink, struct err *e);
int api_image_context(struct http_request *req, struct http_response *res, struct err *e);
int api_image_build_log(struct http_request *req, struct http_response *res, struct err *e);

/* api_files.c (docs/files.md) */
int api_files_upload_begin(struct http_request *req, struct http_body_sink *sink, struct err *e);
int api_files_upload(struct http_request *req, struct http_response *res, struct err *e);
int api_files_download(struct http_request *req, struct http_response *res, struct err *e);
int api_files_list(struct http_request *req, struct http_response *res, struct err *e);
int api_files_stat(struct http_request *req, struct http_response *res, struct err *e);
int api_files_mkdir(struct http_request *req, struct http_response *res, struct err *e);
int api_files_move(struct http_request *req, struct http_response *res, struct err *e);
int api_files_delete(struct http_request *req, struct http_response *res, struct err *e);
/* api_files_tree.c: archives and batches */
int api_files_archive_get(struct http_request *req, struct http_response *res, struct err *e);
int api_files_archive_put_begin(struct http_request *req, struct http_body_sink *sink,
				struct err *e);
int api_files_archive_put(struct http_request *req, struct http_response *res, struct err *e);
int api_files_batch_begin(struct http_request *req, struct http_body_sink *sink, struct err *e);
int api_files_batch(struct http_request *req, struct http_response *res, struct err *e);
/* api_files_find.c: find, search, replace, chmod, chown */
int api_files_find(struct http_request *req, struct http_response *res, struct err *e);
int api_files_search(struct http_request *req, struct http_response *res, struct err *e);
int api_files_replace(struct http_request *req, struct http_response *res, struct err *e);
int api_files_chmod(struct http_request *req, struct http_response *res, struct err *e);
int api_files_chown(struct http_request *req, struct http_response *res, struct err *e);
/* api_files_watch.c */
int api_files_watch(struct http_request *req, struct http_response *res, struct err *e);
/* api_files_resume.c: resumable uploads (PUT …/upload with Content-Range) */
int api_files_resume_begin(struct http_request *req, struct http_body_sink *sink, struct err *e);
int api_files_resume(struct http_request *req, struct http_response *res, struct err *e);
int api_files_upload_status(struct http_request *req, struct http_response *res, struct err *e);
int api_files_upload_head(struct http_request *req, struct http_response *res, struct err *e);

int api_desktop_screenshot(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_info(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_cursor(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_windows(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_clipboard(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_apps(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_windows_wait(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_action(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_window_op(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_actions(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_anthropic(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_openai(struct http_request *req, struct http_response *res, struct err *e);
/* api_observe.c (docs/observation.md): the action log's hook-up, takeover
 * and the events stream. */
struct desk;
/* Sets `d`'s observer (the sandbox's; desk_obs_put it when done) and the
 * route its actions are logged under. */
void api_desk_observe(struct http_request *req, struct sandbox *sb, struct desk *d, int sensitive);
int api_desktop_takeover(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_takeover_end(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_events(struct http_request *req, struct http_response *res, struct err *e);
int api_vnc_takeover(struct http_request *req, struct http_response *res, struct err *e);
/* api_desktop.c: the accessibility tree. */
int api_desktop_accessibility(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_accessibility_action(struct http_request *req, struct http_response *res,
				     struct err *e);
/* api_recordings.c (docs/observation.md). */
int api_recording_start(struct http_request *req, struct http_response *res, struct err *e);
int api_recording_list(struct http_request *req, struct http_response *res, struct err *e);
int api_recording_get(struct http_request *req, struct http_response *res, struct err *e);
int api_recording_stop(struct http_request *req, struct http_response *res, struct err *e);
int api_recording_actions(struct http_request *req, struct http_response *res, struct err *e);
int api_recording_delete(struct http_request *req, struct http_response *res, struct err *e);
int api_desktop_gemini(struct http_request *req, struct http_response *res, struct err *e);

/* api_mcp.c (docs/mcp.md) */
int api_mcp_post(struct http_request *req, struct http_response *res, struct err *e);
int api_mcp_delete(struct http_request *req, struct http_response *res, struct err *e);

int api_process_exec(struct http_request *req, struct http_response *res, struct err *e);

int api_vnc_token_create(struct http_request *req, struct http_response *res, struct err *e);
int api_vnc_token_revoke(struct http_request *req, struct http_response *res, struct err *e);
int api_vnc_page(struct http_request *req, struct http_response *res, struct err *e);
int api_vnc_static(struct http_request *req, struct http_response *res, struct err *e);
int api_vnc_websocket(struct http_request *req, struct http_response *res, struct err *e);
int api_process_code_run(struct http_request *req, struct http_response *res, struct err *e);
int api_process_status(struct http_request *req, struct http_response *res, struct err *e);
int api_process_kill(struct http_request *req, struct http_response *res, struct err *e);
int api_process_logs(struct http_request *req, struct http_response *res, struct err *e);
int api_process_stdin(struct http_request *req, struct http_response *res, struct err *e);
/* api_terminals.c (docs/terminals.md) */
int api_terminal_create(struct http_request *req, struct http_response *res, struct err *e);
int api_terminal_list(struct http_request *req, struct http_response *res, struct err *e);
int api_terminal_get(struct http_request *req, struct http_response *res, struct err *e);
int api_terminal_delete(struct http_request *req, struct http_response *res, struct err *e);
int api_terminal_token_create(struct http_request *req, struct http_response *res, struct err *e);
int api_terminal_page(struct http_request *req, struct http_response *res, struct err *e);
int api_terminal_static(struct http_request *req, struct http_response *res, struct err *e);
int api_terminal_websocket(struct http_request *req, struct http_response *res, struct err *e);
/* api_sessions.c (docs/terminals.md) */
int api_session_create(struct http_request *req, struct http_response *res, struct err *e);
int api_session_list(struct http_request *req, struct http_response *res, struct err *e);
int api_session_exec(struct http_request *req, struct http_response *res, struct err *e);
int api_session_delete(struct http_request *req, struct http_response *res, struct err *e);
int api_context_create(struct http_request *req, struct http_response *res, struct err *e);
int api_context_list(struct http_request *req, struct http_response *res, struct err *e);
int api_context_restart(struct http_request *req, struct http_response *res, struct err *e);
int api_context_delete(struct http_request *req, struct http_response *res, struct err *e);

/* api_ports.c: a URL for every port of a sandbox (docs/ports.md) */
int api_port_proxy_begin(struct http_request *req, struct http_body_sink *sink, struct err *e);
int api_port_proxy(struct http_request *req, struct http_response *res, struct err *e);
int api_port_slash(struct http_request *req, struct http_response *res, struct err *e);
int api_port_token_create(struct http_request *req, struct http_response *res, struct err *e);
int api_port_token_revoke(struct http_request *req, struct http_response *res, struct err *e);
/* http_opts.canon: a sandbox's name in {id} becomes its id, so that
 * names work in every route under /v1/sandboxes/{id} (docs/api.md). */
void api_canon_captures(void *app, const char *pattern, const char **captures, size_t n, char *buf,
			size_t size);
/* http_opts.rewrite for --ports-domain: "{port}-{id}.DOMAIN" hosts (or
 * "{port}-{name}.DOMAIN"). */
int api_ports_rewrite(void *app, const char *host, char *prefix, size_t size);

/* api_cdp.c: the in-sandbox browser over the DevTools protocol */
int api_browser_cdp(struct http_request *req, struct http_response *res, struct err *e);
int api_browser_devtools_begin(struct http_request *req, struct http_body_sink *sink,
			       struct err *e);
int api_browser_devtools(struct http_request *req, struct http_response *res, struct err *e);

#endif
