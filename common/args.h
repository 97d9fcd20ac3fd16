/* args: strict validation of JSON arguments (fields of a request body, an
 * action or a tool call).  Every failure is ERR_INVALID naming the field, so a
 * client learns exactly what to fix. */
#ifndef DESKBOX_COMMON_ARGS_H
#define DESKBOX_COMMON_ARGS_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"

enum args_flags {
	ARGS_REQUIRED = 1 << 0,
};

/* An integer field in [min, max]; `def` when absent (and not required).
 * Fractions, strings and out-of-range values are refused. */
int args_int(const cJSON *obj, const char *name, int64_t min, int64_t max, int64_t def,
	     unsigned flags, int64_t *out, struct err *e);

/* A number field (fractions allowed) in [min, max]. */
int args_double(const cJSON *obj, const char *name, double min, double max, double def,
		unsigned flags, double *out, struct err *e);

/* A string field of at most `max_len` bytes; *out points into `obj` (NULL
 * when absent and not required). */
int args_string(const cJSON *obj, const char *name, size_t max_len, unsigned flags,
		const char **out, struct err *e);

int args_bool(const cJSON *obj, const char *name, int def, int *out, struct err *e);

/* A string field that must be one of `choices` (NULL-terminated); *out is
 * its index, or `def` when absent. */
int args_enum(const cJSON *obj, const char *name, const char *const *choices, int def,
	      unsigned flags, int *out, struct err *e);

/* Refuses a member of `obj` whose name is not in `known` (NULL-terminated):
 * ERR_UNKNOWN_FIELD "unknown field 'NAME'", or 'WHERE.NAME' for a nested
 * object (`where` NULL at the top of a body).  A field deskbox does not know
 * is an error, never a silent default: a typo or a feature this server lacks
 * must not go unnoticed.  A non-object `obj` (or NULL) passes: its type is
 * its own parser's to refuse.  Adding a field is adding its name to the list
 * its parser passes here. */
int args_only(const cJSON *obj, const char *where, const char *const *known, struct err *e);

/* args_only() with the names of two lists (`also` may be NULL): a body
 * made of one part's fields and another's, e.g. an action's arguments and
 * the fields every desktop body may carry. */
int args_only2(const cJSON *obj, const char *where, const char *const *known,
	       const char *const *also, struct err *e);

/* 1 when `name` is in `list` (NULL-terminated; NULL is the empty list). */
int args_listed(const char *const *list, const char *name);

/* Parses a whole decimal integer string in [min, max]. */
int args_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);

#endif
