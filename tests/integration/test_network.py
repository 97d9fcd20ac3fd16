"""Network modes (docs/network.md), in a world of network namespaces this
test makes, so that no packet leaves the machine:

  "host"      deskboxd runs here (nsenter --net, the test's client code
              too: the test runs itself again inside it); its only
              interfaces are lo and up0, its only route leads to
  "internet"  in0 (the other end of up0), holding HTTP servers on
              203.0.113.0/24 and 198.51.100.0/24 (documentation ranges),
              on 10.9.9.9 (a private address) and on 169.254.169.254 (the
              metadata address), and a DNS server (dnsmasq) with test
              names.

Cases: internet reaches a server by name and by address, none cannot; an
allowlist lets one name (and one address:port) through and refuses another
by name (NXDOMAIN) and by address; from every mode, the API port on every
address of the host namespace, another sandbox, 169.254.169.254 and a
private address are unreachable (while the test itself reaches the last
two through the same route, so the drop is the filter's); PUT network
changes a running sandbox; 50 creates and deletes with internet leave the
links, addresses, nftables and dnsmasq processes as they were; a kill -9
of deskboxd with networked sandboxes and a restart leave nothing;
Playwright's connectOverCDP through deskboxd drives the in-sandbox
chromium to a page of the test's internet, which shows in a screenshot;
a networked sandbox left running by a stopping deskboxd has no network
while none runs and gets it back from the next one."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402
import networld  # noqa: E402

SITE_A, SITE_B = "203.0.113.10", "203.0.113.20"
PORTED = "198.51.100.7"
DNS = "198.51.100.53"
PRIVATE, METADATA = "10.9.9.9", "169.254.169.254"
HOST_UP, INET_UP = "100.127.0.2", "100.127.0.1"
SERVED = [SITE_A, SITE_B, PORTED, PRIVATE, METADATA]

# The world's pieces (tests/lib/networld.py), kept under these names for
# the tests and the bench that build this same world (test_secrets.py,
# test_network_topology.py, scripts/bench_network.py).
HTTP_SERVER, FETCH, sh = networld.HTTP_SERVER, networld.FETCH, networld.sh


# ---------------------------------------------------------------- outside

def world_names(tag):
    return "dbxt-host-" + tag, "dbxt-inet-" + tag


def build_world(tag):
    host, inet = world_names(tag)
    networld.build_world(host, inet, HOST_UP, INET_UP, SERVED + [DNS])
    return host, inet


def start_internet(inet):
    specs = [a + ":80" for a in SERVED] + [PORTED + ":8080", PORTED + ":8081"]
    return networld.start_internet(inet, specs, DNS, {
        "site-a.test": SITE_A, "site-b.test": SITE_B, "ported.test": PORTED,
        "private.test": PRIVATE, "metadata.test": METADATA})


# Addresses only the test's world uses: a packet to or from one of them on
# an interface of the machine's own namespace would have left the world.
# Exact addresses for the documentation ranges: the machine itself may talk
# to others in them (this one does, to 203.0.113.80).
WORLD_NETS = [("10.231.0.0", 16), ("100.127.0.0", 30)] + [
    (a, 32) for a in (SITE_A, SITE_B, PORTED, DNS)]


def watch_host(path, stop):
    return networld.watch_host(path, stop, WORLD_NETS)


def outer():
    return networld.run_outer(__file__, world_names, build_world, start_internet, WORLD_NETS)


# ----------------------------------------------------------------- inside

def fetch(srv, sid, host, port=80, timeout=3):
    r = srv.exec(sid, ["python3", "-c", FETCH, host, str(port), str(timeout)], timeout_s=60)
    return (r.get("stdout") or "").strip()


def reachable_here(addr, port=80):
    try:
        socket.create_connection((addr, port), timeout=3).close()
        return True
    except OSError:
        return False


def inventory(state_dir):
    """Links, addresses, the nftables ruleset and our dnsmasq processes."""
    links = sorted(re.sub(r"^\d+: ", "", l).split(":")[0].split("@")[0]
                   for l in sh("ip", "-o", "link").stdout.splitlines())
    addrs = sorted(" ".join(l.split()[1:4]) for l in sh("ip", "-o", "addr").stdout.splitlines())
    rules = sh("nft", "list", "ruleset").stdout
    dns = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cl = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "dnsmasq" in cl and state_dir in cl:
                dns.append(cl)
    return {"links": links, "addrs": addrs, "nft": rules, "dnsmasq": sorted(dns)}


def only_world_routes(t):
    links = inventory("/nonexistent")["links"]
    t.ok(set(links) <= {"lo", "up0"}, "the host namespace has only lo and up0", links)
    routes = sh("ip", "-4", "route", "show", "table", "all").stdout.splitlines()
    bad = [r for r in routes if "dev up0" not in r and "dev lo" not in r]
    t.ok(not bad and any(r.startswith("default via %s dev up0" % INET_UP) for r in routes),
         "every route of the host namespace leads to the test's internet", routes)
    v6 = sh("ip", "-6", "route", "show", "table", "all").stdout.splitlines()
    t.ok(not [r for r in v6 if "dev up0" not in r and "dev lo" not in r and r.strip()],
         "no IPv6 route leaves either", v6)


def check_modes(t, srv, none, inet, allow):
    t.eq(srv.request("GET", "/v1/sandboxes/" + inet["id"]).json()["network"], "internet",
         "GET shows internet")
    t.eq(srv.request("GET", "/v1/sandboxes/" + allow["id"]).json()["network"],
         {"allow": ["site-a.test", PORTED + ":8080"]}, "GET shows the allow list as given")
    t.ok("network_address" not in none, "a none sandbox has no address", none)
    t.ok(re.match(r"^10\.231\.\d+\.\d+$", inet.get("network_address", "")),
         "an internet sandbox has an address from the subnet", inet)
    out = fetch(srv, inet["id"], "site-a.test")
    t.ok(out.startswith("OK hello from " + SITE_A), "internet reaches a server by name", out)
    out = fetch(srv, inet["id"], SITE_B)
    t.ok(out.startswith("OK hello from " + SITE_B), "internet reaches a server by address", out)
    out = fetch(srv, none["id"], SITE_A)
    t.ok(out.startswith("ERR"), "none reaches nothing by address", out)
    out = fetch(srv, none["id"], "site-a.test")
    t.ok(out.startswith("DNSERR"), "none resolves nothing", out)
    out = fetch(srv, allow["id"], "site-a.test")
    t.ok(out.startswith("OK hello from " + SITE_A), "allow: the listed name passes", out)
    out = fetch(srv, allow["id"], "site-b.test")
    t.ok(out.startswith("DNSERR"), "allow: another name is NXDOMAIN", out)
    out = fetch(srv, allow["id"], SITE_B)
    t.ok(out.startswith("ERR"), "allow: the refused name's address is dropped", out)
    out = fetch(srv, allow["id"], PORTED, 8080)
    t.ok(out.startswith("OK"), "allow: a listed address:port passes", out)
    out = fetch(srv, allow["id"], PORTED, 8081)
    t.ok(out.startswith("ERR"), "allow: another port of that address is dropped", out)


def check_blocked(t, srv, sbs, listener):
    """From each sandbox: the API port on every host address, the other
    sandboxes, the metadata and a private address."""
    t.ok(reachable_here(METADATA) and reachable_here(PRIVATE),
         "the host namespace itself reaches the metadata and private servers (so a drop "
         "from a sandbox is the filter's)")
    host_addrs = [l.split()[3].split("/")[0] for l in sh("ip", "-o", "-4", "addr").stdout
                  .splitlines()]
    for name, sb in sbs.items():
        targets = [(a, srv.port) for a in host_addrs]
        targets += [(METADATA, 80), (PRIVATE, 80), ("private.test", 80), ("metadata.test", 80)]
        for other_name, other in sbs.items():
            if other is not sb and other.get("network_address"):
                targets.append((other["network_address"], listener[1]))
        reached = []
        for host, port in targets:
            out = fetch(srv, sb["id"], host, port, timeout=2)
            if out.startswith("OK"):
                reached.append("%s:%d" % (host, port))
        t.ok(not reached, "%s: the host, other sandboxes, metadata and private addresses are "
             "unreachable (%d targets)" % (name, len(targets)), reached)


def check_put(t, srv, sid):
    base = "/v1/sandboxes/" + sid
    r = srv.request("PUT", base + "/network", {"network": "internet"})
    t.eq(r.status, 200, "PUT network internet on a running sandbox")
    out = fetch(srv, sid, "site-a.test")
    t.ok(out.startswith("OK hello from " + SITE_A), "it reaches the internet at once", out)
    r = srv.request("PUT", base + "/network", {"network": {"allow": ["*.site-b.test",
                                                                      "site-b.test"]}})
    t.eq(r.status, 200, "PUT network allow")
    out = fetch(srv, sid, "site-a.test")
    t.ok(out.startswith("DNSERR"), "the name no longer listed is NXDOMAIN", out)
    out = fetch(srv, sid, SITE_A)
    t.ok(out.startswith("ERR"), "and its address is dropped", out)
    out = fetch(srv, sid, "site-b.test")
    t.ok(out.startswith("OK hello from " + SITE_B), "the newly listed name passes", out)
    r = srv.request("PUT", base + "/network", {"network": {"allow": [
        "private.test", "metadata.test", PRIVATE + ":80", METADATA]}})
    t.eq(r.status, 200, "PUT network allow with private and metadata entries")
    out = fetch(srv, sid, PRIVATE)
    t.ok(out.startswith("OK hello from " + PRIVATE), "a private address passes when named", out)
    r = srv.request("PUT", base + "/network", {"network": {"allow": [
        "private.test", "metadata.test", METADATA]}})
    out = fetch(srv, sid, "private.test")
    t.ok(out.startswith("ERR"), "a listed name that resolves to a private address reaches "
         "nothing", out)
    out = fetch(srv, sid, "metadata.test")
    t.ok(out.startswith("ERR"), "nor one that resolves to the metadata address", out)
    out = fetch(srv, sid, METADATA)
    t.ok(out.startswith("ERR"), "the metadata address stays blocked even when named", out)
    r = srv.request("PUT", base + "/network", {"network": "none"})
    t.ok(r.status == 200 and "network_address" not in r.json(), "PUT network none", r.body[:300])
    out = fetch(srv, sid, SITE_B)
    t.ok(out.startswith("ERR"), "and it reaches nothing", out)
    for bad in [{"network": "intranet"}, {"network": {"allow": []}},
                {"network": {"allow": ["bad name!"]}}, {"network": {"allow": ["10.0.0.0/33"]}},
                {"network": {"allow": ["1.2.3.4:0"]}}, {"network": {"deny": ["x.test"]}},
                {"network": {"allow": ["a%d.test" % i for i in range(65)]}}, {}]:
        r = srv.request("PUT", base + "/network", bad)
        code = "unknown_field" if "deny" in json.dumps(bad) else "invalid_argument"
        t.ok(r.status == 400 and r.json()["error"]["code"] == code,
             "400 for %s" % json.dumps(bad)[:60], r.body[:200])
    r = srv.request("PUT", base + "/network", {"network": {"allow": ["ok.test", "bad_name"]}})
    t.ok(r.status == 400 and "bad_name" in r.json()["error"]["message"],
         "the 400 names the bad entry", r.body[:200])


def churn(t, srv, n=50):
    def one(i):
        r = srv.request("POST", "/v1/sandboxes", {"network": "internet",
                                                  "display": {"width": 320, "height": 200}})
        if r.status != 201:
            return "create %d: %d %s" % (i, r.status, r.body[:200])
        sid = r.json()["id"]
        r = srv.request("DELETE", "/v1/sandboxes/" + sid)
        return None if r.status == 204 else "delete %d: %d" % (i, r.status)
    with ThreadPoolExecutor(2) as ex:
        errors = [e for e in ex.map(one, range(n)) if e]
    t.ok(not errors, "%d creates and deletes with internet" % n, errors[:3])


def check_init_death(t, srv, before):
    """The init of a networked sandbox dies: its network goes with it."""
    sb = srv.create({"network": "internet", "display": {"width": 320, "height": 200}})
    pid = dbx.sandbox_init_pid(srv.state_dir, sb["id"])
    os.kill(pid, 9)
    failed = dbx.wait_until(lambda: srv.request("GET", "/v1/sandboxes/" + sb["id"]).json()
                            ["status"] == "failed", 30)
    t.ok(failed, "a sandbox whose init was killed is failed")
    t.ok(dbx.wait_until(lambda: inventory(srv.state_dir) == before, 30),
         "and its link, filter and resolver are gone", inventory(srv.state_dir))
    srv.request("DELETE", "/v1/sandboxes/" + sb["id"])


def check_pool(t, args):
    """A warm-pool desktop (network none) claimed with internet; the
    server's --default-network for a spec that names none."""
    srv = dbx.Server(args=args + ["--warm-pool", "1:320x200", "--default-network", "internet"])
    try:
        runtime = os.path.join(srv.state_dir, "runtime")
        pooled = lambda: [d for d in os.listdir(runtime) if d.startswith("dbx-")]  # noqa: E731
        ready_n = lambda: re.search(r"^deskbox_warm_pool_ready (\d+)",  # noqa: E731
                                    srv.request("GET", "/metrics").body.decode(), re.M)
        t.ok(dbx.wait_until(lambda: ready_n() and ready_n().group(1) == "1", 60),
             "the pool holds a ready desktop")
        ready = set(pooled())
        sb = srv.create({"network": "internet", "display": {"width": 320, "height": 200}})
        t.ok("dbx-" + sb["id"] in ready and sb.get("network") == "internet"
             and sb.get("network_address"), "a create with internet claims it", sb)
        out = fetch(srv, sb["id"], "site-a.test")
        t.ok(out.startswith("OK hello from " + SITE_A), "the claimed desktop is online", out)
        sb2 = srv.create({"display": {"width": 320, "height": 200}})
        t.ok(sb2["network"] == "internet" and sb2.get("network_address"),
             "a spec without network gets --default-network internet", sb2)
        out = fetch(srv, sb2["id"], SITE_B)
        t.ok(out.startswith("OK hello from " + SITE_B), "and is online", out)
        # A template's pool: its members have the template's network from
        # the start (its startup commands may need it).
        r = srv.request("POST", "/v1/templates", {
            "name": "online", "network": "internet", "warm_pool": 1,
            "display": {"width": 320, "height": 200}, "env": {"POOL": "online"},
            "startup": ["python3 -c 'import socket; socket.create_connection((\"%s\", 80), 3)' "
                        "> /tmp/online.txt 2>&1; echo $? >> /tmp/online.txt" % SITE_A]})
        t.eq(r.status, 201, "a template with internet and a warm pool")
        tready = lambda: srv.request("GET", "/v1/templates/online").json().get(  # noqa: E731
            "warm_pool_ready")
        t.ok(dbx.wait_until(lambda: tready() == 1, 120), "its pool fills", tready())
        members = set(pooled())
        sb3 = srv.create({"template": "online"})
        t.ok("dbx-" + sb3["id"] in members and sb3.get("network") == "internet" and
             sb3.get("network_address"), "a create naming it claims a member on its network",
             sb3)
        out = srv.exec(sb3["id"], ["cat", "/tmp/online.txt"])["stdout"].strip()
        t.eq(out, "0", "its startup command was online already")
        out = fetch(srv, sb3["id"], "site-a.test")
        t.ok(out.startswith("OK hello from " + SITE_A), "and it is online", out)
        srv.request("DELETE", "/v1/templates/online")
    finally:
        srv.cleanup()


