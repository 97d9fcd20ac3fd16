#!/usr/bin/env python3
"""A deskboxd that stops leaves running sandboxes running, and the next one
takes them over (docs/api.md, "Restarts"): SIGTERM with --on-exit keep, a
new deskboxd on the same state dir, and the same sandbox answers a
screenshot with its xterm still open, runs programs, serves and takes
files within its disk, its background loop still counting; it stops and
starts again over its own files.  A stopped sandbox stays stopped, and the
log keeper and loop device of a sandbox are gone once it is deleted."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

t = dbx.Tap()
dbx.require_root_and_tools()


def keepers(state):
    """Pids of log keepers whose argv names a sandbox of `state`."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"exec cat >/dev/null" in cmd and state.encode() in cmd:
            out.append(int(p))
    return out


def loops_of(path):
    """Loop devices backed by `path`."""
    out = []
    for d in os.listdir("/sys/block"):
        try:
            with open("/sys/block/%s/loop/backing_file" % d) as f:
                if f.read().strip() == path:
                    out.append(d)
        except OSError:
            pass
    return out


def counter(srv, sid):
    r = srv.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/counter" % sid)
    return int(r.body) if r.status == 200 and r.body.strip().isdigit() else -1


srv = dbx.Server(on_exit="keep")
state = srv.state_dir
store_img = os.path.join(state, "store.xfs")
try:
    sid = srv.create({"display": {"width": 800, "height": 600}, "disk_mb": 256})["id"]
    r = srv.post(sid, "launch", {"argv": ["xterm", "-title", "survivor"]})
    t.eq(r.status, 200, "an xterm is open")
    up = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/before.txt" % sid,
                     b"written before the restart\n")
    t.eq(up.status, 201, "a file is uploaded")
    srv.exec(sid, ["sh", "-c", "i=0; while :; do i=$((i+1)); echo $i >/workspace/counter; "
                   "sleep 0.1; done"], background=True)
    t.ok(dbx.wait_until(lambda: counter(srv, sid) > 0, timeout=10), "a background loop counts")
    stopped = srv.request("POST", "/v1/sandboxes", {"display": {"width": 640, "height": 480}})
    sid2 = stopped.json()["id"]
    srv.request("POST", "/v1/sandboxes/%s/stop" % sid2)
    sid3 = srv.create({"display": {"width": 640, "height": 480}})["id"]
    r = srv.request("POST", "/v1/sandboxes/%s/pause" % sid3)
    t.ok(r.status == 200 and r.json()["status"] == "paused", "a third sandbox is paused",
         r.body[:200])
    init = dbx.sandbox_init_pid(state, sid)
    r = srv.request("POST", "/v1/sandboxes/%s/checkpoints" % sid, {"name": "before"})
    t.eq(r.status, 201, "a checkpoint of the running sandbox")
    img = os.stat(dbx.disk_image(srv, sid))
    pooled = os.path.exists(srv.ns_path("store", "sandboxes", sid, "disk.img"))

    # -- SIGTERM: deskboxd goes, the sandbox stays --
    srv.proc.send_signal(signal.SIGTERM)
    rc = srv.proc.wait(timeout=60)
    t.eq(rc, 0, "deskboxd exits 0 on SIGTERM")
    alive = init is not None and os.path.exists("/proc/%d" % init)
    t.ok(alive, "the sandbox's init still runs after deskboxd is gone", init)
    t.eq(len(keepers(state)), 2, "a log keeper for each, the paused one's too, holds its pipe")
    # The desktop's output while no deskboxd runs: the keeper writes it down.
    w = srv.root_exec(sid, ["sh", "-c", "echo said-while-away >/proc/$(pgrep -xo openbox)/fd/2"])
    t.ok(w["exit_code"] == 0, "the desktop can still write to its log pipe", w)
    log = os.path.join(state, "sandboxes", sid, "init.log")

    def logged(word):
        with open(log, "rb") as f:
            return word in f.read()
    t.ok(dbx.wait_until(lambda: logged(b"said-while-away"), timeout=10),
         "what it said meanwhile is in init.log")
    srv.log.close()

    # -- a new deskboxd takes it over --
    srv = dbx.Server(state_dir=state, on_exit="keep")
    srv.own_state = True
    r = srv.request("GET", "/v1/sandboxes/" + sid)
    t.ok(r.status == 200 and r.json()["status"] == "running", "it is running under the new deskboxd",
         r.body[:300])
    t.eq(dbx.sandbox_init_pid(state, sid), init, "the same init")
    r = srv.request("GET", "/v1/sandboxes/" + sid2)
    t.eq(r.json()["status"], "stopped", "a stopped sandbox stays stopped")
    r = srv.request("GET", "/v1/sandboxes/" + sid3)
    t.eq(r.json()["status"], "paused", "a paused sandbox is taken over paused")
    r = srv.request("POST", "/v1/sandboxes/%s/resume" % sid3)
    t.ok(r.status == 200 and r.json()["status"] == "running" and
         srv.exec(sid3, ["echo", "thawed"])["stdout"] == "thawed\n", "and resumes", r.body[:200])
    t.eq(keepers(state), [], "the new deskboxd took the log pipe back from the keeper")
    srv.root_exec(sid, ["sh", "-c", "echo said-after >/proc/$(pgrep -xo openbox)/fd/2"])
    t.ok(dbx.wait_until(lambda: logged(b"said-after"), timeout=10),
         "and drains it into init.log itself")
    wins = srv.request("GET", "/v1/sandboxes/%s/desktop/windows" % sid)
    titles = [w.get("title") for w in wins.json().get("windows", [])] if wins.status == 200 else []
    t.ok("survivor" in titles, "its xterm is still open", wins.body[:300])
    png = srv.screenshot(sid)
    t.ok(dbx.png_info(png)[:2] == (800, 600), "a screenshot comes from a new mirror")
    c0 = counter(srv, sid)
    t.ok(dbx.wait_until(lambda: counter(srv, sid) > c0, timeout=10),
         "the background loop went on counting", c0)
    r = srv.exec(sid, ["cat", "/workspace/before.txt"])
    t.eq(r["stdout"], "written before the restart\n", "exec runs in it, its files are there")
    up = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/after.txt" % sid,
                     b"x" * 100000)
    t.eq(up.status, 201, "an upload counts against its own disk again")
    big = dbx.stream_upload(srv, "/v1/sandboxes/%s/files/upload?path=/workspace/big" % sid,
                            (b"y" * (1 << 20) for _ in range(300)), length=300 << 20)
    t.eq(big.status, 507, "past its 256 MB disk: 507, the disk's own numbers")
    t.eq(len(dbx.loops_backing(img.st_dev, img.st_ino)), 1,
         "its disk has one loop device, not a second one")
    if pooled:
        now = os.stat(dbx.disk_image(srv, sid))
        t.eq((now.st_dev, now.st_ino), (img.st_dev, img.st_ino),
             "the disk store is mounted again: the same filesystem, the same image")
        t.eq(len(loops_of(store_img)), 1, "the store has one loop device, not a second one")
    r = srv.request("POST", "/v1/sandboxes/%s/fork" % sid, {"checkpoint": "before"})
    t.eq(r.status, 201, "a fork from the checkpoint taken before the takeover")
    if r.status == 201:
        fr = srv.exec(r.json()["id"], ["cat", "/workspace/before.txt"])
        t.eq(fr["stdout"], "written before the restart\n", "has the checkpoint's files")
        srv.request("DELETE", "/v1/sandboxes/" + r.json()["id"])
    # A key reaches the xterm through the new mirror's input path.
    t.eq(srv.post(sid, "type_text", {"text": "echo typed >/workspace/typed.txt\n"}).status, 200,
         "typing into it")
    got = dbx.wait_until(lambda: srv.request(
        "GET", "/v1/sandboxes/%s/files/download?path=/workspace/typed.txt" % sid).body ==
        b"typed\n", timeout=15)
    t.ok(got, "what was typed ran in the xterm")

    # -- stop and start over its own files --
    r = srv.request("POST", "/v1/sandboxes/%s/stop" % sid)
    t.ok(r.status == 200 and r.json()["status"] == "stopped", "it stops", r.body[:200])
    r = srv.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/after.txt" % sid)
    t.eq(len(r.body), 100000, "its files are readable while stopped")
    r = srv.request("POST", "/v1/sandboxes/%s/start" % sid)
    t.ok(r.status == 200 and r.json()["status"] == "running", "and starts again", r.body[:200])
    r = srv.exec(sid, ["cat", "/workspace/before.txt"])
    t.eq(r["stdout"], "written before the restart\n", "over the same files")
    srv.request("DELETE", "/v1/sandboxes/" + sid)
    srv.request("DELETE", "/v1/sandboxes/" + sid2)
    srv.request("DELETE", "/v1/sandboxes/" + sid3)
    t.ok(dbx.wait_until(lambda: not dbx.loops_backing(img.st_dev, img.st_ino), timeout=10),
         "deleted: no loop device left")
    t.eq(keepers(state), [], "and no log keeper")
finally:
    srv.cleanup()
t.ok(dbx.wait_until(lambda: not loops_of(store_img), timeout=10),
     "once deskboxd is gone, so is the disk store's loop device", loops_of(store_img))
t.done()
