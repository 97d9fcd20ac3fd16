#!/usr/bin/env python3
"""Each sandbox's own uid range: what the host sees of a sandbox's processes
and files, two sandboxes' per-uid limits apart, the init out of the user's
reach (ptrace, kill, the exec agent's socket, a forged agent request), the
range kept across a deskboxd restart, and the files API through the
mapping."""

import base64
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

RANGE = 65536
USER = 1000


def status_ids(pid):
    """(real uid, real gid) of host process `pid` from /proc/<pid>/status."""
    uid = gid = None
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Uid:"):
                uid = int(line.split()[1])
            elif line.startswith("Gid:"):
                gid = int(line.split()[1])
    return uid, gid


def host_pids(init_pid):
    """{command name: host pid} of the init and its descendants."""
    out = {}
    todo = [init_pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/comm" % p) as f:
                out.setdefault(f.read().strip(), p)
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def init_pid(srv, sid):
    """The host pid of the sandbox's init (crun's pid file)."""
    path = os.path.join(srv.state_dir, "runtime", "dbx-" + sid, "status")
    try:
        with open(path) as f:
            return int(json.load(f)["pid"])
    except (OSError, ValueError, KeyError):
        pass
    import subprocess
    out = subprocess.run(["crun", "--root", os.path.join(srv.state_dir, "runtime"), "state",
                          "dbx-" + sid], capture_output=True, text=True).stdout
    return int(json.loads(out)["pid"])


def sandbox_json(srv, sid):
    with open(os.path.join(srv.state_dir, "sandboxes", sid, "sandbox.json")) as f:
        return json.load(f)


def py(srv, sid, code, **kw):
    return srv.exec(sid, ["python3", "-c", code], **kw)


INOTIFY_HOLD = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
n = int(sys.argv[1])
fds = []
for i in range(n):
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
open("/tmp/inotify-held", "w").write(str(len(fds)))
time.sleep(120)
"""

PIDS_FILL = r"""
import os, time
n = 0
try:
    while n < 80:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError:
    pass
open("/tmp/pids-filled", "w").write(str(n))
time.sleep(60)
"""

PTRACE = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, 1, None, None)  # PTRACE_ATTACH
print(r, ctypes.get_errno())
"""

FORGE = r"""
import os, socket, struct, sys
out = []
for path in ("/run/deskbox/exec.sock",):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        out.append("connected")
    except OSError as e:
        out.append("refused:%d" % e.errno)
print(" ".join(out))
"""


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    if "no user namespaces" in srv.startup:
        srv.cleanup()
        dbx.skip_all("deskboxd runs without user namespaces here (%s)" % srv.startup.strip())
    try:
        # disk_mb 0: their upper layers stay in the state dir, where this
        # test reads and (for the migration below) rewrites owners from the
        # host, as a sandbox made before per-sandbox disks has them.
        a = srv.create({"pids_max": 64, "disk_mb": 0})["id"]
        b = srv.create({"pids_max": 64, "disk_mb": 0})["id"]
        base_a = sandbox_json(srv, a).get("userns_base")
        base_b = sandbox_json(srv, b).get("userns_base")
        t.ok(isinstance(base_a, int) and base_a >= RANGE, "sandbox.json keeps the range",
             base_a)
        t.ok(base_a is not None and base_b is not None and
             (base_a + RANGE <= base_b or base_b + RANGE <= base_a),
             "two sandboxes have disjoint ranges (%s, %s)" % (base_a, base_b))

        # ---- processes, seen from the host ----
        pa = init_pid(srv, a)
        procs = dbx.wait_until(lambda: (lambda d: d if {"Xvfb", "openbox"} <= set(d) else None)(
            host_pids(pa)), timeout=10)
        t.ok(procs, "init, Xvfb and openbox found on the host", host_pids(pa))
        procs = procs or {}
        init_uid = status_ids(pa)[0]
        t.eq(init_uid, base_a, "the init runs as the sandbox's root (host base+0)")
        for name in ("Xvfb", "openbox", dbx.VNC_PROC):
            if name in procs:
                t.eq(status_ids(procs[name])[0], base_a, "%s runs as host base+0" % name)
        with open("/proc/%d/status" % procs.get("Xvfb", pa)) as f:
            capeff = [l.split()[1] for l in f if l.startswith("CapEff:")]
        t.eq(capeff, ["0000000000000000"], "Xvfb has no capability")
        r = srv.exec(a, ["sh", "-c", "id -u; id -g"])
        t.eq(r["stdout"].split(), ["1000", "1000"], "exec runs as uid 1000 inside")
        srv.exec(a, ["sleep", "60"], background=True)
        sleeper = dbx.wait_until(lambda: [p for n, p in host_pids(pa).items() if n == "sleep"],
                                 timeout=5)
        if sleeper:
            uid, gid = status_ids(sleeper[0])
            t.eq((uid, gid), (base_a + USER, base_a + USER),
                 "a user program is host base+1000, not the init's uid")
        else:
            t.ok(False, "the user's sleep found on the host", host_pids(pa))

        # ---- files, seen from the host's side of the upper layer ----
        srv.exec(a, ["sh", "-c", "echo hi > /workspace/made-inside"])
        st = os.lstat(os.path.join(srv.state_dir, "sandboxes", a, "upper", "workspace",
                                   "made-inside"))
        t.eq((st.st_uid, st.st_gid), (base_a + USER, base_a + USER),
             "a file the sandbox wrote is host base+1000 in the upper layer")

        # ---- per-uid kernel limits are per sandbox ----
        with open("/proc/sys/fs/inotify/max_user_instances") as f:
            limit = int(f.read())
        if limit > 4096:
            t.skip("inotify instances of one sandbox do not starve another",
                   "max_user_instances is %d here" % limit)
        else:
            srv.exec(a, ["python3", "-c", INOTIFY_HOLD, str(limit)], background=True)
            held = dbx.wait_until(lambda: (lambda r: r["stdout"].strip() if r["exit_code"] == 0
                                           else None)(
                srv.exec(a, ["cat", "/tmp/inotify-held"])), timeout=15)
            t.ok(held and int(held) >= limit - 8,
                 "sandbox A holds (nearly) all %d inotify instances of its uid (%s)" %
                 (limit, held))
            r = py(srv, b, "import ctypes;l=ctypes.CDLL(None,use_errno=True);"
                           "print(l.inotify_init1(0), ctypes.get_errno())")
            fd = int(r["stdout"].split()[0]) if r["stdout"].split() else -1
            t.ok(fd >= 0, "sandbox B can still inotify_init1", r)
            r = py(srv, a, "import ctypes;l=ctypes.CDLL(None,use_errno=True);"
                           "print(l.inotify_init1(0), ctypes.get_errno())")
            t.ok(r["stdout"].split()[:1] == ["-1"], "while A itself is at its limit (EMFILE)",
                 r)

        # ---- pids limits are per sandbox ----
        # Children until a fork is refused, then they all stay (a shell
        # would exit at the refusal, and the run's cgroup with it).
        srv.exec(a, ["python3", "-c", PIDS_FILL], background=True)
        filled = os.path.join(srv.state_dir, "sandboxes", a, "upper", "tmp", "pids-filled")
        n = dbx.wait_until(lambda: os.path.exists(filled) and open(filled).read(), timeout=20)
        cur = dbx.cgroup_file("dbx-" + a, "pids", "pids.current")
        t.ok(n and cur and int(cur) >= 60, "A is at its pids limit of 64 (%s children, "
             "pids.current %s)" % (n, cur))
        r = srv.exec(b, ["sh", "-c", "for i in 1 2 3 4 5; do sleep 0.2 & done; wait; echo ok"],
                     timeout_s=20)
        t.ok(r["stdout"].strip() == "ok", "B forks while A is at its pids limit", r)

        # ---- set-user-ID files mean nothing ----
        # The sandbox's own root makes a set-uid-root copy of id; the user
        # runs it: no_new_privs keeps the user's uid.  (On the host such a
        # file lives on the sandbox's disk, mounted nosuid: test_disk.py.)
        r = srv.root_exec(b, ["sh", "-c", "cp /usr/bin/id /tmp/suid-id && "
                                          "chmod 4755 /tmp/suid-id && stat -c %a /tmp/suid-id"])
        t.ok(r["stdout"].strip().endswith("4755"), "the sandbox's root can make a set-uid file",
             r)
        r = srv.exec(b, ["/tmp/suid-id", "-u"])
        t.eq(r["stdout"].strip(), "1000", "running it leaves the user's uid (set-uid ignored)")

        # ---- the init out of the user's reach ----
        r = py(srv, b, PTRACE)
        t.ok(r["stdout"].split()[:1] == ["-1"], "ptrace(PTRACE_ATTACH, 1) fails for the user",
             r)
        r = srv.exec(b, ["sh", "-c", "kill -9 1; echo rc=$?"])
        t.ok("rc=1" in r["stdout"] or "rc=2" in r["stdout"], "kill -9 1 fails", r)
        r = srv.exec(b, ["sh", "-c", "kill -TERM 1 2>/dev/null; echo rc=$?"])
        t.ok("rc=0" not in r["stdout"], "kill -TERM 1 fails", r)
        r = py(srv, b, FORGE)
        t.ok(r["stdout"].startswith("refused:13"), "the user cannot connect to the exec "
             "agent's socket (EACCES)", r)
        r = srv.exec(b, ["sh", "-c", "ls /run/deskbox 2>&1; echo rc=$?"])
        t.ok("rc=0" not in r["stdout"], "nor list /run/deskbox", r)
        # A request from inside the pid namespace, as the container's root
        # (crun exec as uid 0): the socket is reachable, the agent refuses.
        script = ("import socket,struct,array\n"
                  "s=socket.socket(socket.AF_UNIX);s.connect('/run/deskbox/exec.sock')\n"
                  "body=struct.pack('<II',1,0)+b'/\\0id\\0'\n"
                  "fds=array.array('i',[0,1,2])\n"
                  "try:\n"
                  " s.sendmsg([struct.pack('<I',len(body))],"
                  "[(socket.SOL_SOCKET,socket.SCM_RIGHTS,fds)]);s.sendall(body)\n"
                  " print('answer', len(s.recv(64)))\n"
                  "except OSError as e: print('answer 0 closed', e.errno)\n")
        forge = srv.root_exec(b, ["python3", "-c", script], timeout=30)
        t.ok("answer 0" in forge["stdout"],
             "a forged exec-agent request from inside the sandbox is refused", forge["stdout"])
        log = open(os.path.join(srv.state_dir, "sandboxes", b, "init.log")).read()
        t.ok("refused a request" in log, "and the init says so in its log", log[-500:])

        # ---- X clients of the user reach the desktop ----
        r = srv.exec(b, ["sh", "-c", "xterm -T userns-xterm -e sleep 20 >/dev/null 2>&1 & "
                                     "for i in $(seq 100); do xdotool search --name userns-xterm"
                                     " && break; sleep 0.1; done"], timeout_s=30)
        t.ok(r["exit_code"] == 0 and r["stdout"].strip(), "xterm run by the user shows a window",
             r)

        # ---- the files API through the mapping ----
        data = b"through the mapping\n"
        r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/up.txt" % b, data)
        t.ok(r.status in (200, 201), "upload", r.body)
        r = srv.exec(b, ["stat", "-c", "%u:%g", "/workspace/up.txt"])
        t.eq(r["stdout"].strip(), "1000:1000", "an uploaded file is the user's inside")
        st = os.lstat(os.path.join(srv.state_dir, "sandboxes", b, "upper", "workspace",
                                   "up.txt"))
        t.eq(st.st_uid, base_b + USER, "and host base+1000 outside")
        r = srv.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/up.txt" % b)
        t.ok(r.status == 200 and r.body == data, "download")
        r = srv.request("POST", "/v1/sandboxes/%s/files/mkdir" % b,
                        {"path": "/workspace/d/e", "parents": True})
        t.ok(r.status in (200, 201), "mkdir", r.body)
        r = srv.request("POST", "/v1/sandboxes/%s/files/move" % b,
                        {"from": "/workspace/up.txt", "to": "/workspace/d/e/up.txt"})
        t.eq(r.status, 200, "move")
        r = srv.request("GET", "/v1/sandboxes/%s/files/list?path=/workspace/d/e" % b)
        t.ok(r.status == 200 and "up.txt" in r.body.decode(), "list", r.body)
        r = srv.request("GET", "/v1/sandboxes/%s/files/stat?path=/workspace/d/e/up.txt" % b)
        t.ok(r.status == 200 and r.json().get("size") == len(data), "stat", r.body)
        r = srv.exec(b, ["stat", "-c", "%u:%g", "/workspace/d", "/workspace/d/e"])
        t.eq(r["stdout"].split(), ["1000:1000", "1000:1000"],
             "directories the API made are the user's inside")
        r = srv.request("DELETE", "/v1/sandboxes/%s/files?path=/workspace/d&recursive=true" % b)
        t.ok(r.status in (200, 204), "delete", r.body)
        r = srv.request("GET", "/v1/sandboxes/%s/files/stat?path=/workspace/d" % b)
        t.eq(r.status, 404, "gone after delete")
        r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/etc/passwd" % b, b"x")
        t.eq(r.status, 403, "the API cannot write what the user cannot (/etc)")

        # ---- the range survives a restart of deskboxd ----
        srv.stop()
        srv2 = dbx.Server(state_dir=srv.state_dir)
        srv2.own_state = True
        srv.own_state = False
        srv = srv2
        t.eq(sandbox_json(srv, a).get("userns_base"), base_a, "A keeps its range after restart")
        r = srv.request("POST", "/v1/sandboxes/%s/start" % a)
        t.eq(r.status, 200, "A starts again")
        t.eq(status_ids(init_pid(srv, a))[0], base_a, "its init has the same host uid")
        r = srv.exec(a, ["stat", "-c", "%u", "/workspace/made-inside"])
        t.eq(r["stdout"].strip(), "1000", "its files are still the user's")
        r = srv.exec(a, ["sh", "-c", "echo more >> /workspace/made-inside && echo ok"])
        t.eq(r["stdout"].strip(), "ok", "and writable by it")

        # ---- a sandbox made before user namespaces is moved into a range ----
        # B as the old deskboxd left it: no range in sandbox.json, its user's
        # files (the X socket directory too) host uid 1000.
        srv.stop()
        bdir = os.path.join(srv.state_dir, "sandboxes", b)
        j = sandbox_json(srv, b)
        del j["userns_base"]
        with open(os.path.join(bdir, "sandbox.json"), "w") as f:
            json.dump(j, f)
        for top, dirs, files in os.walk(os.path.join(bdir, "upper")):
            for name in dirs + files:
                p = os.path.join(top, name)
                st = os.lstat(p)
                if base_b < st.st_uid < base_b + RANGE:
                    os.lchown(p, st.st_uid - base_b, st.st_gid - base_b)
        os.lchown(os.path.join(bdir, "upper", "tmp", ".X11-unix"), USER, USER)
        srv2 = dbx.Server(state_dir=srv.state_dir)
        srv2.own_state, srv.own_state = True, False
        srv = srv2
        base_m = sandbox_json(srv, b).get("userns_base")
        t.ok(base_m is not None and base_m != base_a, "the old sandbox gets a range (%s)" % base_m)
        r = srv.request("POST", "/v1/sandboxes/%s/start" % b)
        t.eq(r.status, 200, "and starts, its desktop up")
        r = srv.exec(b, ["sh", "-c", "stat -c %u /workspace /home/user; echo x >> /workspace/x"
                                     " && echo ok"])
        t.eq(r["stdout"].split(), ["1000", "1000", "ok"], "its files are its user's, writable")
        st = os.lstat(os.path.join(bdir, "upper", "workspace"))
        t.eq(st.st_uid, base_m + USER, "owned by host base+1000 in its upper layer")

        # ---- concurrent starts each make their own namespace ----
        # (each holder process is a fork of the threaded deskboxd: it must
        # not keep another start's pipe open, or that start waits forever)
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            outs = list(ex.map(lambda _: srv.request("POST", "/v1/sandboxes", {}, timeout=90),
                               range(4)))
        made = [o.json()["id"] for o in outs if o.status == 201]
        t.eq(len(made), 4, "four sandboxes created at once all start")
        bases = {sandbox_json(srv, i).get("userns_base") for i in made}
        t.eq(len(bases), 4, "each with a range of its own")
        for i in made:
            srv.request("DELETE", "/v1/sandboxes/" + i)

        # ---- a deleted sandbox's range is reused, never shared ----
        r = srv.request("DELETE", "/v1/sandboxes/%s" % a)
        t.ok(r.status in (200, 204), "delete A")
        c = srv.create()["id"]
        base_c = sandbox_json(srv, c).get("userns_base")
        t.ok(base_c is not None and base_c != base_m, "a new sandbox gets a free range (%s)"
             % base_c)
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
