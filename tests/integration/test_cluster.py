"""Cluster mode (docs/cluster.md) on one machine: a three-member etcd, each
member in a network namespace of its own, and three deskboxd nodes, each
in its own namespace with its own state dir, uid range and sandbox subnet,
all on a bridge in a hub namespace this test makes (10.250.0.0/24; no route
anywhere else, so no packet leaves the machine). This test's client code
runs in one more namespace on that bridge.

Cases: the nodes see each other with their capacity; 11 creates through
node 1 spread over the three, the first to the node with a warm desktop;
screenshot, type and exec into every sandbox through node 3; a viewer
WebSocket (RFB through two nodes) through node 2; an upload and download,
an events stream, a port URL and a terminal's WebSocket through nodes that
do not hold the sandbox; the forwarding hop's latency; two concurrent
creates for the last (12th) slot
(exactly one wins); drain; kill -9 of a node (its sandboxes lost within
the lease, creates go elsewhere, a restart registers them again); one etcd
member killed (all works), two (creates 503 cluster_unavailable, existing
sandboxes still answer, through other nodes too).

Bounded for two cores: 4 slots per node, 12 sandboxes at most, 320x200."""

import base64
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
import test_vnc as tv  # noqa: E402

NET = "10.250.0."
ETCD = {"e1": NET + "11", "e2": NET + "12", "e3": NET + "13"}
NODES = {"n1": NET + "21", "n2": NET + "22", "n3": NET + "23"}
CLIENT = NET + "99"
TTL = 3
SLOTS = 4
N = 3 * SLOTS - 1  # created through node 1; the last slot is raced for
SECRET = "cluster-secret-" + "s" * 24
SMALL = {"display": {"width": 320, "height": 200}}


