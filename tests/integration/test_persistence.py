"""Persistence: stop/start keeps the whole filesystem (including /tmp and
home), files move in and out of a stopped sandbox, and deskboxd restarted
after a clean stop or a kill -9 in the middle of an upload lists every
sandbox with its true status and every file intact, with no upload litter
and half-created sandboxes rolled back."""

import hashlib
import json
import os
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def q(path):
    return urllib.parse.quote(path, safe="")


def base(sid):
    return "/v1/sandboxes/%s" % sid


def status_of(srv, sid):
    r = srv.request("GET", base(sid))
    return r.json()["status"] if r.status == 200 else r.status


def download(srv, sid, path):
    r = srv.request("GET", "%s/files/download?path=%s" % (base(sid), q(path)))
    return r.body if r.status == 200 else r.status


def litter(srv, sid):
    """Temporary upload files in the sandbox's upper layer, on its disk as
    deskboxd sees it (os.walk never follows the sandbox's symlinks)."""
    found = []
    for d, _, names in os.walk(srv.upper_dir(sid)):
        found += [os.path.join(d, n) for n in names if n.startswith(".deskbox-upload-")]
    return found


def check_desktop(t, srv, sid, what):
    shot = srv.request("GET", base(sid) + "/desktop/screenshot")
    t.eq(shot.status, 200, "%s: the desktop answers screenshots" % what)
    res = srv.exec(sid, ["sh", "-c", "DISPLAY=:0 xdpyinfo >/dev/null 2>&1 || "
                                     "test -S /tmp/.X11-unix/X0; echo $?"])
    t.eq(res["stdout"], "0\n", "%s: X accepts clients" % what)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    state = tempfile.mkdtemp(prefix="dbx-persist-")
    srv = dbx.Server(state_dir=state)
    servers = [srv]
    try:
        sid = srv.create()["id"]
        v1 = os.urandom(3 << 20)
        r = srv.request("PUT", "%s/files/upload?path=/workspace/data.bin" % base(sid), v1)
        t.eq(r.status, 201, "upload a file")
        srv.exec(sid, ["sh", "-c", "echo tmp > /tmp/t.txt && echo home > /home/user/h.txt && "
                                   "mkdir -p /workspace/proj && echo src > /workspace/proj/a.c"])

        # ---- stop / start ----
        t0 = time.time()
        r = srv.request("POST", base(sid) + "/stop")
        t.eq(r.status, 200, "stop answers 200")
        t.diag("stop took %.0f ms" % ((time.time() - t0) * 1000))
        t.eq(r.json().get("status") if r.status == 200 else None, "stopped",
             "stop answers the sandbox, stopped")
        t.eq(status_of(srv, sid), "stopped", "status is stopped")
        r = srv.request("POST", base(sid) + "/process/exec", {"argv": ["true"]})
        t.eq(r.status, 409, "exec in a stopped sandbox: 409")
        t.eq(srv.request("POST", base(sid) + "/stop").status, 200, "stop again is fine")
        t.eq(download(srv, sid, "/workspace/data.bin"), v1, "download from a stopped sandbox")
        t.eq(download(srv, sid, "/tmp/t.txt"), b"tmp\n", "/tmp persists while stopped")
        r = srv.request("PUT", "%s/files/upload?path=/workspace/while-stopped.txt" % base(sid),
                        "offline\n")
        t.eq(r.status, 201, "upload into a stopped sandbox")
        r = srv.request("GET", "%s/files/list?path=/workspace" % base(sid))
        names = sorted(e["name"] for e in r.json()["entries"]) if r.status == 200 else None
        t.eq(names, ["data.bin", "proj", "while-stopped.txt"], "list a stopped sandbox")

        t0 = time.time()
        r = srv.request("POST", base(sid) + "/start")
        t.eq(r.status, 200, "start answers 200")
        t.diag("start took %.0f ms" % ((time.time() - t0) * 1000))
        t.eq(r.json().get("id") if r.status == 200 else None, sid, "same id")
        t.eq(status_of(srv, sid), "running", "status is running")
        check_desktop(t, srv, sid, "after start")
        res = srv.exec(sid, ["sh", "-c", "cat /tmp/t.txt /home/user/h.txt /workspace/proj/a.c "
                                         "/workspace/while-stopped.txt; sha256sum "
                                         "/workspace/data.bin"])
        t.eq(res["stdout"].split("\n")[:4], ["tmp", "home", "src", "offline"],
             "every file is there after start (/tmp, home, workspace, offline upload)")
        t.ok(hashlib.sha256(v1).hexdigest() in res["stdout"], "data intact after start")
        t.eq(srv.request("POST", base(sid) + "/start").status, 200, "start again is fine")

        # ---- clean restart of deskboxd ----
        t.eq(srv.stop(), 0, "deskboxd stops cleanly")
        srv = dbx.Server(state_dir=state)
        servers.append(srv)
        r = srv.request("GET", "/v1/sandboxes")
        ids = [s["id"] for s in r.json()["sandboxes"]]
        t.eq(ids, [sid], "after a clean restart the sandbox is listed")
        t.eq(status_of(srv, sid), "stopped", "and says stopped")
        t.eq(download(srv, sid, "/workspace/data.bin"), v1, "its files are intact")
        r = srv.request("POST", base(sid) + "/start")
        t.eq(r.status, 200, "it starts again")
        check_desktop(t, srv, sid, "after restart")
        res = srv.exec(sid, ["cat", "/tmp/t.txt"])
        t.eq(res["stdout"], "tmp\n", "/tmp survived the restart")

        # ---- kill -9 in the middle of an upload ----
        old = os.urandom(2 << 20)
        t.eq(srv.request("PUT", "%s/files/upload?path=/workspace/big.bin" % base(sid),
                         old).status, 201, "upload the old content")
        import socket
        s = socket.create_connection(("127.0.0.1", srv.port))
        total = 64 << 20
        s.sendall(("PUT %s/files/upload?path=/workspace/big.bin HTTP/1.1\r\nHost: x\r\n"
                   "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n" %
                   (base(sid), srv.token, total)).encode())
        for _ in range(16):
            s.sendall(b"n" * (1 << 20))
        deadline = time.time() + 10
        while not litter(srv, sid) and time.time() < deadline:
            time.sleep(0.05)
        t.ok(litter(srv, sid), "the upload's temporary file exists mid-upload")
        srv.kill()
        s.close()
        # A sandbox that was half created when deskboxd died.
        half = "0123456789abcdef0123456789abcdef"
        os.makedirs(os.path.join(state, "sandboxes", half, "upper"))
        with open(os.path.join(state, "sandboxes", half, "sandbox.json"), "w") as f:
            json.dump({"id": half, "status": "creating"}, f)

        srv = dbx.Server(state_dir=state)
        servers.append(srv)
        r = srv.request("GET", "/v1/sandboxes")
        listed = dict((s["id"], s["status"]) for s in r.json()["sandboxes"])
        t.eq(listed, {sid: "stopped"}, "after kill -9: listed, stopped (its container is gone)")
        t.eq(srv.request("POST", base(sid) + "/process/exec", {"argv": ["true"]}).status, 409,
             "and it really is not running")
        t.ok(not os.path.exists(os.path.join(state, "sandboxes", half)),
             "the half-created sandbox was rolled back")
        t.eq(litter(srv, sid), [], "no temporary upload files are left")
        t.eq(download(srv, sid, "/workspace/big.bin"), old, "the old content is intact")
        t.eq(download(srv, sid, "/workspace/data.bin"), v1, "other files are intact")
        r = srv.request("POST", base(sid) + "/start")
        t.eq(r.status, 200, "the sandbox starts after the kill -9")
        check_desktop(t, srv, sid, "after kill -9")
        res = srv.exec(sid, ["sha256sum", "/workspace/big.bin"])
        t.ok(hashlib.sha256(old).hexdigest() in res["stdout"], "the sandbox sees the old content")
        t.eq(srv.request("DELETE", base(sid)).status, 204, "delete")
        t.ok(not os.path.exists(os.path.join(state, "sandboxes", sid)), "its state is gone")
    finally:
        dbx.stop_servers(t, servers, state)
    t.done()


main()
