/* The typed sandbox spec and its one JSON form, which is both the create
 * request's body (server/api/) and the "spec" part of sandbox.json. */
#include "common/text.h"
#include "sandbox.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"

const char *const sandbox_create_fields[] = {
    "display", "agent_display", "memory_mb",	  "pids_max",	 "cpu_millis", "disk_mb", "env",
    "restart", "timeout_s",	"on_timeout",	  "auto_resume", "template",   "network", "image",
    "name",    "metadata",	"read_only_root", "secrets",	 "isolation",  "root",	  NULL,
};

/* The members of "display" and "agent_display". */
static const char *const size_fields[] = {"width", "height", NULL};

void sandbox_spec_release(struct sandbox_spec *spec)
{
	for (size_t i = 0; i < SANDBOX_MAX_ENV && spec->env[i]; i++) {
		free(spec->env[i]);
		spec->env[i] = NULL;
	}
	network_policy_release(&spec->network);
	cJSON_Delete(spec->metadata);
	spec->metadata = NULL;
}

static int env_name_ok(const char *k)
{
	if (!*k || (*k >= '0' && *k <= '9'))
		return 0;
	for (const char *p = k; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return 1;
}

static int parse_disk(const cJSON *req, struct sandbox_spec *spec, struct err *e)
{
	int64_t v;
	/* 16 TiB: far past any disk, well inside what a MiB count shifted to
	 * bytes holds. */
	if (args_int(req, "disk_mb", 0, (int64_t)1 << 24, -1, 0, &v, e) < 0)
		return err_code(e);
	if (v > 0 && v < SANDBOX_DISK_MIN_MB)
		return err_set(e, ERR_INVALID, ERANGE,
			       "field 'disk_mb' must be 0 (no limit) or at least %d",
			       SANDBOX_DISK_MIN_MB);
	spec->disk_mb = v < 0 ? SANDBOX_DISK_DEFAULT : (uint64_t)v;
	return 0;
}

/* "restart", and "timeout_s", "on_timeout" and "auto_resume"
 * (sandbox_timeout.c). */
static int parse_lifetime(const cJSON *req, struct sandbox_spec *spec, struct err *e)
{
	static const char *const restarts[] = {"no", "on-failure", NULL};
	int restart;
	if (args_enum(req, "restart", restarts, 0, 0, &restart, e) < 0)
		return err_code(e);
	spec->restart_on_failure = restart == 1;
	int64_t v;
	if (args_int(req, "timeout_s", 0, SANDBOX_TIMEOUT_MAX, SANDBOX_TIMEOUT_DEFAULT, 0, &v, e) <
	    0)
		return err_code(e);
	spec->timeout_s = v;
	static const char *const actions[] = {"stop", "delete", "pause", NULL};
	int a;
	if (args_enum(req, "on_timeout", actions, 0, 0, &a, e) < 0)
		return err_code(e);
	spec->on_timeout = (enum sandbox_on_timeout)a;
	return args_bool(req, "auto_resume", 0, &spec->auto_resume, e);
}

/* "image": "default" (the embedded host-/usr image) or a stored image's
 * name; whether it exists and works is checked at create. */
static int parse_image(const cJSON *req, struct sandbox_spec *spec, struct err *e)
{
	snprintf(spec->image, sizeof(spec->image), "%s", IMAGE_DEFAULT);
	const cJSON *im = cJSON_GetObjectItemCaseSensitive(req, "image");
	if (!im || cJSON_IsNull(im))
		return 0;
	if (!cJSON_IsString(im) || !image_name_valid(im->valuestring))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'image' must be \"default\" or an image name "
			       "([a-z0-9][a-z0-9._-]{0,62})");
	snprintf(spec->image, sizeof(spec->image), "%s", im->valuestring);
	return 0;
}

/* "isolation": "container" | "vm"; absent or null: the server's default.
 * Whether this host can provide it is checked at create. */
static int parse_isolation(const cJSON *req, struct sandbox_spec *spec, struct err *e)
{
	const cJSON *iso = cJSON_GetObjectItemCaseSensitive(req, "isolation");
	if (!iso || cJSON_IsNull(iso))
		return 0;
	if (!cJSON_IsString(iso) || runtime_isolation_parse(iso->valuestring, &spec->isolation) < 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'isolation' must be \"container\" or \"vm\"");
	return 0;
}

