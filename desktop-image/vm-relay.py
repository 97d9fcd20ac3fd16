"""Inside a deskbox VM (docs/isolation.md): relays a virtio-serial port
(the host end is deskboxd's) to a unix socket of the guest (the VNC
server's), one connection at a time.  A port reads EOF while the host end is
not connected, so the relay waits for it and reconnects the socket for each
new host connection.

`vm-relay.py PORT SOCKET [IDLE_S PORT SOCKET ...]`: the first pair is the
screen mirror's (looked at every 5 ms while unconnected: it is connected
once at the boot and again after a restart of the desktop); each further
pair is a live viewer's port, looked at every IDLE_S seconds while nobody
watches, in a thread of its own (a vCPU is precious under emulation).

A viewer's port takes a new host connection at any time, and the guest may
see the host's close and its next connect as one (both before it looks):
so each host connection starts with HELLO (deskboxd's
server/sandbox/sandbox_desktop.c), and the relay answers ACK and a fresh
connection to the VNC server, also when HELLO comes in the middle of what
it took for the old connection; the host drops what comes before ACK."""

import os
import select
import socket
import sys
import threading
import time

HELLO = b"\xffdeskbox-view\x00\x01"
ACK = b"\xffdeskbox-view-ok\n"


def write_port(port_fd, data):
    # A port takes at most 32 KiB a write: the rest again.
    while data:
        data = data[os.write(port_fd, data):]


def pump(port_fd, sock):
    """Relays until either end closes."""
    while True:
        r, _, _ = select.select([port_fd, sock], [], [])
        if port_fd in r:
            data = os.read(port_fd, 65536)
            if not data:
                return
            sock.sendall(data)
        if sock in r:
            data = sock.recv(65536)
            if not data:
                return
            write_port(port_fd, data)


def serve_viewer(port, path, idle_s):
    """A viewer's port.  It stays open across the host's connections: a
    close would drop what the host already sent for the next one (the
    driver discards a port's unread data at its close).  While the host is
    not connected it reads EOF at once: looked at again after idle_s."""
    fd = os.open(port, os.O_RDWR)
    sock = None
    while True:
        r, _, _ = select.select([fd] + ([sock] if sock else []), [], [])
        if fd in r:
            data = os.read(fd, 65536)
            if not data:
                if sock:
                    sock.close()
                    sock = None
                time.sleep(idle_s)
                continue
            if data.startswith(HELLO):
                if sock:
                    sock.close()
                sock = connect(path)
                write_port(fd, ACK)
                data = data[len(HELLO):]
            if data and sock:
                sock.sendall(data)
        if sock in r:
            data = sock.recv(65536)
            if not data:
                # The VNC server went away: hang up the host (a close of
                # the port does) and start afresh.
                sock.close()
                sock = None
                os.close(fd)
                fd = os.open(port, os.O_RDWR)
                continue
            write_port(fd, data)


def connect(path):
    """The guest's VNC socket, retried while its server is not listening
    yet: closing the port meanwhile would hang up the host's connection."""
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except OSError:
            s.close()
            time.sleep(0.01)


def serve(port, path):
    """The mirror's port: one VNC connection per host connection."""
    while True:
        fd = os.open(port, os.O_RDWR)
        # POLLHUP until the host end connects.
        p = select.poll()
        p.register(fd, select.POLLIN | select.POLLOUT)
        ev = p.poll(1000)
        if not ev or ev[0][1] & select.POLLHUP:
            os.close(fd)
            time.sleep(0.005)
            continue
        s = connect(path)
        try:
            pump(fd, s)
        except OSError:
            pass
        s.close()
        os.close(fd)


def serve_viewer_forever(port, path, idle_s):
    while True:
        try:
            serve_viewer(port, path, idle_s)
        except OSError:
            time.sleep(idle_s)


def main():
    args = sys.argv[1:]
    for i in range(2, len(args) - 2, 3):
        threading.Thread(target=serve_viewer_forever,
                         args=(args[i + 1], args[i + 2], float(args[i])), daemon=True).start()
    serve(args[0], args[1])


if __name__ == "__main__":
    main()
