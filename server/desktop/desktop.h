/* desktop: the computer-use actions behind /v1/sandboxes/{id}/desktop/...
 * (server/api/api_desktop.c: routes; desktop_actions.c: pointer, keyboard
 * and wait; desktop_batch.c: several actions in one call;
 * desktop_shot.c: screenshots; desktop_anthropic.c and desktop_openai.c:
 * the tool formats, desktop_adapter.c what they share; desktop_x.c:
 * windows, clipboard, the real pointer, clicks RFB cannot carry;
 * desktop_apps.c: launch, open and the applications list).
 *
 * Coordinates: an agent may declare the screen size it works in
 * ("agent_display", per sandbox or per request).  Everything it sends is
 * then in that space and mapped onto the real screen here, once, and
 * screenshots come at that size; without one both spaces are the real
 * screen. */
#ifndef DESKBOX_SERVER_DESKTOP_H
#define DESKBOX_SERVER_DESKTOP_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "capture/capture.h"
#include "input/input.h"
#include "server/process/process.h"

/* The longest any one desktop request may wait or pace input for (the
 * reference computer-use tool allows 100 s for wait and hold_key): keeps
 * every action bounded inside the HTTP idle timeout (120 s). */
#define DESK_MAX_WAIT_MS 100000

/* An operation in progress on one sandbox's desktop.  The caller keeps the
 * sandbox running and its mirror connected while it lasts (in deskboxd,
 * server/api/ does: between sandbox_use and sandbox_unuse); the desktop
 * code knows nothing of sandboxes or requests. */
struct desk_obs;

struct desk {
	struct capture *cap;	     /* the screen mirror and input path */
	struct process_table *procs; /* where deskbox-xtool runs (windows, clipboard) */
	int png_level;		     /* zlib level for PNG screenshots */
	uint32_t w, h;		     /* the real screen */
	uint32_t aw, ah;	     /* the agent's coordinate space (w, h when none declared) */
	/* Observation (desk_observe): NULL, or where the actions are logged
	 * and a takeover is checked; the route that runs them; the request's
	 * "sensitive" flag (typed text left out of the log). */
	struct desk_obs *obs;
	char route[80];
	int sensitive;
	int depth; /* actions in progress: only the outermost is logged */
};

/* Sets `d` up for the screen of `cap`; the agent works in aw x ah (0x0:
 * the real screen). */
void desk_init(struct desk *d, struct capture *cap, struct process_table *procs, uint32_t aw,
	       uint32_t ah, int png_level);

/* Parses an "agent_display" {"width","height"} field of `obj` (absent: 0x0). */
int desk_parse_agent_display(const cJSON *obj, uint32_t *w, uint32_t *h, struct err *e);

/* Agent coordinates to real ones and back. */
void desk_to_real(const struct desk *d, int32_t ax, int32_t ay, int32_t *x, int32_t *y);
void desk_to_agent(const struct desk *d, int32_t x, int32_t y, int32_t *ax, int32_t *ay);

/* Runs the action `name` with arguments `args` (a JSON object) and adds its
 * results to `out`.  ERR_NOT_FOUND for an unknown action. */
int desk_action(struct desk *d, const char *name, const cJSON *args, cJSON *out, struct err *e);

/* The members action `name`'s arguments may have (NULL-terminated; NULL
 * for a name that is no action), and the check of `args` against them and
 * `also` (the fields the request around them carries, e.g. "agent_display"
 * or a batch item's "action"): ERR_UNKNOWN_FIELD naming the first other
 * member, as 'WHERE.NAME' with `where` (desktop_fields.c). */
const char *const *desk_action_fields(const char *name);
int desk_action_check(const char *name, const cJSON *args, const char *const *also,
		      const char *where, struct err *e);
/* The members of a batch, its actions and its "then", all known (what
 * desk_batch() checks before it runs any action). */
int desk_batch_check(const cJSON *body, struct err *e);
/* The members of screenshot options (desk_shot_parse). */
extern const char *const desk_shot_fields[];

/* Sends `seq` to the sandbox (pauses included); ERR_INVALID when its pauses
 * add up to more than DESK_MAX_WAIT_MS. */
int desk_send(struct desk *d, const struct input_seq *seq, struct err *e);

/* What a screenshot is of and how it is encoded. */
struct shot_opts {
	struct capture_rect r; /* real pixels */
	uint32_t ow, oh;       /* output size */
	int format;	       /* enum capture_format */
	int quality;	       /* JPEG and lossy WebP */
	int lossless;	       /* WebP */
	int cursor;
};

