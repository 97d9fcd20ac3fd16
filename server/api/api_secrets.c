/* api_secrets: POST/GET /v1/secrets, GET/DELETE /v1/secrets/{name}
 * (docs/secrets.md).  A secret's value goes in and never comes out. */
#include "api.h"

int api_secret_put(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body, *out = NULL;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	int r = secrets_put(api->secrets, body, &out, e);
	cJSON_Delete(body);
	if (r < 0)
		return r;
	return http_reply_json(res, 201, out, e);
}

int api_secret_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	return http_reply_json(res, 200, secrets_list_json(api->secrets), e);
}

int api_secret_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *out;
	if (secrets_get_json(api->secrets, req->captures[0], &out, e) < 0)
		return err_code(e);
	return http_reply_json(res, 200, out, e);
}

int api_secret_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	if (secrets_delete(api->secrets, req->captures[0], e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}
