#include "viewer.h"

#include <stdlib.h>
#include <string.h>

/* The import graph of core/rfb.js in Debian's noVNC 1.3.0.  Announced as
 * <link rel="modulepreload"> so the browser fetches all of it at once instead
 * of discovering it one import level at a time; an entry another noVNC
 * version lacks only costs a failed fetch, one it adds a round trip. */
static const char *const preload[] = {
    "core/rfb.js",
    "core/base64.js",
    "core/decoders/copyrect.js",
    "core/decoders/hextile.js",
    "core/decoders/raw.js",
    "core/decoders/rre.js",
    "core/decoders/tight.js",
    "core/decoders/tightpng.js",
    "core/deflator.js",
    "core/des.js",
    "core/display.js",
    "core/encodings.js",
    "core/inflator.js",
    "core/input/domkeytable.js",
    "core/input/fixedkeys.js",
    "core/input/gesturehandler.js",
    "core/input/keyboard.js",
    "core/input/keysym.js",
    "core/input/keysymdef.js",
    "core/input/util.js",
    "core/input/vkeys.js",
    "core/input/xtscancodes.js",
    "core/util/browser.js",
    "core/util/cursor.js",
    "core/util/element.js",
    "core/util/events.js",
    "core/util/eventtarget.js",
    "core/util/int.js",
    "core/util/logging.js",
    "core/util/strings.js",
    "core/websock.js",
    "vendor/pako/lib/utils/common.js",
    "vendor/pako/lib/zlib/adler32.js",
    "vendor/pako/lib/zlib/crc32.js",
    "vendor/pako/lib/zlib/deflate.js",
    "vendor/pako/lib/zlib/inffast.js",
    "vendor/pako/lib/zlib/inflate.js",
    "vendor/pako/lib/zlib/inftrees.js",
    "vendor/pako/lib/zlib/messages.js",
    "vendor/pako/lib/zlib/trees.js",
    "vendor/pako/lib/zlib/zstream.js",
};

/* No inline script or style: the page is served with a Content-Security-Policy
 * that allows only same-origin scripts and connections. */
