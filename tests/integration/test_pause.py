"""Pause and resume: POST /pause freezes every process of a sandbox (a busy
Python loop's counter stands still and its cgroup uses no CPU), desktop and
process calls answer 409 sandbox_paused while files stay reachable, POST
/resume continues the same processes where they stopped and the screen
mirror is still connected; auto_resume resumes on the next call; stop and
delete work on a paused sandbox; a restart of deskboxd lists it stopped."""

import os
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

LOOP = r"""
import os, time
open('/tmp/loop.pid', 'w').write(str(os.getpid()))
i = 0
last = time.monotonic()
while True:
    i += 1
    if i % 20000 == 0:
        with open('/tmp/count.tmp', 'w') as f:
            f.write(str(i))
        os.replace('/tmp/count.tmp', '/tmp/count')
"""


def base(sid):
    return "/v1/sandboxes/%s" % sid


def status_of(srv, sid):
    r = srv.request("GET", base(sid))
    return r.json()["status"] if r.status == 200 else r.status


def read_file(srv, sid, path):
    r = srv.request("GET", "%s/files/download?path=%s" % (base(sid), urllib.parse.quote(path)))
    return r.body.decode() if r.status == 200 else None


def counter(srv, sid):
    v = read_file(srv, sid, "/tmp/count")
    return int(v) if v and v.isdigit() else None


def cpu_ns(sid):
    """CPU time the sandbox's cgroup used, in ns (v1 cpuacct or v2 cpu.stat)."""
    v = dbx.cgroup_file("dbx-" + sid, "cpuacct", "cpuacct.usage")
    if v is not None:
        return int(v)
    v = dbx.cgroup_file("dbx-" + sid, "cpu", "cpu.stat")
    for line in (v or "").splitlines():
        k, _, n = line.partition(" ")
        if k == "usage_usec":
            return int(n) * 1000
    return None


