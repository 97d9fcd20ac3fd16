/* Programs on the desktop: launch (argv or a desktop entry), open (a file
 * or URL with its default application) and the list of applications.
 * Desktop entries and mimeapps.list are the sandbox's files, so
 * deskbox-xtool reads them inside the sandbox; deskboxd only gets back an
 * argv, which it checks and starts like any other. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/args.h"
#include "desktop.h"
#include "internal.h"
#include "server/process/process.h"

#define LAUNCH_DEFAULT_MS 10000
#define LAUNCH_MAX_ARGS	  256
#define APP_NAME_MAX	  255
#define TARGET_MAX	  4096

/* The ids of the windows open now, comma separated, into *known_out (freed by
 * the caller). */
static int known_windows(struct desk *d, char **known_out, struct err *e)
{
	cJSON *before = cJSON_CreateObject();
	cJSON *none = cJSON_CreateObject();
	int r = before && none ? desk_x_action(d, "windows", NULL, none, before, e)
			       : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_Delete(none);
	if (r < 0) {
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

/* argv from a JSON array of 1-LAUNCH_MAX_ARGS strings (pointing into it),
 * NULL-terminated; `what` names the array in errors. */
static int argv_of(const cJSON *jargv, const char **argv, const char *what, struct err *e)
{
	int n = cJSON_IsArray(jargv) ? cJSON_GetArraySize(jargv) : 0;
	if (n < 1 || n > LAUNCH_MAX_ARGS)
		return err_set(e, ERR_INVALID, EINVAL, "%s must be an array of 1-%d strings", what,
			       LAUNCH_MAX_ARGS);
	int i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, jargv)
	{
		if (!cJSON_IsString(it) || (i == 0 && !it->valuestring[0]))
			return err_set(e, ERR_INVALID, EINVAL, "%s[%d] must be a non-empty string",
				       what, i);
		argv[i++] = it->valuestring;
	}
	argv[i] = NULL;
	return 0;
}

/* internal.h */
int desk_launch_argv(struct desk *d, const char *const *argv, int64_t timeout, cJSON *out,
		     struct err *e)
{
	/* The windows there before, so the new one can be told apart. */
	char *known = NULL;
	if (known_windows(d, &known, e) < 0)
		return err_code(e);
	struct process_opts o = {.argv = argv, .max_output = 64 * 1024};
	pid_t pid;
	if (process_spawn(d->procs, &o, &pid, e) < 0) {
		free(known);
		return err_wrap(e, "launching '%.*s'", UTF8_CUT(argv[0], 200));
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
	int r = desk_xtool(d, args, env, (int)timeout + DESK_XTOOL_TIMEOUT_MS, &j, e);
	free(env_known);
	if (r < 0)
		return r;
	cJSON *win = cJSON_DetachItemFromObjectCaseSensitive(j, "window");
	cJSON_Delete(j);
	cJSON_AddNumberToObject(out, "pid", pid);
	if (cJSON_IsObject(win))
		desk_window_to_agent(d, win);
	cJSON_AddItemToObject(out, "window", win ? win : cJSON_CreateNull());
	cJSON_AddBoolToObject(out, "timed_out", !cJSON_IsObject(win));
	return 0;
}

/* Runs deskbox-xtool's `cmd` `arg` (app-argv, open-argv), which answers
 * {"id","mime"?,"argv"}, and launches that argv; the entry's id, the MIME
 * type and the argv go to out.app, out.mime and out.argv. */
static int launch_resolved(struct desk *d, const char *cmd, const char *arg, int64_t timeout,
			   cJSON *out, struct err *e)
{
	const char *args[] = {cmd, arg, NULL};
	cJSON *j;
	if (desk_xtool(d, args, NULL, DESK_XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	const char *argv[LAUNCH_MAX_ARGS + 1];
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
	const cJSON *mime = cJSON_GetObjectItemCaseSensitive(j, "mime");
	int r = argv_of(cJSON_GetObjectItemCaseSensitive(j, "argv"), argv, "the entry's argv", e);
	if (r < 0) {
		e->kind = ERR_INTERNAL; /* deskbox-xtool's answer, not the request */
		err_wrap(e, "deskbox-xtool %s", cmd);
	} else {
		r = desk_launch_argv(d, argv, timeout, out, e);
	}
	if (r == 0 && cJSON_IsString(id))
		cJSON_AddStringToObject(out, "app", id->valuestring);
	if (r == 0 && cJSON_IsString(mime))
		cJSON_AddStringToObject(out, "mime", mime->valuestring);
	if (r == 0) /* what was started, which the caller did not choose */
		cJSON_AddItemToObject(out, "argv",
				      cJSON_DetachItemFromObjectCaseSensitive(j, "argv"));
	cJSON_Delete(j);
	return r < 0 ? err_code(e) : 0;
}

/* One line of printable text: a name or target that goes into argv. */
static int printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

static int launch(struct desk *d, const cJSON *a, cJSON *out, struct err *e)
{
	const char *app;
	int64_t timeout;
	if (args_string(a, "app", APP_NAME_MAX, 0, &app, e) < 0 ||
	    args_int(a, "timeout_ms", 0, DESK_MAX_WAIT_MS, LAUNCH_DEFAULT_MS, 0, &timeout, e) < 0)
		return err_code(e);
	const cJSON *jargv = cJSON_GetObjectItemCaseSensitive(a, "argv");
	if (!app == !jargv)
		return err_set(e, ERR_INVALID, EINVAL, "give either 'argv' or 'app'");
	if (app) {
		if (!app[0] || !printable(app))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'app' must be a desktop entry's id or name");
		return launch_resolved(d, "app-argv", app, timeout, out, e);
	}
	const char *argv[LAUNCH_MAX_ARGS + 1];
	if (argv_of(jargv, argv, "field 'argv'", e) < 0)
		return err_code(e);
	return desk_launch_argv(d, argv, timeout, out, e);
}

static int open_target(struct desk *d, const cJSON *a, cJSON *out, struct err *e)
{
	const char *target;
	int64_t timeout;
	if (args_string(a, "target", TARGET_MAX, ARGS_REQUIRED, &target, e) < 0 ||
	    args_int(a, "timeout_ms", 0, DESK_MAX_WAIT_MS, LAUNCH_DEFAULT_MS, 0, &timeout, e) < 0)
		return err_code(e);
	if (!target[0] || !printable(target))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'target' must be an absolute path or a URL");
	return launch_resolved(d, "open-argv", target, timeout, out, e);
}

static int apps(struct desk *d, cJSON *out, struct err *e)
{
	const char *args[] = {"apps", NULL};
	cJSON *j;
	if (desk_xtool(d, args, NULL, DESK_XTOOL_TIMEOUT_MS, &j, e) < 0)
		return err_code(e);
	cJSON *list = cJSON_DetachItemFromObjectCaseSensitive(j, "apps");
	cJSON_Delete(j);
	if (!cJSON_IsArray(list)) {
		cJSON_Delete(list);
		return err_set(e, ERR_INTERNAL, EPROTO, "deskbox-xtool gave no application list");
	}
	cJSON_AddItemToObject(out, "apps", list);
	return 0;
}

int desk_apps_action(struct desk *d, const char *name, const cJSON *args, cJSON *out, struct err *e)
{
	if (strcmp(name, "launch") == 0)
		return launch(d, args, out, e);
	if (strcmp(name, "open") == 0)
		return open_target(d, args, out, e);
	if (strcmp(name, "apps") == 0)
		return apps(d, out, e);
	if (strcmp(name, "browser") == 0)
		return desk_browser(d, args, out, e);
	return err_set(e, ERR_NOT_FOUND, ENOENT, "no desktop action '%.*s'", UTF8_CUT(name, 64));
}