struct shot {
	struct capture_image *img; /* shared with the mirror's cache */
	const uint8_t *data;	   /* its encoded bytes */
	size_t len;
	uint32_t w, h;
	uint64_t frame;
	const char *mime;
	char etag[48];
};

/* Screenshot options from a JSON object: x, y, w, h (region, agent space),
 * scale, width, height, format ("png"|"jpeg"|"jpg"|"webp"), quality,
 * lossless (WebP, default true), cursor. */
int desk_shot_parse(const struct desk *d, const cJSON *o, struct shot_opts *so, struct err *e);
/* "image/png", "image/jpeg" or "image/webp" for an enum capture_format. */
const char *desk_shot_mime(int format);
/* The ETag a screenshot with `so` taken at `frame` has now. */
void desk_shot_etag(const struct desk *d, const struct shot_opts *so, uint64_t frame, char *buf,
		    size_t size);
int desk_shot_take(const struct desk *d, const struct shot_opts *so, struct shot *s, struct err *e);
void desk_shot_release(struct shot *s);
/* {"format","media_type","width","height","frame","data":base64}; NULL on
 * allocation failure. */
cJSON *desk_shot_json(const struct shot *s);

/* The waits: {"until":"stable","quiet_ms","timeout_ms"},
 * {"until":"change","since_frame","timeout_ms"} or {"ms"}. */
int desk_wait(struct desk *d, const cJSON *args, cJSON *out, struct err *e);

/* Window, clipboard and program actions, run by deskbox-xtool inside the
 * sandbox (desktop_x.c, desktop_apps.c); `wid` is the {id} of
 * "window_<op>" actions.  ERR_NOT_FOUND when `name` is not one of them. */
int desk_x_action(struct desk *d, const char *name, const char *wid, const cJSON *args, cJSON *out,
		  struct err *e);

/* The actions batch (desktop_batch.c): {"actions":[{"action":NAME,...},
 * ...], "then":{"wait":{...},"screenshot":true|{...}}}; each action's
 * results go to out.results[i], the last frame to out.frame.  The batch
 * stops at the first failing action (the error names its index). */
int desk_batch(struct desk *d, const cJSON *body, cJSON *out, struct err *e);

/* The tool-format adapters (desktop_anthropic.c, desktop_openai.c,
 * desktop_gemini.c): run one
 * tool call taken verbatim and fill `out` with exactly what the format's
 * result is (Anthropic: a tool_result block; OpenAI: a
 * computer_call_output item).  A failure of the action itself is such a
 * result too (t->failed, the reason in it or in t->error); a negative
 * return is left for failures of deskbox itself (out of memory). */
struct desk_tool {
	uint64_t frame; /* of the screenshot in the result, 0 when none */
	int failed;
	/* In: OpenAI's pending_safety_checks were acknowledged by the user. */
	int ack;
	char error[ERR_MSG_MAX];
};
int desk_anthropic(struct desk *d, const cJSON *input, cJSON *out, struct desk_tool *t,
		   struct err *e);
int desk_openai(struct desk *d, const cJSON *input, cJSON *out, struct desk_tool *t, struct err *e);

/* ---- observation (desktop_obs.c, desktop_events.c) ----
 *
 * Every action of an agent passes desk_action() (native routes, the batch,
 * the tool-format adapters, MCP): with an observer set (desk_observe) each
 * one is refused while a person has taken the desktop over (ERR_TAKEN_OVER)
 * and otherwise logged once done: {"time" (unix ms), "route", "action",
 * "params" (typed text "[redacted]" with "sensitive":true), "frame_before",
 * "frame" (the mirror's frame after it), "ok", "error"?}.  The log goes to
 * the observer's event backlog (the events stream) and to its sinks (the
 * recordings' sidecars).  Reads (cursor, windows, clipboard, apps, waits)
 * are neither logged nor refused. */

/* The observers of every sandbox, by sandbox id.  Thread-safe. */
struct desk_observers;
int desk_observers_new(struct desk_observers **out, struct err *e);
void desk_observers_free(struct desk_observers *t);
/* The observer of sandbox `id`, made on first use (NULL: out of memory);
 * the caller drops its reference with desk_obs_put.  `dir` is the
 * sandbox's state dir, where a takeover lease is kept (so it outlives a
 * restart of deskboxd: a new observer takes up a lease still running). */