def reconnects(srv):
    for line in srv.request("GET", "/metrics").body.decode().splitlines():
        if line.startswith("deskbox_bridge_reconnects_total"):
            return float(line.split()[-1])
    return 0.0


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    state = tempfile.mkdtemp(prefix="dbx-pause-")
    srv = dbx.Server(state_dir=state)
    servers = [srv]
    try:
        sid = srv.create({})["id"]
        shot0 = srv.screenshot(sid)
        r = srv.request("POST", base(sid) + "/process/code_run",
                        {"code": LOOP, "language": "python", "background": True})
        t.eq(r.status, 200, "a busy counter loop starts in the background")
        c0 = dbx.wait_until(lambda: counter(srv, sid), timeout=30)
        t.ok(dbx.wait_until(lambda: (counter(srv, sid) or 0) > c0, timeout=30),
             "the counter advances")
        pid0 = read_file(srv, sid, "/tmp/loop.pid")
        rec0 = reconnects(srv)

        # ---- pause ----
        r = srv.request("POST", base(sid) + "/pause")
        t.eq((r.status, r.json().get("status")), (200, "paused"), "pause answers paused")
        t.diag("pause took %.1f ms in deskboxd" % r.json().get("duration_ms", -1))
        t.eq(status_of(srv, sid), "paused", "GET says paused")
        c1 = counter(srv, sid)
        u1 = cpu_ns(sid)
        moved = dbx.wait_until(lambda: counter(srv, sid) != c1, timeout=2)
        t.ok(not moved, "the counter stands still while paused", (c1, counter(srv, sid)))
        u2 = cpu_ns(sid)
        t.ok(u1 is not None and u2 - u1 < 20e6,
             "the cgroup used no CPU while paused (< 20 ms in 2 s)", (u1, u2))
        t.diag("CPU while paused: %.2f ms over 2 s" % ((u2 - u1) / 1e6 if u1 else -1))

        r = srv.request("POST", base(sid) + "/process/exec", {"argv": ["true"]})
        err = r.json().get("error", {}) if r.status != 200 else {}
        t.ok(r.status == 409 and err.get("code") == "sandbox_paused" and
             "paused" in err.get("message", ""), "exec while paused: 409 sandbox_paused",
             r.body[:200])
        r = srv.request("GET", base(sid) + "/desktop/screenshot")
        t.ok(r.status == 409 and r.json()["error"]["code"] == "sandbox_paused",
             "screenshot while paused: 409 sandbox_paused", r.body[:200])
        r = srv.post(sid, "click", {"x": 10, "y": 10})
        t.eq(r.status, 409, "click while paused: 409")
        r = srv.request("POST", base(sid) + "/start")
        t.eq(r.status, 409, "start while paused: 409")
        t.ok(read_file(srv, sid, "/tmp/loop.pid") == pid0, "files are readable while paused")
        r = srv.request("POST", base(sid) + "/pause")
        t.eq((r.status, r.json().get("status")), (200, "paused"), "pausing again is fine")

        # ---- resume ----
        r = srv.request("POST", base(sid) + "/resume")
        t.eq((r.status, r.json().get("status")), (200, "running"), "resume answers running")
        t.diag("resume took %.2f ms in deskboxd" % r.json().get("duration_ms", -1))
        t.ok(dbx.wait_until(lambda: (counter(srv, sid) or 0) > c1, timeout=30),
             "the counter continues after resume")
        t.eq(read_file(srv, sid, "/tmp/loop.pid"), pid0, "it is the same process")
        shot = srv.request("GET", base(sid) + "/desktop/screenshot")
        t.eq(shot.status, 200, "the desktop answers at once after resume")
        t.eq(reconnects(srv), rec0, "the screen mirror stayed connected through the pause")
        t.eq(srv.exec(sid, ["echo", "hi"])["stdout"], "hi\n", "exec works after resume")
        t.eq(srv.request("POST", base(sid) + "/resume").status, 200, "resuming again is fine")
        del shot0

        # ---- stop, restart and delete of a paused sandbox ----
        t.eq(srv.request("POST", base(sid) + "/pause").status, 200, "pause again")
        t0 = time.time()
        r = srv.request("POST", base(sid) + "/stop")
        t.eq((r.status, r.json().get("status")), (200, "stopped"), "a paused sandbox stops")
        t.ok(time.time() - t0 < 20, "and quickly (%.1f s)" % (time.time() - t0))
        r = srv.request("POST", base(sid) + "/pause")
        t.ok(r.status == 409 and r.json()["error"]["code"] == "sandbox_not_running",
             "pausing a stopped sandbox: 409 sandbox_not_running", r.body[:200])
        t.eq(srv.request("POST", base(sid) + "/start").status, 200, "it starts again")
        t.eq(srv.request("POST", base(sid) + "/pause").status, 200, "and pauses")
        t.eq(srv.stop(), 0, "deskboxd stops cleanly with a paused sandbox")
        srv = dbx.Server(state_dir=state)
        servers.append(srv)
        t.eq(status_of(srv, sid), "stopped", "after a restart a paused sandbox is stopped")
        t.eq(srv.request("POST", base(sid) + "/start").status, 200, "and starts")
        t.eq(srv.request("POST", base(sid) + "/pause").status, 200, "pause once more")
        t.eq(srv.request("DELETE", base(sid)).status, 204, "a paused sandbox deletes")
        t.eq(dbx.cgroup_dirs("dbx-" + sid), [], "its cgroups are gone")
        r = srv.request("POST", base("f" * 32) + "/pause")
        t.eq(r.status, 404, "pause of an unknown sandbox: 404")

        # ---- auto_resume ----
        sid = srv.create({"auto_resume": True})["id"]
        t.eq(srv.request("POST", base(sid) + "/pause").status, 200, "auto_resume: paused")
        r = srv.request("POST", base(sid) + "/process/exec", {"argv": ["echo", "awake"]})
        t.eq((r.status, r.json().get("stdout")), (200, "awake\n"),
             "auto_resume: exec resumes it first")
        t.eq(status_of(srv, sid), "running", "auto_resume: it is running again")
        t.eq(srv.request("POST", base(sid) + "/pause").status, 200, "auto_resume: paused again")
        r = srv.request("GET", base(sid) + "/desktop/screenshot")
        t.eq(r.status, 200, "auto_resume: a screenshot resumes it too")
    finally:
        dbx.stop_servers(t, servers, state)
    t.done()


main()
