#include <stddef.h>

#include "api.h"

#define SB "/v1/sandboxes/{id}"

const struct http_route api_routes[] = {
	{"GET", "/healthz", api_health, HTTP_NO_AUTH},
	{"POST", "/v1/sandboxes", api_sandbox_create, 0},
	{"GET", "/v1/sandboxes", api_sandbox_list, 0},
	{"GET", SB, api_sandbox_get, 0},
	{"DELETE", SB, api_sandbox_delete, 0},
	{"GET", SB "/desktop/screenshot", api_desktop_screenshot, 0},
	{"GET", SB "/desktop/info", api_desktop_info, 0},
	{"POST", SB "/desktop/click", api_desktop_click, 0},
	{"POST", SB "/desktop/move", api_desktop_move, 0},
	{"POST", SB "/desktop/type_text", api_desktop_type_text, 0},
	{"POST", SB "/desktop/key", api_desktop_key, 0},
	{"POST", SB "/process/exec", api_process_exec, 0},
};

const size_t api_n_routes = sizeof(api_routes) / sizeof(api_routes[0]);
