/* The actions batch: several actions in one call, then optionally a wait
 * and a screenshot, so an agent step costs one round trip. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/args.h"
#include "common/text.h"
#include "common/clock.h"
#include "desktop.h"

/* Actions one batch may hold, and how long a batch may run before the
 * remaining actions are refused. */
#define BATCH_MAX_ACTIONS 64
#define BATCH_MAX_MS	  120000

/* The "then" part of a batch: an optional wait, then an optional
 * screenshot (true, or an object of screenshot options). */
static int batch_then(struct desk *d, const cJSON *then, cJSON *out, struct err *e)
{
	if (!then || cJSON_IsNull(then))
		return 0;
	if (!cJSON_IsObject(then))
		return err_set(e, ERR_INVALID, EINVAL, "field 'then' must be an object");
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(then, "wait");
	if (w && !cJSON_IsNull(w)) {
		if (!cJSON_IsObject(w))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'then.wait' must be an object");
		cJSON *wo = cJSON_AddObjectToObject(out, "wait");
		if (desk_wait(d, w, wo, e) < 0)
			return err_wrap(e, "then.wait");
	}
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(then, "screenshot");
	if (!s || cJSON_IsNull(s) || cJSON_IsFalse(s))
		return 0;
	cJSON *empty = NULL;
	if (cJSON_IsTrue(s))
		s = empty = cJSON_CreateObject();
	else if (!cJSON_IsObject(s))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'then.screenshot' must be true or an object of options");
	struct shot_opts so;
	struct shot shot;
	int r = desk_shot_parse(d, s, &so, e);
	cJSON_Delete(empty);
	if (r == 0)
		r = desk_shot_take(d, &so, &shot, e);
	if (r < 0)
		return err_wrap(e, "then.screenshot");
	cJSON *sj = desk_shot_json(&shot);
	desk_shot_release(&shot);
	if (!sj)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_AddItemToObject(out, "screenshot", sj);
	return 0;
}

/* Every member of the batch, its actions and its "then", known, before
 * any action runs: a typo in the last action must not leave the first
 * ones done. */
int desk_batch_check(const cJSON *body, struct err *e)
{
	/* "sensitive": the whole batch's typed text redacted in the action log,
	 * or one action's (docs/observation.md). */
	static const char *const fields[] = {"actions", "then", "agent_display", "sensitive", NULL};
	static const char *const item[] = {"action", "sensitive", NULL};
	static const char *const then_fields[] = {"wait", "screenshot", NULL};
	if (args_only(body, NULL, fields, e) < 0)
		return err_code(e);
	const cJSON *a;
	int i = 0;
	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(body, "actions"))
	{
		const char *name =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "action"));
		char where[32];
		snprintf(where, sizeof(where), "actions[%d]", i++);
		if (name && desk_action_check(name, a, item, where, e) < 0)
			return err_code(e);
	}
	const cJSON *then = cJSON_GetObjectItemCaseSensitive(body, "then");
	const cJSON *shot = cJSON_GetObjectItemCaseSensitive(then, "screenshot");
	if (args_only(then, "then", then_fields, e) < 0 ||
	    desk_action_check("wait", cJSON_GetObjectItemCaseSensitive(then, "wait"), NULL,
			      "then.wait", e) < 0 ||
	    args_only(shot, "then.screenshot", desk_shot_fields, e) < 0)
		return err_code(e);
	return 0;
}

int desk_batch(struct desk *d, const cJSON *body, cJSON *j, struct err *e)
{
	if (desk_batch_check(body, e) < 0)
		return err_code(e);
	long long start = clock_mono_ms();
	cJSON *results = cJSON_AddArrayToObject(j, "results");
	const cJSON *acts = cJSON_GetObjectItemCaseSensitive(body, "actions");
	int r = 0;
	if (!cJSON_IsArray(acts) || cJSON_GetArraySize(acts) > BATCH_MAX_ACTIONS)
		r = err_set(e, ERR_INVALID, EINVAL,
			    "field 'actions' must be an array of at most %d actions",
			    BATCH_MAX_ACTIONS);
	int i = 0;
	const cJSON *a;
	const cJSON *list = r == 0 ? acts : NULL;
	cJSON_ArrayForEach(a, list)
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(a, "action");
		if (!cJSON_IsObject(a) || !cJSON_IsString(name)) {
			r = err_set(e, ERR_INVALID, EINVAL,
				    "actions[%d] must be an object with an 'action' name", i);
			break;
		}
		if (clock_mono_ms() - start > BATCH_MAX_MS) {
			r = err_set(e, ERR_TIMEOUT, ETIMEDOUT,
				    "actions[%d]: the batch ran past %d ms", i, BATCH_MAX_MS);
			break;
		}
		cJSON *one = cJSON_CreateObject();
		cJSON_AddItemToArray(results, one);
		cJSON_AddStringToObject(one, "action", name->valuestring);
		r = desk_action(d, name->valuestring, a, one, e);
		if (r < 0) {
			err_wrap(e, "actions[%d] (%.*s)", i, UTF8_CUT(name->valuestring, 32));
			break;
		}
		i++;
	}
	if (r == 0)
		r = batch_then(d, cJSON_GetObjectItemCaseSensitive(body, "then"), j, e);
	if (r == 0)
		cJSON_AddNumberToObject(j, "frame", (double)capture_frame(d->cap));
	return r;
}
