"""The files API against a real deskboxd and sandbox: a 200 MiB round trip
streamed both ways with flat server memory, ranges, list/stat/mkdir/move/
delete, multipart, traversal attempts, symlinks out of the sandbox, FIFOs,
and the disk quota."""

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

BIG = 200 << 20
QUOTA_MB = 300


def q(path):
    return urllib.parse.quote(path, safe="")


class Files:
    def __init__(self, srv, sid):
        self.srv, self.sid = srv, sid
        self.base = "/v1/sandboxes/%s/files" % sid

    def put(self, path, data, extra=""):
        return self.srv.request("PUT", "%s/upload?path=%s%s" % (self.base, q(path), extra), data)

    def get(self, path, headers=None):
        return self.srv.request("GET", "%s/download?path=%s" % (self.base, q(path)),
                                headers=headers)

    def raw(self, method, route, query):
        return self.srv.request(method, "%s/%s?%s" % (self.base, route, query))

    def list(self, path):
        return self.srv.request("GET", "%s/list?path=%s" % (self.base, q(path)))

    def stat(self, path):
        return self.srv.request("GET", "%s/stat?path=%s" % (self.base, q(path)))

    def mkdir(self, path, parents=None):
        body = {"path": path}
        if parents is not None:
            body["parents"] = parents
        return self.srv.request("POST", self.base + "/mkdir", body)

    def move(self, a, b):
        return self.srv.request("POST", self.base + "/move", {"from": a, "to": b})

    def delete(self, path, recursive=False):
        return self.srv.request("DELETE", "%s?path=%s%s" % (self.base, q(path),
                                                            "&recursive=1" if recursive else ""))


def random_file(path, size):
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 4 << 20)
            block = os.urandom(n)
            h.update(block)
            f.write(block)
            left -= n
    return h.hexdigest()


def file_chunks(path, size=1 << 20):
    with open(path, "rb") as f:
        while True:
            b = f.read(size)
            if not b:
                return
            yield b


def temp_litter(srv, sid):
    """Temporary upload files in the sandbox's layer.  os.walk, not glob:
    glob's ** follows the sandbox's symlinks out onto the host."""
    found = []
    top = srv.upper_dir(sid)
    for d, _, names in os.walk(top):
        found += [os.path.join(d, n) for n in names if n.startswith(".deskbox-upload-")]
    return found


