"""Agent-exact keys and wheel, checked against xdotool in the same sandbox:
Shift with digits, punctuation and space ("shift+1" is "!"), keypad digits
with Num Lock as xdotool sets it, horizontal wheel as X buttons 6/7 (with a
held modifier and nothing else), "meta" as Meta (xdotool's and Anthropic's
syntax) and OpenAI's META as Super, and error messages that stay valid
UTF-8 when a long non-ASCII name is cut.

Each key check sends the same key with xdotool and through deskbox to one
xev window and compares what xev saw: the keysym, the modifier state and
the text XLookupString gives.  The keypad's text is also checked as the
exact bytes a raw-mode xterm receives."""

import json
import os
import re
import sys
import time
from urllib.parse import quote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_actions import Desk, start_xev, warm_up  # noqa: E402

SHIFT, CTRL, ALT, NUMLOCK = 0x1, 0x4, 0x8, 0x10
MODS = ("Shift_L", "Shift_R", "Control_L", "Control_R", "Alt_L", "Alt_R", "Meta_L", "Meta_R",
        "Super_L", "Super_R", "Num_Lock")


def xev_log(d, log):
    """(kind, detail, state, text) of xev's key and button events."""
    out = d.sh("cat %s" % log)["stdout"]
    evs = []
    for block in out.split("\n\n"):
        m = re.match(r"(ButtonPress|ButtonRelease|KeyPress|KeyRelease) event", block.strip())
        if not m:
            continue
        st = re.search(r"state 0x([0-9a-f]+)", block)
        state = int(st.group(1), 16) if st else None
        if m.group(1).startswith("Button"):
            det = re.search(r"button (\d+)", block)
            evs.append((m.group(1), int(det.group(1)) if det else None, state, None))
            continue
        det = re.search(r"keysym 0x[0-9a-f]+, (\w+)\)", block)
        txt = re.search(r'XLookupString gives \d+ bytes: (?:\(([0-9a-f ]+)\) )?"', block)
        evs.append((m.group(1), det.group(1) if det else None, state,
                    txt.group(1) if txt and txt.group(1) else ""))
    return evs


class Xev:
    def __init__(self, d, log):
        self.d, self.log = d, log
        self.win = start_xev(d, "Event Tester", "400x300+700+150", log)
        self.x, self.y = self.win[0] + 150, self.win[1] + 120
        # the xev window has the focus: xdotool and deskbox type into it
        d.ok("click", x=self.x, y=self.y)

    def clear(self):
        self.d.sh(": > %s" % self.log)

    def wait(self, pred, timeout=5):
        deadline = time.time() + timeout
        evs = []
        while time.time() < deadline:
            evs = xev_log(self.d, self.log)
            if pred(evs):
                return evs
            time.sleep(0.1)
        return evs


def key_presses(evs):
    """The non-modifier key presses: (keysym, state without Lock, text)."""
    return [(e[1], e[2] & ~0x2, e[3]) for e in evs if e[0] == "KeyPress" and e[1] not in MODS]


def releases_done(evs, n):
    return len([e for e in evs if e[0] == "KeyRelease" and e[1] not in MODS]) >= n


def observe(xe, send, n=1):
    """What xev saw of `send()`, once all its `n` keys were released and the
    modifiers too."""
    xe.clear()
    send()
    evs = xe.wait(lambda e: releases_done(e, n) and
                  sum(1 for x in e if x[0] == "KeyPress" and x[1] in MODS) ==
                  sum(1 for x in e if x[0] == "KeyRelease" and x[1] in MODS))
    return evs


