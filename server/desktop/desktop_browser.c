/* The browser: `browser {"url"}` starts chromium as the sandbox's user, as
 * typing `chromium URL` in a terminal would (the default image gives
 * /usr/bin/chromium its flags through /etc/chromium.d, see
 * server/runtime/runtime_image.c), or hands the URL to the chromium that
 * runs already, which opens it in a new tab of its window.  It answers with
 * that window once it is up.  docs/browser.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/text.h"
#include "common/args.h"
#include "desktop.h"
#include "internal.h"
#include "server/process/process.h"

#define BROWSER_BIN "/usr/bin/chromium"
/* Its windows' WM_CLASS class ("Chromium", or "Chromium-browser" in some
 * builds) as deskbox-xtool matches it: an extended regular expression,
 * case-insensitive. */
#define BROWSER_CLASS	"^chromium"
#define BROWSER_URL_MAX 8192
/* A start took 0.7-1.9 s on a 2-core machine at load 3 (measured) and
 * takes several times that under heavier load: the default wait is long. */
#define BROWSER_DEFAULT_MS 60000
/* Handing a URL to the running browser takes ~0.2 s (measured); a run that
 * takes longer found no browser to hand it to (one with another profile
 * runs) and started its own. */
#define BROWSER_HANDOFF_MS 30000
#define BROWSER_OUTPUT_MAX (64 * 1024)

/* The schemes a caller may open; anything else (javascript:, chrome:,
 * data:, a bare word chromium would search for) is refused. */
static const char *const url_schemes[] = {"http://", "https://", "file://", "about:"};

static int check_url(const char *url, struct err *e)
{
	for (const char *p = url; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'url' must not contain spaces or control characters "
				       "(percent-encode them)");
	for (size_t i = 0; i < sizeof(url_schemes) / sizeof(url_schemes[0]); i++) {
		size_t n = strlen(url_schemes[i]);
		if (strncasecmp(url, url_schemes[i], n) == 0 && url[n])
			return 0;
	}
	return err_set(e, ERR_INVALID, EINVAL,
		       "field 'url' must be an http://, https://, file:// or about: URL");
}

/* The browser's top-level window (its focused one, else the first) into
 * *win (caller owns it), or NULL when none is open. */
static int browser_window(struct desk *d, cJSON **win, struct err *e)
{
	*win = NULL;
	cJSON *q = cJSON_CreateObject();
	cJSON *res = cJSON_CreateObject();
	int r = q && res && cJSON_AddStringToObject(q, "class", BROWSER_CLASS)
		    ? desk_x_action(d, "windows", NULL, q, res, e)
		    : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_Delete(q);
	if (r < 0) {
		cJSON_Delete(res);
		return err_wrap(e, "looking for the browser's window");
	}
	cJSON *list = cJSON_GetObjectItemCaseSensitive(res, "windows");
	cJSON *pick = NULL, *w;
	cJSON_ArrayForEach(w, list)
	{
		if (!pick || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(w, "focused")))
			pick = w;
	}
	if (pick)
		*win = cJSON_DetachItemViaPointer(list, pick);
	cJSON_Delete(res);
	return 0;
}

/* Starts the browser on `url` and waits up to `timeout` ms for its window
 * (*win, caller owns it); out gets its pid. */
