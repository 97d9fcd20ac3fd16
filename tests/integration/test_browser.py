"""The browser out of the box (docs/browser.md), in one sandbox of the
default image with two chromium starts: `chromium URL` run as the user
shows a page that `python3 -m http.server` serves on the sandbox's own
loopback in a REST screenshot (the page's colour); `x-www-browser` and
`xdg-open` hand URLs to it (tabs in DevTools' /json/list on 127.0.0.1:9222
inside); POST desktop/browser opens a tab in it, starts it again once its
window was closed, and a second call opens a tab (so do the Python SDK and
the MCP tool); bad URLs are 400; the empty desktop is #2f3e4e, not black.
No packet leaves the sandbox's loopback."""

import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
BACKGROUND = (0x2F, 0x3E, 0x4E)
PAGE = (0xE0, 0x10, 0x30)
SITE = "http://127.0.0.1:8000/"
# Chromium is slow to start on a loaded 2-core machine: generous waits.
SLOW = 60


def sh(srv, sid, cmd, timeout_s=60):
    return srv.exec(sid, ["sh", "-c", cmd], timeout_s=timeout_s)


def pixel(png, x, y):
    rows = dbx.png_pixels(png)
    return tuple(rows[y][3 * x:3 * x + 3])


def near(got, want, tol=12):
    return all(abs(a - b) <= tol for a, b in zip(got, want))


def tabs(srv, sid):
    """The page URLs DevTools lists inside the sandbox, or None."""
    r = sh(srv, sid, "curl -s --max-time 5 http://127.0.0.1:9222/json/list")
    try:
        return [p.get("url") for p in json.loads(r["stdout"]) if p.get("type") == "page"]
    except ValueError:
        return None


def browser_windows(srv, sid):
    r = srv.request("GET", "/v1/sandboxes/%s/desktop/windows?class=%s" %
                    (sid, urllib.parse.quote("^chromium")))
    return r.json()["windows"] if r.status == 200 else []


