"""Checkpoints that clone instead of copying, so their cost does not grow
with the data: on the default state dir (ext4 on the reference host, so
deskboxd's own XFS disk store holds the images) and on a state dir with
reflinks of its own (an XFS made by the test).  In both, checkpoint,
restore and fork of a sandbox holding 1 GiB take about as long as with
1 MiB (generous bounds: the machine is shared) and the checkpoint takes no
room; the clones are independent (a restore gives back the checkpoint's
tree, exactly; a fork's writes reach neither its parent nor the blocks
they shared), and deleting them gives the room back to the host."""

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


def sh(srv, sid, cmd, timeout_s=600):
    return srv.exec(sid, ["sh", "-c", cmd], timeout_s=timeout_s)["stdout"]


def post(t, srv, path, body=None, status=201, what=""):
    r = srv.request("POST", path, body)
    t.eq(r.status, status, what)
    return r.json() if r.status == status else {}


def within(small, big):
    """The 1 GiB figure within noise of the 1 MiB one (3x + 200 ms)."""
    return big < 3 * small + 200


def not_slower(t, what, small, bigs, again):
    """Checks the 1 GiB cost against the 1 MiB one.  On a shared machine one
    measure can land in a burst of someone else's load, so a miss is
    measured again (`again()`, at most twice more) and the fastest counts:
    a cost that grows with the data misses every time."""
    while not within(small, min(bigs)) and len(bigs) < 3:
        bigs.append(again())
    t.diag("%s: 1 MiB %.0f ms, 1 GiB %s ms" % (what, small,
                                               "/".join("%.0f" % b for b in bigs)))
    t.ok(within(small, min(bigs)), "%s at 1 GiB takes about as long as at 1 MiB (%.0f vs %.0f "
         "ms)" % (what, min(bigs), small))


def again_ms(srv, path, body=None, then_delete=False):
    """A function that posts `path` once more and answers its duration_ms."""
    def once():
        r = srv.request("POST", path, body() if callable(body) else body)
        j = r.json() if r.status in (200, 201) else {}
        if then_delete and j.get("id"):
            srv.request("DELETE", base(j["id"]))
        return j.get("duration_ms", 1e9)
    return once


def costs(t, srv, tag, used):
    """Checkpoint, restore and fork at 1 MiB and at 1 GiB; `used()` is the
    bytes in use where the images are."""
    sid = srv.create({})["id"]
    sh(srv, sid, "head -c 1048576 /dev/urandom > /workspace/small && sync")
    h_small = sh(srv, sid, TREE)
    small = post(t, srv, base(sid) + "/checkpoints", {"name": "small"},
                 what="%s: a checkpoint with 1 MiB written" % tag)
    sh(srv, sid, "echo changed > /workspace/small")
    r_small = post(t, srv, base(sid) + "/checkpoints/small/restore", status=200,
                   what="%s: restore at 1 MiB" % tag)
    t.eq(sh(srv, sid, TREE), h_small, "%s: the restored 1 MiB tree is the checkpoint's" % tag)
    f_small = post(t, srv, base(sid) + "/fork", {"checkpoint": "small"},
                   what="%s: fork at 1 MiB" % tag)
    if f_small.get("id"):
        srv.request("DELETE", base(f_small["id"]))

    sh(srv, sid, "dd if=/dev/urandom of=/workspace/big bs=1M count=1024 status=none && sync")
    h_big = sh(srv, sid, TREE)
    used0 = used()
    big = post(t, srv, base(sid) + "/checkpoints", {"name": "big"},
               what="%s: a checkpoint with 1 GiB written" % tag)
    grew = used() - used0
    t.ok(grew < 64 << 20, "%s: it took no room for the 1 GiB (a clone): %.1f MiB" %
         (tag, grew / 2**20))
    sh(srv, sid, "rm /workspace/big && echo changed > /workspace/small && sync")
    r_big = post(t, srv, base(sid) + "/checkpoints/big/restore", status=200,
                 what="%s: restore at 1 GiB" % tag)
    t.eq(r_big.get("status"), "running", "%s: running again" % tag)
    t.eq(sh(srv, sid, TREE), h_big, "%s: the restored 1 GiB tree is the checkpoint's, exactly"
         % tag)
    f_big = post(t, srv, base(sid) + "/fork", {"checkpoint": "big"},
                 what="%s: fork from the 1 GiB checkpoint" % tag)
    fid = f_big.get("id")
    if fid:
        t.eq(sh(srv, fid, TREE), h_big, "%s: the fork has the checkpoint's tree" % tag)
        sh(srv, fid, "rm /workspace/big && echo f > /workspace/small")
        t.eq(sh(srv, sid, TREE), h_big, "%s: the fork's writes do not reach its parent" % tag)
        t.eq(sh(srv, sid, "cat /workspace/small | wc -c"), "1048576\n",
             "%s: nor the clone shared underneath" % tag)
        sh(srv, sid, "echo p > /workspace/parent")
        t.eq(sh(srv, fid, "test -e /workspace/parent; echo $?"), "1\n",
             "%s: nor do the parent's reach the fork" % tag)
    names = iter(["big2", "big3"])
    for what, a, b, again in (
            ("checkpoint", small, big,
             again_ms(srv, base(sid) + "/checkpoints", lambda: {"name": next(names)})),
            ("restore", r_small, r_big, again_ms(srv, base(sid) + "/checkpoints/big/restore")),
            ("fork", f_small, f_big,
             again_ms(srv, base(sid) + "/fork", {"checkpoint": "big"}, then_delete=True))):
        not_slower(t, "%s: %s" % (tag, what), a.get("duration_ms", 0),
                   [b.get("duration_ms", 1e9)], again)
    return sid, fid


