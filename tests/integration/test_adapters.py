"""The Anthropic and OpenAI computer-use adapters, one check per action of
each format, fed the payloads verbatim as the formats define them, each
with an effect observed inside the sandbox (xev's event log, a file, the
pointer, a window's position) and the answer's exact shape.

Anthropic, computer_20250124 (+ zoom of computer_20251124): the input
schema of Anthropic's computer-use tool (actions key, hold_key, type,
cursor_position, mouse_move, left_mouse_down, left_mouse_up, left_click,
left_click_drag, right_click, middle_click, double_click, triple_click,
scroll, wait, screenshot, zoom; parameters coordinate, start_coordinate,
text, duration, scroll_direction, scroll_amount, region) and its reference
implementation, anthropics/anthropic-quickstarts
computer-use-demo/computer_use_demo/tools/computer.py (duration 0-100 s;
`key` also holds modifiers on clicks).  The answer is a tool_result block:
{"type":"tool_result","tool_use_id"?,"content":[...],"is_error"?}.

OpenAI: openai/openai-python src/openai/types/responses/
response_computer_tool_call.py (click with button left|right|wheel|back|
forward, double_click, drag, keypress, move, screenshot, scroll, type, wait;
`keys` held on pointer actions; `action` or batched `actions`) and
response_input_item_param.py ComputerCallOutput: {"type":
"computer_call_output","call_id","output":{"type":"computer_screenshot",
"image_url"},"status"?}."""

import base64
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_actions import Desk, start_xev, wait_events, warm_up, xev_events  # noqa: E402

SHIFT, CTRL, ALT = 0x1, 0x4, 0x8


def presses(evs, button=None):
    return [e for e in evs if e[0] == "ButtonPress" and (button is None or e[1] == button)]


class Xev:
    """An xev window logging button and key events; clear() between checks."""

    def __init__(self, d, log, geom="400x300+700+150"):
        self.d, self.log = d, log
        self.win = start_xev(d, "Event Tester", geom, log)
        self.x, self.y = self.win[0] + 150, self.win[1] + 120

    def clear(self):
        self.d.sh(": > %s" % self.log)

    def wait(self, pred, timeout=5):
        return wait_events(self.d, self.log, pred, timeout)


