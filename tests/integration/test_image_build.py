"""The Debian 12 desktop image built for real, as `make image` builds it
(POST /v1/images {"build":"debian"}: debootstrap from the configured
Debian mirror, the one machine outside this one the project may reach, as
its install script does), then a sandbox from it: the foundation scenario's
exact Unicode typing into an xterm, Chromium opening a page the sandbox
serves itself, CJK fonts, and none of the host's /usr.

Slow (the build is 2-3 minutes and ~1 GB), bounded by BUILD_TIMEOUT."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

BUILD_TIMEOUT = 1200
TEXT = "héllo 你好 ✓ ÄÖÜß € 😀"
SITE = "http://127.0.0.1:8000/"
SLOW = 120
# The page list DevTools gives inside the sandbox (the image has python3,
# not curl).
TABS = ("import json, urllib.request as u; print(json.dumps([p['url'] for p in "
        "json.load(u.urlopen('http://127.0.0.1:9222/json/list', timeout=5)) "
        "if p['type'] == 'page']))")


def build(t, srv):
    """Builds the image; returns its manifest, or None."""
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/images", {"name": "deb", "build": "debian"})
    t.ok(r.status == 202, "a Debian build starts (202)", r.body[:300])
    if r.status != 202:
        return None
    man = {}

    def done():
        man.update(srv.request("GET", "/v1/images/deb").json())
        return man.get("status") in ("ready", "failed")
    dbx.wait_until(done, timeout=BUILD_TIMEOUT, interval=2)
    t.diag("build: %.0f s, %s MB" % (time.monotonic() - t0,
                                     (man.get("size_bytes") or 0) >> 20))
    if not t.ok(man.get("status") == "ready", "the build is ready", {
            k: v for k, v in man.items() if k != "packages"}):
        return None
    return man


def check_manifest(t, man):
    pkgs = {p.get("name") if isinstance(p, dict) else str(p).split("=")[0]
            for p in man.get("packages", [])}
    want = {"xvfb", "openbox", "xterm", "python3", "chromium"}
    t.ok(want <= pkgs and any(p.startswith("fonts-noto-cjk") or p.startswith("fonts-wqy") or
                              p.startswith("fonts-arphic") for p in pkgs),
         "its packages: Xvfb, openbox, xterm, python3, chromium, CJK fonts",
         sorted(want - pkgs))
    t.ok(str(man.get("digest", "")).startswith("sha256:") and man.get("size_bytes", 0) > 100e6
         and man.get("created_at") and man.get("desktop") is True and
         (man.get("tools") or {}).get("chromium") is True,
         "its manifest: digest, size, build date, a desktop with chromium",
         {k: v for k, v in man.items() if k != "packages"})


def typing(t, srv, sid):
    """The foundation scenario's typing, in the image's own xterm."""
    before = srv.screenshot(sid)
    t.eq(dbx.png_info(before)[:2], (1280, 800), "a screenshot of the image's desktop")
    r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid,
                    {"argv": ["xterm", "-u8", "-geometry", "60x10+100+100",
                              "-e", "sh", "-c", "cat > /tmp/typed.txt"], "background": True})
    t.ok(r.status == 200, "the image's xterm starts", r.body[:200])
    bbox = None

    def shown():
        nonlocal bbox
        bbox = dbx.changed_bbox(before, srv.screenshot(sid))
        return bbox and bbox[2] - bbox[0] > 100 and bbox[3] - bbox[1] > 50
    t.ok(dbx.wait_until(shown, timeout=30), "its window shows", bbox)
    if not bbox:
        return
    srv.post(sid, "click", {"x": (bbox[0] + bbox[2]) // 2, "y": (bbox[1] + bbox[3]) // 2})
    r = srv.post(sid, "type_text", {"text": TEXT})
    t.ok(r.status == 200, "type_text", r.body[:200])
    srv.post(sid, "key", {"keys": "Return"})
    srv.post(sid, "key", {"keys": "ctrl+d"})
    got = [None]

    def arrived():
        res = srv.exec(sid, ["sh", "-c", "pgrep -x cat >/dev/null || cat /tmp/typed.txt"])
        got[0] = res["stdout"] if res["exit_code"] == 0 and res["stdout"] else None
        return got[0]
    dbx.wait_until(arrived, timeout=20)
    t.eq(got[0], TEXT + "\n", "the typed text arrived exactly")


def browser(t, srv, sid):
    html = "<title>Dbx Image</title><body>你好</body>"
    r = srv.exec(sid, ["sh", "-c", "mkdir -p /tmp/www && cat > /tmp/www/index.html"], stdin=html)
    srv.exec(sid, ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1",
                   "--directory", "/tmp/www"], background=True)
    t.ok(dbx.wait_until(lambda: srv.exec(sid, ["python3", "-c", "import urllib.request as u; "
                                               "u.urlopen('%s', timeout=2)" % SITE])
                        ["exit_code"] == 0, timeout=SLOW, interval=0.5),
         "the image's python3 serves a page on the sandbox's loopback")
    r = srv.post(sid, "browser", {"url": SITE, "timeout_ms": 100000})
    win = r.json().get("window") if r.status == 200 else None
    t.ok(win and win.get("class", "").lower().startswith("chromium"),
         "the browser action starts the image's chromium with a window", r.body[:300])

    def tabs():
        out = srv.exec(sid, ["python3", "-c", TABS])["stdout"]
        try:
            return json.loads(out)
        except ValueError:
            return []
    t.ok(dbx.wait_until(lambda: SITE in tabs(), timeout=SLOW, interval=0.5),
         "DevTools inside lists the page", tabs())


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        man = build(t, srv)
        if man is None:
            t.diag(srv.stderr()[-3000:])
            t.done()
        check_manifest(t, man)
        r = srv.request("POST", "/v1/sandboxes", {"image": "deb"})
        t.ok(r.status == 201, "a sandbox from the built image", r.body[:300])
        if r.status != 201:
            t.done()
        sid = r.json()["id"]
        typing(t, srv, sid)
        browser(t, srv, sid)
        r = srv.exec(sid, ["sh", "-c", "fc-list :lang=zh family | head -1"])
        t.ok(r["stdout"].strip() != "", "fontconfig inside finds a Chinese font", r)
        r = srv.exec(sid, ["sh", "-c", "test -e /usr/bin/gcc && echo host || echo own"])
        t.eq((os.path.exists("/usr/bin/gcc"), r["stdout"].strip()), (True, "own"),
             "the sandbox sees the image's /usr, not the host's (which has gcc)")
        srv.request("DELETE", "/v1/sandboxes/" + sid)
        r = srv.request("DELETE", "/v1/images/deb")
        t.ok(r.status == 204, "the image is deleted once unused", r.body[:200])
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
