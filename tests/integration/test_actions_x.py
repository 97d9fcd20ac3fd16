"""Windows, clipboard and launch (deskbox-xtool inside the sandbox), and
examples/agent_loop.py driving a task through both tool-format adapters
(the adapters' own per-action checks are in test_adapters.py)."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_actions import Desk, cell, CELL_W, warm_up  # noqa: E402,F401

CLIP = "clipboard ✓ héllo 你好 😀 ÄÖÜß\ttab\nsecond line"


def test_windows(t, d):
    r = d.post("launch", {"argv": ["xlogo", "-geometry", "220x180+333+222"], "timeout_ms": 10000})
    t.eq(r.status, 200, "launch")
    j = r.json() if r.status == 200 else {}
    win = j.get("window") or {}
    t.ok(not j.get("timed_out") and win.get("id"), "launch returns once the new window shows",
         j)
    geo = d.window("xlogo")
    t.eq((win.get("x"), win.get("y"), win.get("width"), win.get("height")), geo,
         "its geometry is the X server's (xwininfo)")
    r = d.post("launch", {"argv": ["true"], "timeout_ms": 700})
    t.ok(r.status == 200 and r.json()["timed_out"] and r.json()["window"] is None,
         "launch without a window times out cleanly", r.body[:200])
    r = d.post("launch", {"argv": ["xterm", "-T", "second", "-geometry", "30x5+50+500"]})
    xt = (r.json().get("window") or {}) if r.status == 200 else {}
    t.eq(xt.get("title"), "second", "the new window's title")

    r = d.get("windows")
    t.eq(r.status, 200, "GET windows")
    ws = r.json().get("windows", []) if r.status == 200 else []
    byid = {w["id"]: w for w in ws}
    t.ok(win.get("id") in byid and xt.get("id") in byid, "both windows are listed", ws)
    t.eq(sum(1 for w in ws if w["focused"]), 1, "exactly one window is focused")
    t.ok(byid.get(xt.get("id"), {}).get("focused"), "the newest window has the focus")

    r = d.srv.request("POST", "/v1/sandboxes/%s/desktop/windows/%d/activate"
                      % (d.sid, win["id"]), {})
    t.ok(r.status == 200 and r.json().get("focused"), "activate", r.body[:200])
    ws = d.get("windows").json()["windows"]
    t.ok([w["id"] for w in ws if w["focused"]] == [win["id"]], "activate moved the focus")
    active = d.sh("xdotool getactivewindow")["stdout"].strip()
    t.eq(active, str(win["id"]), "the X server agrees (xdotool getactivewindow)")

    r = d.srv.request("POST", "/v1/sandboxes/%s/desktop/windows/%d/close" % (d.sid, xt["id"]),
                      {})
    t.eq(r.status, 200, "close")
    gone = False
    deadline = time.time() + 5
    while time.time() < deadline and not gone:
        gone = xt["id"] not in [w["id"] for w in d.get("windows").json()["windows"]]
        time.sleep(0.1)
    t.ok(gone, "the closed window is gone")
    for path, want in (("windows/123456/activate", 404), ("windows/abc;rm/close", 400),
                       ("windows/1/explode", 404)):
        r = d.srv.request("POST", "/v1/sandboxes/%s/desktop/%s" % (d.sid, path), {})
        t.eq(r.status, want, "%s is %d" % (path, want))
    t.eq(d.post("launch", {"argv": []}).status, 400, "launch needs argv")


def test_clipboard(t, d):
    r = d.post("clipboard", {"text": CLIP})
    t.eq(r.status, 200, "POST clipboard")
    r = d.get("clipboard")
    t.eq(r.json().get("text") if r.status == 200 else r.body, CLIP,
         "GET clipboard round-trips non-ASCII text")
    # an application sees it: paste PRIMARY (set too) into xterm's cat
    d.bg("exec xterm -u8 -fn 6x13 -T clipterm -geometry 60x6+600+100 -e sh -c "
         "'exec cat > /tmp/clip.txt'")
    win = d.window("clipterm")
    d.settle(300)
    d.ok("click", x=win[0] + 40, y=win[1] + 30, button="middle")
    d.settle(300)  # xterm fetches the selection asynchronously
    d.ok("type_text", text="\n")
    d.ok("key", keys="ctrl+d")
    got = d.read_when("/tmp/clip.txt", lambda s: s.endswith("\n") and "second" in s)
    t.eq(got, CLIP.replace("\t", "\t") + "\n", "an application pastes the text exactly")
    # and what an application copies comes back: select in xterm (PRIMARY),
    # then set the clipboard again and read it
    r = d.post("clipboard", {"text": "second ✓"})
    t.eq(d.get("clipboard").json().get("text"), "second ✓", "a new text replaces the old")
    t.eq(d.post("clipboard", {}).status, 400, "clipboard needs text")


def test_example(t, d):
    """examples/agent_loop.py runs against this server, both flavours."""
    import subprocess
    env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % d.srv.port,
               DESKBOX_TOKEN=d.srv.token)
    ex = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "agent_loop.py")
    for flavour in ("anthropic", "openai"):
        p = subprocess.run([sys.executable, ex, flavour, d.sid, "--scripted"], env=env,
                           capture_output=True, timeout=300)
        out = p.stdout.decode(errors="replace")
        t.ok(p.returncode == 0 and "done: the file holds what the agent typed" in out,
             "examples/agent_loop.py %s writes the file through the terminal" % flavour,
             out[-1500:] + p.stderr.decode(errors="replace")[-1500:])


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({})["id"]
        d = Desk(srv, sid)
        warm_up(d)
        only = os.environ.get("ONLY")
        for name, fn in [("windows", test_windows), ("clipboard", test_clipboard),
                         ("example", test_example)]:
            if only and name not in only.split(","):
                continue
            try:
                fn(t, d)
            except Exception as ex:
                t.ok(False, "%s raised %s: %s" % (name, type(ex).__name__, ex))
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        rc = srv.stop()
        # sanitizer builds: leaks and errors make this non-zero
        t.eq(rc, 0, "deskboxd exits cleanly on SIGTERM")
        if rc != 0:
            t.diag(srv.stderr()[-3000:])
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
