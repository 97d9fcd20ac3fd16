/* GET /v1/openapi.yaml: the API's description (docs/openapi.yaml), built
 * into deskboxd so the server always serves the one that matches it.  Public
 * like /healthz: it holds nothing a client could not read in the docs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

/* NUL-terminated (make runs from the top directory). */
__asm__(".section .rodata\n"
	".global deskbox_openapi_yaml\n"
	"deskbox_openapi_yaml:\n"
	".incbin \"docs/openapi.yaml\"\n"
	".byte 0\n"
	".previous\n");
extern const char deskbox_openapi_yaml[];

int api_openapi(struct http_request *req, struct http_response *res, struct err *e)
{
	(void)req;
	(void)e;
	size_t len = strlen(deskbox_openapi_yaml);
	char *copy = malloc(len);
	if (!copy)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	memcpy(copy, deskbox_openapi_yaml, len);
	http_reply_data(res, 200, "application/yaml", copy, len);
	return 0;
}
