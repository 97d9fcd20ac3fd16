"""A world of network namespaces for network tests, so that no packet
leaves the machine (docs/network.md; tests/integration/test_network*.py,
test_compat_network.py):

  "host"      deskboxd runs there, and the test's own client code with it
              (the test runs itself again inside it: run_outer); its only
              interfaces are lo and up0, its only route leads to
  "internet"  in0 (the other end of up0), whose lo holds the test's web
              servers and a DNS server (dnsmasq) with the test's names.

While the inner run goes on, every IPv4 packet from or to the world's
addresses on the machine's own interfaces is noted (watch_host): the inner
run reads the file named by $DBX_NETTEST_LEAKS and checks it is empty."""

import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid

import dbx

# Serves "hello from ADDR:PORT" (a page at /page) on every ADDR:PORT given.
HTTP_SERVER = r"""
import http.server, socketserver, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello from %s:%d" % self.server.server_address).encode()
        if self.path == "/page":
            body = (b"<!doctype html><title>world page</title>"
                    b"<body style='margin:0;background:#20a040'><h1>" + body + b"</h1>")
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
for spec in sys.argv[1:]:
    host, port = spec.rsplit(":", 1)
    s = S((host, int(port)), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

# Run inside a sandbox (python3 -c FETCH HOST PORT TIMEOUT): connect by
# name or address, GET /, print one line: OK body, DNSERR ... or ERR ...
FETCH = r"""
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
try:
    addr = socket.gethostbyname(host)
except Exception as e:
    print("DNSERR", type(e).__name__, e); sys.exit(0)
try:
    s = socket.create_connection((addr, port), timeout=float(sys.argv[3]))
    s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
    s.settimeout(float(sys.argv[3]))
    data = b""
    while True:
        b = s.recv(4096)
        if not b: break
        data += b
    print("OK", data.split(b"\r\n\r\n", 1)[-1].decode(errors="replace"))
except Exception as e:
    print("ERR", type(e).__name__, e)
"""


def sh(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def build_world(host, inet, host_up, gateway, served, host_sysctls=()):
    """The two namespaces, up0/in0 a /30 between them (host_up, gateway),
    the host's default route through the gateway, and every address of
    `served` on the internet's lo; `host_sysctls` set in the host's."""
    sh("ip", "netns", "add", host)
    sh("ip", "netns", "add", inet)
    sh("ip", "-n", host, "link", "add", "up0", "type", "veth", "peer", "name", "in0",
       "netns", inet)
    sh("ip", "-n", host, "link", "set", "lo", "up")
    sh("ip", "-n", host, "addr", "add", host_up + "/30", "dev", "up0")
    sh("ip", "-n", host, "link", "set", "up0", "up")
    sh("ip", "-n", host, "route", "add", "default", "via", gateway)
    for kv in host_sysctls:
        sh("ip", "netns", "exec", host, "sysctl", "-qw", kv)
    sh("ip", "-n", inet, "link", "set", "lo", "up")
    sh("ip", "-n", inet, "addr", "add", gateway + "/30", "dev", "in0")
    sh("ip", "-n", inet, "link", "set", "in0", "up")
    for a in served:
        sh("ip", "-n", inet, "addr", "add", a + "/32", "dev", "lo")


def start_internet(inet, http_specs, dns, names):
    """HTTP_SERVER on every ADDR:PORT of `http_specs` and dnsmasq on `dns`
    answering {name: address}, in namespace `inet`: their processes."""
    nse = ["nsenter", "--net=/run/netns/" + inet, "--"]
    http = subprocess.Popen(nse + [sys.executable, "-c", HTTP_SERVER] + list(http_specs),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    http.stdout.readline()
    dns = subprocess.Popen(nse + [
        "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
        "--bind-interfaces", "--listen-address=" + dns, "--pid-file="] +
        ["--address=/%s/%s" % (n, a) for n, a in names.items()],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [http, dns]


def in_world(addr, nets):
    a = int.from_bytes(addr, "big")
    for net, bits in nets:
        n = int.from_bytes(socket.inet_aton(net), "big")
        if a >> (32 - bits) == n >> (32 - bits):
            return True
    return False


def watch_host(path, stop, nets):
    """Notes in `path` every IPv4 packet of the machine's own namespace
    (every interface but lo) from or to an address in `nets` [(net, bits)],
    until `stop` is set.  The socket is open before this returns."""
    # ETH_P_ALL: a socket for one protocol sees only what comes in, not
    # what goes out.
    # The machine's own addresses are not the world's even when they fall
    # in its ranges (a host whose eth0 is 192.0.2.2, as the reported
    # topology's uplink is): its own traffic, to its resolver say, is not
    # the test's.
    own = set()
    for line in subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True,
                               text=True).stdout.splitlines():
        f = line.split()
        if len(f) > 3 and f[2] == "inet":
            own.add(socket.inet_aton(f[3].split("/")[0]))

    def world(a):
        return a not in own and in_world(a, nets)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0003))
    s.settimeout(0.2)
    open(path, "w").close()

    def run():
        with s:
            while not stop.is_set():
                try:
                    data, addr = s.recvfrom(65535)
                except socket.timeout:
                    continue
                if addr[0] != "lo" and addr[1] == 0x0800 and len(data) >= 20 and (
                        world(data[12:16]) or world(data[16:20])):
                    with open(path, "a") as f:
                        f.write("%s %s -> %s\n" % (addr[0], socket.inet_ntoa(data[12:16]),
                                                   socket.inet_ntoa(data[16:20])))
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def run_outer(script, names, build, start, nets):
    """The outer run of a network test: skips unless root with ip, nsenter,
    dnsmasq and nft; names(tag) -> (host, inet); build(tag) makes them,
    start(inet) -> processes of the test's internet; runs `script` again
    inside the host namespace with DBX_NETTEST_INNER and DBX_NETTEST_LEAKS
    set, watching the machine's interfaces for `nets`; removes everything,
    whatever happened.  Returns the inner run's exit code."""
    dbx.require_root_and_tools()
    for tool in ("ip", "nsenter", "dnsmasq", "nft"):
        if not shutil.which(tool):
            dbx.skip_all("%s is not installed (run scripts/install-deps.sh)" % tool)
    tag = uuid.uuid4().hex[:8]
    host, inet = names(tag)  # removed at the end whatever was made
    procs = []
    leaks = "/tmp/dbxt-%s.leaks" % tag
    stop, watcher = threading.Event(), None
    try:
        try:
            build(tag)
        except subprocess.CalledProcessError as e:
            dbx.skip_all("cannot make the test's network namespaces: %s %s" % (
                " ".join(e.cmd), (e.stderr or "").strip()))
        procs = start(inet)
        env = dict(os.environ, DBX_NETTEST_INNER=host, DBX_NETTEST_LEAKS=leaks)
        watcher = watch_host(leaks, stop, nets)
        r = subprocess.run(["nsenter", "--net=/run/netns/" + host, "--",
                            sys.executable, os.path.abspath(script)], env=env)
        return r.returncode
    finally:
        stop.set()
        if watcher:
            watcher.join()
        try:
            os.unlink(leaks)
        except OSError:
            pass
        for p in procs:
            p.kill()
            p.wait()
        for ns in (host, inet):
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    pass
            sh("ip", "netns", "del", ns, check=False)


def leaked():
    """The inner run: the packets of the world seen on the machine's own
    interfaces so far."""
    with open(os.environ["DBX_NETTEST_LEAKS"]) as f:
        return f.read().splitlines()
