"""Two sandboxes side by side: neither sees the other's processes, files or
screen; each has only loopback networking, no capabilities, its limits in
its own cgroup, and nothing of the host's private directories."""

import glob
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def cgroup_file(cid, controller, name):
    """The container's cgroup file on a v1 or a v2 host, or None."""
    for path in (glob.glob("/sys/fs/cgroup/%s/deskbox/%s/%s" % (controller, cid, name)) +
                 glob.glob("/sys/fs/cgroup/deskbox/%s/%s" % (cid, name))):
        with open(path) as f:
            return f.read().strip()
    return None


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
        t.ok(a != b, "two sandboxes with distinct ids")

        res = srv.exec(a, ["sh", "-c", "echo only-in-a > /tmp/marker; exec sleep 1234"],
                       background=True)
        time.sleep(0.3)
        ps_b = srv.exec(b, ["ps", "-eo", "args"])["stdout"]
        t.ok("sleep 1234" not in ps_b, "b does not see a's processes", ps_b)
        ps_a = srv.exec(a, ["ps", "-eo", "args"])["stdout"]
        t.ok("sleep 1234" in ps_a, "a sees its own process", ps_a)
        nproc = len([l for l in ps_b.splitlines()[1:] if l.strip()])
        t.ok(nproc < 12, "b's pid namespace holds only its desktop (%d processes)" % nproc, ps_b)
        r = srv.exec(b, ["cat", "/tmp/marker"])
        t.ok(r["exit_code"] != 0, "b does not see a's files")

        shot_b0 = srv.screenshot(b)
        r = srv.exec(a, ["xsetroot", "-solid", "#ff0000"])
        t.eq(r["exit_code"], 0, "paint a's root window red")
        time.sleep(0.5)
        px = dbx.png_pixels(srv.screenshot(a, "?x=10&y=10&w=4&h=4"))
        t.eq(px[0][:3], b"\xff\x00\x00", "a's screen turned red")
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
        mem = cgroup_file(cid, "memory", "memory.limit_in_bytes") or cgroup_file(
            cid, "memory", "memory.max")
        t.eq(mem, str(512 << 20), "memory limit in the sandbox's cgroup")
        pids = cgroup_file(cid, "pids", "pids.max")
        t.eq(pids, "200", "pids limit in the sandbox's cgroup")
        r = srv.exec(a, ["sh", "-c",
                         "i=0; while [ $i -lt 400 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null;"
                         " echo started; kill $(jobs -p) 2>/dev/null"], timeout_s=30)
        cur = cgroup_file(cid, "pids", "pids.current")
        t.ok("fork" in r["stderr"] or "Resource" in r["stderr"] or r["exit_code"] != 0 or
             "started" in r["stdout"], "a burst of forks is contained by pids.max", r)
        r = srv.request("GET", "/healthz", token=None)
        t.eq(r.status, 200, "the API stays responsive")
        t.ok(len(srv.screenshot(b)) > 0, "the other sandbox stays responsive")
        t.diag("pids.current after the burst: %s" % cur)

        for sid in (a, b):
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
