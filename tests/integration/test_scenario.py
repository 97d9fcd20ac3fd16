"""The foundation scenario, end to end over HTTP: create a sandbox,
screenshot it, start xterm, click into it, type Unicode text, read the file
back, delete the sandbox and check nothing of it is left."""

import glob
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

TEXT = "héllo 你好 ✓ ÄÖÜß € 😀"


def leftovers(srv, sid):
    """Everything of sandbox `sid` still on the host."""
    found = []
    cid = "dbx-" + sid
    for path in glob.glob("/proc/[0-9]*/cgroup"):
        try:
            with open(path) as f:
                if cid in f.read():
                    found.append("process " + path.split("/")[2])
        except OSError:
            pass
    for path in glob.glob("/sys/fs/cgroup/*/deskbox/" + cid) + glob.glob(
            "/sys/fs/cgroup/deskbox/" + cid):
        found.append("cgroup " + path)
    try:
        with open("/proc/%d/mountinfo" % srv.proc.pid) as f:
            for line in f:
                if sid in line:
                    found.append("mount " + line.split()[4])
    except OSError:
        pass
    if os.path.exists(os.path.join(srv.state_dir, "sandboxes", sid)):
        found.append("state dir")
    if os.path.exists(os.path.join(srv.state_dir, "runtime", cid)):
        found.append("runtime state")
    return found


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        t0 = time.time()
        r = srv.request("POST", "/v1/sandboxes", {})
        create_ms = (time.time() - t0) * 1000
        if not t.eq(r.status, 201, "create answers 201"):
            t.diag(r.body.decode(errors="replace"))
            t.diag(srv.stderr())
            t.done()
        sb = r.json()
        sid = sb["id"]
        t.diag("create took %.0f ms" % create_ms)
        t.eq(sb["status"], "running", "status is running")
        t.eq(sb["display"], {"width": 1280, "height": 800}, "default display size")
        t.ok(len(sid) == 32 and all(c in "0123456789abcdef" for c in sid), "id is 128 random bits")

        png = srv.screenshot(sid)
        t.eq(dbx.png_info(png)[:2], (1280, 800), "screenshot is a PNG of the display size")

        region = srv.screenshot(sid, "?x=100&y=50&w=300&h=200")
        t.eq(dbx.png_info(region)[:2], (300, 200), "region screenshot has the region's size")
        full_px = dbx.png_pixels(png)
        reg_px = dbx.png_pixels(region)
        t.ok(all(reg_px[i] == full_px[50 + i][300:1200] for i in range(200)),
             "region pixels equal the same area of the full screenshot")

        r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid,
                        {"argv": ["xterm", "-u8", "-geometry", "60x10+100+100",
                                  "-e", "sh", "-c", "cat > /tmp/typed.txt"],
                         "background": True})
        t.eq(r.status, 200, "background exec of xterm")
        t.ok(r.status == 200 and r.json().get("pid", 0) > 1, "background exec returns a pid")

        bbox = None
        deadline = time.time() + 20
        while time.time() < deadline:
            shot = srv.screenshot(sid)
            bbox = dbx.changed_bbox(png, shot)
            if bbox and (bbox[2] - bbox[0]) > 100 and (bbox[3] - bbox[1]) > 50:
                break
            time.sleep(0.1)
        t.ok(bbox is not None, "xterm's window shows in the screenshot", bbox)
        if bbox is None:
            t.done()
        cx, cy = (bbox[0] + bbox[2]) // 2, (bbox[1] + bbox[3]) // 2
        r = srv.post(sid, "click", {"x": cx, "y": cy})
        t.eq(r.status, 200, "click into the window")
        r = srv.post(sid, "type_text", {"text": TEXT})
        t.eq(r.status, 200, "type_text")
        r = srv.post(sid, "key", {"keys": "Return"})
        t.eq(r.status, 200, "key Return")
        r = srv.post(sid, "key", {"keys": "ctrl+d"})
        t.eq(r.status, 200, "key ctrl+d")

        got = None
        deadline = time.time() + 10
        while time.time() < deadline:
            res = srv.exec(sid, ["sh", "-c", "pgrep -x cat >/dev/null || cat /tmp/typed.txt"])
            if res["exit_code"] == 0 and res["stdout"]:
                got = res["stdout"]
                break
            time.sleep(0.1)
        t.eq(got, TEXT + "\n", "the typed text arrived exactly")

        res = srv.exec(sid, ["id", "-u"])
        t.eq(res["stdout"].strip(), "1000", "processes run as the unprivileged user")

        r = srv.request("GET", "/v1/sandboxes/" + sid)
        t.eq(r.status, 200, "get sandbox")
        r = srv.request("GET", "/v1/sandboxes")
        t.ok(r.status == 200 and any(s["id"] == sid for s in r.json()["sandboxes"]),
             "list shows the sandbox")

        t0 = time.time()
        r = srv.request("DELETE", "/v1/sandboxes/" + sid)
        t.eq(r.status, 204, "delete answers 204")
        t.diag("delete took %.0f ms" % ((time.time() - t0) * 1000))
        dbx.wait_until(lambda: not leftovers(srv, sid), timeout=5)
        t.eq(leftovers(srv, sid), [], "nothing of the sandbox is left")
        r = srv.request("GET", "/v1/sandboxes/" + sid)
        t.eq(r.status, 404, "deleted sandbox is gone")
    finally:
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly on SIGTERM")
        srv.cleanup()
    t.done()


main()
