"""A denied domain is unreachable through each compat front-end's own
network API (docs/compat.md), in a world of network namespaces this test
makes (tests/lib/networld.py), so that no packet leaves the machine:
deskboxd runs in the "host" namespace (--uplink up0 --dns-server), the
"internet" namespace behind it serves allowed.test and denied.test over
HTTP and answers their names by DNS.

With the official SDKs, unchanged (tests/compat-<engine>/network.test.mjs):
Daytona's domainAllowList and networkBlockAll, Sprites' network policy
(updateNetworkPolicy on a running sprite, then no rules), OpenSandbox's
networkPolicy egress allow rule under defaultAction deny (and none); each
fetch from inside the sandbox runs through that SDK's own exec.  E2B has
no domain policy, only allowInternetAccess: its create over E2B's wire
with false reaches nothing, with true the test's internet.  Last, no
packet of the world showed on the machine's own interfaces."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import compat_node  # noqa: E402
import dbx  # noqa: E402
import networld  # noqa: E402

HOST_UP, GATEWAY = "100.127.0.6", "100.127.0.5"
ALLOWED_ADDR, DENIED_ADDR = "203.0.113.31", "203.0.113.32"
DNS = "198.51.100.54"
NAMES = {"allowed.test": ALLOWED_ADDR, "denied.test": DENIED_ADDR}
NETS = [("10.231.0.0", 16), ("100.127.0.4", 30)] + [
    (a, 32) for a in (ALLOWED_ADDR, DENIED_ADDR, DNS)]


def names(tag):
    return "dbxt-chost-" + tag, "dbxt-cinet-" + tag


def build(tag):
    host, inet = names(tag)
    networld.build_world(host, inet, HOST_UP, GATEWAY, [ALLOWED_ADDR, DENIED_ADDR, DNS])


def start(inet):
    return networld.start_internet(inet, [ALLOWED_ADDR + ":80", DENIED_ADDR + ":80"], DNS, NAMES)


def fetch(srv, sid, host):
    r = srv.exec(sid, ["python3", "-c", networld.FETCH, host, "80", "3"], timeout_s=60)
    return (r.get("stdout") or "").strip()


def e2b(t, srv):
    """E2B's create over its own wire (X-API-KEY), then a fetch from inside."""
    key = {"X-API-KEY": srv.token}
    for allow in (False, True):
        r = srv.request("POST", "/e2b/v2/sandboxes",
                        {"templateID": "base", "allow_internet_access": allow},
                        token=None, headers=key)
        sid = (r.json() or {}).get("sandboxID") if r.status == 201 else None
        t.ok(sid, "e2b: create with allowInternetAccess %s" % allow, (r.status, r.body[:300]))
        if not sid:
            continue
        out = fetch(srv, sid, "allowed.test")
        if allow:
            t.ok(out.startswith("OK hello from " + ALLOWED_ADDR),
                 "e2b: allowInternetAccess true reaches the test's internet", out)
        else:
            t.ok(not out.startswith("OK"), "e2b: allowInternetAccess false reaches nothing", out)
            out = fetch(srv, sid, ALLOWED_ADDR)
            t.ok(not out.startswith("OK"), "e2b: allowInternetAccess false: not by address either",
                 out)
        srv.request("DELETE", "/e2b/sandboxes/" + sid, token=None, headers=key)


def inner():
    t = dbx.Tap()
    srv = dbx.Server(args=["--uplink", "up0", "--dns-server", DNS])
    try:
        base = "http://127.0.0.1:%d" % srv.port
        env = dict(DESKBOX_URL=base, DESKBOX_TOKEN=srv.token, ALLOWED="allowed.test",
                   DENIED="denied.test", DENIED_ADDR=DENIED_ADDR, FETCH=networld.FETCH)
        compat_node.run_script(t, "daytona", "@daytonaio/sdk", "network.test.mjs", dict(
            env, DAYTONA_API_URL=base + "/daytona/api", DAYTONA_API_KEY=srv.token,
            DAYTONA_OTEL_ENABLED="false"), unset=["DAYTONA_USE_DEPRECATED_POLLING"])
        compat_node.run_script(t, "sprites", "@fly/sprites", "network.test.mjs", dict(
            env, SPRITES_BASE_URL=base + "/sprites"), websocket=True)
        compat_node.run_script(t, "opensandbox", "@alibaba-group/opensandbox", "network.test.mjs",
                               dict(env, OSB_DOMAIN="127.0.0.1:%d/opensandbox" % srv.port))
        e2b(t, srv)
        if t.failed:
            for line in srv.stderr().splitlines()[-30:]:
                t.diag("deskboxd: " + line)
    finally:
        srv.cleanup()
    seen = networld.leaked()
    t.ok(not seen, "the machine's own interfaces carried no packet of the test's world", seen[:5])
    t.done()


if __name__ == "__main__":
    if os.environ.get("DBX_NETTEST_INNER"):
        inner()
    else:
        sys.exit(networld.run_outer(__file__, names, build, start, NETS))
