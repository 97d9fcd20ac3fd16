"""Terminals and live VNC viewers of a VM sandbox (docs/isolation.md,
docs/terminals.md, docs/vnc.md): the same routes and JSON as for a
container.  One VM is booted; then: a terminal with a login shell on a pty
of the guest (stty size, tty, TERM), typed Unicode echoed exactly, raw
control bytes reaching the program unchanged, a resize seen by stty,
Ctrl-C interrupting sleep with SIGINT, the exit code at the end, two
terminals at once, a DELETE ending what the shell started in the guest;
then live viewers through …/vnc/websockify (an RFB handshake and a frame
while the mirror keeps taking screenshots, one port each, 503 naming it
when all are taken, a port free again once its viewer leaves); then the
keystroke echo round trip in the VM and in a container; last, a stop of
the sandbox ends its terminal."""

import glob
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402
sys.path.insert(0, os.path.dirname(__file__))
from test_terminals import Term, host_pids  # noqa: E402
from test_vnc import WS, fbur, rfb_handshake, wait_fbu  # noqa: E402

VIEWER_PORTS = 4  # RUNTIME_VM_VIEWER_PORTS


def code_of(r):
    try:
        return r.json()["error"]["code"]
    except Exception:
        return None


def guest_alive(srv, sid, pattern):
    """Guest processes whose command line matches `pattern` (pgrep -f)."""
    r = srv.exec(sid, ["sh", "-c", "pgrep -f '%s' || true" % pattern])
    return r["stdout"].split()


def drain(c, timeout=30):
    """Reads until the server closes the WebSocket."""
    deadline = time.time() + timeout
    while time.time() < deadline and c.pump(2):
        pass
    return c.close_code