def sh(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def names(tag):
    return {k: "dbxc-%s-%s" % (k, tag) for k in ["hub", "cl"] + list(ETCD) + list(NODES)}


def build_world(ns):
    """The hub's bridge and one veth into it per namespace."""
    for n in ns.values():
        sh("ip", "netns", "add", n)
        sh("ip", "-n", n, "link", "set", "lo", "up")
    hub = ns["hub"]
    sh("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", hub, "link", "set", "br0", "up")
    addrs = dict(ETCD, **NODES, cl=CLIENT)
    for i, (k, addr) in enumerate(sorted(addrs.items())):
        sh("ip", "-n", hub, "link", "add", "p%d" % i, "type", "veth", "peer", "name", "eth0",
           "netns", ns[k])
        sh("ip", "-n", hub, "link", "set", "p%d" % i, "master", "br0", "up")
        sh("ip", "-n", ns[k], "addr", "add", addr + "/24", "dev", "eth0")
        sh("ip", "-n", ns[k], "link", "set", "eth0", "up")


def teardown(ns):
    for n in ns.values():
        for pid in sh("ip", "netns", "pids", n, check=False).stdout.split():
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
    for n in ns.values():
        sh("ip", "netns", "del", n, check=False)


def outer():
    dbx.require_root_and_tools()
    for tool in ("ip", "nsenter", "etcd"):
        if not shutil.which(tool):
            dbx.skip_all("%s is not installed (run scripts/install-deps.sh --test)" % tool)
    ns = names(uuid.uuid4().hex[:6])
    try:
        try:
            build_world(ns)
        except subprocess.CalledProcessError as e:
            dbx.skip_all("cannot make the test's network namespaces: %s %s" % (
                " ".join(e.cmd), (e.stderr or "").strip()))
        env = dict(os.environ, DBX_CLUSTER_NS=json.dumps(ns))
        r = subprocess.run(["nsenter", "--net=/run/netns/" + ns["cl"], "--",
                            sys.executable, os.path.abspath(__file__)], env=env)
        return r.returncode
    finally:
        teardown(ns)


# ---- the inner part, in the client's namespace ----

class Etcd:
    def __init__(self, ns, name, work):
        self.ns, self.name, self.work = ns, name, work
        self.proc = None

    def start(self):
        ip = ETCD[self.name]
        cluster = ",".join("%s=http://%s:2380" % (k, v) for k, v in sorted(ETCD.items()))
        self.log = open(os.path.join(self.work, self.name + ".log"), "ab")
        self.proc = subprocess.Popen(
            ["nsenter", "--net=/run/netns/" + self.ns[self.name], "--", "etcd",
             "--name", self.name, "--data-dir", os.path.join(self.work, self.name),
             "--listen-client-urls", "http://%s:2379" % ip,
             "--advertise-client-urls", "http://%s:2379" % ip,
             "--listen-peer-urls", "http://%s:2380" % ip,
             "--initial-advertise-peer-urls", "http://%s:2380" % ip,
             "--initial-cluster", cluster, "--initial-cluster-state", "new",
             "--heartbeat-interval", "100", "--election-timeout", "1000"],
            stdout=self.log, stderr=self.log)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def etcd_healthy(ip):
    import http.client
    try:
        c = http.client.HTTPConnection(ip, 2379, timeout=2)
        c.request("POST", "/v3/kv/put", body=json.dumps(
            {"key": base64.b64encode(b"/probe").decode(), "value": ""}))
        ok = c.getresponse().status == 200
        c.close()
        return ok
    except OSError:
        return False


class Node(dbx.Server):
    """A deskboxd in namespace `ns`, listening on its address there."""

    def __init__(self, ns, name, secret_file, state_dir=None):
        self.name, self.host = name, NODES[name]
        i = int(name[1:])
        args = ["--listen", "%s:8080" % self.host,
                "--cluster", "etcd://" + ",".join("%s:2379" % a for a in ETCD.values()),
                "--node-name", name, "--advertise", "http://%s:8080" % self.host,
                "--cluster-secret-file", secret_file, "--cluster-ttl", str(TTL),
                "--max-sandboxes", str(SLOTS), "--userns-base", str((1 << 20) * (2 * i)),
                "--sandbox-subnet", "10.%d.0.0/16" % (240 + i)]
        if name == "n2":  # one ready desktop of the tests' size: placement prefers it
            args += ["--warm-pool", "1:320x200"]
        super().__init__(state_dir=state_dir, args=args,
                         wrap=["nsenter", "--net=/run/netns/" + ns[name], "--"])

    def request(self, method, path, body=None, token="default", headers=None, timeout=120):
        import http.client
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        h = dict(headers or {})
        tok = self.token if token == "default" else token
        if tok is not None:
            h["Authorization"] = "Bearer " + tok
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return dbx.Response(r.status, r.getheaders(), data)


class NodeWS(tv.WS):
    """test_vnc's WebSocket client, to a node's address."""

    def __init__(self, host, port, path, origin=None, protocols="binary", headers=None):
        real = socket.create_connection
        try:
            socket.create_connection = lambda addr, timeout=None: real((host, port), timeout)
            super().__init__(port, path, origin=origin, host="%s:%d" % (host, port),
                             protocols=protocols, headers=headers)
        finally:
            socket.create_connection = real


def by_node(nodes, t):
    """{node name: [sandbox ids]} from a cluster-wide list."""
    r = nodes["n1"].request("GET", "/v1/sandboxes")
    out = {}
    for sb in r.json()["sandboxes"]:
        out.setdefault(sb.get("node"), []).append(sb["id"])
    return out


def p50_ms(fn, n=25):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def check_nodes(t, nodes):
    r = nodes["n2"].request("GET", "/v1/nodes")
    t.eq(r.status, 200, "GET /v1/nodes")
    listed = {n["name"]: n for n in r.json().get("nodes", [])}
    t.eq(sorted(listed), ["n1", "n2", "n3"], "every node sees the three")
    cap = listed.get("n3", {}).get("capacity") or {}
    t.ok(all(listed[n]["health"] == "ok" for n in listed) and listed["n2"]["self"],
         "all healthy, the answering one is self", r.body[:300])
    t.ok(cap.get("max_sandboxes") == SLOTS and "free_memory_mb" in cap and
         "container" in cap.get("isolation", []) and "default" in cap.get("images", []) and
         "warm_pool" in cap and "templates" in cap, "capacity published", json.dumps(cap))


def warm_ready(nodes):
    listed = {n["name"]: n for n in nodes["n1"].request("GET", "/v1/nodes").json()["nodes"]}
    cap = listed["n2"].get("capacity") or {}
    return cap.get("warm_pool", {}).get("ready", 0) >= 1


def spread(t, nodes):
    t.ok(dbx.wait_until(lambda: warm_ready(nodes), timeout=60),
         "node 2 publishes its ready warm desktop")
    made = []
    bad = []
    for i in range(N):
        r = nodes["n1"].request("POST", "/v1/sandboxes", dict(SMALL, name="sb%d" % i))
        if r.status == 201:
            made.append(r.json())
        else:
            bad.append("%d: %d %s" % (i, r.status, r.body[:200]))
    t.ok(not bad, "%d creates through node 1" % N, "\n".join(bad))
    t.eq(made[0].get("node") if made else None, "n2",
         "the first goes to the node with a warm desktop of its size")
    where = {}
    for sb in made:
        where.setdefault(sb.get("node"), []).append(sb["id"])
    t.ok(sorted(where) == ["n1", "n2", "n3"] and max(len(v) for v in where.values()) <= SLOTS,
         "the %d creates spread over the 3 nodes: %s" % (
             N, {k: len(v) for k, v in where.items()}))
    listed = by_node(nodes, t)
    t.eq({k: sorted(v) for k, v in listed.items()}, {k: sorted(v) for k, v in where.items()},
         "node 1's list shows every node's sandboxes with their node")
    r = nodes["n2"].request("POST", "/v1/sandboxes", dict(SMALL, name="sb0"))
    t.eq(r.status, 409, "a name taken on another node is taken cluster-wide")
    return made, where


def drive_through(t, nodes, made):
    n3 = nodes["n3"]
    shots = typed = execs = 0
    for sb in made:
        sid = sb["id"]
        r = n3.request("GET", "/v1/sandboxes/%s/desktop/screenshot" % sid)
        shots += r.status == 200 and r.body[:8] == b"\x89PNG\r\n\x1a\n" and \
            dbx.png_info(r.body)[:2] == (320, 200)
        r = n3.request("POST", "/v1/sandboxes/%s/desktop/type_text" % sid, {"text": "hé 你"})
        typed += r.status == 200
        r = n3.request("POST", "/v1/sandboxes/%s/process/exec" % sid,
                       {"argv": ["sh", "-c", "echo $((6*7)) $(hostname)"]})
        execs += r.status == 200 and r.json().get("stdout", "").startswith("42 ")
    t.eq(shots, len(made), "screenshots of every sandbox through node 3 (320x200 PNG)")
    t.eq(typed, len(made), "type_text into every sandbox through node 3")
    t.eq(execs, len(made), "exec in every sandbox through node 3")
    r = n3.request("GET", "/v1/sandboxes/%s" % made[0]["name"])
    t.ok(r.status == 200 and r.json().get("id") == made[0]["id"],
         "a sandbox by name through another node")
    r = n3.request("GET", "/v1/sandboxes/%s/desktop/screenshot" % made[0]["id"],
                   headers={"X-Deskbox-Cluster-Secret": "wrong" * 5})
    t.eq(r.status, 401, "a wrong cluster secret is refused")
    r = n3.request("GET", "/v1/sandboxes/%s/desktop/screenshot" % made[0]["id"], token=None)
    t.eq(r.status, 401, "no API token: refused at the first node")


def viewer_through_n2(t, nodes, where):
    sid = (where.get("n3") or where.get("n1"))[0]
    n2 = nodes["n2"]
    r = n2.request("POST", "/v1/sandboxes/%s/vnc/tokens" % sid, {"view_only": True})
    t.eq(r.status, 201, "viewer token through node 2")
    tok = r.json().get("token", "")
    ws = NodeWS(n2.host, n2.port, "/v1/sandboxes/%s/vnc/websockify?token=%s" % (sid, tok),
                origin="http://%s:%d" % (n2.host, n2.port))
    t.eq(ws.status, 101, "viewer WebSocket upgrade through node 2")
    try:
        w, h = tv.rfb_handshake(ws)
        t.eq((w, h), (320, 200), "RFB handshake through two nodes: ServerInit 320x200")
    except (AssertionError, EOFError, OSError) as e:
        t.ok(False, "RFB handshake through two nodes", repr(e))
    ws.close()


class Events:
    """An events stream (Server-Sent Events) of a sandbox through a node."""

    def __init__(self, node, sid):
        import http.client
        import queue
        self.conn = http.client.HTTPConnection(node.host, node.port, timeout=60)
        self.conn.request("GET", "/v1/sandboxes/%s/desktop/events" % sid,
                          headers={"Authorization": "Bearer " + node.token})
        self.resp = self.conn.getresponse()
        self.events = queue.Queue()
        if self.resp.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        name = None
        try:
            for raw in self.resp:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: ") and name:
                    self.events.put((name, json.loads(line[6:])))
                    name = None
        except (OSError, ValueError, AttributeError):
            pass

    def wait(self, pred, timeout=20):
        import queue
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ev = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if pred(ev):
                return True
        return False

    def close(self):
        self.conn.close()


def terminal_through_n3(t, nodes, where):
    """A terminal made through node 2 on a sandbox of node 1, its
    WebSocket through node 3: keys in, the shell's output back."""
    sid = where["n1"][0]
    r = nodes["n2"].request("POST", "/v1/sandboxes/%s/terminals" % sid, {"cols": 80, "rows": 24})
    t.eq(r.status, 201, "a terminal through node 2")
    tid = r.json().get("id")
    n3 = nodes["n3"]
    ws = NodeWS(n3.host, n3.port, "/v1/sandboxes/%s/terminals/%s/ws" % (sid, tid),
                protocols=None, headers={"Authorization": "Bearer " + n3.token})
    t.eq(ws.status, 101, "its WebSocket through node 3")
    ws.send_frame(b"echo term-$((6*7))-ok\r")
    out, deadline = b"", time.monotonic() + 20
    ws.sock.settimeout(1)
    while b"term-42-ok" not in out and time.monotonic() < deadline:
        try:
            op, p = ws.frame()
        except (OSError, EOFError):
            continue
        if op == 2:
            out += p
    t.ok(b"term-42-ok" in out, "the shell's output comes back through two nodes", out[-200:])
    ws.close()
    nodes["n1"].request("DELETE", "/v1/sandboxes/%s/terminals/%s" % (sid, tid))


def streams(t, nodes, where):
    """Bodies both ways, an event stream and a port URL, each through a
    node that does not hold the sandbox."""
    import hashlib
    sid = where["n1"][0]
    data = os.urandom(6 << 20)
    r = nodes["n3"].request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/big.bin" % sid,
                            data)
    t.eq(r.status, 201, "a 6 MiB upload through node 3 streams to node 1")
    r = nodes["n2"].request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/big.bin" % sid)
    t.ok(r.status == 200 and hashlib.sha256(r.body).digest() == hashlib.sha256(data).digest(),
         "its download through node 2 is the same bytes")
    ev = Events(nodes["n2"], sid)
    t.eq(ev.resp.status, 200, "events stream through node 2")
    t.ok(ev.wait(lambda e: e[0] == "ready"), "the stream's first event arrives")
    nodes["n3"].request("POST", "/v1/sandboxes/%s/desktop/type_text" % sid, {"text": "ev"})
    t.ok(ev.wait(lambda e: e[0] == "action" and e[1].get("action") == "type_text"),
         "an action through node 3 shows on the stream through node 2")
    ev.close()
    other = where["n3"][0]
    base = "/v1/sandboxes/%s" % other
    nodes["n1"].exec(other, ["mkdir", "-p", "/workspace/www"])
    r = nodes["n1"].request("PUT", base + "/files/upload?path=/workspace/www/hi.txt",
                            b"hi from node 3\n")
    t.eq(r.status, 201, "a file for a service in a sandbox of node 3")
    nodes["n1"].exec(other, ["python3", "-m", "http.server", "-b", "127.0.0.1", "8000"],
                     cwd="/workspace/www", background=True)
    ok = dbx.wait_until(lambda: nodes["n2"].request(
        "GET", base + "/ports/8000/hi.txt").body == b"hi from node 3\n", timeout=30)
    t.ok(ok, "its port URL through node 2")


