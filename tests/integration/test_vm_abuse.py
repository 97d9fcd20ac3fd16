"""A hostile guest (issue 26's tests): an OOM and a fork bomb inside a VM
sandbox stay inside its kernel.  One VM (768 MiB) and one container beside
it: a program that allocates past the guest's RAM is killed by the guest's
OOM killer while the VM answers on and QEMU stays inside its cgroup's
limit; a fork bomb in the guest makes no host process (QEMU's threads stay
as they were), the container beside it answers exec and screenshots
meanwhile, and the VM's stop and delete leave nothing of it.  Bounded:
the bomb runs at most BOMB_S seconds before the VM is stopped."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

BOMB_S = 20


def qemu_of(sid):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                if "/deskbox/dbx-%s\n" % sid not in f.read():
                    continue
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if f.read().split(b"\0")[0].endswith(b"qemu-system-x86_64"):
                    return int(pid)
        except OSError:
            continue
    return None


def status_of(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    """The CPU time of process `pid` (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def cgroup_procs(sid):
    """The processes in the VM's cgroup (every hierarchy's)."""
    out = set()
    for c in ("pids", "memory", "cpu", "freezer"):
        for p in ("/sys/fs/cgroup/%s/deskbox/dbx-%s/cgroup.procs" % (c, sid),
                  "/sys/fs/cgroup/deskbox/dbx-%s/cgroup.procs" % sid):
            try:
                with open(p) as f:
                    out |= {int(x) for x in f.read().split()}
            except OSError:
                pass
    return out


def guest_ooms(srv, vm):
    out = srv.exec(vm, ["grep", "-h", "oom_kill", "/proc/vmstat"])["stdout"].split()
    return int(out[1]) if len(out) > 1 else -1


def oom_part(t, srv, vm, box, qemu):
    """Allocation past the guest's RAM: the guest kills it."""
    before = guest_ooms(srv, vm)
    r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % vm,
                    {"argv": ["python3", "-c",
                              "b = []\nwhile True: b.append(bytearray(16 << 20))"],
                     "timeout_s": 120}, timeout=180)
    j = r.json() if r.status == 200 else {}
    t.ok(r.status == 200 and j.get("exit_code") not in (0, None) and not j.get("timed_out"),
         "a program allocating past the VM's RAM is killed inside the guest (exit %s)"
         % j.get("exit_code"), r.body[:300])
    after = guest_ooms(srv, vm)
    t.ok(before >= 0 and after > before,
         "the guest's kernel counts its OOM kill (oom_kill %d -> %d)" % (before, after))
    t.eq(srv.exec(vm, ["echo", "alive"])["stdout"], "alive\n", "the VM answers on")
    limit = dbx.sandbox_cgroup_file(vm, "memory", "memory.limit_in_bytes", "memory.max")
    peak = dbx.sandbox_cgroup_file(vm, "memory", "memory.max_usage_in_bytes", "memory.peak")
    t.ok(limit and peak and int(peak) <= int(limit),
         "QEMU stayed within its cgroup's limit (peak %s of %s bytes)" % (peak, limit))
    t.ok(qemu_of(vm) == qemu, "the same QEMU runs (not killed by the host)")
    t.eq(srv.exec(box, ["echo", "fine"])["stdout"], "fine\n", "the container beside it is fine")


def bomb_part(t, srv, vm, box, qemu):
    """A fork bomb in the guest, for at most BOMB_S seconds."""
    threads = status_of(qemu, "Threads")
    i0, c = time.monotonic(), cpu_s(qemu)
    while time.monotonic() - i0 < 3:
        srv.request("GET", "/v1/sandboxes/" + vm)
    idle = (cpu_s(qemu) - c) / (time.monotonic() - i0)
    r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % vm,
                    {"argv": ["sh", "-c", "b() { b | b & }; b"], "background": True})
    t.ok(r.status == 200, "a fork bomb starts in the guest", r.body[:200])
    # The container keeps answering while the bomb runs.
    answered, procs, most_threads = 0, set(), threads
    t0, c0 = time.monotonic(), cpu_s(qemu)
    until = time.monotonic() + BOMB_S
    while time.monotonic() < until:
        rr = srv.request("POST", "/v1/sandboxes/%s/process/exec" % box,
                         {"argv": ["echo", "ok"]}, timeout=30)
        answered += rr.status == 200 and rr.json().get("stdout") == "ok\n"
        procs |= cgroup_procs(vm)
        most_threads = max(most_threads, status_of(qemu, "Threads"))
    busy = (cpu_s(qemu) - c0) / (time.monotonic() - t0)
    r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % vm,
                    {"argv": ["sh", "-c", "ls -d /proc/[0-9]* | wc -l"], "timeout_s": 10},
                    timeout=30)
    # (QEMU's share of the machine's cores depends on what else runs.)
    t.diag("QEMU's CPU: %.0f%% of a core idle, %.0f%% during the bomb"
           % (idle * 100, busy * 100))
    j = r.json() if r.status == 200 else {}
    t.ok(r.status != 200 or j.get("timed_out") or j.get("exit_code") != 0 or
         int(j.get("stdout") or 0) > 500,
         "the bomb swamps the guest (an exec there, which answered before: %s)" % r.body[:200])
    t.ok(answered >= 3, "the container answered exec %d times during the bomb" % answered)
    png = srv.screenshot(box)
    t.ok(dbx.png_info(png)[:2] == (1280, 800), "and a screenshot")
    t.eq(procs, {qemu}, "no host process came of it: QEMU is the only process in the VM's "
         "cgroup throughout")
    pids_max = dbx.sandbox_cgroup_file(vm, "pids", "pids.max", "pids.max")
    t.ok(pids_max and most_threads <= int(pids_max),
         "QEMU's threads stayed within its pids limit (%d before, at most %d, limit %s)"
         % (threads, most_threads, pids_max))
    t.ok(qemu_of(vm) == qemu, "the same QEMU runs")


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        r = srv.request("POST", "/v1/sandboxes", {"isolation": "vm", "memory_mb": 768},
                        timeout=400)
        if r.status == 501:
            t.skip("the VM abuse checks", "this host cannot run a VM: %s" % r.body[:200])
        else:
            t.ok(r.status == 201, "a VM of 768 MiB", r.body[:300])
            vm = r.json()["id"]
            box = srv.create()["id"]
            qemu = qemu_of(vm)
            t.ok(qemu, "its QEMU", qemu)
            oom_part(t, srv, vm, box, qemu)
            bomb_part(t, srv, vm, box, qemu)
            t0 = time.monotonic()
            r = srv.request("DELETE", "/v1/sandboxes/" + vm, timeout=120)
            t.ok(r.status in (200, 204),
                 "the bombed VM deletes (%.1f s)" % (time.monotonic() - t0), r.body[:200])
            gone = dbx.wait_until(lambda: not qemu_of(vm), timeout=10)
            t.ok(gone, "and its QEMU is gone")
            t.ok(not os.path.exists("/proc/%d" % qemu) or qemu_of(vm) is None,
                 "no process of it is left")
            t.eq(srv.exec(box, ["echo", "still"])["stdout"], "still\n",
                 "the container beside it still answers")
    finally:
        srv.stop()
    t.done()


if __name__ == "__main__":
    main()
