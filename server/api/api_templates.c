/* api_templates: POST/GET /v1/templates, GET/DELETE /v1/templates/{name}
 * (docs/lifecycle.md), and the expansion of a create that names one. */
#include <stdlib.h>

#include "api.h"
#include "common/args.h"

int api_template_put(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const char *name;
	cJSON *j = NULL;
	static const char *const own[] = {"name", NULL};
	int r = args_only2(body, NULL, sandbox_template_fields, own, e);
	r = r ?: args_string(body, "name", SANDBOX_TEMPLATE_NAME_MAX + 8, ARGS_REQUIRED, &name, e);
	if (r == 0) {
		cJSON *tpl = cJSON_Duplicate(body, 1);
		cJSON_DeleteItemFromObjectCaseSensitive(tpl, "name");
		r = sandbox_template_put(api->templates, name, tpl, e);
		cJSON_Delete(tpl);
	}
	if (r == 0)
		pool_template_sync(api->pool, name);
	if (r == 0 && (r = sandbox_template_get(api->templates, name, &j, e)) == 0)
		pool_template_json(api->pool, name, j);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	return http_reply_json(res, 201, j, e);
}

int api_template_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *j = cJSON_CreateObject();
	cJSON *list = sandbox_templates_json(api->templates);
	cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		pool_template_json(
		    api->pool, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name")),
		    it);
	}
	cJSON_AddItemToObject(j, "templates", list);
	return http_reply_json(res, 200, j, e);
}

int api_template_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *j;
	if (sandbox_template_get(api->templates, req->captures[0], &j, e) < 0)
		return err_code(e);
	pool_template_json(api->pool, req->captures[0], j);
	return http_reply_json(res, 200, j, e);
}

int api_template_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	if (sandbox_template_delete(api->templates, req->captures[0], e) < 0)
		return err_code(e);
	pool_template_sync(api->pool, req->captures[0]); /* drains its pool */
	http_reply_empty(res, 204);
	return 0;
}

int api_template_expand(struct api *api, cJSON **body, struct sandbox_template_extra *extra,
			struct err *e)
{
	extra->files = extra->startup = NULL;
	if (!cJSON_GetObjectItemCaseSensitive(*body, "template"))
		return 0;
	/* What belongs to one sandbox, not to a template: taken aside and
	 * given to the create as it is (a template holds no name). */
	static const char *const own[] = {"name", "metadata", "read_only_root"};
	cJSON *kept[3];
	for (size_t i = 0; i < 3; i++)
		kept[i] = cJSON_DetachItemFromObjectCaseSensitive(*body, own[i]);
	cJSON *create;
	int r = sandbox_template_expand(api->templates, *body, &create, extra, e);
	for (size_t i = 0; i < 3; i++) {
		if (r == 0 && kept[i])
			cJSON_AddItemToObject(create, own[i], kept[i]);
		else
			cJSON_Delete(kept[i]);
	}
	if (r < 0)
		return r;
	cJSON_Delete(*body);
	*body = create;
	return 0;
}
