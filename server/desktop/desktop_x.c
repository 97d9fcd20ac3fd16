/* Windows and clipboard (launch, open and apps: desktop_apps.c).  The X server belongs to the
 * (hostile) sandbox, so deskboxd does not speak X11 to it: these run deskbox-xtool
 * (desktop-image/xtool.c) inside the sandbox and read back its one line of
 * JSON, bounded by the process layer's output cap and timeout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/clock.h"
#include "common/args.h"
#include "desktop.h"
#include "internal.h"
#include "server/process/process.h"

#define XTOOL_MAX_OUTPUT (4u << 20)
#define CLIP_MAX	 (1u << 20)
#define CLIP_SET_WAIT_MS 3000
#define WAIT_DEFAULT_MS	 10000
/* A search's regular expressions: longer ones are no real search. */
#define SEARCH_MAX	    1024
#define WINDOW_ID_MAX_CHARS 20

/* deskbox-xtool's errors name what was missing ("no window 5", "no such
 * file", "no application") or what was wrong with the request ("bad
 * regular expression"); anything else means the desktop could not do it. */
static enum err_kind xtool_error_kind(const char *msg)
{
	if (strncmp(msg, "no window", 9) == 0 || strncmp(msg, "no such", 7) == 0 ||
	    strncmp(msg, "no application", 14) == 0)
		return ERR_NOT_FOUND;
	return strncmp(msg, "bad ", 4) == 0 ? ERR_INVALID : ERR_UNAVAILABLE;
}

