/* pool: warm desktops, ready before anyone asks.
 *
 * `deskboxd --warm-pool N[:WxH]` keeps N running sandboxes of that display
 * size (default 1280x800) with the default limits.  POST /v1/sandboxes takes
 * one when the request matches (same display size and limits, no env) and a
 * background thread starts a replacement; anything else is created cold.
 * A claim costs a list operation and one metadata write instead of a
 * container and desktop start.
 */
#ifndef DESKBOX_SERVER_POOL_H
#define DESKBOX_SERVER_POOL_H

#include <stdint.h>

#include "common/error.h"
#include "sandbox.h"

#define POOL_MAX_SIZES	  8
#define POOL_MAX_PER_SIZE 64

struct pool_size {
	uint32_t width, height;
	unsigned count;
};

struct pool;

/* Parses "N" or "N:WxH" (one --warm-pool option). */
int pool_size_parse(const char *arg, struct pool_size *out, struct err *e);

/* Starts the refill thread for `sizes`.  Caller frees with pool_free()
 * before closing `s`. */
int pool_new(struct pool **out, struct sandboxes *s, const struct pool_size *sizes, size_t n,
	     struct err *e);

/* Claims a ready sandbox matching `spec`: 1 with *out (a reference the
 * caller drops with sandbox_put), 0 when none is ready or none matches,
 * negative on error (ERR_LIMIT). */
int pool_take(struct pool *p, const struct sandbox_spec *spec, struct sandbox **out, struct err *e);

/* Stops the refill thread and deletes the sandboxes still waiting. */
void pool_free(struct pool *p);

#endif
