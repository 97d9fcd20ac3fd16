"""What an idle desktop costs, checked in a real sandbox: Xvfb keeps its
screen in /run/deskbox-fb/Xvfb_screen0 (-fbdir) and deskbox-vnc serves that
file in place (mapped, no SysV SHM copy); the directory is out of the
sandbox user's reach; Xvfb's software cursor, which that file would show,
never reaches the mirror; and the sandbox (its processes plus its bridge)
stays within issue 15's 40 MB PSS for one idle desktop.  The same with
DESKBOX_VNC=x11vnc, which copies the screen as before."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

FB = "/run/deskbox-fb/Xvfb_screen0"
COLOUR = (0x12, 0x9a, 0x4c)


def sandbox_procs(srv, sid):
    """{host pid: name} of every process in sandbox `sid`."""
    out = {}
    todo = [dbx.sandbox_init_pid(srv.state_dir, sid)]
    while todo and todo[-1]:
        p = todo.pop()
        try:
            with open("/proc/%d/comm" % p) as f:
                out[p] = f.read().strip()
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def bridges(srv):
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % pid) as f:
                s = f.read()
            if "(deskbox-bridge)" in s and int(s.rsplit(")", 1)[1].split()[1]) == srv.proc.pid:
                out.append(int(pid))
        except (OSError, ValueError):
            pass
    return out


def maps(pid):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return f.read()
    except OSError:
        return ""


def pid_of(procs, name):
    return next((p for p, n in procs.items() if n == name), None)


def no_cursor_in_mirror(t, srv, sid, label):
    """Pointer at (100, 100) over a freshly painted root: the screenshot
    (without cursor=true) shows only the root's colour there."""
    srv.post(sid, "move", {"x": 100, "y": 100})
    res = srv.exec(sid, ["xsetroot", "-solid", "#%02x%02x%02x" % COLOUR])
    t.eq(res["exit_code"], 0, "%s: root painted" % label)
    srv.post(sid, "wait", {"until": "stable", "quiet_ms": 300, "timeout_ms": 10000})
    px = dbx.png_pixels(srv.screenshot(sid))
    block = {bytes(px[y][x * 3:x * 3 + 3]) for y in range(80, 130) for x in range(80, 130)}
    t.ok(block == {bytes(COLOUR)}, "%s: no pointer in the pixels around it" % label,
         sorted(block)[:4])


def shared_screen(t, srv):
    sid = srv.create({})["id"]
    procs = sandbox_procs(srv, sid)
    vnc, xvfb = pid_of(procs, "deskbox-vnc"), pid_of(procs, "Xvfb")
    t.ok(vnc and xvfb, "deskbox-vnc and Xvfb run", procs)
    t.ok(FB in maps(xvfb) and FB in maps(vnc), "Xvfb and deskbox-vnc both map " + FB)
    t.ok("SYSV" not in maps(vnc), "deskbox-vnc keeps no SysV SHM copy of the screen")
    res = srv.root_exec(sid, ["stat", "-c", "%a %u", os.path.dirname(FB)])
    t.eq(res["stdout"].strip(), "700 0", "the screen's directory is root's, 0700")
    res = srv.exec(sid, ["cat", FB])
    t.ok(res["exit_code"] != 0, "the sandbox's user cannot read the screen file")
    no_cursor_in_mirror(t, srv, sid, "shared screen")

    # One idle desktop: its processes plus its own bridge (the only one).
    srv.screenshot(sid)
    own = bridges(srv)
    t.eq(len(own), 1, "one bridge for the one sandbox")
    procs = sandbox_procs(srv, sid)
    total = sum(dbx.pss_kb(p) for p in list(procs) + own) / 1024.0
    t.diag("idle desktop: %.1f MB PSS (%s)" % (total, ", ".join(
        "%s %.1f" % (procs.get(p, "deskbox-bridge"), dbx.pss_kb(p) / 1024.0)
        for p in list(procs) + own)))
    asan = False
    for pid in own[:1]:
        with open("/proc/%d/maps" % pid) as f:
            asan = "libasan" in f.read()
    if asan:
        t.skip("one idle desktop within 40 MB PSS",
               "a sanitizer build's programs carry shadow memory and quarantine (%.1f MB)"
               % total)
    else:
        t.ok(0 < total <= 40, "one idle desktop within 40 MB PSS", "%.1f MB" % total)
    srv.request("DELETE", "/v1/sandboxes/" + sid)


def copied_screen(t, srv):
    sid = srv.create({"env": {"DESKBOX_VNC": "x11vnc"}})["id"]
    procs = sandbox_procs(srv, sid)
    xvfb = pid_of(procs, "Xvfb")
    t.ok(xvfb and "x11vnc" in procs.values(), "x11vnc serves the desktop", procs)
    t.ok(FB not in maps(xvfb), "with x11vnc Xvfb keeps its screen in its own memory")
    no_cursor_in_mirror(t, srv, sid, "x11vnc")
    srv.request("DELETE", "/v1/sandboxes/" + sid)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        shared_screen(t, srv)
        copied_screen(t, srv)
    finally:
        srv.cleanup()
    t.done()


main()
