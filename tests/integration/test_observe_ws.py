"""The events stream over a WebSocket (docs/observation.md): GET
…/desktop/events with an Upgrade, spoken by the tests' RFC 6455 client
(stdlib sockets, test_vnc.WS: it checks the handshake's accept key and
unmasks nothing, so the server's framing is checked too).  One text message
an event, {"id", "event", "data"} with the SSE form's data: ready first, a
window opening, the actions of a typed word and its frames after them, in
order, a takeover; ?last_event_id= resumes after a reconnect and an id the
backlog lost gets reset; a ping gets its pong; a reader that stalls while
the backlog turns over gets a final dropped event and a close frame; bad
handshakes are refused."""

import base64
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_actions import Desk, warm_up  # noqa: E402
from test_vnc import WS  # noqa: E402


class Stream:
    """An events WebSocket: next() gives (id, event, data) of each message."""

    def __init__(self, srv, sid, query="", headers=None):
        h = {"Authorization": "Bearer " + srv.token}
        h.update(headers or {})
        self.ws = WS(srv.port, "/v1/sandboxes/%s/desktop/events%s" % (sid, query),
                     protocols=None, headers=h)
        self.status = self.ws.status
        self.close_code = None
        self.pongs = []

    def next(self, timeout=20):
        self.ws.sock.settimeout(timeout)
        while True:
            op, p = self.ws.frame()
            if op == 1:
                m = json.loads(p)
                return m.get("id"), m["event"], m["data"]
            if op == 10:
                self.pongs.append(p)
            elif op == 8:
                self.close_code = struct.unpack(">H", p[:2])[0] if len(p) >= 2 else 1005
                raise EOFError("close %s" % self.close_code)

    def until(self, pred, timeout=20):
        got = []
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                ev = self.next(max(0.05, deadline - time.monotonic()))
                got.append(ev)
                if pred(ev):
                    return got, True
        except (socket.timeout, EOFError):
            pass
        return got, False

    def close(self):
        self.ws.sock.close()


def is_action(name):
    return lambda ev: ev[1] == "action" and ev[2]["action"] == name


def test_stream(t, d, srv):
    st = Stream(srv, d.sid, "?max_hz=30")
    t.ok(st.status == 101 and st.ws.accept_ok(), "GET desktop/events with an Upgrade: 101, "
         "a valid Sec-WebSocket-Accept", st.status)
    got, ok = st.until(lambda e: e[1] == "ready", 10)
    t.ok(ok and got[0][1] == "ready" and "takeover" in got[0][2] and got[0][0] is None,
         "the first message is ready (no id, the takeover state)", got[:1])

    w = d.ok("launch", argv=["xterm", "-T", "ws-term", "-geometry", "40x5+20+20"],
             timeout_ms=15000)["window"]
    got, ok = st.until(lambda e: e[1] == "window" and e[2]["change"] == "opened" and
                       e[2]["window"]["title"] == "ws-term", 10)
    t.ok(ok, "a window opening is a message")
    win = d.window("ws-term")
    d.settle(300)
    d.ok("click", x=win[0] + 50, y=win[1] + 20)
    typed = d.ok("type_text", text="hello")
    got, ok = st.until(is_action("type_text"))
    acts = [e[2]["action"] for e in got if e[1] == "action"]
    t.ok(ok and acts[-2:] == ["click", "type_text"] and
         got[-1][2]["params"]["text"] == "hello" and got[-1][2]["frame"] == typed["frame"],
         "the actions arrive in order with their parameters and frame ids", acts)
    frames, ok = st.until(lambda e: e[1] == "frame" and e[2]["frame"] >= typed["frame"] and
                          e[2]["rects"][0]["w"] > 0, 10)
    t.ok(ok, "frame messages follow the typed word", frames[-2:])
    every = got + frames
    ids = [e[0] for e in every if e[0] is not None]
    t.ok(ids == sorted(ids) and len(set(ids)) == len(ids) and
         all(e[0] is not None for e in every), "every event carries an id; ids increase")
    nums = [e[2]["frame"] for e in every if e[1] == "frame"]
    t.ok(nums == sorted(nums), "frame ids increase", nums)

    srv.request("POST", "/v1/sandboxes/%s/desktop/takeover" % d.sid, {"ttl_s": 30})
    got, ok = st.until(lambda e: e[1] == "takeover", 10)
    t.ok(ok and got[-1][2]["active"], "a takeover is a message")
    srv.request("DELETE", "/v1/sandboxes/%s/desktop/takeover" % d.sid)
    got, ok = st.until(lambda e: e[1] == "takeover", 10)
    t.ok(ok and not got[-1][2]["active"] and got[-1][2]["reason"] == "released",
         "and its release")

    st.ws.send_frame(b"are you there", op=9)
    got, _ = st.until(lambda e: False, 1.5)
    t.ok(b"are you there" in st.pongs, "a ping gets its pong", st.pongs)

    # Resume after a reconnect.
    last = max(e[0] for e in every + got if e[0] is not None)
    st.ws.send_frame(struct.pack(">H", 1000), op=8)
    code = st.ws.wait_close(5)
    t.eq(code, 1000, "a client's close is answered with a close")
    st.close()
    d.ok("key", keys="Return")
    d.ok("move", x=5, y=5)
    st2 = Stream(srv, d.sid, "?last_event_id=%d" % last)
    got, ok = st2.until(is_action("move"))
    ids = [e[0] for e in got if e[0] is not None]
    acts = [e[2]["action"] for e in got if e[1] == "action"]
    t.ok(ok and got[0][1] == "ready" and got[0][2]["after"] == last and
         acts == ["key", "move"] and ids and min(ids) == last + 1 and ids == sorted(ids),
         "?last_event_id= resumes with the events missed, in order", (last, ids[:5], acts))
    st2.close()
    st3 = Stream(srv, d.sid, "?last_event_id=%d" % 10 ** 9)
    got, ok = st3.until(lambda e: e[1] == "reset", 5)
    t.ok(ok, "an id the backlog no longer holds gets a reset message")
    st3.close()


