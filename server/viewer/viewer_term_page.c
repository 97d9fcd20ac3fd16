/* The terminal page and its files, built in (server/viewer/xterm/README.md
 * says where each comes from): the page works offline, with no file of
 * the host read at run time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viewer.h"

/* make runs from the top directory. */
#define EMBED(sym, path)                                                                           \
	__asm__(".section .rodata\n"                                                               \
		".global " #sym "\n" #sym ":\n"                                                    \
		".incbin \"" path "\"\n"                                                           \
		".byte 0\n"                                                                        \
		".previous\n");                                                                    \
	extern const char sym[];

EMBED(deskbox_xterm_js, "server/viewer/xterm/xterm.js")
EMBED(deskbox_xterm_css, "server/viewer/xterm/xterm.css")
EMBED(deskbox_xterm_fit_js, "server/viewer/xterm/addon-fit.js")
EMBED(deskbox_terminal_js, "server/viewer/xterm/terminal.js")

static const char page[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>deskbox terminal</title>\n"
    "<link rel=\"stylesheet\" href=\"xterm.css\">\n"
    "<style>html,body{margin:0;height:100%%;background:#000;color:#ccc;"
    "font:13px sans-serif}#status{position:fixed;right:8px;top:4px;opacity:.7;z-index:10}"
    "#term{position:absolute;inset:0}</style>\n"
    "<script src=\"xterm.js\"></script>\n"
    "<script src=\"addon-fit.js\"></script>\n"
    "<script src=\"terminal.js\" defer></script>\n"
    "</head><body data-view-only=\"%s\"><div id=\"status\">connecting</div>"
    "<div id=\"term\"></div></body></html>\n";

char *vnc_term_page_render(int view_only, size_t *len)
{
	char *out;
	int n = asprintf(&out, page, view_only ? "1" : "0");
	if (n < 0)
		return NULL;
	*len = (size_t)n;
	return out;
}

const char *vnc_term_static(const char *name, size_t *len, const char **type)
{
	static const struct {
		const char *name, *data, *type;
	} files[] = {
	    {"xterm.js", deskbox_xterm_js, "text/javascript; charset=utf-8"},
	    {"addon-fit.js", deskbox_xterm_fit_js, "text/javascript; charset=utf-8"},
	    {"terminal.js", deskbox_terminal_js, "text/javascript; charset=utf-8"},
	    {"xterm.css", deskbox_xterm_css, "text/css; charset=utf-8"},
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (strcmp(name, files[i].name) == 0) {
			*len = strlen(files[i].data);
			*type = files[i].type;
			return files[i].data;
		}
	}
	return NULL;
}
