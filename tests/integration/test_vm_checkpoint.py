"""Checkpoints, restore and forks of a VM sandbox (docs/isolation.md,
docs/lifecycle.md): as a container's, a checkpoint is a clone of the
sandbox's disk, taken with its processes frozen for the copy; for a VM the
guest first writes back what it caches (`sync`), so a file a program wrote
through a shared mmap and never flushed is in the checkpoint.  A restore
boots the VM again on the checkpoint's files (a new boot, as a container's
desktop restarts); a fork is a new VM with its own kernel on them.  A
checkpoint with "memory":true is 501 naming why.  A container's checkpoint
with "memory":true is 501 too."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

BOOT_S = 400
MMAP_WRITER = """
import mmap, os, sys, time
fd = os.open('/workspace/mapped.bin', os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 4096)
m = mmap.mmap(fd, 4096)
m[:12] = b'through mmap'
open('/tmp/mapped.ready', 'w').close()
time.sleep(100000)
"""


def message_of(r):
    try:
        return r.json()["error"]["message"]
    except Exception:
        return r.body[:200]


def vm_qemus(sids):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                cg = f.read()
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().split(b"\0")[0]
        except OSError:
            continue
        if cmd.endswith(b"qemu-system-x86_64") and any("/deskbox/dbx-%s\n" % s in cg
                                                        for s in sids):
            out.append(int(pid))
    return out


def boot_id(srv, sid):
    return srv.exec(sid, ["cat", "/proc/sys/kernel/random/boot_id"])["stdout"].strip()


def files(srv, sid):
    r = srv.exec(sid, ["sh", "-c", "cat /workspace/a.txt; echo; head -c 12 /workspace/mapped.bin;"
                       " echo; test -e /workspace/b.txt && echo b || echo no-b;"
                       " stat -c %u /workspace/a.txt"])
    return r["stdout"].split("\n")


def checkpoint_part(t, srv, sid):
    base = "/v1/sandboxes/" + sid
    srv.exec(sid, ["sh", "-c", "printf before > /workspace/a.txt"])
    srv.request("POST", base + "/process/exec",
                {"argv": ["python3", "-c", MMAP_WRITER], "background": True})
    ready = dbx.wait_until(lambda: srv.exec(sid, ["test", "-e", "/tmp/mapped.ready"])
                           ["exit_code"] == 0, timeout=60, interval=0.5)
    t.ok(ready, "a program wrote a file through a shared mmap and keeps it unflushed")
    # The guest writes dirty pages back after 30 s: the host has none yet.
    r = srv.request("GET", base + "/files/download?path=/workspace/mapped.bin")
    t.ok(r.status == 200 and b"through mmap" not in r.body,
         "the host's copy does not have the mmap write yet (the guest caches it)",
         (r.status, r.body[:16]))
    r = srv.request("POST", base + "/checkpoints", {"name": "c1", "memory": True})
    t.ok(r.status == 501 and "9p" in message_of(r),
         "a checkpoint with memory: 501 naming the 9p shares", (r.status, r.body[:300]))
    t0 = time.monotonic()
    r = srv.request("POST", base + "/checkpoints", {"name": "c1"}, timeout=60)
    j = r.json() if r.status == 201 else {}
    t.ok(r.status == 201 and j.get("name") == "c1",
         "a checkpoint of the running VM (%.0f ms, frozen %s ms)"
         % ((time.monotonic() - t0) * 1000, j.get("frozen_ms")), (r.status, r.body[:300]))
    t.eq(srv.exec(sid, ["echo", "on"])["stdout"], "on\n", "the VM runs on after it")
    srv.exec(sid, ["sh", "-c", "rm /workspace/a.txt; printf later > /workspace/b.txt"])


def restore_part(t, srv, sid, first_boot):
    base = "/v1/sandboxes/" + sid
    t0 = time.monotonic()
    r = srv.request("POST", base + "/checkpoints/c1/restore", timeout=BOOT_S)
    t.ok(r.status == 200 and r.json().get("status") == "running",
         "restore boots the VM on the checkpoint's files (%.1f s)" % (time.monotonic() - t0),
         r.body[:300])
    got = files(srv, sid)
    t.eq(got[:3], ["before", "through mmap", "no-b"],
         "the checkpoint's files: a.txt back, the mmap write in it (the guest's sync), "
         "b.txt gone")
    t.ok(boot_id(srv, sid) not in ("", first_boot), "a new boot of the guest, as a container's "
         "desktop restarts")
    png = srv.screenshot(sid)
    t.ok(dbx.png_info(png)[:2] == (1280, 800), "its desktop answers a screenshot")


def fork_part(t, srv, sid):
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/sandboxes/%s/fork" % sid, {"checkpoint": "c1"},
                    timeout=BOOT_S)
    j = r.json() if r.status == 201 else {}
    t.ok(r.status == 201 and j.get("isolation") == "vm" and j.get("status") == "running",
         "a fork from the checkpoint is a new VM (%.1f s)" % (time.monotonic() - t0),
         r.body[:300])
    if r.status != 201:
        return None
    fid = j["id"]
    got = files(srv, fid)
    t.eq(got[:3], ["before", "through mmap", "no-b"], "with the checkpoint's files")
    t.eq(got[3:4], ["1000"], "owned by its own user as the guest sees them")
    t.ok(boot_id(srv, fid) not in ("", boot_id(srv, sid)), "and a kernel of its own")
    srv.exec(fid, ["sh", "-c", "printf fork > /workspace/a.txt"])
    t.eq(files(srv, sid)[0], "before", "what the fork writes is its own")
    return fid


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    made = []
    try:
        box = srv.create()["id"]
        r = srv.request("POST", "/v1/sandboxes/%s/checkpoints" % box,
                        {"name": "m", "memory": True})
        t.ok(r.status == 501 and "container" in message_of(r),
             "a container's checkpoint with memory: 501 naming it", (r.status, r.body[:300]))
        for bad in ({"name": "m", "memory": "yes"}, {"name": "m", "memroy": True}):
            r = srv.request("POST", "/v1/sandboxes/%s/checkpoints" % box, bad)
            t.eq(r.status, 400, "checkpoint %r: 400" % (bad,))
        r = srv.request("POST", "/v1/sandboxes", {"isolation": "vm"}, timeout=BOOT_S)
        if r.status == 501:
            t.skip("the VM checkpoint checks", "this host cannot run a VM: %s" % r.body[:200])
        else:
            t.ok(r.status == 201, "a VM", r.body[:300])
            sid = r.json()["id"]
            made.append(sid)
            first = boot_id(srv, sid)
            checkpoint_part(t, srv, sid)
            restore_part(t, srv, sid, first)
            fid = fork_part(t, srv, sid)
            if fid:
                made.append(fid)
            for s in made:
                r = srv.request("DELETE", "/v1/sandboxes/" + s, timeout=120)
                t.ok(r.status in (200, 204), "delete %s" % s[:8], r.body[:200])
            gone = dbx.wait_until(lambda: not vm_qemus(made), timeout=10)
            t.ok(gone, "no QEMU of them is left", vm_qemus(made))
    finally:
        srv.stop()
    t.done()


if __name__ == "__main__":
    main()