def hop_latency(t, nodes, where):
    sid = where["n1"][0]
    direct = p50_ms(lambda: nodes["n1"].screenshot(sid))
    hop = p50_ms(lambda: nodes["n2"].screenshot(sid))
    t.ok(hop < direct + 50, "screenshot p50 direct %.2f ms, through another node %.2f ms "
         "(+%.2f ms)" % (direct, hop, hop - direct))
    return direct, hop


def last_slot(t, nodes):
    """All slots but one are taken: two creates at once through two nodes."""
    results = {}

    def go(k):
        results[k] = nodes[k].request("POST", "/v1/sandboxes", dict(SMALL))

    ths = [threading.Thread(target=go, args=(k,)) for k in ("n1", "n2")]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    codes = sorted(r.status for r in results.values())
    t.eq(codes, [201, 429], "two creates for the last slot: exactly one wins, one 429")
    loser = [r for r in results.values() if r.status == 429]
    t.ok(loser and loser[0].json()["error"]["code"] == "limit_exceeded",
         "the loser is limit_exceeded", loser[0].body[:200] if loser else "")
    won = [r.json() for r in results.values() if r.status == 201]
    return won[0] if won else None


def drain(t, nodes):
    r = nodes["n1"].request("POST", "/v1/nodes/n2/drain", {"migrate": True})
    j = r.json() if r.status == 200 else {}
    t.ok(r.status == 200 and j.get("moved") == [] and j.get("left") and
         all(x["reason"].startswith("running") for x in j["left"]),
         "drain with migrate: running sandboxes are left, with the reason "
         "(test_cluster_migrate.py moves stopped ones)", r.body[:400])
    r = nodes["n1"].request("POST", "/v1/nodes/n2/drain", {"bogus": 1})
    t.eq(r.status, 400, "drain with an unknown member: 400")
    r = nodes["n1"].request("POST", "/v1/nodes/nx/drain", {})
    t.eq(r.status, 404, "drain of an unknown node: 404")
    r = nodes["n3"].request("POST", "/v1/nodes/n2/drain", {})
    t.ok(r.status == 200 and r.json().get("draining"), "drain node 2")
    listed = {n["name"]: n for n in nodes["n1"].request("GET", "/v1/nodes").json()["nodes"]}
    t.ok(listed["n2"]["draining"] and not listed["n1"]["draining"], "node 1 sees it drained")
    r = nodes["n1"].request("POST", "/v1/sandboxes", dict(SMALL, node="n2"))
    t.eq(r.status, 409, "a create pinned to a drained node: 409")


