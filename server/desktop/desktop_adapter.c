/* What the tool-format adapters (desktop_anthropic.c, desktop_openai.c)
 * share: running a deskbox action for them, letting the screen settle, and
 * the screenshot a tool result carries. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "desktop.h"
#include "internal.h"

/* Settle time before the screenshot a tool result carries: the model should
 * see the effect of its action, not the frame before it. */
#define SETTLE_QUIET_MS	  150
#define SETTLE_TIMEOUT_MS 2000

int desk_adapter_run(struct desk *d, const char *name, const cJSON *args, struct err *e)
{
	cJSON *res = cJSON_CreateObject();
	int r = res ? desk_action(d, name, args, res, e)
		    : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_Delete(res);
	return r;
}

int desk_adapter_settle(struct desk *d, struct err *e)
{
	cJSON *w = cJSON_CreateObject(), *res = cJSON_CreateObject();
	int r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (w && res) {
		cJSON_AddStringToObject(w, "until", "stable");
		cJSON_AddNumberToObject(w, "quiet_ms", SETTLE_QUIET_MS);
		cJSON_AddNumberToObject(w, "timeout_ms", SETTLE_TIMEOUT_MS);
		r = desk_wait(d, w, res, e);
	}
	cJSON_Delete(w);
	cJSON_Delete(res);
	return r;
}

int desk_adapter_shot(struct desk *d, const int64_t *region, char **b64, uint64_t *frame,
		      struct err *e)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (region) {
		cJSON_AddNumberToObject(o, "x", (double)region[0]);
		cJSON_AddNumberToObject(o, "y", (double)region[1]);
		cJSON_AddNumberToObject(o, "w", (double)(region[2] - region[0]));
		cJSON_AddNumberToObject(o, "h", (double)(region[3] - region[1]));
		/* Zoom: the region at its own resolution, the real screen's
		 * pixels under it, neither scaled up nor down. */
		cJSON_AddNumberToObject(o, "scale", (double)d->w / (double)d->aw);
	}
	struct shot_opts so;
	struct shot s;
	int r = desk_shot_parse(d, o, &so, e);
	cJSON_Delete(o);
	if (r == 0)
		r = desk_shot_take(d, &so, &s, e);
	if (r < 0)
		return r;
	cJSON *j = desk_shot_json(&s);
	const cJSON *data = j ? cJSON_GetObjectItemCaseSensitive(j, "data") : NULL;
	*b64 = cJSON_IsString(data) ? strdup(data->valuestring) : NULL;
	*frame = s.frame;
	cJSON_Delete(j);
	desk_shot_release(&s);
	return *b64 ? 0 : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
}

/* The square root of v > 0 by Newton's iteration (no libm here). */
static double root(double v)
{
	double x = v > 1 ? v : 1;
	for (int i = 0; i < 64; i++)
		x = 0.5 * (x + v / x);
	return x;
}

void desk_fit(uint32_t w, uint32_t h, uint32_t max_side, uint64_t max_pixels, uint32_t *aw,
	      uint32_t *ah)
{
	double k = 1.0, side = (double)(w > h ? w : h), px = (double)w * (double)h;
	if (max_side && side > max_side)
		k = (double)max_side / side;
	if (max_pixels && px * k * k > (double)max_pixels)
		k = root((double)max_pixels / px);
	*aw = (uint32_t)((double)w * k);
	*ah = (uint32_t)((double)h * k);
	if (*aw < 1)
		*aw = 1;
	if (*ah < 1)
		*ah = 1;
}
