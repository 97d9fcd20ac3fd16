"""The network (docs/network.md) under another topology than
test_network.py's, the one a user reported: the "host" namespace (deskboxd
runs there, and this test's client code with it) has lo and an uplink veth
up0 at 192.0.2.2/30 whose gateway is 192.0.2.1; the "internet" namespace
behind it holds the web at 203.0.113.10 and a DNS server at 203.0.113.53,
both on its lo, so neither is on the uplink's subnet. deskboxd gets
--uplink up0 --dns-server 203.0.113.53, nothing else.

Cases: an internet sandbox fetches the page by name and by address; an
allow-list sandbox resolves and fetches its listed name, not another;
connectOverCDP through deskboxd drives the sandbox's chromium to the page;
the host, the gateway and the uplink's own address stay unreachable from
the sandboxes; and no packet of this world shows on the machine's own
interfaces. Everything lives in namespaces this test creates."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
import networld  # noqa: E402
import test_network as tn  # noqa: E402

HOST_UP, GATEWAY = "192.0.2.2", "192.0.2.1"
WEB, OTHER, DNS = "203.0.113.10", "203.0.113.20", "203.0.113.53"
# test_network's helpers (fetch, cdp_visit, the leak watcher) with this
# world's addresses.
tn.SITE_A, tn.SITE_B = WEB, OTHER
tn.WORLD_NETS = [("10.231.0.0", 16), ("192.0.2.0", 30)] + [(a, 32) for a in (WEB, OTHER, DNS)]


def names(tag):
    return "dbxt-thost-" + tag, "dbxt-tinet-" + tag


def build_world(tag):
    host, inet = names(tag)
    # Strict reverse-path filtering, as Ubuntu's and many hosts' defaults
    # have it (this namespace's own setting; the machine's stays).
    rp = ["net.ipv4.conf.%s.rp_filter=%s" % (conf, os.environ.get("DBX_RP_FILTER", "1"))
          for conf in ("all", "default", "up0")]
    networld.build_world(host, inet, HOST_UP, GATEWAY, (WEB, OTHER, DNS), rp)
    return host, inet


def start_internet(inet):
    return networld.start_internet(inet, [WEB + ":80", OTHER + ":80", GATEWAY + ":80"], DNS,
                                   {"site-a.test": WEB, "site-b.test": OTHER})


def outer():
    return networld.run_outer(__file__, names, build_world, start_internet, tn.WORLD_NETS)


def wrong_uplinks(t):
    """An uplink deskbox cannot use is one clear error at the create, and
    nothing is left behind, instead of connections that time out."""
    sh = tn.sh
    sh("ip", "link", "add", "dn0", "type", "veth", "peer", "name", "dn1")
    sh("ip", "link", "add", "bare0", "type", "veth", "peer", "name", "bare1")
    sh("ip", "link", "set", "bare0", "up")
    sh("ip", "addr", "add", "198.18.7.1/24", "dev", "dn0")
    try:
        for args, what in ((["--uplink", "nope0"], "uplink 'nope0': no such interface"),
                           (["--uplink", "dn0"], "uplink 'dn0' is down"),
                           (["--uplink", "bare0"], "uplink 'bare0' has no IPv4 address"),
                           (["--uplink", "up0", "--sandbox-subnet", "192.0.2.0/24"],
                            "the sandbox subnet 192.0.2.0/24 overlaps uplink 'up0''s network "
                            "192.0.2.0/30")):
            srv = dbx.Server(args=args + ["--dns-server", DNS])
            try:
                r = srv.request("POST", "/v1/sandboxes", {"network": "internet",
                                                         "display": {"width": 320,
                                                                     "height": 200}})
                msg = r.json().get("error", {}).get("message", "") if r.status >= 400 else ""
                t.ok(r.status == 503 and what in msg, "%s: the create fails saying %r" % (
                    " ".join(args), what), r.body[:400])
                left = tn.inventory(srv.state_dir)
                t.ok(not [l for l in left["links"] if l.startswith("dbx")] and
                     "deskbox" not in left["nft"] and not left["dnsmasq"],
                     "and leaves no link, table or resolver", left)
            finally:
                srv.cleanup()
    finally:
        sh("ip", "link", "del", "dn0", check=False)
        sh("ip", "link", "del", "bare0", check=False)


def inner():
    t = dbx.Tap()
    t.ok(tn.reachable_here(WEB) and tn.reachable_here(GATEWAY),
         "the host namespace itself reaches the web and the gateway")
    srv = dbx.Server(args=["--uplink", "up0", "--dns-server", DNS])
    try:
        small = {"width": 320, "height": 200}
        inet = srv.create({"network": "internet", "display": small})
        allow = srv.create({"network": {"allow": ["site-a.test"]}, "display": small})
        out = tn.fetch(srv, inet["id"], "site-a.test")
        t.ok(out.startswith("OK hello from " + WEB), "internet: the page by name", out)
        out = tn.fetch(srv, inet["id"], WEB)
        t.ok(out.startswith("OK hello from " + WEB), "internet: the page by address", out)
        out = tn.fetch(srv, allow["id"], "site-a.test")
        t.ok(out.startswith("OK hello from " + WEB), "allow: the listed name resolves and "
             "answers", out)
        out = tn.fetch(srv, allow["id"], "site-b.test")
        t.ok(out.startswith("DNSERR"), "allow: another name is NXDOMAIN", out)
        out = tn.fetch(srv, allow["id"], OTHER)
        t.ok(out.startswith("ERR"), "allow: another address is dropped", out)
        # The uplink's own subnet is the host's side, not the internet.
        for name, sb in (("internet", inet), ("allow", allow)):
            reached = [a for a in (HOST_UP, GATEWAY)
                       if tn.fetch(srv, sb["id"], a, 80, timeout=2).startswith("OK")]
            reached += ["%s:%d" % (HOST_UP, srv.port)] if tn.fetch(
                srv, sb["id"], HOST_UP, srv.port, timeout=2).startswith("OK") else []
            t.ok(not reached, "%s: the uplink's address and its gateway are unreachable" % name,
                 reached)
        named = srv.create({"network": {"allow": [GATEWAY + ":80"]}, "display": small})
        out = tn.fetch(srv, named["id"], GATEWAY)
        t.ok(out.startswith("OK hello from " + GATEWAY), "an allow entry naming the gateway "
             "reaches it", out)
        cdp = srv.create({"network": "internet", "display": {"width": 1024, "height": 768}})
        tn.cdp_visit(t, srv, cdp["id"])
    finally:
        srv.cleanup()
    wrong_uplinks(t)
    with open(os.environ["DBX_NETTEST_LEAKS"]) as f:
        seen = f.read().splitlines()
    t.ok(not seen, "the machine's own interfaces carried no packet of the test's world", seen[:5])
    t.done()


if __name__ == "__main__":
    if os.environ.get("DBX_NETTEST_INNER"):
        inner()
    else:
        sys.exit(outer())
