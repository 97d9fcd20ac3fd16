"""Drain with "migrate" (docs/cluster.md, "Draining and moving sandboxes"),
in test_cluster's world: three etcd members and three deskboxd nodes, each
in a network namespace of its own on a bridge of the test's hub namespace
(no packet leaves the machine).

Cases: a stopped sandbox with a file and a running one on node 1; node 1
drained with migrate through node 3: the stopped one moves (the answer
lists it with its new node and the move's time), the running one is left
with its reason; GET through node 1 shows the new node; started through
the third node, the file is there; node 1 keeps nothing of it; a second
drain with migrate moves nothing more; the move-in route refuses a caller
without the cluster secret; a move with no node to take the sandbox fails
and leaves it where it was, stopped, its file readable, startable.

Bounded: 2 sandboxes, 320x200, 32 MiB moved."""

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
import test_cluster as tc  # noqa: E402

DATA = b"moved with its disk\n" * 64
BLOB = os.urandom(32 << 20)  # what the move's time is measured with


def outer():
    dbx.require_root_and_tools()
    for tool in ("ip", "nsenter", "etcd", "tar"):
        if not shutil.which(tool):
            dbx.skip_all("%s is not installed (run scripts/install-deps.sh --test)" % tool)
    ns = tc.names(uuid.uuid4().hex[:6])
    try:
        try:
            tc.build_world(ns)
        except subprocess.CalledProcessError as e:
            dbx.skip_all("cannot make the test's network namespaces: %s %s" % (
                " ".join(e.cmd), (e.stderr or "").strip()))
        env = dict(os.environ, DBX_CLUSTER_NS=json.dumps(ns))
        r = subprocess.run(["nsenter", "--net=/run/netns/" + ns["cl"], "--",
                            sys.executable, os.path.abspath(__file__)], env=env)
        return r.returncode
    finally:
        tc.teardown(ns)


def setup(t, nodes):
    """A stopped sandbox with a file and a running one, both on node 1."""
    r = nodes["n2"].request("POST", "/v1/sandboxes", dict(tc.SMALL, node="n1", name="mover"))
    t.eq(r.status, 201, "a sandbox pinned to node 1, created through node 2")
    sid = r.json()["id"]
    r = nodes["n3"].request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/keep.txt" % sid,
                            DATA)
    t.eq(r.status, 201, "a file written into it through node 3")
    r = nodes["n1"].request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/blob.bin" % sid,
                            BLOB)
    t.eq(r.status, 201, "and 32 MiB of random bytes")
    r = nodes["n1"].request("POST", "/v1/sandboxes/%s/stop" % sid, {})
    t.ok(r.status in (200, 204), "stopped", r.body[:200])
    r = nodes["n1"].request("POST", "/v1/sandboxes", dict(tc.SMALL, node="n1"))
    t.eq(r.status, 201, "a second sandbox on node 1, left running")
    return sid, r.json()["id"]


def drain_migrate(t, nodes, sid, busy):
    t0 = time.monotonic()
    r = nodes["n3"].request("POST", "/v1/nodes/n1/drain", {"migrate": True}, timeout=600)
    took = time.monotonic() - t0
    t.ok(r.status == 200, "drain of node 1 with migrate, asked through node 3", r.body[:500])
    j = r.json() if r.status == 200 else {}
    moved = {m["id"]: m for m in j.get("moved", [])}
    lefts = {x["id"]: x for x in j.get("left", [])}
    t.ok(j.get("draining") and list(moved) == [sid], "the stopped sandbox moved",
         json.dumps(j))
    to = moved.get(sid, {}).get("node")
    t.ok(to in ("n2", "n3"), "to another node", str(to))
    t.ok(busy in lefts and lefts[busy]["reason"].startswith("running"),
         "the running one is left, saying why", json.dumps(lefts))
    return to, moved.get(sid, {}).get("ms", -1), took


