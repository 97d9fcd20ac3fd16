"""Inside a deskbox VM (docs/isolation.md): the exec agent on the guest's
virtio-serial ports deskbox.exec0..N.  Each port carries one program at a
time for the host's client (desktop-image/vm_exec.c has the framing): a
request 'R' (JSON argv, env, cwd), stdin 'I'/'C'; stdout 'O', stderr 'E'
and the end 'X' ("code N" or "signal N").  A port reads EOF while the host
end is not connected; a host client that goes away (EOF) or a new request
in the middle of a program ends the program (its session).

A request with "pty" (its "rows" and "cols") runs the program on a
pseudo-terminal of the guest, as its controlling terminal: 'I' goes to the
master (the guest's line discipline makes ^C a SIGINT), the master's output
comes back as 'O', 'W' ("ROWS COLS") resizes it (the program gets
SIGWINCH), and at the end what the program left in its session is killed,
as a container's terminal's cgroup is."""

import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
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


def set_size(fd, rows, cols):
    rows, cols = int(rows), int(cols)
    if 0 < rows < 65536 and 0 < cols < 65536:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def start(req):
    """The program, and its output fds (each with its frame type)."""
    env = dict(BASE_ENV)
    for kv in req.get("env") or []:
        k, _, v = kv.partition("=")
        env[k] = v
    cwd = req.get("cwd") or "/workspace"
    cwd = cwd if os.path.isdir(cwd) else "/"
    # As the container's exec: the request's user (the image's "user" by
    # default), no supplementary groups.
    uid, gid = int(req.get("uid", 0)), int(req.get("gid", 0))
    if not req.get("pty"):
        proc = subprocess.Popen(req["argv"], env=env, cwd=cwd, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, user=uid, group=gid, extra_groups=[])
        return proc, {proc.stdout.fileno(): b"O", proc.stderr.fileno(): b"E"}
    master, slave = os.openpty()
    try:
        set_size(master, req.get("rows", 24), req.get("cols", 80))
        os.fchown(slave, uid, gid)
        # setsid -c: a session of its own with the slave as its controlling
        # terminal, then the program in its place (same pid).
        proc = subprocess.Popen(["setsid", "-c"] + list(req["argv"]), env=env, cwd=cwd,
                                stdin=slave, stdout=slave, stderr=slave, user=uid, group=gid,
                                extra_groups=[])
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    proc.master = master
    return proc, {master: b"O"}


def session_pids(sid):
    """The guest's processes in session sid."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    # after "pid (comm)": state ppid pgrp session
                    if int(f.read().rsplit(")", 1)[1].split()[3]) == sid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def stop(proc):
    """Kills the program and what it started in its session (a shell's
    jobs have process groups of their own)."""
    if not proc:
        return
    for pid in ([proc.pid] if proc.poll() is None else []) + session_pids(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    proc.wait()


def read_out(f):
    """A master reads EIO once no slave is open: the end, as EOF is.  None
    when a (non-blocking) master has nothing yet."""
    try:
        return os.read(f, 65536)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def finish(fd, proc, outs):
    """Drains stdout/stderr (a short while once the program exited) and says
    how it ended."""
    until = time.monotonic() + 0.2
    while outs and time.monotonic() < until:
        r, _, _ = select.select(list(outs), [], [], max(0, until - time.monotonic()))
        for f in r:
            data = read_out(f)
            if data is None:
                continue
            if not data:
                del outs[f]
            else:
                send(fd, outs[f], data)
    for f in list(outs):
        if getattr(proc, "master", None) != f:
            os.close(f)
    rc = proc.wait()
    if getattr(proc, "master", None) is not None:
        stop(proc)  # what it left on the terminal
        os.close(proc.master)
    send(fd, b"X", ("signal %d" % -rc if rc < 0 else "code %d" % rc).encode())


def to_pty(master, kind, payload, pending):
    """Input (queued in `pending`, written as the master takes it) and
    resizes for a program on a terminal ('C' means nothing to a terminal:
    its EOF is the ^D a user types)."""
    try:
        if kind == b"I":
            pending += payload
        elif kind == b"W":
            rows, cols = payload.split()
            set_size(master, rows, cols)
    except (OSError, ValueError):
        pass


def session(fd, req, buf):
    """Runs one program; returns what the port said after it (or None at
    the host's EOF)."""
    try:
        proc, outs = start(req)
    except (OSError, KeyError, TypeError, ValueError, subprocess.SubprocessError) as ex:
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
    stdin = proc.stdin
    master = getattr(proc, "master", None)
    # A terminal's input waits here while the program does not read it: a
    # blocking write would stop its output too (an echo of a long paste
    # fills the master, and the program then waits for us).
    to_master = bytearray()
    if master is not None:
        os.set_blocking(master, False)
    pending = buf  # frames that came with the request
    while True:
        if proc.poll() is not None:
            finish(fd, proc, outs)
            return buf
        if to_master:
            try:
                del to_master[:os.write(master, to_master[:65536])]
            except BlockingIOError:
                pass
            except OSError:
                to_master.clear()
        # Past 1 MiB queued the port is not read: the host waits.
        ins = [fd] if len(to_master) < (1 << 20) else []
        wr = [master] if to_master else []
        r = [fd] if pending else select.select(ins + list(outs), wr, [], 0.05)[0]
        for f in r:
            if f == fd:
                data = pending or os.read(fd, 65536)
                if not data:
                    stop(proc)
                    if master is not None:
                        os.close(master)
                    return None
                got, buf = frames((b"" if pending else buf) + data)
                pending = b""
                for kind, payload in got:
                    if kind == b"R":
                        stop(proc)
                        if master is not None:
                            os.close(master)
                        return kind + struct.pack(">I", len(payload)) + payload + buf
                    if master is not None:
                        to_pty(master, kind, payload, to_master)
                    elif stdin and kind == b"I":
                        try:
                            stdin.write(payload)
                            stdin.flush()
                        except OSError:
                            pass
                    elif stdin and kind == b"C":
                        stdin.close()
                        stdin = None
            else:
                data = read_out(f)
                if data:
                    send(fd, outs[f], data)
                elif data is not None:
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
    # The init's shell starts the agent in the background, which ignores
    # SIGINT and SIGQUIT: its programs get them back (a ^C on a terminal
    # is a SIGINT to the program, as in a container).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    for port in sys.argv[1:]:
        threading.Thread(target=serve, args=(port,), daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