def kill_node(t, nodes, ns, where, secret_file):
    """kill -9 of node 3: lost within the lease; creates elsewhere; restart."""
    victim = nodes["n3"]
    sid = where["n3"][0]
    t0 = time.monotonic()
    victim.kill()
    lost = dbx.wait_until(lambda: nodes["n1"].request(
        "GET", "/v1/sandboxes/" + sid).json().get("state") == "lost", timeout=TTL * 3)
    t_lost = time.monotonic() - t0
    # The lease ends at most TTL after the last keepalive (before the
    # kill); etcd checks leases every 0.5 s and the nodes re-read their
    # view every TTL/3 s.
    t.ok(lost and t_lost <= TTL + 2, "node 3's sandbox is lost %.2f s after kill -9 "
         "(lease %d s)" % (t_lost, TTL))
    listed = {n["name"]: n for n in nodes["n2"].request("GET", "/v1/nodes").json()["nodes"]}
    t.eq(listed["n3"]["health"], "lost", "GET /v1/nodes: node 3 lost")
    r = nodes["n2"].request("GET", "/v1/sandboxes/%s/desktop/screenshot" % sid)
    t.ok(r.status == 503 and "lost" in r.json()["error"]["message"],
         "its screenshot: 503 saying its node is lost")
    lst = nodes["n1"].request("GET", "/v1/sandboxes").json()["sandboxes"]
    t.ok(any(s["id"] == sid and s.get("state") == "lost" for s in lst),
         "the list shows it lost")
    # Room on node 1, none on the lost node: the create goes to node 1.
    gone = where["n1"][-1]
    t.eq(nodes["n2"].request("DELETE", "/v1/sandboxes/" + gone).status, 204,
         "delete a sandbox of node 1 through node 2")
    where["n1"].remove(gone)
    r = nodes["n2"].request("POST", "/v1/sandboxes", dict(SMALL))
    t.ok(r.status == 201 and r.json().get("node") == "n1",
         "a create while node 3 is lost goes to a live node: %s" % r.json().get("node"))
    if r.status == 201:
        where["n1"].append(r.json()["id"])
    t0 = time.monotonic()
    nodes["n3"] = Node(ns, "n3", secret_file, state_dir=victim.state_dir)
    back = dbx.wait_until(lambda: nodes["n1"].request(
        "GET", "/v1/sandboxes/" + sid).json().get("id") == sid and nodes["n1"].request(
        "GET", "/v1/sandboxes/" + sid).json().get("state") != "lost", timeout=30)
    t_back = time.monotonic() - t0
    t.ok(back, "node 3 restarted: its sandbox answers through node 1 again after %.2f s "
         "(deskboxd start included)" % t_back)
    r = nodes["n1"].request("POST", "/v1/sandboxes/%s/start" % sid)
    st = nodes["n1"].request("GET", "/v1/sandboxes/" + sid).json().get("status")
    t.ok(r.status in (200, 409) and st == "running",
         "started again through node 1 after the crash (status %s)" % st, r.body[:200])
    return t_lost, t_back


