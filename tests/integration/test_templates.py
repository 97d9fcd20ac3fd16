"""Templates: POST/GET/DELETE /v1/templates, loaded from --templates-dir at
start; a create naming one gets its display, limits (read from inside the
sandbox), env, files and startup commands, with the request's own fields
winning; unknown fields are refused naming them; a failing startup command
fails the create and leaves no sandbox; a template's warm pool fills with
desktops made from it (not listed), a create naming it claims one with the
template's limits and refills it, a create with other overrides is cold,
replacing or deleting the template drains it, bad warm_pool values are 400
naming the field; templates survive a restart and their pools refill."""

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

POOL_MAX, POOL_TOTAL = 16, 32  # POOL_TEMPLATE_MAX, POOL_TEMPLATES_TOTAL (sandbox.h)

AGENT = {
    "image": "default",
    "display": {"width": 1024, "height": 768},
    "resources": {"cpus": 0.5, "memory_mb": 512, "pids_max": 200, "disk_mb": 256},
    "env": {"ROLE": "agent", "LEVEL": "1"},
    "files": [{"path": "/workspace/hello.py", "content": "print('hi')\n", "mode": 493}],
    "startup": ["python3 /workspace/hello.py > /workspace/started.txt"],
    "timeout_s": 600,
}


POOLED = {
    "display": {"width": 800, "height": 600},
    "resources": {"cpus": 0.5, "memory_mb": 384, "pids_max": 150},
    "env": {"ROLE": "pooled"},
    "files": [{"path": "/workspace/note.txt", "content": "warm\n"}],
    "startup": ["echo started > /workspace/started.txt"],
    "warm_pool": 2,
}


def cg(sid, controller, name):
    return dbx.cgroup_file("dbx-" + sid, controller, name)


def containers(srv):
    root = os.path.join(srv.state_dir, "runtime")
    try:
        return set(d[4:] for d in os.listdir(root) if d.startswith("dbx-"))
    except OSError:
        return set()


def pool_ready(srv, name):
    r = srv.request("GET", "/v1/templates/" + name)
    return r.json().get("warm_pool_ready") if r.status == 200 else None


