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
struct desk {
	struct capture *cap;	     /* the screen mirror and input path */
	struct process_table *procs; /* where deskbox-xtool runs (windows, clipboard) */
	int png_level;		     /* zlib level for PNG screenshots */
	uint32_t w, h;		     /* the real screen */
	uint32_t aw, ah;	     /* the agent's coordinate space (w, h when none declared) */
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
