/* vnc_page: the viewer page and its script, built into deskboxd.  The page
 * loads noVNC's core (served from the Debian novnc package's files next to
 * it) and connects to the WebSocket next to it. */
#ifndef DESKBOX_SERVER_VNC_PAGE_H
#define DESKBOX_SERVER_VNC_PAGE_H

#include <stddef.h>

/* The page's template: "%s" stands for "1" (view-only) or "0", "%p" for the
 * modulepreload links of noVNC's modules. */
extern const char vnc_page_html[];
/* The page for a viewer; malloc'd, NUL-terminated, NULL without memory. */
char *vnc_page_render(int view_only, size_t *len);
/* The page's style and script (served as "viewer.css" and "viewer.js"
 * next to the page). */
extern const char vnc_page_css[];
extern const char vnc_page_js[];

#endif