def terminal_checks(t, srv, sid):
    T = "/v1/sandboxes/%s/terminals" % sid
    r = srv.request("POST", T, {"cols": 120, "rows": 32, "cwd": "/tmp",
                                "env": {"FOO": "bar"}})
    t.ok(r.status == 201 and r.json().get("status") == "running",
         "a terminal starts in the VM (201, running)", (r.status, r.body[:300]))
    if r.status != 201:
        return None
    tm = r.json()
    tid = tm["id"]
    t.eq((tm["cols"], tm["rows"], tm["command"]), (120, 32, "/bin/bash -l"),
         "its size and the default login shell, as for a container")
    c = Term(srv, sid, tid)
    t.eq(c.status, 101, "its WebSocket opens with the API token")
    c.send("stty size; tty; echo $FOO-$TERM-$(pwd)-$(id -u)-$((6*7)); echo pid=$$\r")
    t.ok(c.wait_for("32 120\r\n/dev/pts/", timeout=60),
         "stty size sees 32x120 on a pty of the guest", c.out[-400:])
    t.ok(c.wait_for("bar-xterm-256color-/tmp-1000-42", timeout=30),
         "env, TERM, cwd and the image's user apply", c.out[-300:])
    t.ok(isinstance(tm.get("pid"), int) and tm["pid"] > 1 and
         c.wait_for("pid=%s\r\n" % tm.get("pid"), timeout=30),
         "its pid (%s) is the shell's in the guest" % tm.get("pid"), c.out[-200:])
    kernel = srv.exec(sid, ["uname", "-r"])["stdout"].strip()
    c.send("uname -r\r")
    t.ok(kernel != os.uname().release and c.wait_for(kernel + "\r\n", timeout=30),
         "the shell runs in the guest (its kernel %s)" % kernel, c.out[-200:])

    text = "h\u00e9llo w\u00f6rld \u2713 \u00c4\u00d6\u00dc\u00df \u65e5\u672c\u8a9e \U0001f600"
    c.send("echo U:" + text + "\r")
    # Between the echoed line and the output bash ends its bracketed-paste
    # mode (ESC [ ? 2004 l, CR).
    t.ok(c.wait_for(("echo U:" + text + "\r\n").encode(), timeout=30) and
         c.wait_for(("\rU:" + text + "\r\n").encode(), timeout=30),
         "typed Unicode is echoed and printed exactly", c.out[-300:])
    # Raw bytes: the host's side passes every byte unchanged, the guest's
    # pty (in raw mode here) hands them to the program.
    c.send("stty raw -echo; head -c 6 | od -An -tx1; stty sane\r")
    t.ok(dbx.wait_until(lambda: guest_alive(srv, sid, "^head -c 6"), timeout=30, interval=0.3),
         "a program reading raw bytes runs")
    c.send(b"\x01\x1b\x7f\x04\xc3\xa9")
    t.ok(c.wait_for("01 1b 7f 04 c3 a9", timeout=30),
         "control keys (^A, Esc, DEL, ^D) and UTF-8 reach it byte for byte", c.out[-300:])

    # The echo is the guest's alone (the host's pty is raw): with
    # stty -echo in the guest nothing typed comes back.
    c.send("stty -echo; echo armed; read x; stty echo; echo got-$x\r")
    c.wait_for("armed\r\n", timeout=30)
    mark = len(c.out)
    c.send("s3cret\r")
    # (what comes back is the program's "got-s3cret" line and nothing else
    # with the word: an echo would be "s3cret" before it)
    t.ok(c.wait_for("got-s3cret", timeout=30) and
         b"s3cret" not in c.out[mark:].replace(b"got-s3cret", b""),
         "with stty -echo in the guest the typed line is not echoed", c.out[mark:][-200:])
    c.resize(100, 40)
    c.send("stty size\r")
    t.ok(c.wait_for("40 100\r\n", timeout=30), "a resize reaches the guest's tty (stty size)",
         c.out[-300:])
    t.eq(srv.request("GET", "%s/%s" % (T, tid)).json().get("cols"), 100,
         "GET shows the new size")
    c.send("trap 'echo winch-seen' WINCH; sleep 600 & wait; echo waited\r")
    dbx.wait_until(lambda: guest_alive(srv, sid, "^sleep 600"), timeout=30, interval=0.3)
    c.resize(90, 30)
    t.ok(c.wait_for("winch-seen", timeout=30), "the shell gets SIGWINCH at a resize",
         c.out[-300:])
    srv.exec(sid, ["pkill", "-f", "^sleep 600"])
    c.wait_for("waited", timeout=30)

    c.send("sleep 1000\r")
    running = dbx.wait_until(lambda: guest_alive(srv, sid, "^sleep 1000"), timeout=30,
                             interval=0.3)
    t.ok(running, "sleep runs in the guest")
    c.send(b"\x03")
    # bash drops the rest of the line when its foreground job dies of
    # SIGINT: $? is asked for on the next one.
    c.send("echo rc=$?\r")
    t.ok(c.wait_for("rc=130", timeout=30), "Ctrl-C interrupts it with SIGINT (status 130)",
         c.out[-300:])
    t.eq(guest_alive(srv, sid, "^sleep 1000"), [], "and the sleep is gone from the guest")

    # A long paste into a program whose terminal echoes it: input and
    # output flow at once (the echo of 200 KB is more than the pty holds).
    r3 = srv.request("POST", T, {"command": ["sh", "-c", "stty raw; echo armed; head -c 200000"
                                             " >/dev/null; stty sane; echo; echo pasted-$((1+1))"]})
    p = Term(srv, sid, r3.json()["id"]) if r3.status == 201 else None
    if p:
        p.wait_for("armed", timeout=30)  # in raw mode: no line limit
        for _ in range(25):
            p.send(b"x" * 8000)
        # The tty drops echoes it cannot write at once (n_tty's echo ring),
        # so not every x comes back; more than a pty holds (64 KiB) does.
        t.ok(p.wait_for("pasted-2", timeout=120) and p.out.count(b"x") > 65536,
             "a 200 KB paste with its echo: the program reads all of it while the echo "
             "flows (%d bytes of it)" % p.out.count(b"x"), p.out[-100:])
        t.eq(drain(p), 1000, "and the program ends")
    # Two at once: each gets its own input and output.
    r2 = srv.request("POST", T, {"command": ["sh", "-c", "read x; echo second-got-$x; exit 4"]})
    t.eq(r2.status, 201, "a second terminal starts while the first runs")
    c2 = Term(srv, sid, r2.json()["id"]) if r2.status == 201 else None
    if c2:
        c2.send("zwei\r")
        c.send("echo first-$((2+2))\r")
        t.ok(c2.wait_for("second-got-zwei", timeout=30) and c.wait_for("first-4", timeout=30),
             "two terminals at once: each answers its own input",
             (c.out[-200:], c2.out[-200:]))
        t.ok(b"second-got" not in c.out and b"first-4" not in c2.out,
             "and neither sees the other's output")
        t.ok(drain(c2) == 1000 and c2.exit_code == 4,
             "the second ends with its exit code (4) and a normal close",
             (c2.exit_code, c2.close_code))
        lst = srv.request("GET", T).json().get("terminals", [])
        t.eq(sorted(x["status"] for x in lst if x["id"] in (tid, r2.json()["id"])),
             ["exited", "running"], "GET lists both, one exited")

    # DELETE ends what the shell started, in the guest too.
    c.send("sleep 31337 & setsid sleep 31338 & echo started\r")
    c.wait_for("started", timeout=30)
    t.ok(dbx.wait_until(lambda: len(guest_alive(srv, sid, "^sleep 3133[78]")) == 2, timeout=30,
                        interval=0.3), "the shell's jobs run in the guest")
    r = srv.request("DELETE", "%s/%s" % (T, tid))
    t.ok(r.status == 200 and r.json().get("status") == "exited", "DELETE ends the terminal",
         r.body[:200])
    # setsid's sleep left the session: only the shell's own job is the
    # terminal's (a container's cgroup would take both).
    gone = dbx.wait_until(lambda: not guest_alive(srv, sid, "^sleep 31337"), timeout=20,
                          interval=0.5)
    t.ok(gone, "the shell's job is gone from the guest", guest_alive(srv, sid, "^sleep 31337"))
    srv.exec(sid, ["pkill", "-f", "^sleep 31338"])
    t.eq(drain(c, 10), 1000, "its client gets a close")

    # The program's exit code reaches the client and the record.
    r = srv.request("POST", T, {})
    c = Term(srv, sid, r.json()["id"])
    c.send("exit 7\r")
    t.ok(drain(c) == 1000 and c.exit_code == 7, "exit 7 in the shell: exit code 7 and a close",
         (c.exit_code, c.close_code, c.out[-200:]))
    info = srv.request("GET", "%s/%s" % (T, r.json()["id"])).json()
    t.eq((info.get("status"), info.get("exit_code")), ("exited", 7), "the record says so")
    return T