def warm_pools(t, srv):
    """A template's warm pool: filled, claimed with its limits, refilled,
    bypassed by incompatible overrides, drained on replace and delete."""
    listed = lambda: set(s["id"] for s in  # noqa: E731
                         srv.request("GET", "/v1/sandboxes").json()["sandboxes"])
    r = srv.request("POST", "/v1/templates", dict(POOLED, name="pooled"))
    t.eq((r.status, r.json().get("warm_pool"), r.json().get("warm_pool_ready")), (201, 2, 0),
         "a template with warm_pool 2 is stored, none ready yet")
    t.ok(dbx.wait_until(lambda: pool_ready(srv, "pooled") == 2, timeout=120),
         "its pool fills to 2 (warm_pool_ready)", pool_ready(srv, "pooled"))
    members = containers(srv) - listed()
    t.eq(len(members), 2, "two running desktops, not listed as sandboxes")
    r = srv.request("POST", "/v1/sandboxes", {"template": "pooled", "timeout_s": 300})
    sb = r.json() if r.status == 201 else {}
    sid = sb.get("id", "")
    t.ok(sid in members, "a create naming it claims one of them", r.body[:200])
    t.eq((sb.get("display"), sb.get("memory_mb"), sb.get("timeout_s"),
          sb.get("expires_at") is not None), ({"width": 800, "height": 600}, 384, 300, True),
         "with the template's display and limits and the request's timeout")
    if sid:
        out = srv.exec(sid, ["sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null || "
                             "cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
                             "cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo "
                             "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) "
                             "$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); "
                             "echo $ROLE; cat /workspace/note.txt /workspace/started.txt"])
        lines = out["stdout"].split("\n")
        cpu = lines[1].split() if len(lines) > 1 else []
        got = int(cpu[0]) / int(cpu[1]) if len(cpu) == 2 and cpu[0].isdigit() else lines[1:2]
        t.eq([lines[0], got] + lines[2:5], [str(384 << 20), 0.5, "pooled", "warm", "started"],
             "inside: the memory limit, half a CPU, env, files and startup")
        t.eq(cg(sid, "pids", "pids.max"), "150", "the pids limit applies to its cgroup")
    t.ok(dbx.wait_until(lambda: pool_ready(srv, "pooled") == 2, timeout=120),
         "the pool refills", pool_ready(srv, "pooled"))
    before = containers(srv)
    r = srv.request("POST", "/v1/sandboxes", {"template": "pooled", "env": {"X": "1"}})
    cold = r.json().get("id", "") if r.status == 201 else ""
    t.ok(cold and cold not in before and pool_ready(srv, "pooled") == 2,
         "a create that overrides env is made cold", r.body[:200])
    for x in (sid, cold):
        if x:
            srv.request("DELETE", "/v1/sandboxes/" + x)
    old = containers(srv) - listed()
    r = srv.request("POST", "/v1/templates", dict(POOLED, name="pooled", warm_pool=1,
                                                  env={"ROLE": "second"}))
    t.eq(r.status, 201, "replacing the template")
    t.ok(not (containers(srv) & old), "drains the old members at once", containers(srv) & old)
    t.ok(dbx.wait_until(lambda: pool_ready(srv, "pooled") == 1, timeout=120),
         "and the pool refills to its new warm_pool", pool_ready(srv, "pooled"))
    r = srv.request("POST", "/v1/sandboxes", {"template": "pooled"})
    second = r.json().get("id", "") if r.status == 201 else ""
    t.eq(srv.exec(second, ["sh", "-c", "echo $ROLE"])["stdout"].strip() if second else None,
         "second", "a claim after the replace has the new template's env")
    if second:
        srv.request("DELETE", "/v1/sandboxes/" + second)
    t.ok(dbx.wait_until(lambda: pool_ready(srv, "pooled") == 1, timeout=120),
         "refilled again", pool_ready(srv, "pooled"))
    t.eq(srv.request("DELETE", "/v1/templates/pooled").status, 204, "DELETE the template")
    t.ok(dbx.wait_until(lambda: not (containers(srv) - listed()), timeout=60),
         "drains its pool: no container left", containers(srv) - listed())
    r = srv.request("GET", "/v1/templates/pooled")
    t.eq(r.status, 404, "and it is gone")

    r = srv.request("POST", "/v1/templates", {"name": "broken", "startup": ["exit 3"],
                                              "warm_pool": 1})
    t.eq(r.status, 201, "a template whose startup fails, with a pool")
    err = lambda: srv.request("GET", "/v1/templates/broken").json().get(  # noqa: E731
        "warm_pool_error", "")
    t.ok(dbx.wait_until(lambda: "exited with 3" in err(), timeout=120),
         "its members fail: warm_pool_error says why", err())
    t.eq(pool_ready(srv, "broken"), 0, "none is ready")
    r = srv.request("POST", "/v1/sandboxes", {"template": "broken"})
    t.ok(r.status == 400 and "exited with 3" in r.body.decode(),
         "a create from it is made cold and fails as before", r.body[:200])
    srv.request("DELETE", "/v1/templates/broken")
    t.ok(dbx.wait_until(lambda: not (containers(srv) - listed()), timeout=60),
         "deleting it leaves no container", containers(srv) - listed())