def pool(t):
    """The default state dir: on a filesystem without reflinks deskboxd
    makes its own store and the images live there."""
    state = tempfile.mkdtemp(prefix="dbx-ckpt-pool-")
    srv = dbx.Server(state_dir=state)
    try:
        fstype = subprocess.run(["stat", "-f", "-c", "%T", state], capture_output=True,
                                text=True).stdout.strip()
        store = os.path.join(state, "store.xfs")
        if fstype in ("xfs", "btrfs"):
            t.diag("the state dir is %s: it clones itself, no disk store" % fstype)
        else:
            t.ok(os.path.exists(store), "on a state dir without reflinks (%s), deskboxd made its "
                 "disk store" % fstype)

        def used():
            st = os.statvfs(srv.ns_path("store") if os.path.exists(store) else state)
            return (st.f_blocks - st.f_bfree) * st.f_frsize
        sid, fid = costs(t, srv, "store", used)
        if os.path.exists(store):
            t.ok(os.path.exists(srv.ns_path("store", "sandboxes", sid, "disk.img")) and
                 os.path.isdir(srv.ns_path("store", "sandboxes", sid, "checkpoints", "big")),
                 "the image and its checkpoints are in the store")
            before = dbx.store_du(state)
            for s in (fid, sid):
                if s:
                    t.eq(srv.request("DELETE", base(s)).status, 204, "delete")
            t.ok(dbx.wait_until(lambda: dbx.store_du(state) < before - (900 << 20), timeout=60),
                 "deleting them gives the store's room back to the host (%d -> %d MiB)" %
                 (before >> 20, dbx.store_du(state) >> 20))
            t.ok(not os.path.exists(srv.ns_path("store", "sandboxes", sid)),
                 "nothing of them is left in the store")
    finally:
        dbx.stop_servers(t, [srv], state)


def xfs_state(t):
    """A state dir that has reflinks itself: no store, the images clone in
    the sandboxes' own directories."""
    xfs = dbx.ReflinkStateDir()
    if not xfs.path:
        t.diag("no XFS state dir: %s" % xfs.why)
        return
    srv = None
    try:
        srv = dbx.Server(state_dir=xfs.path)
        t.ok(not os.path.exists(os.path.join(xfs.path, "store.xfs")),
             "a state dir with reflinks needs no disk store")
        sid, _ = costs(t, srv, "XFS state dir", xfs.used)
        t.eq(srv.request("DELETE", base(sid)).status, 204, "delete")
    finally:
        if srv:
            t.eq(srv.stop(), 0, "deskboxd exits cleanly")
            if t.failed:
                t.diag(srv.stderr())
            try:
                os.unlink(srv.log_path)
            except OSError:
                pass
        xfs.cleanup()


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    pool(t)
    xfs_state(t)
    t.done()


main()