def anthropic(t, d, xe):
    def call(inp, name, is_error=False):
        r = d.post("anthropic", inp)
        j = r.json() if r.status == 200 else {}
        keys = {"type", "content"} | ({"is_error"} if is_error else set()) | \
            ({"tool_use_id"} if "id" in inp else set())
        t.ok(r.status == 200 and j.get("type") == "tool_result" and set(j) == keys and
             bool(j.get("is_error")) == is_error,
             "anthropic %s answers a tool_result%s" % (name, " with is_error" if is_error else ""),
             r.body[:300])
        return j, r

    # screenshot: one image block, nothing else
    j, r = call({"action": "screenshot"}, "screenshot")
    c = j.get("content", [{}])
    png = base64.b64decode(c[0].get("source", {}).get("data", "")) if c else b""
    t.ok(len(c) == 1 and c[0].get("type") == "image" and
         c[0]["source"].get("media_type") == "image/png" and
         dbx.png_info(png)[:2] == (1280, 800) and int(r.header("X-Frame") or 0) >= 1,
         "screenshot: a PNG image block of the screen, its frame in X-Frame")
    # clicks and their buttons, modifiers in `text` (schema) or `key` (reference)
    for action, button, n in (("left_click", 1, 1), ("right_click", 3, 1),
                              ("middle_click", 2, 1), ("double_click", 1, 2),
                              ("triple_click", 1, 3)):
        xe.clear()
        call({"action": action, "coordinate": [xe.x, xe.y]}, action)
        evs = xe.wait(lambda e: len(presses(e, button)) >= n)
        t.eq(len(presses(evs, button)), n, "%s: %d press(es) of button %d" % (action, n, button))
        time.sleep(0.4)  # pacing: outside the multi-click time of the next check
    xe.clear()
    call({"action": "left_click", "coordinate": [xe.x, xe.y], "text": "shift"}, "left_click+text")
    evs = xe.wait(lambda e: len(presses(e, 1)) >= 1)
    t.ok(presses(evs, 1) and presses(evs, 1)[0][2] & SHIFT, "left_click holds `text` shift", evs)
    time.sleep(0.4)
    xe.clear()
    call({"action": "left_click", "coordinate": [xe.x, xe.y], "key": "ctrl"}, "left_click+key")
    evs = xe.wait(lambda e: len(presses(e, 1)) >= 1)
    t.ok(presses(evs, 1) and presses(evs, 1)[0][2] & CTRL, "left_click holds `key` ctrl", evs)
    # scroll: wheel clicks with the modifier held
    xe.clear()
    # (alt+wheel is openbox's, which switches desktops: ctrl here)
    call({"action": "scroll", "coordinate": [xe.x, xe.y], "scroll_direction": "down",
          "scroll_amount": 3, "text": "ctrl"}, "scroll")
    evs = xe.wait(lambda e: len(presses(e, 5)) >= 3)
    t.ok(len(presses(evs, 5)) == 3 and all(p[2] & CTRL for p in presses(evs, 5)),
         "scroll down 3 with ctrl: three button-5 presses with ctrl held", evs)
    xe.clear()
    call({"action": "scroll", "coordinate": [xe.x, xe.y], "scroll_direction": "up",
          "scroll_amount": 2}, "scroll up")
    t.eq(len(presses(xe.wait(lambda e: len(presses(e, 4)) >= 2), 4)), 2, "scroll up 2")
    # keys
    xe.clear()
    call({"action": "key", "text": "ctrl+a"}, "key")
    evs = xe.wait(lambda e: any(x[0] == "KeyPress" and x[1] == "a" for x in e))
    t.ok([x[1] for x in evs if x[0] == "KeyPress"] == ["Control_L", "a"],
         "key ctrl+a: Control_L then a", evs)
    xe.clear()
    t0 = time.time()
    call({"action": "hold_key", "text": "shift", "duration": 0.6}, "hold_key")
    evs = xe.wait(lambda e: any(x[0] == "KeyRelease" for x in e))
    down = [x[3] for x in evs if x[0] == "KeyPress" and x[1] == "Shift_L"]
    up = [x[3] for x in evs if x[0] == "KeyRelease" and x[1] == "Shift_L"]
    t.ok(down and up and 550 <= up[0] - down[0] <= 2000 and time.time() - t0 >= 0.6,
         "hold_key shift 0.6 s: held about 600 ms (X time)", evs)
    # mouse_move, cursor_position, and the real pointer after a program moved it
    call({"action": "mouse_move", "coordinate": [123, 456]}, "mouse_move")
    t.eq(d.pointer((123, 456)), (123, 456), "mouse_move moved the X pointer")
    d.sh("xdotool mousemove 321 210")
    j, _ = call({"action": "cursor_position"}, "cursor_position")
    t.eq(j.get("content"), [{"type": "text", "text": "X=321,Y=210"}],
         "cursor_position: the pointer where a program put it, as text")
    # left_mouse_down / mouse_move / left_mouse_up drag a window by its title bar
    d.bg("exec xlogo -geometry 200x150+300+450")
    win = d.window("xlogo")
    d.settle(300)
    sx, sy = win[0] + 60, win[1] - 8
    call({"action": "mouse_move", "coordinate": [sx, sy]}, "mouse_move to the title bar")
    call({"action": "left_mouse_down"}, "left_mouse_down")
    for k in range(1, 6):
        call({"action": "mouse_move", "coordinate": [sx + 20 * k, sy + 12 * k]}, "drag move")
    call({"action": "left_mouse_up"}, "left_mouse_up")
    after = d.window("xlogo")
    t.ok(abs(after[0] - win[0] - 100) <= 3 and abs(after[1] - win[1] - 60) <= 3,
         "down / move / up moved the window by (100, 60): %s -> %s" % (win[:2], after[:2]))
    sx, sy = after[0] + 60, after[1] - 8
    call({"action": "left_click_drag", "start_coordinate": [sx, sy],
          "coordinate": [sx - 100, sy - 60]}, "left_click_drag")
    back = d.window("xlogo")
    t.ok(abs(back[0] - win[0]) <= 3 and abs(back[1] - win[1]) <= 3,
         "left_click_drag moved it back: %s -> %s" % (after[:2], back[:2]))
    d.sh("pkill -x xlogo; true")
    # type: the text lands in a file
    d.bg("exec xterm -u8 -fn 6x13 -T anterm -geometry 60x8+100+100 -e sh -c "
         "'exec cat > /tmp/ant.txt'")
    tw = d.window("anterm")
    d.settle(300)
    call({"action": "left_click", "coordinate": [tw[0] + 100, tw[1] + 40]}, "click the terminal")
    call({"action": "type", "text": "hello from claude ✓ 你好"}, "type")
    call({"action": "key", "text": "Return"}, "key Return")
    call({"action": "key", "text": "ctrl+d"}, "key ctrl+d")
    t.eq(d.read_when("/tmp/ant.txt", lambda s: s.endswith("\n")), "hello from claude ✓ 你好\n",
         "type: the text landed in the file exactly")
    # wait, zoom
    t0 = time.time()
    j, _ = call({"action": "wait", "duration": 0.4}, "wait")
    t.ok(time.time() - t0 >= 0.4 and j["content"][0]["type"] == "image",
         "wait 0.4 s, then a screenshot")
    j, _ = call({"action": "zoom", "region": [0, 0, 640, 200]}, "zoom")
    zpng = base64.b64decode(j["content"][0]["source"]["data"])
    t.eq(dbx.png_info(zpng)[:2], (640, 200), "zoom: the region at its own resolution")
    # a whole tool_use block: the tool_use_id comes back
    j, _ = call({"type": "tool_use", "id": "toolu_01", "name": "computer",
                 "input": {"action": "screenshot"}}, "a tool_use block")
    t.eq(j.get("tool_use_id"), "toolu_01", "tool_use_id is carried over")
    # failures are tool results the model can read
    for inp, what in (({"action": "fly"}, "invalid action"),
                      ({"action": "left_click", "coordinate": [99999, 1]}, "'x'"),
                      ({"action": "wait", "duration": 101}, "duration"),
                      ({"action": "key"}, "text is required"),
                      ({"action": "scroll", "scroll_direction": "sideways"}, "scroll_direction")):
        j, r = call(inp, "error %s" % inp["action"], is_error=True)
        text = (j.get("content") or [{}])[0].get("text", "")
        t.ok(what in text and r.header("X-Action-Error"), "the error names %r: %s" % (what, text))
    # a member the tool's schema does not have is refused, naming it, and
    # the action is not done (the pointer stays where it was)
    before = d.get("cursor").json()
    for inp, what in (({"action": "mouse_move", "coordinate": [11, 12], "colour": "red"},
                       "unknown field 'colour'"),
                      ({"type": "tool_use", "id": "toolu_02", "name": "computer",
                        "input": {"action": "mouse_move", "coordinate": [11, 12], "speed": 2}},
                       "unknown field 'input.speed'"),
                      ({"type": "tool_use", "id": "toolu_03", "name": "computer", "tier": 1,
                        "input": {"action": "mouse_move", "coordinate": [11, 12]}},
                       "unknown field 'tier'")):
        j, r = call(inp, "with an unknown member", is_error=True)
        text = (j.get("content") or [{}])[0].get("text", "")
        t.ok(what in text and what in (r.header("X-Action-Error") or ""),
             "the tool_result names it: %s" % text)
    t.eq(d.get("cursor").json(), before, "and none of those moved the pointer")
    j, r = call({"type": "tool_use", "id": "toolu_04", "name": "computer",
                 "cache_control": {"type": "ephemeral"}, "agent_display": None,
                 "input": {"action": "cursor_position"}}, "with the block's documented members")
    r = d.srv.request("POST", "/v1/sandboxes/%s/desktop/anthropic" % d.sid, b"{not json")
    t.eq(r.status, 400, "a body that is not JSON is still an HTTP 400")
    # the companion bash tool: one persistent shell, the reference's results
    def bash(inp):
        r = d.post("anthropic", {"type": "tool_use", "id": "toolu_b", "name": "bash",
                                 "input": inp})
        j = r.json() if r.status == 200 else {}
        c = j.get("content") or [{}]
        ok = r.status == 200 and j.get("type") == "tool_result" and \
            j.get("tool_use_id") == "toolu_b" and len(c) == 1 and c[0].get("type") == "text"
        return ok, c[0].get("text"), bool(j.get("is_error")), r
    got = bash({"command": "cd /tmp && export FOO=bar && echo hi"})
    t.eq(got[:3], (True, "hi", False), "bash: stdout as text, one trailing newline dropped")
    got = bash({"command": "pwd; echo $FOO"})
    t.eq(got[:3], (True, "/tmp\nbar", False), "bash: cd and export persist to the next command")
    got = bash({"command": "ls /nonexistent-dir"})
    t.ok(got[0] and got[2] and "No such file" in got[1] and got[3].header("X-Action-Error"),
         "bash: stderr makes an is_error result with its text", got[:3])
    got = bash({"restart": True})
    t.eq(got[:3], (True, "tool has been restarted.", False), "bash: restart")
    got = bash({"command": "pwd; echo \"[$FOO]\""})
    t.eq(got[:3], (True, "/workspace\n[]", False), "bash: a fresh shell after the restart")
    got = bash({})
    t.eq(got[:3], (True, "no command provided.", True), "bash: no command is an is_error result")
    # the companion text editor onto the sandbox's files
    def edit(inp):
        r = d.post("anthropic", {"type": "tool_use", "id": "toolu_e",
                                 "name": "str_replace_based_edit_tool", "input": inp})
        j = r.json() if r.status == 200 else {}
        c = j.get("content") or [{}]
        return c[0].get("text"), bool(j.get("is_error"))
    d.sh("rm -f /tmp/ed.txt")
    t.eq(edit({"command": "create", "path": "/tmp/ed.txt", "file_text": "one\ntwo\nthree\n"}),
         ("File created successfully at: /tmp/ed.txt", False), "editor: create")
    t.eq(d.sh("cat /tmp/ed.txt")["stdout"], "one\ntwo\nthree\n", "the file holds the text")
    t.eq(edit({"command": "create", "path": "/tmp/ed.txt", "file_text": "x"}),
         ("File already exists at: /tmp/ed.txt. Cannot overwrite files using command `create`.",
          True), "editor: create does not overwrite")
    t.eq(edit({"command": "view", "path": "/tmp/ed.txt"}),
         ("Here's the result of running `cat -n` on /tmp/ed.txt:\n     1\tone\n     2\ttwo\n"
          "     3\tthree\n     4\t\n", False), "editor: view, numbered as cat -n")
    t.eq(edit({"command": "view", "path": "/tmp/ed.txt", "view_range": [2, 3]}),
         ("Here's the result of running `cat -n` on /tmp/ed.txt:\n     2\ttwo\n     3\tthree\n",
          False), "editor: view_range")
    got = edit({"command": "str_replace", "path": "/tmp/ed.txt", "old_str": "two",
                "new_str": "TWO"})
    t.ok(not got[1] and got[0].startswith("The file /tmp/ed.txt has been edited. Here's the "
                                          "result of running `cat -n` on a snippet of "
                                          "/tmp/ed.txt:\n     1\tone\n     2\tTWO\n") and
         got[0].endswith("Review the changes and make sure they are as expected. Edit the file "
                         "again if necessary."), "editor: str_replace answers a snippet", got)
    t.eq(d.sh("cat /tmp/ed.txt")["stdout"], "one\nTWO\nthree\n", "and replaced in the file")
    got = edit({"command": "str_replace", "path": "/tmp/ed.txt", "old_str": "four",
                "new_str": "x"})
    t.ok(got[1] and "did not appear verbatim" in got[0], "editor: a missing old_str", got)
    d.sh("printf 'a\na\n' > /tmp/ed2.txt")
    got = edit({"command": "str_replace", "path": "/tmp/ed2.txt", "old_str": "a",
                "new_str": "b"})
    t.ok(got[1] and "Multiple occurrences" in got[0], "editor: old_str twice is refused", got)
    got = edit({"command": "insert", "path": "/tmp/ed.txt", "insert_line": 1,
                "new_str": "1.5"})
    t.ok(not got[1] and "has been edited" in got[0], "editor: insert", got)
    t.eq(d.sh("cat /tmp/ed.txt")["stdout"], "one\n1.5\nTWO\nthree\n", "inserted after line 1")
    got = edit({"command": "view", "path": "tmp/ed.txt"})
    t.ok(got[1] and "is not an absolute path" in got[0], "editor: a relative path", got)
    got = edit({"command": "view", "path": "/tmp/nope.txt"})
    t.ok(got[1] and "does not exist" in got[0], "editor: a missing file", got)
    got = edit({"command": "undo_edit", "path": "/tmp/ed.txt"})
    t.ok(got[1] and "Unrecognized command" in got[0], "editor: undo_edit is not supported", got)
    # a tool this adapter does not run is refused, not run as `computer`
    d.sh("rm -f /tmp/notrun.txt")
    d.ok("move", x=11, y=12)
    for name, inp in (("text_editor",
                       {"command": "create", "path": "/tmp/notrun.txt", "file_text": "x"}),
                      ("teleporter", {"action": "mouse_move", "coordinate": [300, 301]})):
        j, r = call({"type": "tool_use", "id": "toolu_9", "name": name, "input": inp},
                    "tool %s" % name, is_error=True)
        text = (j.get("content") or [{}])[0].get("text", "")
        t.ok("unknown tool '%s'" % name in text, "a tool_use of %s is refused: %s" % (name, text))
    t.eq(d.pointer(), (11, 12), "the refused tool_use moved nothing")
    t.ok(d.sh("test -e /tmp/notrun.txt && echo yes || echo no")["stdout"].strip() == "no",
         "and created no file")


