"""Every byte a sandbox writes is counted: its own fixed-size disk (dd stops
with ENOSPC at the limit, the host pays at most the image), uploads that
reserve their size (three concurrent 30 MB uploads under a 40 MB disk: one
wins), the container's output capped in init.log and init.log.1, a 4 MiB
/run/deskbox, and the disk kept across a restart of deskboxd and freed at
delete and shutdown."""

import glob
import hashlib
import json
import os
import shutil
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

DISK_MB = 40
LOG_CAP = 1 << 20


def sh(srv, sid, script, **kw):
    return srv.exec(sid, ["sh", "-c", script], **kw)


def allocated(path):
    return os.lstat(path).st_blocks * 512


def host_bytes_outside_image(srv, sid):
    """Bytes allocated in the sandbox's state dir on the host, the image
    aside.  Walked from the test's own mount namespace, where disk/ rootfs/
    and run/ are the empty mount points: what is there landed on the host."""
    top = os.path.join(srv.state_dir, "sandboxes", sid)
    total = 0
    for d, _, names in os.walk(top):
        for n in names:
            p = os.path.join(d, n)
            if p != os.path.join(top, "disk.img"):
                total += allocated(p)
    return total


def loops_of(state_dir, store=True):
    """Loop devices whose backing file is under `state_dir`; with `store`
    False, the disk store's own (<state>/store.xfs) aside."""
    found = []
    for f in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(f) as fh:
                back = fh.read().strip()
                if back.startswith(state_dir) and (
                        store or back != os.path.join(state_dir, "store.xfs")):
                    found.append(f.split("/")[3])
        except OSError:
            pass
    return found


def spec_checks(t, srv):
    r = srv.request("POST", "/v1/sandboxes", {"disk_mb": 10})
    t.eq(r.status, 400, "disk_mb under 32 is refused")
    r = srv.request("POST", "/v1/sandboxes", {"disk_mb": 1.5})
    t.eq(r.status, 400, "a fractional disk_mb is refused")


def upload(srv, sid, path, data, out, i, barrier, length=True):
    chunks = [data[k:k + (1 << 20)] for k in range(0, len(data), 1 << 20)]
    barrier.wait()
    r = dbx.stream_upload(srv, "/v1/sandboxes/%s/files/upload?path=%s" % (sid, path),
                          iter(chunks), length=len(data) if length else None)
    out[i] = r


def temp_litter(srv, sid):
    found = []
    for d, _, names in os.walk(srv.upper_dir(sid)):
        found += [n for n in names if n.startswith(".deskbox-upload-")]
    return found


def concurrent_uploads(t, srv, sid, length):
    kind = "declared" if length else "chunked"
    data = os.urandom(30 << 20)
    out = [None] * 3
    barrier = threading.Barrier(3)
    th = [threading.Thread(target=upload, args=(srv, sid, "/workspace/c%s%d" % (kind, i), data,
                                                 out, i, barrier, length)) for i in range(3)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    codes = sorted(r.status for r in out)
    won = [i for i in range(3) if out[i].status == 201]
    t.ok(len(won) <= 1 and all(c in (201, 507) for c in codes),
         "%s: three concurrent 30 MB uploads under %d MB: at most one succeeds, the "
         "others 507" % (kind, DISK_MB), codes)
    if length:
        t.eq(codes, [201, 507, 507], "declared: exactly one succeeds (its size is reserved)")
        t.ok(b"quota" in [r for r in out if r.status == 507][0].body, "507 says why",
             [r.body[:200] for r in out])
    names = sorted(e["name"] for e in srv.request(
        "GET", "/v1/sandboxes/%s/files/list?path=/workspace" % sid).json()["entries"])
    want = ["c%s%d" % (kind, i) for i in won]
    t.eq([n for n in names if n.startswith("c" + kind)], want, "%s: only the winner's file" % kind)
    t.eq(temp_litter(srv, sid), [], "%s: nothing half-written remains" % kind)
    for i in won:
        r = srv.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/c%s%d" %
                        (sid, kind, i))
        t.eq(hashlib.sha256(r.body).hexdigest(), hashlib.sha256(data).hexdigest(),
             "%s: the winner's file is whole" % kind)
        srv.request("DELETE", "/v1/sandboxes/%s/files?path=/workspace/c%s%d" % (sid, kind, i))


