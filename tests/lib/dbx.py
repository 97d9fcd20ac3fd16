"""Helpers for deskbox's integration tests: start a real deskboxd on a free
port with a temporary state dir, talk HTTP to it, print TAP.

Stdlib only, so the tests run wherever python3 does."""

import calendar
import glob
import http.client
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib

BUILD = os.environ.get("DESKBOX_BUILD") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build")
TOKEN = "test-token-" + "x" * 24
# The sandboxes' VNC server process (deskbox-init's DESKBOX_VNC, which
# deskboxd passes on from its own environment; deskbox-vnc by default).
VNC_PROC = "x11vnc" if os.environ.get("DESKBOX_VNC") == "x11vnc" else "deskbox-vnc"


class Tap:
    """Prints TAP lines; exit code 1 if anything failed."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, detail=None):
        self.n += 1
        if not cond:
            self.failed += 1
        print(("ok" if cond else "not ok") + " %d - %s" % (self.n, name), flush=True)
        if not cond and detail is not None:
            for line in str(detail).splitlines()[:20]:
                print("#   " + line, flush=True)
        return bool(cond)

    def eq(self, got, want, name):
        return self.ok(got == want, name, "got %r, want %r" % (got, want))

    def skip(self, name, why):
        """One part of a test that cannot run here; tests/run.sh counts
        it as skipped, not passed."""
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, name, why), flush=True)

    def diag(self, msg):
        print("# " + msg, flush=True)

    def done(self):
        print("1..%d" % self.n, flush=True)
        if not self.failed:
            forget_servers()
        sys.exit(1 if self.failed else 0)


RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def parse_time(s):
    """A timestamp of an answer, RFC 3339 UTC with milliseconds
    ("2026-12-02T13:42:11.000Z"), into unix seconds; None if it is not
    exactly that form."""
    if not isinstance(s, str) or not RFC3339.match(s):
        return None
    secs, _, frac = s[:-1].partition(".")
    return calendar.timegm(time.strptime(secs, "%Y-%m-%dT%H:%M:%S")) + float("0." + frac)


def wait_until(cond, timeout=10, interval=0.1):
    """Calls cond() every `interval` seconds until it returns a true value
    or `timeout` seconds have passed; returns its last value, so a caller
    asserts on what it saw (falsy when the deadline passed)."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got or time.monotonic() >= deadline:
            return got
        time.sleep(interval)


def running(pid):
    """The process runs (a zombie does not: one whose parent died, a
    taken-over QEMU's, waits for the machine's init to reap it)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def error_message(r):
    """The message of a JSON error answer (the body itself when it is not
    JSON)."""
    try:
        return r.json().get("error", {}).get("message", "")
    except ValueError:
        return r.body.decode(errors="replace")


def qemu_cmdline(sid):
    """The argv of the QEMU in sandbox sid's cgroup ([] when none runs)."""
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/cgroup" % p) as f:
                if "/deskbox/dbx-" + sid not in f.read():
                    continue
            with open("/proc/%s/cmdline" % p, "rb") as c:
                cmd = c.read().decode(errors="replace").split("\0")
            if cmd and "qemu-system" in cmd[0]:
                return cmd
        except OSError:
            pass
    return []


def sandbox_cgroup_file(sid, ctrl, v1, v2):
    """File `v1` of controller `ctrl` in sandbox sid's cgroup (cgroup v1),
    or `v2` of its one cgroup (v2), stripped; None when neither is there."""
    for p in ("/sys/fs/cgroup/%s/deskbox/dbx-%s/%s" % (ctrl, sid, v1),
              "/sys/fs/cgroup/deskbox/dbx-%s/%s" % (sid, v2)):
        if os.path.exists(p):
            with open(p) as f:
                return f.read().strip()
    return None


def cgroup_dirs(cid):
    """The cgroup directories of container `cid` (deskboxd puts them under
    "deskbox"), on a cgroup v1 or a v2 host."""
    return sorted(glob.glob("/sys/fs/cgroup/*/deskbox/" + cid) +
                  glob.glob("/sys/fs/cgroup/deskbox/" + cid))


