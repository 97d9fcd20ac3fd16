"""The Gemini computer-use adapter (POST .../desktop/gemini), fed function
calls verbatim as google-gemini/computer-use-preview's agent.py receives
them (click_at, hover_at, type_text_at, key_combination, scroll_at,
scroll_document, drag_and_drop, wait_5_seconds, navigate, go_back,
go_forward, search; 0-999 normalized coordinates), each effect observed
inside the sandbox (xev's event log, the X pointer, a file typed through
xterm, a window's position), and the answer's exact FunctionResponse shape:
{"name","id"?,"response":{} or {"error"},"parts":[{"inline_data":
{"mime_type":"image/png","data"}}]}."""

import base64
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_actions import Desk, warm_up  # noqa: E402
from test_adapters import Xev, presses  # noqa: E402

W, H = 1280, 800
CTRL, ALT = 0x4, 0x8


def norm(px, size):
    """A pixel as the model writes it: the normalized value whose
    x / 1000 * size lands on it."""
    return (px * 1000 + size - 1) // size


def denorm(v, size):
    return int(v / 1000 * size)


def keys_pressed(evs):
    return [e[1] for e in evs if e[0] == "KeyPress"]


def run(t, d, xe):
    def call(body, name, failed=False):
        r = d.post("gemini", body)
        j = r.json() if r.status == 200 else {}
        fc = body.get("function_call") or body.get("functionCall") or body
        want = {"name", "response", "parts"} | ({"id"} if "id" in fc else set())
        parts = j.get("parts") or [{}]
        blob = parts[0].get("inline_data", {})
        png = base64.b64decode(blob.get("data", "")) if blob.get("data") else b""
        t.ok(r.status == 200 and set(j) == want and j.get("name") == fc.get("name") and
             len(parts) == 1 and set(parts[0]) == {"inline_data"} and
             set(blob) == {"mime_type", "data"} and blob["mime_type"] == "image/png" and
             dbx.png_info(png)[:2] == (W, H) and
             (set(j.get("response", {})) == ({"error"} if failed else set())),
             "gemini %s answers a FunctionResponse with the screenshot%s"
             % (name, " and response.error" if failed else ""), r.body[:300])
        return j, r

    # click_at: normalized coordinates, the button press where they point
    nx, ny = norm(xe.x, W), norm(xe.y, H)
    xe.clear()
    call({"name": "click_at", "args": {"x": nx, "y": ny}}, "click_at")
    evs = xe.wait(lambda e: len(presses(e, 1)) >= 1)
    t.eq(len(presses(evs, 1)), 1, "click_at: one press of button 1")
    t.eq(d.pointer((denorm(nx, W), denorm(ny, H))), (denorm(nx, W), denorm(ny, H)),
         "click_at (%d, %d) is the pixel x / 1000 * 1280, y / 1000 * 800" % (nx, ny))
    time.sleep(0.4)
    call({"name": "hover_at", "args": {"x": 250, "y": 750}}, "hover_at")
    t.eq(d.pointer((320, 600)), (320, 600), "hover_at (250, 750) moved the pointer to (320, 600)")
    call({"name": "hover_at", "args": {"x": nx, "y": ny}}, "hover_at back")
    # key_combination, with the reference's names
    xe.clear()
    call({"name": "key_combination", "args": {"keys": "control+a"}}, "key_combination")
    evs = xe.wait(lambda e: any(x[0] == "KeyRelease" and x[1] == "Control_L" for x in e))
    t.eq(keys_pressed(evs), ["Control_L", "a"], "key_combination control+a: Control_L then a")
    xe.clear()
    call({"functionCall": {"name": "key_combination", "args": {"keys": "Control+Shift+T"}}},
         "key_combination in a Part")
    evs = xe.wait(lambda e: any(x[0] == "KeyRelease" and x[1] == "Control_L" for x in e))
    t.eq(keys_pressed(evs), ["Control_L", "Shift_L", "T"],
         "a Part's functionCall: Control+Shift+T is ctrl+shift+t")
    # scroll_at: magnitude normalized along the axis, 100 px per wheel click
    xe.clear()
    call({"name": "scroll_at", "args": {"x": nx, "y": ny, "direction": "down"}}, "scroll_at")
    evs = xe.wait(lambda e: len(presses(e, 5)) >= 6)
    t.eq([p[1] for p in presses(evs)], [5] * 6,
         "scroll_at down, magnitude 800 (640 px): six wheel-down clicks")
    xe.clear()
    call({"name": "scroll_at", "args": {"x": nx, "y": ny, "direction": "left",
                                        "magnitude": 200}}, "scroll_at left")
    evs = xe.wait(lambda e: len(presses(e, 6)) >= 3)
    t.eq([p[1] for p in presses(evs)], [6] * 3,
         "scroll_at left, magnitude 200 (256 px): three clicks of button 6")
    xe.clear()
    call({"name": "scroll_document", "args": {"direction": "down"}}, "scroll_document")
    evs = xe.wait(lambda e: any(x[0] == "KeyRelease" for x in e))
    t.eq(keys_pressed(evs), ["Next"], "scroll_document down is Page Down, as the reference")
    # the browser functions are keys to the browser in front
    xe.clear()
    call({"name": "go_back", "args": {}}, "go_back")
    evs = xe.wait(lambda e: any(x[0] == "KeyRelease" and x[1] == "Alt_L" for x in e))
    t.eq(keys_pressed(evs), ["Alt_L", "Left"], "go_back: alt+Left")
    xe.clear()
    call({"name": "go_forward"}, "go_forward")
    evs = xe.wait(lambda e: any(x[0] == "KeyRelease" and x[1] == "Alt_L" for x in e))
    t.eq(keys_pressed(evs), ["Alt_L", "Right"], "go_forward: alt+Right")
    xe.clear()
    call({"name": "navigate", "args": {"url": "http://a.b/"}}, "navigate")
    evs = xe.wait(lambda e: any(x[0] == "KeyRelease" and x[1] == "Return" for x in e))
    # (the VNC server adds Shift around the colon)
    t.eq([k for k in keys_pressed(evs) if k != "Shift_L"],
         ["Control_L", "l", "h", "t", "t", "p", "colon", "slash", "slash", "a", "period", "b",
          "slash", "Return"], "navigate: ctrl+l, the URL, Return")
    # type_text_at into a terminal: click, type, Enter
    d.bg("exec xterm -u8 -fn 6x13 -T gemterm -geometry 60x8+100+100 -e sh -c "
         "'exec cat > /tmp/gem.txt'")
    tw = d.window("gemterm")
    d.settle(300)
    call({"name": "type_text_at", "id": "fc_1",
          "args": {"x": norm(tw[0] + 100, W), "y": norm(tw[1] + 40, H),
                   "text": "hello from gemini ✓ 你好", "press_enter": True,
                   "clear_before_typing": False}}, "type_text_at")
    t.eq(d.read_when("/tmp/gem.txt", lambda s: s.endswith("\n")), "hello from gemini ✓ 你好\n",
         "type_text_at: clicked, typed exactly, Enter")
    d.sh("pkill -f 'xterm -u8 -fn 6x13 -T gemterm'; true")
    # type_text_at clears first by default: ctrl+a Delete, then the text
    xe.clear()
    call({"name": "type_text_at", "args": {"x": nx, "y": ny, "text": "ok"}}, "type_text_at clear")
    evs = xe.wait(lambda e: sum(1 for x in e if x[0] == "KeyRelease" and x[1] == "k") >= 1)
    t.eq(keys_pressed(evs), ["Control_L", "a", "Delete", "o", "k"],
         "type_text_at clears with ctrl+a Delete, as the reference, no Enter by default")
    time.sleep(0.4)
    # drag_and_drop a window by its title bar
    d.bg("exec xlogo -geometry 200x150+300+450")
    win = d.window("xlogo")
    d.settle(300)
    sx, sy = win[0] + 60, win[1] - 8
    call({"name": "drag_and_drop", "args": {"x": norm(sx, W), "y": norm(sy, H),
                                            "destination_x": norm(sx + 160, W),
                                            "destination_y": norm(sy + 80, H)}}, "drag_and_drop")
    after = d.window("xlogo")
    dx = denorm(norm(sx + 160, W), W) - denorm(norm(sx, W), W)
    dy = denorm(norm(sy + 80, H), H) - denorm(norm(sy, H), H)
    t.ok(abs(after[0] - win[0] - dx) <= 3 and abs(after[1] - win[1] - dy) <= 3,
         "drag_and_drop moved the window by (%d, %d): %s -> %s" % (dx, dy, win[:2], after[:2]))
    d.sh("pkill -x xlogo; true")
    t0 = time.time()
    call({"name": "wait_5_seconds", "args": {}}, "wait_5_seconds")
    t.ok(time.time() - t0 >= 5, "wait_5_seconds waited 5 s")
    # failures: a FunctionResponse with response.error, the reason in a header too
    for body, what in (({"name": "teleport", "args": {}}, "teleport"),
                       ({"name": "click_at", "args": {"x": 1001, "y": 5}}, "'x'"),
                       ({"name": "click_at", "args": {"y": 5}}, "'x'"),
                       ({"name": "scroll_at", "args": {"x": 1, "y": 1, "direction": "in"}},
                        "direction"),
                       ({"name": "key_combination", "args": {"keys": "control++"}}, "keys"),
                       ({"name": "navigate", "args": {}}, "url")):
        j, r = call(body, "error %s" % body["name"], failed=True)
        err = (j.get("response") or {}).get("error", "")
        t.ok(what in err and r.header("X-Action-Error"), "the error names %r: %s" % (what, err))
    r = d.srv.request("POST", "/v1/sandboxes/%s/desktop/gemini" % d.sid, b"{not json")
    t.eq(r.status, 400, "a body that is not JSON is an HTTP 400")
    browser_url(t, d)