def keys(t, d, xe):
    def deskbox(k):
        return lambda: d.ok("key", keys=k)

    def xdotool(k):
        return lambda: d.sh("xdotool key %s" % k)

    def anthropic(k):
        return lambda: d.ok("anthropic", {"action": "key", "text": k})

    def openai(ks):
        return lambda: d.ok("openai", {"type": "keypress", "keys": ks})

    cases = [("shift+1", "!"), ("shift+comma", "<"), ("shift+slash", "?"),
             ("ctrl+shift+minus", None), ("ctrl+shift+equal", None), ("shift+space", " "),
             ("shift+a", "A"), ("shift+Tab", None), ("KP_1", "1"), ("KP_Enter", "\r")]
    for combo, text in cases:
        want = key_presses(observe(xe, xdotool(combo)))
        if numlock(d) == "on":  # xdotool leaves it on after a keypad key
            d.sh("xdotool key Num_Lock")
        got = key_presses(observe(xe, deskbox(combo)))
        t.ok(want and got == want, "key %s: what xdotool sends (%s)" % (combo, want), got)
        if text is not None:
            hexes = " ".join("%02x" % ord(c) for c in text)
            t.ok(got and got[0][2] == hexes, "key %s types %r" % (combo, text), got)
        ant = key_presses(observe(xe, anthropic(combo)))
        t.eq(ant, want, "anthropic key %s: the same" % combo)
        t.eq(numlock(d), "off", "after key %s through deskbox, Num Lock is off" % combo)
    sh1 = key_presses(observe(xe, openai(["SHIFT", "1"])))
    t.ok(sh1 and sh1[0][0] == "exclam" and sh1[0][1] & SHIFT and sh1[0][2] == "21",
         'openai ["SHIFT","1"]: "!" with shift', sh1)
    sheq = key_presses(observe(xe, openai(["SHIFT", "="])))
    t.ok(sheq and sheq[0][0] == "plus" and sheq[0][1] & SHIFT and sheq[0][2] == "2b",
         'openai ["SHIFT","="]: "+" with shift', sheq)
    evs = observe(xe, openai(["META", "A"]))
    t.ok([e[1] for e in evs if e[0] == "KeyPress"] == ["Super_L", "a"],
         "openai META stays the Super key", evs)
    # meta: Meta_L (in mod1 as Alt), no Shift; xdotool reaches Meta_L on
    # the second level of Alt's key and so adds Shift (docs/actions.md)
    for send, who in ((deskbox("meta+a"), "key"), (anthropic("meta+a"), "anthropic key")):
        evs = observe(xe, send)
        t.ok([e[1] for e in evs if e[0] == "KeyPress"] == ["Meta_L", "a"] and
             key_presses(evs)[0][1] & (ALT | SHIFT) == ALT,
             "%s meta+a: Meta_L, then a with Meta's mod1 and no shift" % who, evs)
    # Num Lock is off again after a keypad digit
    evs = observe(xe, deskbox("KP_5 a"), 2)
    kp = key_presses(evs)
    t.ok(len(kp) == 2 and kp[0] == ("KP_5", NUMLOCK, "35") and kp[1][1] == 0,
         "KP_5 with Num Lock, then a without: Num Lock is off again", kp)
    t.eq(numlock(d), "off", "Num Lock is off (xset q)")


def numlock(d):
    m = re.search(r"Num Lock:\s+(on|off)", d.sh("xset q")["stdout"])
    return m.group(1) if m else None


def keypad_xterm(t, d):
    d.bg("exec xterm -u8 -fn 6x13 -T kpterm -geometry 40x5+100+100 -e sh -c "
         "'stty raw -echo; exec head -c 3 > /tmp/kp.txt'")
    win = d.window("kpterm")
    d.settle(300)
    d.ok("click", x=win[0] + 60, y=win[1] + 30)
    d.ok("key", keys="KP_0 KP_5 KP_9")
    got = d.read_when("/tmp/kp.txt", lambda s: len(s) >= 3)
    t.eq(got, "059", "KP_0 KP_5 KP_9 in a raw-mode xterm: exactly the bytes \"059\"")


