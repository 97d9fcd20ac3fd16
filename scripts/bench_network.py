"""make bench's network figures (docs/network.md), measured where no packet
can leave the machine: deskboxd runs in a network namespace whose only
route leads to a test "internet" namespace (the world of
tests/integration/test_network.py), and this script runs itself again
inside it to drive deskboxd.

Figures: the network's setup inside a create (link, addresses, route,
filter, resolver start: deskbox_network_attach_seconds, per create from
the /metrics deltas) and the wait for the resolver after the desktop is up
(deskbox_network_ready_wait_seconds); a cold create with "internet" against
one with "none" in the same run; the first name lookup right after create;
a PUT network on a running sandbox."""

import json
import os
import re
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import dbx  # noqa: E402
import test_network as world  # noqa: E402

LOOKUP = ("import socket, time\nt = time.perf_counter()\n"
          "a = socket.gethostbyname('site-a.test')\n"
          "print(a, (time.perf_counter() - t) * 1000)")


def histogram(srv, name):
    text = srv.request("GET", "/metrics").body.decode()
    s = re.search(r"^%s_sum (\S+)$" % name, text, re.M)
    c = re.search(r"^%s_count (\S+)$" % name, text, re.M)
    return (float(s.group(1)), int(c.group(1))) if s and c else (0.0, 0)


NAIVE_TABLE = """table inet dbxnaive {
 map in_map { type ifname : verdict; }
 map fwd_map { type ifname : verdict; }
}
"""
NAIVE_RULES = """add chain inet dbxnaive n0_in
add rule inet dbxnaive n0_in ip saddr 10.99.0.2 ip daddr 10.99.0.1 meta l4proto { tcp, udp } th dport 53 accept
add rule inet dbxnaive n0_in drop
add chain inet dbxnaive n0_out
add rule inet dbxnaive n0_out ip saddr != 10.99.0.2 drop
add rule inet dbxnaive n0_out accept
add element inet dbxnaive in_map { "nv0" : jump n0_in }
add element inet dbxnaive fwd_map { "nv0" : jump n0_out }
"""


def naive(n):
    """The same setup the naive way: ip, nsenter and nft processes, and a
    dnsmasq spawn, for one sandbox-like namespace at a time."""
    subprocess.run(["nft", "-f", "-"], input=NAIVE_TABLE, text=True, check=True)
    times = []
    try:
        for _ in range(n):
            ns = subprocess.Popen(["unshare", "-n", "sleep", "60"])
            time.sleep(0.05)
            pid = str(ns.pid)
            t0 = time.perf_counter()
            for cmd in (["ip", "link", "add", "nv0", "type", "veth", "peer", "name", "eth0",
                         "netns", pid],
                        ["ip", "addr", "add", "10.99.0.1/30", "dev", "nv0"],
                        ["ip", "link", "set", "nv0", "up"],
                        ["nsenter", "-t", pid, "-n", "ip", "addr", "add", "10.99.0.2/30", "dev",
                         "eth0"],
                        ["nsenter", "-t", pid, "-n", "ip", "link", "set", "eth0", "up"],
                        ["nsenter", "-t", pid, "-n", "ip", "route", "add", "default", "via",
                         "10.99.0.1"]):
                subprocess.run(cmd, check=True)
            subprocess.run(["nft", "-f", "-"], input=NAIVE_RULES, text=True, check=True)
            d = subprocess.Popen(["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
                                  "--no-resolv", "--bind-interfaces", "--pid-file=",
                                  "--listen-address=10.99.0.1", "--server=" + world.DNS])
            times.append((time.perf_counter() - t0) * 1000)
            d.kill()
            d.wait()
            subprocess.run(["nft", "delete element inet dbxnaive in_map { \"nv0\" }; "
                            "delete element inet dbxnaive fwd_map { \"nv0\" }; "
                            "delete chain inet dbxnaive n0_in; delete chain inet dbxnaive n0_out"],
                           check=True)
            subprocess.run(["ip", "link", "del", "nv0"], check=True)
            ns.kill()
            ns.wait()
    finally:
        subprocess.run(["nft", "delete", "table", "inet", "dbxnaive"])
    return times


