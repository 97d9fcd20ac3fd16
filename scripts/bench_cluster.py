"""make bench's cluster figures (docs/cluster.md), in the world of
tests/integration/test_cluster.py: three etcd members and three deskboxd
nodes, each in a network namespace of its own on a bridge no packet leaves;
this script runs itself again in the client's namespace to drive them.

Figures: a screenshot and input-to-frame (REST key -> the mirror's frame
counter moves) straight from the node holding the sandbox and through
another node, in the same run; creates per second with 6 creates at once
through one node, spread over the three."""

import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import dbx  # noqa: E402
import test_cluster as world  # noqa: E402


def timed(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def input_to_frame(node, sid, n):
    lat = []
    for i in range(n):
        f0 = dbx.frame(node, sid)
        t0 = time.perf_counter()
        node.post(sid, "key", {"keys": "a" if i % 2 == 0 else "BackSpace"})
        if dbx.wait_frame_change(node, sid, f0) is not None:
            lat.append((time.perf_counter() - t0) * 1000)
    return lat


def measure(nodes, n):
    res = {}
    r = nodes["n1"].request("POST", "/v1/sandboxes", {"display": {"width": 1280, "height": 800},
                                                      "node": "n1"})
    sid = r.json()["id"]
    nodes["n1"].exec(sid, ["xterm", "-geometry", "80x24+0+0"], background=True)
    time.sleep(1.5)
    nodes["n1"].post(sid, "click", {"x": 200, "y": 150})
    for label, node in (("direct", nodes["n1"]), ("forwarded", nodes["n2"])):
        node.screenshot(sid)
        res["shot_" + label] = timed(lambda: node.screenshot(sid), n)
        res["frame_" + label] = input_to_frame(node, sid, n)
    nodes["n1"].request("DELETE", "/v1/sandboxes/" + sid)
    k = 6
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(k) as ex:
        made = list(ex.map(lambda i: nodes["n1"].request(
            "POST", "/v1/sandboxes", {"display": {"width": 320, "height": 200}}), range(k)))
    secs = time.perf_counter() - t0
    ok = [m.json() for m in made if m.status == 201]
    res["creates_per_s"] = [len(ok) / secs]
    res["spread"] = sorted({m.get("node") for m in ok})
    with concurrent.futures.ThreadPoolExecutor(k) as ex:
        list(ex.map(lambda m: nodes["n1"].request("DELETE", "/v1/sandboxes/" + m["id"]), ok))
    return res


def inner():
    ns = json.loads(os.environ["DBX_CLUSTER_NS"])
    n = int(os.environ.get("BENCH_N", "30"))
    work = tempfile.mkdtemp(prefix="dbxc-bench-")
    secret = os.path.join(work, "secret")
    with open(secret, "w") as f:
        f.write(world.SECRET + "\n")
    world.SLOTS = 4
    etcds = {k: world.Etcd(ns, k, work) for k in world.ETCD}
    nodes = {}
    try:
        for e in etcds.values():
            e.start()
        dbx.wait_until(lambda: all(world.etcd_healthy(ip) for ip in world.ETCD.values()),
                       timeout=30)
        for k in world.NODES:
            nodes[k] = world.Node(ns, k, secret)
        print("RESULT " + json.dumps(measure(nodes, n)), flush=True)
    finally:
        for node in nodes.values():
            node.cleanup()
        for e in etcds.values():
            e.kill()
        subprocess.run(["rm", "-rf", work], check=False)


def run(report, quick):
    """Builds the world, runs the figures in it, reports them."""
    ns = world.names(uuid.uuid4().hex[:6])
    try:
        world.build_world(ns)
        env = dict(os.environ, DBX_CLUSTER_NS=json.dumps(ns), BENCH_N="10" if quick else "30")
        p = subprocess.run(["nsenter", "--net=/run/netns/" + ns["cl"], "--", sys.executable,
                            os.path.abspath(__file__)], env=env, capture_output=True,
                           text=True, timeout=600)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        print("cluster bench: %s" % e)
        return
    finally:
        world.teardown(ns)
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    if not line:
        print("cluster bench failed: %s" % (p.stdout + p.stderr)[-2000:])
        return
    r = json.loads(line[0][7:])
    report("screenshot 1280x800, straight from its node", r["shot_direct"])
    report("screenshot 1280x800, through another node", r["shot_forwarded"])
    report("  the hop's added screenshot p50",
           [statistics.median(r["shot_forwarded"]) - statistics.median(r["shot_direct"])],
           target="<= 1 ms")
    report("input to frame, straight from its node", r["frame_direct"])
    report("input to frame, through another node", r["frame_forwarded"])
    report("  the hop's added input-to-frame p50",
           [statistics.median(r["frame_forwarded"]) - statistics.median(r["frame_direct"])],
           target="<= 1 ms")
    report("creates/s, 6 at once through one node over %d" % len(r["spread"]),
           r["creates_per_s"], unit="1/s", higher_is_better=True)


if __name__ == "__main__":
    if os.environ.get("DBX_CLUSTER_NS"):
        inner()
    else:
        def show(name, values, unit="ms", **kw):
            print("%-50s median %8.2f %s" % (name, statistics.median(values), unit))
        run(show, os.environ.get("BENCH_QUICK") == "1")
