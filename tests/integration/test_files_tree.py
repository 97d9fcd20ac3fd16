"""Whole trees through the files API against a real deskboxd and sandbox:
archive round trips (tar, tar.gz, zip) of a tree with unicode names, empty
directories, symlinks and a 1 GiB sparse file, compared by sha256 of every
file; malicious archives made with Python's tarfile/zipfile (zip-slip,
absolute names, a symlink then a file through it, a device node, a FIFO,
a zip bomb past the limits) refused with 4xx and leaving nothing; batch
uploads of many files in one multipart request."""

import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

SPARSE = 1 << 30
# The bomb's sandbox has a disk this small; its zip unpacks to more.
BOMB_DISK_MB = 64

MAKE_TREE = r"""
import os, sys
top = sys.argv[1]
os.makedirs(top + "/sub/deeper", exist_ok=True)
os.makedirs(top + "/empty/also-empty")
os.makedirs(top + "/日本語 ディレクトリ")
with open(top + "/héllo wörld.txt", "w") as f: f.write("grüße 你好 ✓\n" * 100)
with open(top + "/日本語 ディレクトリ/ファイル.bin", "wb") as f: f.write(os.urandom(300000))
with open(top + "/sub/deeper/random.bin", "wb") as f: f.write(os.urandom(3 << 20))
with open(top + "/sub/empty-file", "wb"): pass
with open(top + "/sub/script.sh", "w") as f: f.write("#!/bin/sh\necho hi\n")
os.chmod(top + "/sub/script.sh", 0o755)
with open(top + "/sparse.img", "wb") as f:
    f.seek(%d - 5); f.write(b"tail!")
    f.seek(1 << 20); f.write(b"middle")
os.symlink("sub/deeper/random.bin", top + "/link-to-file")
os.symlink("日本語 ディレクトリ", top + "/link-to-dir")
os.symlink("../../héllo wörld.txt", top + "/sub/deeper/link-up")
os.symlink("does-not-exist", top + "/dangling")
""" % SPARSE

# {relative path: [type, sha256 | link target | None, mode]} of a tree.
DESCRIBE = r"""
import hashlib, json, os, stat, sys
top = sys.argv[1]
out = {}
for d, dirs, files in os.walk(top):
    for n in dirs + files:
        p = os.path.join(d, n)
        st = os.lstat(p)
        rel = os.path.relpath(p, top)
        if stat.S_ISLNK(st.st_mode):
            out[rel] = ["link", os.readlink(p), 0]
        elif stat.S_ISDIR(st.st_mode):
            out[rel] = ["dir", None, 0]
        else:
            h = hashlib.sha256()
            with open(p, "rb") as f:
                while True:
                    b = f.read(1 << 20)
                    if not b: break
                    h.update(b)
            out[rel] = ["file", h.hexdigest(), st.st_mode & 0o777]
print(json.dumps(out, sort_keys=True))
"""


def q(s):
    return urllib.parse.quote(s, safe="")


def sbexec(srv, sid, argv):
    r = srv.exec(sid, argv, timeout_s=300)
    if r["exit_code"] != 0:
        raise RuntimeError("%s: %s %s" % (argv[:3], r["stdout"][-500:], r["stderr"][-500:]))
    return r["stdout"]


def describe(srv, sid, top):
    return json.loads(sbexec(srv, sid, ["python3", "-c", DESCRIBE, top]))


def download_archive(srv, sid, path, fmt, dest):
    with open(dest, "wb") as f:
        status, headers, n = dbx.stream_download(
            srv, "/v1/sandboxes/%s/files/archive?path=%s&format=%s" % (sid, q(path), fmt),
            f.write)
    return status, dict((k.lower(), v) for k, v in headers), n


