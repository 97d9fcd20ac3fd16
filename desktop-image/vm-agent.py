"""Inside a deskbox VM (docs/isolation.md): the exec agent on the guest's
virtio-serial ports deskbox.exec0..N.  Each port carries one program at a
time for the host's client (desktop-image/vm_exec.c has the framing): a
request 'R' (JSON argv, env, cwd), stdin 'I'/'C'; stdout 'O', stderr 'E'
and the end 'X' ("code N" or "signal N").  A port reads EOF while the host
end is not connected; a host client that goes away (EOF) or a new request
in the middle of a program ends the program (its process group)."""

import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time

BASE_ENV = dict(os.environ)
IDLE_S = 0.02


def frames(buf):
    """Complete frames of buf and what is left."""
    out = []
    while len(buf) >= 5:
        n = struct.unpack(">I", buf[1:5])[0]
        if len(buf) < 5 + n:
            break
        out.append((buf[0:1], buf[5:5 + n]))
        buf = buf[5 + n:]
    return out, buf


def send(fd, kind, data):
    msg = kind + struct.pack(">I", len(data)) + data
    while msg:
        n = os.write(fd, msg)
        msg = msg[n:]


def start(req):
    env = dict(BASE_ENV)
    for kv in req.get("env") or []:
        k, _, v = kv.partition("=")
        env[k] = v
    cwd = req.get("cwd") or "/workspace"
    # As the container's exec: the request's user (the image's "user" by
    # default), no supplementary groups.
    uid, gid = int(req.get("uid", 0)), int(req.get("gid", 0))
    return subprocess.Popen(req["argv"], env=env, cwd=cwd if os.path.isdir(cwd) else "/",
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            user=uid, group=gid, extra_groups=[])


def stop(proc):
    if proc and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()


def finish(fd, proc, outs):
    """Drains stdout/stderr (a short while once the program exited) and says
    how it ended."""
    until = time.monotonic() + 0.2
    while outs and time.monotonic() < until:
        r, _, _ = select.select(list(outs), [], [], max(0, until - time.monotonic()))
        for f in r:
            data = os.read(f, 65536)
            if not data:
                del outs[f]
            else:
                send(fd, outs[f], data)
    for f in list(outs):
        os.close(f)
    rc = proc.wait()
    send(fd, b"X", ("signal %d" % -rc if rc < 0 else "code %d" % rc).encode())


def session(fd, req, buf):
    """Runs one program; returns what the port said after it (or None at
    the host's EOF)."""
    try:
        proc = start(req)
    except (OSError, KeyError, TypeError, ValueError) as ex:
        send(fd, b"E", ("deskbox: %s\n" % ex).encode())
        send(fd, b"X", b"code 127")
        return buf
    if req.get("want_pid"):
        # Its argv is the shim that stops it (kill -STOP $$) until its pid
        # is known: let it go on, then say the pid.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with open("/proc/%d/stat" % proc.pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "T":
                        break
            except OSError:
                break
            time.sleep(0.005)
        try:
            os.kill(proc.pid, signal.SIGCONT)
        except OSError:
            pass
        send(fd, b"P", str(proc.pid).encode())
    outs = {proc.stdout.fileno(): b"O", proc.stderr.fileno(): b"E"}
    stdin = proc.stdin
    pending = buf  # frames that came with the request
    while True:
        if proc.poll() is not None:
            finish(fd, proc, outs)
            return buf
        r = [fd] if pending else select.select([fd] + list(outs), [], [], 0.05)[0]
        for f in r:
            if f == fd:
                data = pending or os.read(fd, 65536)
                if not data:
                    stop(proc)
                    return None
                got, buf = frames((b"" if pending else buf) + data)
                pending = b""
                for kind, payload in got:
                    if kind == b"R":
                        stop(proc)
                        return kind + struct.pack(">I", len(payload)) + payload + buf
                    if stdin and kind == b"I":
                        try:
                            stdin.write(payload)
                            stdin.flush()
                        except OSError:
                            pass
                    elif stdin and kind == b"C":
                        stdin.close()
                        stdin = None
            else:
                data = os.read(f, 65536)
                if data:
                    send(fd, outs[f], data)
                else:
                    del outs[f]


def serve(port):
    while True:
        fd = os.open(port, os.O_RDWR)
        p = select.poll()
        p.register(fd, select.POLLIN)
        buf = b""
        while True:
            got, buf = frames(buf)
            reqs = [i for i, (kind, _) in enumerate(got) if kind == b"R"]
            if reqs:  # frames before it: stdin of a program that already ended
                i = reqs[0]
                rest = b"".join(k + struct.pack(">I", len(d)) + d for k, d in got[i + 1:])
                try:
                    req = json.loads(got[i][1])
                except ValueError:
                    buf = rest + buf
                    continue
                buf = session(fd, req, rest + buf) or b""
                continue
            # POLLHUP (or EOF) at once while the host end is not connected:
            # looked at again a while later (a vCPU is precious under
            # emulation), so a new client waits up to IDLE_S for its start.
            ev = p.poll(1000)
            if not ev or (ev[0][1] & select.POLLHUP and not ev[0][1] & select.POLLIN):
                time.sleep(IDLE_S)
                continue
            data = os.read(fd, 65536)
            if not data:
                time.sleep(IDLE_S)
                continue
            buf += data


def main():
    for port in sys.argv[1:]:
        threading.Thread(target=serve, args=(port,), daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
