"""Resumable uploads through the files API against a real deskboxd and
sandbox: an upload killed at 50 % keeps what arrived (upload-status and
HEAD say how much), resumes from there and ends with the right sha256;
pieces answer 202 until the last; wrong offsets, bad ranges and a wrong
X-Content-SHA256 are refused; the staging file counts against the disk
quota, is hidden, and is swept when stale."""

import hashlib
import os
import socket
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

SIZE = 64 << 20


def q(s):
    return urllib.parse.quote(s, safe="")


def put_piece(srv, sid, path, data, first, total, sha=None, extra=""):
    last = first + len(data) - 1
    h = {"Content-Range": "bytes %d-%d/%d" % (first, last, total)}
    if sha:
        h["X-Content-SHA256"] = sha
    # stream_upload reads an answer given before the body was sent too.
    return dbx.stream_upload(srv, "/v1/sandboxes/%s/files/upload?path=%s%s" %
                             (sid, q(path), extra), [data], length=len(data), headers=h)


def status(srv, sid, path):
    r = srv.request("GET", "/v1/sandboxes/%s/files/upload-status?path=%s" % (sid, q(path)))
    return r.json() if r.status == 200 else {"status": r.status}


def settled(fn, timeout=20):
    prev = fn()
    deadline = time.time() + timeout
    while time.time() < deadline:
        time.sleep(0.3)
        cur = fn()
        if cur == prev:
            return cur
        prev = cur
    return prev


