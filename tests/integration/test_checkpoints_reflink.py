"""Checkpoints on a state dir with reflinks (XFS made by the test): a
checkpoint, restore and fork clone the sandbox's disk image instead of
copying it, so checkpointing 1 GiB of written files takes no more room
and about as long as checkpointing 1 MiB, and the clones are still
independent (a restore gives back the checkpoint's tree, exactly)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

TREE = ("cd / && find workspace -xdev -type f -print0 | sort -z | xargs -0 sha256sum | "
        "sha256sum | cut -c1-16")


def base(sid):
    return "/v1/sandboxes/%s" % sid


def sh(srv, sid, cmd, timeout_s=600):
    return srv.exec(sid, ["sh", "-c", cmd], timeout_s=timeout_s)["stdout"]


def main():
    dbx.require_root_and_tools()
    xfs = dbx.ReflinkStateDir()
    if not xfs.path:
        dbx.skip_all(xfs.why)
        return
    t = dbx.Tap()
    srv = None
    try:
        srv = dbx.Server(state_dir=xfs.path)
        sid = srv.create({})["id"]
        sh(srv, sid, "head -c 1048576 /dev/urandom > /workspace/small && sync")
        small = srv.request("POST", base(sid) + "/checkpoints", {"name": "small"}).json()
        t.ok("frozen_ms" in small, "a checkpoint with 1 MiB written", small)
        sh(srv, sid, "dd if=/dev/urandom of=/workspace/big bs=1M count=1024 status=none && sync")
        h_big = sh(srv, sid, TREE)
        used0 = xfs.used()
        big = srv.request("POST", base(sid) + "/checkpoints", {"name": "big"}).json()
        grew = xfs.used() - used0
        t.ok("frozen_ms" in big, "a checkpoint with 1 GiB written", big)
        t.ok(grew < 64 << 20, "it took no room for the 1 GiB (a reflink): %.1f MiB" % (grew / 2**20))
        t.diag("checkpoint: 1 MiB %.1f ms (frozen %.1f), 1 GiB %.1f ms (frozen %.1f)" %
               (small.get("duration_ms", -1), small.get("frozen_ms", -1),
                big.get("duration_ms", -1), big.get("frozen_ms", -1)))
        t.ok(big.get("duration_ms", 1e9) < 3 * small.get("duration_ms", 0) + 200,
             "and about as long as the 1 MiB one (not growing with the data)")
        sh(srv, sid, "rm /workspace/big && echo changed > /workspace/small && sync")
        r = srv.request("POST", base(sid) + "/checkpoints/big/restore")
        t.eq((r.status, r.json().get("status")), (200, "running"), "restore")
        t.diag("restore at 1 GiB: %.0f ms (desktop start included)" % r.json().get("duration_ms", -1))
        t.eq(sh(srv, sid, TREE), h_big, "the restored tree is the checkpoint's, exactly")
        r = srv.request("POST", base(sid) + "/fork", {"checkpoint": "big"})
        t.eq(r.status, 201, "fork from the 1 GiB checkpoint")
        if r.status == 201:
            fid = r.json()["id"]
            t.diag("fork at 1 GiB: %.0f ms" % r.json().get("duration_ms", -1))
            t.eq(sh(srv, fid, TREE), h_big, "the fork has the checkpoint's tree")
            sh(srv, fid, "rm /workspace/big && echo f > /workspace/small")
            t.eq(sh(srv, sid, TREE), h_big, "the fork's writes do not reach its parent")
            t.eq(sh(srv, sid, "cat /workspace/small | wc -c"), "1048576\n",
                 "nor the clone shared underneath")
        t.eq(srv.request("DELETE", base(sid)).status, 204, "delete")
    finally:
        if srv:
            rc = srv.stop()
            t.eq(rc, 0, "deskboxd exits cleanly")
            if t.failed:
                t.diag(srv.stderr())
            try:
                os.unlink(srv.log_path)
            except OSError:
                pass
        xfs.cleanup()
    t.done()


main()
