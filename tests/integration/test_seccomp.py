"""The sandbox's seccomp profile seen from inside: socket() only for
AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK, whatever the upper bits of the
family argument (the kernel truncates it to an int), and no way into the
32-bit system call table (int $0x80)."""

import json
import os
import platform
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

# Calls socket(2) through syscall(2), so the family goes to the kernel as the
# full 64-bit value given, and prints {case: "ok" | errno name}.
PROBE = r"""
import ctypes, errno, json, os, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {"x86_64": 41, "aarch64": 198}[platform.machine()]
out = {}
for name, (family, kind) in json.loads(sys.argv[1]).items():
    ctypes.set_errno(0)
    fd = libc.syscall(ctypes.c_long(NR), ctypes.c_long(family), ctypes.c_long(kind),
                      ctypes.c_long(0))
    if fd >= 0:
        os.close(fd)
        out[name] = "ok"
    else:
        e = ctypes.get_errno()
        out[name] = errno.errorcode.get(e, str(e))
print(json.dumps(out))
"""

STREAM, DGRAM, RAW, RDM, SEQPACKET = 1, 2, 3, 4, 5
HI = 1 << 32
ALLOWED = {"unix": (1, STREAM), "inet": (2, STREAM), "inet6": (10, DGRAM),
           "netlink": (16, RAW)}
REFUSED = {"packet": (17, DGRAM), "key": (15, RAW), "alg": (38, SEQPACKET),
           "vsock": (40, STREAM), "tipc": (30, RDM), "can": (29, RAW), "rds": (21, SEQPACKET),
           "bluetooth": (31, RAW), "xdp": (44, RAW), "unspec": (0, STREAM),
           # The truncation trick: the low 32 bits name a refused family.
           "alg|1<<32": (HI | 38, SEQPACKET), "vsock|1<<32": (HI | 40, STREAM),
           "unix|1<<32": (HI | 1, STREAM)}

# Both ends of a real AF_UNIX and AF_INET (loopback) connection.
TALK = r"""
import socket
a, b = socket.socketpair(socket.AF_UNIX)
a.sendall(b"unix"); u = b.recv(4)
srv = socket.socket(socket.AF_INET); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname()); s, _ = srv.accept()
c.sendall(b"inet"); i = s.recv(4)
print((u + i).decode())
"""


def host_baseline(cases):
    """The same probe on the host as nobody, without seccomp: what the
    kernel alone would answer an unprivileged caller."""
    setpriv = dbx.shutil.which("setpriv")
    if not setpriv:
        return None
    r = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                        sys.executable, "-c", PROBE, json.dumps(cases)],
                       capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout) if r.returncode == 0 else None


def test_sockets(t, srv, sid):
    cases = dict(ALLOWED, **REFUSED)
    r = srv.exec(sid, ["python3", "-c", PROBE, json.dumps(cases)])
    got = json.loads(r["stdout"]) if r["exit_code"] == 0 else {}
    t.ok(bool(got), "the socket probe ran in the sandbox", r)
    host = host_baseline(cases) or {}
    for name in ("unix", "inet", "netlink"):
        t.eq(got.get(name), "ok", "socket(%s) works inside" % name)
    t.ok(got.get("inet6") == "ok" or got.get("inet6") == host.get("inet6"),
         "socket(inet6) works inside, or fails as on the host (%s, host %s)"
         % (got.get("inet6"), host.get("inet6")))
    for name in REFUSED:
        t.eq(got.get(name), "EPERM", "socket(%s) refused with EPERM inside (host as nobody: %s)"
             % (name, host.get(name, "?")))
    # The refusals above prove seccomp only where the kernel would have
    # said something else.
    opened = sorted(n for n in REFUSED if host.get(n) == "ok")
    t.diag("families the host kernel opens for nobody, refused inside: %s" % opened)
    if host.get("alg|1<<32") == "ok":
        t.diag("the host kernel truncates the family: 1<<32|AF_ALG opened an AF_ALG socket")
    r = srv.exec(sid, ["python3", "-c", TALK])
    t.eq(r["stdout"].strip(), "unixinet", "an AF_UNIX pair and an AF_INET loopback connection "
         "carry data inside")


def test_int80(t, srv, sid):
    if platform.machine() != "x86_64":
        t.skip("int $0x80 refused", "x86_64 only (this is %s)" % platform.machine())
        return
    prog = os.path.join(dbx.BUILD, "tests", "bin", "int80")
    if not os.path.exists(prog):
        t.ok(False, "build/tests/bin/int80 is built (make all)")
        return
    with open(prog, "rb") as f:
        body = f.read()
    r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/int80&mode=0755"
                    % sid, body)
    t.eq(r.status, 201, "upload the int80 program")
    host = subprocess.run([prog], capture_output=True, text=True, timeout=30)
    r = srv.exec(sid, ["/workspace/int80"])
    out = r["stdout"] + r["stderr"]
    t.ok("pid" not in out, "int $0x80 getpid gets no pid inside (exit %s, %r)"
         % (r["exit_code"], out.strip()))
    if "pid" in host.stdout:
        t.eq(r["exit_code"], 128 + 31, "int $0x80 is killed with SIGSYS (the host gives: %s)"
             % host.stdout.strip())
    else:
        t.skip("int $0x80 killed with SIGSYS",
               "this kernel has no 32-bit entry point: int80 on the host ends with %s"
               % (("signal %d" % -host.returncode) if host.returncode < 0
                  else host.stdout.strip()))


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({})["id"]
        for name, fn in (("sockets", test_sockets), ("int80", test_int80)):
            try:
                fn(t, srv, sid)
            except Exception as ex:  # one broken step must not hide the rest
                t.ok(False, "%s raised %s: %s" % (name, type(ex).__name__, ex))
        t.eq(srv.request("DELETE", "/v1/sandboxes/" + sid).status, 204, "delete")
    finally:
        srv.cleanup()
    t.done()


main()
