"""Inside a deskbox VM (docs/isolation.md): relays a virtio-serial port
(the host end is deskboxd's) to a unix socket of the guest (the VNC
server's), one connection at a time.  A port reads EOF while the host end is
not connected, so the relay waits for it and reconnects the socket for each
new host connection."""

import os
import select
import socket
import sys
import time


def pump(port_fd, sock):
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
            # A port takes at most 32 KiB a write: the rest again.
            while data:
                data = data[os.write(port_fd, data):]


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


def main():
    port, path = sys.argv[1], sys.argv[2]
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


if __name__ == "__main__":
    main()