def dd_limit(t, srv, sid):
    img = dbx.disk_image(srv, sid)
    before = host_bytes_outside_image(srv, sid)
    r = sh(srv, sid, "dd if=/dev/zero of=/workspace/big bs=1M count=%d 2>&1; echo rc=$?"
           % (DISK_MB + 20))
    t.ok("No space left on device" in r["stdout"] and "rc=0" not in r["stdout"],
         "dd past the limit stops with ENOSPC", r["stdout"][-300:])
    st = os.stat(img)
    t.eq(st.st_size, DISK_MB << 20, "the image is exactly disk_mb")
    t.ok(allocated(img) <= DISK_MB << 20, "the host pays at most the image",
         allocated(img))
    after = host_bytes_outside_image(srv, sid)
    t.ok(after - before < 1 << 20, "nothing else of the sandbox's grew on the host",
         (before, after))
    r = sh(srv, sid, "rm /workspace/big && dd if=/dev/zero of=/workspace/again bs=1M count=8 "
           "2>&1; echo rc=$?")
    t.ok("rc=0" in r["stdout"], "after deleting the file, writing works again", r["stdout"])
    r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/up" % sid, b"x" * 4096)
    t.eq(r.status, 201, "and uploads too")


def log_cap(t, srv, sid):
    d = os.path.join(srv.state_dir, "sandboxes", sid)
    r = sh(srv, sid, "head -c 50000000 /dev/zero >> /proc/1/fd/1; echo rc=$?", timeout_s=120)
    wrote = "rc=0" in r["stdout"]
    t.diag("writing 50 MB to the init's stdout as the user: %s" % r["stdout"].strip())
    logs = [os.path.join(d, "init.log"), os.path.join(d, "init.log.1")]

    def sizes():
        return [os.path.getsize(p) if os.path.exists(p) else 0 for p in logs]
    if wrote:
        t.ok(dbx.wait_until(lambda: os.path.exists(logs[1]), timeout=30),
             "the log rotated into init.log.1", sizes())
    t.ok(all(s <= LOG_CAP + 65536 for s in sizes()) and sum(sizes()) <= 2 * LOG_CAP + 65536,
         "the host's log files stay under the cap (about 1 MiB each)", sizes())
    st = os.stat(logs[0])
    t.ok(st.st_uid == 0 and st.st_mode & 0o777 == 0o600, "init.log is root's, 0600",
         (st.st_uid, oct(st.st_mode)))
    n = len(glob.glob(os.path.join(d, "init.log*")))
    t.ok(n == 2 if wrote else n <= 2, "%s log files, no more" % ("two" if wrote else "at most two"),
         n)
    t.ok(len(srv.screenshot(sid)) > 0, "the desktop still answers")


def mount_flags(t, srv, sid):
    """The sandbox's disk and /run/deskbox as deskboxd mounted them."""
    with open("/proc/%d/mountinfo" % srv.proc.pid) as f:
        opts = {ln.split()[4]: ln.split()[5].split(",") for ln in f}
    d = os.path.join(srv.state_dir, "sandboxes", sid)
    disk, run = opts.get(d + "/disk", []), opts.get(d + "/run", [])
    t.ok("nosuid" in disk and "nodev" in disk,
         "its disk is mounted nosuid,nodev (nothing on it is set-uid on the host)", disk)
    t.ok(all(f in run for f in ("nosuid", "nodev", "noexec")),
         "/run/deskbox is nosuid,nodev,noexec", run)


def run_tmpfs(t, srv, sid):
    r = sh(srv, sid, "{ echo x > /run/deskbox/fill; } 2>&1; echo rc=$?")
    t.ok("rc=0" not in r["stdout"], "the user cannot write into /run/deskbox at all",
         r["stdout"])
    # /run/deskbox is the sandbox root's: written as that root.
    r = srv.root_exec(sid, ["sh", "-c", "{ head -c 50000000 /dev/zero > /run/deskbox/fill; } "
                                        "2>&1; echo rc=$?; stat -c %s /run/deskbox/fill"])
    out = r["stdout"]
    t.ok("No space left on device" in out and "rc=0" not in out,
         "50 MB into /run/deskbox fails with ENOSPC", out)
    size = int(out.strip().split("\n")[-1])
    t.ok(size <= 4 << 20, "at most 4 MiB went in", size)
    host_run = os.path.join(srv.state_dir, "sandboxes", sid, "run")
    t.eq(os.listdir(host_run), [], "nothing landed in the host's run dir")
    srv.root_exec(sid, ["rm", "/run/deskbox/fill"])
    t.ok(len(srv.screenshot(sid)) > 0, "the sandbox keeps working")