/* internal.h */
int desk_xtool(struct desk *d, const char *const *args, const char *const *env, int timeout_ms,
	       cJSON **out, struct err *e)
{
	const char *argv[8] = {DESK_XTOOL};
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
		r = err_set(e, xtool_error_kind(msg->valuestring), EIO, "%.*s",
			    UTF8_CUT(msg->valuestring, 300));
	else if (!cJSON_IsObject(j))
		r = err_set(e, ERR_INTERNAL, EPROTO, "deskbox-xtool %s failed (exit %d): %.*s",
			    args[0], pr.exit_code, UTF8_CUT(pr.err, 200));
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
	if (desk_xtool(d, args, NULL, DESK_XTOOL_TIMEOUT_MS, &j, e) < 0)
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
	if (desk_xtool(d, args, NULL, DESK_XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	cJSON_Delete(j);
	return 0;
}

void desk_window_to_agent(struct desk *d, cJSON *w)
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

/* A window search's criteria from `a` ("title", "class": regular
 * expressions; "pid") as deskbox-xtool's TITLE CLASS PID arguments, "" for
 * none; *any says whether one was given. */
static int search_args(const cJSON *a, const char **title, const char **cls, char *pid,
		       size_t pid_size, int *any, struct err *e)
{
	int64_t p;
	if (args_string(a, "title", SEARCH_MAX, 0, title, e) < 0 ||
	    args_string(a, "class", SEARCH_MAX, 0, cls, e) < 0 ||
	    args_int(a, "pid", 1, INT32_MAX, 0, 0, &p, e) < 0)
		return err_code(e);
	*title = *title ? *title : "";
	*cls = *cls ? *cls : "";
	if (p)
		snprintf(pid, pid_size, "%lld", (long long)p);
	else
		pid[0] = '\0';
	*any = **title || **cls || p;
	return 0;
}

static int windows(struct desk *d, const cJSON *a, cJSON *out, struct err *e)
{
	const char *title, *cls;
	char pid[16];
	int any;
	if (search_args(a, &title, &cls, pid, sizeof(pid), &any, e) < 0)
		return err_code(e);
	const char *args[] = {"windows", title, cls, pid, NULL};
	cJSON *j;
	if (desk_xtool(d, args, NULL, DESK_XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	cJSON *list = cJSON_DetachItemFromObjectCaseSensitive(j, "windows");
	cJSON_Delete(j);
	if (!cJSON_IsArray(list)) {
		cJSON_Delete(list);
		return err_set(e, ERR_INTERNAL, EPROTO, "deskbox-xtool gave no window list");
	}
	cJSON *w;
	cJSON_ArrayForEach(w, list) desk_window_to_agent(d, w);
	cJSON_AddItemToObject(out, "windows", list);
	return 0;
}

/* POST windows/wait: the first visible window that matches, waiting up to
 * timeout_ms. */
static int wait_window(struct desk *d, const cJSON *a, cJSON *out, struct err *e)
{
	const char *title, *cls;
	char pid[16], ms[16];
	int any;
	int64_t timeout;
	if (search_args(a, &title, &cls, pid, sizeof(pid), &any, e) < 0 ||
	    args_int(a, "timeout_ms", 0, DESK_MAX_WAIT_MS, WAIT_DEFAULT_MS, 0, &timeout, e) < 0)
		return err_code(e);
	if (!any)
		return err_set(e, ERR_INVALID, EINVAL, "give 'title', 'class' or 'pid'");
	snprintf(ms, sizeof(ms), "%lld", (long long)timeout);
	const char *args[] = {"wait-window", ms, title, cls, pid, NULL};
	cJSON *j;
	if (desk_xtool(d, args, NULL, (int)timeout + DESK_XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	cJSON *win = cJSON_DetachItemFromObjectCaseSensitive(j, "window");
	cJSON_Delete(j);
	if (cJSON_IsObject(win))
		desk_window_to_agent(d, win);
	cJSON_AddBoolToObject(out, "timed_out", !cJSON_IsObject(win));
	cJSON_AddItemToObject(out, "window", win ? win : cJSON_CreateNull());
	return 0;
}

/* move {"x","y"} and resize {"width","height"}, from the agent's space into
 * deskbox-xtool's two numbers. */
static int op_numbers(struct desk *d, const char *op, const cJSON *a, char *s1, char *s2,
		      size_t size, struct err *e)
{
	int move = strcmp(op, "move") == 0;
	int64_t v1, v2;
	if (args_int(a, move ? "x" : "width", move ? 0 : 1, move ? d->aw - 1 : 16384, 0,
		     ARGS_REQUIRED, &v1, e) < 0 ||
	    args_int(a, move ? "y" : "height", move ? 0 : 1, move ? d->ah - 1 : 16384, 0,
		     ARGS_REQUIRED, &v2, e) < 0)
		return err_code(e);
	/* A window's corner, like its size, scales with the screen (as
	 * desk_window_to_agent maps it back), not as a pointer's pixel. */
	int32_t r1 = (int32_t)((v1 * d->w + d->aw / 2) / d->aw);
	int32_t r2 = (int32_t)((v2 * d->h + d->ah / 2) / d->ah);
	snprintf(s1, size, "%d", r1 > 0 || move ? r1 : 1);
	snprintf(s2, size, "%d", r2 > 0 || move ? r2 : 1);
	return 0;
}

static int window_op(struct desk *d, const char *op, const char *wid, const cJSON *a, cJSON *out,
		     struct err *e)
{
	static const char *const ops[] = {"activate", "close",	  "move",
					  "resize",   "minimize", "maximize"};
	size_t k = 0;
	while (k < 6 && strcmp(op, ops[k]) != 0)
		k++;
	if (k == 6)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no window operation '%.*s'",
			       UTF8_CUT(op, 32));
	/* Decimal or 0x hex window ids only: they end up in argv. */
	size_t n = wid ? strlen(wid) : 0;
	if (n == 0 || n > WINDOW_ID_MAX_CHARS || strspn(wid, "0123456789abcdefxABCDEFX") != n)
		return err_set(e, ERR_INVALID, EINVAL, "bad window id '%.*s'",
			       UTF8_CUT(wid ? wid : "", 32));
	char s1[16] = "", s2[16] = "";
	if ((k == 2 || k == 3) && op_numbers(d, op, a, s1, s2, sizeof(s1), e) < 0)
		return err_code(e);
	const char *args[] = {op, wid, s1[0] ? s1 : NULL, s2, NULL};
	cJSON *j;
	if (desk_xtool(d, args, NULL, DESK_XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	desk_window_to_agent(d, j);
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
	if (desk_xtool(d, args, NULL, DESK_XTOOL_TIMEOUT_MS, &j, e) < 0)
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
	const char *argv[] = {DESK_XTOOL, "clipboard-own", NULL};
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

static int x_action(struct desk *d, const char *name, const char *wid, const cJSON *args,
		    cJSON *out, struct err *e)
{
	if (strcmp(name, "windows") == 0)
		return windows(d, args, out, e);
	if (strcmp(name, "wait_window") == 0)
		return wait_window(d, args, out, e);
	if (strncmp(name, "window_", 7) == 0 && wid)
		return window_op(d, name + 7, wid, args, out, e);
	if (strcmp(name, "get_clipboard") == 0)
		return get_clipboard(d, out, e);
	if (strcmp(name, "set_clipboard") == 0)
		return set_clipboard(d, args, out, e);
	return desk_apps_action(d, name, args, out, e);
}

/* Logged like desk_action (only when outermost: desk_action's own
 * fallback to here is not logged twice). */
int desk_x_action(struct desk *d, const char *name, const char *wid, const cJSON *args, cJSON *out,
		  struct err *e)
{
	struct desk_obs_act a;
	if (desk_obs_begin(d, name, &a, e) < 0)
		return err_code(e);
	int r = x_action(d, name, wid, args, out, e);
	desk_obs_end(d, &a, args, r, e);
	return r;
}
