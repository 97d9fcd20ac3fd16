#!/usr/bin/env python3
"""x11vnc against deskbox-vnc, measured in the same run on this machine:

    DESKBOX_BUILD=build python3 scripts/vnc_compare.py [--quick]

Per server, on a fresh Xvfb + openbox desktop on the host:
  start -> banner     spawn until a connection reads "RFB 003.008"
  connect -> frame    connect until the first full 1280x800 frame is read
  idle CPU            % of one core over 10 s, one client with an update
                      request outstanding (what deskboxd's bridge does)
  PSS                 server, and Xvfb + openbox + server (smaps_rollup)
  key -> frame, typing  from tests/unit/test_capture (DBX_VNC_SERVER=...),
                      run several times: exactness n/n and chars/s
and, through deskboxd, create -> ready (the init's "ready after N ms").
The machine is shared and noisy: medians are what to compare."""

import glob
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("DESKBOX_BUILD") or os.path.join(HERE, "..", "build")
QUICK = "--quick" in sys.argv
W, H = 1280, 800


def recvn(s, n):
    buf = bytearray(n)
    mv = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(mv[got:], n - got)
        if not k:
            raise EOFError("server closed the connection")
        got += k
    return bytes(buf)


class Client:
    """A minimal RFB 3.8 client: no auth, raw + cursor pseudo-encodings,
    the bridge's pixel format."""

    def __init__(self, path):
        self.t0 = time.perf_counter()
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        recvn(self.s, 12)
        self.s.sendall(b"RFB 003.008\n")
        n = recvn(self.s, 1)[0]
        recvn(self.s, n)
        self.s.sendall(b"\x01")
        recvn(self.s, 4)
        self.s.sendall(b"\x01")
        self.w, self.h = struct.unpack(">HH", recvn(self.s, 4))
        recvn(self.s, 16)
        recvn(self.s, struct.unpack(">I", recvn(self.s, 4))[0])
        pf = struct.pack(">BBBBHHHBBB3x", 32, 24, 0, 1, 255, 255, 255, 16, 8, 0)
        self.s.sendall(b"\x00\x00\x00\x00" + pf)
        encs = [1, 0, -239, -240, -232]
        self.s.sendall(struct.pack(">BxH", 2, len(encs)) +
                       b"".join(struct.pack(">i", e) for e in encs))
        self.request(False)

    def request(self, incremental=True):
        self.s.sendall(struct.pack(">BBHHHH", 3, int(incremental), 0, 0, self.w, self.h))

    def read_update(self):
        """Reads one FramebufferUpdate; returns the pixels it carried."""
        while True:
            t = recvn(self.s, 1)[0]
            if t == 0:
                break
            if t == 2:  # bell
                continue
            if t == 3:  # server cut text
                recvn(self.s, 3)
                recvn(self.s, struct.unpack(">I", recvn(self.s, 4))[0])
                continue
            raise RuntimeError("unexpected message %d" % t)
        _, nr = struct.unpack(">BH", recvn(self.s, 3))
        px = 0
        for _ in range(nr):
            x, y, w, h, enc = struct.unpack(">HHHHi", recvn(self.s, 12))
            if enc == 0:
                recvn(self.s, w * h * 4)
                px += w * h
            elif enc == 1:
                recvn(self.s, 4)
            elif enc == -239:
                recvn(self.s, w * h * 4 + (w + 7) // 8 * h)
            elif enc == -240:
                recvn(self.s, 6 + (w + 7) // 8 * h * 2)
            elif enc in (-232, -223):
                pass
            else:
                raise RuntimeError("unexpected encoding %d" % enc)
        return px

    def first_frame_ms(self):
        px = 0
        while px < self.w * self.h:
            px += self.read_update()
        return (time.perf_counter() - self.t0) * 1000

    def close(self):
        self.s.close()


def server_argv(kind, display, sock):
    if kind == "deskbox":
        return [os.path.join(BUILD, "deskbox-vnc"), "-display", display, sock]
    return ["x11vnc", "-display", display, "-unixsock", sock, "-rfbport", "0", "-shared",
            "-forever", "-nopw", "-norc", "-quiet", "-safer", "-nocmds", "-nonap"]


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def pss_kb(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        return int(re.search(r"^Pss:\s+(\d+)", f.read(), re.M).group(1))


def stop(p):
    """SIGTERM, then SIGKILL after 5 s (x11vnc has been seen to hang in its
    exit path)."""
    p.terminate()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def wait_banner(sock, deadline):
    while time.perf_counter() < deadline:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.settimeout(5)
            ok = recvn(s, 12) == b"RFB 003.008\n"
            s.close()
            if ok:
                return True
        except OSError:
            time.sleep(0.001)
    return False


def desktop(tmp):
    r, w = os.pipe()
    xvfb = subprocess.Popen(["Xvfb", "-screen", "0", "%dx%dx24" % (W, H), "-nolisten", "tcp",
                             "-extension", "GLX", "-displayfd", str(w)], pass_fds=(w,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    num = b""
    while not num.endswith(b"\n"):
        c = os.read(r, 16)
        if not c:
            raise RuntimeError("Xvfb did not start")
        num += c
    os.close(r)
    display = ":" + num.decode().strip()
    env = dict(os.environ, DISPLAY=display, HOME=tmp)
    wm = subprocess.Popen(["openbox"], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return xvfb, wm, display, env


def measure_server(kind, results):
    tmp = tempfile.mkdtemp(prefix="dbx-vnccmp-")
    xvfb, wm, display, env = desktop(tmp)
    sock = os.path.join(tmp, "vnc.sock")
    procs = []
    try:
        starts = []
        for _ in range(3 if QUICK else 7):
            if os.path.exists(sock):
                os.unlink(sock)
            t0 = time.perf_counter()
            p = subprocess.Popen(server_argv(kind, display, sock), env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if wait_banner(sock, t0 + 10):
                starts.append((time.perf_counter() - t0) * 1000)
            stop(p)
        if os.path.exists(sock):
            os.unlink(sock)
        p = subprocess.Popen(server_argv(kind, display, sock), env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        wait_banner(sock, time.perf_counter() + 10)
        frames = []
        for _ in range(3 if QUICK else 10):
            c = Client(sock)
            frames.append(c.first_frame_ms())
            c.close()
        c = Client(sock)
        c.first_frame_ms()
        c.request()
        time.sleep(1)
        secs = 3 if QUICK else 10
        t0, c0 = time.perf_counter(), cpu_ticks(p.pid)
        x0 = cpu_ticks(xvfb.pid)
        time.sleep(secs)
        hz = os.sysconf("SC_CLK_TCK")
        dt = time.perf_counter() - t0
        idle = (cpu_ticks(p.pid) - c0) / hz / dt * 100
        xidle = (cpu_ticks(xvfb.pid) - x0) / hz / dt * 100
        pss = pss_kb(p.pid) / 1024
        total = (pss_kb(p.pid) + pss_kb(xvfb.pid) + pss_kb(wm.pid)) / 1024
        c.close()
        results[kind] = {
            "start_banner_ms": statistics.median(starts) if starts else float("nan"),
            "connect_frame_ms": statistics.median(frames),
            "idle_cpu_pct": idle, "xvfb_idle_cpu_pct": xidle,
            "pss_mb": pss, "desktop_pss_mb": total}
    finally:
        for p in procs + [wm, xvfb]:
            stop(p)
        subprocess.call(["rm", "-rf", tmp])


def measure_typing(kind, results, runs):
    lat, cps, exact = [], [], 0
    for _ in range(runs):
        out = subprocess.run([os.path.join(BUILD, "tests", "test_capture")],
                             env=dict(os.environ, BUILD=BUILD, DBX_VNC_SERVER=kind),
                             capture_output=True, text=True, timeout=120).stdout
        m = re.search(r"key -> frame change: median ([\d.]+) ms", out)
        if m:
            lat.append(float(m.group(1)))
        m = re.search(r"\((\d+) chars/s\)", out)
        if m:
            cps.append(float(m.group(1)))
        exact += bool(re.search(r"^ok \d+ - xterm received the exact unicode text$", out, re.M))
    results[kind].update({"key_frame_ms": statistics.median(lat) if lat else float("nan"),
                          "chars_per_s": statistics.median(cps) if cps else float("nan"),
                          "exact": "%d/%d" % (exact, runs)})


def measure_create(kind, results, runs):
    os.environ["DESKBOX_BUILD"] = os.path.abspath(BUILD)
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
    import dbx
    ready, api = [], []
    srv = dbx.Server(env=dict(os.environ, DESKBOX_VNC=kind, DESKBOX_BUILD=BUILD))
    try:
        # The first create builds the default image's lower layer: not counted.
        srv.request("DELETE", "/v1/sandboxes/" + srv.create()["id"])
        for _ in range(runs):
            t0 = time.perf_counter()
            sb = srv.create()
            api.append((time.perf_counter() - t0) * 1000)
            for f in glob.glob(os.path.join(srv.state_dir, "sandboxes", sb["id"], "init.log")):
                m = re.search(r"ready after (\d+) ms", open(f).read())
                if m:
                    ready.append(int(m.group(1)))
            srv.request("DELETE", "/v1/sandboxes/" + sb["id"])
    finally:
        srv.cleanup()
    results[kind].update({"init_ready_ms": statistics.median(ready) if ready else float("nan"),
                          "create_api_ms": statistics.median(api) if api else float("nan")})


def main():
    results = {}
    kinds = ["x11vnc", "deskbox"]
    for k in kinds:
        measure_server(k, results)
    for k in kinds:
        measure_typing(k, results, 2 if QUICK else 5)
    if os.geteuid() == 0 and "--no-create" not in sys.argv:
        for k in kinds:
            measure_create(k, results, 2 if QUICK else 5)
    rows = [("start -> banner (ms)", "start_banner_ms"),
            ("connect -> first full frame (ms)", "connect_frame_ms"),
            ("key -> frame, median of medians (ms)", "key_frame_ms"),
            ("idle CPU, 1 client, % of a core", "idle_cpu_pct"),
            ("  Xvfb idle CPU meanwhile (%)", "xvfb_idle_cpu_pct"),
            ("PSS of the server (MB)", "pss_mb"),
            ("PSS Xvfb + openbox + server (MB)", "desktop_pss_mb"),
            ("Unicode typing exact", "exact"),
            ("typing chars/s (test_capture)", "chars_per_s"),
            ("sandbox init: ready after (ms)", "init_ready_ms"),
            ("POST /v1/sandboxes (ms)", "create_api_ms")]
    print("| %-38s | %10s | %10s |" % ("median", "x11vnc", "deskbox"))
    print("|%s|%s|%s|" % ("-" * 40, "-" * 12, "-" * 12))
    for name, key in rows:
        vals = [results[k].get(key, "") for k in kinds]
        print("| %-38s | %10s | %10s |" % (name, *[
            ("%.2f" % v) if isinstance(v, float) else str(v) for v in vals]))


if __name__ == "__main__":
    main()