static int start_browser(struct desk *d, const char *url, int64_t timeout, cJSON *out, cJSON **win,
			 struct err *e)
{
	const char *argv[] = {BROWSER_BIN, url, NULL};
	cJSON *got = cJSON_CreateObject();
	if (!got)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int r = desk_launch_argv(d, argv, timeout, got, e);
	const cJSON *jpid = cJSON_GetObjectItemCaseSensitive(got, "pid");
	pid_t pid = cJSON_IsNumber(jpid) ? (pid_t)jpid->valuedouble : 0;
	cJSON *w = r == 0 ? cJSON_DetachItemFromObjectCaseSensitive(got, "window") : NULL;
	cJSON_Delete(got);
	if (r < 0)
		return err_wrap(e, "starting the browser");
	if (cJSON_IsObject(w)) {
		*win = w;
		cJSON_AddNumberToObject(out, "pid", pid);
		return 0;
	}
	cJSON_Delete(w);
	struct process_info info;
	if (process_bg_info(d->procs, pid, &info, e) == 0 && !info.running)
		return err_set(e, ERR_UNAVAILABLE, EIO,
			       "%s exited (code %d) before it showed a window", BROWSER_BIN,
			       info.exit_code);
	err_clear(e);
	return err_set(e, ERR_TIMEOUT, ETIMEDOUT, "the browser showed no window within %lld ms",
		       (long long)timeout);
}

/* Hands `url` to the running browser, which opens it in a new tab. */
static int open_tab(struct desk *d, const char *url, struct err *e)
{
	const char *argv[] = {BROWSER_BIN, url, NULL};
	struct process_opts o = {
	    .argv = argv,
	    .timeout_ms = BROWSER_HANDOFF_MS,
	    .max_output = BROWSER_OUTPUT_MAX,
	};
	struct process_result pr;
	if (process_run(d->procs, &o, &pr, e) < 0)
		return err_wrap(e, "handing the URL to the browser");
	int r = 0;
	if (pr.timed_out)
		r = err_set(e, ERR_UNAVAILABLE, ETIMEDOUT,
			    "%s did not hand the URL to the running browser within %d ms (does a "
			    "chromium with another profile run?)",
			    BROWSER_BIN, BROWSER_HANDOFF_MS);
	else if (pr.exit_code != 0)
		r = err_set(e, ERR_UNAVAILABLE, EIO, "%s failed (exit %d): %.*s", BROWSER_BIN,
			    pr.exit_code, UTF8_CUT(pr.err, 200));
	process_result_release(&pr);
	return r;
}

/* Raises the browser's window `*win`, replacing it by its state once the
 * window manager did; the window as found when that fails. */
static void raise_window(struct desk *d, cJSON **win)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(*win, "id");
	if (!cJSON_IsNumber(id))
		return;
	char wid[32];
	snprintf(wid, sizeof(wid), "%.0f", id->valuedouble);
	cJSON *none = cJSON_CreateObject();
	cJSON *now = cJSON_CreateObject();
	struct err e = ERR_INIT;
	if (none && now && desk_x_action(d, "window_activate", wid, none, now, &e) == 0 &&
	    cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(now, "id"))) {
		cJSON_Delete(*win);
		*win = now;
		now = NULL;
	}
	cJSON_Delete(none);
	cJSON_Delete(now);
}

int desk_browser(struct desk *d, const cJSON *a, cJSON *out, struct err *e)
{
	const char *url;
	int64_t timeout;
	if (args_string(a, "url", BROWSER_URL_MAX, 0, &url, e) < 0 ||
	    args_int(a, "timeout_ms", 0, DESK_MAX_WAIT_MS, BROWSER_DEFAULT_MS, 0, &timeout, e) < 0)
		return err_code(e);
	url = url ? url : "about:blank";
	if (check_url(url, e) < 0)
		return err_code(e);
	cJSON *win;
	if (browser_window(d, &win, e) < 0)
		return err_code(e);
	int started = !win;
	int r = started ? start_browser(d, url, timeout, out, &win, e) : open_tab(d, url, e);
	if (r < 0) {
		cJSON_Delete(win);
		return r;
	}
	if (!started)
		raise_window(d, &win);
	cJSON_AddItemToObject(out, "window", win);
	cJSON_AddBoolToObject(out, "started", started);
	cJSON_AddStringToObject(out, "url", url);
	return 0;
}

int desk_browser_in_front(struct desk *d)
{
	struct err e = ERR_INIT;
	cJSON *win = NULL;
	int front = browser_window(d, &win, &e) == 0 && win &&
		    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(win, "focused"));
	cJSON_Delete(win);
	return front;
}
