"""Warm pools of VM desktops (docs/isolation.md, docs/lifecycle.md): a
template with "isolation":"vm" and "warm_pool" keeps booted VMs ready, and a
create naming it is a claim of one: a VM with a kernel of its own whose
desktop and exec answer at once, while a replacement boots.  Pool members
are not listed; a kill -9 of deskboxd takes the claimed VM over and deletes
the member never handed out (its QEMU killed), and the pool refills;
deleting the template drains it, and nothing of the VMs is left."""

import glob
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

BOOT_S = 300  # a VM under emulation on a loaded machine: tens of seconds


SEEN = set()  # every sandbox id of this test's QEMUs


def vm_qemus(state):
    """{pid: sandbox id} of the QEMU processes in the cgroup of a sandbox of
    the state dir `state` (not another deskboxd's on this machine), or of
    one seen before (deleted since)."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if not f.read().split(b"\0")[0].endswith(b"qemu-system-x86_64"):
                    continue
            with open("/proc/%s/cgroup" % pid) as f:
                cg = f.read()
        except OSError:
            continue
        i = cg.find("/deskbox/dbx-")
        sid = cg[i + len("/deskbox/dbx-"):].split("\n")[0].split("/")[0] if i >= 0 else ""
        if sid and (sid in SEEN or os.path.isdir(os.path.join(state, "sandboxes", sid))):
            SEEN.add(sid)
            out[int(pid)] = sid
    return out


def ready(srv, name):
    r = srv.request("GET", "/v1/templates/" + name)
    return r.json().get("warm_pool_ready") if r.status == 200 else None


def claim_part(t, srv):
    """The first claim; returns the claimed sandbox's id (None when none)."""
    r = srv.request("POST", "/v1/templates", {"name": "vmwarm", "isolation": "vm",
                                              "warm_pool": 1})
    t.ok(r.status == 201 and r.json().get("isolation") == "vm",
         "a template with isolation vm and a warm pool", r.body[:200])
    t0 = time.monotonic()
    got = dbx.wait_until(lambda: ready(srv, "vmwarm") == 1, timeout=BOOT_S, interval=0.5)
    t.ok(got, "its pool gets a booted VM ready (%.1f s)" % (time.monotonic() - t0),
         srv.request("GET", "/v1/templates/vmwarm").body[:300])
    if not got:
        return None
    members = set(vm_qemus(srv.state_dir).values())
    t.eq(len(members), 1, "the ready member is one QEMU in its own cgroup")
    listed = [s["id"] for s in srv.request("GET", "/v1/sandboxes").json()["sandboxes"]]
    t.ok(not members & set(listed), "and it is not listed", listed)
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/sandboxes", {"template": "vmwarm", "name": "warmvm"})
    ms = (time.monotonic() - t0) * 1000
    t.ok(r.status == 201 and r.json().get("id") in members and
         r.json().get("isolation") == "vm" and r.json().get("status") == "running",
         "a create naming the template claims the ready VM", r.body[:300])
    t.diag("claim of a ready VM: %.1f ms (cold boot: tens of seconds)" % ms)
    if r.status != 201:
        return None
    sid = r.json()["id"]
    png = srv.screenshot(sid)
    t.ok(dbx.png_info(png)[:2] == (1280, 800), "its desktop answers a screenshot at once")
    out = srv.exec(sid, ["uname", "-r"])["stdout"].strip()
    t.ok(out and out != os.uname().release,
         "exec runs in its own kernel (%s, the host's %s)" % (out, os.uname().release))
    r = srv.request("GET", "/v1/sandboxes/warmvm")
    t.ok(r.status == 200 and r.json().get("id") == sid, "the claim gave it its name",
         r.body[:200])
    t0 = time.monotonic()
    got = dbx.wait_until(lambda: ready(srv, "vmwarm") == 1, timeout=BOOT_S, interval=0.5)
    t.ok(got and len(vm_qemus(srv.state_dir)) == 2,
         "a replacement boots into the pool (%.1f s): two QEMUs" % (time.monotonic() - t0),
         vm_qemus(srv.state_dir))
    return sid


def crash_part(t, srv, servers, state, sid):
    """kill -9 of deskboxd: the claimed VM is taken over, the member never
    handed out is deleted (its QEMU too), the pool refills.  Returns the
    new server."""
    before = vm_qemus(srv.state_dir)
    member = [p for p, s in before.items() if s != sid]
    srv.kill()
    srv = dbx.Server(state_dir=state)
    servers.append(srv)
    r = srv.request("GET", "/v1/sandboxes/" + sid)
    t.ok(r.status == 200 and r.json().get("status") == "running",
         "after kill -9 the claimed VM is taken over", r.body[:200])
    t.eq(srv.exec(sid, ["cat", "/proc/sys/kernel/random/boot_id"])["exit_code"], 0,
         "and answers exec")
    t.ok(member and not any(dbx.running(p) for p in member),
         "the pool member never handed out is deleted with its QEMU",
         (before, vm_qemus(srv.state_dir)))
    got = dbx.wait_until(lambda: ready(srv, "vmwarm") == 1, timeout=BOOT_S, interval=0.5)
    t.ok(got, "the stored template's pool refills after the restart")
    return srv


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    state = srv.state_dir
    servers = [srv]
    try:
        parts = [os.path.join(dbx.BUILD, "vm", "initramfs.cpio.gz")] + \
            glob.glob("/boot/vmlinuz-*")[:1]
        if len(parts) < 2 or not os.path.exists(parts[0]):
            t.skip("the VM pool checks", "this host has no VM kernel and initramfs (make vm)")
            sid = None
        else:
            sid = claim_part(t, srv)
        if sid:
            srv = crash_part(t, srv, servers, state, sid)
            r = srv.request("DELETE", "/v1/templates/vmwarm")
            t.ok(r.status in (200, 204), "the template deletes", r.body[:200])
            t.eq(list(vm_qemus(srv.state_dir).values()), [sid],
                 "its pool is drained: only the claimed VM runs")
            r = srv.request("DELETE", "/v1/sandboxes/" + sid, timeout=120)
            t.ok(r.status in (200, 204), "the claimed VM deletes", r.body[:200])
            gone = dbx.wait_until(lambda: not vm_qemus(srv.state_dir), timeout=10)
            t.ok(gone, "no QEMU is left", vm_qemus(srv.state_dir))
    finally:
        dbx.stop_servers(t, servers, state)
    t.done()


if __name__ == "__main__":
    main()
