"""The screen bridge is confined before the sandbox says anything: a fake VNC
server inside a sandbox accepts the bridge's connection and never sends the
RFB banner; mid-handshake the bridge on the host must already be nobody,
without capabilities, with no_new_privs and its seccomp filter."""

import os
import platform
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

# Binds next to vnc.sock and renames over it (as deskbox-vnc does), then
# accepts and never writes.  Each accept is noted in /tmp/fake-vnc.log.
FAKE = r"""
import os, socket
s = socket.socket(socket.AF_UNIX)
s.bind("/run/deskbox/.fake-vnc.sock"); s.listen(8)
os.rename("/run/deskbox/.fake-vnc.sock", "/run/deskbox/vnc.sock")
open("/tmp/fake-vnc.log", "w").write("listening\n")
held = []
while True:
    c, _ = s.accept(); held.append(c)
    open("/tmp/fake-vnc.log", "a").write("accepted\n")
"""

SYS_READ = {"x86_64": 0, "aarch64": 63}.get(platform.machine())


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def status(pid):
    out = {}
    for line in read("/proc/%d/status" % pid).splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def children(ppid, comm):
    """Live children of `ppid` named `comm`."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = status(int(d))
            if st.get("Name") == comm and st.get("PPid") == str(ppid) \
                    and not st.get("State", "").startswith("Z"):
                found.append(int(d))
    return found


def in_sandbox(pid, sid):
    return ("dbx-" + sid) in read("/proc/%d/cgroup" % pid)


def reading_vnc(pid):
    """Blocked in read(3, ...): fd 3 is the VNC socket deskboxd handed over."""
    f = read("/proc/%d/syscall" % pid).split()
    return SYS_READ is not None and len(f) > 1 and f[0] == str(SYS_READ) and f[1] == "0x3"


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    stopped = []
    try:
        sid = srv.create({})["id"]
        srv.screenshot(sid)
        deskboxd = srv.proc.pid
        old = children(deskboxd, "deskbox-bridge")
        t.eq(len(old), 1, "one bridge runs for the sandbox")
        st = status(old[0]) if old else {}
        t.eq(st.get("Uid"), "65534\t65534\t65534\t65534", "the running bridge is nobody")

        # The real server is stopped, not killed: init would restart it and
        # take the socket back.
        vnc = [p for p in (int(d) for d in os.listdir("/proc") if d.isdigit())
               if status(p).get("Name") == dbx.VNC_PROC and in_sandbox(p, sid)]
        t.eq(len(vnc), 1, "found the sandbox's %s" % dbx.VNC_PROC)
        for p in vnc:
            os.kill(p, signal.SIGSTOP)
            stopped.append(p)
        # /run/deskbox is the sandbox root's: the fake server runs as that
        # root, as a hostile desktop process would.
        fake = srv.root_exec(sid, ["python3", "-c", FAKE], background=True)
        t.ok(dbx.wait_until(lambda: "listening" in srv.exec(
            sid, ["cat", "/tmp/fake-vnc.log"])["stdout"]), "the fake VNC server listens")

        for p in old:
            os.kill(p, signal.SIGKILL)
        # Dead, not dying: until then its last frame still answers.
        t.ok(dbx.wait_until(lambda: all(status(p).get("State", "Z").startswith("Z")
                                        for p in old)), "the running bridge is dead")
        # The next desktop request connects a new bridge, to the fake.
        shot = {}
        th = threading.Thread(target=lambda: shot.update(
            r=srv.request("GET", "/v1/sandboxes/%s/desktop/screenshot" % sid, timeout=60)))
        th.start()
        new = []
        t.ok(dbx.wait_until(lambda: new.extend(
            p for p in children(deskboxd, "deskbox-bridge") if p not in old and reading_vnc(p))
            or new, timeout=10, interval=0.01),
            "a new bridge waits in read() on the VNC socket (mid-handshake)")
        st = status(new[0]) if new else {}
        th.join()
        t.diag("the screenshot meanwhile: %s" % (shot["r"].status if "r" in shot else "none"))
        t.eq(st.get("Uid"), "65534\t65534\t65534\t65534", "mid-handshake: Uid nobody")
        t.eq(st.get("Gid"), "65534\t65534\t65534\t65534", "mid-handshake: Gid nogroup")
        t.eq(st.get("Groups"), "", "mid-handshake: no supplementary groups")
        t.eq(st.get("CapEff"), "0000000000000000", "mid-handshake: CapEff 0")
        t.eq(st.get("CapPrm"), "0000000000000000", "mid-handshake: CapPrm 0")
        t.eq(st.get("Seccomp"), "2", "mid-handshake: Seccomp 2 (filter)")
        t.eq(st.get("NoNewPrivs"), "1", "mid-handshake: NoNewPrivs 1")
        log = srv.exec(sid, ["cat", "/tmp/fake-vnc.log"])["stdout"]
        t.ok("accepted" in log, "the bridge's connection was the fake server's", log)
    finally:
        for p in stopped:
            try:
                os.kill(p, signal.SIGCONT)
            except OSError:
                pass
        srv.cleanup()
        if "fake" in locals():
            fake.kill()
            fake.wait()
    t.done()


main()
