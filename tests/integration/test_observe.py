"""Observation (docs/observation.md) against a real sandbox: the events
stream (the frames of a typed word after its action, actions in order with
frame ids, typed text redacted with "sensitive", resuming with
Last-Event-ID after a reconnect, a slow reader dropped), and takeover (an
agent's click refused with 423 taken_over on every path while a viewer's
RFB click through the real viewer WebSocket reaches the application; the
lease's end and DELETE give the desktop back)."""

import http.client
import json
import os
import queue
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_actions import Desk, start_xev, wait_events, warm_up  # noqa: E402
from test_vnc import WS, rfb_handshake  # noqa: E402


class Events:
    """An open events stream; events go to a queue as (id, name, data)."""

    def __init__(self, srv, sid, query="", last_id=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        h = {"Authorization": "Bearer " + srv.token}
        if last_id is not None:
            h["Last-Event-ID"] = str(last_id)
        self.conn.request("GET", "/v1/sandboxes/%s/desktop/events%s" % (sid, query), headers=h)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.events = queue.Queue()
        self.ended = threading.Event()
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        eid, name, data = None, None, None
        try:
            for raw in self.resp:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("id: "):
                    eid = int(line[4:])
                elif line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                elif line == "" and name:
                    self.events.put((eid, name, data))
                    eid, name, data = None, None, None
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            pass
        self.ended.set()

    def until(self, pred, timeout=20):
        """Events up to and including the first for which pred is true."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                ev = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return got, False
            got.append(ev)
            if pred(ev):
                return got, True

    def close(self):
        self.conn.close()


def is_action(name):
    return lambda ev: ev[1] == "action" and ev[2]["action"] == name


def test_events(t, d, srv):
    term = d.ok("launch", argv=["xterm", "-T", "obs-term", "-geometry", "40x5+20+20"],
                timeout_ms=15000)
    t.ok(term.get("window"), "an xterm to type into")
    win = d.window("obs-term")
    d.settle(300)
    ev = Events(srv, d.sid, "?max_hz=30")
    t.eq(ev.status, 200, "GET desktop/events answers 200")
    got, ok = ev.until(lambda e: e[1] == "ready", 10)
    t.ok(ok and "takeover" in got[-1][2], "the stream starts with ready (takeover state)")

    d.ok("click", x=win[0] + 50, y=win[1] + 20)
    typed = d.ok("type_text", text="hello")
    got, ok = ev.until(is_action("type_text"))
    acts = [e[2]["action"] for e in got if e[1] == "action"]
    t.eq(acts, ["click", "type_text"], "actions arrive in order")
    act = got[-1][2]
    t.ok(act["route"] == "POST /desktop/type_text" and act["params"]["text"] == "hello" and
         act["frame"] == typed["frame"] and act["frame"] >= act["frame_before"],
         "the action carries its route, parameters and frame ids", act)
    frames, ok = ev.until(lambda e: e[1] == "frame" and e[2]["frame"] >= typed["frame"] and
                          e[2]["rects"][0]["w"] > 0, 10)
    fr = [e for e in got + frames if e[1] == "frame"]
    t.ok(ok, "frame events follow the typed word", fr[-3:])
    ids = [e[0] for e in got + frames if e[0] is not None]
    t.ok(ids == sorted(ids) and len(set(ids)) == len(ids), "event ids increase")
    nums = [e[2]["frame"] for e in fr]
    t.ok(nums == sorted(nums), "frame ids increase", nums)
    r = fr[-1][2]["rects"][0]
    t.ok(win[0] - 2 <= r["x"] + r["w"] and r["x"] <= win[0] + win[2] and
         r["y"] <= win[1] + win[3], "the damaged rectangle touches the xterm", (r, win))

    # Redaction.
    d.ok("type_text", text="s3cret", sensitive=True)
    got, ok = ev.until(is_action("type_text"))
    t.ok(ok and got[-1][2]["params"]["text"] == "[redacted]",
         "typed text is redacted with \"sensitive\":true")
    r = d.post("actions", {"actions": [{"action": "key", "keys": "BackSpace"},
                                       {"action": "type_text", "text": "pw",
                                        "sensitive": True}]})
    t.eq(r.status, 200, "a batch runs")
    got, ok = ev.until(is_action("type_text"))
    names = [(e[2]["action"], e[2]["route"]) for e in got if e[1] == "action"]
    t.ok(ok and names == [("key", "POST /desktop/actions"),
                          ("type_text", "POST /desktop/actions")] and
         got[-1][2]["params"]["text"] == "[redacted]",
         "batch actions are logged one by one, redacted per action", names)
    r = d.post("anthropic", {"action": "key", "text": "BackSpace"})
    got, ok = ev.until(is_action("key"))
    t.ok(ok and got[-1][2]["route"] == "POST /desktop/anthropic",
         "adapter actions are logged with the adapter's route")

    # MCP tool calls pass the same place.
    mcp = "/v1/sandboxes/%s/mcp" % d.sid
    acc = {"Accept": "application/json, text/event-stream"}
    r = srv.request("POST", mcp, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                             "clientInfo": {"name": "t", "version": "1"}}},
                    headers=acc)
    mh = dict(acc, **{"Mcp-Session-Id": r.header("Mcp-Session-Id") or ""})
    r = srv.request("POST", mcp, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                  "params": {"name": "move", "arguments": {"x": 7, "y": 9}}},
                    headers=mh)
    got, ok = ev.until(is_action("move"))
    t.ok(ok and got[-1][2]["route"] == "POST /mcp" and got[-1][2]["params"] == {"x": 7, "y": 9},
         "an MCP tool call is logged with its route", got[-1:] if got else r.body[:200])
    srv.request("POST", "/v1/sandboxes/%s/desktop/takeover" % d.sid, {"ttl_s": 30})
    r = srv.request("POST", mcp, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                  "params": {"name": "move", "arguments": {"x": 8, "y": 9}}},
                    headers=mh)
    res = r.json().get("result", {}) if r.status == 200 else {}
    t.ok(res.get("isError") and "taken the desktop over" in json.dumps(res),
         "during a takeover an MCP tool call is a tool error saying so", r.body[:300])
    srv.request("DELETE", "/v1/sandboxes/%s/desktop/takeover" % d.sid)

    # Windows opening, retitled and closing.
    w = d.ok("launch", argv=["xterm", "-T", "obs-win", "-geometry", "20x3+600+20"],
             timeout_ms=15000)["window"]
    got, ok = ev.until(lambda e: e[1] == "window" and e[2]["change"] == "opened" and
                       e[2]["window"]["title"] == "obs-win", 10)
    t.ok(ok, "the stream shows the window opening")
    d.sh("xdotool set_window --name obs-renamed %d" % w["id"])
    got, ok = ev.until(lambda e: e[1] == "window" and e[2]["change"] == "retitled" and
                       e[2]["window"]["id"] == w["id"], 10)
    now = [x["title"] for x in d.get("windows").json()["windows"] if x["id"] == w["id"]]
    t.ok(ok and [got[-1][2]["window"]["title"]] == now and
         got[-1][2]["old_title"] == "obs-win", "a retitle is an event with the old title",
         [e for e in got if e[1] == "window"])
    srv.request("POST", "/v1/sandboxes/%s/desktop/windows/%d/close" % (d.sid, w["id"]), {})
    got, ok = ev.until(lambda e: e[1] == "window" and e[2]["change"] == "closed" and
                       e[2]["window"]["id"] == w["id"], 10)
    t.ok(ok, "and closing")
    # Later actions in this test look for their own events only.

    # Resume after a reconnect.
    last = max(e[0] for e in got if e[0] is not None)
    ev.close()
    d.ok("key", keys="Return")
    d.ok("move", x=5, y=5)
    ev2 = Events(srv, d.sid, last_id=last)
    got, ok = ev2.until(is_action("move"))
    ids = [e[0] for e in got if e[0] is not None]
    acts = [e[2]["action"] for e in got if e[1] == "action"]
    t.ok(ok and acts == ["key", "move"] and ids and min(ids) == last + 1 and
         ids == sorted(ids), "Last-Event-ID resumes with the events missed, in order",
         (last, ids[:5], acts))
    ev2.close()
    ev3 = Events(srv, d.sid, last_id=10 ** 9)
    got, ok = ev3.until(lambda e: e[1] == "reset", 5)
    t.ok(ok, "an id the backlog no longer holds gets a reset event")
    ev3.close()



def test_slow(t, d, srv):
    """A reader that stops reading while the backlog turns over is dropped
    with a final event when it reads again; actions never wait for it."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", srv.port))
    sock.sendall(("GET /v1/sandboxes/%s/desktop/events HTTP/1.1\r\nHost: x\r\n"
                  "Authorization: Bearer %s\r\n\r\n" % (d.sid, srv.token)).encode())
    t0 = time.monotonic()
    for b in range(80):
        r = d.post("actions", {"actions": [{"action": "move", "x": 10 + i, "y": 10 + b}
                                           for i in range(64)]})
        if r.status != 200:
            break
    took = time.monotonic() - t0
    t.ok(r.status == 200, "5120 logged actions ran while a reader was stalled (%.1f s)" % took)
    sock.settimeout(30)
    data = b""
    deadline = time.monotonic() + 60
    try:
        while b"event: dropped" not in data and time.monotonic() < deadline:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    t.ok(b"event: dropped" in data, "the stalled reader got a final dropped event (%d bytes)"
         % len(data))
    sock.close()


