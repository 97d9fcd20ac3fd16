"""The warm pool: --warm-pool keeps ready desktops that are not listed, a
matching create takes one (and a replacement starts), other creates are
cold, and pool members never survive a restart; a claimed one survives a
crash of deskboxd right after its create was answered, with the settings
of its claim."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def containers(srv):
    root = os.path.join(srv.state_dir, "runtime")
    try:
        return sorted(d for d in os.listdir(root) if d.startswith("dbx-"))
    except OSError:
        return []


def ready(srv):
    m = re.search(rb"^deskbox_warm_pool_ready (\d+)$", srv.request("GET", "/metrics").body, re.M)
    return int(m.group(1)) if m else None


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
    crash(t, state)
    import shutil
    shutil.rmtree(state, ignore_errors=True)
    t.done()


def crash(t, state):
    """The claim is recorded before the create is answered: a SIGKILL of
    deskboxd just after it loses neither the sandbox nor what the claim set;
    the members never claimed are removed."""
    srv = dbx.Server(state_dir=state, args=["--warm-pool", "2"])
    try:
        t.ok(wait_for(lambda: ready(srv) == 2), "a new pool has 2 ready", ready(srv))
        members = containers(srv)
        sb = srv.create({"timeout_s": 3600, "agent_display": {"width": 640, "height": 400}})
        t.ok(("dbx-" + sb["id"]) in members, "a create claims one of them")
        srv.kill()
    finally:
        srv.kill()
    srv = dbx.Server(state_dir=state)
    try:
        listed = srv.request("GET", "/v1/sandboxes").json()["sandboxes"]
        t.eq([s["id"] for s in listed], [sb["id"]],
             "after a crash the claimed sandbox is there, and only it")
        got = listed[0] if listed else {}
        t.eq((got.get("timeout_s"), got.get("agent_display"), got.get("expires_at") is not None),
             (3600, {"width": 640, "height": 400}, True), "with the settings of its claim")
        t.eq(sorted(os.listdir(os.path.join(state, "sandboxes"))), [sb["id"]],
             "the unclaimed members' state was removed")
        r = srv.request("POST", "/v1/sandboxes/%s/start" % sb["id"])
        t.eq(r.status, 200, "it starts again")
        srv.request("DELETE", "/v1/sandboxes/" + sb["id"])
    finally:
        srv.stop()


main()
