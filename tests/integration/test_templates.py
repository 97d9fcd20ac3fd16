"""Templates: POST/GET/DELETE /v1/templates, loaded from --templates-dir at
start; a create naming one gets its display, limits (read from inside the
sandbox), env, files and startup commands, with the request's own fields
winning; unknown fields are refused naming them; a failing startup command
fails the create and leaves no sandbox; templates survive a restart."""

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

AGENT = {
    "image": "default",
    "display": {"width": 1024, "height": 768},
    "resources": {"cpus": 0.5, "memory_mb": 512, "pids_max": 200, "disk_mb": 256},
    "env": {"ROLE": "agent", "LEVEL": "1"},
    "files": [{"path": "/workspace/hello.py", "content": "print('hi')\n", "mode": 493}],
    "startup": ["python3 /workspace/hello.py > /workspace/started.txt"],
    "timeout_s": 600,
}


def cg(sid, controller, name):
    return dbx.cgroup_file("dbx-" + sid, controller, name)


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

        # ---- restart ----
        t.eq(srv.stop(), 0, "deskboxd stops")
        srv = dbx.Server(state_dir=state)
        servers.append(srv)
        r = srv.request("GET", "/v1/templates")
        t.eq(sorted(x["name"] for x in r.json()["templates"]), ["python-agent"],
             "API templates survive a restart")
    finally:
        dbx.stop_servers(t, servers, state)
        shutil.rmtree(tdir, ignore_errors=True)
    t.done()


main()