def etcd_failures(t, nodes, etcds, where):
    t0 = time.monotonic()
    etcds["e3"].kill()
    t.ok(dbx.wait_until(lambda: etcd_healthy(ETCD["e1"]), timeout=15),
         "one etcd member killed: the two left have a leader (%.2f s)" % (time.monotonic() - t0))
    # Every slot is taken: one goes, through a node that does not hold it.
    gone = where["n3"].pop()
    t.eq(nodes["n1"].request("DELETE", "/v1/sandboxes/" + gone).status, 204,
         "one etcd member killed: a delete works")
    r = nodes["n1"].request("POST", "/v1/sandboxes", dict(SMALL, node="n3"), timeout=60)
    t.eq(r.status, 201, "and a create pinned to the freed slot's node")
    if r.status == 201:
        d = nodes["n2"].request("DELETE", "/v1/sandboxes/" + r.json()["id"])
        t.eq(d.status, 204, "and its delete through another node")
        if d.status != 204:
            t.diag(d.body.decode(errors="replace"))
    t.eq(nodes["n3"].request("GET", "/v1/nodes").status, 200, "GET /v1/nodes still answers")
    etcds["e2"].kill()
    t0 = time.monotonic()
    r = nodes["n2"].request("POST", "/v1/sandboxes", dict(SMALL), timeout=60)
    took = time.monotonic() - t0
    code = r.json().get("error", {}).get("code") if r.status >= 400 else None
    t.ok(r.status == 503 and code == "cluster_unavailable",
         "two members killed: a create is 503 cluster_unavailable after %.2f s" % took,
         r.body[:300])
    sid = where["n1"][0]
    t.eq(nodes["n1"].request("GET", "/v1/sandboxes/%s/desktop/screenshot" % sid).status, 200,
         "no quorum: a node still serves its own sandboxes")
    t.eq(nodes["n2"].request("GET", "/v1/sandboxes/%s/desktop/screenshot" % sid).status, 200,
         "no quorum: and another node still forwards to it")
    r = nodes["n3"].request("POST", "/v1/sandboxes/%s/process/exec" % sid,
                            {"argv": ["echo", "ok"]})
    t.ok(r.status == 200 and r.json().get("stdout") == "ok\n", "exec through node 3 too")
    return took


