/* Helpers the front-ends share: entering a sandbox, running a command or a
 * piece of code to its end, paths, environments, timestamps. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "server/compat/internal.h"
#include "server/files/files.h"

int compat_enter(struct api *api, const char *id, struct sandbox **sb, struct err *e)
{
	if (sandbox_get(api->sandboxes, id, sb, e) < 0)
		return err_code(e);
	if (sandbox_use(*sb, 0, NULL, e) < 0) {
		sandbox_put(*sb);
		*sb = NULL;
		return err_code(e);
	}
	return 0;
}

void compat_release(struct sandbox *sb)
{
	sandbox_unuse(sb);
	sandbox_put(sb);
}

int compat_language(const char *name)
{
	static const struct {
		const char *name, *lang;
	} alias[] = {
	    {"python", "python"},   {"python3", "python"}, {"py", "python"},
	    {"javascript", "node"}, {"js", "node"},	   {"node", "node"},
	    {"typescript", "node"}, {"bash", "bash"},	   {"sh", "bash"},
	};
	for (size_t i = 0; i < sizeof(alias) / sizeof(alias[0]); i++) {
		if (strcmp(name, alias[i].name) != 0)
			continue;
		for (int l = 0; process_languages[l]; l++)
			if (strcmp(process_languages[l], alias[i].lang) == 0)
				return l;
	}
	return -1;
}

#define RUN_MAX_ARGS 16
#define RUN_ARGV     (RUN_MAX_ARGS + 8)

/* The run's argv: sh -c, or the language's interpreter looked up in the
 * sandbox's own tree; with merge_stderr behind a shell that sends stderr
 * to stdout first. */
static int run_argv(struct sandbox *sb, const struct compat_run *run, const char *argv[RUN_ARGV],
		    struct err *e)
{
	const char *inner[4];
	if (run->language < 0) {
		inner[0] = "/bin/sh";
		inner[1] = "-c";
		inner[2] = run->command;
		inner[3] = NULL;
	} else {
		struct files_root root;
		if (sandbox_open_root(sb, &root, e) < 0)
			return err_code(e);
		int r = process_code_argv(run->language, run->code, root.fd, inner, e);
		close(root.fd);
		if (r < 0)
			return r;
	}
	size_t n = 0;
	if (run->merge_stderr) {
		argv[n++] = "/bin/sh";
		argv[n++] = "-c";
		argv[n++] = "exec 2>&1; exec \"$@\"";
		argv[n++] = "sh";
	}
	for (size_t i = 0; inner[i]; i++)
		argv[n++] = inner[i];
	for (size_t i = 0; run->language >= 0 && run->args && run->args[i]; i++) {
		if (i >= RUN_MAX_ARGS)
			return err_set(e, ERR_INVALID, E2BIG, "more than %d arguments",
				       RUN_MAX_ARGS);
		argv[n++] = run->args[i];
	}
	argv[n] = NULL;
	return 0;
}

int compat_run(struct api *api, const char *id, const struct compat_run *run,
	       struct process_result *res, struct err *e)
{
	const char *argv[RUN_ARGV];
	struct process_opts o = {
	    .argv = argv,
	    .env = run->env,
	    .cwd = run->cwd,
	    .max_output = api->exec_max_output,
	    .timeout_ms =
		run->timeout_ms > 0 ? run->timeout_ms : api->exec_timeout_default_s * 1000,
	};
	if (o.timeout_ms > api->exec_timeout_max_s * 1000)
		o.timeout_ms = api->exec_timeout_max_s * 1000;
	struct sandbox *sb;
	if (compat_enter(api, id, &sb, e) < 0)
		return err_code(e);
	struct process_run *pr;
	int r = run_argv(sb, run, argv, e);
	if (r == 0)
		r = process_start(sandbox_procs(sb), &o, &pr, e);
	compat_release(sb);
	if (r < 0)
		return r;
	while (!process_step(pr, 1000, NULL, NULL))
		;
	r = process_finish(pr, res, e);
	process_run_free(pr);
	return r;
}

int compat_path(struct sandbox *sb, const char *path, const char *base, struct files_root *root,
		char *canon, struct err *e)
{
	char joined[PATH_MAX];
	if (!path || !path[0])
		return err_set(e, ERR_INVALID, EINVAL, "empty path");
	if (path[0] != '/' && snprintf(joined, sizeof(joined), "%s/%s", base ? base : "/workspace",
				       path) >= (int)sizeof(joined))
		return err_set(e, ERR_INVALID, ENAMETOOLONG, "path too long");
	const char *p = path[0] == '/' ? path : joined;
	if (files_path_normalize(p, strlen(p), canon, PATH_MAX, e) < 0)
		return err_code(e);
	return sandbox_open_root(sb, root, e);
}

int compat_env(const cJSON *obj, char ***out, size_t max, struct err *e)
{
	*out = NULL;
	if (!obj || cJSON_IsNull(obj))
		return 0;
	if (!cJSON_IsObject(obj))
		return err_set(e, ERR_INVALID, EINVAL, "environment must be an object of strings");
	size_t n = (size_t)cJSON_GetArraySize(obj);
	if (n > max)
		return err_set(e, ERR_INVALID, E2BIG, "more than %zu environment variables", max);
	char **env = calloc(n + 1, sizeof(*env));
	if (!env)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	size_t i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, obj)
	{
		if (!cJSON_IsString(it) || !it->string[0] || strchr(it->string, '=')) {
			compat_env_free(env);
			return err_set(e, ERR_INVALID, EINVAL, "environment variable '%.*s' is bad",
				       UTF8_CUT(it->string, 64));
		}
		if (asprintf(&env[i], "%s=%s", it->string, it->valuestring) < 0) {
			env[i] = NULL;
			compat_env_free(env);
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		}
		i++;
	}
	*out = env;
	return 0;
}

void compat_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

int compat_create(struct api *api, const cJSON *spec_json, struct sandbox **out, struct err *e)
{
	struct sandbox_spec spec;
	if (sandbox_spec_parse(spec_json, &spec, e) < 0)
		return err_code(e);
	int r = pool_take(api->pool, &spec, out, e);
	if (r != 0) {
		sandbox_spec_release(&spec);
		return r < 0 ? r : 0;
	}
	return sandbox_create(api->sandboxes, &spec, out, e);
}