const char vnc_page_html[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\">\n"
    "<head>\n"
    "<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<meta name=\"referrer\" content=\"no-referrer\">\n"
    "<title>deskbox viewer</title>\n"
    "<link rel=\"stylesheet\" href=\"viewer.css\">\n"
    "<script type=\"module\" src=\"viewer.js\"></script>\n"
    "%p"
    "</head>\n"
    "<body data-view-only=\"%s\">\n"
    "<div id=\"bar\"><span id=\"status\">loading</span>"
    "<span id=\"badge\" hidden>VIEW ONLY</span>"
    "<span id=\"taken\" hidden>TAKEN OVER: agent actions are refused</span>"
    "<button id=\"takeover\" type=\"button\" hidden>Take over</button></div>\n"
    "<div id=\"screen\"></div>\n"
    "</body>\n"
    "</html>\n";

const char vnc_page_css[] =
    "html, body { margin: 0; height: 100%; background: #222; color: #ddd;\n"
    "  font: 13px system-ui, sans-serif; overflow: hidden; }\n"
    "body { display: flex; flex-direction: column; }\n"
    "#bar { flex: none; height: 24px; display: flex; align-items: center; gap: 10px;\n"
    "  padding: 0 8px; background: #111; }\n"
    "#badge { background: #c62828; color: #fff; font-weight: bold; padding: 1px 8px;\n"
    "  border-radius: 3px; }\n"
    "#badge[hidden], #taken[hidden], #takeover[hidden] { display: none; }\n"
    "#taken { background: #ef6c00; color: #fff; font-weight: bold; padding: 1px 8px;\n"
    "  border-radius: 3px; }\n"
    "#takeover { margin-left: auto; font: inherit; }\n"
    "#screen { flex: 1; min-height: 0; }\n";

/* Reconnects with a backoff (250 ms doubling to 5 s) whenever the
 * connection drops (the sandbox's VNC server restarted, deskboxd dropped a
 * slow viewer); stops once the page's own URL answers 4xx, i.e. the token
 * expired or was revoked.  window.deskbox exposes the state to tests. */
const char vnc_page_js[] =
    "import RFB from './core/rfb.js';\n"
    "\n"
    "const token = new URLSearchParams(location.search).get('token') || '';\n"
    "const viewOnly = document.body.dataset.viewOnly === '1';\n"
    "const screen = document.getElementById('screen');\n"
    "const status = document.getElementById('status');\n"
    "document.getElementById('badge').hidden = !viewOnly;\n"
    "const state = window.deskbox = { viewOnly, connects: 0, connected: false, ended: false };\n"
    "let delay = 250;\n"
    "\n"
    "function wsUrl() {\n"
    "  const u = new URL('websockify', location.href);\n"
    "  u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';\n"
    "  u.search = '?token=' + encodeURIComponent(token);\n"
    "  u.hash = '';\n"
    "  return u.href;\n"
    "}\n"
    "\n"
    "async function stillAllowed() {\n"
    "  try {\n"
    "    const r = await fetch(location.href, { cache: 'no-store' });\n"
    "    return !(r.status >= 400 && r.status < 500);\n"
    "  } catch (e) {\n"
    "    return true;\n"
    "  }\n"
    "}\n"
    "\n"
    "function connect() {\n"
    "  state.connects++;\n"
    "  status.textContent = state.connects > 1 ? 'reconnecting' : 'connecting';\n"
    "  const rfb = new RFB(screen, wsUrl(), { wsProtocols: ['binary'], shared: true });\n"
    "  rfb.viewOnly = viewOnly;\n"
    "  rfb.scaleViewport = true;\n"
    "  rfb.resizeSession = false;\n"
    "  rfb.focusOnClick = !viewOnly;\n"
    "  state.rfb = rfb;\n"
    "  state.wsAt = state.wsAt || performance.now();\n"
    "  rfb.addEventListener('connect', () => {\n"
    "    delay = 250;\n"
    "    state.connected = true;\n"
    "    state.connectedAt = state.connectedAt || performance.now();\n"
    "    status.textContent = 'connected';\n"
    "  });\n"
    "  rfb.addEventListener('disconnect', async () => {\n"
    "    state.connected = false;\n"
    "    state.rfb = null;\n"
    "    if (!(await stillAllowed())) {\n"
    "      state.ended = true;\n"
    "      status.textContent = 'access ended (token expired or revoked)';\n"
    "      return;\n"
    "    }\n"
    "    status.textContent = 'disconnected, reconnecting';\n"
    "    setTimeout(connect, delay);\n"
    "    delay = Math.min(delay * 2, 5000);\n"
    "  });\n"
    "}\n"
    "\n"
    "\n"
    "/* Takeover (docs/observation.md): a person holds the desktop and agent\n"
    " * actions are refused; every viewer shows it, one with control may\n"
    " * take over and give back. */\n"
    "const taken = document.getElementById('taken');\n"
    "const takeover = document.getElementById('takeover');\n"
    "function takeoverUrl() {\n"
    "  const u = new URL('takeover', location.href);\n"
    "  u.search = '?token=' + encodeURIComponent(token);\n"
    "  u.hash = '';\n"
    "  return u.href;\n"
    "}\n"
    "async function takeoverState(method) {\n"
    "  try {\n"
    "    const r = await fetch(takeoverUrl(), { method: method || 'GET', cache: 'no-store' });\n"
    "    if (!r.ok) return;\n"
    "    state.takeover = await r.json();\n"
    "    taken.hidden = !state.takeover.active;\n"
    "    takeover.textContent = state.takeover.active ? 'Give back' : 'Take over';\n"
    "  } catch (e) {}\n"
    "}\n"
    "if (!viewOnly) {\n"
    "  takeover.hidden = false;\n"
    "  takeover.addEventListener('click', () =>\n"
    "    takeoverState(state.takeover && state.takeover.active ? 'DELETE' : 'POST'));\n"
    "}\n"
    "takeoverState();\n"
    "setInterval(takeoverState, 3000);\n"
    "\n"
    "connect();\n";

char *vnc_page_render(int view_only, size_t *len)
{
	static const char pre[] = "<link rel=\"modulepreload\" href=\"", post[] = "\">\n";
	size_t n = strlen(vnc_page_html) + 1;
	for (size_t i = 0; i < sizeof(preload) / sizeof(preload[0]); i++)
		n += sizeof(pre) + sizeof(post) + strlen(preload[i]);
	char *out = malloc(n), *o = out;
	if (!out)
		return NULL;
	for (const char *p = vnc_page_html; *p; p++) {
		if (p[0] == '%' && p[1] == 's') {
			*o++ = view_only ? '1' : '0';
			p++;
		} else if (p[0] == '%' && p[1] == 'p') {
			for (size_t i = 0; i < sizeof(preload) / sizeof(preload[0]); i++) {
				o = stpcpy(o, pre);
				o = stpcpy(o, preload[i]);
				o = stpcpy(o, post);
			}
			p++;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	*len = (size_t)(o - out);
	return out;
}
