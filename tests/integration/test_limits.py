"""PATCH /v1/sandboxes/{id}: memory, CPU and pids limits changed while a
sandbox lives, read back from inside the sandbox (its cgroup namespace
shows its own cgroup's files) and felt by its processes; metadata merged
(null removes a key) and seen by the list's filter; all kept by a stopped
sandbox for its next start and across a restart of deskboxd; refused by
name for the fields fixed at create."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
import dbx  # noqa: E402
import deskbox  # noqa: E402

# One line per limit, as the sandbox sees them on a v1 or a v2 host.
READ_LIMITS = (
    "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || "
    "cat /sys/fs/cgroup/memory.max; "
    "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max; "
    "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || "
    "cut -d' ' -f1 /sys/fs/cgroup/cpu.max")


def inside(srv, sid):
    """(memory bytes, pids max, cpu quota µs or -1) seen inside."""
    out = srv.exec(sid, ["sh", "-c", READ_LIMITS])["stdout"].split()
    return tuple(-1 if v == "max" else int(v) for v in out) if len(out) == 3 else tuple(out)


def limits(sb):
    return (sb.get("memory_mb"), sb.get("pids_max"), sb.get("cpu_millis"))


def patch(srv, sid, body):
    return srv.request("PATCH", "/v1/sandboxes/" + sid, body)


def check_running(t, srv, sid):
    t.eq(inside(srv, sid), (512 << 20, 200, 50000), "the create's limits are seen inside")
    r = patch(srv, sid, {"memory_mb": 768, "pids_max": 300, "cpu_millis": 250})
    t.ok((r.status, limits(r.json())) == (200, (768, 300, 250)),
         "PATCH answers the sandbox with its new limits", r.body[:300])
    t.eq(inside(srv, sid), (768 << 20, 300, 25000), "the new limits are seen inside at once")
    t.eq(limits(srv.request("GET", "/v1/sandboxes/" + sid).json()), (768, 300, 250),
         "GET shows them")
    r = patch(srv, sid, {"cpu_millis": 0})
    t.ok((r.status, inside(srv, sid)[2]) == (200, -1), "cpu_millis 0 lifts the CPU limit",
         r.body[:300])
    r = patch(srv, sid, {"pids_max": 64})
    t.eq(r.status, 200, "pids_max lowered to 64")
    # 200 background sleeps against the new pids.max: the shell gives up
    # at the first fork refused.
    r = srv.exec(sid, ["sh", "-c", "i=0; while [ $i -lt 200 ]; do sleep 30 & echo $!;"
                       " i=$((i+1)); done; kill $(jobs -p)"], timeout_s=30)
    started = len(r["stdout"].split())
    t.ok(0 < started < 64 and r["exit_code"] != 0,
         "a burst of forks stops at the lowered limit (%d of 200 started)" % started,
         {k: v for k, v in r.items() if k != "stdout"})


def check_memory_refusal(t, srv, sid):
    """A memory limit below what the sandbox uses: cgroup v1 refuses it
    (409, nothing changed); v2 applies it and the kernel kills inside."""
    r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, {
        "argv": ["python3", "-c", "import time; b = bytearray(300 << 20); "
                 "b[::4096] = b'x' * len(b[::4096]); time.sleep(600)"],
        "background": True})
    t.ok(r.status == 200 and isinstance(r.json().get("pid"), int),
         "a process holding 300 MiB starts", r.body[:200])
    held = dbx.wait_until(lambda: int(dbx.cgroup_file("dbx-" + sid, "memory",
                                                      "memory.usage_in_bytes") or
                                      dbx.cgroup_file("dbx-" + sid, "memory",
                                                      "memory.current") or 0) > 300 << 20,
                          timeout=30)
    t.ok(held, "its 300 MiB are charged to the sandbox")
    before = inside(srv, sid)
    r = patch(srv, sid, {"memory_mb": 128, "pids_max": 100})
    if dbx.cgroup_file("dbx-" + sid, "memory", "memory.limit_in_bytes") is not None:
        t.ok((r.status, r.json().get("error", {}).get("code")) == (409, "conflict"),
             "cgroup v1: a memory limit below the use is refused", r.body[:300])
        t.eq(inside(srv, sid), before, "and no limit changed, pids_max included")
        t.eq(limits(srv.request("GET", "/v1/sandboxes/" + sid).json())[:2], (1024, 128),
             "nor in the spec")
    else:
        t.ok(r.status == 200, "cgroup v2: the lower limit applies", r.body[:300])
        t.ok(dbx.wait_until(lambda: "bytearray" not in srv.exec(
            sid, ["sh", "-c", "pgrep -af bytearray || true"])["stdout"], timeout=30),
             "and the process over it is killed")
        t.eq(inside(srv, sid)[0], 128 << 20, "the new limit is seen inside")


def check_paused_and_stopped(t, srv, sid):
    srv.request("POST", "/v1/sandboxes/%s/pause" % sid)
    r = patch(srv, sid, {"memory_mb": 1024})
    t.ok((r.status, r.json().get("status")) == (200, "paused"),
         "a paused sandbox takes new limits and stays paused", r.body[:200])
    srv.request("POST", "/v1/sandboxes/%s/resume" % sid)
    t.eq(inside(srv, sid)[0], 1024 << 20, "they are seen inside after the resume")
    r = srv.request("POST", "/v1/sandboxes/%s/stop" % sid)
    t.ok(r.status == 200, "stopped", r.body[:200])
    r = patch(srv, sid, {"memory_mb": 640, "pids_max": 250, "cpu_millis": 750})
    t.ok((r.status, r.json().get("status"), limits(r.json())) == (200, "stopped", (640, 250, 750)),
         "a stopped sandbox takes new limits into its spec", r.body[:200])


def check_metadata(t, srv, sid):
    r = patch(srv, sid, {"metadata": {"team": "a", "stage": "dev"}})
    t.ok(r.status == 200 and r.json().get("metadata") == {"team": "a", "stage": "dev"},
         "PATCH sets metadata", r.body[:300])
    r = patch(srv, sid, {"metadata": {"stage": None, "owner": "bo"}})
    t.ok(r.status == 200 and r.json().get("metadata") == {"team": "a", "owner": "bo"},
         "a merge patch: null removes a key, a new one adds, the rest stays", r.body[:300])
    ids = [sb["id"] for sb in srv.request("GET", "/v1/sandboxes?metadata.owner=bo")
           .json()["sandboxes"]]
    t.eq(ids, [sid], "the list's filter sees the new metadata")
    ids = [sb["id"] for sb in srv.request("GET", "/v1/sandboxes?metadata.stage=dev")
           .json()["sandboxes"]]
    t.eq(ids, [], "and not the removed key")
    full = {"k%d" % i: "v" for i in range(31)}
    r = patch(srv, sid, {"metadata": full})
    t.ok(r.status == 400 and "32" in r.json().get("error", {}).get("message", ""),
         "more than 32 keys after the merge is a 400", r.body[:300])
    t.eq(srv.request("GET", "/v1/sandboxes/" + sid).json().get("metadata"),
         {"team": "a", "owner": "bo"}, "and changes nothing")
    for bad, word in (({"metadata": {"bad key": "x"}}, "bad key"),
                      ({"metadata": {"k": 5}}, "string"),
                      ({"metadata": {"k": "x" * 257}}, "256"),
                      ({"metadata": "team=a"}, "object"),
                      ({"metadata": {"k": "v"}, "memory_mb": 1}, "memory_mb")):
        r = patch(srv, sid, bad)
        t.ok(r.status == 400 and word in r.json().get("error", {}).get("message", ""),
             "PATCH %.60s is a 400 naming %r" % (bad, word), r.body[:200])
    t.eq(srv.request("GET", "/v1/sandboxes/" + sid).json().get("metadata"),
         {"team": "a", "owner": "bo"}, "a refused PATCH changes no metadata")
    box = deskbox.Deskbox("http://127.0.0.1:%d" % srv.port, token=srv.token).get(sid)
    t.eq(box.set_metadata({"x": "1"}).set_metadata({"x": None}).info.get("metadata"),
         {"team": "a", "owner": "bo"}, "the SDK's set_metadata() sets and removes")


def check_errors(t, srv, sid):
    for body, word in (({}, "nothing to change"), ({"disk_mb": 512}, "disk_mb"),
                       ({"display": {"width": 800, "height": 600}}, "display"),
                       ({"colour": "red"}, "colour"), ({"memory_mb": 1}, "memory_mb"),
                       ({"name": "bob"}, "name"), ({"read_only_root": True}, "read_only_root"),
                       ({"pids_max": "many"}, "pids_max"), ({"cpu_millis": -1}, "cpu_millis"),
                       ([1, 2], "object")):
        r = patch(srv, sid, body)
        t.ok(r.status == 400 and word in r.json().get("error", {}).get("message", ""),
             "PATCH %s is a 400 naming %r" % (body, word), r.body[:200])
    r = srv.request("PATCH", "/v1/sandboxes/" + sid, headers={"Content-Type":
                                                               "application/json"})
    t.ok(r.status == 400, "an empty body is a 400", r.body[:200])
    r = patch(srv, "0" * 32, {"memory_mb": 512})
    t.eq(r.status, 404, "an unknown sandbox is a 404")


def check_clients(t, srv, sid):
    """The CLI's `limits` verb and the SDK's set_limits()."""
    env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port, DESKBOX_TOKEN=srv.token)
    p = subprocess.run([os.path.join(dbx.BUILD, "deskbox"), "--json", "limits", sid,
                        "--memory", "900", "--cpus", "1.5", "--pids", "128"],
                       capture_output=True, text=True, env=env, timeout=60)
    got = limits(json.loads(p.stdout)) if p.returncode == 0 else None
    t.ok(got == (900, 128, 1500), "deskbox limits --memory --cpus --pids", p.stdout + p.stderr)
    t.eq(inside(srv, sid), (900 << 20, 128, 150000), "the CLI's limits are seen inside")
    p = subprocess.run([os.path.join(dbx.BUILD, "deskbox"), "limits", sid, "--memory", "x"],
                       capture_output=True, text=True, env=env, timeout=60)
    t.ok(p.returncode != 0 and "memory" in p.stderr, "the CLI refuses a bad value", p.stderr)
    client = deskbox.Deskbox("http://127.0.0.1:%d" % srv.port, token=srv.token)
    sb = client.get(sid).set_limits(memory_mb=1024, cpu_millis=0)
    t.eq(limits(sb.info), (1024, 128, 0), "the SDK's set_limits() changes them")


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    state = tempfile.mkdtemp(prefix="dbx-test-")
    servers = [dbx.Server(state_dir=state)]
    try:
        srv = servers[0]
        sid = srv.create({"memory_mb": 512, "pids_max": 200, "cpu_millis": 500})["id"]
        check_running(t, srv, sid)
        check_clients(t, srv, sid)
        check_memory_refusal(t, srv, sid)
        check_paused_and_stopped(t, srv, sid)
        check_errors(t, srv, sid)
        check_metadata(t, srv, sid)
        srv.stop()
        servers.append(dbx.Server(state_dir=state))
        srv = servers[-1]
        sb = srv.request("GET", "/v1/sandboxes/" + sid).json()
        t.eq((limits(sb), sb.get("metadata")), ((640, 250, 750), {"team": "a", "owner": "bo"}),
             "the limits and metadata survive a restart of deskboxd")
        r = srv.request("POST", "/v1/sandboxes/%s/start" % sid)
        t.ok(r.status == 200, "started again", r.body[:200])
        t.eq(inside(srv, sid), (640 << 20, 250, 75000), "and its start applies them inside")
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        dbx.stop_servers(t, servers, state)
        shutil.rmtree(state, ignore_errors=True)
    t.done()


if __name__ == "__main__":
    main()