def openai(t, d, xe):
    def call(inp, name, failed=False):
        r = d.post("openai", inp)
        j = r.json() if r.status == 200 else {}
        keys = {"type", "output"} | ({"call_id"} if "call_id" in inp else set()) | \
            ({"status"} if failed else set())
        out = j.get("output", {})
        t.ok(r.status == 200 and j.get("type") == "computer_call_output" and set(j) == keys and
             set(out) == {"type", "image_url"} and out.get("type") == "computer_screenshot" and
             out.get("image_url", "").startswith("data:image/png;base64,") and
             (j.get("status") == "incomplete") == failed,
             "openai %s answers a computer_call_output%s" % (name, " (incomplete)" if failed
                                                             else ""), r.body[:300])
        return j, r

    for button, xb in (("left", 1), ("right", 3), ("wheel", 2), ("back", 8), ("forward", 9)):
        xe.clear()
        call({"type": "click", "button": button, "x": xe.x, "y": xe.y}, "click " + button)
        evs = xe.wait(lambda e: len(presses(e, xb)) >= 1)
        t.eq([p[1] for p in presses(evs)], [xb], "click %s: X button %d" % (button, xb))
        time.sleep(0.4)
    xe.clear()
    call({"type": "click", "button": "left", "x": xe.x, "y": xe.y, "keys": ["SHIFT", "CTRL"]},
         "click with keys")
    evs = xe.wait(lambda e: len(presses(e, 1)) >= 1)
    t.ok(presses(evs, 1) and presses(evs, 1)[0][2] & (SHIFT | CTRL) == SHIFT | CTRL,
         "click with keys SHIFT, CTRL held", evs)
    time.sleep(0.4)
    xe.clear()
    call({"type": "click", "button": "forward", "x": xe.x, "y": xe.y, "keys": ["ALT"]},
         "click forward with keys")
    evs = xe.wait(lambda e: len(presses(e, 9)) >= 1)
    t.ok(presses(evs, 9) and presses(evs, 9)[0][2] & ALT, "forward with ALT held", evs)
    time.sleep(0.4)
    xe.clear()
    call({"type": "double_click", "x": xe.x, "y": xe.y, "keys": ["CTRL"]}, "double_click")
    evs = xe.wait(lambda e: len(presses(e, 1)) >= 2)
    t.ok(len(presses(evs, 1)) == 2 and all(p[2] & CTRL for p in presses(evs, 1)),
         "double_click with CTRL: two presses with control held", evs)
    xe.clear()
    call({"type": "scroll", "x": xe.x, "y": xe.y, "scroll_x": 0, "scroll_y": 300,
          "keys": ["CTRL"]}, "scroll")
    evs = xe.wait(lambda e: len(presses(e, 5)) >= 3)
    t.ok(len(presses(evs, 5)) == 3 and all(p[2] & CTRL for p in presses(evs, 5)),
         "scroll_y 300 with CTRL: three wheel-down clicks with ctrl held", evs)
    xe.clear()
    call({"type": "move", "x": xe.x + 5, "y": xe.y + 6, "keys": ["SHIFT"]}, "move")
    evs = xe.wait(lambda e: any(x[0] == "KeyRelease" for x in e))
    t.ok(d.pointer((xe.x + 5, xe.y + 6)) == (xe.x + 5, xe.y + 6) and
         [x[1] for x in evs] == ["Shift_L", "Shift_L"], "move with SHIFT: moved, shift around it",
         evs)
    xe.clear()
    call({"type": "keypress", "keys": ["CTRL", "A"]}, "keypress")
    evs = xe.wait(lambda e: any(x[0] == "KeyPress" and x[1] == "a" for x in e))
    t.ok([x[1] for x in evs if x[0] == "KeyPress"] == ["Control_L", "a"],
         "keypress CTRL+A: Control_L then a", evs)
    # drag a window by its title bar
    d.bg("exec xlogo -geometry 200x150+300+450")
    win = d.window("xlogo")
    d.settle(300)
    sx, sy = win[0] + 60, win[1] - 8
    call({"type": "drag", "path": [{"x": sx, "y": sy}, {"x": sx + 50, "y": sy + 20},
                                   {"x": sx + 90, "y": sy + 40}]}, "drag")
    after = d.window("xlogo")
    t.ok(abs(after[0] - win[0] - 90) <= 3 and abs(after[1] - win[1] - 40) <= 3,
         "drag moved the window along the path: %s -> %s" % (win[:2], after[:2]))
    d.sh("pkill -x xlogo; true")
    # a batched computer_call: click into a terminal, type, press keys; one output
    d.bg("exec xterm -u8 -fn 6x13 -T oaterm -geometry 60x8+100+100 -e sh -c "
         "'exec cat > /tmp/oa.txt'")
    tw = d.window("oaterm")
    d.settle(300)
    j, _ = call({"type": "computer_call", "id": "cu_1", "call_id": "call_42", "status":
                 "completed", "pending_safety_checks": [], "actions": [
                     {"type": "click", "button": "left", "x": tw[0] + 100, "y": tw[1] + 40},
                     {"type": "type", "text": "hello from openai ✓"},
                     {"type": "keypress", "keys": ["ENTER"]},
                     {"type": "keypress", "keys": ["CTRL", "D"]}]}, "batched actions")
    t.eq(j.get("call_id"), "call_42", "call_id is carried over")
    t.eq(d.read_when("/tmp/oa.txt", lambda s: s.endswith("\n")), "hello from openai ✓\n",
         "the batch typed into the terminal")
    j, _ = call({"type": "computer_call", "call_id": "c2", "action": {"type": "wait"}}, "wait")
    j, _ = call({"type": "screenshot"}, "screenshot")
    # failures: the output item still comes, marked incomplete, the reason in a header
    for inp, what in (({"type": "teleport"}, "teleport"),
                      ({"type": "keypress", "keys": []}, "keys"),
                      ({"type": "computer_call", "call_id": "c3", "actions": [
                          {"type": "move", "x": 1, "y": 1}, {"type": "click", "x": -1}]},
                       "actions[1]")):
        j, r = call(inp, "error", failed=True)
        t.ok(what in (r.header("X-Action-Error") or ""),
             "X-Action-Error names %r: %s" % (what, r.header("X-Action-Error")))
    # the item's documented members are known (not acted on); any other, in
    # the item or an action, is refused before any action runs
    j, r = call({"type": "computer_call", "id": "cu_1", "call_id": "c4", "status": "completed",
                 "pending_safety_checks": [], "action": {"type": "wait"}}, "with id, status, "
                "pending_safety_checks")
    before = d.get("cursor").json()
    for inp, what in (({"type": "computer_call", "call_id": "c5", "priority": 1,
                        "action": {"type": "move", "x": 5, "y": 6}}, "unknown field 'priority'"),
                      ({"type": "computer_call", "call_id": "c6",
                        "action": {"type": "move", "x": 5, "y": 6, "z": 1}},
                       "unknown field 'action.z'"),
                      ({"type": "computer_call", "call_id": "c7", "actions": [
                          {"type": "move", "x": 5, "y": 6}, {"type": "type", "text": "x",
                                                             "button": "left"}]},
                       "unknown field 'actions[1].button'"),
                      ({"type": "click", "x": 5, "y": 6, "double": True},
                       "unknown field 'double'")):
        j, r = call(inp, "with an unknown member", failed=True)
        t.ok(what in (r.header("X-Action-Error") or ""),
             "X-Action-Error names it: %s" % r.header("X-Action-Error"))
    t.eq(d.get("cursor").json(), before, "and no action of those calls ran")

    # ?items=true: the items to append, and after a failure a user message
    # with the reason as input_text, which the model reads
    path = "/v1/sandboxes/%s/desktop/openai?items=true" % d.sid
    r = d.srv.request("POST", path, {"type": "computer_call", "call_id": "c5",
                                     "action": {"type": "screenshot"}})
    items = r.json() if r.status == 200 else None
    t.ok(isinstance(items, list) and len(items) == 1 and
         items[0].get("type") == "computer_call_output" and items[0].get("call_id") == "c5" and
         "status" not in items[0], "items=true, success: a list of the one output item",
         r.body[:200])
    r = d.srv.request("POST", path, {"type": "computer_call", "call_id": "c6",
                                     "action": {"type": "keypress", "keys": ["CTRL", "NOPE"]}})
    items = r.json() if r.status == 200 else None
    ok = isinstance(items, list) and len(items) == 2
    out, msg = (items if ok else [{}, {}])
    t.ok(ok and set(out) == {"type", "call_id", "output", "status"} and
         out["status"] == "incomplete" and out["output"].get("type") == "computer_screenshot",
         "items=true, failure: the output item first, schema-valid, incomplete", r.body[:200])
    content = msg.get("content") or [{}]
    t.ok(set(msg) == {"type", "role", "content"} and msg.get("type") == "message" and
         msg.get("role") == "user" and len(content) == 1 and
         set(content[0]) == {"type", "text"} and content[0].get("type") == "input_text" and
         "unknown key 'NOPE'" in content[0].get("text", ""),
         "then a user message whose input_text gives the reason", msg)
    r = d.srv.request("POST", "/v1/sandboxes/%s/desktop/openai?items=maybe" % d.sid,
                      {"type": "screenshot"})
    t.eq(r.status, 400, "items=maybe is a 400")
    # pending safety checks: refused unless the client acknowledges them
    checks = [{"id": "cu_sc_1", "code": "malicious_instructions",
               "message": "The page asks to send your password."}]
    d.ok("move", x=21, y=22)
    call_sc = {"type": "computer_call", "call_id": "c7", "pending_safety_checks": checks,
               "action": {"type": "move", "x": 400, "y": 401}}
    r = d.post("openai", call_sc)
    msg = r.json().get("error", {}).get("message", "") if r.status == 409 else r.body[:200]
    t.ok(r.status == 409 and "send your password" in msg and
         "acknowledge_safety_checks=true" in msg,
         "pending safety checks without the flag: 409 naming the check", msg)
    t.eq(d.pointer(), (21, 22), "and the action did not run")
    r = d.srv.request("POST", "/v1/sandboxes/%s/desktop/openai?acknowledge_safety_checks=true"
                      % d.sid, call_sc)
    j = r.json() if r.status == 200 else {}
    t.ok(r.status == 200 and j.get("acknowledged_safety_checks") == checks and
         set(j) == {"type", "call_id", "output", "acknowledged_safety_checks"},
         "with ?acknowledge_safety_checks=true: run, the checks acknowledged in the output",
         r.body[:300])
    t.eq(d.pointer((400, 401)), (400, 401), "and the action ran")


