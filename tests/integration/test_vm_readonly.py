"""A VM with a read-only root ("isolation":"vm", "read_only_root": true;
docs/isolation.md, docs/lifecycle.md): the view a container gets
(test_names.py's check_read_only).  QEMU exports the root share
read-only and each writable place (/workspace, /tmp, /home/user, /root)
as a share of its own (server/runtime/runtime_vm_ro.c).

Cases: the create answers 201 with read_only_root; QEMU's command line
has the root share readonly=on and the four writable shares; in the guest
writes outside the writable places fail with EROFS, writes to them work
(the HOME too); the guest's root can neither write /etc nor remount the
root writable (the export refuses it, not the guest's kernel); the
desktop answers; the files API, running and stopped, answers 403 (EROFS)
outside the writable places and 201 in them; after a kill -9 of deskboxd
the next one takes the VM over, its guest still read-only, and its files
API answers 409 (it could only reach a writable overlay) until the
VM's next start; what was written persists
across a stop and a start, the root still read-only; the same VM without
read_only_root writes /etc (the control); delete.  The boot time is
printed."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

t = dbx.Tap()
RO = "Read-only file system"


def create(srv, spec, what):
    spec = dict(spec, isolation="vm", display={"width": 640, "height": 400})
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/sandboxes", spec, timeout=400)
    if r.status == 501 and ("make vm" in dbx.error_message(r) or "/dev/kvm" in dbx.error_message(r)):
        return None, dbx.error_message(r)
    t.ok(r.status == 201, "%s boots (%.1f s)" % (what, time.monotonic() - t0),
         (r.status, r.body[:300]))
    return (r.json() if r.status == 201 else None), None


def check_qemu(sid):
    cmd = dbx.qemu_cmdline(sid)
    root = [a for a in cmd if a.startswith("local,id=root,")]
    rw = [a for a in cmd if a.startswith("local,id=rw")]
    app = cmd[cmd.index("-append") + 1] if "-append" in cmd else ""
    t.ok(root and "readonly=on" in root[0] and "security_model=passthrough" in root[0] and
         len(rw) == 4 and all("readonly" not in a for a in rw) and
         "deskbox_rw=/workspace,/tmp,/home/user,/root" in app,
         "QEMU exports the root read-only and the four writable places as shares of their own",
         (root, rw, app))


def check_inside(sid):
    for path in ("/usr/x", "/etc/x", "/x", "/var/x", "/opt/x"):
        x = dbx_exec(sid, ["touch", path])
        t.ok(x["exit_code"] != 0 and RO in x["stderr"], "touch %s fails with EROFS in the guest"
             % path, x)
    for path in ("/workspace/x", "/tmp/x", "/home/user/x"):
        x = dbx_exec(sid, ["sh", "-c", "echo w >%s && cat %s" % (path, path)])
        t.eq((x["exit_code"], x["stdout"]), (0, "w\n"), "%s is writable in the guest" % path)
    x = dbx_exec(sid, ["sh", "-c", "echo w >~/y && echo $HOME"])
    t.eq((x["exit_code"], x["stdout"]), (0, "/home/user\n"), "~ (the HOME) is writable")
    x = dbx_exec(sid, ["sh", "-c", "id -u; touch /root/x && echo root-ok; touch /etc/x; "
                       "mount -o remount,rw / && echo remounted; touch /etc/y || echo still-ro; "
                       "mount -o remount,ro /"],
                 user="root")
    out = x.get("stdout", "") + x.get("stderr", "")
    t.ok(out.startswith("0\n") and "root-ok" in out and RO in out and "remounted" in out and
         "still-ro" in out, "the guest's root writes /root but not /etc, even after it "
         "remounted / writable (QEMU's export refuses the writes; it is put back)", out)


def dbx_exec(sid, argv, **kw):
    return SRV[0].exec(sid, argv, timeout_s=90, **kw)


def check_files(srv, sid, state):
    base = "/v1/sandboxes/%s/files" % sid
    for path in ("/usr/f", "/etc/f", "/f"):
        r = srv.request("PUT", base + "/upload?path=" + path, b"x")
        t.ok(r.status == 403 and RO in dbx.error_message(r),
             "%s: an upload to %s is 403 (EROFS)" % (state, path), r.body[:200])
    r = srv.request("POST", base + "/mkdir", {"path": "/etc/d"})
    t.eq(r.status, 403, "%s: mkdir in /etc is 403" % state)
    for path in ("/workspace/f", "/tmp/f", "/home/user/f"):
        r = srv.request("PUT", base + "/upload?path=" + path, state)
        t.eq(r.status, 201, "%s: an upload to %s works" % (state, path))


SRV = []


def takeover(srv, sid):
    """kill -9 of deskboxd: the next one takes the VM over; the overlay it
    reaches through QEMU is writable, so its files API refuses (409 saying
    why) rather than write around the read-only root."""
    srv.kill()
    srv2 = dbx.Server(state_dir=srv.state_dir)
    SRV[:] = [srv2, srv]
    r = srv2.request("GET", "/v1/sandboxes/" + sid)
    t.ok(r.status == 200 and r.json().get("status") == "running",
         "after kill -9 the next deskboxd takes the read-only VM over", r.body[:300])
    x = dbx_exec(sid, ["sh", "-c", "touch /etc/x; echo w >/workspace/t && cat /workspace/t"])
    t.ok(x["stdout"] == "w\n" and RO in x["stderr"], "its guest still has the read-only root", x)
    base = "/v1/sandboxes/%s/files" % sid
    for path in ("/etc/f", "/workspace/f"):
        r = srv2.request("PUT", base + "/upload?path=" + path, b"x")
        t.ok(r.status == 409 and "stop and start" in dbx.error_message(r),
             "taken over: an upload to %s is 409 naming why" % path, r.body[:300])
    r = srv2.request("GET", base + "/download?path=/etc/hostname")
    t.eq(r.status, 409, "taken over: a download too (the files wait for its next start)")
    return srv2


def main():
    dbx.require_root_and_tools()
    srv = dbx.Server()
    SRV.append(srv)
    sids = []
    try:
        vm, msg = create(srv, {"read_only_root": True}, "a VM with a read-only root")
        if vm is None:
            if msg:
                t.skip("the read-only VM checks", "this host cannot run a VM: %s" % msg)
            t.done()
            return
        sid = vm["id"]
        sids.append(sid)
        t.ok(vm.get("read_only_root") is True and vm.get("isolation") == "vm",
             "its view says read_only_root and vm", vm)
        check_qemu(sid)
        check_inside(sid)
        shot = srv.screenshot(sid)
        t.eq(dbx.png_info(shot)[:2], (640, 400), "the desktop answers a screenshot")
        check_files(srv, sid, "running")
        r = srv.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/x" % sid)
        t.ok(r.status == 200 and r.body == b"w\n", "the files API reads what the guest wrote",
             (r.status, r.body[:100]))
        x = dbx_exec(sid, ["cat", "/workspace/f", "/tmp/f"])
        t.eq(x["stdout"], "runningrunning", "the guest reads what the files API wrote")
        srv = takeover(srv, sid)
        r = srv.request("POST", "/v1/sandboxes/%s/stop" % sid, timeout=120)
        t.eq(r.status, 200, "it stops")
        check_files(srv, sid, "stopped")
        t0 = time.monotonic()
        r = srv.request("POST", "/v1/sandboxes/%s/start" % sid, timeout=400)
        t.eq(r.status, 200, "and starts again (%.1f s)" % (time.monotonic() - t0))
        x = dbx_exec(sid, ["sh", "-c", "cat /workspace/f /tmp/f /home/user/y; touch /usr/x"])
        t.ok(x["stdout"] == "stoppedstoppedw\n" and RO in x["stderr"],
             "what was written stopped is there, the root still read-only", x)
        base = "/v1/sandboxes/%s/files/upload?path=" % sid
        r1 = srv.request("PUT", base + "/etc/f", b"x")
        r2 = srv.request("PUT", base + "/workspace/g", b"x")
        t.ok(r1.status == 403 and r2.status == 201,
             "started by this deskboxd: its files API is the read-only view again",
             (r1.status, r2.status))
        ctl, _ = create(srv, {}, "a VM without read_only_root (the control)")
        if ctl:
            sids.append(ctl["id"])
            x = dbx_exec(ctl["id"], ["sh", "-c", "touch /etc/x && echo ok"], user="root")
            t.eq(x["stdout"], "ok\n", "its root writes /etc")
            t.ok(not [a for a in dbx.qemu_cmdline(ctl["id"]) if a.startswith("local,id=rw")],
                 "and QEMU has no writable-place shares for it")
        for s in list(sids):
            r = srv.request("DELETE", "/v1/sandboxes/" + s, timeout=120)
            t.ok(r.status in (200, 204), "delete", r.status)
            sids.remove(s)
    finally:
        srv = SRV[0]
        for s in sids:
            srv.request("DELETE", "/v1/sandboxes/" + s, timeout=120)
        for s in SRV:
            s.cleanup()
    t.done()


if __name__ == "__main__":
    main()
