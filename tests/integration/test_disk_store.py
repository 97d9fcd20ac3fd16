"""The disk store (docs/lifecycle.md): --disk-store direct keeps the images
in the sandboxes' own directories; a sandbox made so keeps working when
the next deskboxd uses the store (it starts with its files, its
checkpoints restore, a fork of it lands in the store); deleting a
checkpoint gives back the blocks its sandbox rewrote since; a full store
is a 507 naming it, for checkpoints, restores, forks and creates alike, and a
delete makes room again; bad flag values are refused; no loop device
outlives deskboxd."""

import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

TREE = ("cd / && find workspace -xdev -type f -print0 | sort -z | xargs -0 sha256sum | "
        "sha256sum | cut -c1-16")


def base(sid):
    return "/v1/sandboxes/%s" % sid


def sh(srv, sid, cmd):
    return srv.exec(sid, ["sh", "-c", cmd], timeout_s=600)["stdout"]


def err(r):
    try:
        return r.status, r.json()["error"]["code"], r.json()["error"]["message"]
    except (ValueError, KeyError):
        return r.status, None, r.body[:200]


def loops_under(path):
    found = []
    for f in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(f) as fh:
                if fh.read().startswith(path):
                    found.append(f.split("/")[3])
        except OSError:
            pass
    return found


def bad_flags(t):
    for args in (["--disk-store", "zfs"], ["--disk-store-size", "10"],
                 ["--disk-store-size", "big"]):
        p = subprocess.run([os.path.join(dbx.BUILD, "deskboxd")] + args, capture_output=True,
                           text=True, timeout=30)
        t.ok(p.returncode != 0 and "%s: bad value" % args[0] in p.stderr,
             "deskboxd %s is refused, naming the option" % " ".join(args), p.stderr[-200:])


def direct_then_store(t, state):
    """A sandbox made with --disk-store direct, then served from the store."""
    srv = dbx.Server(state_dir=state, args=["--disk-store", "direct"])
    servers = [srv]
    try:
        t.ok(not os.path.exists(os.path.join(state, "store.xfs")), "direct: no disk store")
        sid = srv.create({})["id"]
        sh(srv, sid, "head -c 1048576 /dev/urandom > /workspace/old && echo a > /workspace/a")
        h0 = sh(srv, sid, TREE)
        t.ok(os.path.exists(os.path.join(state, "sandboxes", sid, "disk.img")),
             "direct: the image is in the sandbox's directory")
        r = srv.request("POST", base(sid) + "/checkpoints", {"name": "old"})
        t.eq(r.status, 201, "direct: a checkpoint")
        t.ok(os.path.exists(srv.ns_path("sandboxes", sid, "checkpoints", "old", "disk.img")),
             "direct: beside the image")
        t.eq(srv.stop(), 0, "deskboxd stops")

        srv = dbx.Server(state_dir=state)
        servers.append(srv)
        fstype = subprocess.run(["stat", "-f", "-c", "%T", state], capture_output=True,
                                text=True).stdout.strip()
        if fstype in ("xfs", "btrfs"):
            t.diag("the state dir is %s: auto makes no store; using pool" % fstype)
            srv.stop()
            srv = dbx.Server(state_dir=state, args=["--disk-store", "pool"])
            servers.append(srv)
        t.ok(os.path.exists(os.path.join(state, "store.xfs")), "the next deskboxd made the store")
        t.eq(srv.request("POST", base(sid) + "/start").status, 200,
             "the sandbox from before the store starts")
        t.eq(sh(srv, sid, TREE), h0, "with its files")
        sh(srv, sid, "echo b > /workspace/a")
        r = srv.request("POST", base(sid) + "/checkpoints/old/restore")
        t.eq(r.status, 200, "its old checkpoint restores")
        t.eq(sh(srv, sid, TREE), h0, "to its tree")
        r = srv.request("POST", base(sid) + "/fork", {"checkpoint": "old"})
        t.eq(r.status, 201, "a fork of it")
        if r.status == 201:
            fid = r.json()["id"]
            t.eq(sh(srv, fid, TREE), h0, "has its tree (copied into the store)")
            t.ok(os.path.exists(srv.ns_path("store", "sandboxes", fid, "disk.img")),
                 "and lives in the store")
            t.eq(srv.request("DELETE", base(fid)).status, 204, "delete the fork")
        new = srv.create({})["id"]
        t.ok(os.path.exists(srv.ns_path("store", "sandboxes", new, "disk.img")) and
             not os.path.exists(os.path.join(state, "sandboxes", new, "disk.img")),
             "a new sandbox's image is in the store")
        for s in (sid, new):
            t.eq(srv.request("DELETE", base(s)).status, 204, "delete")
        t.eq(os.listdir(srv.ns_path("store", "sandboxes")), [], "the store is empty again")
    finally:
        dbx.stop_servers(t, servers, state)