def viewer_click(srv, sid, token, x, y):
    ws = WS(srv.port, "/v1/sandboxes/%s/vnc/websockify?token=%s" % (sid, token))
    if ws.status != 101:
        return ws.status
    rfb_handshake(ws)
    ws.send_frame(struct.pack(">BBHH", 5, 0, x, y))
    ws.send_frame(struct.pack(">BBHH", 5, 1, x, y))
    ws.send_frame(struct.pack(">BBHH", 5, 0, x, y))
    return ws


def test_takeover(t, d, srv):
    log = "/tmp/xev-obs.log"
    win = start_xev(d, "Event Tester", "300x200+400+300", log)
    cx, cy = win[0] + 150, win[1] + 100
    ev = Events(srv, d.sid)
    ev.until(lambda e: e[1] == "ready", 10)
    base = "/v1/sandboxes/%s/desktop" % d.sid

    r = srv.request("POST", base + "/takeover", {"ttl_s": 0})
    t.eq(r.status, 400, "ttl_s 0 refused")
    r = srv.request("POST", base + "/takeover", {"ttl_s": 60, "by": "alice"})
    t.ok(r.status == 200 and r.json()["active"] and r.json()["by"] == "alice" and
         55 <= r.json()["ttl_left_ms"] / 1000 <= 60, "POST takeover gives the desktop away",
         r.body[:200])
    got, ok = ev.until(lambda e: e[1] == "takeover")
    t.ok(ok and got[-1][2]["active"], "the stream reports the takeover")
    g = srv.request("GET", base).json()
    t.ok(g.get("takeover", {}).get("active") is True and "width" in g,
         "GET desktop reports it", g)

    r = d.post("click", {"x": cx, "y": cy})
    t.ok(r.status == 423 and r.json()["error"]["code"] == "taken_over",
         "an agent click answers 423 taken_over", (r.status, r.body[:200]))
    r = d.post("actions", {"actions": [{"action": "click", "x": cx, "y": cy}]})
    t.eq(r.status, 423, "a batch too")
    r = d.post("anthropic", {"action": "left_click", "coordinate": [cx, cy]})
    body = json.dumps(r.json()) if r.status == 200 else ""
    t.ok(r.status == 200 and r.json().get("is_error") and "taken the desktop over" in body,
         "the Anthropic adapter answers a tool error the model can read", body[:300])
    r = d.post("openai", {"action": {"type": "click", "x": cx, "y": cy, "button": "left"}})
    t.ok(r.status == 200 and "taken the desktop over" in (r.header("X-Action-Error") or ""),
         "the OpenAI adapter too", (r.status, r.header("X-Action-Error")))
    t.eq(d.get("cursor").status, 200, "reads still work")
    time.sleep(0.3)  # nothing to wait for: refused clicks must not land
    presses = [e for e in wait_events(d, log, lambda e: False, 0.2) if e[0] == "ButtonPress"]
    t.eq(presses, [], "no refused click reached the application")

    tok = srv.request("POST", "/v1/sandboxes/%s/vnc/tokens" % d.sid, {"view_only": False})
    ws = viewer_click(srv, d.sid, tok.json()["token"], cx, cy)
    evs = wait_events(d, log, lambda e: any(x[0] == "ButtonPress" for x in e))
    t.ok(any(e[0] == "ButtonPress" and e[1] == 1 for e in evs),
         "a viewer's click through the viewer WebSocket works during the takeover")
    if hasattr(ws, "close"):
        ws.close()

    r = srv.request("DELETE", base + "/takeover")
    t.ok(r.status == 200 and r.json()["released"] and not r.json()["active"],
         "DELETE takeover releases it")
    got, ok = ev.until(lambda e: e[1] == "takeover")
    t.ok(ok and got[-1][2] == {"active": False, "reason": "released"}, "the stream says so")
    t.eq(d.post("click", {"x": cx, "y": cy}).status, 200, "agent clicks work again")
    r = srv.request("DELETE", base + "/takeover")
    t.ok(r.status == 200 and not r.json()["released"], "DELETE without one: released false")

    srv.request("POST", base + "/takeover", {"ttl_s": 1})
    t.eq(d.post("click", {"x": cx, "y": cy}).status, 423, "a short lease refuses")
    got, ok = ev.until(lambda e: e[1] == "takeover" and not e[2]["active"], 10)
    t.ok(ok and got[-1][2]["reason"] == "expired", "the lease's end is an event")
    t.eq(d.post("click", {"x": cx, "y": cy}).status, 200, "after the lease the agent clicks")
    # The viewer page's button: an interactive token takes over and gives
    # back, a view-only one only sees the state.
    vo = srv.request("POST", "/v1/sandboxes/%s/vnc/tokens" % d.sid, {"view_only": True}).json()
    page = srv.request("GET", "/v1/sandboxes/%s/vnc/?token=%s" % (d.sid, tok.json()["token"]),
                       token=None).body.decode()
    js = srv.request("GET", "/v1/sandboxes/%s/vnc/viewer.js?token=%s" % (d.sid, vo["token"]),
                     token=None).body.decode()
    t.ok('id="takeover"' in page and "takeoverState" in js, "the page has a takeover button")
    vt = "/v1/sandboxes/%s/vnc/takeover?token=" % d.sid
    r = srv.request("POST", vt + vo["token"], token=None)
    t.eq(r.status, 403, "a view-only viewer cannot take over")
    r = srv.request("POST", vt + tok.json()["token"], token=None)
    t.ok(r.status == 200 and r.json()["active"] and r.json()["by"] == "viewer",
         "a viewer with control takes over from the page", r.body[:200])
    r = srv.request("GET", vt + vo["token"], token=None)
    t.ok(r.status == 200 and r.json()["active"], "a view-only viewer sees it")
    t.eq(d.post("click", {"x": cx, "y": cy}).status, 423, "agent clicks are refused")
    r = srv.request("DELETE", vt + vo["token"], token=None)
    t.eq(r.status, 403, "a view-only viewer cannot give back")
    r = srv.request("DELETE", vt + tok.json()["token"], token=None)
    t.ok(r.status == 200 and not r.json()["active"], "the viewer gives it back")
    t.eq(srv.request("GET", vt + "ab" * 32, token=None).status, 401, "a wrong token: 401")
    t.eq(d.post("click", {"x": cx, "y": cy}).status, 200, "agent clicks work again")

    r = srv.request("POST", "/v1/sandboxes/%s/desktop/takeover" % ("0" * 32), {"ttl_s": 5})
    t.eq(r.status, 404, "takeover of an unknown sandbox: 404")
    ev.close()


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({"display": {"width": 1024, "height": 768}})["id"]
        d = Desk(srv, sid)
        warm_up(d)
        for name, fn in [("events", lambda: test_events(t, d, srv)),
                         ("slow", lambda: test_slow(t, d, srv)),
                         ("takeover", lambda: test_takeover(t, d, srv))]:
            try:
                fn()
            except Exception as ex:  # one broken step must not hide the rest
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