def handshake(ws, timeout=60):
    """rfb_handshake and a first frame within `timeout` seconds in all (the
    server's pings would keep a socket timeout from ever firing)."""
    timer = threading.Timer(timeout, ws.close)
    timer.start()
    try:
        ws.sock.settimeout(timeout)
        w, h = rfb_handshake(ws)
        ws.send_frame(fbur(w, h))
        return w, h, wait_fbu(ws, timeout=timeout)
    except (OSError, EOFError, AssertionError) as ex:
        return ex, None, None
    finally:
        timer.cancel()


def viewer_ws(srv, sid, tok):
    return WS(srv.port, "/v1/sandboxes/%s/vnc/websockify?token=%s" % (sid, tok))


def viewer_checks(t, srv, sid):
    base = "/v1/sandboxes/" + sid
    tok = srv.request("POST", base + "/vnc/tokens", {}).json().get("token")
    shots = []

    def shot():
        png = srv.screenshot(sid)
        shots.append(dbx.png_info(png)[:2] == (1280, 800))

    views = []
    for i in range(VIEWER_PORTS):
        ws = viewer_ws(srv, sid, tok)
        views.append(ws)
        if ws.status != 101:
            t.ok(False, "viewer %d: the WebSocket opens" % i, (ws.status, ws.buf[:300]))
            continue
        shot()
        w, h, got = handshake(ws)
        shot()
        t.ok((w, h, got) == (1280, 800, True),
             "viewer %d of the VM: RFB handshake (1280x800) and a frame" % (i + 1), (w, h, got))
    t.ok(shots and all(shots), "the mirror kept taking screenshots meanwhile (%d)" % len(shots))
    ws = viewer_ws(srv, sid, tok)
    body = ws.raw_after_headers()
    t.ok(ws.status == 503 and b"unavailable" in body and b"viewer" in body and
         b"%d" % VIEWER_PORTS in body,
         "one more viewer than the VM has ports: 503 unavailable naming it",
         (ws.status, body[:300]))
    ws.close()
    views[0].close()

    def again():
        w = viewer_ws(srv, sid, tok)
        if w.status == 101:
            return w
        w.close()
        return None
    ws = dbx.wait_until(again, timeout=20, interval=0.2)
    ok = ws and handshake(ws) == (1280, 800, True)
    t.ok(ok, "once a viewer leaves, its port serves the next one")
    # A port closed and taken again at once, over and over: the guest may
    # see the close and the next connect as one.
    quick = []
    for _ in range(3):
        if ws:
            ws.close()
        ws = dbx.wait_until(again, timeout=20, interval=0.05)
        quick.append(bool(ws) and handshake(ws) == (1280, 800, True))
    t.eq(quick, [True] * 3, "a viewer port closed and taken again at once, 3 times: "
         "each new viewer gets its own RFB session")
    for v in views[1:] + ([ws] if ws else []):
        v.close()
    shot()
    t.ok(shots[-1], "and the mirror still answers after the viewers left")