def test_background(t, srv, sid):
    png = srv.screenshot(sid)
    w, h = dbx.png_info(png)[:2]
    got = [pixel(png, x, y) for x, y in ((2, 2), (w // 2, h // 2), (w - 3, h - 3))]
    t.ok(all(p == BACKGROUND for p in got), "the empty desktop is #2f3e4e, not black", got)


def serve(t, srv, sid):
    html = ("<title>Dbx Red</title><body style='margin:0;background:rgb(%d,%d,%d)'>"
            "<div style='height:100vh'></div></body>" % PAGE)
    r = srv.exec(sid, ["sh", "-c", 'mkdir -p /tmp/www && cat > /tmp/www/index.html'], stdin=html)
    t.eq(r["exit_code"], 0, "a page with a big coloured block")
    srv.exec(sid, ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1",
                   "--directory", "/tmp/www"], background=True)
    ok = dbx.wait_until(lambda: sh(srv, sid, "curl -s -o /dev/null -w %{http_code} " + SITE)
                        ["stdout"] == "200", timeout=SLOW, interval=0.5)
    t.ok(ok, "python3 -m http.server answers on the sandbox's 127.0.0.1:8000")


def test_typed(t, srv, sid):
    """`chromium URL` as the user would type it: returns the run's pid."""
    r = srv.exec(sid, ["sh", "-c", "exec chromium " + SITE + " > /tmp/chromium.log 2>&1"],
                 background=True)
    pid = r.get("pid")
    r = srv.post(sid, "windows/wait", {"title": "Dbx Red", "timeout_ms": 100000})
    win = r.json().get("window") if r.status == 200 else None
    if not t.ok(win, "typed `chromium URL`: a window with the page's title", r.body[:300]):
        t.diag(sh(srv, sid, "cat /tmp/chromium.log")["stdout"][-2000:])
        return pid
    t.ok(win["class"].lower().startswith("chromium"), "its class is chromium's", win)
    x, y = win["x"] + win["width"] // 2, win["y"] + win["height"] * 3 // 4
    got = dbx.wait_until(lambda: near(pixel(srv.screenshot(sid), x, y), PAGE) or None,
                         timeout=SLOW, interval=0.5)
    t.ok(got, "the REST screenshot shows the page's colour in the window",
         pixel(srv.screenshot(sid), x, y))
    ps = sh(srv, sid, "ps -o user=,args= -C chromium")["stdout"]
    main = [l for l in ps.splitlines() if "--type=" not in l]
    t.ok(main and all(l.split()[0] == "user" for l in main) and
         "--no-sandbox" in main[0] and "--remote-debugging-port=9222" in main[0] and
         "--user-data-dir=/home/user/.config/chromium" in main[0] and
         "--no-first-run" in main[0] and "--disable-background-networking" in main[0],
         "it runs as the user with the sandbox's flags", ps[:1500])
    r = sh(srv, sid, "stat -c %U /home/user/.config/chromium")
    t.eq(r["stdout"].strip(), "user", "its profile is in /home/user/.config/chromium")
    r = sh(srv, sid, "curl -s --max-time 5 http://127.0.0.1:9222/json/version")
    t.ok('"webSocketDebuggerUrl": "ws://127.0.0.1:9222/' in r["stdout"],
         "DevTools answers on the sandbox's 127.0.0.1:9222", r["stdout"][:300])
    return pid


def test_handoff(t, srv, sid):
    for cmd, q in (("x-www-browser", "two"), ("xdg-open", "three")):
        url = SITE + "?" + q
        r = sh(srv, sid, "%s %s" % (cmd, url))
        t.eq(r["exit_code"], 0, "%s URL exits once it handed the URL over" % cmd)
        got = dbx.wait_until(lambda: url in (tabs(srv, sid) or []), timeout=SLOW, interval=0.5)
        t.ok(got, "%s URL: a tab with it" % cmd, tabs(srv, sid))


def check_answer(t, srv, sid, r, url, started, what):
    j = r.json() if r.status == 200 else {}
    win = j.get("window") or {}
    listed = {w["id"]: w for w in browser_windows(srv, sid)}
    t.ok(r.status == 200 and j.get("started") is started and j.get("url") == url and
         win.get("id") in listed and set(win) == set(listed.get(win.get("id"), {})),
         "%s: started %s, the browser's window in the windows API's shape" % (what, started),
         r.body[:500])
    got = dbx.wait_until(lambda: url in (tabs(srv, sid) or []), timeout=SLOW, interval=0.5)
    t.ok(got, "%s: /json/list on 127.0.0.1:9222 has a tab with the URL" % what, tabs(srv, sid))
    return j


def test_action(t, srv, sid, typed_pid):
    url = SITE + "?four"
    r = srv.post(sid, "browser", {"url": url})
    check_answer(t, srv, sid, r, url, False, "browser with one running")

    for w in browser_windows(srv, sid):
        srv.request("POST", "/v1/sandboxes/%s/desktop/windows/%d/close" % (sid, w["id"]), {})

    def gone():
        st = srv.request("GET", "/v1/sandboxes/%s/process/%s" % (sid, typed_pid))
        return not browser_windows(srv, sid) and st.status == 200 and \
            not st.json().get("running")
    t.ok(dbx.wait_until(gone, timeout=SLOW, interval=0.5),
         "closing its windows ends the typed chromium")

    url = SITE + "?five"
    t0 = time.monotonic()
    r = srv.post(sid, "browser", {"url": url, "timeout_ms": 100000})
    t.diag("browser start until its window: %.0f ms" % (1000 * (time.monotonic() - t0)))
    j = check_answer(t, srv, sid, r, url, True, "browser with none running")
    t.ok(isinstance(j.get("pid"), int), "a start answers the run's pid", j)
    url = SITE + "?six"
    t0 = time.monotonic()
    r = srv.post(sid, "browser", {"url": url})
    t.diag("browser tab in the running one: %.0f ms" % (1000 * (time.monotonic() - t0)))
    check_answer(t, srv, sid, r, url, False, "a second browser call")
    t.ok(SITE + "?five" in (tabs(srv, sid) or []), "the first tab is still there",
         tabs(srv, sid))
    r = srv.post(sid, "browser", {})
    check_answer(t, srv, sid, r, "about:blank", False, "browser without a url")
    # The Python SDK's call for it (clients/python, standard library only).
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
    import deskbox
    url = SITE + "?seven"
    box = deskbox.Deskbox("http://127.0.0.1:%d" % srv.port, srv.token)
    j = box.get(sid).desktop.browser(url)
    t.ok(j.get("started") is False and j.get("url") == url and j.get("window", {}).get("id"),
         "the SDK's desktop.browser(url) opens a tab", j)
    t.ok(dbx.wait_until(lambda: url in (tabs(srv, sid) or []), timeout=SLOW, interval=0.5),
         "the SDK's tab is in /json/list", tabs(srv, sid))


def test_mcp(t, srv, sid):
    """The MCP tool `browser` (docs/mcp.md), over the raw transport."""
    path = "/v1/sandboxes/%s/mcp" % sid
    accept = {"Accept": "application/json, text/event-stream"}
    r = srv.request("POST", path, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test_browser", "version": "1"}}}, headers=accept)
    h = dict(accept, **{"Mcp-Session-Id": r.header("Mcp-Session-Id") or ""})

    def call(args):
        r = srv.request("POST", path, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                       "params": {"name": "browser", "arguments": args}},
                        headers=h)
        res = r.json().get("result", {}) if r.status == 200 else {}
        return res, (res.get("content") or [{}])[0].get("text", "")
    url = SITE + "?eight"
    res, text = call({"url": url})
    j = json.loads(text) if not res.get("isError") and text.startswith("{") else {}
    t.ok(j.get("started") is False and j.get("url") == url, "MCP tool browser opens a tab", text)
    t.ok(dbx.wait_until(lambda: url in (tabs(srv, sid) or []), timeout=SLOW, interval=0.5),
         "the MCP tool's tab is in /json/list", tabs(srv, sid))
    res, text = call({"url": "javascript:alert(1)"})
    t.ok(res.get("isError") is True and "url" in text, "MCP browser: a bad url is a tool error",
         text)


def test_bad_urls(t, srv, sid):
    for body in ({"url": "ftp://127.0.0.1/"}, {"url": "javascript:alert(1)"},
                 {"url": "chrome://settings"}, {"url": "--user-data-dir=/tmp"},
                 {"url": "http://a b"}, {"url": "http://x/\n"}, {"url": "http://"},
                 {"url": ""}, {"url": 5}, {"url": "http://" + "a" * 9000},
                 {"url": SITE, "timeout_ms": -1}):
        r = srv.post(sid, "browser", body)
        err = r.json().get("error", {}) if r.status == 400 else {}
        t.ok(r.status == 400 and err.get("code") == "invalid_argument" and
             ("url" in err.get("message", "") or "timeout_ms" in err.get("message", "")),
             "bad %s: 400 naming the field" % json.dumps(body)[:60], r.body[:300])


def main():
    dbx.require_root_and_tools()
    if not os.path.exists(CHROMIUM):
        dbx.skip_all("%s is not installed (scripts/install-deps.sh installs it)" % CHROMIUM)
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({"memory_mb": 3072})["id"]
        test_background(t, srv, sid)
        test_bad_urls(t, srv, sid)
        serve(t, srv, sid)
        pid = test_typed(t, srv, sid)
        test_handoff(t, srv, sid)
        test_action(t, srv, sid, pid)
        test_mcp(t, srv, sid)
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly on SIGTERM")
        if rc != 0:
            t.diag(srv.stderr()[-3000:])
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
