"""Windows, clipboard and launch (deskbox-xtool inside the sandbox), and
the Anthropic / OpenAI computer-use adapters fed payloads as their docs
show them."""

import base64
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


def test_anthropic(t, d):
    """Payloads as in Anthropic's computer-use docs (computer_20250124)."""
    d.bg("exec xterm -u8 -fn 6x13 -T anterm -geometry 60x8+100+100 -e sh -c "
         "'exec cat > /tmp/ant.txt'")
    win = d.window("anterm")
    d.settle(300)

    def call(inp, name):
        r = d.post("anthropic", inp)
        t.eq(r.status, 200, "anthropic %s" % name)
        return r.json() if r.status == 200 else {}

    j = call({"action": "screenshot"}, "screenshot")
    png = base64.b64decode(j.get("base64_image", ""))
    t.eq(dbx.png_info(png)[:2], (1280, 800), "screenshot is a PNG of the screen")
    c = j.get("content", [{}])[0]
    t.ok(c.get("type") == "image" and c["source"]["media_type"] == "image/png" and
         c["source"]["data"] == j["base64_image"], "ready-made tool_result content")
    cx, cy = win[0] + 100, win[1] + 40
    call({"action": "left_click", "coordinate": [cx, cy]}, "left_click")
    call({"action": "type", "text": "hello from claude ✓"}, "type")
    call({"action": "key", "text": "Return"}, "key")
    call({"action": "mouse_move", "coordinate": [cx + 10, cy + 5]}, "mouse_move")
    j = call({"action": "cursor_position"}, "cursor_position")
    t.eq(j.get("output"), "X=%d,Y=%d" % (cx + 10, cy + 5), "cursor_position as text")
    call({"action": "scroll", "coordinate": [cx, cy], "scroll_direction": "down",
          "scroll_amount": 3}, "scroll")
    call({"action": "hold_key", "text": "shift", "duration": 0.2}, "hold_key")
    call({"action": "wait", "duration": 0.3}, "wait")
    # The sleeps are pacing, not waiting: clicks less than the multi-click
    # time apart would merge into one longer multi-click.
    call({"action": "double_click", "coordinate": [cx, cy]}, "double_click")
    time.sleep(0.3)
    call({"action": "triple_click", "coordinate": [cx, cy]}, "triple_click")
    time.sleep(0.3)
    call({"action": "left_click", "coordinate": [cx, cy], "text": "shift"}, "left_click+shift")
    # on the desktop: openbox's root menus, closed again with Escape
    call({"action": "right_click", "coordinate": [1200, 700]}, "right_click")
    d.ok("key", keys="Escape")
    call({"action": "middle_click", "coordinate": [1200, 700]}, "middle_click")
    d.ok("key", keys="Escape")
    call({"action": "left_mouse_down"}, "left_mouse_down")
    call({"action": "left_mouse_up"}, "left_mouse_up")
    call({"action": "left_click_drag", "start_coordinate": [cx, cy],
          "coordinate": [cx + 50, cy]}, "left_click_drag")
    j = call({"action": "zoom", "region": [win[0], win[1], win[0] + 320, win[1] + 200]}, "zoom")
    zpng = base64.b64decode(j.get("base64_image", ""))
    t.eq(dbx.png_info(zpng)[:2], (1280, 800), "zoom fits the region into the display size")
    d.ok("click", x=cx, y=cy)
    d.ok("key", keys="ctrl+d")
    got = d.read_when("/tmp/ant.txt", lambda s: s.endswith("\n"))
    t.eq(got, "hello from claude ✓\n", "type and key arrived")
    r = d.post("anthropic", {"action": "left_click", "coordinate": [99999, 1]})
    t.eq(r.status, 400, "coordinates are checked")
    r = d.post("anthropic", {"action": "fly"})
    t.eq(r.status, 400, "unknown action is 400")
    # a whole tool_use block is accepted too
    r = d.post("anthropic", {"type": "tool_use", "id": "toolu_01", "name": "computer",
                             "input": {"action": "screenshot"}})
    t.eq(r.status, 200, "a tool_use block around the input")


def test_openai(t, d):
    """Payloads as in OpenAI's computer-use guide (computer_call actions)."""
    d.bg("exec xterm -u8 -fn 6x13 -T oaterm -geometry 60x8+700+100 -e sh -c "
         "'exec cat > /tmp/oa.txt'")
    win = d.window("oaterm")
    d.settle(300)
    cx, cy = win[0] + 100, win[1] + 40

    def call(inp, name):
        r = d.post("openai", inp)
        t.eq(r.status, 200, "openai %s" % name)
        return r.json() if r.status == 200 else {}

    j = call({"type": "click", "button": "left", "x": cx, "y": cy}, "click")
    out = j.get("output", {})
    t.ok(j.get("type") == "computer_call_output" and out.get("type") == "computer_screenshot"
         and out.get("image_url", "").startswith("data:image/png;base64,"),
         "answers a computer_call_output with a screenshot")
    png = base64.b64decode(out.get("image_url", ",").split(",", 1)[1])
    t.eq(dbx.png_info(png)[:2], (1280, 800), "the screenshot decodes")
    call({"type": "type", "text": "hello from openai ✓"}, "type")
    call({"type": "keypress", "keys": ["CTRL", "A"]}, "keypress CTRL+A")
    call({"type": "keypress", "keys": ["ENTER"]}, "keypress ENTER")
    call({"type": "scroll", "x": cx, "y": cy, "scroll_x": 0, "scroll_y": 300}, "scroll")
    call({"type": "move", "x": cx + 3, "y": cy + 4}, "move")
    t.eq(d.get("cursor").json(), {"x": cx + 3, "y": cy + 4}, "move moved")
    call({"type": "double_click", "x": cx, "y": cy}, "double_click")
    call({"type": "drag", "path": [{"x": cx, "y": cy}, {"x": cx + 30, "y": cy},
                                   {"x": cx + 60, "y": cy + 5}]}, "drag")
    call({"type": "wait"}, "wait")
    call({"type": "screenshot"}, "screenshot")
    j = call({"type": "computer_call", "call_id": "call_42", "id": "cu_1",
              "action": {"type": "screenshot"}, "pending_safety_checks": [],
              "status": "completed"}, "a whole computer_call item")
    t.eq(j.get("call_id"), "call_42", "call_id is carried over")
    d.ok("click", x=cx, y=cy)
    d.ok("key", keys="ctrl+d")
    got = d.read_when("/tmp/oa.txt", lambda s: s.endswith("\n"))
    t.eq(got, "hello from openai ✓\x01\n", "type and keypress arrived (ctrl+a is ^A in cat)")
    t.eq(d.post("openai", {"type": "teleport"}).status, 400, "unknown type is 400")
    t.eq(d.post("openai", {"type": "keypress", "keys": []}).status, 400, "empty keys is 400")


def test_example(t, d):
    """examples/agent_loop.py runs against this server, both flavours."""
    import subprocess
    env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % d.srv.port,
               DESKBOX_TOKEN=d.srv.token)
    ex = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "agent_loop.py")
    for flavour in ("anthropic", "openai"):
        p = subprocess.run([sys.executable, ex, flavour, d.sid], env=env, capture_output=True,
                           timeout=300)
        out = p.stdout.decode(errors="replace")
        t.ok(p.returncode == 0 and out.count("deskbox <-") >= 6,
             "examples/agent_loop.py %s runs" % flavour,
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
                         ("anthropic", test_anthropic), ("openai", test_openai),
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