def batch(t, d):
    """A batch with an unknown member in its last action runs none of them."""
    d.ok("move", {"x": 300, "y": 200})
    r = d.post("actions", {"actions": [{"action": "move", "x": 40, "y": 50},
                                       {"action": "click", "x": 41, "y": 51, "clicks": 2}]})
    err = r.json().get("error", {}) if r.status == 400 else {}
    t.ok(err.get("code") == "unknown_field" and
         "unknown field 'actions[1].clicks'" in err.get("message", ""),
         "batch: 400 unknown_field naming actions[1].clicks", r.body[:300])
    c = d.get("cursor").json()
    t.ok((c.get("x"), c.get("y")) == (300, 200), "and its first action did not run", c)
    for body, what in (({"actions": [], "then": {"shot": True}}, "then.shot"),
                       ({"actions": [], "then": {"wait": {"ms": 1, "quiet": 1}}},
                        "then.wait.quiet"),
                       ({"actions": [], "then": {"screenshot": {"zoom": 2}}},
                        "then.screenshot.zoom"),
                       ({"actions": [], "agent": 1}, "agent")):
        r = d.post("actions", body)
        t.ok(r.status == 400 and "unknown field '%s'" % what in r.body.decode(),
             "batch: %s is refused" % what, r.body[:200])
    r = d.post("click", {"x": 1, "y": 1, "buton": "right"})
    t.ok(r.status == 400 and "unknown field 'buton'" in r.body.decode(),
         "an action's unknown member is a 400 naming it", r.body[:200])
    r = d.post("drag", {"path": [{"x": 1, "y": 1}, {"x": 2, "y": 2, "t": 5}]})
    t.ok(r.status == 400 and "unknown field 'path[1].t'" in r.body.decode(),
         "a drag point's unknown member too", r.body[:200])