def wheel(t, d, xe):
    def buttons(evs):
        return [(e[1], e[2] & (SHIFT | CTRL)) for e in evs if e[0] == "ButtonPress"]

    def scroll(send, n):
        xe.clear()
        send()
        return buttons(xe.wait(lambda e: len(buttons(e)) >= n and
                               (not any(x[0] == "KeyPress" for x in e) or
                                any(x[0] == "KeyRelease" for x in e))))

    got = scroll(lambda: d.ok("scroll", x=xe.x, y=xe.y, dx=2), 2)
    t.eq(got, [(7, 0), (7, 0)], "scroll dx=2: two presses of button 7, no shift")
    got = scroll(lambda: d.ok("scroll", x=xe.x, y=xe.y, dx=-1), 1)
    t.eq(got, [(6, 0)], "scroll dx=-1: button 6")
    got = scroll(lambda: d.ok("anthropic", {"action": "scroll", "coordinate": [xe.x, xe.y],
                                            "scroll_direction": "left", "scroll_amount": 2,
                                            "text": "ctrl"}), 2)
    t.eq(got, [(6, CTRL), (6, CTRL)], "anthropic scroll left with ctrl: ctrl+button 6 only")
    got = scroll(lambda: d.ok("anthropic", {"action": "scroll", "coordinate": [xe.x, xe.y],
                                            "scroll_direction": "right", "scroll_amount": 1}),
                 1)
    t.eq(got, [(7, 0)], "anthropic scroll right: button 7")
    got = scroll(lambda: d.ok("openai", {"type": "scroll", "x": xe.x, "y": xe.y,
                                         "scroll_x": -100, "scroll_y": 0}), 1)
    t.eq(got, [(6, 0)], "openai scroll_x -100: button 6")
    # xdotool's own: the same buttons
    got = scroll(lambda: d.sh("xdotool mousemove %d %d click 6 click 7" % (xe.x, xe.y)), 2)
    t.eq(got, [(6, 0), (7, 0)], "xdotool click 6 / 7 arrive the same way")


def valid_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def utf8_cuts(t, d):
    for name in ("é" * 40, "a" + "你" * 30, "x" * 63 + "é", "😀" * 20):
        r = d.post("key", {"keys": name})
        t.ok(r.status == 400 and valid_utf8(r.body) and "too long" in r.body.decode("utf-8"),
             "a %d-byte key name: 400, the message valid UTF-8" % len(name.encode()),
             r.body[:200])
        r = d.post("anthropic", {"action": "key", "text": "ctrl+" + name})
        hdr = (r.header("X-Action-Error") or "").encode("latin-1")
        j = json.loads(r.body) if valid_utf8(r.body) else {}
        t.ok(r.status == 200 and j.get("is_error") and hdr and valid_utf8(hdr),
             "anthropic: the tool_result and X-Action-Error are valid UTF-8", hdr[:120])
        r = d.post("openai", {"type": "keypress", "keys": ["CTRL", name]})
        hdr = (r.header("X-Action-Error") or "").encode("latin-1")
        t.ok(r.status == 200 and valid_utf8(r.body) and hdr and valid_utf8(hdr),
             "openai: the output and X-Action-Error are valid UTF-8", hdr[:120])
    r = d.srv.request("POST", "/v1/sandboxes/%s/desktop/%s" % (d.sid, quote("é" * 40)), {})
    t.ok(r.status == 404 and valid_utf8(r.body) and "no desktop action" in r.body.decode(),
         "an unknown 80-byte non-ASCII action name: 404, valid UTF-8", r.body[:200])


def main():
    dbx.require_root_and_tools()
    for tool in ("xev", "xwininfo", "xdotool", "xterm", "xset", "stdbuf"):
        if not dbx.shutil.which(tool):
            dbx.skip_all("%s is not installed" % tool)
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({})["id"]
        d = Desk(srv, sid)
        warm_up(d)
        only = os.environ.get("ONLY")
        xe = Xev(d, "/tmp/xev-exact.log")
        for name, fn in [("keys", lambda: keys(t, d, xe)), ("wheel", lambda: wheel(t, d, xe)),
                         ("utf8", lambda: utf8_cuts(t, d)),
                         ("keypad", lambda: keypad_xterm(t, d))]:
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
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
