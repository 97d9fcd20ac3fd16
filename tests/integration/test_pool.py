"""The warm pool: --warm-pool keeps ready desktops that are not listed, a
matching create takes one (and a replacement starts), other creates are
cold, and pool members never survive a restart."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def containers(srv):
    root = os.path.join(srv.state_dir, "runtime")
    try:
        return sorted(d for d in os.listdir(root) if d.startswith("dbx-"))
    except OSError:
        return []


def wait_for(cond):
    """A pool fills in the background: up to a minute on a loaded machine."""
    return dbx.wait_until(cond, timeout=60, interval=0.2)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server(args=["--warm-pool", "2", "--warm-pool", "1:800x600"])
    state = srv.state_dir
    try:
        t.ok(wait_for(lambda: len(containers(srv)) == 3), "the pool fills to 3 desktops",
             containers(srv))
        r = srv.request("GET", "/v1/sandboxes")
        t.eq(r.json()["sandboxes"], [], "pool members are not listed")

        sb = srv.create({})
        sid = sb["id"]
        t.eq(sb["status"], "running", "a matching create gets a running sandbox")
        t.ok(("dbx-" + sid) in containers(srv), "it is one of the pool's desktops")
        t.eq(dbx.png_info(srv.screenshot(sid))[:2], (1280, 800), "its screen works")
        t.eq(srv.exec(sid, ["id", "-u"])["stdout"].strip(), "1000", "exec works in it")
        r = srv.request("GET", "/v1/sandboxes")
        t.eq([s["id"] for s in r.json()["sandboxes"]], [sid], "only the claimed one is listed")
        t.ok(wait_for(lambda: len(containers(srv)) == 4), "a replacement starts",
             containers(srv))

        small = srv.create({"display": {"width": 800, "height": 600},
                            "agent_display": {"width": 400, "height": 300}})
        t.ok(("dbx-" + small["id"]) in containers(srv), "the 800x600 slot serves its size")
        t.eq(dbx.png_info(srv.screenshot(small["id"]))[:2], (400, 300),
             "the request's agent display applies to a pooled desktop")

        cold = srv.create({"env": {"X": "1"}})
        r = srv.exec(cold["id"], ["sh", "-c", "echo $X"])
        t.eq(r["stdout"].strip(), "1", "a create with env is started cold and gets its env")

        r = srv.request("GET", "/v1/sandboxes/" + "0" * 32)
        t.eq(r.status, 404, "unknown ids still 404")
        rc = srv.stop()
        t.eq(rc, 0, "clean stop with a pool")
    finally:
        srv.stop()
    srv2 = dbx.Server(state_dir=state)
    try:
        listed = sorted(s["id"] for s in srv2.request("GET", "/v1/sandboxes").json()["sandboxes"])
        t.eq(listed, sorted([sid, small["id"], cold["id"]]),
             "after a restart only claimed sandboxes remain")
        on_disk = sorted(os.listdir(os.path.join(state, "sandboxes")))
        t.eq(on_disk, listed, "pool members' state was removed")
        for s in listed:
            srv2.request("DELETE", "/v1/sandboxes/" + s)
    finally:
        srv2.stop()
        import shutil
        shutil.rmtree(state, ignore_errors=True)
    t.done()


main()