def inner(n):
    srv = dbx.Server(args=["--uplink", "up0", "--dns-server", world.DNS])
    out = {"attach": [], "ready": [], "create_net": [], "create_none": [], "lookup": [],
           "lookup_ok": 0, "put": []}
    try:
        # One of each first: the image, the table and caches are made.
        for spec in ({}, {"network": "internet"}):
            srv.request("DELETE", "/v1/sandboxes/" + srv.create(spec)["id"])
        for _ in range(n):
            t0 = time.perf_counter()
            sid = srv.create({})["id"]
            out["create_none"].append((time.perf_counter() - t0) * 1000)
            srv.request("DELETE", "/v1/sandboxes/" + sid)
            a0, r0 = histogram(srv, "deskbox_network_attach_seconds"), histogram(
                srv, "deskbox_network_ready_wait_seconds")
            t0 = time.perf_counter()
            sid = srv.create({"network": "internet"})["id"]
            out["create_net"].append((time.perf_counter() - t0) * 1000)
            a1, r1 = histogram(srv, "deskbox_network_attach_seconds"), histogram(
                srv, "deskbox_network_ready_wait_seconds")
            if a1[1] == a0[1] + 1 and r1[1] == r0[1] + 1:
                out["attach"].append((a1[0] - a0[0]) * 1000)
                out["ready"].append((r1[0] - r0[0]) * 1000)
            r = srv.exec(sid, ["python3", "-c", LOOKUP], timeout_s=30)
            words = (r.get("stdout") or "").split()
            if len(words) == 2 and words[0] == world.SITE_A:
                out["lookup_ok"] += 1
                out["lookup"].append(float(words[1]))
            t0 = time.perf_counter()
            srv.request("PUT", "/v1/sandboxes/%s/network" % sid,
                        {"network": {"allow": ["site-a.test"]}})
            out["put"].append((time.perf_counter() - t0) * 1000)
            srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        srv.cleanup()
    pool(n, out)
    out["naive"] = naive(n)
    print("RESULT " + json.dumps(out), flush=True)


def pool(n, out):
    """Claims from the warm pool (its desktops have none), with none and
    with internet (attached at the claim)."""
    srv = dbx.Server(args=["--uplink", "up0", "--dns-server", world.DNS,
                           "--warm-pool", "1:320x200"])
    out["claim_none"], out["claim_net"] = [], []
    small = {"width": 320, "height": 200}
    try:
        for i in range(2 * n):
            dbx.wait_until(lambda: re.search(r"^deskbox_warm_pool_ready 1$", srv.request(
                "GET", "/metrics").body.decode(), re.M), 60)
            spec = {"display": small, "network": "internet" if i % 2 else "none"}
            t0 = time.perf_counter()
            sid = srv.create(spec)["id"]
            out["claim_net" if i % 2 else "claim_none"].append(
                (time.perf_counter() - t0) * 1000)
            srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        srv.cleanup()


def run(report, quick):
    """Builds the world, measures inside it, reports, cleans up."""
    tag = uuid.uuid4().hex[:8]
    host, inet = world.world_names(tag)
    procs = []
    n = 5 if quick else 10
    try:
        world.build_world(tag)
        procs = world.start_internet(inet)
        p = subprocess.run(["nsenter", "--net=/run/netns/" + host, "--", sys.executable,
                            os.path.abspath(__file__), "--inner", str(n)],
                           capture_output=True, text=True, timeout=900)
        line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        if not line:
            print("network bench failed: %s %s" % (p.stdout[-500:], p.stderr[-1500:]))
            return
        r = json.loads(line[0][7:])
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        for ns in (host, inet):
            for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                      text=True).stdout.split():
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    report("network setup at create (in deskboxd)", r["attach"], naive=r["naive"],
           naive_name="ip+nft", target="<= 20 ms")
    report("network: resolver wait after the desktop", r["ready"])
    report("create to ready, network internet", r["create_net"], naive=r["create_none"],
           naive_name="none")
    report("first lookup in a new sandbox (%d/%d ok)" % (r["lookup_ok"], n), r["lookup"])
    report("PUT network internet -> allow (running)", r["put"])
    report("warm-pool claim with internet (attach at claim)", r["claim_net"],
           naive=r["claim_none"], naive_name="claim none")


if __name__ == "__main__" and sys.argv[1:2] == ["--inner"]:
    inner(int(sys.argv[2]))
