"""Watching a directory through the files API against a real deskboxd and
sandbox: the Server-Sent Events stream sees create, modify, move and delete
in order (made by programs inside the sandbox and by the API), follows new
subdirectories with recursive=1 and not without, reports an overflow
instead of growing, frees its inotify instance when the client goes, and
ends when the sandbox stops."""

import http.client
import json
import os
import queue
import sys
import threading
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def q(s):
    return urllib.parse.quote(s, safe="")


class Watch:
    """An open watch stream; events go to a queue as (name, data)."""

    def __init__(self, srv, sid, path, recursive=False):
        self.conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        self.conn.request("GET", "/v1/sandboxes/%s/files/watch?path=%s&recursive=%d" %
                          (sid, q(path), 1 if recursive else 0),
                          headers={"Authorization": "Bearer " + srv.token})
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.events = queue.Queue()
        self.ended = threading.Event()
        self.reading = threading.Event()
        self.reading.set()
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        name, data = None, None
        try:
            for raw in self.resp:
                self.reading.wait()
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                elif line == "" and name:
                    self.events.put((name, data))
                    name, data = None, None
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            # AttributeError: http.client once close() took the socket.
            pass
        self.ended.set()

    def until(self, pred, timeout=30):
        """Events up to and including the first for which pred is true."""
        got = []
        while True:
            try:
                ev = self.events.get(timeout=timeout)
            except queue.Empty:
                return got, False
            got.append(ev)
            if pred(ev):
                return got, True

    def close(self):
        self.conn.close()


def simplify(events):
    """(type, path or from->to) with repeated modifies of one file merged."""
    out = []
    for name, d in events:
        if name in ("ready", "overflow", "end"):
            continue
        item = (d["type"], d.get("path") or "%s->%s" % (d["from"], d["to"]))
        if out and item == out[-1] and d["type"] == "modify":
            continue
        out.append(item)
    return out


def inotify_count(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:inotify":
                n += 1
        except OSError:
            pass
    return n


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create()["id"]
        sh = lambda cmd: srv.exec(sid, ["sh", "-c", cmd])  # noqa: E731
        sh("mkdir -p /workspace/w/sub")
        base_inotify = inotify_count(srv.proc.pid)

        w = Watch(srv, sid, "/workspace/w")
        t.eq(w.status, 200, "watch answers 200")
        got, ok = w.until(lambda e: e[0] == "ready")
        t.ok(ok and got[-1][1]["path"] == "/workspace/w", "the first event is ready")
        t.ok(inotify_count(srv.proc.pid) == base_inotify + 1, "one inotify instance")
        sh("echo a > /workspace/w/f; echo b >> /workspace/w/f; mv /workspace/w/f /workspace/w/g;"
           " rm /workspace/w/g")
        got, ok = w.until(lambda e: e[0] == "delete")
        t.eq(simplify(got), [("create", "/workspace/w/f"), ("modify", "/workspace/w/f"),
                             ("move", "/workspace/w/f->/workspace/w/g"),
                             ("delete", "/workspace/w/g")],
             "create, modify, move, delete in order (from programs in the sandbox)")
        r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=%s" %
                        (sid, q("/workspace/w/up.txt")), b"via api")
        t.eq(r.status, 201, "an upload into the watched directory")
        got, ok = w.until(lambda e: e[0] == "move")
        moves = [d for n, d in got if n == "move"]
        t.ok(ok and moves[-1]["to"] == "/workspace/w/up.txt",
             "the upload shows as its temporary file moved onto the name: %s" % moves)
        sh("echo x > /workspace/w/sub/not-seen; mkdir /workspace/w/d2")
        got, ok = w.until(lambda e: e[0] == "create" and e[1]["path"] == "/workspace/w/d2")
        t.ok(ok and not any("not-seen" in json.dumps(d) for _, d in got),
             "without recursive=1 only the directory itself is watched")
        t.ok(got[-1][1]["dir"] is True, "a directory's events say dir: true")
        w.close()
        t.ok(dbx.wait_until(lambda: inotify_count(srv.proc.pid) == base_inotify, timeout=30),
             "the client going away frees the inotify instance")

        w = Watch(srv, sid, "/workspace/w", recursive=True)
        w.until(lambda e: e[0] == "ready")
        sh("echo x > /workspace/w/sub/seen; mkdir -p /workspace/w/new/deeper;"
           " touch /workspace/w/new/deeper/file")
        got, ok = w.until(lambda e: e[0] == "create" and
                          e[1]["path"] == "/workspace/w/new/deeper/file")
        t.ok(ok and ("create", "/workspace/w/sub/seen") in simplify(got),
             "recursive=1: an existing subdirectory is watched")
        t.ok(ok, "a file made in a new directory at once is reported (%s)" % simplify(got))
        sh("sleep 0.3; echo y > /workspace/w/new/deeper/late; mv /workspace/w/new /workspace/w/renamed;"
           " echo z > /workspace/w/renamed/deeper/after-move")
        got, ok = w.until(lambda e: e[0] == "create" and
                          e[1]["path"] == "/workspace/w/renamed/deeper/after-move")
        paths = [d.get("path") for n, d in got]
        t.ok(ok and "/workspace/w/new/deeper/late" in paths,
             "new subdirectories are watched, and their paths follow a move: %s" %
             simplify(got)[-4:])
        # A client that does not read: the socket's buffers fill, deskboxd
        # stops reading inotify, the kernel's queue fills.
        rss0 = dbx.proc_mem_kib(srv.proc.pid)["VmRSS"]
        w.reading.clear()
        sh("python3 -c \"import os\nfor i in range(100000):\n"
           "  f = '/workspace/w/sub/m%d' % (i % 10); open(f, 'w').close(); os.unlink(f)\"")
        w.reading.set()
        got, ok = w.until(lambda e: e[0] == "overflow", timeout=60)
        t.ok(ok, "a burst of 200000 events at a client that does not read gives an overflow "
             "event (%d events before it)" % len(got))
        rss1 = dbx.proc_mem_kib(srv.proc.pid)["VmRSS"]
        with open("/proc/%d/maps" % srv.proc.pid) as f:
            asan = "libasan" in f.read()
        if asan:
            t.skip("deskboxd's memory stays bounded",
                   "a sanitizer build keeps freed memory in quarantine (VmRSS %+d KiB)" %
                   (rss1 - rss0))
        else:
            t.ok(rss1 - rss0 < 32 * 1024, "deskboxd's memory stays bounded (VmRSS %+d KiB)" %
                 (rss1 - rss0))
        r = srv.request("POST", "/v1/sandboxes/%s/stop" % sid)
        t.eq(r.status, 200, "stop the sandbox")
        got, ok = w.until(lambda e: e[0] == "end", timeout=60)
        t.ok(ok, "the stream ends with 'end' when the sandbox stops: %s" % (got[-1:],))
        t.ok(w.ended.wait(30), "and the response is complete")
        t.ok(dbx.wait_until(lambda: inotify_count(srv.proc.pid) == base_inotify, timeout=30),
             "its inotify instance is freed")
        t.eq(Watch(srv, sid, "/workspace/nope").status, 404, "a missing directory is 404")
        t.eq(Watch(srv, sid, "/workspace/w/sub/seen").status, 400, "a file is 400")
        t.eq(srv.request("DELETE", "/v1/sandboxes/" + sid).status, 204, "delete the sandbox")
    finally:
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly")
        log = srv.stderr()
        if "AddressSanitizer" in log or "runtime error" in log:
            t.ok(False, "sanitizers are quiet", log[-3000:])
        if t.failed:
            t.diag(srv.stderr())
        srv.cleanup()
    t.done()


main()
