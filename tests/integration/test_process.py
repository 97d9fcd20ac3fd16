"""Process API end to end: exec and code_run (exit codes, output, stdin,
env, cwd), timeouts that kill the whole run, capped and non-UTF-8 output,
Server-Sent Events, background runs, Python contexts, fork bombs, OOM and
concurrency."""

import base64
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def code_run(srv, sid, code, **kw):
    body = {"code": code}
    body.update(kw)
    return srv.request("POST", "/v1/sandboxes/%s/process/code_run" % sid, body)


def exec_raw(srv, sid, body):
    return srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, body)


def ps(srv, sid):
    """The sandbox's processes as (pid, ppid, comm, args) lines, from another exec."""
    r = srv.exec(sid, ["ps", "-eo", "pid=,comm=,args="])
    return [ln.strip() for ln in r["stdout"].splitlines() if ln.strip()]


def status(srv, base, pid):
    return srv.request("GET", "%s/%d" % (base, pid)).json()


def logs(srv, base, pid):
    return srv.request("GET", "%s/%d/logs" % (base, pid)).json()


def sleeps(srv, sid):
    """How many `sleep 1000` processes run in the sandbox."""
    return len([ln for ln in ps(srv, sid) if ln.endswith("sleep 1000")])


def sse_events(srv, path, body, on_event=None, timeout=60):
    """POSTs and reads a text/event-stream; returns [(t, event, data)]."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    conn.request("POST", path, body=json.dumps(body),
                 headers={"Authorization": "Bearer " + srv.token,
                          "Accept": "text/event-stream"})
    r = conn.getresponse()
    events = []
    name, data = None, []
    t0 = time.time()
    while True:
        line = r.readline()
        if not line:
            break
        line = line.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif line == "" and name:
            ev = (time.time() - t0, name, json.loads("\n".join(data)))
            events.append(ev)
            if on_event:
                on_event(ev)
            name, data = None, []
    ctype = r.getheader("Content-Type")
    conn.close()
    return ctype, events


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server(args=["--exec-timeout", "30", "--exec-timeout-max", "600"])
    try:
        sid = srv.create({"memory_mb": 512, "pids_max": 256})["id"]
        other = srv.create()["id"]
        P = "/v1/sandboxes/%s/process" % sid

        # ---- exec basics ----
        r = srv.exec(sid, ["sh", "-c", "echo out; echo err >&2; exit 7"])
        t.eq((r["exit_code"], r["stdout"], r["stderr"]), (7, "out\n", "err\n"),
             "exit code and separate stdout/stderr")
        for k in ("timed_out", "oom_killed", "truncated", "duration_ms"):
            t.ok(k in r, "exec result has '%s'" % k)
        r = srv.exec(sid, ["cat"], stdin="héllo\nworld")
        t.eq(r["stdout"], "héllo\nworld", "stdin reaches the program")
        r = exec_raw(srv, sid, {"command": "echo $FOO-$BAR; pwd", "env": {"FOO": "a b", "BAR": "2"},
                                "cwd": "/tmp"}).json()
        t.eq(r["stdout"], "a b-2\n/tmp\n", "command string, env and cwd")
        r = srv.exec(sid, ["pwd"])
        t.eq(r["stdout"], "/workspace\n", "default cwd is /workspace")
        r = srv.exec(sid, ["sh", "-c", "grep PPid /proc/$$/status; cat /proc/$$/cgroup"])
        t.ok("PPid:\t1\n" in r["stdout"], "runs start through the init's exec agent", r["stdout"])
        t.ok("freezer:/run-" in r["stdout"] and "memory:/run-" in r["stdout"],
             "the run is in its own cgroup from the start", r["stdout"])
        for bad, why in (({"argv": ["true"], "timeout_s": 0}, "timeout 0"),
                         ({"argv": ["true"], "timeout_s": 601}, "timeout over the maximum"),
                         ({"argv": ["true"], "timeout_s": "5"}, "timeout not a number"),
                         ({"argv": []}, "empty argv"),
                         ({"argv": ["true"], "command": "true"}, "argv and command"),
                         ({"argv": ["true"], "cwd": "tmp"}, "relative cwd"),
                         ({"argv": ["true"], "env": {"A=B": "x"}}, "bad env name")):
            r = exec_raw(srv, sid, bad)
            t.ok(r.status == 400 and r.json()["error"]["code"] == "invalid_argument",
                 "400 for " + why, r.body[:200])
        r = srv.exec(sid, ["no-such-program-xyz"])
        t.ok(r["exit_code"] != 0, "a missing program is a non-zero exit, not a server error", r)

        # ---- code_run ----
        r = code_run(srv, sid, "import sys\nprint(6*7)\nprint('e', file=sys.stderr)")
        t.eq((r.status, r.json().get("stdout"), r.json().get("stderr")), (200, "42\n", "e\n"),
             "code_run python")
        r = code_run(srv, sid, "def f(:\n  pass").json()
        t.ok(r["exit_code"] != 0 and "SyntaxError" in r["stderr"], "syntax error is stderr + exit",
             r)
        r = code_run(srv, sid, "raise ValueError('boom')").json()
        t.ok(r["exit_code"] == 1 and "ValueError: boom" in r["stderr"], "exception is stderr + exit 1", r)
        r = code_run(srv, sid, "echo $((2+3)); read x; echo got $x", language="bash", stdin="hi\n").json()
        t.eq(r["stdout"], "5\ngot hi\n", "code_run bash with stdin")
        r = code_run(srv, sid, "console.log(1+1)", language="node")
        if os.path.exists("/usr/bin/node"):
            t.eq(r.json().get("stdout"), "2\n", "code_run node")
        else:
            t.ok(r.status == 400 and "node" in r.json()["error"]["message"], "missing node is a 400")
        r = code_run(srv, sid, "print(1)", language="cobol")
        t.eq(r.status, 400, "unknown language is 400")
        r = code_run(srv, sid, "import os; print(os.environ['X'], os.getcwd())", env={"X": "y"},
                     cwd="/tmp").json()
        t.eq(r["stdout"], "y /tmp\n", "code_run env and cwd")

        # ---- timeouts kill the whole run ----
        marker = "dbxmark%d" % os.getpid()
        script = ("sleep 1000 & "
                  "setsid sh -c 'sleep 1001 & exec sleep 1002' & "
                  "sh -c 'trap \"\" TERM HUP INT; exec -a %s-noterm sleep 1003' & "
                  "(sh -c 'sleep 1004 </dev/null >/dev/null 2>&1 &') ; "
                  "exec -a %s-main sleep 1005" % (marker, marker))
        t0 = time.time()
        r = srv.exec(sid, ["bash", "-c", script], timeout_s=2)
        took = time.time() - t0
        t.ok(r["timed_out"] is True and r["exit_code"] == -1, "sleep past its timeout: timed_out", r)
        t.ok(took <= 4, "timeout 2 returns within 4 s (took %.2f s)" % took)
        left = [ln for ln in ps(srv, sid) if "sleep 100" in ln or marker in ln]
        t.eq(left, [], "no process of the run is left (setsid, daemonized, SIGTERM-ignoring)")
        names = " ".join(ps(srv, sid))
        t.ok("Xvfb" in names and "openbox" in names and dbx.VNC_PROC in names,
             "the desktop survives the kill", names)
        r = srv.exec(sid, ["sh", "-c", "sleep 1000 & echo started"], timeout_s=10)
        t.ok(r["exit_code"] == 0 and not r["timed_out"] and r["duration_ms"] < 5000,
             "a run ends when its program exits, even with a child holding the pipe", r)
        t.eq([ln for ln in ps(srv, sid) if "sleep 1000" in ln], [],
             "what a finished run left behind is gone too")

        # ---- output safety ----
        t0 = time.time()
        r = srv.exec(sid, ["yes"], timeout_s=2)
        t.ok(r["truncated"] and len(r["stdout"]) == 1 << 20 and r["timed_out"],
             "yes: stdout capped at 1 MiB, truncated", {k: v for k, v in r.items() if k != "stdout"})
        r = srv.exec(sid, ["sh", "-c", "head -c 3000000 /dev/urandom; echo done >&2"], timeout_s=20)
        t.ok(r["truncated"] and len(base64.b64decode(r["stdout_b64"])) == 1 << 20
             and r["stderr"] == "done\n" and r["exit_code"] == 0,
             "urandom: capped, exact bytes in stdout_b64, stderr intact")
        r = srv.exec(sid, ["printf", "ok\\377\\376end"])
        t.ok(base64.b64decode(r["stdout_b64"]) == b"ok\xff\xfeend" and r["stdout"].startswith("ok")
             and "\ufffd" in r["stdout"], "invalid UTF-8: replacement text plus exact bytes", r)
        rss = 0
        with open("/proc/%d/status" % srv.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        t.ok(rss < 200 * 1024, "deskboxd RSS stays bounded (%d KiB)" % rss)

        # ---- SSE ----
        first = {}

        def note(ev):
            if ev[1] == "stdout" and "t" not in first:
                first["t"] = ev[0]
        ctype, evs = sse_events(srv, P + "/code_run",
                                {"code": "import time\nprint('a')\ntime.sleep(1.5)\nprint('b')"},
                                on_event=note)
        t.eq(ctype, "text/event-stream", "stream content type")
        outs = "".join(e[2]["data"] for e in evs if e[1] == "stdout")
        res = [e for e in evs if e[1] == "result"]
        t.eq(outs, "a\nb\n", "stream carries the stdout chunks")
        t.ok(res and res[-1][2]["exit_code"] == 0 and evs[-1][1] == "result", "final result event")
        t.ok(res and first.get("t", 99) < res[-1][0] - 1.0,
             "first chunk arrives before the run ends (%.2f s vs %.2f s)"
             % (first.get("t", -1), res[-1][0] if res else -1))
        ctype, evs = sse_events(srv, P + "/exec?stream=1",
                                {"argv": ["sh", "-c", "echo x >&2; sleep 30"], "timeout_s": 1})
        t.ok(any(e[1] == "stderr" and e[2]["data"] == "x\n" for e in evs)
             and evs[-1][2]["timed_out"] is True, "?stream=1 on exec: stderr event and timed_out result")

        # ---- background ----
        r = exec_raw(srv, sid, {"command": "echo begin; trap '' TERM; setsid sleep 1000 & "
                                           "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done",
                                "background": True}).json()
        pid = r.get("pid")
        t.ok(isinstance(pid, int) and pid > 1 and set(r) == {"pid"}, "background answers {pid}", r)
        t.ok(dbx.wait_until(lambda: logs(srv, P, pid).get("stdout", "").startswith(
             "begin\ntick 0\n")), "logs hold the output", logs(srv, P, pid))
        st = srv.request("GET", "%s/%d" % (P, pid)).json()
        t.ok(st.get("status") == "running" and st.get("exit_code") is None, "status: running", st)
        k = srv.request("POST", "%s/%d/kill" % (P, pid))
        t.ok(k.status == 200 and k.json()["status"] == "exited" and k.json()["killed"],
             "kill answers once it is gone", k.body)
        t.eq([ln for ln in ps(srv, sid) if "sleep 1000" in ln], [], "kill takes the whole tree")
        st = srv.request("GET", "%s/%d" % (P, pid)).json()
        t.ok(st["status"] == "exited" and st["exit_code"] == -1, "status after kill", st)
        r = exec_raw(srv, sid, {"argv": ["sh", "-c", "echo bye; exit 3"], "background": True}).json()
        dbx.wait_until(lambda: status(srv, P, r["pid"])["status"] == "exited", timeout=5)
        st = status(srv, P, r["pid"])
        t.eq((st["status"], st["exit_code"]), ("exited", 3), "background exit code")
        lg = srv.request("GET", "%s/%d/logs" % (P, r["pid"])).json()
        t.eq(lg["stdout"], "bye\n", "logs after exit")
        r = exec_raw(srv, sid, {"argv": ["yes"], "background": True}).json()
        dbx.wait_until(lambda: logs(srv, P, r["pid"]).get("stdout_bytes", 0) > 1 << 20)
        lg = logs(srv, P, r["pid"])
        t.ok(len(lg["stdout"]) <= 1 << 20 and lg["truncated"] and lg["stdout_bytes"] > 1 << 20,
             "background logs are bounded (%d bytes kept of %d)" % (len(lg["stdout"]), lg["stdout_bytes"]))
        srv.request("POST", "%s/%d/kill" % (P, r["pid"]))
        t.eq(srv.request("GET", P + "/999999").status, 404, "unknown pid is 404")

        # ---- contexts ----
        r = srv.request("POST", P + "/contexts", {})
        t.eq(r.status, 201, "create context")
        cid = r.json()["id"]
        r1 = code_run(srv, sid, "x = 41", context=cid).json()
        r2 = code_run(srv, sid, "print(x + 1)", context=cid).json()
        t.eq((r1["exit_code"], r2["stdout"]), (0, "42\n"), "context keeps state")
        r = code_run(srv, sid, "y = x * 2\ny + 0", context=cid).json()
        t.eq(r.get("result"), "82", "final expression comes back as result")
        r = code_run(srv, sid, "1/0", context=cid).json()
        t.ok(r["exit_code"] == 1 and "ZeroDivisionError" in r["stderr"], "exception in context", r)
        r = code_run(srv, sid, "print(x)", context=cid).json()
        t.eq(r["stdout"], "41\n", "context survives an exception")
        r = code_run(srv, sid, "import subprocess; subprocess.run(['echo', 'sub'])", context=cid).json()
        t.eq(r["stdout"], "sub\n", "subprocess output is captured in a context")
        lst = srv.request("GET", P + "/contexts").json()
        t.ok(any(c["id"] == cid for c in lst["contexts"]), "contexts are listed")
        t0 = time.time()
        r = code_run(srv, sid, "import time\nwhile True: time.sleep(1)", context=cid, timeout_s=2).json()
        t.ok(r["timed_out"] and r.get("context_restarted") and time.time() - t0 < 5,
             "a hung context is killed by the timeout and restarted", r)
        r = code_run(srv, sid, "print(1 + 1)", context=cid).json()
        t.eq((r["stdout"], r.get("context_restarted")), ("2\n", None), "restarted context works")
        r = code_run(srv, sid, "print('x' in dir())", context=cid).json()
        t.eq(r["stdout"], "False\n", "restarted context is fresh")
        code_run(srv, sid, "z = 1", context=cid)
        r = srv.request("POST", "%s/contexts/%s/restart" % (P, cid))
        t.eq(r.status, 200, "restart context")
        r = code_run(srv, sid, "print('z' in dir())", context=cid).json()
        t.eq(r["stdout"], "False\n", "restart forgets state")
        t.eq(srv.request("DELETE", "%s/contexts/%s" % (P, cid)).status, 204, "delete context")
        r = code_run(srv, sid, "print(1)", context=cid)
        t.eq(r.status, 404, "deleted context is 404")

        # ---- limits ----
        t0 = time.time()
        r = code_run(srv, sid, "bomb() { bomb | bomb & }; bomb; sleep 30", language="bash",
                     timeout_s=4).json()
        t.ok(r["timed_out"], "fork bomb is ended by the timeout",
             {k: v for k, v in r.items() if k != "stderr"})
        t.ok("Resource temporarily unavailable" in r["stderr"] or "retry" in r["stderr"],
             "fork bomb hit the pids limit", r["stderr"][-300:])
        t.ok(time.time() - t0 < 10, "fork bomb run returns promptly (%.1f s)" % (time.time() - t0))
        def pids_current():
            v = dbx.cgroup_file("dbx-" + sid, "pids", "pids.current")
            return int(v) if v is not None else None
        dbx.wait_until(lambda: (pids_current() or 0) < 50, timeout=5)
        cur = pids_current()
        t.ok(cur is not None and cur < 50, "the fork bomb's processes are gone (pids.current %s)"
             % cur)
        r = srv.exec(other, ["echo", "fine"])
        t.eq(r["stdout"], "fine\n", "another sandbox stays responsive")
        r = srv.exec(sid, ["echo", "fine"])
        t.eq(r["stdout"], "fine\n", "the sandbox stays responsive after the fork bomb")
        r = code_run(srv, sid, "x = bytearray(1 << 30)\nx[::4096] = b'a' * len(x[::4096])\nprint('no')",
                     timeout_s=30).json()
        t.ok(r["oom_killed"] is True and r["exit_code"] != 0, "a run past the memory limit is OOM-killed", r)
        names = " ".join(ps(srv, sid))
        t.ok("Xvfb" in names and dbx.VNC_PROC in names, "the desktop survives the OOM")
        png = srv.screenshot(sid)
        t.ok(png[:4] == b"\x89PNG", "screenshots still work after the OOM")

        # ---- concurrency ----
        results = [None] * 20

        def one(i):
            try:
                results[i] = code_run(srv, sid, "import time\ntime.sleep(0.2)\nprint(%d * %d)" % (i, i)).json()
            except Exception as ex:  # noqa: BLE001
                results[i] = {"error": str(ex)}
        th = [threading.Thread(target=one, args=(i,)) for i in range(20)]
        for x in th:
            x.start()
        for x in th:
            x.join()
        bad = [(i, r) for i, r in enumerate(results) if not r or r.get("stdout") != "%d\n" % (i * i)]
        t.eq(bad, [], "20 concurrent code_runs are all correct")

        # ---- without the exec agent: crun exec --cgroup ----
        r = srv.exec(other, ["sh", "-c", "rm /run/deskbox/exec.sock; echo rc=$?"])
        t.ok("rc=0" not in r["stdout"], "the user cannot touch the agent's socket", r)
        # The sandbox's root (the init, the desktop) owns run/ and could:
        # replaced from the host here, as it would be from inside.
        sock = srv.ns_path("sandboxes", other, "run", "exec.sock")
        os.unlink(sock)
        os.symlink("/run/dbus/x", sock)
        r = srv.exec(other, ["sh", "-c", "grep PPid /proc/$$/status; cat /proc/$$/cgroup"])
        t.ok("PPid:\t0\n" in r["stdout"] and "freezer:/run-" in r["stdout"]
             and "cpu:/run-" in r["stdout"],
             "a replaced agent socket is not followed: crun exec, in the run's cgroup everywhere",
             r["stdout"])
        t0 = time.time()
        r = srv.exec(other, ["bash", "-c", script], timeout_s=2)
        t.ok(r["timed_out"] and time.time() - t0 <= 4, "crun path: timeout returns in time")
        t.eq([ln for ln in ps(srv, other) if "sleep 100" in ln or marker in ln], [],
             "crun path: no process of the run is left")
        r = exec_raw(srv, other, {"argv": ["sh", "-c", "echo quick; exit 4"], "background": True}).json()
        t.ok(r.get("pid", 0) > 1, "crun path: background pid of a program that exits at once", r)
        OP = "/v1/sandboxes/%s/process" % other
        dbx.wait_until(lambda: status(srv, OP, r["pid"])["status"] == "exited", timeout=5)
        st = status(srv, OP, r["pid"])
        lg = logs(srv, OP, r["pid"])
        t.eq((st["exit_code"], lg["stdout"]), (4, "quick\n"), "crun path: background status and logs")

        # ---- overhead ----
        samples = []
        for _ in range(15):
            t0 = time.perf_counter()
            code_run(srv, sid, "print(1)")
            samples.append((time.perf_counter() - t0) * 1000)
        host = []
        import subprocess
        for _ in range(15):
            t0 = time.perf_counter()
            subprocess.run(["/usr/bin/python3", "-c", "print(1)"], stdout=subprocess.DEVNULL, env={})
            host.append((time.perf_counter() - t0) * 1000)
        samples.sort()
        host.sort()
        t.diag("code_run print(1): median %.1f ms; host /usr/bin/python3 -c: median %.1f ms; "
               "overhead %.1f ms" % (samples[7], host[7], samples[7] - host[7]))

        # ---- delete with runs in flight ----
        r = exec_raw(srv, sid, {"argv": ["sleep", "1000"], "background": True})
        srv.request("POST", P + "/contexts", {})
        got = {}

        def hang():
            got["r"] = srv.request("POST", P + "/exec", {"argv": ["sleep", "1000"], "timeout_s": 300})
        h = threading.Thread(target=hang)
        h.start()
        # Both runs (the background one and the hanging exec) have started.
        t.ok(dbx.wait_until(lambda: sleeps(srv, sid) >= 2),
             "runs in flight before the delete (%d)" % sleeps(srv, sid))
        t0 = time.time()
        r = srv.request("DELETE", "/v1/sandboxes/" + sid)
        t.ok(r.status == 204 and time.time() - t0 < 10, "delete with runs in flight (%.1f s)" % (time.time() - t0))
        h.join(30)
        t.ok(not h.is_alive() and got["r"].status == 200, "the in-flight run was ended by the delete")
        t.eq(dbx.cgroup_dirs("dbx-" + sid), [], "no cgroup of the sandbox is left")

        # ---- shutdown with runs in flight ----
        exec_raw(srv, other, {"argv": ["sleep", "1000"], "background": True})
        srv.request("POST", OP + "/contexts", {})
        inflight = {}

        def fg(name, path):
            try:
                inflight[name] = srv.request("POST", path, {"argv": ["sleep", "1000"],
                                                            "timeout_s": 300}).status
            except Exception as ex:  # noqa: BLE001
                inflight[name] = str(ex)
        ths = [threading.Thread(target=fg, args=("fg", OP + "/exec")),
               threading.Thread(target=fg, args=("sse", OP + "/exec?stream=1"))]
        for x in ths:
            x.start()
        # The background run and both requests' runs have started.
        t.ok(dbx.wait_until(lambda: sleeps(srv, other) >= 3),
             "runs in flight before the shutdown (%d)" % sleeps(srv, other))
        t0 = time.time()
        rc = srv.stop()
        t.ok(rc == 0 and time.time() - t0 < 15,
             "SIGTERM with runs in flight: exits cleanly in %.1f s" % (time.time() - t0))
        for x in ths:
            x.join(10)
        # Answered or cut by the shutdown, but not left hanging.
        t.ok(not any(x.is_alive() for x in ths) and len(inflight) == 2,
             "in-flight requests ended", inflight)
        t.eq(dbx.cgroup_dirs("dbx-" + other), [], "nothing of the sandbox is left after shutdown")
    finally:
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly")
        log = srv.stderr()
        if "AddressSanitizer" in log or "runtime error" in log:
            t.ok(False, "sanitizers are quiet", log[-3000:])
        srv.cleanup()
    t.done()


main()
