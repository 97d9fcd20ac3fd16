/* The members each desktop action's arguments may have.  A member not
 * listed is refused (ERR_UNKNOWN_FIELD) before anything is sent to the
 * desktop, so a batch with a typo in its fifth action runs none of them.
 * A new argument of an action is its name added to the action's list. */
#include <string.h>

#include "common/args.h"
#include "desktop.h"

#define POINT "x", "y"

static const char *const none[] = {NULL};
static const char *const move[] = {POINT, "modifiers", NULL};
static const char *const click[] = {POINT, "button", "count", "modifiers", NULL};
static const char *const button[] = {POINT, "button", NULL};
static const char *const drag[] = {"path", "button", "modifiers", NULL};
static const char *const scroll[] = {POINT, "direction", "amount", "dx", "dy", "modifiers", NULL};
static const char *const keys[] = {"keys", NULL};
static const char *const hold_key[] = {"keys", "duration_ms", NULL};
static const char *const type_text[] = {"text", "delay_ms", NULL};
static const char *const wait[] = {"until", "ms", "quiet_ms", "timeout_ms", "since_frame", NULL};
static const char *const windows[] = {"title", "class", "pid", NULL};
static const char *const wait_window[] = {"title", "class", "pid", "timeout_ms", NULL};
static const char *const window_move[] = {POINT, NULL};
static const char *const window_resize[] = {"width", "height", NULL};
static const char *const set_clipboard[] = {"text", NULL};
static const char *const launch[] = {"app", "argv", "timeout_ms", NULL};
static const char *const open_target[] = {"target", "timeout_ms", NULL};
static const char *const browser[] = {"url", "timeout_ms", NULL};

const char *const desk_shot_fields[] = {"x",	   "y",	     "w",	 "h",
					"scale",   "width",  "height",	 "format",
					"quality", "cursor", "lossless", NULL};

static const struct {
	const char *action;
	const char *const *fields;
} action_fields[] = {
    {"move", move},
    {"click", click},
    {"mouse_down", button},
    {"mouse_up", button},
    {"drag", drag},
    {"scroll", scroll},
    {"key", keys},
    {"key_down", keys},
    {"key_up", keys},
    {"hold_key", hold_key},
    {"type_text", type_text},
    {"wait", wait},
    {"cursor", none},
    {"windows", windows},
    {"wait_window", wait_window},
    {"window_activate", none},
    {"window_close", none},
    {"window_minimize", none},
    {"window_maximize", none},
    {"window_move", window_move},
    {"window_resize", window_resize},
    {"get_clipboard", none},
    {"set_clipboard", set_clipboard},
    {"launch", launch},
    {"open", open_target},
    {"apps", none},
    {"browser", browser},
};

const char *const *desk_action_fields(const char *name)
{
	for (size_t i = 0; i < sizeof(action_fields) / sizeof(action_fields[0]); i++)
		if (strcmp(action_fields[i].action, name) == 0)
			return action_fields[i].fields;
	return NULL;
}

int desk_action_check(const char *name, const cJSON *args, const char *const *also,
		      const char *where, struct err *e)
{
	const char *const *fields = desk_action_fields(name);
	if (!fields)
		return 0; /* desk_action() answers an unknown action itself */
	return args_only2(args, where, fields, also, e);
}
