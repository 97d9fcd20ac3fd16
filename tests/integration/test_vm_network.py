"""A VM's network (docs/isolation.md, "Network"): the same modes and port
proxy as a container's, in the world of network namespaces the container
network tests use (tests/lib/networld.py), so that no packet leaves the
machine.  deskboxd runs in the world's "host" namespace with
--default-network internet; the "internet" holds HTTP servers, a DNS
server with the test's names, a TCP echo server and a 10 MB source.

Cases: a VM with the default mode reaches a server by name; its network
namespace holds the tap and eth0 and QEMU got the tap as an fd; a VM with
an allow list reaches the listed name and neither another name nor its
address; PUT network none leaves the running VM no way out (its packets
are refused, its resolver is gone), an allow list then changes what it
reaches and internet gives it back; the port proxy reaches an HTTP server
started in the guest on 0.0.0.0 and says what is wrong for one bound to
the guest's 127.0.0.1; TCP round trip and a 10 MB download through the
VM and a container, medians (diagnostics); QEMU's namespaces cannot make
a tap; a stopped VM's namespace goes with it and a start attaches the
new one; after a kill -9 of deskboxd the next one takes the VM over with
its network; delete leaves no link and no
namespace (so no tap); the machine's own interfaces carried nothing."""

import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402
import networld  # noqa: E402

SITE_A, SITE_B = "203.0.113.10", "203.0.113.20"
DNS = "198.51.100.53"
HOST_UP, INET_UP = "100.127.0.2", "100.127.0.1"
ECHO_PORT, BULK_PORT = 7007, 7008
BULK_BYTES = 10 << 20
WORLD_NETS = [("10.231.0.0", 16), ("100.127.0.0", 30)] + [
    (a, 32) for a in (SITE_A, SITE_B, DNS)]

# In the internet: an echo server and a source of BULK_BYTES per connection.
STREAMS = r"""
import socket, sys, threading
def serve(port, fn):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], port)); s.listen(16)
    while True:
        c, _ = s.accept(); threading.Thread(target=fn, args=(c,), daemon=True).start()
def echo(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with c:
        while True:
            b = c.recv(4096)
            if not b: return
            c.sendall(b)
def bulk(c):
    chunk = b"x" * 65536
    with c:
        for _ in range(int(sys.argv[2]) // len(chunk)): c.sendall(chunk)
threading.Thread(target=serve, args=(%d, echo), daemon=True).start()
threading.Thread(target=serve, args=(%d, bulk), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
""" % (ECHO_PORT, BULK_PORT)

# In a sandbox: TCP round trips of one byte (median ms of 200) and the
# 10 MB download (median s of 3), timed where they happen.
MEASURE = r"""
import socket, sys, time
host = sys.argv[1]
s = socket.create_connection((host, %d), timeout=30)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtt = []
for _ in range(200):
    t = time.monotonic(); s.sendall(b"x"); s.recv(1); rtt.append(time.monotonic() - t)
s.close()
dl = []
for _ in range(3):
    t = time.monotonic(); c = socket.create_connection((host, %d), timeout=30); n = 0
    while True:
        b = c.recv(1 << 16)
        if not b: break
        n += len(b)
    dl.append(time.monotonic() - t); c.close()
print("%%.3f %%.3f %%d" %% (sorted(rtt)[100] * 1000, sorted(dl)[1], n))
""" % (ECHO_PORT, BULK_PORT)


def world_names(tag):
    return "dbxt-vmh-" + tag, "dbxt-vmi-" + tag


def build_world(tag):
    host, inet = world_names(tag)
    networld.build_world(host, inet, HOST_UP, INET_UP, [SITE_A, SITE_B, DNS])


