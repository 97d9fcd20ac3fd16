/* Windows, clipboard and launch.  The X server belongs to the (hostile)
 * sandbox, so deskboxd does not speak X11 to it: these run deskbox-xtool
 * (desktop-image/xtool.c) inside the sandbox and read back its one line of
 * JSON, bounded by the process layer's output cap and timeout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/args.h"
#include "desktop.h"
#include "internal.h"
#include "server/process/process.h"

#define XTOOL		    "/.deskbox/xtool"
#define XTOOL_TIMEOUT_MS    10000
#define XTOOL_MAX_OUTPUT    (4u << 20)
#define CLIP_MAX	    (1u << 20)
#define CLIP_SET_WAIT_MS    3000
#define LAUNCH_DEFAULT_MS   10000
#define LAUNCH_MAX_ARGS	    256
#define WINDOW_ID_MAX_CHARS 20

/* Runs xtool with `args`; *out is its parsed JSON object (caller frees). */
static int xtool(struct desk *d, const char *const *args, const char *const *env, int timeout_ms,
		 cJSON **out, struct err *e)
{
	const char *argv[8] = {XTOOL};
	size_t n = 1;
	for (; args[n - 1] && n < 7; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	struct process_opts o = {
	    .argv = argv,
	    .env = env,
	    .timeout_ms = timeout_ms,
	    .max_output = XTOOL_MAX_OUTPUT,
	};
	struct process_result pr;
	if (process_run(d->procs, &o, &pr, e) < 0)
		return err_wrap(e, "running deskbox-xtool %s", args[0]);
	int r = 0;
	cJSON *j = pr.out_truncated ? NULL : cJSON_ParseWithLength(pr.out, pr.out_len);
	const cJSON *msg = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
	if (pr.timed_out)
		r = err_set(e, ERR_TIMEOUT, ETIMEDOUT, "deskbox-xtool %s took over %d ms", args[0],
			    timeout_ms);
	else if (cJSON_IsString(msg))
		r = err_set(e,
			    strncmp(msg->valuestring, "no window", 9) == 0 ? ERR_NOT_FOUND
									   : ERR_UNAVAILABLE,
			    EIO, "%.300s", msg->valuestring);
	else if (!cJSON_IsObject(j))
		r = err_set(e, ERR_INTERNAL, EPROTO, "deskbox-xtool %s failed (exit %d): %.200s",
			    args[0], pr.exit_code, pr.err);
	process_result_release(&pr);
	if (r < 0) {
		cJSON_Delete(j);
		return r;
	}
	*out = j;
	return 0;
}

int desk_x_pointer(struct desk *d, int32_t *x, int32_t *y, struct err *e)
{
	const char *args[] = {"pointer", NULL};
	cJSON *j;
	if (xtool(d, args, NULL, XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	const cJSON *jx = cJSON_GetObjectItemCaseSensitive(j, "x");
	const cJSON *jy = cJSON_GetObjectItemCaseSensitive(j, "y");
	int ok = cJSON_IsNumber(jx) && cJSON_IsNumber(jy);
	if (ok) {
		*x = (int32_t)jx->valuedouble;
		*y = (int32_t)jy->valuedouble;
	}
	cJSON_Delete(j);
	return ok ? 0 : err_set(e, ERR_INTERNAL, EPROTO, "deskbox-xtool gave no pointer position");
}

int desk_x_click(struct desk *d, int32_t x, int32_t y, int button, int count, const uint32_t *mods,
		 size_t nmods, struct err *e)
{
	char sx[16], sy[16], sb[8], sc[8], sm[8 * 12] = "";
	snprintf(sx, sizeof(sx), "%d", x);
	snprintf(sy, sizeof(sy), "%d", y);
	snprintf(sb, sizeof(sb), "%d", button);
	snprintf(sc, sizeof(sc), "%d", count);
	for (size_t i = 0, n = 0; i < nmods && i < 8; i++)
		n += (size_t)snprintf(sm + n, sizeof(sm) - n, "%s0x%x", i ? "," : "", mods[i]);
	const char *args[] = {"click", sx, sy, sb, sc, sm[0] ? sm : NULL, NULL};
	cJSON *j;
	if (xtool(d, args, NULL, XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	cJSON_Delete(j);
	return 0;
}

/* A window's geometry in the agent's coordinates. */
static void window_to_agent(struct desk *d, cJSON *w)
{
	if (d->aw == d->w && d->ah == d->h)
		return;
	static const char *const names[] = {"x", "y", "width", "height"};
	for (int i = 0; i < 4; i++) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(w, names[i]);
		if (!cJSON_IsNumber(v))
			continue;
		/* Positions map like points; sizes scale. */
		double k = i % 2 ? (double)d->ah / d->h : (double)d->aw / d->w;
		cJSON_SetNumberValue(v, (double)(long long)(v->valuedouble * k + 0.5));
	}
}

static int windows(struct desk *d, cJSON *out, struct err *e)
{
	const char *args[] = {"windows", NULL};
	cJSON *j;
	if (xtool(d, args, NULL, XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	cJSON *list = cJSON_DetachItemFromObjectCaseSensitive(j, "windows");
	cJSON_Delete(j);
	if (!cJSON_IsArray(list)) {
		cJSON_Delete(list);
		return err_set(e, ERR_INTERNAL, EPROTO, "deskbox-xtool gave no window list");
	}
	cJSON *w;
	cJSON_ArrayForEach(w, list) window_to_agent(d, w);
	cJSON_AddItemToObject(out, "windows", list);
	return 0;
}

static int window_op(struct desk *d, const char *op, const char *wid, cJSON *out, struct err *e)
{
	/* Decimal or 0x hex window ids only: they end up in argv. */
	size_t n = wid ? strlen(wid) : 0;
	if (n == 0 || n > WINDOW_ID_MAX_CHARS || strspn(wid, "0123456789abcdefxABCDEFX") != n)
		return err_set(e, ERR_INVALID, EINVAL, "bad window id '%.32s'", wid ? wid : "");
	const char *args[] = {op, wid, NULL};
	cJSON *j;
	if (xtool(d, args, NULL, XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	while (j->child) {
		cJSON *it = cJSON_DetachItemViaPointer(j, j->child);
		cJSON_AddItemToObject(out, it->string, it);
	}
	cJSON_Delete(j);
	return 0;
}

static int get_clipboard(struct desk *d, cJSON *out, struct err *e)
{
	const char *args[] = {"clipboard-get", NULL};
	cJSON *j;
	if (xtool(d, args, NULL, XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "text");
	cJSON_AddStringToObject(out, "text", cJSON_IsString(t) ? t->valuestring : "");
	cJSON_Delete(j);
	return 0;
}

static int set_clipboard(struct desk *d, const cJSON *a, cJSON *out, struct err *e)
{
	const char *text;
	if (args_string(a, "text", CLIP_MAX, ARGS_REQUIRED, &text, e) < 0)
		return err_code(e);
	/* A background run keeps owning the selection (X selections live as
	 * long as their owner) until another client takes it over. */
	const char *argv[] = {XTOOL, "clipboard-own", NULL};
	struct process_opts o = {
	    .argv = argv,
	    .stdin_data = text,
	    .stdin_len = strlen(text),
	    .max_output = 4096,
	};
	pid_t pid;
	if (process_spawn(d->procs, &o, &pid, e) < 0)
		return err_wrap(e, "starting the clipboard owner");
	/* Answer once the new owner serves the text. */
	long long end = clock_mono_ms() + CLIP_SET_WAIT_MS;
	for (;;) {
		cJSON *got = cJSON_CreateObject();
		int r = get_clipboard(d, got, e);
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(got, "text");
		int same = r == 0 && cJSON_IsString(t) && strcmp(t->valuestring, text) == 0;
		cJSON_Delete(got);
		if (same)
			break;
		if (clock_mono_ms() > end)
			return err_set(e, ERR_TIMEOUT, ETIMEDOUT,
				       "the clipboard did not take the text in %d ms",
				       CLIP_SET_WAIT_MS);
		err_clear(e);
	}
	cJSON_AddNumberToObject(out, "bytes", (double)strlen(text));
	return 0;
}

/* The ids of the windows open now, comma separated, into *known_out (freed by
 * the caller). */
static int known_windows(struct desk *d, char **known_out, struct err *e)
{
	cJSON *before = cJSON_CreateObject();
	if (windows(d, before, e) < 0) {
		cJSON_Delete(before);
		return err_wrap(e, "listing windows");
	}
	size_t cap = 64, len = 0;
	char *known = calloc(1, cap);
	const cJSON *w;
	cJSON_ArrayForEach(w, cJSON_GetObjectItem(before, "windows"))
	{
		const cJSON *id = cJSON_GetObjectItem(w, "id");
		if (!known || !cJSON_IsNumber(id))
			continue;
		char buf[32];
		int k = snprintf(buf, sizeof(buf), "%s%.0f", len ? "," : "", id->valuedouble);
		if (len + (size_t)k + 1 > cap) {
			char *p = realloc(known, cap * 2 + (size_t)k);
			if (!p)
				continue;
			known = p;
			cap = cap * 2 + (size_t)k;
		}
		memcpy(known + len, buf, (size_t)k + 1);
		len += (size_t)k;
	}
	cJSON_Delete(before);
	if (!known)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	*known_out = known;
	return 0;
}

/* Starts argv in the background and waits for a new top-level window. */
static int launch(struct desk *d, const cJSON *a, cJSON *out, struct err *e)
{
	const cJSON *jargv = cJSON_GetObjectItemCaseSensitive(a, "argv");
	int n = cJSON_IsArray(jargv) ? cJSON_GetArraySize(jargv) : 0;
	int64_t timeout;
	if (n < 1 || n > LAUNCH_MAX_ARGS)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'argv' must be an array of 1-%d strings", LAUNCH_MAX_ARGS);
	if (args_int(a, "timeout_ms", 0, DESK_MAX_WAIT_MS, LAUNCH_DEFAULT_MS, 0, &timeout, e) < 0)
		return err_code(e);
	const char *argv[LAUNCH_MAX_ARGS + 1];
	int i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, jargv)
	{
		if (!cJSON_IsString(it) || (i == 0 && !it->valuestring[0]))
			return err_set(e, ERR_INVALID, EINVAL,
				       "argv[%d] must be a non-empty string", i);
		argv[i++] = it->valuestring;
	}
	argv[i] = NULL;

	/* The windows there before, so the new one can be told apart. */
	char *known = NULL;
	if (known_windows(d, &known, e) < 0)
		return err_code(e);

	struct process_opts o = {.argv = argv, .max_output = 64 * 1024};
	pid_t pid;
	if (process_spawn(d->procs, &o, &pid, e) < 0) {
		free(known);
		return err_wrap(e, "launching '%.200s'", argv[0]);
	}
	char *env_known = NULL;
	if (asprintf(&env_known, "DESKBOX_XTOOL_KNOWN=%s", known) < 0)
		env_known = NULL;
	free(known);
	if (!env_known)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	char ms[16];
	snprintf(ms, sizeof(ms), "%lld", (long long)timeout);
	const char *args[] = {"wait-new-window", ms, NULL};
	/* An env list replaces the sandbox's defaults for the run. */
	const char *env[] = {env_known, "DISPLAY=:0", NULL};
	cJSON *j;
	int r = xtool(d, args, env, (int)timeout + XTOOL_TIMEOUT_MS, &j, e);
	free(env_known);
	if (r < 0)
		return r;
	cJSON *win = cJSON_DetachItemFromObjectCaseSensitive(j, "window");
	cJSON_Delete(j);
	cJSON_AddNumberToObject(out, "pid", pid);
	if (cJSON_IsObject(win))
		window_to_agent(d, win);
	cJSON_AddItemToObject(out, "window", win ? win : cJSON_CreateNull());
	cJSON_AddBoolToObject(out, "timed_out", !cJSON_IsObject(win));
	return 0;
}

int desk_x_action(struct desk *d, const char *name, const char *wid, const cJSON *args, cJSON *out,
		  struct err *e)
{
	if (strcmp(name, "windows") == 0)
		return windows(d, out, e);
	if (strcmp(name, "window_activate") == 0)
		return window_op(d, "activate", wid, out, e);
	if (strcmp(name, "window_close") == 0)
		return window_op(d, "close", wid, out, e);
	if (strcmp(name, "get_clipboard") == 0)
		return get_clipboard(d, out, e);
	if (strcmp(name, "set_clipboard") == 0)
		return set_clipboard(d, args, out, e);
	if (strcmp(name, "launch") == 0)
		return launch(d, args, out, e);
	return err_set(e, ERR_NOT_FOUND, ENOENT, "no desktop action '%.64s'", name);
}
