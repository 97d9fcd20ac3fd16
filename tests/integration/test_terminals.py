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
sys.path.insert(0, os.path.dirname(__file__))
from test_vnc import WS  # noqa: E402


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


class Term:
    """A WebSocket client of a terminal: output collected as it comes."""

    def __init__(self, srv, sid, tid, token=None, query=""):
        path = "/v1/sandboxes/%s/terminals/%s/ws%s" % (sid, tid, query)
        headers = {} if token == "none" else {"Authorization": "Bearer " + (token or srv.token)}
        self.ws = WS(srv.port, path, protocols=None, headers=headers)
        self.status = self.ws.status
        self.out = b""
        self.exit_code = None
        self.close_code = None

    def send(self, data):
        self.ws.send_frame(data.encode() if isinstance(data, str) else data, op=2)

    def resize(self, cols, rows):
        self.ws.send_frame(json.dumps({"type": "resize", "cols": cols, "rows": rows}).encode(),
                           op=1)

    def pump(self, timeout=0.5):
        self.ws.sock.settimeout(timeout)
        try:
            op, p = self.ws.frame()
        except (OSError, EOFError):
            return False
        if op == 2:
            self.out += p
        elif op == 1:
            m = json.loads(p)
            if m.get("type") == "exit":
                self.exit_code = m["exit_code"]
        elif op == 9:
            self.ws.send_frame(p, op=10)
        elif op == 8:
            self.close_code = int.from_bytes(p[:2], "big") if len(p) >= 2 else 1005
            return False
        return True

    def wait_for(self, needle, timeout=30):
        needle = needle.encode() if isinstance(needle, str) else needle
        deadline = time.time() + timeout
        while needle not in self.out and time.time() < deadline:
            if not self.pump() and self.close_code is not None:
                break
        return needle in self.out

    def close(self):
        self.ws.close()