def upload_archive(srv, sid, path, fmt, src, extra=""):
    size = os.path.getsize(src)

    def chunks():
        with open(src, "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    return
                yield b
    return dbx.stream_upload(
        srv, "/v1/sandboxes/%s/files/archive?path=%s&format=%s%s" % (sid, q(path), fmt, extra),
        chunks(), length=size)


def members_of(fmt, path):
    """{name: kind} of an archive read back with Python's own readers."""
    out = {}
    if fmt == "zip":
        with zipfile.ZipFile(path) as z:
            for i in z.infolist():
                mode = i.external_attr >> 16
                out[i.filename.rstrip("/")] = ("link" if stat.S_ISLNK(mode) else
                                               "dir" if i.is_dir() else "file")
        return out
    with tarfile.open(path, "r:gz" if fmt == "tar.gz" else "r:") as tf:
        for m in tf.getmembers():
            out[m.name.rstrip("/")] = ("link" if m.issym() else "dir" if m.isdir() else
                                       "file" if m.isfile() else "other")
    return out


def round_trips(t, srv, sid, scratch):
    sbexec(srv, sid, ["python3", "-c", MAKE_TREE, "/workspace/src"])
    want = describe(srv, sid, "/workspace/src")
    t.ok("sparse.img" in want and "link-to-dir" in want and "empty/also-empty" in want,
         "the source tree is there (%d entries)" % len(want))
    for fmt in ("tar", "tar.gz", "zip"):
        arc = os.path.join(scratch, "tree." + fmt)
        t0 = time.time()
        hwm0 = dbx.proc_mem_kib(srv.proc.pid)["VmHWM"]
        status, headers, n = download_archive(srv, sid, "/workspace/src", fmt, arc)
        hwm1 = dbx.proc_mem_kib(srv.proc.pid)["VmHWM"]
        t.ok(hwm1 - hwm0 < 32 * 1024, "%s: deskboxd's memory stays flat (VmHWM %+d KiB)" %
             (fmt, hwm1 - hwm0))
        t.eq(status, 200, "%s: download answers 200 (%d bytes, %.1f s)" %
             (fmt, n, time.time() - t0))
        t.ok(headers.get("transfer-encoding") == "chunked",
             "%s: the archive is streamed (chunked)" % fmt)
        t.eq(headers.get("content-disposition"), 'attachment; filename="src.%s"' % fmt,
             "%s: named after the directory" % fmt)
        got = members_of(fmt, arc)
        kinds = dict((k, v[0]) for k, v in want.items())
        t.eq(got, kinds, "%s: Python's reader sees every member with its kind" % fmt)
        listed = subprocess.run(["bsdtar", "-tf", arc], capture_output=True)
        names = set(x.rstrip("/") for x in listed.stdout.decode().splitlines())
        t.eq((listed.returncode, names), (0, set(kinds)), "%s: bsdtar lists the same" % fmt)
        dst = "/workspace/dst-" + fmt.replace(".", "")
        t0 = time.time()
        r = upload_archive(srv, sid, dst, fmt, arc)
        t.eq(r.status, 201, "%s: upload answers 201 (%.1f s) %s" %
             (fmt, time.time() - t0, r.body[:200]))
        if r.status == 201:
            t.eq(r.json()["members"], len(want), "%s: every member unpacked" % fmt)
        t.eq(describe(srv, sid, dst), want,
             "%s: same tree after the round trip (sha256 of every file, links, modes)" % fmt)
        os.unlink(arc)
    # The unpacked sparse file stays sparse: holes are not written.
    out = sbexec(srv, sid, ["stat", "-c", "%s %b %B", "/workspace/dst-targz/sparse.img"])
    size, blocks, bsize = (int(x) for x in out.split())
    t.ok(size == SPARSE and blocks * bsize < 16 << 20,
         "the 1 GiB sparse file is unpacked sparse (%d KiB on disk)" % (blocks * bsize >> 10))
    owner = sbexec(srv, sid, ["stat", "-c", "%u:%g", "/workspace/dst-tar/sub/script.sh"])
    t.eq(owner.strip(), "1000:1000", "unpacked files belong to the sandbox user")
    # Unpacking onto a directory that is not empty is refused.
    arc = os.path.join(scratch, "small.tar")
    with tarfile.open(arc, "w") as tf:
        add_bytes(tf, "x.txt", b"x")
    r = upload_archive(srv, sid, "/workspace/dst-tar", "tar", arc)
    t.eq(r.status, 409, "unpacking onto a non-empty directory answers 409")
    r = upload_archive(srv, sid, "/workspace/new/deep/dir", "tar", arc)
    t.eq(r.status, 404, "a missing parent answers 404 without parents=1")
    r = upload_archive(srv, sid, "/workspace/new/deep/dir", "tar", arc, "&parents=1")
    t.eq(r.status, 201, "parents=1 makes the parents")
    sbexec(srv, sid, ["mkdir", "/workspace/dst-tar/日本 \"x\""])
    r = srv.request("GET", "/v1/sandboxes/%s/files/archive?path=%s&format=zip" %
                    (sid, q("/workspace/dst-tar/日本 \"x\"")))
    t.eq(r.header("Content-Disposition"),
         "attachment; filename=\"archive.zip\"; filename*=UTF-8''"
         "%E6%97%A5%E6%9C%AC%20%22x%22.zip", "a non-ASCII name goes in filename*")
    r = srv.request("GET", "/v1/sandboxes/%s/files/archive?path=%s&format=rar" %
                    (sid, q("/workspace/src")))
    t.eq(r.status, 400, "an unknown format answers 400")
    r = srv.request("GET", "/v1/sandboxes/%s/files/archive?path=%s" %
                    (sid, q("/workspace/src/héllo wörld.txt")))
    t.eq(r.status, 400, "archiving a file (not a directory) answers 400")


def add_bytes(tf, name, data, mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = mode
    tf.addfile(ti, io.BytesIO(data))


def add_special(tf, name, kind, target=""):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.linkname = target
    if kind == tarfile.CHRTYPE:
        ti.devmajor, ti.devminor = 1, 3
    tf.addfile(ti)


def malicious(t, srv, sid, scratch):
    cases = []

    def tar_case(label, build, code=400):
        path = os.path.join(scratch, "evil-%d.tar" % len(cases))
        with tarfile.open(path, "w") as tf:
            add_bytes(tf, "innocent.txt", b"first member, fine\n")
            build(tf)
        cases.append((label, "tar", path, code))

    tar_case("zip-slip '../'", lambda tf: add_bytes(tf, "../../escaped.txt", b"x"))
    tar_case("'..' inside a name", lambda tf: add_bytes(tf, "a/../../escaped.txt", b"x"))
    tar_case("absolute name", lambda tf: add_bytes(tf, "/tmp/escaped.txt", b"x"))

    def link_then_file(tf):
        add_special(tf, "ln", tarfile.SYMTYPE, "/tmp")
        add_bytes(tf, "ln/escaped.txt", b"x")
    tar_case("symlink out, then a file through it", link_then_file)

    def inner_link_then_file(tf):
        add_special(tf, "innocent-dir", tarfile.DIRTYPE)
        add_special(tf, "ln2", tarfile.SYMTYPE, "innocent-dir")
        add_bytes(tf, "ln2/through.txt", b"x")
    tar_case("a file through a symlink inside the tree", inner_link_then_file)
    tar_case("symlink climbing out", lambda tf: add_special(tf, "sub/up", tarfile.SYMTYPE,
                                                           "../../etc"))
    tar_case("device node", lambda tf: add_special(tf, "null", tarfile.CHRTYPE))
    tar_case("FIFO", lambda tf: add_special(tf, "fifo", tarfile.FIFOTYPE))
    tar_case("hard link out", lambda tf: add_special(tf, "hl", tarfile.LNKTYPE, "/etc/passwd"))

    path = os.path.join(scratch, "evil-slip.zip")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("fine.txt", "fine")
        z.writestr("../../zip-slip.txt", "x")
    cases.append(("zip-slip in a zip", "zip", path, 400))
    path = os.path.join(scratch, "not-an-archive.tar.gz")
    with open(path, "wb") as f:
        f.write(os.urandom(10000))
    cases.append(("random bytes", "tar.gz", path, 400))
    path = os.path.join(scratch, "truncated.tar")
    with tarfile.open(path, "w") as tf:
        add_bytes(tf, "big.bin", os.urandom(1 << 20))
    with open(path, "r+b") as f:
        f.truncate(600000)
    cases.append(("a truncated tar", "tar", path, 400))

    path = os.path.join(scratch, "many.tar.gz")
    with tarfile.open(path, "w:gz", compresslevel=1) as tf:
        ti = tarfile.TarInfo("x")
        for i in range(100001):
            ti.name = "d%d/%d" % (i // 1000, i)
            tf.addfile(ti)
    cases.append(("100001 members (one past the limit)", "tar.gz", path, 413))

    for label, fmt, path, code in cases:
        r = upload_archive(srv, sid, "/workspace/evil", fmt, path)
        ok = r.status == code
        t.ok(ok, "%s: refused with %d (%s)" % (label, r.status, r.body[:160].decode(errors="replace")))
        left = sbexec(srv, sid, ["sh", "-c",
                                 "ls -A /workspace | grep -e evil -e deskbox; "
                                 "ls /tmp/escaped.txt /escaped.txt /workspace/../escaped.txt "
                                 "/zip-slip.txt 2>/dev/null; true"])
        t.eq(left.strip(), "", "%s: leaves nothing behind" % label)


def zip_bomb(t, srv, scratch):
    sid = srv.create({"disk_mb": BOMB_DISK_MB})["id"]
    path = os.path.join(scratch, "bomb.zip")
    # 256 MiB of zeros per member compresses to ~250 KiB: 1 GiB from ~1 MiB.
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        block = b"\0" * (1 << 20)
        for i in range(4):
            with z.open("zeros-%d" % i, "w", force_zip64=True) as f:
                for _ in range(256):
                    f.write(block)
    t.ok(os.path.getsize(path) < 8 << 20, "the bomb is small (%d KiB)" %
         (os.path.getsize(path) >> 10))
    r = upload_archive(srv, sid, "/workspace/bomb", "zip", path)
    t.ok(r.status in (413, 507), "a zip bomb past the disk's size is refused (%d %s)" %
         (r.status, r.body[:160]))
    left = sbexec(srv, sid, ["sh", "-c", "ls -A /workspace; df -k /workspace | tail -1"])
    t.ok("bomb" not in left and "deskbox" not in left, "the bomb leaves nothing: %s" %
         left.strip().replace("\n", " | "))
    srv.request("DELETE", "/v1/sandboxes/" + sid)


def multipart(fields, boundary="dbxbatchboundary"):
    out = io.BytesIO()
    for name, data in fields:
        out.write(b"--%s\r\n" % boundary.encode())
        out.write(b'Content-Disposition: form-data; name="%s"; filename="f"\r\n' %
                  name.encode())
        out.write(b"Content-Type: application/octet-stream\r\n\r\n")
        out.write(data)
        out.write(b"\r\n")
    out.write(b"--%s--\r\n" % boundary.encode())
    return out.getvalue(), "multipart/form-data; boundary=" + boundary


def batch(t, srv, sid):
    files = [("/workspace/batch/a.txt", b"alpha\n"),
             ("batch/nested/b.bin", os.urandom(200000)),
             ("batch/empty", b""),
             ("batch/ünï cödé.txt", "ü\n".encode()),
             ("/workspace/batch/big.bin", os.urandom(5 << 20))]
    files += [("batch/many/%03d.txt" % i, b"%d\n" % i) for i in range(100)]
    body, ctype = multipart(files)
    base = "/v1/sandboxes/%s/files/batch" % sid
    r = srv.request("POST", base + "?parents=1", body, headers={"Content-Type": ctype})
    t.eq(r.status, 201, "batch upload of %d files answers 201" % len(files))
    got = r.json()["files"] if r.status == 201 else []
    t.eq(len(got), len(files), "the answer lists every file")
    want = dict(("/workspace/" + p if not p.startswith("/") else p,
                 hashlib.sha256(d).hexdigest()) for p, d in files)
    t.eq(dict((f["path"], f["sha256"]) for f in got), want, "paths and sha256 match")
    tree = describe(srv, sid, "/workspace/batch")
    on_disk = dict(("/workspace/batch/" + k, v[1]) for k, v in tree.items() if v[0] == "file")
    t.eq(on_disk, want, "every file is on disk with its content")
    # Atomic per file: a bad part stops the batch; the files before it are
    # complete, the bad one and those after it are not there.
    body, ctype = multipart([("/workspace/b2/one.txt", b"1"), ("/workspace/b2/../x", b"2"),
                             ("/workspace/b2/three.txt", b"3")])
    r = srv.request("POST", base + "?parents=1", body, headers={"Content-Type": ctype})
    t.eq(r.status, 400, "a part with a '..' path answers 400: %s" % r.body[:160])
    left = sbexec(srv, sid, ["sh", "-c", "ls -A /workspace/b2"])
    t.eq(left.split(), ["one.txt"], "the file before the bad part was written, nothing else")
    r = srv.request("POST", base, b"x", headers={"Content-Type": "text/plain"})
    t.eq(r.status, 415, "a body that is not multipart answers 415")
    body, ctype = multipart([])
    r = srv.request("POST", base, body, headers={"Content-Type": ctype})
    t.eq(r.status, 400, "a batch without files answers 400")


def crash_sweep(t, scratch):
    """kill -9 of deskboxd in the middle of an archive upload: the next
    start sweeps the temporary directory away; a resumable upload's staged
    bytes stay."""
    state = tempfile.mkdtemp(prefix="dbx-tree-state-")
    srv = dbx.Server(state_dir=state)
    sid = srv.create()["id"]
    try:
        r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=%s" % (sid, q("/workspace/p")),
                        b"abc", headers={"Content-Range": "bytes 0-2/10"})
        t.eq(r.status, 202, "a resumable upload staged 3 bytes")
        import socket
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
        s.sendall(("PUT /v1/sandboxes/%s/files/archive?path=%s&format=tar HTTP/1.1\r\n"
                   "Host: x\r\nAuthorization: Bearer %s\r\nContent-Length: 10000000\r\n\r\n" %
                   (sid, q("/workspace/half"), srv.token)).encode())
        s.sendall(b"\0" * 100000)
        upper = os.path.join(srv.upper_dir(sid), "workspace")
        t.ok(dbx.wait_until(lambda: any(n.startswith(".deskbox-upload-")
                                        for n in os.listdir(upper)), timeout=30),
             "an archive upload in flight has its temporary directory")
        srv.kill()
        s.close()
        srv = dbx.Server(state_dir=state)
        t.eq(srv.request("POST", "/v1/sandboxes/%s/start" % sid).status, 200,
             "the sandbox starts again after kill -9")
        ls = srv.exec(sid, ["ls", "-A", "/workspace"])["stdout"].split()
        t.ok(not any(n.startswith(".deskbox-upload-") for n in ls) and "half" not in ls,
             "the start swept the temporary directory: %s" % ls)
        r = srv.request("GET", "/v1/sandboxes/%s/files/upload-status?path=%s" %
                        (sid, q("/workspace/p")))
        t.eq(r.json().get("received"), 3, "the resumable upload's 3 bytes are still staged")
    finally:
        srv.stop()
        srv.cleanup()
        subprocess.run(["rm", "-rf", state])


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    scratch = tempfile.mkdtemp(prefix="dbx-tree-")
    try:
        sid = srv.create()["id"]
        round_trips(t, srv, sid, scratch)
        malicious(t, srv, sid, scratch)
        zip_bomb(t, srv, scratch)
        batch(t, srv, sid)
        crash_sweep(t, scratch)
        t.eq(srv.request("DELETE", "/v1/sandboxes/" + sid).status, 204, "delete the sandbox")
    finally:
        subprocess.run(["rm", "-rf", scratch])
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