def warm_pool_ready(srv):
    """How many warm-pool desktops deskboxd reports ready to be claimed
    (the deskbox_warm_pool_ready gauge of /metrics), or -1."""
    r = srv.request("GET", "/metrics")
    m = re.search(rb"^deskbox_warm_pool_ready (\d+)$", r.body, re.M) if r.status == 200 else None
    return int(m.group(1)) if m else -1


def frame(srv, sid):
    """The number of sandbox `sid`'s mirror frame now (GET desktop/info)."""
    return srv.request("GET", "/v1/sandboxes/%s/desktop/info" % sid).json()["frame"]


def wait_frame_change(srv, sid, since, timeout=5.0):
    """Polls the mirror's frame counter (~1 ms apart) until it is not
    `since`; the new number, or None after `timeout` seconds."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        f = frame(srv, sid)
        if f != since:
            return f
        time.sleep(0.0005)
    return None


def pss_kb(pid):
    """Process `pid`'s proportional set size in KiB (0 when it is gone)."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cgroup_file(cid, controller, name):
    """The content of a cgroup file of container `cid` on a v1 or a v2
    host, or None when there is none."""
    for path in (glob.glob("/sys/fs/cgroup/%s/deskbox/%s/%s" % (controller, cid, name)) +
                 glob.glob("/sys/fs/cgroup/deskbox/%s/%s" % (cid, name))):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            pass
    return None


def sandbox_init_pid(state_dir, sid):
    """The host pid of sandbox `sid`'s init (crun's state), or None."""
    try:
        with open(os.path.join(state_dir, "runtime", "dbx-" + sid, "status")) as f:
            return int(json.load(f)["pid"])
    except (OSError, ValueError, KeyError):
        return None


def kill_in_sandbox(state_dir, sid, name, sig=signal.SIGKILL):
    """Sends `sig` from the host to sandbox `sid`'s processes named `name`
    (the desktop's run as the sandbox's root: its user may not signal
    them).  Returns how many were signalled."""
    n = 0
    todo = [sandbox_init_pid(state_dir, sid)] if sandbox_init_pid(state_dir, sid) else []
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/comm" % p) as f:
                comm = f.read().strip()
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(c) for c in f.read().split()]
            if comm == name[:15]:
                os.kill(p, sig)
                n += 1
        except OSError:
            pass
    return n


def skip_all(why):
    print("1..0 # SKIP " + why, flush=True)
    sys.exit(77)


def require_root_and_tools():
    if os.geteuid() != 0:
        skip_all("needs root (containers, mounts, cgroups)")
    for tool in ("crun", "Xvfb", "x11vnc", "openbox"):
        if not shutil.which(tool):
            skip_all("%s is not installed (run scripts/install-deps.sh)" % tool)
    if not os.path.exists(os.path.join(BUILD, "deskboxd")):
        skip_all("deskboxd is not built in %s" % BUILD)


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


# Every Server this test made: Tap.done() removes the logs (and the own
# state dirs) of those that exited once the test passed, so that a test
# which only stop()s its servers leaves nothing in /tmp; a failed test's
# stay for reading.
SERVERS = []


def forget_servers():
    for srv in SERVERS:
        if srv.proc.poll() is None:
            continue
        try:
            os.unlink(srv.log_path)
        except OSError:
            pass
        if srv.own_state:
            shutil.rmtree(srv.state_dir, ignore_errors=True)