def map_coord(v, frm, to):
    """input_map_coord: the centre of agent pixel v, in real pixels."""
    return min((2 * v + 1) * to // (2 * frm), to - 1)


def scaling(t, srv):
    """A 1920x1080 screen: Anthropic's screenshots come at the size Claude
    is meant to get (<= 1568 px long side, <= 1.15 MP), clicks map back to
    the real pixel, zoom gives the real pixels, ?fit=false the real screen."""
    sid = srv.create({"display": {"width": 1920, "height": 1080}})["id"]
    d = Desk(srv, sid)
    warm_up(d)
    r = d.post("anthropic", {"action": "screenshot"})
    png = base64.b64decode(r.json()["content"][0]["source"]["data"]) if r.status == 200 else b""
    aw, ah = dbx.png_info(png)[:2] if png else (0, 0)
    t.ok(aw <= 1568 and ah <= 1568 and aw * ah <= 1.15 * 2 ** 20 and aw * ah > 1.1 * 2 ** 20 and
         abs(aw / ah - 1920 / 1080) < 0.01,
         "1920x1080 screen: the screenshot is %dx%d (<= 1568 px, ~1.15 MP, same aspect)"
         % (aw, ah))
    for ax, ay in ((0, 0), (aw - 1, ah - 1), (731, 377)):
        d.post("anthropic", {"action": "mouse_move", "coordinate": [ax, ay]})
        want = (map_coord(ax, aw, 1920), map_coord(ay, ah, 1080))
        t.eq(d.pointer(want), want, "mouse_move (%d, %d) lands on real %s" % (ax, ay, want))
        j = d.post("anthropic", {"action": "cursor_position"}).json()
        t.eq(j["content"][0]["text"], "X=%d,Y=%d" % (ax, ay),
             "cursor_position maps it back exactly")
    r = d.post("anthropic", {"action": "zoom", "region": [100, 100, 500, 400]})
    zpng = base64.b64decode(r.json()["content"][0]["source"]["data"])
    zw, zh = dbx.png_info(zpng)[:2]
    t.ok(abs(zw - 400 * 1920 / aw) <= 1.5 and abs(zh - 300 * 1080 / ah) <= 1.5,
         "zoom of 400x300 agent pixels: the %dx%d real pixels under it" % (zw, zh))
    r = srv.request("POST", "/v1/sandboxes/%s/desktop/anthropic?fit=false" % sid,
                    {"action": "screenshot"})
    png = base64.b64decode(r.json()["content"][0]["source"]["data"])
    t.eq(dbx.png_info(png)[:2], (1920, 1080), "?fit=false: the real screen")
    r = srv.request("POST", "/v1/sandboxes/%s/desktop/anthropic" % sid,
                    {"action": "screenshot", "agent_display": {"width": 1280, "height": 720}})
    png = base64.b64decode(r.json()["content"][0]["source"]["data"])
    t.eq(dbx.png_info(png)[:2], (1280, 720), "a declared agent_display wins")
    r = srv.request("POST", "/v1/sandboxes/%s/desktop/anthropic?fit=maybe" % sid,
                    {"action": "screenshot"})
    t.eq(r.status, 400, "fit=maybe is a 400")
    srv.request("DELETE", "/v1/sandboxes/" + sid)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({})["id"]
        d = Desk(srv, sid)
        warm_up(d)
        xe = Xev(d, "/tmp/xev-adapters.log")
        batch(t, d)
        anthropic(t, d, xe)
        d.sh("pkill -x xev; true")
        xe = Xev(d, "/tmp/xev-adapters-2.log")
        openai(t, d, xe)
        srv.request("DELETE", "/v1/sandboxes/" + sid)
        if not os.environ.get("ONLY") or "scaling" in os.environ["ONLY"]:
            scaling(t, srv)
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