def test_slow(t, d, srv):
    """A reader that stalls while the backlog turns over is dropped with a
    final message when it reads again, then a close; actions never wait."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", srv.port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(("GET /v1/sandboxes/%s/desktop/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                  "Sec-WebSocket-Key: %s\r\nAuthorization: Bearer %s\r\n\r\n"
                  % (d.sid, key, srv.token)).encode())
    t0 = time.monotonic()
    for b in range(80):
        r = d.post("actions", {"actions": [{"action": "move", "x": 10 + i, "y": 10 + b}
                                           for i in range(64)]})
        if r.status != 200:
            break
    took = time.monotonic() - t0
    t.ok(r.status == 200, "5120 logged actions ran while a reader was stalled (%.1f s)" % took)
    ws = WS.__new__(WS)
    ws.sock, ws.buf = sock, b""
    sock.settimeout(30)
    while b"\r\n\r\n" not in ws.buf:
        ws._recv()
    head, _, ws.buf = ws.buf.partition(b"\r\n\r\n")
    t.ok(head.startswith(b"HTTP/1.1 101"), "the stalled reader's handshake", head[:40])
    last, close, n = None, None, 0
    try:
        while close is None:
            op, p = ws.frame()
            if op == 1:
                last = json.loads(p)
                n += 1
            elif op == 8:
                close = struct.unpack(">H", p[:2])[0]
    except (socket.timeout, EOFError):
        pass
    t.ok(last and last["event"] == "dropped" and close == 1000,
         "the stalled reader got a final dropped message, then a close (%d messages)" % n,
         (last, close))
    sock.close()


def test_refused(t, d, srv):
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    sock.sendall(("GET /v1/sandboxes/%s/desktop/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 12\r\n"
                  "Sec-WebSocket-Key: %s\r\nAuthorization: Bearer %s\r\n\r\n"
                  % (d.sid, base64.b64encode(os.urandom(16)).decode(), srv.token)).encode())
    head = sock.recv(4096)
    t.ok(head.startswith(b"HTTP/1.1 400"), "Sec-WebSocket-Version other than 13: 400",
         head[:60])
    sock.close()
    bad = WS(srv.port, "/v1/sandboxes/%s/desktop/events" % d.sid, protocols=None)
    t.eq(bad.status, 401, "no API token: 401")
    bad.sock.close()
    bad = WS(srv.port, "/v1/sandboxes/nosuch/desktop/events", protocols=None,
             headers={"Authorization": "Bearer " + srv.token})
    t.eq(bad.status, 404, "an unknown sandbox: 404")
    bad.sock.close()
    bad = WS(srv.port, "/v1/sandboxes/%s/desktop/events?max_hz=0" % d.sid, protocols=None,
             headers={"Authorization": "Bearer " + srv.token})
    t.eq(bad.status, 400, "max_hz=0: 400")
    bad.sock.close()


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({"display": {"width": 1024, "height": 768}})["id"]
        d = Desk(srv, sid)
        warm_up(d)
        for name, fn in [("stream", lambda: test_stream(t, d, srv)),
                         ("slow", lambda: test_slow(t, d, srv)),
                         ("refused", lambda: test_refused(t, d, srv))]:
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