class Server:
    """A deskboxd process on 127.0.0.1:<free port>."""

    def __init__(self, state_dir=None, token=TOKEN, args=(), env=None, wrap=(), on_exit="stop"):
        """`args` go after the defaults (a later --listen wins); `wrap` is
        a command line deskboxd runs under (e.g. unshare).  `on_exit`:
        what SIGTERM does to running sandboxes (--on-exit); the tests stop
        them unless they test leaving them running."""
        self.on_exit = on_exit
        self.own_state = state_dir is None
        self.state_dir = state_dir or tempfile.mkdtemp(prefix="dbx-test-")
        self.token = token
        # Beside the state dir, by a path that does not go through it (it
        # is removed first at clean-up).
        state = os.path.abspath(self.state_dir)
        self.log_path = os.path.join(os.path.dirname(state), os.path.basename(state) + ".log")
        self.log = open(self.log_path, "wb")
        SERVERS.append(self)
        cmd = list(wrap) + [os.path.join(BUILD, "deskboxd"), "--listen", "127.0.0.1:0",
               "--state-dir", self.state_dir, "--on-exit", on_exit] + list(args)
        if token is not None:
            cmd += ["--token", token]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env or os.environ.copy())
        self.port = None
        deadline = time.time() + 60
        lines = []
        while time.time() < deadline:
            line = self.proc.stdout.readline().decode(errors="replace")
            if not line:
                break
            lines.append(line)
            m = re.search(r"listening on https?://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.kill()
            raise RuntimeError("deskboxd did not start: %s %s" % ("".join(lines), self.stderr()))
        self.startup = "".join(lines)
        # Keep reading stdout so the server never blocks on a full pipe.
        import threading
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            pass

    def stderr(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def ns_path(self, *parts):
        """A path under the state dir as deskboxd sees it: through its root,
        so inside its private mount namespace (the sandboxes' disks and
        overlays are mounted only there)."""
        return os.path.join("/proc/%d/root" % self.proc.pid,
                            self.state_dir.lstrip("/"), *parts)

    def root_exec(self, sid, argv, background=False, timeout=120):
        """`argv` as the container's root (crun exec from the host, as the
        sandbox's own root could): what the user may no longer touch, such
        as /run/deskbox.  {"stdout", "exit_code"}, or the Popen when
        `background`."""
        cmd = ["unshare", "-m", "--", "sh", "-c",
               'umount /sys/fs/cgroup/unified 2>/dev/null; exec "$0" "$@"',
               "crun", "--root", os.path.join(self.state_dir, "runtime"), "exec",
               "--user", "0:0", "dbx-" + sid] + list(argv)
        if background:
            return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return {"stdout": p.stdout + p.stderr, "exit_code": p.returncode}

    def upper_dir(self, sid):
        """The sandbox's overlay upper layer: on its own disk, or (without
        one) in its state dir."""
        disk = self.ns_path("sandboxes", sid, "disk", "upper")
        return disk if os.path.isdir(disk) else self.ns_path("sandboxes", sid, "upper")

    def request(self, method, path, body=None, token="default", headers=None, timeout=120):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(headers or {})
        tok = self.token if token == "default" else token
        if tok is not None:
            h["Authorization"] = "Bearer " + tok
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return Response(r.status, r.getheaders(), data)

    def create(self, spec=None):
        r = self.request("POST", "/v1/sandboxes", spec or {})
        if r.status != 201:
            raise RuntimeError("create failed: %d %s" % (r.status, r.body[:500]))
        return r.json()

    def exec(self, sid, argv, **kw):
        body = {"argv": argv}
        body.update(kw)
        r = self.request("POST", "/v1/sandboxes/%s/process/exec" % sid, body)
        if r.status != 200:
            raise RuntimeError("exec failed: %d %s" % (r.status, r.body[:500]))
        return r.json()

    def screenshot(self, sid, query=""):
        r = self.request("GET", "/v1/sandboxes/%s/desktop/screenshot%s" % (sid, query))
        if r.status != 200:
            raise RuntimeError("screenshot failed: %d %s" % (r.status, r.body[:500]))
        return r.body

    def post(self, sid, action, body):
        return self.request("POST", "/v1/sandboxes/%s/desktop/%s" % (sid, action), body)

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def cleanup(self):
        if self.on_exit == "keep" and self.proc.poll() is None:
            # Nothing may outlive the test: delete what would be left running.
            try:
                for sb in self.request("GET", "/v1/sandboxes", timeout=30).json()["sandboxes"]:
                    self.request("DELETE", "/v1/sandboxes/" + sb["id"], timeout=60)
            except (OSError, ValueError, KeyError):
                pass
        self.stop()
        if self.own_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)
            try:
                os.unlink(self.log_path)
            except OSError:
                pass


def stop_servers(t, servers, state):
    """The end of a test that ran several deskboxds one after another on
    one state dir: stops them all (the last must exit 0: a TAP check), shows
    the last one's log if anything failed, removes their logs and the state
    dir."""
    rc = None
    for s in servers:
        rc = s.stop()
    t.eq(rc, 0, "deskboxd exits cleanly")
    if t.failed:
        t.diag(servers[-1].stderr())
    for s in servers:
        try:
            os.unlink(s.log_path)
        except OSError:
            pass
    shutil.rmtree(state, ignore_errors=True)


# ---- PNG ----

def png_chunks(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos = 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) & 0xffffffff != crc:
            raise ValueError("bad CRC in %r" % kind)
        yield kind, body
        pos += 12 + length


def png_info(data):
    """(width, height, bit depth, color type) of a PNG, checking every CRC."""
    info = None
    for kind, body in png_chunks(data):
        if kind == b"IHDR":
            info = struct.unpack(">IIBB", body[:10])
    return info


def png_rows(data):
    """The filtered rows of an 8-bit RGB or palette PNG: list of (filter,
    bytes), three bytes a pixel or one palette index."""
    w, h, depth, ctype = png_info(data)
    assert depth == 8 and ctype in (2, 3), "expected 8-bit RGB or palette"
    raw = zlib.decompress(b"".join(b for k, b in png_chunks(data) if k == b"IDAT"))
    stride = w * (3 if ctype == 2 else 1) + 1
    assert len(raw) == stride * h, "IDAT size %d != %d" % (len(raw), stride * h)
    return [(raw[i * stride], raw[i * stride + 1:(i + 1) * stride]) for i in range(h)]


def png_pixels(data):
    """Decodes an 8-bit RGB or palette PNG into a list of rows of bytes
    (R,G,B,...)."""
    w, h, _, ctype = png_info(data)
    rows = png_rows(data)
    bpp = 3 if ctype == 2 else 1
    plte = b"".join(b for k, b in png_chunks(data) if k == b"PLTE")
    if ctype == 3:
        colours = [plte[i:i + 3] for i in range(0, len(plte), 3)]
        lut = [bytes(colours[i]) if i < len(colours) else None for i in range(256)]
    out = []
    prev = bytearray(w * bpp)
    for f, row in rows:
        cur = bytearray(row)
        if f == 1:
            for i in range(bpp, len(cur)):
                cur[i] = (cur[i] + cur[i - bpp]) & 255
        elif f == 2:
            for i in range(len(cur)):
                cur[i] = (cur[i] + prev[i]) & 255
        elif f != 0:
            raise ValueError("filter %d not supported by this decoder" % f)
        if ctype == 3:
            if any(lut[i] is None for i in set(cur)):
                raise ValueError("palette index past the PLTE")
            out.append(b"".join(lut[i] for i in cur))
        else:
            out.append(bytes(cur))
        prev = cur
    return out


def changed_bbox(png_a, png_b):
    """Bounding box (x0, y0, x1, y1) of the pixels that differ between two
    screenshots of the same size, or None.  When both use the same filter
    per row it compares the filtered rows (SUB or UP filtering spreads a
    change by one pixel at most), else (and for palette images) the decoded
    pixels."""
    ra, rb = png_rows(png_a), png_rows(png_b)
    if png_info(png_a)[3] == 3 or png_info(png_b)[3] == 3 or any(
            fa != fb for (fa, _), (fb, _) in zip(ra, rb)):
        # The encoder picked other filters for the two: compare pixels.
        pa, pb = png_pixels(png_a), png_pixels(png_b)
        ra = [(0, a) for a in pa]
        rb = [(0, b) for b in pb]
    x0 = y0 = 1 << 30
    x1 = y1 = -1
    for y, ((fa, a), (fb, b)) in enumerate(zip(ra, rb)):
        if a == b and fa == fb:
            continue
        n = len(a)
        lo = 0
        while lo < n and a[lo] == b[lo]:
            lo += 1
        hi = n - 1
        while hi > lo and a[hi] == b[hi]:
            hi -= 1
        x0 = min(x0, lo // 3)
        x1 = max(x1, hi // 3)
        y0 = min(y0, y)
        y1 = max(y1, y)
    return None if y1 < 0 else (x0, y0, x1, y1)


# ---- streamed uploads and downloads (files API) ----

def _read_head(sock, buf):
    """Reads one response head from `sock`: (status, headers, rest of buf)."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed before a response")
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = [tuple(x.strip() for x in l.split(":", 1)) for l in lines[1:] if ":" in l]
    return status, headers, rest


def stream_upload(srv, path, chunks, length=None, method="PUT", headers=None, expect=False,
                  timeout=300):
    """Sends a request whose body is the byte strings of `chunks`, as they
    come (Content-Length `length`, or chunked when None), and returns the
    Response.  With `expect`, sends Expect: 100-continue and the body only
    after the server's 100.  A server that answers early (and stops
    reading) is fine: the answer is read all the same."""
    import socket
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    h = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1",
         "Authorization: Bearer " + srv.token]
    h.append("Content-Length: %d" % length if length is not None
             else "Transfer-Encoding: chunked")
    if expect:
        h.append("Expect: 100-continue")
    for k, v in (headers or {}).items():
        h.append("%s: %s" % (k, v))
    s.sendall(("\r\n".join(h) + "\r\n\r\n").encode())
    buf = b""
    try:
        if expect:
            status, hdrs, buf = _read_head(s, buf)
            if status != 100:
                return _finish(s, status, hdrs, buf)
        for c in chunks:
            s.sendall(c if length is not None else b"%x\r\n%s\r\n" % (len(c), c))
        if length is None:
            s.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    status, hdrs, buf = _read_head(s, buf)
    return _finish(s, status, hdrs, buf)


def _finish(s, status, hdrs, buf):
    n = int(dict((k.lower(), v) for k, v in hdrs).get("content-length", "0"))
    while len(buf) < n:
        data = s.recv(65536)
        if not data:
            break
        buf += data
    s.close()
    return Response(status, hdrs, buf[:n])


def stream_download(srv, path, sink, headers=None, timeout=300):
    """GETs `path`, handing the body to sink(bytes) in pieces of up to
    1 MiB; returns (status, headers, bytes received)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    h = {"Authorization": "Bearer " + srv.token}
    h.update(headers or {})
    conn.request("GET", path, headers=h)
    r = conn.getresponse()
    total = 0
    while True:
        data = r.read(1 << 20)
        if not data:
            break
        total += len(data)
        sink(data)
    conn.close()
    return r.status, r.getheaders(), total


def proc_mem_kib(pid):
    """{'VmRSS': KiB, 'VmHWM': KiB} of a process."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "kill":
    # For tests in other languages: dbx.py kill STATE_DIR SANDBOX_ID NAME
    sys.exit(0 if kill_in_sandbox(sys.argv[2], sys.argv[3], sys.argv[4]) else 1)


def disk_image(srv, sid):
    """Sandbox `sid`'s disk image as deskboxd sees it: in the disk store
    (<state>/store, mounted only in deskboxd's namespace; docs/lifecycle.md),
    else in its own directory."""
    pooled = srv.ns_path("store", "sandboxes", sid, "disk.img")
    if os.path.exists(pooled):
        return pooled
    return os.path.join(srv.state_dir, "sandboxes", sid, "disk.img")


def loops_backing(dev, ino):
    """Loop devices whose backing file is the inode `ino` on device `dev`
    (LOOP_GET_STATUS64: the path in sysfs is the one of the namespace that
    attached it)."""
    found = []
    for f in glob.glob("/sys/block/loop*/loop/backing_file"):
        name = f.split("/")[3]
        try:
            fd = os.open("/dev/" + name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            import fcntl
            buf = fcntl.ioctl(fd, 0x4C05, bytes(232))  # LOOP_GET_STATUS64
            d, i = struct.unpack_from("QQ", buf)
            if (d, i) == (dev, ino):
                found.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return found


def store_du(state_dir):
    """Bytes the disk store (<state>/store.xfs) takes on the host."""
    try:
        return os.stat(os.path.join(state_dir, "store.xfs")).st_blocks * 512
    except OSError:
        return 0


class ReflinkStateDir:
    """A state dir on a fresh XFS with reflinks (mkfs.xfs -m reflink=1 on a
    sparse image, loop-mounted here), where checkpoints are reflinks
    (docs/lifecycle.md).  .path is None, with .why, when it cannot be made."""

    def __init__(self, size="64G"):
        self.path, self.why = None, None
        if not shutil.which("mkfs.xfs"):
            self.why = "no mkfs.xfs (Debian xfsprogs)"
            return
        self.img = tempfile.mktemp(prefix="dbx-xfs-", suffix=".img")
        d = tempfile.mkdtemp(prefix="dbx-xfs-")
        try:
            subprocess.run(["truncate", "-s", size, self.img], check=True)
            subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", self.img], check=True,
                           capture_output=True)
            subprocess.run(["mount", "-o", "loop,discard", self.img, d], check=True,
                           capture_output=True)
            self.path = os.path.join(d, "state")
            self.mount = d
            os.mkdir(self.path, 0o700)
        except (OSError, subprocess.CalledProcessError) as e:
            self.why = "cannot make an XFS: %s" % getattr(e, "stderr", e)
            shutil.rmtree(d, ignore_errors=True)
            if os.path.exists(self.img):
                os.unlink(self.img)

    def used(self):
        """Bytes in use on the XFS."""
        st = os.statvfs(self.mount)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def cleanup(self):
        if self.path:
            subprocess.run(["umount", "-l", self.mount], capture_output=True)
            shutil.rmtree(self.mount, ignore_errors=True)
            os.unlink(self.img)
            self.path = None


# ---- browser tests (tests/browser: playwright-core driving Debian's chromium) ----

BROWSER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser")
CHROMIUM = "/usr/bin/chromium"


def run_browser_script(script):
    """Starts deskboxd and runs tests/browser/`script` under node against it,
    passing its TAP through, and exits with its code.  Skips (77) only when
    chromium or node is not installed; installs playwright-core with npm ci
    when it is missing."""
    require_root_and_tools()
    if not os.access(CHROMIUM, os.X_OK):
        skip_all("chromium is not installed (scripts/install-deps.sh installs it)")
    node = shutil.which("node")
    if not node:
        skip_all("node is not installed")
    if not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        npm = shutil.which("npm")
        if not npm:
            skip_all("npm is not installed, so playwright-core cannot be")
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=BROWSER_DIR,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            print("not ok 1 - npm ci in tests/browser")
            print("# " + r.stdout.decode(errors="replace")[-2000:].replace("\n", "\n# "))
            print("1..1")
            sys.exit(1)
    srv = Server()
    try:
        env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port,
                   DESKBOX_TOKEN=srv.token, CHROMIUM=CHROMIUM,
                   DESKBOX_STATE=srv.state_dir,
                   DESKBOX_DBX=os.path.abspath(__file__))
        r = subprocess.run([node, script], cwd=BROWSER_DIR, env=env, timeout=600)
        rc = r.returncode
        if rc != 0:
            for line in srv.stderr().splitlines()[-30:]:
                print("# deskboxd: " + line)
    finally:
        srv.cleanup()
    sys.exit(rc)
