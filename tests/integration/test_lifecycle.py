"""A dead sandbox is seen: kill -9 of a sandbox's init from the host makes
it "failed" with a reason within moments (not "running" with execs that
pretend the program exited 1); desktop and process calls answer 409
sandbox_not_running; an exec running at that moment ends killed; start
brings it back with its files; "restart":"on-failure" brings it back by
itself; an intentional stop or delete is no failure."""

import glob
import json
import os
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def base(sid):
    return "/v1/sandboxes/%s" % sid


def get(srv, sid):
    r = srv.request("GET", base(sid))
    return r.json() if r.status == 200 else {"status": r.status}


def init_pid(sid):
    """The host pid of the sandbox's init: the process of its cgroup that
    is pid 1 in its own pid namespace."""
    cid = "dbx-" + sid
    for d in dbx.cgroup_dirs(cid):
        try:
            with open(os.path.join(d, "cgroup.procs")) as f:
                pids = [int(x) for x in f.read().split()]
        except OSError:
            continue
        for pid in pids:
            try:
                with open("/proc/%d/status" % pid) as f:
                    for line in f:
                        if line.startswith("NSpid:") and line.split()[-1] == "1":
                            return pid
            except OSError:
                pass
    return None


def zombie_child(pid, parent):
    try:
        with open("/proc/%s/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0] == "Z" and int(fields[1]) == parent
    except (OSError, ValueError, IndexError):
        return False


def kill_and_time(srv, sid):
    """kill -9 of the init; returns (seconds until GET says failed, the
    sandbox as GET shows it then)."""
    pid = init_pid(sid)
    if not pid:
        return None, {}
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    seen = dbx.wait_until(lambda: get(srv, sid)["status"] == "failed" and get(srv, sid),
                          timeout=5, interval=0.01)
    return (time.monotonic() - t0 if seen else None), (seen or get(srv, sid))


def error_code(r):
    try:
        return r.json()["error"]["code"]
    except (ValueError, KeyError):
        return None


def check_failed_state(t, srv, sid, state):
    r = srv.request("POST", base(sid) + "/process/exec", {"argv": ["true"]})
    t.eq((r.status, error_code(r)), (409, "sandbox_not_running"),
         "exec in a failed sandbox: 409 sandbox_not_running")
    t.ok(b"failed" in r.body and b"signal 9" in r.body,
         "the message gives the status and the reason", r.body[:300])
    r = srv.request("GET", base(sid) + "/desktop/screenshot")
    t.eq((r.status, error_code(r)), (409, "sandbox_not_running"),
         "screenshot of a failed sandbox: 409 sandbox_not_running")
    r = srv.post(sid, "left_click", {"x": 5, "y": 5})
    t.eq((r.status, error_code(r)), (409, "sandbox_not_running"),
         "a desktop action on a failed sandbox: 409 sandbox_not_running")
    r = srv.request("POST", base(sid) + "/process/code_run", {"code": "print(1)"})
    t.eq((r.status, error_code(r)), (409, "sandbox_not_running"),
         "code_run in a failed sandbox: 409 sandbox_not_running")
    with open(os.path.join(state, "sandboxes", sid, "sandbox.json")) as f:
        persisted = json.load(f)
    t.eq((persisted.get("status"), "signal 9" in persisted.get("reason", "")),
         ("failed", True), "sandbox.json holds failed and the reason")
    t.ok(dbx.wait_until(lambda: not dbx.cgroup_dirs("dbx-" + sid), timeout=10),
         "what was left of the container is cleaned up (no cgroup)",
         dbx.cgroup_dirs("dbx-" + sid))
    r = srv.request("GET", base(sid) + "/files/download?path=/workspace/keep.txt")
    t.eq((r.status, r.body), (200, b"kept\n"), "files can be downloaded while failed")


def sleeping(sid):
    """Whether a `sleep` runs anywhere in the sandbox's cgroups."""
    for d in dbx.cgroup_dirs("dbx-" + sid):
        for procs in glob.glob(os.path.join(d, "**", "cgroup.procs"), recursive=True):
            try:
                pids = open(procs).read().split()
            except OSError:
                continue
            for p in pids:
                try:
                    if b"sleep" in open("/proc/%s/cmdline" % p, "rb").read():
                        return True
                except OSError:
                    pass
    return False


def in_flight_exec(t, srv, sid):
    """An exec running when the init dies ends killed, not exit_code 1."""
    out = {}

    def run():
        out["r"] = srv.request("POST", base(sid) + "/process/exec",
                               {"argv": ["sh", "-c", "echo started; sleep 60"], "timeout_s": 90})
    th = threading.Thread(target=run)
    th.start()
    # The sleep is running once the sandbox's cgroup holds it.
    seen = dbx.wait_until(lambda: sleeping(sid), timeout=10, interval=0.05)
    latency, _ = kill_and_time(srv, sid)
    th.join(30)
    r = out.get("r")
    if not t.ok(seen and r is not None, "an exec was running when the init was killed"):
        return latency
    body = r.json() if r.status == 200 else {}
    t.ok(r.status == 409 or (body.get("killed") is True and body.get("exit_code") == -1),
         "that exec ends killed (exit_code -1), not with crun's exit 1",
         "%d %s" % (r.status, r.body[:300]))
    return latency


def restart_policy(t, srv):
    t.eq(srv.request("POST", "/v1/sandboxes", {"restart": "always"}).status, 400,
         "an unknown restart policy: 400")
    sb = srv.create({"restart": "on-failure"})
    sid = sb["id"]
    t.eq(sb.get("restart"), "on-failure", "the policy is shown")
    srv.exec(sid, ["sh", "-c", "echo kept > /workspace/keep.txt"])
    latency, seen = kill_and_time(srv, sid)
    t.ok(latency is not None, "with on-failure: failed is seen", seen)
    back = dbx.wait_until(lambda: get(srv, sid)["status"] == "running", timeout=20,
                          interval=0.1)
    t.ok(back, "with on-failure: it comes back by itself", get(srv, sid))
    if back:
        res = srv.exec(sid, ["cat", "/workspace/keep.txt"])
        t.eq(res["stdout"], "kept\n", "after the automatic restart the file is intact")
        t.ok("reason" not in get(srv, sid), "running again: no reason shown")
    t.eq(srv.request("DELETE", base(sid)).status, 204, "delete it")
    return latency


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    state = srv.state_dir
    latencies = []
    try:
        sid = srv.create()["id"]
        t.eq(get(srv, sid).get("restart"), "no", "the default restart policy is shown")
        srv.exec(sid, ["sh", "-c", "echo kept > /workspace/keep.txt"])
        latency, seen = kill_and_time(srv, sid)
        t.ok(latency is not None and latency < 2.0,
             "kill -9 of the init: GET shows failed within 2 s", seen)
        t.ok("signal 9" in seen.get("reason", ""), "the reason says killed by signal 9", seen)
        if latency is not None:
            latencies.append(latency)
        check_failed_state(t, srv, sid, state)

        r = srv.request("POST", base(sid) + "/start")
        t.eq((r.status, r.json().get("status") if r.status == 200 else r.body[:200]),
             (200, "running"), "start on a failed sandbox: running")
        t.eq(srv.exec(sid, ["cat", "/workspace/keep.txt"])["stdout"], "kept\n",
             "the file written before is intact")
        t.ok(srv.request("GET", base(sid) + "/desktop/screenshot").status == 200,
             "the desktop answers again")

        for i in range(2):
            latency, _ = kill_and_time(srv, sid)
            if latency is not None:
                latencies.append(latency)
            t.eq(srv.request("POST", base(sid) + "/start").status, 200,
                 "kill and start again (%d)" % (i + 1))

        latency = in_flight_exec(t, srv, sid)
        if latency is not None:
            latencies.append(latency)
        t.eq(srv.request("POST", base(sid) + "/start").status, 200, "start after that")

        # On purpose is no failure.
        r = srv.request("POST", base(sid) + "/stop")
        t.eq(r.json().get("status") if r.status == 200 else r.status, "stopped",
             "stop: stopped")
        r = srv.request("POST", base(sid) + "/process/exec", {"argv": ["true"]})
        t.eq((r.status, error_code(r)), (409, "sandbox_not_running"),
             "exec in a stopped sandbox: 409 sandbox_not_running")
        t.eq(srv.request("POST", base(sid) + "/start").status, 200, "start after stop")
        t.eq(srv.request("DELETE", base(sid)).status, 204, "delete")
        log = srv.stderr()
        t.ok(log.count("sandbox %s failed" % sid) == 4,
             "only the four kills were reported as failures, not stop or delete",
             [ln for ln in log.splitlines() if sid in ln])

        zombies = [p for p in os.listdir("/proc") if p.isdigit() and zombie_child(p, srv.proc.pid)]
        t.eq(zombies, [], "every init that died was reaped (no zombie children of deskboxd)")

        latency = restart_policy(t, srv)
        if latency is not None:
            latencies.append(latency)
        if latencies:
            t.diag("kill -9 -> GET failed: median %.0f ms, max %.0f ms over %d" % (
                statistics.median(latencies) * 1000, max(latencies) * 1000, len(latencies)))
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
