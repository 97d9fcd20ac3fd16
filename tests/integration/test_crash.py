"""Crash consistency: deskboxd is killed (SIGKILL) at a random moment, 0 to
400 ms into a create, an exec, an upload or a delete, 5 rounds of each, and
restarted on the same state dir.  After every restart: no mount of the state
dir but the overlays of listed sandboxes, no cgroup and no process of a
container that does not run, no crun state of one, no bridge outliving its
deskboxd, no half-created or half-deleted sandbox, no upload temp file; and
every listed sandbox starts and still has the files it had."""

import glob
import hashlib
import os
import random
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

ROUNDS = 5
MAX_DELAY_S = 0.4
TIME_BUDGET_S = 90


def base(sid):
    return "/v1/sandboxes/%s" % sid


def listed(srv):
    r = srv.request("GET", "/v1/sandboxes")
    return {s["id"]: s["status"] for s in r.json()["sandboxes"]}


def in_background(fn):
    """Runs fn() in a thread that ignores the connection dying under it."""
    def run():
        try:
            fn()
        except (OSError, ValueError, RuntimeError):
            pass
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def slow_upload(srv, path, size):
    """A PUT of `size` bytes sent in pieces over ~1 s (cut short by the kill)."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Length: %d\r\n\r\n" % (path, srv.token, size)).encode())
    piece = b"u" * (size // 50)
    for _ in range(50):
        s.sendall(piece)
        time.sleep(0.02)
    s.recv(4096)
    s.close()


def mine(pid, state):
    """Whether host process `pid` belongs to a container over this state
    dir (its overlay's upperdir is in the state dir).  Other deskboxd
    instances may run on the same host, with cgroups under "deskbox" too."""
    try:
        with open("/proc/%d/mountinfo" % pid) as f:
            return (state + "/sandboxes/") in f.read()
    except OSError:
        return False


def container_pids(state):
    """Host pids of this state dir's container processes -> the id."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                text = f.read()
        except OSError:
            continue
        i = text.find("/deskbox/dbx-")
        if i >= 0 and mine(int(pid), state):
            found[int(pid)] = text[i + len("/deskbox/dbx-"):][:32]
    return found


def bridges_of(server_pid):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            exe = os.readlink("/proc/%s/exe" % pid)
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if exe.endswith("/deskbox-bridge") and ppid == server_pid:
            out.append(int(pid))
    return out


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def inventory(srv, state, expect, known, old_bridges):
    """What is wrong after a restart (a list of strings), given `expect`:
    sandbox id -> {path: sha256} of the files it must still have, and
    `known`: every sandbox id this test's servers ever had."""
    bad = []
    sbs = listed(srv)
    running = {i for i, st in sbs.items() if st == "running"}
    for sid, st in sbs.items():
        if st not in ("stopped", "running", "failed"):
            bad.append("%s listed as %s" % (sid, st))
    root = os.path.join(state, "sandboxes")
    for name in os.listdir(root):
        if name not in sbs:
            bad.append("unlisted entry in sandboxes/: %s" % name)
    with open("/proc/%d/mountinfo" % srv.proc.pid) as f:
        for line in f:
            mp = line.split()[4]
            if mp == os.path.join(state, "store"):
                continue  # the disk store (docs/lifecycle.md) stays mounted
            if mp.startswith(state + "/"):
                rel = os.path.relpath(mp, root).split("/")
                # A listed sandbox keeps its overlay and its own disk
                # mounted; its /run/deskbox tmpfs only while it runs.
                ok = len(rel) == 2 and rel[0] in sbs and (
                    rel[1] in ("rootfs", "disk") or (rel[1] == "run" and rel[0] in running))
                if not ok:
                    bad.append("mount left: %s" % mp)
    pool = srv.ns_path("store", "sandboxes")
    for name in os.listdir(pool) if os.path.isdir(pool) else []:
        if name not in sbs:
            bad.append("unlisted disk in the store: %s" % name)
    for d in (glob.glob("/sys/fs/cgroup/*/deskbox/dbx-*") +
              glob.glob("/sys/fs/cgroup/deskbox/dbx-*")):
        sid = os.path.basename(d)[4:]
        if sid in known and sid not in running:
            bad.append("cgroup left: %s" % d)
    for pid, sid in container_pids(state).items():
        if sid not in running:
            bad.append("process %d of container dbx-%s left" % (pid, sid))
    for name in os.listdir(os.path.join(state, "runtime")):
        if name.startswith("dbx-") and name[4:] not in running:
            bad.append("crun state left: %s" % name)
    # A bridge notices its VNC connection close when the container goes.
    dbx.wait_until(lambda: not any(alive(p) for p in old_bridges), timeout=5)
    left = [p for p in old_bridges if alive(p)]
    bad += ["bridge %d outlived its deskboxd" % p for p in left]
    for d, _, names in os.walk(root):
        bad += [os.path.join(d, n) for n in names if n.startswith(".deskbox-upload-")]
    for sid in expect:
        if sid not in sbs:
            bad.append("sandbox %s is gone" % sid)
    return bad, sbs


def check_files(srv, sid, files):
    """Starts `sid` if needed; what is missing or different."""
    if srv.request("POST", base(sid) + "/start").status != 200:
        return ["%s does not start" % sid]
    bad = []
    for path, digest in files.items():
        r = srv.request("GET", base(sid) + "/files/download?path=" + path)
        if r.status != 200 or hashlib.sha256(r.body).hexdigest() != digest:
            bad.append("%s:%s is %s" % (sid, path, r.status if r.status != 200 else "changed"))
    return bad


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    seed = int(os.environ.get("DESKBOX_CRASH_SEED") or time.time())
    rnd = random.Random(seed)
    t.diag("seed %d (DESKBOX_CRASH_SEED to repeat)" % seed)
    state = dbx.tempfile.mkdtemp(prefix="dbx-crash-")
    srv = dbx.Server(state_dir=state)
    t_start = time.monotonic()
    expect = {}
    known = set()
    try:
        anchor = srv.create()["id"]
        data = os.urandom(300000)
        r = srv.request("PUT", base(anchor) + "/files/upload?path=/workspace/keep.bin", data)
        t.eq(r.status, 201, "the anchor sandbox holds a file")
        expect[anchor] = {"/workspace/keep.bin": hashlib.sha256(data).hexdigest()}

        kinds = ["create", "exec", "upload", "delete"] * ROUNDS
        rnd.shuffle(kinds)
        done = 0
        for n, kind in enumerate(kinds):
            if time.monotonic() - t_start > TIME_BUDGET_S - 10:
                t.skip("rounds %d..%d" % (n + 1, len(kinds)), "out of the time budget")
                break
            victim = None
            if kind == "delete":
                victim = srv.create()["id"]
                known.add(victim)
                srv.exec(victim, ["sh", "-c", "echo v > /workspace/v.txt"])
            elif kind in ("exec", "upload"):
                srv.request("POST", base(anchor) + "/start")
            ops = {
                "create": lambda: srv.request("POST", "/v1/sandboxes", {}, timeout=10),
                "exec": lambda: srv.request(
                    "POST", base(anchor) + "/process/exec",
                    {"command": "echo x >> /workspace/exec.log; sleep 3", "timeout_s": 10},
                    timeout=10),
                "upload": lambda: slow_upload(srv, base(anchor) +
                                              "/files/upload?path=/workspace/up.bin", 4 << 20),
                "delete": lambda: srv.request("DELETE", base(victim), timeout=10),
            }
            delay = rnd.uniform(0, MAX_DELAY_S)
            in_background(ops[kind])
            time.sleep(delay)  # the point of the kill, not a wait for a result
            known.update(os.listdir(os.path.join(state, "sandboxes")))
            old_bridges = bridges_of(srv.proc.pid)
            srv.kill()
            srv.log.close()
            known.update(os.listdir(os.path.join(state, "sandboxes")))
            known.update(re.findall(r"[0-9a-f]{32}", open(srv.log_path).read()))
            srv = dbx.Server(state_dir=state)
            known.update(re.findall(r"[0-9a-f]{32}", srv.stderr()))
            if kind == "delete" and victim in listed(srv):
                expect[victim] = {"/workspace/v.txt": hashlib.sha256(b"v\n").hexdigest()}
            bad, sbs = inventory(srv, state, expect, known, old_bridges)
            for sid in sbs:
                if sid not in expect:
                    expect[sid] = {}
            up = srv.request("GET", base(anchor) + "/files/stat?path=/workspace/up.bin")
            if up.status == 200 and up.json().get("size") != 4 << 20:
                bad.append("a partial upload became visible: %s" % up.json())
            for sid in list(expect):
                bad += check_files(srv, sid, expect[sid])
            t.ok(not bad, "round %d: kill -9 %.0f ms into %s; restart is clean" % (
                n + 1, delay * 1000, kind), bad)
            # Keep the next rounds short: only the anchor stays.
            for sid in list(expect):
                if sid != anchor:
                    srv.request("DELETE", base(sid))
                    del expect[sid]
            done += 1
        t.diag("%d rounds in %.0f s" % (done, time.monotonic() - t_start))
    finally:
        srv.cleanup()
        dbx.shutil.rmtree(state, ignore_errors=True)
    t.done()


if __name__ == "__main__":
    main()