def start_internet(inet):
    procs = networld.start_internet(inet, [SITE_A + ":80", SITE_B + ":80"], DNS, {
        "site-a.test": SITE_A, "site-b.test": SITE_B})
    streams = subprocess.Popen(["nsenter", "--net=/run/netns/" + inet, "--", sys.executable,
                                "-c", STREAMS, SITE_A, str(BULK_BYTES)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    streams.stdout.readline()
    return procs + [streams]


def fetch(srv, sid, host, port=80, timeout=5):
    r = srv.exec(sid, ["python3", "-c", networld.FETCH, host, str(port), str(timeout)],
                 timeout_s=90)
    return (r.get("stdout") or "").strip()


def qemu_pid(sid):
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/cgroup" % p) as f:
                if "/deskbox/dbx-" + sid in f.read():
                    with open("/proc/%s/cmdline" % p, "rb") as c:
                        if b"qemu-system" in c.read():
                            return int(p)
        except (OSError, ValueError):
            pass
    return None


def netns_holders(ino):
    """Processes in, or holding an fd of, the network namespace `ino`."""
    want = "net:[%d]" % ino
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/ns/net" % p) == want:
                out.append(p)
                continue
            for fd in os.listdir("/proc/%s/fd" % p):
                if os.readlink("/proc/%s/fd/%s" % (p, fd)) == want:
                    out.append(p)
                    break
        except OSError:
            pass
    return out


def links():
    return sorted(ln.split(":")[1].strip().split("@")[0] for ln in
                  networld.sh("ip", "-o", "link").stdout.splitlines())


def create_vm(t, srv, spec, what):
    """The created VM's view, and the answer's body when it is a 501 saying
    this host cannot run a VM."""
    spec = dict(spec, isolation="vm", display={"width": 640, "height": 400})
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/sandboxes", spec, timeout=400)
    msg = r.body[:300]
    if r.status == 501 and (b"make vm" in r.body or b"/dev/kvm" in r.body):
        return None, msg
    msg = None
    t.ok(r.status == 201, "%s boots (%.1f s)" % (what, time.monotonic() - t0), (r.status, msg))
    return (r.json() if r.status == 201 else None), msg


def check_namespace(t, srv, vm):
    pid = qemu_pid(vm["id"])
    t.ok(pid is not None, "the VM's QEMU is found", pid)
    if not pid:
        return None
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        cmd = f.read().split(b"\0")
    nd = [c for c in cmd if c.startswith(b"tap,")]
    t.ok(nd and b"fd=" in nd[0] and b"ifname" not in nd[0] and b"script" not in nd[0] and
         b"-sandbox" in cmd, "QEMU gets its tap as an fd, under -sandbox on", nd)
    ino = os.stat("/proc/%d/ns/net" % pid).st_ino
    # With QEMU's own namespaces (the sandbox's user namespace, as its
    # root): no new device can be made there.
    r = subprocess.run(["nsenter", "-t", str(pid), "--user", "--net", "--", "ip", "tuntap",
                        "add", "dev", "dbxtry0", "mode", "tap"], capture_output=True, text=True)
    t.ok(r.returncode != 0 and "TUNSETIFF" in r.stderr and "not permitted" in r.stderr,
         "QEMU's namespaces cannot make a tap (no CAP_NET_ADMIN over the network namespace)",
         (r.returncode, r.stderr.strip()))
    t.ok(ino != os.stat("/proc/self/ns/net").st_ino, "QEMU runs in a network namespace of its own")
    out = networld.sh("nsenter", "--net=/proc/%d/ns/net" % pid, "--", "ip", "-o", "addr").stdout
    t.ok(" vm0 " in out and "169.254.0.1/30" in out and
         (" eth0 " in out and vm["network_address"] + "/30" in out),
         "its namespace: the tap vm0 and eth0 with the sandbox's address", out)
    r = srv.exec(vm["id"], ["sh", "-c", "ip -o addr show eth0; ip route; cat /etc/resolv.conf"])
    out = r.get("stdout", "")
    t.ok("169.254.0.2/30" in out and "default via 169.254.0.1" in out and
         "nameserver " in out, "the guest's eth0, route and resolver", out)
    return ino


def check_allow(t, srv, vm):
    out = fetch(srv, vm["id"], "site-a.test")
    t.ok(out.startswith("OK hello from " + SITE_A), "allow: the listed name passes", out)
    out = fetch(srv, vm["id"], "site-b.test")
    t.ok(out.startswith("DNSERR"), "allow: another name is NXDOMAIN", out)
    out = fetch(srv, vm["id"], SITE_B, timeout=3)
    t.ok(out.startswith("ERR"), "allow: another host's address is dropped", out)


def check_put(t, srv, vm):
    base = "/v1/sandboxes/%s/network" % vm["id"]
    r = srv.request("PUT", base, {"network": "none"})
    t.ok(r.status == 200 and "network_address" not in r.json(), "PUT network none on a running VM",
         r.body[:300])
    out = fetch(srv, vm["id"], SITE_A, timeout=5)
    t.ok(out.startswith("ERR") and ("unreachable" in out or "No route" in out),
         "none: its packets find no route", out)
    out = fetch(srv, vm["id"], "site-a.test")
    t.ok(out.startswith("DNSERR"), "none: it resolves nothing (the guest's resolv.conf emptied)",
         out)
    r = srv.request("PUT", base, {"network": {"allow": ["site-b.test"]}})
    t.eq(r.status, 200, "PUT network allow on the running VM")
    out = fetch(srv, vm["id"], "site-b.test")
    t.ok(out.startswith("OK hello from " + SITE_B), "the newly listed name passes", out)
    out = fetch(srv, vm["id"], "site-a.test")
    t.ok(out.startswith("DNSERR"), "a name not listed is NXDOMAIN", out)
    r = srv.request("PUT", base, {"network": "internet"})
    t.eq(r.status, 200, "PUT network internet on the running VM")
    out = fetch(srv, vm["id"], "site-a.test")
    t.ok(out.startswith("OK hello from " + SITE_A), "it reaches the internet again", out)


def check_ports(t, srv, vm):
    sid = vm["id"]
    srv.exec(sid, ["sh", "-c", "mkdir -p /tmp/www && echo served-by-the-guest > /tmp/www/probe"])
    for port, bind in ((8000, "0.0.0.0"), (8001, "127.0.0.1")):
        srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid,
                    {"argv": ["python3", "-m", "http.server", str(port), "--bind", bind,
                              "--directory", "/tmp/www"], "background": True})
    up = dbx.wait_until(lambda: fetch(srv, sid, "127.0.0.1", 8000).startswith("OK") and
                        fetch(srv, sid, "127.0.0.1", 8001).startswith("OK"), 120, interval=1)
    t.ok(up, "two HTTP servers run in the guest")
    r = srv.request("GET", "/v1/sandboxes/%s/ports/8000/probe" % sid)
    t.ok(r.status == 200 and r.body.strip() == b"served-by-the-guest",
         "the port proxy reaches the guest's server on 0.0.0.0", (r.status, r.body[:200]))
    r = srv.request("GET", "/v1/sandboxes/%s/ports/8001/probe" % sid)
    t.ok(r.status == 502 and b"0.0.0.0" in r.body,
         "one bound to the guest's 127.0.0.1: 502 saying how it is reached", (r.status, r.body[:300]))


def measure(t, srv, vm, ct):
    """Diagnostics only: the figures of docs/isolation.md."""
    for name, sb in (("VM", vm), ("container", ct)):
        r = srv.exec(sb["id"], ["python3", "-c", MEASURE, SITE_A], timeout_s=300)
        f = (r.get("stdout") or "").split()
        ok = len(f) == 3 and int(f[2]) == BULK_BYTES
        t.ok(ok, "%s: round trips and the 10 MB download complete" % name, r)
        if ok:
            t.diag("%s: TCP round trip median %s ms; 10 MB download median %s s (%.0f MB/s)" % (
                name, f[0], f[1], BULK_BYTES / 1e6 / float(f[1])))


def check_restart(t, srv, vm, inos):
    """Stop and start: the namespace goes with QEMU, the new one is attached."""
    sid = vm["id"]
    r = srv.request("POST", "/v1/sandboxes/%s/stop" % sid, timeout=120)
    t.eq(r.status, 200, "stop the networked VM")
    gone = dbx.wait_until(lambda: not netns_holders(inos[0]), 10)
    t.ok(gone, "its network namespace is gone with its QEMU", netns_holders(inos[0]))
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/sandboxes/%s/start" % sid, timeout=400)
    t.ok(r.status == 200 and r.json().get("network_address"),
         "it starts again with an address (%.1f s)" % (time.monotonic() - t0),
         (r.status, r.body[:300]))
    out = fetch(srv, sid, "site-a.test")
    t.ok(out.startswith("OK hello from " + SITE_A), "and reaches the internet by name", out)
    pid = qemu_pid(sid)
    if pid:
        inos.append(os.stat("/proc/%d/ns/net" % pid).st_ino)


def check_takeover(t, srv, vm, args):
    """kill -9 of deskboxd: the VM runs on, the next deskboxd takes it over
    and attaches its namespace again.  Returns the new server."""
    srv.kill()
    srv2 = dbx.Server(state_dir=srv.state_dir, args=args)
    r = srv2.request("GET", "/v1/sandboxes/" + vm["id"])
    t.ok(r.status == 200 and r.json().get("status") == "running" and
         r.json().get("network_address"),
         "after kill -9 the next deskboxd takes the VM over, with an address", r.body[:300])
    out = fetch(srv2, vm["id"], "site-a.test")
    t.ok(out.startswith("OK hello from " + SITE_A), "and it reaches the internet by name", out)
    return srv2


def check_delete(t, srv, vms, inos):
    for vm in vms:
        r = srv.request("DELETE", "/v1/sandboxes/" + vm["id"], timeout=120)
        t.ok(r.status in (200, 204), "delete the VM", (r.status, r.body[:200]))
    left = [ln for ln in links() if ln.startswith("dbx") or ln.startswith("vm0")]
    t.eq(left, [], "no dbx link (nor a tap) left in deskboxd's namespace")
    gone = dbx.wait_until(lambda: not any(netns_holders(i) for i in inos), 10)
    t.ok(gone, "no process or fd holds a VM's network namespace: its tap is gone with it",
         [netns_holders(i) for i in inos])


def inner():
    t = dbx.Tap()
    args = ["--uplink", "up0", "--dns-server", DNS, "--default-network", "internet"]
    first = srv = dbx.Server(args=args)
    vms = []
    try:
        vm, msg = create_vm(t, srv, {}, "a VM with the default network (internet)")
        if vm is None:
            if msg:
                t.skip("the VM network checks", "this host cannot run a VM: %s" % msg)
            t.done()
            return
        vms.append(vm)
        allow, _ = create_vm(t, srv, {"network": {"allow": ["site-a.test"]}},
                             "a VM with an allow list")
        if allow:
            vms.append(allow)
        t.eq(vm.get("network"), "internet", "the VM has the server's default, internet")
        out = fetch(srv, vm["id"], "site-a.test")
        t.ok(out.startswith("OK hello from " + SITE_A), "the VM reaches a server by name", out)
        inos = [i for i in (check_namespace(t, srv, v) for v in vms) if i]
        if allow:
            check_allow(t, srv, allow)
        check_put(t, srv, vm)
        check_ports(t, srv, vm)
        ct = srv.create({"display": {"width": 320, "height": 200}})
        measure(t, srv, vm, ct)
        srv.request("DELETE", "/v1/sandboxes/" + ct["id"])
        check_restart(t, srv, vm, inos)
        srv = check_takeover(t, srv, vm, args)
        check_delete(t, srv, vms, inos)
        vms = []
    finally:
        for vm in vms:
            srv.request("DELETE", "/v1/sandboxes/" + vm["id"], timeout=120)
        srv.stop()
        srv.cleanup()
        if first is not srv:
            first.cleanup()
    seen = networld.leaked()
    t.ok(not seen, "the machine's own interfaces carried no packet of the test's world", seen[:5])
    t.done()


if __name__ == "__main__":
    if os.environ.get("DBX_NETTEST_INNER"):
        inner()
    else:
        sys.exit(networld.run_outer(__file__, world_names, build_world, start_internet,
                                    WORLD_NETS))