def checkpoint_room(t, srv, state):
    """A checkpoint holds the blocks its sandbox rewrote since; deleting it
    gives them back to the host."""
    sid = srv.create({})["id"]
    sh(srv, sid, "dd if=/dev/urandom of=/workspace/a bs=1M count=64 status=none; sync")
    t.eq(srv.request("POST", base(sid) + "/checkpoints", {"name": "c"}).status, 201,
         "a checkpoint of 64 MiB")
    sh(srv, sid, "dd if=/dev/urandom of=/workspace/a bs=1M count=64 conv=notrunc "
                 "status=none; sync")
    held = dbx.store_du(state)
    t.eq(srv.request("DELETE", base(sid) + "/checkpoints/c").status, 204,
         "the sandbox rewrote them; delete the checkpoint")
    t.ok(dbx.wait_until(lambda: dbx.store_du(state) < held - (48 << 20), timeout=60),
         "the blocks only it held go back to the host (%d -> %d MiB)" %
         (held >> 20, dbx.store_du(state) >> 20))
    t.eq(srv.request("DELETE", base(sid)).status, 204, "delete the sandbox")
    st = os.statvfs(srv.ns_path("store"))
    dbx.wait_until(lambda: os.statvfs(srv.ns_path("store")).f_bfree * st.f_frsize > 200 << 20,
                   timeout=30)


def full_store(t, state):
    """The smallest store mkfs.xfs makes (300 MiB) filled by one sandbox."""
    srv = dbx.Server(state_dir=state, args=["--disk-store", "pool", "--disk-store-size", "300"])
    try:
        checkpoint_room(t, srv, state)
        sid = srv.create({"disk_mb": 1024})["id"]
        t.eq(srv.request("POST", base(sid) + "/checkpoints", {"name": "early"}).status, 201,
             "a checkpoint before the store fills")
        out = sh(srv, sid, "dd if=/dev/urandom of=/workspace/fill bs=1M count=200 "
                           "status=none; sync; echo done")
        t.eq(out, "done\n", "200 MiB written into a 300 MiB store")
        st = os.statvfs(srv.ns_path("store"))
        t.diag("store: %d MiB free of %d" % (st.f_bavail * st.f_frsize >> 20,
                                            st.f_blocks * st.f_frsize >> 20))
        r = srv.request("POST", base(sid) + "/checkpoints", {"name": "x"})
        code = err(r)
        t.ok(code[:2] == (507, "insufficient_storage") and "disk store is full" in code[2],
             "a checkpoint into the full store: 507 saying so", code)
        code = err(srv.request("POST", base(sid) + "/fork"))
        t.ok(code[:2] == (507, "insufficient_storage"), "a fork: 507", code)
        code = err(srv.request("POST", "/v1/sandboxes", {}))
        t.ok(code[:2] == (507, "insufficient_storage") and "disk store" in code[2],
             "a create: 507", code)
        code = err(srv.request("POST", base(sid) + "/checkpoints/early/restore"))
        t.ok(code[:2] == (507, "insufficient_storage"), "a restore: 507", code)
        t.eq(srv.request("GET", base(sid)).json()["status"], "running",
             "and the sandbox was not stopped for it")
        t.eq([c["name"] for c in
              srv.request("GET", base(sid) + "/checkpoints").json()["checkpoints"]], ["early"],
             "nothing half-made is listed")
        t.eq(sh(srv, sid, "echo still > /workspace/ok && cat /workspace/ok"), "still\n",
             "the sandbox itself goes on working")
        t.eq(srv.request("DELETE", base(sid)).status, 204, "delete it")
        ok = dbx.wait_until(lambda: srv.request("POST", "/v1/sandboxes", {}).status == 201,
                            timeout=60, interval=1)
        t.ok(ok, "then there is room for a create again")
        for sb in srv.request("GET", "/v1/sandboxes").json()["sandboxes"]:
            srv.request("DELETE", base(sb["id"]))
    finally:
        dbx.stop_servers(t, [srv], state)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    bad_flags(t)
    a = tempfile.mkdtemp(prefix="dbx-store-")
    b = tempfile.mkdtemp(prefix="dbx-store-")
    direct_then_store(t, a)
    full_store(t, b)
    t.ok(dbx.wait_until(lambda: not loops_under(a) and not loops_under(b), timeout=15),
         "no loop device outlives deskboxd", loops_under(a) + loops_under(b))
    t.done()


main()
