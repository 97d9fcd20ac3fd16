"""Typing never stalls the bridge: 20 type_text requests of 2000 characters
each into an echoing xterm (every line scrolls the terminal, so the VNC
server sends large updates while the keys are still being written), with
screenshots taken in parallel and two busy loops in the sandbox, repeated.
Every request must answer 200 (never the 504 "the capture bridge did not
take input") and the exact text must arrive in the file `cat` writes.
Prints the time each round took and the request latencies.

STRESS_ROUNDS (default 2) sets how many rounds run."""

import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

CHUNKS, CHUNK_CHARS = 20, 2000
# As in test_actions' throughput: ASCII, Latin-1 and characters the keymap
# lacks (the VNC server binds those to spare keycodes).
LINE = "The quick brown fox jumps over the lazy dog 0123456789 h\u00e9llo \u2713 \u4f60\u597d\n"


def chunk_text(i):
    text = ""
    n = 0
    while len(text) < CHUNK_CHARS:
        text += "%02d.%03d %s" % (i, n, LINE)
        n += 1
    return text[:CHUNK_CHARS - 1] + "\n"


class Shooter(threading.Thread):
    """Takes screenshots until told to stop; counts them and the failures."""

    def __init__(self, srv, sid):
        super().__init__(daemon=True)
        self.srv, self.sid = srv, sid
        self.stop = threading.Event()
        self.ok = self.bad = 0

    def run(self):
        while not self.stop.is_set():
            try:
                r = self.srv.request("GET", "/v1/sandboxes/%s/desktop/screenshot" % self.sid,
                                     timeout=30)
                if r.status == 200:
                    self.ok += 1
                else:
                    self.bad += 1
            except Exception:
                self.bad += 1


def window(srv, sid, name, timeout=20):
    def find():
        out = srv.exec(sid, ["sh", "-c", "xwininfo -name '%s' 2>/dev/null" % name])["stdout"]
        return "IsViewable" in out
    return dbx.wait_until(find, timeout=timeout, interval=0.1)


def file_text(srv, sid, path):
    return srv.exec(sid, ["sh", "-c", "cat %s 2>/dev/null" % path])["stdout"]


def one_round(t, srv, sid, rnd):
    path = "/tmp/stress-%d.txt" % rnd
    title = "stress%d" % rnd
    r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid,
                    {"argv": ["sh", "-c", "exec xterm -u8 -fn 6x13 -T %s -geometry 100x30+20+20 "
                              "-e sh -c 'exec cat > %s'" % (title, path)],
                     "background": True})
    if r.status != 200 or not window(srv, sid, title):
        t.ok(False, "round %d: the xterm appeared" % rnd)
        return None
    srv.post(sid, "wait", {"until": "stable", "quiet_ms": 300, "timeout_ms": 5000})
    srv.post(sid, "click", {"x": 200, "y": 100})
    shooter = Shooter(srv, sid)
    shooter.start()
    want, statuses, lat = "", [], []
    t0 = time.monotonic()
    for i in range(CHUNKS):
        text = chunk_text(i)
        want += text
        s = time.monotonic()
        r = srv.post(sid, "type_text", {"text": text})
        lat.append(time.monotonic() - s)
        statuses.append(r.status)
        if r.status != 200:
            t.diag("round %d chunk %d: %d %s" % (rnd, i, r.status, r.body[:200]))
    got = dbx.wait_until(lambda: (lambda s: s if len(s) >= len(want) else None)(
        file_text(srv, sid, path)), timeout=60, interval=0.3)
    elapsed = time.monotonic() - t0
    shooter.stop.set()
    shooter.join(timeout=40)
    srv.post(sid, "key", {"keys": "ctrl+d"})
    t.ok(all(s == 200 for s in statuses),
         "round %d: all %d type_text requests answered 200 (%s)"
         % (rnd, CHUNKS, sorted(set(statuses))))
    t.ok(got == want, "round %d: the %d characters arrived exactly (%d received)"
         % (rnd, len(want), len(got or "")))
    if got and got != want:
        at = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
                  min(len(got), len(want)))
        t.diag("first difference at %d: got %r want %r" % (at, got[at:at + 40], want[at:at + 40]))
    t.ok(shooter.ok > 0 and shooter.bad == 0,
         "round %d: %d screenshots in parallel, %d failed" % (rnd, shooter.ok, shooter.bad))
    t.diag("round %d: %d chars in %.1f s (%.0f chars/s); type_text latency median %.2f s, "
           "max %.2f s; %d screenshots" % (rnd, len(want), elapsed, len(want) / elapsed,
                                          statistics.median(lat), max(lat), shooter.ok))
    return elapsed


def main():
    dbx.require_root_and_tools()
    for tool in ("xterm", "xwininfo"):
        if not dbx.shutil.which(tool):
            dbx.skip_all("%s is not installed" % tool)
    rounds = int(os.environ.get("STRESS_ROUNDS", "2"))
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({})["id"]
        # Two busy loops compete with the sandbox's X server, VNC server
        # and xterm for the machine's cores.
        for _ in range(2):
            srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid,
                        {"argv": ["sh", "-c", "while :; do :; done"], "background": True})
        times = []
        for rnd in range(rounds):
            el = one_round(t, srv, sid, rnd)
            if el is not None:
                times.append(el)
        if times:
            t.diag("stress: %d rounds, %.1f s in all" % (len(times), sum(times)))
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly on SIGTERM")
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
