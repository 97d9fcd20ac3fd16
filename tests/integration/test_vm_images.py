"""Stored images in a VM ("isolation":"vm" with "image"; docs/isolation.md):
the image made as test_images.py makes it (host files: sh, python3, Xvfb,
openbox and their libraries, in an OCI layout by umoci, no network),
imported, and a VM booted from it.

Cases: the VM boots from the image to a desktop (a screenshot), the
guest runs the image's python3 as the user, its /usr is the image's (no
chromium, no xterm of the host's) and QEMU has no usr share; deskbox's
parts in the guest are the image binaries (/.deskbox/lib); the files API
and the guest see each other's files; an image without Xvfb or openbox
(the host's desktop) is refused with 501 naming why, leaving no sandbox;
delete.  The boot time is printed."""

import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
import test_images as images  # noqa: E402

t = dbx.Tap()


def count(srv):
    j = srv.request("GET", "/v1/sandboxes").json()
    return len(j if isinstance(j, list) else j["sandboxes"])


def vm_checks(srv, sid):
    cmd = dbx.qemu_cmdline(sid)
    t.ok(cmd and not [a for a in cmd if a.startswith("local,id=usr,")] and
         [a for a in cmd if a.startswith("local,id=deskbox,") and "deskbox-image" in a],
         "QEMU shares no /usr and the image's deskbox parts", [a for a in cmd if "id=" in a])
    r = srv.exec(sid, ["python3", "-c", "import os, sys; print(sys.version_info[0], os.getuid())"],
                 timeout_s=90)
    t.eq((r["exit_code"], r["stdout"]), (0, "3 1000\n"), "the image's python3 runs in the guest "
         "as the user")
    r = srv.exec(sid, ["sh", "-c", "ls /usr/bin/chromium /usr/bin/xterm 2>&1; echo $?; "
                       "ls /.deskbox/lib/libc.so.6; uname -r"], timeout_s=90)
    out = r["stdout"]
    t.ok("\n2\n" in out and "/.deskbox/lib/libc.so.6" in out and os.uname().release not in out,
         "its /usr is the image's (no chromium, no xterm), deskbox's parts have their own "
         "libraries, and the kernel is the guest's", out)
    r = srv.exec(sid, ["sh", "-c", "cat /proc/[0-9]*/comm"], timeout_s=90)
    procs = set(r["stdout"].split())
    t.ok({"Xvfb", "openbox", "deskbox-vnc"} <= procs, "the image's Xvfb and openbox run with "
         "deskbox-vnc", sorted(procs))
    png = srv.screenshot(sid)
    t.eq(dbx.png_info(png)[:2], (640, 400), "the desktop answers a screenshot")
    base = "/v1/sandboxes/%s/files" % sid
    r = srv.request("PUT", base + "/upload?path=/workspace/hello.txt", b"hi from the host\n")
    t.eq(r.status, 201, "the files API uploads into it")
    r = srv.exec(sid, ["sh", "-c", "cat /workspace/hello.txt; echo guest > /workspace/g.txt"],
                 timeout_s=90)
    t.eq(r["stdout"], "hi from the host\n", "the guest reads it")
    r = srv.request("GET", base + "/download?path=/workspace/g.txt")
    t.eq(r.body, b"guest\n", "and the files API reads what the guest wrote")


def main():
    dbx.require_root_and_tools()
    for tool in ("umoci", "skopeo", "ldd"):
        if not shutil.which(tool):
            dbx.skip_all("%s is not installed (run scripts/install-deps.sh)" % tool)
    if not os.path.isdir("/usr/lib/python3.11"):
        dbx.skip_all("the test copies the host's /usr/lib/python3.11, which is not there")
    work = tempfile.mkdtemp(prefix="dbx-vmimages-")
    srv = None
    sids = []
    try:
        layout = images.make_layout(work, "tiny", desktop=True)
        headless = images.make_layout(work, "headless", desktop=False)
        srv = dbx.Server()
        for name, lay in (("tiny", layout), ("headless", headless)):
            r = srv.request("POST", "/v1/images", {"name": name, "oci_layout": lay},
                            timeout=300)
            t.eq(r.status, 201, "the image %s imports" % name)
        t0 = time.monotonic()
        r = srv.request("POST", "/v1/sandboxes", {"image": "tiny", "isolation": "vm",
                                                  "display": {"width": 640, "height": 400}},
                        timeout=400)
        if r.status == 501 and ("make vm" in dbx.error_message(r) or "/dev/kvm" in dbx.error_message(r)):
            t.skip("the VM image checks", "this host cannot run a VM: %s" % dbx.error_message(r))
            t.done()
            return
        t.ok(r.status == 201, "a VM boots from the stored image (%.1f s)" % (
            time.monotonic() - t0), (r.status, r.body[:400]))
        if r.status == 201:
            sids.append(r.json()["id"])
            vm_checks(srv, sids[0])
        before = count(srv)
        r = srv.request("POST", "/v1/sandboxes", {"image": "headless", "isolation": "vm"},
                        timeout=400)
        t.ok(r.status == 501 and "Xvfb or openbox" in dbx.error_message(r),
             "an image that needs the host's desktop: 501 naming why", r.body[:300])
        after = count(srv)
        t.ok(after == before == len(sids), "and no sandbox is left of it (%d before, %d after)"
             % (before, after))
        for s in list(sids):
            r = srv.request("DELETE", "/v1/sandboxes/" + s, timeout=120)
            t.ok(r.status in (200, 204), "delete the VM", r.status)
            sids.remove(s)
    finally:
        if srv:
            for s in sids:
                srv.request("DELETE", "/v1/sandboxes/" + s, timeout=120)
            srv.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    t.done()


if __name__ == "__main__":
    main()
