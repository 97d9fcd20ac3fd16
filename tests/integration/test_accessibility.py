"""The accessibility tree (docs/observation.md) of a real GTK dialog
(zenity) in a sandbox created with DESKBOX_A11Y=1: the tree holds the
dialog's buttons with bounds in screen pixels (and in the agent's space
when one is declared), find= picks one out, a plain agent click at the
centre of its bounds presses it, the node's click action presses another;
the same for a chromium page of ~200 elements (a plain click at the centre
of its button's bounds, then the button's click action);
the action is logged and refused during a takeover, and bad requests get
4xx.  Prints how long the tree takes."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_actions import Desk, warm_up  # noqa: E402

PYATSPI = "/usr/lib/python3/dist-packages/pyatspi"


def acc(srv, sid, query=""):
    return srv.request("GET", "/v1/sandboxes/%s/desktop/accessibility%s" % (sid, query))


def dialog(d, text, out):
    """A zenity question whose answer (exit code) lands in `out`."""
    d.sh("rm -f %s" % out)
    d.bg("zenity --question --title '%s' --text '%s'; echo $? > %s" % (text, text, out))
    d.window(text)
    d.settle(300)


def find(srv, sid, window, name, timeout=10):
    """The button `name` of `window` (the tree can lag the window)."""
    deadline = time.monotonic() + timeout
    while True:
        r = acc(srv, sid, "?window=%s&find=role:button,name:%s" % (window, name))
        m = r.json().get("matches", []) if r.status == 200 else []
        if m or time.monotonic() > deadline:
            return r, m
        time.sleep(0.2)


PAGE = ("<!DOCTYPE html><title>a11y page</title><script>var n = 0</script><body>"
        "<button id=b onclick=\"document.title='pressed ' + (++n)\">Press me</button><ul>" +
        "".join("<li><a href='#%d'>item %d</a></li>" % (i, i) for i in range(99)) +
        "</ul></body>")


def chromium(t, d, srv, sid):
    """A chromium page of ~200 elements: its button is in the tree with
    bounds inside the window, and its click action presses it."""
    d.sh("mkdir -p /tmp/site && cat > /tmp/site/index.html <<'EOF'\n%s\nEOF" % PAGE)
    d.bg("cd /tmp/site && exec python3 -m http.server 8000 --bind 127.0.0.1")
    dbx.wait_until(lambda: d.sh("curl -s -o /dev/null -w '%{http_code}' "
                                "http://127.0.0.1:8000/")["stdout"] == "200", timeout=20)
    r = d.post("browser", {"url": "http://127.0.0.1:8000/", "timeout_ms": 60000})
    t.eq(r.status, 200, "chromium opens the page")
    deadline = time.monotonic() + 60
    m = []
    while not m and time.monotonic() < deadline:
        q = acc(srv, sid, "?find=role:button,name:Press%20me")
        m = q.json().get("matches", []) if q.status == 200 else []
        if not m:
            time.sleep(0.5)
    t.ok(m and m[0]["bounds"]["width"] > 10, "the page's button is in the tree", m[:1])
    times = []
    count = 0
    for _ in range(3):
        t0 = time.monotonic()
        q = acc(srv, sid, "?window=a11y%20page%20-%20Chromium")
        times.append(time.monotonic() - t0)
        count = q.json().get("count", 0) if q.status == 200 else 0
    t.diag("a chromium page's tree: %d nodes in %s ms" % (
        count, ", ".join("%.0f" % (x * 1000) for x in times)))
    t.ok(count >= 200, "the page's window holds its ~200 elements (%d nodes)" % count)
    def titled(want):
        return dbx.wait_until(lambda: any(w["title"].startswith(want) for w in
                                          d.get("windows").json()["windows"]), timeout=10)
    if m:
        b = m[0]["bounds"]
        d.ok("click", x=b["x"] + b["width"] // 2, y=b["y"] + b["height"] // 2)
        t.ok(titled("pressed 1"), "a plain click at the centre of the button's bounds "
             "presses it (the page's title changed)", b)
        r = srv.request("POST", "/v1/sandboxes/%s/desktop/accessibility/%s/action"
                        % (sid, m[0]["id"]), {"name": "click"})
        t.eq(r.status, 200, "the button's click action runs")
        t.ok(titled("pressed 2"), "and the page saw the click (its title changed again)")


def main():
    dbx.require_root_and_tools()
    if not os.path.isdir(PYATSPI) or not os.path.exists("/usr/bin/zenity"):
        dbx.skip_all("python3-pyatspi or zenity missing (run scripts/install-deps.sh)")
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({"display": {"width": 1024, "height": 768},
                          "env": {"DESKBOX_A11Y": "1"}})["id"]
        d = Desk(srv, sid)
        warm_up(d)
        dialog(d, "Proceed", "/tmp/z1")
        t0 = time.monotonic()
        r = acc(srv, sid)
        took = time.monotonic() - t0
        t.eq(r.status, 200, "GET accessibility answers")
        tree = r.json()
        apps = [n["name"] for n in tree.get("nodes", [])]
        t.ok("zenity" in apps, "the tree lists zenity", apps)
        t.diag("the whole tree: %d nodes in %.0f ms" % (tree.get("count", 0), took * 1000))

        r, m = find(srv, sid, "Proceed", "Yes")
        t.ok(len(m) == 1 and m[0]["role"] == "push button" and "click" in m[0]["actions"] and
             m[0]["bounds"]["width"] > 10, "find=role:button,name:Yes finds the button",
             r.body[:400])
        win = d.window("Proceed")
        b = m[0]["bounds"] if m else {"x": 0, "y": 0, "width": 0, "height": 0}
        t.ok(win[0] <= b["x"] and b["x"] + b["width"] <= win[0] + win[2] and
             win[1] <= b["y"] and b["y"] + b["height"] <= win[1] + win[3],
             "its bounds lie in the dialog's window", (b, win))
        d.ok("click", x=b["x"] + b["width"] // 2, y=b["y"] + b["height"] // 2)
        got = d.read_when("/tmp/z1", lambda s: s.strip() != "")
        t.eq((got or "").strip(), "0", "a click at the centre of its bounds presses Yes")

        dialog(d, "Second", "/tmp/z2")
        r, m = find(srv, sid, "Second", "No")
        node = m[0]["id"] if m else "9"
        base = "/v1/sandboxes/%s/desktop/accessibility/" % sid
        srv.request("POST", "/v1/sandboxes/%s/desktop/takeover" % sid, {"ttl_s": 30})
        r = srv.request("POST", base + node + "/action", {"name": "click"})
        t.eq(r.status, 423, "during a takeover the node's action is refused")
        srv.request("DELETE", "/v1/sandboxes/%s/desktop/takeover" % sid)
        r = srv.request("POST", base + node + "/action", {"name": "click"})
        t.ok(r.status == 200 and r.json().get("ok"), "the node's click action runs",
             r.body[:300])
        got = d.read_when("/tmp/z2", lambda s: s.strip() != "")
        t.eq((got or "").strip(), "1", "and pressed No")

        dialog(d, "Scaled", "/tmp/z3")
        r, m = find(srv, sid, "Scaled", "Yes")
        r2 = acc(srv, sid, "?window=Scaled&find=name:Yes&agent_width=512&agent_height=384")
        m2 = r2.json().get("matches", []) if r2.status == 200 else []
        t.ok(m and m2 and m2[0]["agent_bounds"]["x"] == m[0]["bounds"]["x"] // 2,
             "agent_bounds are in the agent's space", (m[:1], m2[:1]))
        r = acc(srv, sid, "?window=Scaled&max_depth=1")
        top = r.json().get("nodes", []) if r.status == 200 else []
        t.ok(len(top) == 1 and top[0]["role"] == "dialog" and
             all(not c["children"] for c in top[0]["children"]),
             "window= and max_depth= bound the tree", r.body[:300])
        # The resident reader killed (as a crash would): the next request
        # starts a fresh one and still answers.
        k = d.sh("n=0; for c in /proc/[0-9]*/cmdline; do if tr '\\0' ' ' < $c 2>/dev/null | "
                 "grep -q 'the resident reade[r] of the accessibility tree'; then "
                 "p=${c#/proc/}; kill -9 ${p%/cmdline} && n=$((n+1)); fi; done; echo $n")
        r = acc(srv, sid, "?window=Scaled&max_depth=1")
        t.ok(k["stdout"].strip() == "1" and r.status == 200 and r.json().get("count", 0) >= 1,
             "a killed reader is started afresh at the next request", (k, r.body[:200]))

        srv.request("POST", base + (m[0]["id"] if m else "9") + "/action", {"name": "click"})

        if os.path.exists("/usr/bin/chromium"):
            chromium(t, d, srv, sid)
        else:
            t.skip("a chromium page's tree", "chromium is not installed")

        t.eq(acc(srv, sid, "?max_depth=x").status, 400, "max_depth=x: 400")
        plain = srv.create({"display": {"width": 640, "height": 480}})["id"]
        r = acc(srv, plain)
        t.ok(r.status == 503 and "DESKBOX_A11Y=1" in r.body.decode(),
             "without DESKBOX_A11Y=1: 503 saying how to turn it on", r.body[:200])
        srv.request("DELETE", "/v1/sandboxes/" + plain)
        t.eq(acc(srv, sid, "?find=colour:red").status, 400, "an unknown find term: 400")
        t.eq(srv.request("POST", base + "0.99.99/action", {"name": "click"}).status, 404,
             "an unknown node: 404")
        t.eq(srv.request("POST", base + "..%2fx/action", {"name": "click"}).status, 404,
             "a node that is not a path of indices: 404")
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly on SIGTERM")
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