def killed_upload(srv, sid, path, data, sha, cut):
    """Sends the whole upload's headers and `cut` bytes of its body, then
    drops the connection, as a client killed mid-way would."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
    head = ["PUT /v1/sandboxes/%s/files/upload?path=%s HTTP/1.1" % (sid, q(path)),
            "Host: 127.0.0.1", "Authorization: Bearer " + srv.token,
            "Content-Length: %d" % len(data),
            "Content-Range: bytes 0-%d/%d" % (len(data) - 1, len(data)),
            "X-Content-SHA256: " + sha]
    s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    view = memoryview(data)
    for off in range(0, cut, 1 << 20):
        s.sendall(view[off:min(cut, off + (1 << 20))])
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()  # a reset, like a killed client


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create()["id"]
        data = os.urandom(SIZE)
        sha = hashlib.sha256(data).hexdigest()
        path = "/workspace/up/big.bin"
        srv.exec(sid, ["mkdir", "-p", "/workspace/up"])
        t.eq(status(srv, sid, path), {"path": path, "in_progress": False, "received": 0},
             "no upload in progress at first")

        killed_upload(srv, sid, path, data, sha, SIZE // 2)
        ok = dbx.wait_until(lambda: status(srv, sid, path).get("received", 0) > 0, timeout=30)
        st = status(srv, sid, path)
        got = st.get("received", 0)
        t.ok(ok and st["in_progress"] and 0 < got <= SIZE // 2,
             "after the client was killed at 50 %%, %d bytes are staged" % got)
        # The server may still be writing what was in flight: wait until
        # the count stops changing.
        got = settled(lambda: status(srv, sid, path)["received"])
        r = srv.request("HEAD", "/v1/sandboxes/%s/files/upload?path=%s" % (sid, q(path)))
        t.eq((r.status, r.header("Upload-Offset")), (200, str(got)),
             "HEAD …/upload says the same in Upload-Offset")
        r = srv.request("GET", "/v1/sandboxes/%s/files/stat?path=%s" % (sid, q(path)))
        t.eq(r.status, 404, "the file is not at its path while incomplete")
        ls = srv.exec(sid, ["ls", "-A", "/workspace/up"])["stdout"].split()
        t.ok(len(ls) == 1 and ls[0].startswith(".deskbox-partial-"),
             "the partial data is a hidden staging file: %s" % ls)

        r = put_piece(srv, sid, path, data[got + 10:], got + 10, SIZE, sha)
        t.eq(r.status, 409, "resuming past what arrived is 409: %s" % r.body[:160])
        r = put_piece(srv, sid, path, data[got:], got, SIZE, sha)
        t.eq(r.status, 201, "resuming from the staged offset completes: %s" % r.body[:160])
        t.eq(r.json().get("sha256"), sha, "the answer's sha256 is the whole file's")
        h = hashlib.sha256()
        status_code, _, n = dbx.stream_download(
            srv, "/v1/sandboxes/%s/files/download?path=%s" % (sid, q(path)), h.update)
        t.eq((status_code, n, h.hexdigest()), (200, SIZE, sha),
             "the downloaded file's sha256 matches the original")
        t.eq(status(srv, sid, path)["in_progress"], False, "no upload in progress after it")
        ls = srv.exec(sid, ["ls", "-A", "/workspace/up"])["stdout"].split()
        t.eq(ls, ["big.bin"], "the staging file is gone")

        # Pieces: 202 until the last; going back re-sends from there.
        p2 = "/workspace/up/pieces.txt"
        body = b"0123456789" * 100
        r = put_piece(srv, sid, p2, body[:300], 0, len(body))
        t.eq((r.status, r.json().get("received"), r.header("Upload-Offset")), (202, 300, "300"),
             "a first piece answers 202 with what is staged")
        r = put_piece(srv, sid, p2, body[300:600], 300, len(body))
        t.eq(r.json().get("received"), 600, "a second piece appends")
        r = put_piece(srv, sid, p2, body[500:700], 500, len(body))
        t.eq(r.json().get("received"), 700, "a piece from an earlier offset re-sends from there")
        r = put_piece(srv, sid, p2, b"x" * 300, 700, len(body), sha="0" * 64)
        t.eq(r.status, 409, "a wrong X-Content-SHA256 is 409: %s" % r.body[:200])
        t.ok(b"sha" in r.body.lower() and b"discarded" in r.body, "with a clear message")
        t.eq(status(srv, sid, p2)["in_progress"], False, "and the staged data is discarded")
        r = srv.request("GET", "/v1/sandboxes/%s/files/stat?path=%s" % (sid, q(p2)))
        t.eq(r.status, 404, "nothing appears at the path")
        r = put_piece(srv, sid, p2, body, 0, len(body), hashlib.sha256(body).hexdigest(),
                      "&mode=0600")
        t.eq(r.status, 201, "a single piece with the right sha256 is 201")
        out = srv.exec(sid, ["stat", "-c", "%a %s %u", p2])["stdout"].split()
        t.eq(out, ["600", str(len(body)), "1000"], "mode, size and owner of the result")

        for cr, why in (("bytes 5-3/10", "first > last"), ("bytes 0-10/10", "last >= total"),
                        ("bytes=0-1/10", "'bytes='"), ("bytes 0-1/*", "unknown total"),
                        ("bytes -1-2/10", "negative")):
            r = dbx.stream_upload(srv, "/v1/sandboxes/%s/files/upload?path=%s" % (sid, q(p2)),
                                  [b"ab"], length=2, headers={"Content-Range": cr})
            t.eq(r.status, 400, "Content-Range %r (%s) is 400" % (cr, why))
        r = dbx.stream_upload(srv, "/v1/sandboxes/%s/files/upload?path=%s" % (sid, q(p2)),
                              [b"abc"], length=3, headers={"Content-Range": "bytes 0-1/10"})
        t.eq(r.status, 400, "a body longer than its range is 400")
        r = put_piece(srv, sid, p2, b"ab", 0, 10, sha="xyz")
        t.eq(r.status, 400, "a malformed X-Content-SHA256 is 400")

        # Stale staging files are swept by the next resumable upload there.
        put_piece(srv, sid, "/workspace/up/stale.bin", b"abc", 0, 10)
        srv.exec(sid, ["sh", "-c", "touch -d '3 days ago' /workspace/up/.deskbox-partial-*"])
        put_piece(srv, sid, "/workspace/up/fresh.bin", b"abc", 0, 10)
        t.eq(status(srv, sid, "/workspace/up/stale.bin")["in_progress"], False,
             "a staging file untouched for 3 days is swept")
        t.eq(status(srv, sid, "/workspace/up/fresh.bin")["received"], 3, "a fresh one stays")

        # The staging file counts against the disk.
        small = srv.create({"disk_mb": 64})["id"]
        r = put_piece(srv, small, "/workspace/a.bin", b"\1" * (40 << 20), 0, 50 << 20)
        t.eq(r.status, 202, "40 MiB staged on a 64 MiB disk")
        r = dbx.stream_upload(srv, "/v1/sandboxes/%s/files/upload?path=%s" %
                              (small, q("/workspace/b.bin")), [b"\2" * (30 << 20)],
                              length=30 << 20)
        t.eq(r.status, 507, "another 30 MiB does not fit: the staged bytes count")
        r = put_piece(srv, small, "/workspace/a.bin", b"\1" * (30 << 20), 40 << 20, 70 << 20)
        t.eq(r.status, 507, "nor does the next piece")
        t.eq(srv.request("DELETE", "/v1/sandboxes/" + small).status, 204, "delete the small one")
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