def host_pids(needle):
    """Host processes whose command line holds `needle`."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if needle.encode() in f.read().replace(b"\0", b" "):
                    out.append(int(d))
        except OSError:
            pass
    return out


def test_terminal(t, srv, sid):
    T = "/v1/sandboxes/%s/terminals" % sid
    r = srv.request("POST", T, {"cols": 120, "rows": 32, "cwd": "/tmp", "env": {"FOO": "bar"}})
    t.ok(r.status == 201 and r.json()["status"] == "running", "a terminal starts", r.body)
    tm = r.json()
    tid = tm["id"]
    t.eq((tm["cols"], tm["rows"], tm["command"]), (120, 32, "/bin/bash -l"),
         "its size and the default login shell")
    c = Term(srv, sid, tid)
    t.eq(c.status, 101, "its WebSocket opens with the API token")
    c.send("stty size; tput cols; tty; echo $FOO-$TERM-$(pwd)-$((6*7))\r")
    t.ok(c.wait_for("32 120\r\n120\r\n/dev/pts/"), "stty size and tput cols see 32x120 on a real pty",
         c.out[-400:])
    t.ok(c.wait_for("bar-xterm-256color-/tmp-42"), "env, TERM and cwd apply", c.out[-300:])
    c.resize(100, 40)
    c.send("stty size\r")
    t.ok(c.wait_for("40 100"), "a resize message reaches the tty", c.out[-300:])
    t.eq(srv.request("GET", "%s/%s" % (T, tid)).json()["cols"], 100, "GET shows the new size")
    c.send("top\r")
    t.ok(c.wait_for("load average"), "top runs full-screen", c.out[-300:])
    mark = len(c.out)
    c.send("q")
    deadline = time.time() + 30
    while b"$ " not in c.out[mark:] and time.time() < deadline:
        c.pump()
    t.ok(b"$ " in c.out[mark:], "top quits on q: the shell prompts again", c.out[mark:][-200:])
    c.send("echo top-done-$((1+1))\r")
    t.ok(c.wait_for("top-done-2"), "the shell runs commands again")

    # Reconnect: output made while nobody is attached is replayed.
    c.send("sleep 1; echo after-$((40+2))\r")
    c.wait_for("after-$((40+2))")
    before = srv.request("GET", "%s/%s" % (T, tid)).json()["output_bytes"]
    c.close()
    dbx.wait_until(lambda: srv.request("GET", "%s/%s" % (T, tid)).json()["attached"] == 0, 10)
    grew = dbx.wait_until(lambda: srv.request("GET", "%s/%s" % (T, tid)).json()["output_bytes"]
                          >= before + 10, timeout=30)
    t.ok(grew, "the terminal runs on with no client attached")
    c2 = Term(srv, sid, tid)
    c2.pump(2)
    t.ok(c2.wait_for("after-42", timeout=10) and b"stty size" in c2.out,
         "a reconnect replays the output it missed and what came before", c2.out[-300:])
    lst = srv.request("GET", T).json()["terminals"]
    t.ok([x["id"] for x in lst] == [tid] and lst[0]["attached"] == 1, "GET lists it, attached",
         lst)

    # DELETE ends the whole tree.
    c2.send("sleep 31337 & bash -c 'sleep 31338; true' &\r")
    t.ok(dbx.wait_until(lambda: host_pids("sleep 31337") and
                        host_pids("sleep 31338"), timeout=30),
         "the terminal's children run (seen from the host)")
    r = srv.request("DELETE", "%s/%s" % (T, tid))
    t.ok(r.status == 200 and r.json()["status"] == "exited", "DELETE ends it", r.body)
    t.eq(host_pids("sleep 31337") + host_pids("sleep 31338"), [],
         "no process of the terminal remains on the host")
    t.ok(c2.wait_for(b"\xff" * 64, timeout=5) is False and c2.close_code == 1000,
         "its client gets a close", c2.close_code)
    t.eq(srv.request("GET", "%s/%s" % (T, tid)).status, 404, "a deleted terminal is gone")

    # A program that exits: its code reaches the client and the record.
    tid = srv.request("POST", T, {"command": ["sh", "-c", "read x; echo got-$x; exit 3"]}).json()["id"]
    c = Term(srv, sid, tid)
    c.send("abc\r")
    ok = c.wait_for("got-abc")
    while c.pump(2):
        pass
    t.ok(ok and c.exit_code == 3 and c.close_code == 1000,
         "the program's exit code and a normal close", (c.exit_code, c.close_code, c.out))
    info = srv.request("GET", "%s/%s" % (T, tid)).json()
    t.eq((info["status"], info["exit_code"]), ("exited", 3), "the ended terminal stays listed")
    c = Term(srv, sid, tid)
    c.wait_for("got-abc", timeout=10)
    while c.pump(2):
        pass
    t.ok(b"got-abc" in c.out and c.exit_code == 3, "an ended terminal still replays its output",
         (c.status, c.out, c.exit_code, c.close_code))
    srv.request("DELETE", "%s/%s" % (T, tid))

    # The replay is bounded: the last 64 KiB, ending with the newest byte.
    tid = srv.request("POST", T, {"command": [
        "sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; echo; echo END; exec sleep 1000"]}
    ).json()["id"]
    t.ok(dbx.wait_until(lambda: srv.request("GET", "%s/%s" % (T, tid)).json()["output_bytes"]
                        >= 200006, timeout=30), "a terminal writes 200 KB with no client")
    c = Term(srv, sid, tid)
    t.ok(c.wait_for("END\r\n") and c.out.endswith(b"END\r\n") and len(c.out) == 65536 and
         c.out.startswith(b"x"), "a client attaching then gets exactly the last 64 KiB",
         len(c.out))
    c.close()
    srv.request("DELETE", "%s/%s" % (T, tid))
    return T


def test_terminal_errors(t, srv, sid, T):
    for bad, why in (({"cols": 0}, "cols 0"), ({"rows": 1001}, "rows 1001"),
                     ({"cols": "80"}, "cols a string"), ({"command": []}, "empty command"),
                     ({"command": "bash"}, "command a string"), ({"command": [1]}, "command [1]"),
                     ({"command": [""]}, "empty command[0]"), ({"cwd": "tmp"}, "relative cwd"),
                     ({"env": {"A=B": "x"}}, "bad env name"), ({"env": []}, "env an array")):
        r = srv.request("POST", T, bad)
        t.ok(r.status == 400 and r.json()["error"]["code"] == "invalid_argument",
             "400 for " + why, r.body[:200])
    r = srv.request("POST", T, "[1")
    t.eq(r.status, 400, "400 for malformed JSON")
    for m, p in (("GET", T + "/0123456789abcdef"), ("DELETE", T + "/0123456789abcdef"),
                 ("POST", T + "/0123456789abcdef/tokens")):
        r = srv.request(m, p, {} if m == "POST" else None)
        t.ok(r.status == 404 and r.json()["error"]["code"] == "not_found", "404: %s %s" % (m, p))
    r = srv.request("GET", "/v1/sandboxes/ffffffffffffffffffffffffffffffff/terminals")
    t.eq(r.status, 404, "404 for an unknown sandbox")
    c = Term(srv, sid, "0123456789abcdef")
    t.eq(c.status, 404, "the WebSocket of an unknown terminal is 404")
    r = srv.request("GET", T + "/x/ws")
    t.eq(r.status, 400, "400 for the WebSocket route without an upgrade")
    tid = srv.request("POST", T, {"command": ["cat"]}).json()["id"]
    other = srv.request("POST", T, {"command": ["cat"]}).json()["id"]
    c = Term(srv, sid, tid, token="none")
    t.eq(c.status, 401, "401 for the WebSocket without a token")
    tok = srv.request("POST", "%s/%s/tokens" % (T, tid), {"ttl_s": 600}).json()
    t.ok(tok["url"].endswith("/terminals/%s/?token=%s" % (tid, tok["token"])),
         "a terminal token comes with its page's URL")
    c = Term(srv, sid, other, token="none", query="?token=" + tok["token"])
    t.eq(c.status, 401, "a terminal's token does not open another terminal")
    r = srv.request("GET", "/v1/sandboxes/%s/vnc/?token=%s" % (sid, tok["token"]), token=None)
    t.eq(r.status, 401, "nor the desktop's viewer")
    vt = srv.request("POST", "/v1/sandboxes/%s/vnc/tokens" % sid, {}).json()["token"]
    r = srv.request("GET", "%s/%s/?token=%s" % (T, tid, vt), token=None)
    t.eq(r.status, 401, "the desktop's viewer token does not open a terminal page")
    r = srv.request("GET", "%s/%s/?token=%s" % (T, tid, tok["token"]), token=None)
    t.ok(r.status == 200 and b"xterm.js" in r.body, "the page opens with the terminal's token")
    r = srv.request("GET", "%s/%s/xterm.js" % (T, tid), token=None)
    t.ok(r.status == 200 and len(r.body) > 100000, "xterm.js is served, built in")
    r = srv.request("GET", "%s/%s/nope.js" % (T, tid), token=None)
    t.eq(r.status, 404, "404 for another file")
    # Revoking the token disconnects its clients; a view-only client's
    # input never reaches the program.
    vo = srv.request("POST", "%s/%s/tokens" % (T, tid), {"view_only": True}).json()["token"]
    w = Term(srv, sid, tid, token="none", query="?token=" + vo)
    w.send("typed-by-a-viewer\r")
    c = Term(srv, sid, tid, token="none", query="?token=" + tok["token"])
    t.eq(c.status, 101, "the WebSocket opens with the terminal's token")
    c.send("from-the-owner\r")
    t.ok(c.wait_for("from-the-owner\r\nfrom-the-owner") and w.wait_for("from-the-owner"),
         "cat echoes the owner's line; the view-only client sees it", c.out)
    t.ok(b"typed-by-a-viewer" not in c.out, "the view-only client's input was dropped", c.out)
    r = srv.request("DELETE", "/v1/sandboxes/%s/vnc/tokens/%s" % (sid, tok["token"]))
    t.eq(r.status, 204, "the terminal's token is revoked like a viewer token")
    while c.pump(5):
        pass
    t.eq(c.close_code, 1008, "revoking it closes its client (1008)")
    w.close()
    for x in (tid, other):
        srv.request("DELETE", "%s/%s" % (T, x))
    ids = []
    for i in range(16):
        r = srv.request("POST", T, {"command": ["sleep", "1000"]})
        if r.status == 201:
            ids.append(r.json()["id"])
    r = srv.request("POST", T, {"command": ["sleep", "1000"]})
    t.ok(len(ids) == 16 and r.status == 429, "at most 16 terminals per sandbox", r.body[:200])
    for x in ids:
        srv.request("DELETE", "%s/%s" % (T, x))


def test_sessions(t, srv, sid):
    S = "/v1/sandboxes/%s/sessions" % sid
    r = srv.request("POST", S, {"env": {"GREETING": "hello"}})
    t.ok(r.status == 201 and len(r.json()["id"]) == 16, "a session starts", r.body)
    ss = r.json()["id"]
    X = "%s/%s/exec" % (S, ss)

    def run(cmd, **kw):
        body = {"command": cmd}
        body.update(kw)
        return srv.request("POST", X, body)

    r = run("pwd; echo $GREETING").json()
    t.eq((r["stdout"], r["exit_code"]), ("/workspace\nhello\n", 0),
         "it starts in /workspace with its env")
    r = run("mkdir -p /tmp/sess/src && cd /tmp/sess/src && export FOO=bar && X=local").json()
    t.eq(r["exit_code"], 0, "cd and export")
    r = run("pwd; echo $FOO-$X; echo oops >&2; false").json()
    t.eq((r["stdout"], r["stderr"], r["exit_code"]), ("/tmp/sess/src\nbar-local\n", "oops\n", 1),
         "the next command keeps cwd, exported and shell variables; stderr and $? per command")
    r = run("f() { echo in-f-$1; }").json()
    r = run("f 7; printf 'no newline'").json()
    t.eq(r["stdout"], "in-f-7\nno newline", "functions persist; output without a newline")
    r = run("cat; echo after").json()
    t.eq(r["stdout"], "after\n", "a command's stdin is empty (it cannot eat the next request)")
    r = run("echo 'multi\nline'; echo $'a\\tb'\necho third").json()
    t.eq(r["stdout"], "multi\nline\na\tb\nthird\n", "multi-line commands and quoting arrive intact")
    r = run("head -c 3000000 /dev/zero | tr '\\0' x").json()
    t.ok(r["truncated"] and len(r["stdout"]) == 1 << 20 and r["exit_code"] == 0,
         "big output is capped and the session goes on", (r["truncated"], len(r["stdout"])))
    r = run("sleep 30", timeout_s=1).json()
    t.ok(r["timed_out"] and r["session_restarted"] and r["exit_code"] == -1,
         "a command past its timeout restarts the session", r)
    r = run("pwd").json()
    t.eq((r["stdout"], r["session_restarted"]), ("/workspace\n", False),
         "the restarted session is fresh and works")
    r = run("exit 5").json()
    t.ok(r["session_restarted"] and "exited" in r["stderr"], "exit ends the shell: restarted", r)
    r = run("echo alive").json()
    t.eq(r["stdout"], "alive\n", "and the next command runs")
    import threading
    slow = {}
    th = threading.Thread(target=lambda: slow.update(r=run("sleep 3; echo slow-done").json()))
    th.start()
    busy = dbx.wait_until(lambda: srv.request("GET", S).json()["sessions"][0]["busy"], 10)
    r = run("echo second")
    th.join()
    t.ok(busy and r.status == 409 and r.json()["error"]["code"] == "conflict" and
         slow["r"]["stdout"] == "slow-done\n", "a second command while one runs is 409", r.body)
    lst = srv.request("GET", S).json()["sessions"]
    t.ok([x["id"] for x in lst] == [ss] and lst[0]["commands"] >= 10, "GET lists it", lst)

    run("sleep 41414 &")
    t.ok(dbx.wait_until(lambda: host_pids("sleep 41414"), timeout=20), "a background job runs")
    r = srv.request("DELETE", "%s/%s" % (S, ss))
    t.eq(r.status, 204, "DELETE ends the session")
    t.ok(dbx.wait_until(lambda: not host_pids("sleep 41414"), timeout=10),
         "its background job is gone too (seen from the host)")
    t.eq(run("true").status, 404, "a deleted session is 404")
    for body, why in (({}, "no command"), ({"command": ""}, "empty command"),
                      ({"command": 5}, "command a number"),
                      ({"command": "true", "timeout_s": 0}, "timeout 0")):
        r = srv.request("POST", "%s/%s/exec" % (S, "0123456789abcdef"), body)
        t.ok(r.status == 400 and r.json()["error"]["code"] == "invalid_argument",
             "400 for " + why, r.body[:200])
    r = srv.request("POST", S, {"cwd": "rel"})
    t.eq(r.status, 400, "400 for a relative cwd")
    r = srv.request("POST", "%s/%s/exec" % (S, "0123456789abcdef"), {"command": "true"})
    t.eq(r.status, 404, "404 for an unknown session")


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create()["id"]
        test_stdin(t, srv, sid)
        T = test_terminal(t, srv, sid)
        test_terminal_errors(t, srv, sid, T)
        test_sessions(t, srv, sid)
        # A deleted sandbox takes its terminals and sessions along.
        sid2 = srv.create()["id"]
        srv.request("POST", "/v1/sandboxes/%s/terminals" % sid2, {"command": ["sleep", "52525"]})
        ss = srv.request("POST", "/v1/sandboxes/%s/sessions" % sid2, {}).json()["id"]
        srv.request("POST", "/v1/sandboxes/%s/sessions/%s/exec" % (sid2, ss),
                    {"command": "sleep 53535 &"})
        t.ok(dbx.wait_until(lambda: host_pids("sleep 52525") and host_pids("sleep 53535"), 20),
             "a second sandbox's terminal and session run")
        t.eq(srv.request("DELETE", "/v1/sandboxes/" + sid2).status, 204, "the sandbox is deleted")
        t.eq(host_pids("sleep 52525") + host_pids("sleep 53535"), [],
             "nothing of its terminal or session remains")
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
