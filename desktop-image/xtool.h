/* deskbox-xtool's pieces (desktop-image/xtool*.c), private to the tool:
 * xtool.c the commands' table, clipboard and pointer; xtool_util.c the JSON
 * output and the X connection; xtool_win.c windows (libxdo); xtool_apps.c
 * desktop entries and default applications. */
#ifndef DESKBOX_XTOOL_H
#define DESKBOX_XTOOL_H

#include <X11/Xlib.h>
#include <stddef.h>

/* Prints {"error":"..."} and exits with status 1. */
__attribute__((format(printf, 1, 2), noreturn)) void die(const char *fmt, ...);

/* Writes `s` (`len` bytes) as a JSON string: invalid UTF-8 becomes U+FFFD,
 * control characters are escaped. */
void json_str(const unsigned char *s, size_t len);
/* The same for a NUL-terminated string. */
void json_cstr(const char *s);

/* A number in [min, max] or die() naming `what`. */
long number(const char *s, long min, long max, const char *what);

/* The one X connection, closed at exit; die()s when there is none. */
Display *open_display(void);
/* An X error handler that ignores errors (windows vanish any time). */
int ignore_errors(Display *d, XErrorEvent *ev);
/* A window property's data (caller XFree()s), or NULL. */
unsigned char *get_prop(Display *d, Window w, Atom prop, Atom type, unsigned long *n);
/* Sends an EWMH client message about `w` to the window manager. */
void wm_request(Display *d, Window w, const char *type, long l0, long l1, long l2, long l3);

/* The commands (argv[0] is the command's name). */
int cmd_windows(int argc, char **argv);
int cmd_window_op(int argc, char **argv);
int cmd_wait_window(int argc, char **argv);
int cmd_wait_new(const char *ms_arg);
int cmd_apps(void);
int cmd_app_argv(const char *id);
int cmd_open_argv(const char *target);

#endif