def browser_url(t, d):
    """With chromium in front, Gemini's response.url and OpenAI's
    output.current_url are its page's URL (read over CDP)."""
    if not dbx.shutil.which("chromium"):
        t.skip("page URL", "chromium is not installed")
        return
    d.sh("printf '<title>gem</title><body>page</body>' > /tmp/gem.html")
    url = "file:///tmp/gem.html"
    r = d.post("browser", {"url": url, "timeout_ms": 100000})
    t.ok(r.status == 200, "the browser starts", r.body[:200])
    d.settle(500, 10000)
    deadline = time.time() + 30
    got = {}
    while time.time() < deadline:
        r = d.post("gemini", {"name": "hover_at", "args": {"x": 500, "y": 500}})
        got = r.json().get("response", {}) if r.status == 200 else {}
        if got.get("url") == url:
            break
        time.sleep(0.5)
    t.eq(got, {"url": url}, "gemini: response.url is the page in front")
    r = d.post("openai", {"type": "computer_call", "call_id": "u1",
                          "action": {"type": "screenshot"}})
    out = r.json().get("output", {}) if r.status == 200 else {}
    t.ok(out.get("current_url") == url and set(out) == {"type", "image_url", "current_url"},
         "openai: output.current_url is the page in front", str(out)[:200])
    r = d.post("launch", {"argv": ["xterm", "-T", "front"], "timeout_ms": 15000})
    d.settle(300)
    r = d.post("gemini", {"name": "hover_at", "args": {"x": 10, "y": 10}})
    t.eq(r.json().get("response") if r.status == 200 else r.body[:200], {},
         "with another window in front: no url")
    d.sh("pkill -x chromium; pkill -f 'xterm -T [f]ront'; true")


def main():
    dbx.require_root_and_tools()
    for tool in ("xev", "xwininfo", "xdotool", "xterm", "xlogo", "stdbuf"):
        if not dbx.shutil.which(tool):
            dbx.skip_all("%s is not installed" % tool)
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({})["id"]
        d = Desk(srv, sid)
        warm_up(d)
        xe = Xev(d, "/tmp/xev-gemini.log")
        d.ok("click", x=xe.x, y=xe.y)  # xev has the focus
        try:
            run(t, d, xe)
        except Exception as ex:
            t.ok(False, "gemini raised %s: %s" % (type(ex).__name__, ex))
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly on SIGTERM")
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