def round_trip(t, srv, sid, fs, scratch):
    src = os.path.join(scratch, "big.bin")
    want = random_file(src, BIG)
    pid = srv.proc.pid
    before = dbx.proc_mem_kib(pid)
    peak = [before["VmRSS"]]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], dbx.proc_mem_kib(pid)["VmRSS"])
            except OSError:
                pass
            time.sleep(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.time()
    r = dbx.stream_upload(srv, "%s/upload?path=big.bin" % fs.base, file_chunks(src), length=BIG)
    up_s = time.time() - t0
    t.eq(r.status, 201, "200 MiB upload answers 201")
    body = r.json() if r.status == 201 else {}
    t.eq(body.get("sha256"), want, "the upload's sha256 matches")
    t.eq(body.get("size"), BIG, "the upload's size matches")
    t.eq(body.get("path"), "/workspace/big.bin", "relative paths land in /workspace")

    h = hashlib.sha256()
    t0 = time.time()
    status, hdrs, n = dbx.stream_download(srv, "%s/download?path=big.bin" % fs.base, h.update)
    down_s = time.time() - t0
    stop.set()
    th.join()
    after = dbx.proc_mem_kib(pid)
    t.eq(status, 200, "download answers 200")
    t.eq(n, BIG, "download has every byte")
    t.eq(h.hexdigest(), want, "downloaded sha256 matches")
    hd = dict((k.lower(), v) for k, v in hdrs)
    t.eq(hd.get("content-type"), "application/octet-stream", "download content type")
    t.eq(hd.get("content-length"), str(BIG), "download has a Content-Length")
    grow_hwm = (after["VmHWM"] - before["VmHWM"]) / 1024
    grow_rss = (peak[0] - before["VmRSS"]) / 1024
    t.diag("deskboxd VmRSS %.1f MiB before, peak %.1f MiB; VmHWM +%.1f MiB" %
           (before["VmRSS"] / 1024, peak[0] / 1024, grow_hwm))
    t.ok(grow_hwm < 32 and grow_rss < 32, "deskboxd memory stays flat (< 32 MiB growth)",
         "VmHWM +%.1f MiB, sampled RSS +%.1f MiB" % (grow_hwm, grow_rss))
    res = srv.exec(sid, ["sha256sum", "/workspace/big.bin"])
    t.eq(res["stdout"].split()[0] if res["stdout"] else None, want,
         "the sandbox sees the same bytes")

    # The same file through cp on this disk, for the throughput comparison.
    dst = os.path.join(scratch, "cp.bin")
    t0 = time.time()
    subprocess.run(["cp", src, dst], check=True)
    subprocess.run(["sync", dst], check=True)
    cp_s = time.time() - t0
    os.unlink(dst)
    mib = BIG / (1 << 20)
    t.diag("throughput: upload %.0f MiB/s, download %.0f MiB/s, cp+sync %.0f MiB/s" %
           (mib / up_s, mib / down_s, mib / cp_s))
    t.eq(fs.delete("big.bin").status, 204, "delete the big file")
    os.unlink(src)


def ranges(t, fs):
    data = bytes(range(100))
    t.eq(fs.put("/workspace/r.bin", data).status, 201, "upload for ranges")
    r = fs.get("/workspace/r.bin", {"Range": "bytes=10-19"})
    t.eq((r.status, r.body, r.header("Content-Range")), (206, data[10:20], "bytes 10-19/100"),
         "Range bytes=10-19")
    r = fs.get("/workspace/r.bin", {"Range": "bytes=-5"})
    t.eq((r.status, r.body), (206, data[95:]), "suffix range")
    r = fs.get("/workspace/r.bin", {"Range": "bytes=90-"})
    t.eq((r.status, r.body, r.header("Content-Range")), (206, data[90:], "bytes 90-99/100"),
         "open range")
    r = fs.get("/workspace/r.bin", {"Range": "bytes=50-1000"})
    t.eq((r.status, r.body), (206, data[50:]), "range past the end is clipped")
    r = fs.get("/workspace/r.bin", {"Range": "bytes=100-"})
    t.eq((r.status, r.header("Content-Range")), (416, "bytes */100"), "unsatisfiable range: 416")
    r = fs.get("/workspace/r.bin", {"Range": "bytes=0-1,5-6"})
    t.eq((r.status, r.body), (200, data), "several ranges: the whole file")
    r = fs.get("/workspace/r.bin")
    t.eq(r.header("Accept-Ranges"), "bytes", "Accept-Ranges: bytes")
    t.eq(fs.put("/workspace/empty", b"").status, 201, "upload an empty file")
    r = fs.get("/workspace/empty")
    t.eq((r.status, r.body), (200, b""), "download an empty file")


def tree_ops(t, srv, sid, fs):
    r = fs.mkdir("/workspace/d/e", parents=True)
    t.eq(r.status, 201, "mkdir parents answers 201")
    t.eq(r.json().get("type") if r.status == 201 else None, "dir", "mkdir answers the dir's stat")
    t.eq(fs.mkdir("/workspace/d/e").status, 409, "mkdir of an existing dir: 409")
    t.eq(fs.mkdir("/workspace/d/e", parents=True).status, 200, "mkdir -p of an existing dir: 200")
    t.eq(fs.mkdir("/workspace/x/y").status, 404, "mkdir without parents of a missing parent: 404")
    t.eq(fs.put("/workspace/d/e/f.txt", "hello", "&mode=0600").status, 201, "upload into it")
    r = fs.stat("/workspace/d/e/f.txt")
    st = r.json() if r.status == 200 else {}
    t.eq((st.get("type"), st.get("size"), st.get("mode"), st.get("name")),
         ("file", 5, 0o600, "f.txt"), "stat: type, size, mode, name")
    t.ok(abs(st.get("mtime", 0) - time.time()) < 300, "stat: mtime is now")
    r = fs.list("/workspace/d/e")
    ents = r.json().get("entries") if r.status == 200 else None
    t.eq([(x["name"], x["type"], x["size"]) for x in ents or []], [("f.txt", "file", 5)],
         "list shows the file")
    t.eq(sorted(ents[0].keys()) if ents else None, ["mode", "mtime", "name", "size", "type"],
         "list entry fields")
    srv.exec(sid, ["sh", "-c", "ln -s f.txt /workspace/d/e/link && mkfifo /workspace/d/e/p"])
    r = fs.list("/workspace/d/e")
    types = dict((x["name"], x["type"]) for x in r.json()["entries"]) if r.status == 200 else {}
    t.eq(types, {"f.txt": "file", "link": "symlink", "p": "other"}, "list types")
    res = srv.exec(sid, ["sh", "-c", "stat -c %u:%g /workspace/d/e/f.txt && "
                                     "echo more >> /workspace/d/e/f.txt && echo ok"])
    t.eq(res["stdout"], "1000:1000\nok\n", "uploaded files belong to the sandbox user")
    r = fs.move("/workspace/d/e/f.txt", "/workspace/g.txt")
    t.eq(r.status, 200, "move answers 200")
    t.eq(fs.stat("/workspace/d/e/f.txt").status, 404, "moved: old path 404")
    t.eq(fs.get("/workspace/g.txt").body, b"hellomore\n", "moved: new path has the content")
    t.eq(fs.move("/workspace/nope", "/workspace/n2").status, 404, "move of a missing file: 404")
    t.eq(fs.delete("/workspace/d").status, 409, "delete of a non-empty dir: 409")
    t.eq(fs.delete("/workspace/d", recursive=True).status, 204, "recursive delete: 204")
    t.eq(fs.stat("/workspace/d").status, 404, "deleted dir is gone")
    t.eq(fs.delete("/workspace/g.txt").status, 204, "delete a file")
    t.eq(fs.delete("/").status, 400, "delete of / refused")
    t.eq(fs.put("/workspace", "x").status, 409, "upload onto a directory: 409")
    t.eq(fs.put("/workspace/no/such/dir/f", "x").status, 404, "upload without parents: 404")
    t.eq(fs.put("/workspace/no/such/dir/f", "x", "&parents=1").status, 201,
         "upload with parents=1 creates them")
    t.eq(fs.put("/usr/evil", "x").status, 403, "upload into the read-only /usr: 403")
    r = fs.get("/usr/bin/true", {"Range": "bytes=0-3"})
    t.eq(r.body, b"\x7fELF", "downloads see the sandbox's /usr")
    t.eq(fs.put("/workspace/m", "x", "&mode=999").status, 400, "bad mode: 400")

    # multipart/form-data on POST
    boundary = "dbxBOUNDARYdbx"
    content = os.urandom(300000)
    body = (b"--" + boundary.encode() + b"\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\n"
            b"hi\r\n--" + boundary.encode() +
            b"\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n" + content + b"\r\n--" +
            boundary.encode() + b"--\r\n")
    r = srv.request("POST", "%s/upload?path=/workspace/mp.bin" % fs.base, body,
                    headers={"Content-Type": "multipart/form-data; boundary=" + boundary})
    t.eq(r.status, 201, "multipart upload answers 201")
    t.eq(r.json().get("sha256") if r.status == 201 else None,
         hashlib.sha256(content).hexdigest(), "multipart upload sha256")
    t.eq(fs.get("/workspace/mp.bin").body, content, "multipart upload content")
    body = (b"--" + boundary.encode() + b"\r\nContent-Disposition: form-data; name=\"note\""
            b"\r\n\r\nhi\r\n--" + boundary.encode() + b"--\r\n")
    r = srv.request("POST", "%s/upload?path=/workspace/mp.bin" % fs.base, body,
                    headers={"Content-Type": "multipart/form-data; boundary=" + boundary})
    t.eq(r.status, 400, "multipart without a file part: 400")
    t.eq(fs.get("/workspace/mp.bin").body, content, "and the existing file is unchanged")
    r = srv.request("POST", "%s/upload?path=/workspace/mp2.bin" % fs.base, b"raw",
                    headers={"Content-Type": "application/octet-stream"})
    t.eq(r.status, 415, "POST upload that is not multipart: 415")


def traversal(t, srv, sid, fs):
    host_passwd = open("/etc/passwd", "rb").read()
    for raw in ["../../etc/passwd", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/workspace/../../etc/passwd",
                "..", "a/b/../../../x"]:
        for route in ("download", "stat", "list"):
            r = fs.raw("GET", route, "path=" + (raw if "%" in raw else q(raw)))
            t.eq(r.status, 400, "%s %r refused with 400" % (route, raw))
    r = fs.raw("GET", "download", "path=%2e%2e%2f%2e%2e%2fetc%2fpasswd")
    t.ok(r.body.startswith(b"{\"error\""), "traversal error is JSON", r.body[:200])
    r = fs.raw("PUT", "upload", "path=" + q("../../tmp/x"))
    t.eq(r.status, 400, "upload with '..' refused")
    r = fs.get("/etc/passwd")
    t.ok(r.status == 200 and r.body != host_passwd and b"user:x:1000" in r.body,
         "absolute /etc/passwd is the sandbox's own", r.body[:200])
    r = fs.raw("GET", "download", "path=/workspace/a%00b")
    t.eq(r.status, 400, "embedded NUL (%00) refused")
    t.ok(b"NUL" in r.body, "the message says NUL", r.body[:200])
    r = srv.request("POST", fs.base + "/mkdir", b'{"path":"/workspace/a\\u0000b"}')
    t.eq(r.status, 400, "NUL in a JSON path refused")
    long_path = "/workspace/" + "/".join(["a" * 200] * 25)
    r = fs.raw("GET", "stat", "path=" + q(long_path))
    t.eq(r.status, 400, "path over PATH_MAX refused")
    r = fs.raw("GET", "download", "path=")
    t.eq(r.status, 400, "empty path refused")
    r = fs.raw("GET", "download", "")
    t.eq(r.status, 400, "missing path refused")

    # A symlink to / inside the sandbox, and one through /proc.
    canary_dir = tempfile.mkdtemp(prefix="dbx-canary-")
    canary = os.path.join(canary_dir, "canary.txt")
    with open(canary, "wb") as f:
        f.write(b"host canary\n")
    before = os.stat(canary)
    srv.exec(sid, ["sh", "-c", "ln -s / /workspace/root && ln -s /proc/1/root /workspace/p1 && "
                               "ln -s ../../../../../../.. /workspace/up"])
    r = fs.get("/workspace/root/etc/hostname")
    t.eq((r.status, r.body), (200, b"deskbox\n"), "download through a symlink to / stays inside")
    r = fs.get("/workspace/root" + canary)
    t.eq(r.status, 404, "the host canary cannot be read through it")
    r = fs.get("/workspace/up" + canary)
    t.eq(r.status, 404, "nor through a '..' symlink")
    r = fs.put("/workspace/root" + canary, "evil\n", "&parents=1")
    t.eq(r.status, 201, "upload through the symlink lands somewhere")
    r = fs.put("/workspace/up" + canary, "evil2\n")
    t.eq(r.status, 201, "upload through the '..' symlink lands somewhere")
    t.eq(open(canary, "rb").read(), b"host canary\n", "the host canary is unchanged")
    after = os.stat(canary)
    t.ok(after.st_mtime == before.st_mtime and after.st_ino == before.st_ino,
         "the host canary was not replaced")
    t.eq(os.listdir(canary_dir), ["canary.txt"], "nothing appeared next to the host canary")
    res = srv.exec(sid, ["cat", canary])
    t.eq(res["stdout"], "evil2\n", "the upload landed in the sandbox's own filesystem")
    r = fs.get("/workspace/p1/etc/hostname")
    t.eq(r.status, 400, "a /proc/N/root magic link is refused")
    t.eq(fs.put("/workspace/p1/x", "x").status, 400, "upload through the magic link refused")
    r = fs.get("/workspace/root")
    t.eq(r.status, 400, "a symlink as the last component is not followed")
    t.eq(fs.delete("/workspace/root").status, 204, "deleting the symlink")
    res = srv.exec(sid, ["sh", "-c", "test -d / && ls /etc/hostname"])
    t.eq(res["exit_code"], 0, "removes the link, not its target")
    subprocess.run(["rm", "-rf", canary_dir])

    srv.exec(sid, ["mkfifo", "/workspace/fifo"])
    t0 = time.time()
    r = fs.get("/workspace/fifo")
    t.ok(r.status == 400 and time.time() - t0 < 1.0, "FIFO download refused within a second",
         "%d after %.2f s" % (r.status, time.time() - t0))
    t.eq(fs.get("/dev/null").status, 400, "device download refused")
    t.eq(fs.get("/workspace").status, 400, "directory download refused")


def quota(t, srv, sid, fs):
    keep = os.urandom(1 << 20)
    t.eq(fs.put("/workspace/keep.bin", keep).status, 201, "upload a file to keep")
    # Declared too big: refused before the body is read.
    t0 = time.time()
    r = dbx.stream_upload(srv, "%s/upload?path=/workspace/keep.bin" % fs.base,
                          iter([b"x" * (1 << 20)] * (QUOTA_MB + 10)),
                          length=(QUOTA_MB + 10) << 20, expect=True)
    t.eq(r.status, 507, "declared size over the quota: 507")
    t.ok(b"quota" in r.body and time.time() - t0 < 2, "at once, with a clear message",
         r.body[:300])
    # Chunked (size unknown): refused once past the quota.
    r = dbx.stream_upload(srv, "%s/upload?path=/workspace/keep.bin" % fs.base,
                          iter([b"y" * (1 << 20)] * (QUOTA_MB + 10)), length=None)
    t.eq(r.status, 507, "streamed past the quota: 507")
    t.eq(fs.get("/workspace/keep.bin").body, keep, "the existing file is intact")
    t.eq(temp_litter(srv, sid), [], "no temporary files are left")
    # A client that goes away in the middle of an upload.
    import socket
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(("PUT %s/upload?path=/workspace/keep.bin HTTP/1.1\r\nHost: x\r\n"
               "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n" %
               (fs.base, srv.token, 8 << 20)).encode())
    s.sendall(b"w" * (2 << 20))
    deadline = time.time() + 5
    while not temp_litter(srv, sid) and time.time() < deadline:
        time.sleep(0.02)
    t.ok(temp_litter(srv, sid), "mid-upload, the temporary file exists")
    s.close()
    deadline = time.time() + 5
    while temp_litter(srv, sid) and time.time() < deadline:
        time.sleep(0.02)
    t.eq(temp_litter(srv, sid), [], "a client that disconnects leaves no temporary file")
    t.eq(fs.get("/workspace/keep.bin").body, keep, "and the old file intact")
    r = fs.put("/workspace/small.bin", b"z" * 1000)
    t.eq(r.status, 201, "uploads within the quota still work")


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server(args=["--disk-quota-mb", str(QUOTA_MB)])
    scratch = tempfile.mkdtemp(prefix="dbx-files-")
    try:
        sid = srv.create()["id"]
        fs = Files(srv, sid)
        round_trip(t, srv, sid, fs, scratch)
        ranges(t, fs)
        tree_ops(t, srv, sid, fs)
        traversal(t, srv, sid, fs)
        quota(t, srv, sid, fs)
        t.eq(srv.request("DELETE", "/v1/sandboxes/" + sid).status, 204, "delete the sandbox")
    finally:
        subprocess.run(["rm", "-rf", scratch])
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly")
        if t.failed:
            t.diag(srv.stderr())
        srv.cleanup()
    t.done()


main()