def world_begin():
    """The inner run's start: a work dir with the cluster secret, the
    three etcd members (not started yet) and no nodes."""
    ns = json.loads(os.environ["DBX_CLUSTER_NS"])
    work = tempfile.mkdtemp(prefix="dbxc-")
    secret_file = os.path.join(work, "secret")
    with open(secret_file, "w") as f:
        f.write(SECRET + "\n")
    return ns, work, secret_file, {k: Etcd(ns, k, work) for k in ETCD}


def world_end(t, nodes, etcds, work):
    """SIGTERM with --on-exit stop: each node stops its sandboxes (a killed
    node's were stopped by its restart); then etcd goes, and every state
    dir with it."""
    codes = {k: n.stop(timeout=90) for k, n in nodes.items()}
    t.eq(codes, {k: 0 for k in nodes}, "every node exits cleanly on SIGTERM")
    for e in etcds.values():
        e.kill()
    if t.failed:
        for n in nodes.values():
            t.diag("%s: %s" % (n.name, n.stderr()[-2000:]))
    for n in nodes.values():
        shutil.rmtree(n.state_dir, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)


def inner():
    t = dbx.Tap()
    ns, work, secret_file, etcds = world_begin()
    nodes = {}
    try:
        for e in etcds.values():
            e.start()
        t.ok(dbx.wait_until(lambda: all(etcd_healthy(ip) for ip in ETCD.values()), timeout=30),
             "the three etcd members, each in its namespace, have a leader")
        for k in NODES:
            nodes[k] = Node(ns, k, secret_file)
        check_nodes(t, nodes)
        made, where = spread(t, nodes)
        drive_through(t, nodes, made)
        viewer_through_n2(t, nodes, where)
        streams(t, nodes, where)
        terminal_through_n3(t, nodes, where)
        direct, hop = hop_latency(t, nodes, where)
        extra = last_slot(t, nodes)
        if extra:
            where.setdefault(extra["node"], []).append(extra["id"])
        drain(t, nodes)
        t_lost, t_back = kill_node(t, nodes, ns, where, secret_file)
        took = etcd_failures(t, nodes, etcds, where)
        t.diag("measured: lost after %.2f s (lease %d s), back %.2f s after restart, "
               "create refused %.2f s after quorum loss, screenshot p50 direct %.2f ms, "
               "forwarded %.2f ms" % (t_lost, TTL, t_back, took, direct, hop))
    finally:
        world_end(t, nodes, etcds, work)
    t.done()


if __name__ == "__main__":
    if os.environ.get("DBX_CLUSTER_NS"):
        inner()
    else:
        sys.exit(outer())