def restart(t, srv, sid):
    state = srv.state_dir
    t.eq(srv.stop(), 0, "deskboxd stops cleanly")
    t.ok(dbx.wait_until(lambda: not loops_of(state), timeout=10),
         "shutdown frees the loop devices", loops_of(state))
    srv2 = dbx.Server(state_dir=state)
    j = srv2.request("GET", "/v1/sandboxes/" + sid).json()
    t.ok(j["status"] == "stopped" and j["disk_mb"] == DISK_MB,
         "after a restart: stopped, same disk_mb", j)
    r = srv2.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/up" % sid)
    t.eq((r.status, len(r.body)), (200, 4096), "the files API reads the stopped sandbox's disk")
    t.eq(srv2.request("POST", "/v1/sandboxes/%s/start" % sid).status, 200, "start again")
    r = sh(srv2, sid, "dd if=/dev/zero of=/workspace/big bs=1M count=%d 2>&1; echo rc=$?"
           % (DISK_MB + 20))
    t.ok("No space left on device" in r["stdout"], "the limit holds after the restart")
    t.eq(srv2.request("DELETE", "/v1/sandboxes/" + sid).status, 204, "delete")
    t.ok(dbx.wait_until(lambda: not loops_of(state, store=False), timeout=10),
         "delete frees the loop device", loops_of(state, store=False))
    t.ok(not os.path.exists(os.path.join(state, "sandboxes", sid)) and
         not os.path.exists(srv2.ns_path("store", "sandboxes", sid)), "and the image is gone")
    return srv2


def legacy(t, srv):
    """A sandbox without a disk (disk_mb 0, or made before disks existed)."""
    sb = srv.create({"disk_mb": 0})
    d = os.path.join(srv.state_dir, "sandboxes", sb["id"])
    t.ok(sb["disk_mb"] == 0 and not os.path.exists(os.path.join(d, "disk.img")),
         "disk_mb 0: no image", sb)
    r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/f" % sb["id"], b"y" * 99)
    t.eq(r.status, 201, "disk_mb 0: uploads work without a limit")
    return sb["id"], d


def legacy_reload(t, srv, sid, d):
    """Restarts deskboxd with the sandbox's sandbox.json as older versions
    wrote it (no disk_mb)."""
    srv.stop()
    path = os.path.join(d, "sandbox.json")
    with open(path) as f:
        j = json.load(f)
    j.pop("disk_mb", None)
    with open(path, "w") as f:
        json.dump(j, f)
    srv = dbx.Server(state_dir=srv.state_dir)
    j = srv.request("GET", "/v1/sandboxes/" + sid).json()
    t.eq(j["disk_mb"], 0, "a sandbox from before disks is listed without a limit")
    t.eq(srv.request("POST", "/v1/sandboxes/%s/start" % sid).status, 200, "and starts")
    r = srv.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/f" % sid)
    t.eq(r.body, b"y" * 99, "with its files")
    return srv


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server(args=["--disk-quota-mb", str(DISK_MB)])
    try:
        spec_checks(t, srv)
        sb = srv.create()
        sid = sb["id"]
        t.eq(sb["disk_mb"], DISK_MB, "the server's default disk_mb is in the spec")
        concurrent_uploads(t, srv, sid, True)
        concurrent_uploads(t, srv, sid, False)
        dd_limit(t, srv, sid)
        log_cap(t, srv, sid)
        mount_flags(t, srv, sid)
        run_tmpfs(t, srv, sid)
        lid, ldir = legacy(t, srv)
        srv = legacy_reload(t, srv, lid, ldir)
        srv = restart(t, srv, sid)
        t.eq(srv.request("DELETE", "/v1/sandboxes/" + lid).status, 204, "delete the other")
    finally:
        if t.failed:
            t.diag(srv.stderr())
        srv.cleanup()
        shutil.rmtree(srv.state_dir, ignore_errors=True)
    t.done()


if __name__ == "__main__":
    main()