def bad_pools(t, srv):
    for v in (-1, POOL_MAX + 1, "2", 1.5, True):
        r = srv.request("POST", "/v1/templates", {"name": "bad", "warm_pool": v})
        msg = r.json().get("error", {}).get("message", "") if r.status == 400 else ""
        t.ok(r.status == 400 and "warm_pool" in msg, "warm_pool %r: 400 naming it" % (v,),
             r.body[:200])
    r = srv.request("POST", "/v1/sandboxes", {"template": "python-agent", "warm_pool": 1})
    t.ok(r.status == 400 and "warm_pool" in r.body.decode(),
         "warm_pool in a create: 400 naming it", r.body[:200])
    # The cap of all templates' pools together: two at the most a template
    # may have fill it, a third is refused (deleted at once, before many
    # of their desktops start).
    codes = [srv.request("POST", "/v1/templates", {"name": "cap%d" % i, "warm_pool": n}).status
             for i, n in ((1, POOL_MAX), (2, POOL_TOTAL - POOL_MAX))]
    r = srv.request("POST", "/v1/templates", {"name": "cap3", "warm_pool": 1})
    msg = r.json().get("error", {}).get("message", "") if r.status == 400 else ""
    for i in (1, 2, 3):
        srv.request("DELETE", "/v1/templates/cap%d" % i)
    t.ok(codes == [201, 201] and r.status == 400 and "warm_pool" in msg and
         str(POOL_TOTAL) in msg, "past %d desktops in all: 400 naming warm_pool" % POOL_TOTAL,
         (codes, r.status, msg))


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    state = tempfile.mkdtemp(prefix="dbx-tpl-")
    tdir = tempfile.mkdtemp(prefix="dbx-tpl-dir-")
    with open(os.path.join(tdir, "from-dir.json"), "w") as f:
        json.dump({"display": {"width": 800, "height": 600}, "env": {"FROM": "dir"}}, f)
    with open(os.path.join(tdir, "broken.json"), "w") as f:
        f.write("{not json")
    with open(os.path.join(tdir, "bad-field.json"), "w") as f:
        json.dump({"colour": "red"}, f)
    srv = dbx.Server(state_dir=state, args=["--templates-dir", tdir])
    servers = [srv]
    try:
        r = srv.request("GET", "/v1/templates")
        names = sorted(x["name"] for x in r.json()["templates"])
        t.eq(names, ["from-dir"], "--templates-dir loads good files and skips broken and invalid ones")
        body = dict(AGENT, name="python-agent")
        r = srv.request("POST", "/v1/templates", body)
        t.eq(r.status, 201, "POST /v1/templates answers 201")
        t.eq(r.json().get("resources"), AGENT["resources"], "and the template")
        r = srv.request("GET", "/v1/templates/python-agent")
        t.eq((r.status, r.json().get("timeout_s")), (200, 600), "GET /v1/templates/{name}")

        # ---- a create from the template ----
        r = srv.request("POST", "/v1/sandboxes", {"template": "python-agent",
                                                  "env": {"LEVEL": "2"}})
        t.eq(r.status, 201, "create from a template")
        sb = r.json() if r.status == 201 else {}
        sid = sb.get("id")
        t.eq((sb.get("display"), sb.get("memory_mb"), sb.get("pids_max"), sb.get("cpu_millis"),
              sb.get("disk_mb"), sb.get("timeout_s")),
             ({"width": 1024, "height": 768}, 512, 200, 500, 256, 600),
             "it has the template's display, resources and timeout")
        if sid:
            out = srv.exec(sid, ["sh", "-c", "echo $ROLE $LEVEL; cat /workspace/started.txt; "
                                 "stat -c %a /workspace/hello.py; df -m /workspace | "
                                 "tail -1"])["stdout"].split("\n")
            t.eq(out[:3], ["agent 2", "hi", "755"],
                 "env (the request's LEVEL wins), files and startup applied")
            size = int(out[3].split()[1]) if len(out) > 3 and out[3] else 0
            t.ok(200 <= size <= 256, "the disk inside is the template's 256 MiB", out[3:])
            mem = cg(sid, "memory", "memory.limit_in_bytes") or cg(sid, "memory", "memory.max")
            t.eq(mem, str(512 << 20), "the memory limit applies to its cgroup")
            pids = cg(sid, "pids", "pids.max")
            t.eq(pids, "200", "the pids limit applies")
            quota = cg(sid, "cpu", "cpu.cfs_quota_us")
            period = cg(sid, "cpu", "cpu.cfs_period_us")
            cmax = cg(sid, "cpu", "cpu.max")
            got = (int(quota) / int(period)) if quota and period else (
                int(cmax.split()[0]) / int(cmax.split()[1]) if cmax else None)
            t.eq(got, 0.5, "half a CPU applies")
            srv.request("DELETE", "/v1/sandboxes/" + sid)
        r = srv.request("POST", "/v1/sandboxes", {"template": "from-dir"})
        t.ok(r.status == 201 and r.json()["display"] == {"width": 800, "height": 600},
             "a --templates-dir template creates", r.body[:200])
        if r.status == 201:
            srv.request("DELETE", "/v1/sandboxes/" + r.json()["id"])

        # ---- bad templates and creates ----
        for tpl, field in (({"name": "x", "colour": "red"}, "colour"),
                           ({"name": "x", "resources": {"gpus": 1}}, "resources.gpus"),
                           ({"name": "x", "files": [{"path": "/a", "content": "", "owner": 1}]},
                            "owner"),
                           ({"name": "x", "memory_mb": 1}, "memory_mb"),
                           ({"name": "x", "image": "nope"}, "image"),
                           ({"name": "x", "resources": {"memory_mb": 1}}, "memory_mb"),
                           ({"name": "x", "startup": "echo"}, "startup"),
                           ({"name": "../x"}, "name")):
            r = srv.request("POST", "/v1/templates", tpl)
            msg = r.json().get("error", {}).get("message", "") if r.status == 400 else ""
            t.ok(r.status == 400 and (field in msg or "nope" in msg),
                 "template with a bad %s: 400 naming it" % field, r.body[:200])
        r = srv.request("POST", "/v1/sandboxes", {"template": "python-agent", "memory_mb": 640,
                                                  "cpu_millis": 1500})
        t.ok(r.status == 201 and (r.json()["memory_mb"], r.json()["cpu_millis"],
                                  r.json()["pids_max"]) == (640, 1500, 200),
             "a create's own limit fields override the template's resources", r.body[:300])
        if r.status == 201:
            srv.request("DELETE", "/v1/sandboxes/" + r.json()["id"])
        r = srv.request("POST", "/v1/sandboxes", {"template": "nope"})
        t.eq(r.status, 400, "create from an unknown template: 400")
        r = srv.request("POST", "/v1/sandboxes", {"template": "python-agent", "colour": 1})
        t.ok(r.status == 400 and "colour" in r.body.decode(), "an unknown override: 400",
             r.body[:200])
        srv.request("POST", "/v1/templates", {"name": "failing", "startup": ["exit 3"]})
        before = len(srv.request("GET", "/v1/sandboxes").json()["sandboxes"])
        r = srv.request("POST", "/v1/sandboxes", {"template": "failing"})
        t.ok(r.status == 400 and "exited with 3" in r.body.decode(),
             "a failing startup command fails the create", r.body[:200])
        t.eq(len(srv.request("GET", "/v1/sandboxes").json()["sandboxes"]), before,
             "and leaves no sandbox")
        t.eq(srv.request("DELETE", "/v1/templates/failing").status, 204, "DELETE a template")
        t.eq(srv.request("GET", "/v1/templates/failing").status, 404, "it is gone")
        bad_pools(t, srv)
        warm_pools(t, srv)
        r = srv.request("POST", "/v1/templates", dict(POOLED, name="kept", warm_pool=1))
        t.eq(r.status, 201, "a template with a pool to keep over the restart")
        t.ok(dbx.wait_until(lambda: pool_ready(srv, "kept") == 1, timeout=120),
             "its pool fills", pool_ready(srv, "kept"))

        # ---- restart ----
        t.eq(srv.stop(), 0, "deskboxd stops")
        srv = dbx.Server(state_dir=state)
        servers.append(srv)
        r = srv.request("GET", "/v1/templates")
        t.eq(sorted(x["name"] for x in r.json()["templates"]), ["kept", "python-agent"],
             "API templates survive a restart")
        t.ok(dbx.wait_until(lambda: pool_ready(srv, "kept") == 1, timeout=120),
             "a template's pool refills after a restart", pool_ready(srv, "kept"))
        t.eq(srv.request("GET", "/v1/sandboxes").json()["sandboxes"], [],
             "and its members are not listed")
        t.eq(len(os.listdir(os.path.join(state, "sandboxes"))), 1,
             "the members of before the restart were removed")
    finally:
        dbx.stop_servers(t, servers, state)
        shutil.rmtree(tdir, ignore_errors=True)
    t.done()


main()