/* "env": {K: V} into spec->env; on failure what was added is released. */
static int parse_env(const cJSON *req, struct sandbox_spec *spec, struct err *e)
{
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(req, "env");
	if (env && !cJSON_IsNull(env)) {
		if (!cJSON_IsObject(env))
			return err_set(e, ERR_INVALID, EINVAL, "field 'env' must be an object");
		size_t n = 0;
		const cJSON *it;
		cJSON_ArrayForEach(it, env)
		{
			if (n >= SANDBOX_MAX_ENV) {
				sandbox_spec_release(spec);
				return err_set(e, ERR_INVALID, E2BIG, "more than %d env variables",
					       SANDBOX_MAX_ENV);
			}
			if (!env_name_ok(it->string) || strlen(it->string) > 256) {
				sandbox_spec_release(spec);
				return err_set(e, ERR_INVALID, EINVAL,
					       "bad env variable name '%.*s'",
					       UTF8_CUT(it->string, 64));
			}
			if (!cJSON_IsString(it) || strlen(it->valuestring) > 32768) {
				sandbox_spec_release(spec);
				return err_set(e, ERR_INVALID, EINVAL,
					       "env '%s' must be a string of at most 32768 bytes",
					       it->string);
			}
			if (asprintf(&spec->env[n], "%s=%s", it->string, it->valuestring) < 0) {
				spec->env[n] = NULL;
				sandbox_spec_release(spec);
				return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
			}
			n++;
		}
	}
	return 0;
}

int sandbox_spec_parse(const cJSON *req, struct sandbox_spec *spec, struct err *e)
{
	memset(spec, 0, sizeof(*spec));
	spec->width = 1280;
	spec->height = 800;
	int64_t v;
	const cJSON *display = cJSON_GetObjectItemCaseSensitive(req, "display");
	if (display && !cJSON_IsNull(display)) {
		if (!cJSON_IsObject(display))
			return err_set(e, ERR_INVALID, EINVAL, "field 'display' must be an object");
		if (args_only(display, "display", size_fields, e) < 0)
			return err_code(e);
		if (args_int(display, "width", 320, 4096, 1280, 0, &v, e) < 0)
			return err_wrap(e, "display");
		spec->width = (uint32_t)v;
		if (args_int(display, "height", 200, 4096, 800, 0, &v, e) < 0)
			return err_wrap(e, "display");
		spec->height = (uint32_t)v;
	}
	if (args_int(req, "memory_mb", 128, 1 << 20, 2048, 0, &v, e) < 0)
		return err_code(e);
	spec->memory_mb = (uint64_t)v;
	if (args_int(req, "pids_max", 32, 1 << 22, 1024, 0, &v, e) < 0)
		return err_code(e);
	spec->pids_max = v;
	if (args_int(req, "cpu_millis", 0, 256000, 0, 0, &v, e) < 0)
		return err_code(e);
	spec->cpu_millis = (uint32_t)v;
	if (parse_disk(req, spec, e) < 0)
		return err_code(e);
	if (parse_lifetime(req, spec, e) < 0)
		return err_code(e);
	const cJSON *ad = cJSON_GetObjectItemCaseSensitive(req, "agent_display");
	if (ad && !cJSON_IsNull(ad)) {
		if (!cJSON_IsObject(ad))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'agent_display' must be an object");
		if (args_only(ad, "agent_display", size_fields, e) < 0)
			return err_code(e);
		if (args_int(ad, "width", 64, 8192, 0, ARGS_REQUIRED, &v, e) < 0)
			return err_wrap(e, "agent_display");
		spec->agent_width = (uint32_t)v;
		if (args_int(ad, "height", 64, 8192, 0, ARGS_REQUIRED, &v, e) < 0)
			return err_wrap(e, "agent_display");
		spec->agent_height = (uint32_t)v;
	}
	if (parse_image(req, spec, e) < 0 || parse_isolation(req, spec, e) < 0 ||
	    parse_env(req, spec, e) < 0)
		return err_code(e);
	if (sandbox_spec_parse_labels(req, spec, e) < 0 ||
	    sandbox_spec_parse_secrets(req, spec, e) < 0) {
		sandbox_spec_release(spec);
		return err_code(e);
	}
	/* Last: what failed before has no network to release. */
	if (network_policy_parse(cJSON_GetObjectItemCaseSensitive(req, "network"), &spec->network,
				 e) < 0) {
		sandbox_spec_release(spec);
		return err_code(e);
	}
	return 0;
}
