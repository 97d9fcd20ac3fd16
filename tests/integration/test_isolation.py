"""Two sandboxes side by side: neither sees the other's processes, files or
screen; each has only loopback networking, no capabilities, its limits in
its own cgroup, and nothing of the host's private directories."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def ps(srv, sid):
    return srv.exec(sid, ["ps", "-eo", "args"])["stdout"]


def corner(srv, sid):
    """The RGB of pixel (10, 10) of a sandbox's screen."""
    return dbx.png_pixels(srv.screenshot(sid, "?x=10&y=10&w=4&h=4"))[0][:3]


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    host_canary = "/root/deskbox-host-canary-%d" % os.getpid()
    try:
        with open(host_canary, "w") as f:
            f.write("host secret")
        a = srv.create({"memory_mb": 512, "pids_max": 200})["id"]
        b = srv.create({"display": {"width": 800, "height": 600}})["id"]
        ro = srv.create({"read_only_root": True})["id"]
        t.ok(a != b, "two sandboxes with distinct ids")

        res = srv.exec(a, ["sh", "-c", "echo only-in-a > /tmp/marker; exec sleep 1234"],
                       background=True)
        # Once a sees its process, b's view of the same moment is checked.
        t.ok(dbx.wait_until(lambda: "sleep 1234" in ps(srv, a)), "a sees its own process",
             ps(srv, a))
        ps_b = ps(srv, b)
        t.ok("sleep 1234" not in ps_b, "b does not see a's processes", ps_b)
        nproc = len([l for l in ps_b.splitlines()[1:] if l.strip()])
        t.ok(nproc < 12, "b's pid namespace holds only its desktop (%d processes)" % nproc, ps_b)
        r = srv.exec(b, ["cat", "/tmp/marker"])
        t.ok(r["exit_code"] != 0, "b does not see a's files")

        shot_b0 = srv.screenshot(b)
        r = srv.exec(a, ["xsetroot", "-solid", "#ff0000"])
        t.eq(r["exit_code"], 0, "paint a's root window red")
        t.ok(dbx.wait_until(lambda: corner(srv, a) == b"\xff\x00\x00"), "a's screen turned red",
             corner(srv, a))
        shot_b1 = srv.screenshot(b)
        t.ok(dbx.changed_bbox(shot_b0, shot_b1) is None, "b's screen did not change")
        t.eq(dbx.png_info(shot_b1)[:2], (800, 600), "b has its own display size")

        r = srv.exec(a, ["sh", "-c", "ls /sys/class/net"])
        t.eq(r["stdout"].split(), ["lo"], "only loopback in the network namespace")
        r = srv.exec(a, ["sh", "-c", "grep CapEff /proc/self/status"])
        t.ok(r["stdout"].split()[-1] == "0000000000000000", "no effective capabilities",
             r["stdout"])
        r = srv.exec(a, ["sh", "-c", "grep NoNewPrivs /proc/self/status"])
        t.ok(r["stdout"].split()[-1] == "1", "no_new_privs is set", r["stdout"])
        for sid, what in ((a, "the root"), (ro, "a read-only root")):
            r = srv.exec(sid, ["cat", "/proc/self/mountinfo"])
            root = [l.split() for l in r["stdout"].splitlines() if l.split()[4:5] == ["/"]]
            opts = root[-1][5].split(",") if root else []
            t.ok("nosuid" in opts and "nodev" in opts,
                 "%s is mounted nosuid,nodev (%s)" % (what, ",".join(opts)), r["stdout"][-600:])
        r = srv.exec(a, ["sh", "-c", "cp /bin/true /tmp/suid-true && chmod 4755 /tmp/suid-true"
                                     " && ls -l /tmp/suid-true && /tmp/suid-true"])
        t.ok(r["exit_code"] == 0 and r["stdout"].startswith("-rws"),
             "a set-uid file can still be made and run (the bit is inert)", r)
        r = srv.exec(a, ["cat", host_canary])
        t.ok(r["exit_code"] != 0 and "host secret" not in r["stdout"],
             "the host's /root is not visible")
        r = srv.exec(a, ["sh", "-c", "ls -A /home /var/lib 2>&1; cat /etc/shadow 2>&1"])
        t.ok("deskbox" not in r["stdout"] and "root:" not in r["stdout"],
             "no host home, state dir or shadow file", r["stdout"])
        r = srv.exec(a, ["sh", "-c", "touch /usr/bin/evil 2>&1; echo rc=$?"])
        t.ok("rc=0" not in r["stdout"], "host /usr is read-only", r["stdout"])
        # The x32 table (syscall numbers with bit 30 set) is not the one
        # the seccomp rules were written for: a caller is killed (SIGSYS).
        r = srv.exec(a, ["python3", "-c",
                         "import ctypes; l = ctypes.CDLL(None); l.syscall(0x40000000 | 39); "
                         "print('x32 syscall ran')"])
        t.ok(r["exit_code"] == 128 + 31 and "x32 syscall ran" not in r["stdout"],
             "an x32 system call is killed by seccomp", r)
        r = srv.exec(a, ["hostname"])
        t.eq(r["stdout"].strip(), "deskbox", "own hostname")

        cid = "dbx-" + a
        mem = dbx.cgroup_file(cid, "memory", "memory.limit_in_bytes") or dbx.cgroup_file(
            cid, "memory", "memory.max")
        t.eq(mem, str(512 << 20), "memory limit in the sandbox's cgroup")
        pids = dbx.cgroup_file(cid, "pids", "pids.max")
        t.eq(pids, "200", "pids limit in the sandbox's cgroup")
        # 400 background sleeps against pids.max 200: each one started
        # prints its pid, and the shell gives up at the first fork refused.
        r = srv.exec(a, ["sh", "-c", "i=0; while [ $i -lt 400 ]; do sleep 30 & echo $!;"
                         " i=$((i+1)); done; kill $(jobs -p)"], timeout_s=30)
        cur = dbx.cgroup_file(cid, "pids", "pids.current")
        started = len(r["stdout"].split())
        t.ok(0 < started < 200 and r["exit_code"] != 0 and "fork" in r["stderr"].lower(),
             "a burst of forks is contained by pids.max (%d of 400 started)" % started,
             {k: v for k, v in r.items() if k != "stdout"})
        r = srv.request("GET", "/healthz", token=None)
        t.eq(r.status, 200, "the API stays responsive")
        t.ok(len(srv.screenshot(b)) > 0, "the other sandbox stays responsive")
        t.diag("pids.current after the burst: %s" % cur)

        for sid in (a, b, ro):
            r = srv.request("DELETE", "/v1/sandboxes/" + sid)
            t.eq(r.status, 204, "delete")
    finally:
        try:
            os.unlink(host_canary)
        except OSError:
            pass
        srv.cleanup()
    t.done()


main()
