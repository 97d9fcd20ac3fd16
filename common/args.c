#include "common/text.h"
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int missing(const char *name, unsigned flags, struct err *e)
{
	if (flags & ARGS_REQUIRED)
		return err_set(e, ERR_INVALID, EINVAL, "missing field '%s'", name);
	return 0;
}

int args_int(const cJSON *obj, const char *name, int64_t min, int64_t max, int64_t def,
	     unsigned flags, int64_t *out, struct err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	*out = def;
	if (!v || cJSON_IsNull(v))
		return missing(name, flags, e);
	if (!cJSON_IsNumber(v))
		return err_set(e, ERR_INVALID, EINVAL, "field '%s' must be an integer", name);
	double d = v->valuedouble;
	if (!isfinite(d) || d != floor(d))
		return err_set(e, ERR_INVALID, EINVAL, "field '%s' must be an integer", name);
	if (d < (double)min || d > (double)max)
		return err_set(e, ERR_INVALID, ERANGE, "field '%s' must be between %lld and %lld",
			       name, (long long)min, (long long)max);
	*out = (int64_t)d;
	return 0;
}

int args_double(const cJSON *obj, const char *name, double min, double max, double def,
		unsigned flags, double *out, struct err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	*out = def;
	if (!v || cJSON_IsNull(v))
		return missing(name, flags, e);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return err_set(e, ERR_INVALID, EINVAL, "field '%s' must be a number", name);
	if (v->valuedouble < min || v->valuedouble > max)
		return err_set(e, ERR_INVALID, ERANGE, "field '%s' must be between %g and %g", name,
			       min, max);
	*out = v->valuedouble;
	return 0;
}

int args_string(const cJSON *obj, const char *name, size_t max_len, unsigned flags,
		const char **out, struct err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return missing(name, flags, e);
	if (!cJSON_IsString(v) || !v->valuestring)
		return err_set(e, ERR_INVALID, EINVAL, "field '%s' must be a string", name);
	if (strlen(v->valuestring) > max_len)
		return err_set(e, ERR_INVALID, E2BIG, "field '%s' is longer than %zu bytes", name,
			       max_len);
	*out = v->valuestring;
	return 0;
}

int args_bool(const cJSON *obj, const char *name, int def, int *out, struct err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	*out = def;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsBool(v))
		return err_set(e, ERR_INVALID, EINVAL, "field '%s' must be true or false", name);
	*out = cJSON_IsTrue(v);
	return 0;
}

int args_enum(const cJSON *obj, const char *name, const char *const *choices, int def,
	      unsigned flags, int *out, struct err *e)
{
	const char *s;
	int r = args_string(obj, name, 64, flags, &s, e);
	*out = def;
	if (r < 0 || !s)
		return r;
	for (int i = 0; choices[i]; i++) {
		if (strcmp(s, choices[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	char list[256] = "";
	for (int i = 0; choices[i]; i++) {
		strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
		strncat(list, choices[i], sizeof(list) - strlen(list) - 1);
	}
	return err_set(e, ERR_INVALID, EINVAL, "field '%s' must be one of: %s", name, list);
}

int args_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
	if (!s || !*s || strlen(s) > 20)
		return -EINVAL;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || (s[0] != '-' && (s[0] < '0' || s[0] > '9')))
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int args_listed(const char *const *list, const char *name)
{
	for (; list && *list; list++)
		if (strcmp(*list, name) == 0)
			return 1;
	return 0;
}

int args_only2(const cJSON *obj, const char *where, const char *const *known,
	       const char *const *also, struct err *e)
{
	if (!cJSON_IsObject(obj))
		return 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, obj)
	{
		if (!args_listed(known, it->string) && !args_listed(also, it->string))
			return err_set(e, ERR_UNKNOWN_FIELD, EINVAL, "unknown field '%s%s%.*s'",
				       where ? where : "", where ? "." : "",
				       UTF8_CUT(it->string, 64));
	}
	return 0;
}

int args_only(const cJSON *obj, const char *where, const char *const *known, struct err *e)
{
	return args_only2(obj, where, known, NULL, e);
}
