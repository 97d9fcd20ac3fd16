/* What the desktop/ files share; not for other modules (they use
 * desktop.h). */
#ifndef DESKBOX_SERVER_DESKTOP_INTERNAL_H
#define DESKBOX_SERVER_DESKTOP_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/error.h"
#include "desktop.h"

/* X11 button 9, "forward": RFB pointer events carry buttons 1-8 only, so
 * clicks with it go through deskbox-xtool (XTEST inside the sandbox). */
#define DESK_BUTTON_FORWARD 9

/* Where the pointer really is, in real screen pixels, asked of the X
 * server through deskbox-xtool (programs and viewers move it too). */
int desk_x_pointer(struct desk *d, int32_t *x, int32_t *y, struct err *e);

/* Moves to (x, y) (real pixels), holds `mods` (keysyms), clicks `button`
 * `count` times and releases, all through deskbox-xtool. */
int desk_x_click(struct desk *d, int32_t x, int32_t y, int button, int count, const uint32_t *mods,
		 size_t nmods, struct err *e);

/* ---- deskbox-xtool (desktop_x.c, desktop_apps.c) ---- */

/* Where the default image mounts deskbox-xtool, and how long one of its
 * runs may take beyond any wait it was asked for. */
#define DESK_XTOOL	      "/.deskbox/xtool"
#define DESK_XTOOL_TIMEOUT_MS 10000

/* Runs deskbox-xtool with `args` (at most 6, NULL-terminated) and `env`
 * (NULL: the sandbox's defaults); *out is its parsed JSON object (caller
 * frees).  Its {"error"} becomes ERR_NOT_FOUND, ERR_INVALID or
 * ERR_UNAVAILABLE. */
int desk_xtool(struct desk *d, const char *const *args, const char *const *env, int timeout_ms,
	       cJSON **out, struct err *e);

/* A window object's geometry from real pixels into the agent's space. */
void desk_window_to_agent(struct desk *d, cJSON *w);

/* Starts argv in the background and waits up to `timeout` ms for a new
 * top-level window: out gets {"pid","window":{…}|null,"timed_out"}. */
int desk_launch_argv(struct desk *d, const char *const *argv, int64_t timeout, cJSON *out,
		     struct err *e);

/* The browser action (desktop_browser.c): starts chromium on args' "url"
 * or opens it in a new tab of the running one; out gets {"window",
 * "started","url"} and, when started, "pid". */
int desk_browser(struct desk *d, const cJSON *args, cJSON *out, struct err *e);

/* launch, open, apps and browser (desktop_apps.c); ERR_NOT_FOUND for other
 * names. */
int desk_apps_action(struct desk *d, const char *name, const cJSON *args, cJSON *out,
		     struct err *e);

/* ---- the tool-format adapters (desktop_anthropic.c, desktop_openai.c) ---- */

/* Runs deskbox action `name` with `args`, dropping its result. */
int desk_adapter_run(struct desk *d, const char *name, const cJSON *args, struct err *e);

/* Waits for the screen to settle after an action, so the screenshot a tool
 * result carries shows its effect. */
int desk_adapter_settle(struct desk *d, struct err *e);

/* A PNG screenshot of the agent display (of `region` [x1,y1,x2,y2] in
 * agent space scaled to the display's size, when not NULL): *b64 is the
 * malloc'd base64, *frame its frame number. */
int desk_adapter_shot(struct desk *d, const int64_t *region, char **b64, uint64_t *frame,
		      struct err *e);

/* ---- observation (desktop_obs.c, desktop_events.c) ---- */

struct desk_obs {
	char id[64]; /* the sandbox's */
	atomic_int refs;
	/* Guards everything below; cv wakes desk_obs_read. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct desk_obs_event ring[DESK_OBS_BACKLOG]; /* event id i at i % size */
	uint64_t next_id;
	/* The last look at the mirror (desk_obs_poll). */
	uint64_t seen_frame;
	int32_t seen_x, seen_y;
	int seen_pointer;
	/* Takeover: unix ms the lease ends, 0 when none. */
	long long take_until_ms, take_since_ms;
	char take_by[64];
	char lease_path[PATH_MAX]; /* <sandbox dir>/takeover.json, "" for none */
	struct {
		desk_obs_sink_fn fn;
		void *cls;
	} sinks[DESK_OBS_SINKS];
	struct desk_rec *recs; /* recordings this deskboxd runs (desktop_rec.c) */
	/* The windows at the last look (desk_obs_windows), and when. */
	cJSON *windows;
	long long windows_at;
	struct desk_obs *next;
};

/* desk_obs_emit with mu held. */
void desk_obs_emit_locked(struct desk_obs *o, const char *type, const cJSON *j);
/* Ends a takeover whose lease is over (with its event). */
void desk_obs_expire(struct desk_obs *o);

/* One action between desk_obs_begin and desk_obs_end. */
struct desk_obs_act {
	const char *name;
	int logged;
	long long time_ms;
	uint64_t frame_before;
};
/* Before an action: ERR_TAKEN_OVER while a person holds the desktop. */
int desk_obs_begin(struct desk *d, const char *name, struct desk_obs_act *a, struct err *e);
/* After it (r: its result, e its error): the log entry. */
void desk_obs_end(struct desk *d, struct desk_obs_act *a, const cJSON *args, int r,
		  const struct err *e);

/* ---- recordings (desktop_rec.c, desktop_rec_files.c) ---- */

struct desk_rec {
	char id[DESK_REC_ID_LEN + 1];
	char dir[PATH_MAX];
	int webm, fps;
	uint32_t w, h;
	long long started_ms; /* unix ms */
	struct desk_obs *obs;
	struct desk_rec_host host;
	struct rec_enc *enc;
	FILE *sidecar;
	pthread_t thread;
	/* Guards stop and done. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop, done;
	/* Written by the thread only. */
	uint64_t frames;
	char reason[256];
	struct desk_rec *next; /* in obs->recs, under obs->mu */
};

/* 1 once r's thread has finished its files. */
int desk_rec_done(struct desk_rec *r);

/* The encoder (desktop_rec_enc.c): frames of a w x h B,G,R,X screen into
 * `path` (fragmented MP4 with H.264, or WebM with VP8), each stamped with
 * its time in ms from the start (a frame not later than the previous one
 * is dropped).  close flushes and writes the trailer, free without it
 * (the file stays cut, and decodes). */
struct rec_enc;
int rec_enc_open(struct rec_enc **out, const char *path, int webm, uint32_t w, uint32_t h, int fps,
		 struct err *e);
int rec_enc_frame(struct rec_enc *x, const uint8_t *bgrx, size_t stride, int64_t pts_ms,
		  struct err *e);
/* Ends the fragment (cluster) in progress: it is complete on disk. */
int rec_enc_flush(struct rec_enc *x, struct err *e);
int64_t rec_enc_last_pts(const struct rec_enc *x);
int rec_enc_close(struct rec_enc *x, struct err *e);
void rec_enc_free(struct rec_enc *x);

#endif