def after(t, nodes, sid, to):
    r = nodes["n1"].request("GET", "/v1/sandboxes/%s" % sid)
    j = r.json() if r.status == 200 else {}
    t.ok(r.status == 200 and j.get("node") == to and j.get("status") == "stopped",
         "GET through the drained node: stopped, on its new node", r.body[:300])
    r = nodes["n1"].request("GET", "/v1/sandboxes/mover")
    t.ok(r.status == 200 and r.json().get("id") == sid, "its name still finds it")
    third = ({"n2", "n3"} - {to}).pop()
    r = nodes[third].request("POST", "/v1/sandboxes/%s/start" % sid, {}, timeout=180)
    t.ok(r.status in (200, 204), "started through node %s" % third, r.body[:300])
    r = nodes[third].request("GET",
                             "/v1/sandboxes/%s/files/download?path=/workspace/keep.txt" % sid)
    t.ok(r.status == 200 and r.body == DATA, "the file is there", r.body[:200])
    r = nodes["n1"].request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/blob.bin" % sid)
    t.ok(r.status == 200 and r.body == BLOB, "the 32 MiB too, the same bytes")
    r = nodes["n1"].request("GET", "/v1/sandboxes/%s" % sid)
    t.eq(r.json().get("status"), "running", "running, seen through node 1")
    held = os.path.exists(os.path.join(nodes["n1"].state_dir, "sandboxes", sid))
    left_over = [d for d in os.listdir(os.path.join(nodes["n1"].state_dir, "sandboxes"))
                 if sid in d]
    t.ok(not held and not left_over, "node 1 holds nothing of it", str(left_over))
    t.ok(os.path.exists(os.path.join(nodes[to].state_dir, "sandboxes", sid)),
         "its state is on node %s" % to)
    listed = {s["id"]: s.get("node") for s in
              nodes["n2"].request("GET", "/v1/sandboxes").json()["sandboxes"]}
    t.eq(listed.get(sid), to, "the cluster-wide list says its node")


def refusals(t, nodes, sid):
    r = nodes["n3"].request("POST", "/v1/nodes/n1/drain", {"migrate": True}, timeout=120)
    j = r.json() if r.status == 200 else {}
    t.ok(r.status == 200 and j.get("moved") == [] and len(j.get("left", [])) == 1,
         "a second drain with migrate moves nothing more", r.body[:300])
    r = nodes["n2"].request("POST", "/v1/internal/sandboxes/%s/move-in" % ("0" * 32),
                            b"not a tar", headers={"Content-Type": "application/x-tar"})
    t.eq(r.status, 403, "move-in without the cluster secret: 403")


def failed_move(t, nodes, sid, to):
    """No node left to take it: the move fails and the sandbox stays, as
    it was, on its node."""
    third = ({"n2", "n3"} - {to}).pop()
    r = nodes["n1"].request("POST", "/v1/sandboxes/%s/stop" % sid, {})
    t.ok(r.status in (200, 204), "stopped again through node 1", r.body[:200])
    r = nodes["n1"].request("POST", "/v1/nodes/%s/drain" % third, {})
    t.eq(r.status, 200, "the third node drained: no node has room for a move")
    r = nodes["n1"].request("POST", "/v1/nodes/%s/drain" % to, {"migrate": True}, timeout=120)
    j = r.json() if r.status == 200 else {}
    lefts = {x["id"]: x["reason"] for x in j.get("left", [])}
    t.ok(r.status == 200 and j.get("moved") == [] and "free slot" in lefts.get(sid, ""),
         "its drain with migrate leaves it, saying why", r.body[:400])
    r = nodes["n1"].request("GET", "/v1/sandboxes/%s" % sid)
    j = r.json() if r.status == 200 else {}
    t.ok(j.get("node") == to and j.get("status") == "stopped", "still on its node, stopped",
         r.body[:300])
    r = nodes["n1"].request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/keep.txt" % sid)
    t.ok(r.status == 200 and r.body == DATA, "its file still readable (its disk mounted again)",
         r.body[:200])
    r = nodes["n1"].request("POST", "/v1/sandboxes/%s/start" % sid, {}, timeout=180)
    t.ok(r.status in (200, 204), "and it starts there", r.body[:300])


def inner():
    t = dbx.Tap()
    ns, work, secret_file, etcds = tc.world_begin()
    nodes = {}
    try:
        for e in etcds.values():
            e.start()
        t.ok(dbx.wait_until(lambda: all(tc.etcd_healthy(ip) for ip in tc.ETCD.values()),
                            timeout=30), "the three etcd members have a leader")
        for k in tc.NODES:
            nodes[k] = tc.Node(ns, k, secret_file)
        t.ok(dbx.wait_until(lambda: len(nodes["n3"].request("GET", "/v1/nodes").json()
                                        .get("nodes", [])) == 3, timeout=30),
             "the three nodes see each other")
        sid, busy = setup(t, nodes)
        to, ms, took = drain_migrate(t, nodes, sid, busy)
        if to:
            after(t, nodes, sid, to)
        refusals(t, nodes, sid)
        if to:
            failed_move(t, nodes, sid, to)
        t.diag("measured: the move took %.0f ms (node 1's figure), the drain answer %.2f s"
               % (ms, took))
    finally:
        tc.world_end(t, nodes, etcds, work)
    t.done()


if __name__ == "__main__":
    if os.environ.get("DBX_CLUSTER_NS"):
        inner()
    else:
        sys.exit(outer())
