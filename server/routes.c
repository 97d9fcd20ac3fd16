#include <stddef.h>

#include "api.h"

#define SB "/v1/sandboxes/{id}"
/* A route whose body arrives whole (capped) before the handler runs. */
#define ROUTE(method, pattern, handler, flags)                                                     \
	{                                                                                          \
		method, pattern, handler, flags, NULL                                              \
	}
/* A route whose body streams into begin()'s sink as it arrives. */
#define STREAM(method, pattern, begin, handler)                                                    \
	{                                                                                          \
		method, pattern, handler, HTTP_STREAM_BODY, begin                                  \
	}

const struct http_route api_routes[] = {
    ROUTE("GET", "/healthz", api_health, HTTP_NO_AUTH),
    ROUTE("POST", "/v1/sandboxes", api_sandbox_create, 0),
    ROUTE("GET", "/v1/sandboxes", api_sandbox_list, 0),
    ROUTE("GET", SB, api_sandbox_get, 0),
    ROUTE("DELETE", SB, api_sandbox_delete, 0),

    ROUTE("GET", SB "/desktop/screenshot", api_desktop_screenshot, 0),
    ROUTE("GET", SB "/desktop/info", api_desktop_info, 0),
    ROUTE("POST", SB "/desktop/click", api_desktop_click, 0),
    ROUTE("POST", SB "/desktop/move", api_desktop_move, 0),
    ROUTE("POST", SB "/desktop/type_text", api_desktop_type_text, 0),
    ROUTE("POST", SB "/desktop/key", api_desktop_key, 0),

    ROUTE("POST", SB "/process/exec", api_process_exec, 0),
};

const size_t api_n_routes = sizeof(api_routes) / sizeof(api_routes[0]);