BROWSER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser")


def cdp_visit(t, srv, sid):
    """connectOverCDP from this host (the test's namespace) opens a page of
    the world in the sandbox's chromium; the page shows on its screen."""
    node = shutil.which("node")
    if not node or not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        t.skip("connectOverCDP to a page of the world", "node or tests/browser/node_modules missing")
        return
    r = srv.request("POST", "/v1/sandboxes/%s/desktop/browser" % sid, {})
    t.eq(r.status, 200, "the browser starts in an internet sandbox")
    env = dict(os.environ, DESKBOX_TOKEN=srv.token, PAGE_URL="http://site-a.test/page",
               CDP_URL="http://127.0.0.1:%d/v1/sandboxes/%s/browser/cdp" % (srv.port, sid))
    p = subprocess.run([node, "cdp.mjs"], cwd=BROWSER_DIR, env=env, capture_output=True,
                       text=True, timeout=180)
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        out = {}
    t.ok(out.get("title") == "world page" and "hello from " + SITE_A in out.get("text", ""),
         "connectOverCDP: the sandbox's chromium shows a page of the test's internet",
         p.stdout[-1500:] + p.stderr[-1500:])

    def green():
        rows = dbx.png_pixels(srv.screenshot(sid))
        hits = sum(1 for y in range(0, len(rows), 8) for x in range(0, len(rows[0]) // 3, 8)
                   if rows[y][3 * x:3 * x + 3] == b"\x20\xa0\x40")
        return hits / float(len(range(0, len(rows), 8)) * len(range(0, len(rows[0]) // 3, 8)))
    t.ok(dbx.wait_until(lambda: green() > 0.3, timeout=30, interval=0.5),
         "and the page shows in a REST screenshot", "green share %.2f" % green())


def check_cdp_and_keep(t, args):
    srv = dbx.Server(args=args, on_exit="keep")
    state = srv.state_dir
    try:
        sid = srv.create({"network": "internet", "display": {"width": 1024, "height": 768}})["id"]
        cdp_visit(t, srv, sid)
        srv.proc.send_signal(signal.SIGTERM)
        t.eq(srv.proc.wait(timeout=60), 0, "deskboxd stops, leaving the sandbox running")
        srv.log.close()
        down = inventory(state)
        t.ok(not [l for l in down["links"] if l.startswith("dbx")] and not down["dnsmasq"] and
             "deskbox" not in down["nft"],
             "while no deskboxd runs, the sandbox has no link, filter or resolver", down)
        srv = dbx.Server(state_dir=state, args=args, on_exit="keep")
        srv.own_state = True
        sb = srv.request("GET", "/v1/sandboxes/" + sid).json()
        t.ok(sb["status"] == "running" and sb.get("network_address"),
             "the next deskboxd takes it over with an address", sb)
        out = fetch(srv, sid, "site-a.test")
        t.ok(out.startswith("OK hello from " + SITE_A), "and its network works again", out)
    finally:
        srv.cleanup()


def inner():
    t = dbx.Tap()
    only_world_routes(t)
    args = ["--uplink", "up0", "--dns-server", DNS]
    srv = dbx.Server(args=args)
    try:
        none = srv.create({"display": {"width": 320, "height": 200}})
        inet = srv.create({"network": "internet", "display": {"width": 320, "height": 200}})
        allow = srv.create({"network": {"allow": ["site-a.test", PORTED + ":8080"]},
                            "display": {"width": 320, "height": 200}})
        t.eq(none["network"], "none", "the server's default is none")
        check_modes(t, srv, none, inet, allow)
        # A listener in the internet sandbox, for the others to try.
        srv.request("POST", "/v1/sandboxes/%s/process/exec" % inet["id"],
                    {"argv": ["python3", "-m", "http.server", "8000", "--bind", "0.0.0.0"],
                     "background": True})
        dbx.wait_until(lambda: fetch(srv, inet["id"], "127.0.0.1", 8000).startswith("OK"), 20)
        check_blocked(t, srv, {"none": none, "internet": inet, "allow": allow},
                      (inet["network_address"], 8000))
        check_put(t, srv, none["id"])
        for sb in (none, inet, allow):
            srv.request("DELETE", "/v1/sandboxes/" + sb["id"])
        before = inventory(srv.state_dir)
        churn(t, srv)
        after = inventory(srv.state_dir)
        t.eq(after, before, "links, addresses, nftables and resolvers are as before")
        check_init_death(t, srv, before)

        # kill -9 with networked sandboxes, then a restart.
        for spec in ({"network": "internet"}, {"network": {"allow": ["site-a.test"]}}):
            spec["display"] = {"width": 320, "height": 200}
            srv.create(spec)
        mid = inventory(srv.state_dir)
        t.ok(len(mid["dnsmasq"]) == 2 and len([l for l in mid["links"] if l.startswith("dbx")])
             == 2, "two networked sandboxes run", mid["links"])
        srv.kill()
        srv2 = dbx.Server(state_dir=srv.state_dir, args=args)
        try:
            clean = inventory(srv.state_dir)
            t.eq(clean["links"], ["lo", "up0"], "after kill -9 and a restart: no link left")
            t.ok("deskbox" not in clean["nft"], "no nftables table left", clean["nft"][:300])
            t.eq(clean["dnsmasq"], [], "no resolver left")
            t.eq(sorted(a for a in clean["addrs"] if "10.231." in a), [], "no address left")
            sbs = srv2.request("GET", "/v1/sandboxes").json()["sandboxes"]
            t.ok(all(s["status"] == "stopped" and "network_address" not in s for s in sbs),
                 "the sandboxes are stopped, without address", sbs)
            sid = [s["id"] for s in sbs if s["network"] == "internet"][0]
            r = srv2.request("POST", "/v1/sandboxes/%s/start" % sid)
            t.eq(r.status, 200, "a stopped internet sandbox starts again")
            out = fetch(srv2, sid, "site-a.test")
            t.ok(out.startswith("OK hello from " + SITE_A), "with its network", out)
            other = [s["id"] for s in sbs if s["id"] != sid][0]
            r = srv2.request("PUT", "/v1/sandboxes/%s/network" % other, {"network": "internet"})
            t.ok(r.status == 200 and r.json()["status"] == "stopped" and
                 r.json()["network"] == "internet", "PUT network on a stopped sandbox",
                 r.body[:300])
            srv2.request("POST", "/v1/sandboxes/%s/start" % other)
            out = fetch(srv2, other, "site-b.test")
            t.ok(out.startswith("OK hello from " + SITE_B), "it applies at the next start", out)
            t.eq(srv2.stop(), 0, "deskboxd stops cleanly with networked sandboxes")
        finally:
            srv2.cleanup()
    finally:
        srv.kill()
        shutil.rmtree(srv.state_dir, ignore_errors=True)
    clean = inventory(srv.state_dir)
    t.ok(clean["links"] == ["lo", "up0"] and "deskbox" not in clean["nft"] and
         not clean["dnsmasq"], "a clean stop of deskboxd leaves no link, table or resolver",
         clean)
    check_pool(t, args)
    check_cdp_and_keep(t, args)
    only_world_routes(t)
    with open(os.environ["DBX_NETTEST_LEAKS"]) as f:
        seen = f.read().splitlines()
    t.ok(not seen, "the machine's own interfaces carried no packet of the test's world", seen[:5])
    t.done()


if __name__ == "__main__":
    if os.environ.get("DBX_NETTEST_INNER"):
        inner()
    else:
        sys.exit(outer())
