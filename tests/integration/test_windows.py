"""Windows through libxdo (class, instance, pid, desktop; search by
regular expression; move, resize, minimize, maximize; waiting for a
window) and applications (the desktop entries list, launch by entry, open
a file or URL with its default application).  Effects are checked inside
the sandbox with xwininfo, xprop and pgrep; the defaults are made
deterministic with the sandbox user's own mimeapps.list and desktop
entries.  With chromium installed, a file:// page opens in it and the
OpenAI adapter's back/forward buttons move through its history."""

import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_actions import Desk, warm_up  # noqa: E402

CHROMIUM = "/usr/lib/chromium/chromium"
APPS = "/home/user/.local/share/applications"


def req(d, method, what, body=None):
    return d.srv.request(method, "/v1/sandboxes/%s/desktop/%s" % (d.sid, what), body)


def xwininfo(d, wid):
    out = d.sh("xwininfo -id %d 2>&1" % wid)["stdout"]
    m = {k: int(v) for k, v in re.findall(
        r"(Absolute upper-left [XY]|Width|Height):\s+(-?\d+)", out)}
    state = re.search(r"Map State:\s+(\w+)", out)
    return (m.get("Absolute upper-left X"), m.get("Absolute upper-left Y"), m.get("Width"),
            m.get("Height"), state.group(1) if state else None)


def xprop(d, wid, prop):
    return d.sh("xprop -id %d %s" % (wid, prop))["stdout"].strip()


def write(d, path, text):
    r = d.srv.exec(d.sid, ["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh", path],
                   stdin=text)
    if r.get("exit_code") != 0:
        raise RuntimeError("writing %s: %s" % (path, r))


def launch(d, argv, timeout_ms=15000):
    r = d.post("launch", {"argv": argv, "timeout_ms": timeout_ms})
    j = r.json() if r.status == 200 else {}
    if not j.get("window"):
        raise RuntimeError("launch %s: %d %s" % (argv, r.status, r.body[:300]))
    return j


def titles(d, regex):
    r = req(d, "GET", "windows?title=" + regex)
    return [w["title"] for w in r.json().get("windows", [])] if r.status == 200 else []


