#!/usr/bin/env python3
"""The in-sandbox browser from outside (docs/ports.md, "The browser
from outside"): GET …/browser/cdp answers like Chrome's /json/version with a
webSocketDebuggerUrl through deskboxd, and Playwright's connectOverCDP
(playwright-core from npm, run by node) opens a page in the sandbox's
chromium and reads its title; the same page shows in a REST screenshot."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BROWSER_DIR = os.path.join(TOP, "tests", "browser")
PAGE = (b"<!doctype html><title>deskbox cdp page</title>"
        b"<body style='margin:0;background:#d22020'><h1 id=msg>through the proxy</h1>")

t = dbx.Tap()
dbx.require_root_and_tools()
node = shutil.which("node")
if not node or not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
    dbx.skip_all("node or tests/browser/node_modules is missing (run scripts/install-deps.sh)")
if not os.path.exists("/usr/lib/chromium/chromium"):
    dbx.skip_all("chromium is not installed (run scripts/install-deps.sh)")
srv = dbx.Server()
try:
    sid = srv.create({"display": {"width": 1024, "height": 768}, "memory_mb": 2048})["id"]
    srv.exec(sid, ["mkdir", "-p", "/workspace/site"])
    r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/site/index.html" % sid,
                    PAGE)
    t.eq(r.status, 201, "a page to show is in the sandbox")
    srv.exec(sid, ["python3", "-m", "http.server", "-b", "127.0.0.1", "8000"],
             cwd="/workspace/site", background=True)
    r = srv.request("POST", "/v1/sandboxes/%s/desktop/browser" % sid, {})
    t.ok(r.status == 200 and r.json().get("started") is True, "POST …/desktop/browser starts it",
         r.body[:300])
    cdp = "/v1/sandboxes/%s/browser/cdp" % sid
    ready = dbx.wait_until(lambda: srv.request("GET", cdp).status == 200, timeout=90,
                           interval=0.5)
    r = srv.request("GET", cdp)
    t.ok(ready and r.status == 200, "GET …/browser/cdp answers once the browser is up",
         r.body[:300])
    j = r.json() if r.status == 200 else {}
    ws = j.get("webSocketDebuggerUrl", "")
    t.ok(ws.startswith("ws://127.0.0.1:%d/v1/sandboxes/%s/browser/cdp/devtools/browser/" %
                       (srv.port, sid)) and "Chrome" in j.get("Browser", ""),
         "like /json/version, its WebSocket URL pointing through deskboxd", j)
    r = srv.request("GET", cdp + "/json/list")
    t.ok(r.status == 200 and isinstance(r.json(), list) and
         all("127.0.0.1:9222" not in p.get("webSocketDebuggerUrl", "") for p in r.json()),
         "/json/list through it too, every URL rewritten", r.body[:300])
    r = srv.request("GET", cdp, token=None)
    t.eq(r.status, 401, "the CDP route needs the API token")

    env = dict(os.environ, CDP_URL="http://127.0.0.1:%d%s" % (srv.port, cdp),
               DESKBOX_TOKEN=srv.token, PAGE_URL="http://127.0.0.1:8000/")
    p = subprocess.run([node, "cdp.mjs"], cwd=BROWSER_DIR, env=env, capture_output=True,
                       text=True, timeout=180)
    out = {}
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        pass
    t.ok(out.get("title") == "deskbox cdp page" and "through the proxy" in out.get("text", ""),
         "Playwright connectOverCDP opens a page in the sandbox's chromium and reads it",
         p.stdout[-2000:] + p.stderr[-2000:])

    def red_share():
        rows = dbx.png_pixels(srv.screenshot(sid))
        h, w = len(rows), len(rows[0]) // 3
        red = sum(1 for y in range(0, h, 8) for x in range(0, w, 8)
                  if rows[y][3 * x:3 * x + 3] == b"\xd2\x20\x20")
        return red / float(len(range(0, h, 8)) * len(range(0, w, 8)))
    share = dbx.wait_until(lambda: red_share() > 0.3, timeout=30, interval=0.5)
    t.ok(share, "the page shows in a REST screenshot (its red fills the screen)",
         "red share %.2f" % red_share())
    s = srv.request("GET", "/v1/sandboxes/%s/browser/cdp/devtools/browser/x" % sid,
                    headers={"Upgrade": "websocket", "Connection": "Upgrade"}, token=None)
    t.eq(s.status, 401, "the DevTools WebSocket needs the API token")
    srv.request("DELETE", "/v1/sandboxes/" + sid)
finally:
    srv.cleanup()
t.done()