def echo_rtt(srv, sid, n=20):
    """Median of n keystroke echo round trips (a letter typed into bash,
    until its echo comes back) in ms."""
    T = "/v1/sandboxes/%s/terminals" % sid
    r = srv.request("POST", T, {})
    c = Term(srv, sid, r.json()["id"])
    c.send("echo ready-$((3*3))\r")
    c.wait_for("ready-9", timeout=60)
    deadline = time.monotonic() + 30
    while not c.out.endswith(b"$ ") and time.monotonic() < deadline:
        c.pump(1)  # the prompt after it
    times = []
    for i in range(n):
        ch = b"abcdefghij"[i % 10:i % 10 + 1]
        mark = len(c.out)
        t0 = time.monotonic()
        c.send(ch)
        # readline echoes the letter alone
        while c.out[mark:] != ch and time.monotonic() - t0 < 10:
            c.pump(1)
        times.append((time.monotonic() - t0) * 1000)
    c.send(b"\x15exit\r")
    drain(c, 10)
    srv.request("DELETE", "%s/%s" % (T, r.json()["id"]))
    return sorted(times)[n // 2]


def stop_checks(t, srv, sid):
    T = "/v1/sandboxes/%s/terminals" % sid
    r = srv.request("POST", T, {"command": ["sleep", "4242"]})
    tid = r.json()["id"]
    c = Term(srv, sid, tid)
    def clients():
        return [p for p in host_pids("vm-exec") if p in host_pids("4242")]
    before = dbx.wait_until(clients, timeout=10)
    t.ok(before, "the terminal's exec client runs on the host", before)
    r = srv.request("POST", "/v1/sandboxes/%s/stop" % sid, timeout=60)
    t.ok(r.status == 200 and r.json().get("status") == "stopped", "the VM sandbox stops",
         r.body[:200])
    t.eq(drain(c, 20), 1000, "its terminal's client gets a close")
    info = srv.request("GET", "%s/%s" % (T, tid))
    t.ok(info.status == 404 or info.json().get("status") == "exited",
         "the terminal is ended with the sandbox", info.body[:200])
    t.ok(dbx.wait_until(lambda: not clients(), timeout=10), "no exec client is left on the host",
         clients())


def boot_vm(t, srv):
    """A VM sandbox's id, or None (a skip or a failure said why).  Its
    console is copied while it boots, to show why when it does not."""
    console, done = [b""], threading.Event()

    def copy():
        while not done.wait(0.5):
            for d in glob.glob(srv.ns_path("sandboxes", "*", "init.log")):
                try:
                    with open(d, "rb") as f:
                        console[0] = f.read()
                except OSError:
                    pass
    threading.Thread(target=copy, daemon=True).start()
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/sandboxes", {"isolation": "vm"}, timeout=400)
    done.set()
    body = r.body.decode(errors="replace")
    if r.status == 501 and ("make vm" in body or "/dev/kvm" in body):
        t.skip("the VM terminal checks", "this host cannot run a VM: %s" % body[:200])
        return None
    lines = [ln for ln in console[0].decode(errors="replace").splitlines()
             if "deskbox" in ln or "panic" in ln]
    t.ok(r.status == 201 and r.json().get("isolation") == "vm",
         "a VM sandbox boots (%.1f s)" % (time.monotonic() - t0),
         "%s %s\n%s" % (r.status, body[:300], "\n".join(lines[-12:])))
    return r.json()["id"] if r.status == 201 else None


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        box = srv.create()["id"]
        sid = boot_vm(t, srv)
        if sid:
            terminal_checks(t, srv, sid)
            viewer_checks(t, srv, sid)
            vm_ms = echo_rtt(srv, sid)
            box_ms = echo_rtt(srv, box)
            t.diag("terminal keystroke echo round trip, median of 20: VM %.1f ms, "
                   "container %.1f ms" % (vm_ms, box_ms))
            t.ok(vm_ms < 2000 and box_ms < 2000, "keystrokes echo in both (VM %.1f ms, "
                 "container %.1f ms)" % (vm_ms, box_ms))
            stop_checks(t, srv, sid)
            r = srv.request("DELETE", "/v1/sandboxes/" + sid, timeout=120)
            t.ok(r.status in (200, 204), "the VM sandbox deletes", r.body[:200])
    finally:
        dbx.stop_servers(t, [srv], srv.state_dir)
    t.done()


if __name__ == "__main__":
    main()