def poll(fn, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_list_search(t, d, wins):
    logo = launch(d, ["xlogo", "-geometry", "200x150+300+200"])["window"]
    term = launch(d, ["xterm", "-T", "dbx-term-1", "-geometry", "40x8+40+420"])
    tw = term["window"]
    wins.update(logo=logo, term=tw)
    t.ok(logo["class"] == "XLogo" and logo["instance"] == "xlogo",
         "xlogo's class and instance come from WM_CLASS", logo)
    t.ok(tw["class"] == "XTerm" and tw["instance"] == "xterm", "xterm's WM_CLASS", tw)
    t.eq(tw["pid"], term["pid"], "xterm's _NET_WM_PID is the pid launch answered")
    t.ok(("= %d" % tw["pid"]) in xprop(d, tw["id"], "_NET_WM_PID"),
         "the pid is the one xprop reads in the sandbox", xprop(d, tw["id"], "_NET_WM_PID"))
    alive = d.sh("kill -0 %d && echo alive" % tw["pid"])["stdout"]
    t.ok("alive" in alive, "that pid is a live process inside the sandbox")
    t.ok(logo["pid"] is None or isinstance(logo["pid"], int), "xlogo sets no _NET_WM_PID: null")
    t.ok(tw["desktop"] == 0 and "= 0" in xprop(d, tw["id"], "_NET_WM_DESKTOP"),
         "desktop is _NET_WM_DESKTOP", tw)
    for k in ("id", "title", "x", "y", "width", "height", "focused", "visible"):
        t.ok(k in logo, "the window keeps field %s" % k)

    def ids(query):
        r = req(d, "GET", "windows?" + query)
        return [w["id"] for w in r.json()["windows"]] if r.status == 200 else r.status
    t.eq(ids("class=%5Exlogo%24"), [logo["id"]], "search by class (regex, case ignored)")
    t.eq(ids("title=dbx-term-%5B0-9%5D"), [tw["id"]], "search by title regex")
    t.eq(ids("pid=%d" % tw["pid"]), [tw["id"]], "search by pid")
    t.eq(ids("class=XTerm&title=nomatch"), [], "criteria combine with and")
    t.eq(ids("title=("), 400, "a bad regular expression is 400")
    t.eq(ids("pid=abc"), 400, "a bad pid is 400")


def test_ops(t, d, wins):
    logo, tw = wins["logo"], wins["term"]
    op = "windows/%d/" % logo["id"]
    r = req(d, "POST", op + "move", {"x": 120, "y": 90})
    j = r.json() if r.status == 200 else {}
    t.ok(j.get("x") == 120 and j.get("y") == 90, "move answers the new position", r.body[:300])
    t.eq(xwininfo(d, logo["id"])[:2], (120, 90), "xwininfo sees the client area at 120,90")
    r = req(d, "POST", op + "resize", {"width": 260, "height": 210})
    j = r.json() if r.status == 200 else {}
    t.ok(j.get("width") == 260 and j.get("height") == 210, "resize answers the new size",
         r.body[:300])
    t.eq(xwininfo(d, logo["id"])[2:4], (260, 210), "xwininfo sees 260x210")
    r = req(d, "POST", op + "maximize", {})
    j = r.json() if r.status == 200 else {}
    st = xprop(d, logo["id"], "_NET_WM_STATE")
    t.ok(j.get("maximized") is True and "MAXIMIZED_VERT" in st and "MAXIMIZED_HORZ" in st,
         "maximize: _NET_WM_STATE has both maximized states", (r.body[:300], st))
    info = req(d, "GET", "info").json()
    t.ok(xwininfo(d, logo["id"])[2] == info["width"], "the maximized window is screen wide",
         xwininfo(d, logo["id"]))
    top = "windows/%d/" % tw["id"]
    r = req(d, "POST", top + "minimize", {})
    j = r.json() if r.status == 200 else {}
    st = xprop(d, tw["id"], "_NET_WM_STATE")
    t.ok(j.get("minimized") is True and j.get("visible") is False and "HIDDEN" in st,
         "minimize: _NET_WM_STATE_HIDDEN, not viewable", (r.body[:300], st))
    t.ok(xwininfo(d, tw["id"])[4] != "IsViewable", "xwininfo: the xterm is not viewable")
    r = req(d, "POST", top + "activate", {})
    j = r.json() if r.status == 200 else {}
    t.ok(j.get("focused") and j.get("visible") and xwininfo(d, tw["id"])[4] == "IsViewable",
         "activate brings the minimized window back", r.body[:300])
    t.eq(req(d, "POST", op + "move", {"x": -5, "y": 1}).status, 400, "move off the screen: 400")
    t.eq(req(d, "POST", op + "resize", {"width": 10}).status, 400, "resize needs both: 400")
    t.eq(req(d, "POST", "windows/99999/move", {"x": 1, "y": 1}).status, 404,
         "move of no window: 404")


def test_scaled(t, d, wins):
    """Agent space at half the screen: positions and sizes map both ways."""
    info = req(d, "GET", "info").json()
    ad = {"width": info["width"] // 2, "height": info["height"] // 2}
    op = "windows/%d/" % wins["term"]["id"]
    r = req(d, "POST", op + "move", {"x": 50, "y": 40, "agent_display": ad})
    j = r.json() if r.status == 200 else {}
    t.ok(j.get("x") == 50 and j.get("y") == 40, "move in agent space answers agent space",
         r.body[:300])
    t.eq(xwininfo(d, wins["term"]["id"])[:2], (100, 80), "the real position is doubled")


def test_wait(t, d):
    d.bg("sleep 1; exec xlogo -title dbx-late -geometry 120x100+500+100")
    r = req(d, "POST", "windows/wait", {"title": "^dbx-late$", "timeout_ms": 20000})
    j = r.json() if r.status == 200 else {}
    w = j.get("window") or {}
    t.ok(w.get("title") == "dbx-late" and j.get("timed_out") is False,
         "windows/wait answers the window once it shows", r.body[:300])
    t.ok(w and xwininfo(d, w["id"])[4] == "IsViewable", "xwininfo: it is viewable")
    r = req(d, "POST", "windows/wait", {"class": "^no-such-class$", "timeout_ms": 500})
    t.ok(r.status == 200 and r.json() == {"timed_out": True, "window": None},
         "windows/wait without a match times out", r.body[:300])
    t.eq(req(d, "POST", "windows/wait", {"timeout_ms": 100}).status, 400,
         "windows/wait needs a criterion")


def test_apps(t, d):
    write(d, APPS + "/dbx-logo.desktop",
          '[Desktop Entry]\nType=Application\nName=Dbx Logo\nName[de]=Dbx Logo DE\n'
          'Exec=xlogo -title "dbx logo app" %U\nCategories=Graphics;Viewer;\n')
    write(d, APPS + "/dbx-hidden.desktop",
          "[Desktop Entry]\nType=Application\nName=Hidden\nExec=xlogo\nNoDisplay=true\n")
    r = req(d, "GET", "apps")
    apps = r.json().get("apps", []) if r.status == 200 else []
    by = {a["id"]: a for a in apps}
    t.eq(by.get("dbx-logo"), {"id": "dbx-logo", "name": "Dbx Logo",
                              "exec": 'xlogo -title "dbx logo app" %U',
                              "categories": ["Graphics", "Viewer"]}, "apps lists a user entry")
    t.ok("dbx-hidden" not in by, "NoDisplay=true entries are left out")
    xterm = [a for a in apps if a["exec"].split()[0] == "xterm"]
    t.ok(xterm and xterm[0]["name"] == "XTerm", "apps lists /usr/share/applications' XTerm",
         [a["id"] for a in apps])
    r = d.post("launch", {"app": "dbx-logo", "timeout_ms": 15000})
    j = r.json() if r.status == 200 else {}
    t.ok((j.get("window") or {}).get("title") == "dbx logo app" and j.get("app") == "dbx-logo",
         "launch by entry id: Exec quoting kept, %U removed", r.body[:300])
    t.eq(j.get("argv"), ["xlogo", "-title", "dbx logo app"], "the argv that was started")
    r = d.post("launch", {"app": "xterm", "timeout_ms": 15000})
    j = r.json() if r.status == 200 else {}
    t.ok((j.get("window") or {}).get("class") == "XTerm", "launch {app: xterm}", r.body[:300])
    t.eq(d.post("launch", {"app": "no-such-app"}).status, 404, "an unknown app is 404")
    t.eq(d.post("launch", {"app": "x", "argv": ["x"]}).status, 400, "app and argv: 400")


def test_open(t, d):
    write(d, APPS + "/dbx-viewer.desktop",
          "[Desktop Entry]\nType=Application\nName=Dbx Viewer\nNoDisplay=true\n"
          "Exec=xterm -T dbx-viewer -e less %f\nMimeType=text/plain;\n")
    write(d, APPS + "/dbx-scheme.desktop",
          "[Desktop Entry]\nType=Application\nName=Dbx Scheme\n"
          "Exec=xterm -T dbx-scheme -e sh -c \"sleep 600\" dbx-handler %u\n")
    write(d, "/home/user/.config/mimeapps.list",
          "[Default Applications]\ntext/plain=dbx-viewer.desktop\n"
          "x-scheme-handler/dbxtest=dbx-scheme.desktop\n"
          "text/html=dbx-browser.desktop\n")
    write(d, "/home/user/note.txt", "a note for less\n")
    r = d.post("open", {"target": "/home/user/note.txt", "timeout_ms": 15000})
    j = r.json() if r.status == 200 else {}
    t.ok((j.get("window") or {}).get("title") == "dbx-viewer" and j.get("mime") == "text/plain"
         and j.get("app") == "dbx-viewer", "open a .txt: the mimeapps.list default", r.body[:300])
    got = poll(lambda: "less /home/user/note.txt" in d.sh("pgrep -af less")["stdout"])
    t.ok(got, "less shows the file inside the sandbox")
    r = d.post("open", {"target": "dbxtest:hello/world", "timeout_ms": 15000})
    j = r.json() if r.status == 200 else {}
    t.ok((j.get("window") or {}).get("title") == "dbx-scheme" and
         j.get("mime") == "x-scheme-handler/dbxtest", "open a URL: the scheme's handler",
         r.body[:300])
    t.ok("dbx-handler dbxtest:hello/world" in d.sh("pgrep -af 'dbx-handle[r]'")["stdout"],
         "the handler got the URL as %u")
    t.eq(d.post("open", {"target": "/home/user/missing.txt"}).status, 404, "a missing file: 404")
    t.eq(d.post("open", {"target": "note.txt"}).status, 400, "a relative path: 400")
    t.eq(d.post("open", {"target": "nohandler:x"}).status, 404, "no handler: 404")


def test_browser(t, d):
    if not os.path.exists(CHROMIUM):
        t.skip("open a file:// page in chromium", "%s is not installed" % CHROMIUM)
        return
    write(d, APPS + "/dbx-browser.desktop",
          "[Desktop Entry]\nType=Application\nName=Dbx Browser\nNoDisplay=true\n"
          "Exec=%s --no-sandbox --user-data-dir=/tmp/dbx-chromium --no-first-run "
          "--disable-gpu --disable-background-networking %%U\nMimeType=text/html;\n" % CHROMIUM)
    link = ("<style>a{display:block;position:fixed;inset:0;background:%s}</style>"
            "<a href='%s'>go</a>")
    write(d, "/home/user/page1.html",
          "<title>Dbx Page One</title>" + link % ("#fdd", "page2.html"))
    write(d, "/home/user/page2.html",
          "<title>Dbx Page Two</title>" + link % ("#ddf", "page1.html"))
    r = d.post("open", {"target": "file:///home/user/page1.html", "timeout_ms": 60000})
    j = r.json() if r.status == 200 else {}
    t.ok(j.get("window") and j.get("mime") == "text/html" and j.get("app") == "dbx-browser",
         "open a file:// URL: a chromium window", r.body[:300])
    r = req(d, "POST", "windows/wait", {"title": "Dbx Page One", "timeout_ms": 60000})
    w = (r.json().get("window") if r.status == 200 else None) or {}
    t.ok(w, "chromium shows page one", r.body[:300])
    if not w:
        return
    req(d, "POST", "windows/%d/activate" % w["id"], {})
    cx, cy = w["x"] + w["width"] // 2, w["y"] + w["height"] * 2 // 3
    d.ok("click", x=cx, y=cy)
    t.ok(poll(lambda: titles(d, "Dbx%20Page%20Two"), 30), "a click on the link: page two")
    for button, want in (("back", "One"), ("forward", "Two")):
        r = req(d, "POST", "openai", {"type": "click", "button": button, "x": cx, "y": cy})
        t.eq(r.status, 200, "openai click %s" % button)
        t.ok(poll(lambda: titles(d, "Dbx%20Page%20" + want), 30),
             "openai click %s: the title is page %s" % (button, want.lower()),
             json.dumps(titles(d, "Dbx")))


def main():
    dbx.require_root_and_tools()
    for tool in ("xwininfo", "xprop", "xterm", "xlogo", "less"):
        if not dbx.shutil.which(tool):
            dbx.skip_all("%s is not installed" % tool)
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({})["id"]
        d = Desk(srv, sid)
        warm_up(d)
        only = os.environ.get("ONLY")
        wins = {}
        for name, fn in [("list", lambda: test_list_search(t, d, wins)),
                         ("ops", lambda: test_ops(t, d, wins)),
                         ("scaled", lambda: test_scaled(t, d, wins)),
                         ("wait", lambda: test_wait(t, d)),
                         ("apps", lambda: test_apps(t, d)),
                         ("open", lambda: test_open(t, d)),
                         ("browser", lambda: test_browser(t, d))]:
            if only and name not in only.split(","):
                continue
            try:
                fn()
            except Exception as ex:
                t.ok(False, "%s raised %s: %s" % (name, type(ex).__name__, ex))
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