struct desk_obs *desk_obs_get(struct desk_observers *t, const char *id, const char *dir);
void desk_obs_put(struct desk_obs *o);
/* Forgets sandbox `id`'s observer (the sandbox is deleted); references
 * still held keep it alive until put. */
void desk_observers_forget(struct desk_observers *t, const char *id);

/* Sets `d`'s observer (a reference the caller keeps while `d` is used),
 * the route its actions are logged under and the "sensitive" flag. */
void desk_observe(struct desk *d, struct desk_obs *o, const char *route, int sensitive);

/* An action log sink: `fn(cls, entry)` runs under the observer's lock for
 * every logged action (entry as above); at most DESK_OBS_SINKS at once. */
#define DESK_OBS_SINKS 8
typedef void (*desk_obs_sink_fn)(void *cls, const cJSON *entry);
int desk_obs_sink_add(struct desk_obs *o, desk_obs_sink_fn fn, void *cls, struct err *e);
void desk_obs_sink_remove(struct desk_obs *o, desk_obs_sink_fn fn, void *cls);

/* Takeover: a person holds the desktop for `ttl_s` seconds (renewable by
 * calling again); agent actions answer ERR_TAKEN_OVER until
 * desk_obs_release or the lease ends.  Both add a "takeover" event. */
#define DESK_TAKEOVER_MAX_S 86400
int desk_obs_takeover(struct desk_obs *o, int64_t ttl_s, const char *by, struct err *e);
/* 1 when a takeover was in force and is ended, 0 when there was none. */
int desk_obs_release(struct desk_obs *o);
/* {"active":bool,"by","since","expires_at" (unix ms),"ttl_left_ms"}; NULL
 * on allocation failure. */
cJSON *desk_obs_takeover_json(struct desk_obs *o);

/* The event backlog.  Events have increasing ids from 1; the last
 * DESK_OBS_BACKLOG are kept.  Types: "frame" {"frame","rects":[{x,y,w,h}]},
 * "pointer" {"x","y"}, "action" (a log entry), "takeover" {"active",...}. */
#define DESK_OBS_BACKLOG 1024
struct desk_obs_event {
	uint64_t id;
	char type[16];
	char *json; /* malloc'd, owned by the holder */
};
/* Adds an event (`j` stays the caller's). */
void desk_obs_emit(struct desk_obs *o, const char *type, const cJSON *j);
/* Looks at the mirror `cap` and adds "frame" and "pointer" events for
 * what changed since the last look (by anyone). */
void desk_obs_poll(struct desk_obs *o, struct capture *cap);
/* At most every DESK_OBS_WINDOWS_MS (whoever asks), lists the windows
 * through `d` (deskbox-xtool) and adds "window" events {"change":
 * "opened"|"closed"|"retitled"|"focused","window":{...},"old_title"?}
 * for what changed since the last look. */
#define DESK_OBS_WINDOWS_MS 1000
void desk_obs_windows(struct desk_obs *o, struct desk *d);
/* Copies up to `max` events with ids after `after` into `ev` (the caller
 * frees their json), waiting up to `timeout_ms` for one.  Returns how many,
 * or -ERANGE when events after `after` have already left the backlog (the
 * reader missed some).  *next_id is the id the next event will have. */
int desk_obs_read(struct desk_obs *o, uint64_t after, struct desk_obs_event *ev, int max,
		  int timeout_ms, uint64_t *next_id);
/* Wakes every reader waiting in desk_obs_read. */
void desk_obs_wake(struct desk_obs *o);

/* ---- recordings (desktop_rec.c, desktop_rec_files.c) ----
 *
 * A recording encodes the mirror's frames (only when the screen changed)
 * at up to `fps` into <dir>/<rid>.mp4 (H.264) or .webm (VP8), with the
 * action log of the observer as its sidecar, and its state in
 * <dir>/<rid>.json, so the listing outlives deskboxd (a recording cut by a
 * restart is "interrupted", its file playable to its last fragment). */
#define DESK_REC_ID_LEN	 16 /* hex digits */
#define DESK_REC_MAX_FPS 30
struct desk_rec_opts {
	int fps;  /* 1..DESK_REC_MAX_FPS */
	int webm; /* else mp4 */
};
/* How a recorder reaches the mirror: use() enters the sandbox (negative
 * once it stopped: the recording ends), unuse() leaves it; release() runs
 * once when the recording is over (also when starting fails). */
