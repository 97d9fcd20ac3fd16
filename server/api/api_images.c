/* api_images: /v1/images (docs/images.md): list, import an OCI image
 * (synchronous, 201), build the Debian desktop image (background, 202 and
 * a status to GET), get and delete. */
#include "common/text.h"
#include "api.h"

#include <errno.h>
#include <string.h>

#include "common/args.h"
#include "server/http/http.h"
#include "server/sandbox/sandbox.h"

int api_image_list(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "images", sandbox_images_json(api->sandboxes));
	return http_reply_json(res, 200, j, e);
}

/* Every field of the body must be one of these. */
static const char *const image_fields[] = {"name",  "oci_layout", "oci_archive", "ref",
					   "build", "mirror",	  NULL};

static int create_image(struct api *api, const cJSON *body, struct http_response *res,
			struct err *e)
{
	struct image_import im = {0};
	const char *build = NULL, *mirror = NULL;
	if (args_only(body, NULL, image_fields, e) < 0 ||
	    args_string(body, "name", IMAGE_NAME_MAX, ARGS_REQUIRED, &im.name, e) < 0 ||
	    args_string(body, "oci_layout", 4000, 0, &im.layout, e) < 0 ||
	    args_string(body, "oci_archive", 4000, 0, &im.archive, e) < 0 ||
	    args_string(body, "ref", 128, 0, &im.ref, e) < 0 ||
	    args_string(body, "build", 32, 0, &build, e) < 0 ||
	    args_string(body, "mirror", 400, 0, &mirror, e) < 0)
		return err_code(e);
	if (build) {
		if (strcmp(build, "debian") != 0)
			return err_set(e, ERR_INVALID, EINVAL, "field 'build' must be \"debian\"");
		if (im.layout || im.archive || im.ref)
			return err_set(e, ERR_INVALID, EINVAL,
				       "'build' takes no 'oci_layout', 'oci_archive' or 'ref'");
		if (sandbox_image_build(api->sandboxes, im.name, mirror, e) < 0)
			return err_code(e);
		cJSON *j;
		if (sandbox_image_get(api->sandboxes, im.name, &j, e) < 0)
			return err_code(e);
		return http_reply_json(res, 202, j, e);
	}
	if (mirror)
		return err_set(e, ERR_INVALID, EINVAL, "'mirror' goes with 'build'");
	cJSON *j;
	if (sandbox_image_import(api->sandboxes, &im, &j, e) < 0)
		return err_code(e);
	return http_reply_json(res, 201, j, e);
}

int api_image_create(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	int r = cJSON_IsObject(body)
		    ? create_image(api, body, res, e)
		    : err_set(e, ERR_INVALID, EINVAL, "the body must be a JSON object");
	cJSON_Delete(body);
	return r;
}

int api_image_get(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	cJSON *j;
	if (sandbox_image_get(api->sandboxes, req->captures[0], &j, e) < 0)
		return err_code(e);
	return http_reply_json(res, 200, j, e);
}

int api_image_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	if (sandbox_image_delete(api->sandboxes, req->captures[0], e) < 0)
		return err_code(e);
	http_reply_empty(res, 204);
	return 0;
}