struct desk_rec_host {
	int (*use)(void *cls, struct capture **cap, struct err *e);
	void (*unuse)(void *cls);
	void (*release)(void *cls);
	void *cls;
};
int desk_rec_id_ok(const char *rid);
/* Starts one of the w x h screen; *out is its JSON (as desk_rec_get). */
int desk_rec_start(struct desk_obs *o, const char *dir, const struct desk_rec_opts *ro, uint32_t w,
		   uint32_t h, const struct desk_rec_host *host, cJSON **out, struct err *e);
/* Stops it (when running) once its file is complete; *out its JSON. */
int desk_rec_stop(struct desk_obs *o, const char *dir, const char *rid, cJSON **out, struct err *e);
/* {"id","format","fps","width","height","started_at","state":
 * "recording"|"stopped"|"failed"|"interrupted","duration_ms","size",
 * "stopped_at"?,"frames"?,"reason"?}; ERR_NOT_FOUND for an unknown rid. */
int desk_rec_get(struct desk_obs *o, const char *dir, const char *rid, cJSON **out, struct err *e);
/* Every recording in `dir`, oldest first (an array). */
int desk_rec_list(struct desk_obs *o, const char *dir, cJSON **out, struct err *e);
/* Its file, open for reading (*fd the caller's), size and media type. */
int desk_rec_open(struct desk_obs *o, const char *dir, const char *rid, int *fd, uint64_t *size,
		  const char **mime, struct err *e);
/* The sidecar: {"id","started_at","actions":[entry + "offset_ms", ...]}. */
int desk_rec_actions(struct desk_obs *o, const char *dir, const char *rid, cJSON **out,
		     struct err *e);
/* Stops it when running and removes its files. */
int desk_rec_delete(struct desk_obs *o, const char *dir, const char *rid, struct err *e);
/* Stops every recording of `o` and waits for their files. */
void desk_obs_stop_recordings(struct desk_obs *o);

/* ---- the accessibility tree (desktop_a11y.c) ----
 *
 * Read inside the sandbox through AT-SPI by a resident reader
 * (desktop-image/deskbox-a11y.py, kept running after the first request)
 * on the session bus its init starts with DESKBOX_A11Y=1.  Nodes:
 * {"id" (a path of child indices, "0.2.1"), "role", "name",
 * "description", "states", "bounds" {x,y,width,height} (screen pixels),
 * "agent_bounds" (when an agent display is declared), "actions",
 * "children"}. */
struct desk_a11y_query {
	const char *window; /* NULL or "": every application; else a title or X window id */
	const char *find;   /* NULL or "role:button,name:OK": matches instead of a tree */
	int max_depth;
	int max_nodes;
};
/* {"nodes":[...],"count","truncated"} or, with find, {"matches":[...],...}. */
int desk_a11y_tree(struct desk *d, const struct desk_a11y_query *q, cJSON **out, struct err *e);
/* Runs action `name` ("click": also press or activate) of node `node`;
 * logged and refused during a takeover like every action. */
int desk_a11y_action(struct desk *d, const char *node, const char *name, cJSON **out,
		     struct err *e);
/* 1 when the focused window is the browser's (chromium), else 0. */
int desk_browser_in_front(struct desk *d);

/* The largest w x h of the same aspect (rounded down) with no side over
 * `max_side` and at most `max_pixels` pixels (0: no bound), for a model's
 * recommended image size; w x h itself when it fits. */
void desk_fit(uint32_t w, uint32_t h, uint32_t max_side, uint64_t max_pixels, uint32_t *aw,
	      uint32_t *ah);
/* Anthropic's recommended image size for Claude: at most 1568 px on the
 * long side and about 1.15 megapixels. */
#define DESK_ANTHROPIC_MAX_SIDE	  1568
#define DESK_ANTHROPIC_MAX_PIXELS 1205862 /* 1.15 * 2^20 */

/* Gemini (desktop_gemini.c): one computer-use FunctionCall (or a Part
 * holding it) in, its FunctionResponse out: {name, id?, response: {} or
 * {"error"}, parts: [{inline_data: {mime_type, data}}]}. */
int desk_gemini(struct desk *d, const cJSON *input, cJSON *out, struct desk_tool *t, struct err *e);

/* The input item that tells the model why its computer action failed: a
 * user message whose input_text holds `reason`, to append after the failed
 * call's computer_call_output.  NULL when out of memory. */
cJSON *desk_openai_reason_item(const char *reason);

#endif
