"""Secrets at egress (docs/secrets.md), in a world of network namespaces
this test makes (test_network.py's: deskboxd in "host", whose only route
leads to "internet"), so that no packet leaves the machine.

The internet holds HTTPS servers with certificates of the test's own CA
(deskboxd trusts it through --egress-ca-file; the sandbox does not), each
recording the requests it receives:
  api.secret.test  the secret's host           203.0.113.10:443
  other.test       any other host              203.0.113.20:443 and :80
  bad.secret.test  a secret's host whose certificate no CA signed
                                               198.51.100.7:443
Cases: the store never shows a value and refuses bad bodies; a sandbox
sees only the placeholder (environment, /proc, its files), never the
value nor its CA's key; python's and curl's HTTPS to the secret's host
carry the real value (headers and the request target; the body only when
the secret asks), trusting the sandbox's CA; the same placeholder sent to
another host over HTTPS (not intercepted) or plain HTTP arrives as it is
and is logged; a host whose certificate fails verification gets nothing
(502); an allow-list sandbox reaches its allowed host with the secret and
nothing else; a deleted secret is no longer put in; a restart keeps the
secrets and the placeholders; with --egress-proxy every TCP connection
(any port) goes through the user's CONNECT proxy in the test's internet,
secrets still put in."""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
import test_network as world  # noqa: E402

API, OTHER, BAD = world.SITE_A, world.SITE_B, world.PORTED
PROXY = "198.51.100.8"  # the user's own HTTP proxy, in the test's internet
VALUE = "sk-live-" + "7f3a9c" * 6
BODY_VALUE = "body-secret-" + "42" * 10

HTTPS_SERVER = r"""
import http.server, json, socketserver, ssl, sys, threading
log = open(sys.argv[1], "a")
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode(errors="replace") if n else ""
        rec = {"server": "%s:%d" % self.server.server_address, "path": self.path,
               "headers": dict(self.headers), "body": body}
        with lock:
            log.write(json.dumps(rec) + "\n"); log.flush()
        out = b"seen"
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = handle_one
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
for spec in sys.argv[2:]:
    addr, port, cert, key = spec.split(",")
    s = S((addr, int(port)), H)
    if cert != "-":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

# The user's upstream proxy: HTTP CONNECT only, each target noted.
CONNECT_PROXY = r"""
import socket, sys, threading
log = open(sys.argv[1], "a")
def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(1)
        if not d:
            return c.close()
        head += d
    line = head.split(b"\r\n")[0].decode()
    method, target = line.split()[:2]
    log.write(target + "\n"); log.flush()
    host, port = target.rsplit(":", 1)
    u = socket.create_connection((host, int(port)), timeout=10)
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    pipe(u, c)
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[2], 3128))
srv.listen(64)
print("ready", flush=True)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

# In the sandbox: one request; prints the status and body, or the error.
REQUEST = r"""
import os, ssl, sys, urllib.request
url, header, body, verify = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
key = os.environ.get("API_KEY", "")
req = urllib.request.Request(url.replace("KEY", key), headers={header: "Bearer " + key},
                             data=body.replace("KEY", key).encode() if body else None)
ctx = None if verify else ssl._create_unverified_context()
try:
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode()[:200])
except Exception as e:
    print("ERR", type(e).__name__, str(e)[:200])
"""


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_certs(d):
    """The test CA, certificates for the two good hosts signed by it, and
    a self-signed one for bad.secret.test."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=dbx test CA",
            cwd=d)
    for name in ("api.secret.test", "other.test"):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name, cwd=d)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write("subjectAltName=DNS:%s\n" % name)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile",
                name + ".ext", cwd=d)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "bad.key", "-out", "bad.pem", "-days", "2", "-subj",
            "/CN=bad.secret.test", "-addext", "subjectAltName=DNS:bad.secret.test", cwd=d)


def start_internet(inet, d, log):
    nse = ["nsenter", "--net=/run/netns/" + inet, "--"]
    j = lambda n: os.path.join(d, n)  # noqa: E731
    specs = ["%s,443,%s,%s" % (API, j("api.secret.test.pem"), j("api.secret.test.key")),
             "%s,443,%s,%s" % (OTHER, j("other.test.pem"), j("other.test.key")),
             "%s,80,-,-" % OTHER,
             "%s,443,%s,%s" % (BAD, j("bad.pem"), j("bad.key"))]
    https = subprocess.Popen(nse + [sys.executable, "-c", HTTPS_SERVER, log] + specs,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    https.stdout.readline()
    world.sh("ip", "-n", inet, "addr", "add", PROXY + "/32", "dev", "lo")
    proxy = subprocess.Popen(nse + [sys.executable, "-c", CONNECT_PROXY,
                                    os.path.join(d, "proxy.log"), PROXY],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proxy.stdout.readline()
    dns = subprocess.Popen(nse + [
        "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
        "--bind-interfaces", "--listen-address=" + world.DNS, "--pid-file=",
        "--address=/api.secret.test/" + API, "--address=/other.test/" + OTHER,
        "--address=/bad.secret.test/" + BAD],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [https, proxy, dns]


def outer():
    dbx.require_root_and_tools()
    for tool in ("ip", "nsenter", "dnsmasq", "nft", "openssl"):
        if not shutil.which(tool):
            dbx.skip_all("%s is not installed (run scripts/install-deps.sh)" % tool)
    tag = uuid.uuid4().hex[:8]
    host, inet = world.world_names(tag)
    d = tempfile.mkdtemp(prefix="dbxt-secrets-")
    log = os.path.join(d, "requests.log")
    open(log, "w").close()
    leaks = os.path.join(d, "leaks")
    procs, stop, watcher = [], threading.Event(), None
    try:
        try:
            world.build_world(tag)
        except subprocess.CalledProcessError as e:
            dbx.skip_all("cannot make the test's network namespaces: %s %s" % (
                " ".join(e.cmd), (e.stderr or "").strip()))
        make_certs(d)
        procs = start_internet(inet, d, log)
        watcher = world.watch_host(leaks, stop)
        env = dict(os.environ, DBX_SECRETS_INNER=host, DBX_SECRETS_DIR=d)
        r = subprocess.run(["nsenter", "--net=/run/netns/" + host, "--",
                            sys.executable, os.path.abspath(__file__)], env=env)
        with open(leaks) as f:
            seen = f.read().splitlines()
        if seen:
            print("not ok - the machine's own interfaces carried packets of the test's "
                  "world: %s" % seen[:5], flush=True)
            return 1
        return r.returncode
    finally:
        stop.set()
        if watcher:
            watcher.join()
        for p in procs:
            p.kill()
            p.wait()
        for ns in (host, inet):
            for pid in world.sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    pass
            world.sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(d, ignore_errors=True)


# ----------------------------------------------------------------- inside

def records(d):
    import json
    with open(os.path.join(d, "requests.log")) as f:
        return [json.loads(l) for l in f if l.strip()]


def request(srv, sid, url, header="Authorization", body="", verify=True):
    r = srv.exec(sid, ["python3", "-c", REQUEST, url, header, body, "1" if verify else "0"],
                 timeout_s=60)
    return (r.get("stdout") or "").strip() + (r.get("stderr") or "").strip()[-300:]


def check_store(t, srv):
    r = srv.request("POST", "/v1/secrets", {"name": "API_KEY", "value": VALUE,
                                             "hosts": ["api.secret.test", "bad.secret.test"]})
    t.ok(r.status == 201, "POST /v1/secrets stores a secret", r.body[:300])
    t.ok(VALUE.encode() not in r.body and "value" not in r.json(), "its answer has no value",
         r.body[:300])
    r = srv.request("POST", "/v1/secrets", {"name": "BODY_KEY", "value": BODY_VALUE,
                                             "hosts": ["*.secret.test"],
                                             "replace_in_body": True})
    t.ok(r.status == 201, "a wildcard secret replaced in bodies too", r.body[:300])
    lst = srv.request("GET", "/v1/secrets")
    t.ok(lst.status == 200 and VALUE.encode() not in lst.body and
         sorted(s["name"] for s in lst.json()["secrets"]) == ["API_KEY", "BODY_KEY"],
         "GET /v1/secrets lists names and hosts, no value", lst.body[:300])
    one = srv.request("GET", "/v1/secrets/API_KEY").json()
    t.ok(one.get("hosts") == ["api.secret.test", "bad.secret.test"] and
         one.get("created_at", "").endswith("Z") and one.get("last_used_at") is None,
         "GET /v1/secrets/NAME: hosts, created_at, never used yet", one)
    for body, what in (({"name": "X", "value": "v"}, "no hosts"),
                       ({"name": "1X", "value": "v", "hosts": ["a.test"]}, "a bad name"),
                       ({"name": "X", "value": "v", "hosts": ["a b"]}, "a bad host"),
                       ({"name": "X", "value": "", "hosts": ["a.test"]}, "an empty value"),
                       ({"name": "X", "value": "v", "hosts": ["a.test"], "valu": 1},
                        "an unknown field")):
        r = srv.request("POST", "/v1/secrets", body)
        code = "unknown_field" if what == "an unknown field" else "invalid_argument"
        t.ok(r.status == 400 and r.json()["error"]["code"] == code,
             "a secret with %s is refused (400 %s)" % (what, code), r.body[:200])
    t.eq(srv.request("GET", "/v1/secrets/NOPE").status, 404, "an unknown secret is 404")
    r = srv.request("POST", "/v1/sandboxes", {"secrets": ["NOPE"]})
    t.ok(r.status == 400 and "NOPE" in r.json()["error"]["message"],
         "a sandbox naming an unknown secret is refused", r.body[:200])
    r = srv.request("POST", "/v1/sandboxes", {"secrets": ["API_KEY"], "env": {"API_KEY": "x"}})
    t.eq(r.status, 400, "a secret also given in env is refused")


def check_inside(t, srv, sid, ph):
    out = srv.exec(sid, ["sh", "-c", "echo $API_KEY"])["stdout"].strip()
    t.eq(out, ph, "the sandbox's environment holds the placeholder")
    r = srv.exec(sid, ["sh", "-c", "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | "
                       "grep -c deskbox-secret-; grep -rs -c '%s' /proc/*/environ /etc "
                       "/home /tmp /workspace | grep -v ':0$' | head -3" % VALUE[:20]])
    lines = r["stdout"].split()
    t.ok(lines and int(lines[0]) > 0 and len(lines) == 1,
         "its processes' environments and files hold placeholders, not the value", r)
    up = srv.upper_dir(sid)
    found = subprocess.run(["grep", "-rlsE", "%s|PRIVATE KEY" % VALUE, up],
                           capture_output=True, text=True).stdout.split()
    t.eq(found, [], "nothing the sandbox wrote holds the value or a private key")
    r = srv.exec(sid, ["sh", "-c", "grep -c 'deskbox egress CA' /etc/ssl/certs/ca-certificates.crt;"
                       " test -r /etc/deskbox/egress-ca.pem && echo ca; echo $SSL_CERT_FILE"])
    t.ok(r["stdout"].split() == ["1", "ca", "/etc/ssl/certs/ca-certificates.crt"],
         "the sandbox trusts its CA: the system bundle, the CA file, SSL_CERT_FILE", r)


def memory_of(marker):
    """Every readable byte of the process whose command line holds
    `marker` (what a core dump of it would hold)."""
    import re
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if marker.encode() not in f.read():
                    continue
            out = b""
            with open("/proc/%s/maps" % pid) as maps, open("/proc/%s/mem" % pid, "rb") as mem:
                for line in maps:
                    m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
                    if not m:
                        continue
                    a, b = int(m.group(1), 16), int(m.group(2), 16)
                    try:
                        mem.seek(a)
                        out += mem.read(b - a)
                    except OSError:
                        pass
            return out
        except (OSError, ValueError):
            continue
    return b""


def check_memory(t, srv, sid, ph):
    srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, {
        "argv": ["python3", "-c", "import os, time; k = os.environ['API_KEY'] * 2; "
                 "time.sleep(60)", "dbx-memscan"], "background": True})
    mem = dbx.wait_until(lambda: (lambda m: m if ph.encode() in m else b"")(
        memory_of("dbx-memscan")), 20)
    t.ok(mem and VALUE.encode() not in mem,
         "a process using the secret holds the placeholder in its memory, never the value",
         len(mem))
    srv.exec(sid, ["pkill", "-f", "dbx-memscan"])


def check_patch(t, srv, d):
    sb = srv.create({"network": "internet", "display": {"width": 320, "height": 200}})
    r = srv.request("PATCH", "/v1/sandboxes/" + sb["id"], {"secrets": ["API_KEY"]})
    got = r.json().get("secrets", []) if r.status == 200 else []
    t.ok(len(got) == 1 and got[0]["name"] == "API_KEY", "PATCH secrets adds one to a running "
         "sandbox", r.body[:300])
    ph = got[0]["placeholder"] if got else ""
    before = len(records(d))
    r = srv.exec(sb["id"], ["python3", "-c", REQUEST, "https://api.secret.test/patched",
                            "Authorization", "", "1"], env={"API_KEY": ph}, timeout_s=60)
    recs = records(d)[before:]
    t.ok(recs and recs[0]["headers"].get("Authorization") == "Bearer " + VALUE,
         "it is put in at once (the environment follows at the next start)", (r, recs))
    r = srv.request("PATCH", "/v1/sandboxes/" + sb["id"], {"secrets": ["NOPE"]})
    t.eq(r.status, 400, "PATCH with an unknown secret is refused")
    srv.request("DELETE", "/v1/sandboxes/" + sb["id"])


def check_egress(t, srv, sid, d):
    before = len(records(d))
    out = request(srv, sid, "https://api.secret.test/v1/models?key=KEY")
    recs = records(d)[before:]
    t.ok(out == "200 seen" and len(recs) == 1 and
         recs[0]["headers"].get("Authorization") == "Bearer " + VALUE and
         recs[0]["path"] == "/v1/models?key=" + VALUE,
         "HTTPS to the secret's host: the real host gets the value in the header and "
         "the target, the sandbox trusted the answer", (out, recs))
    before = len(records(d))
    r = srv.exec(sid, ["sh", "-c", 'curl -sS -m 20 -H "X-Api-Key: $API_KEY" -d "k=$BODY_KEY" '
                       'https://api.secret.test/curl'], timeout_s=60)
    recs = records(d)[before:]
    t.ok(r["stdout"] == "seen" and len(recs) == 1 and
         recs[0]["headers"].get("X-Api-Key") == VALUE and recs[0]["body"] == "k=" + BODY_VALUE,
         "curl too; a replace_in_body secret is put in the body, its length corrected",
         (r, recs))
    before = len(records(d))
    r = srv.exec(sid, ["sh", "-c", "/usr/lib/chromium/chromium --headless --no-sandbox "
                       "--disable-gpu --dump-dom \"https://api.secret.test/chromium?key=$API_KEY\""
                       " 2>/dev/null"], timeout_s=90)
    recs = records(d)[before:]
    t.ok("seen" in r["stdout"] and recs and recs[0]["path"] == "/chromium?key=" + VALUE,
         "chromium trusts the sandbox's CA (its NSS store) and its request carries the value",
         (r["stdout"][-200:], recs))
    before = len(records(d))
    out = request(srv, sid, "https://other.test/leak", verify=False)
    recs = records(d)[before:]
    ph = srv.exec(sid, ["sh", "-c", "echo $API_KEY"])["stdout"].strip()
    t.ok(out == "200 seen" and recs and recs[0]["headers"].get("Authorization") ==
         "Bearer " + ph, "to another host over HTTPS (not intercepted) the placeholder "
         "arrives as it is", (out, recs))
    before = len(records(d))
    out = request(srv, sid, "http://other.test/plain")
    recs = records(d)[before:]
    t.ok(out == "200 seen" and recs and recs[0]["headers"].get("Authorization") ==
         "Bearer " + ph, "over plain HTTP too", (out, recs))
    t.ok(dbx.wait_until(lambda: "sent the placeholder of 'API_KEY'" in srv.stderr(), 5),
         "and deskboxd logs the attempt")
    before = len(records(d))
    out = request(srv, sid, "https://bad.secret.test/")
    t.ok(out.startswith("502") and "failed verification" in out and
         len(records(d)) == before, "a secret's host whose certificate fails verification "
         "gets nothing; the sandbox reads why (502)", out)
    m = srv.request("GET", "/metrics").body.decode()
    t.ok("deskbox_egress_replaced_total" in m and "deskbox_egress_refused_total" in m,
         "the proxy's counts are in /metrics", m[-400:])


def check_allow(t, srv, d):
    sb = srv.create({"network": {"allow": ["api.secret.test"]}, "secrets": ["API_KEY"],
                     "display": {"width": 320, "height": 200}})
    before = len(records(d))
    out = request(srv, sb["id"], "https://api.secret.test/allow")
    recs = records(d)[before:]
    t.ok(out == "200 seen" and recs and recs[0]["headers"].get("Authorization") ==
         "Bearer " + VALUE, "an allow-list sandbox reaches its host with the value", out)
    out = request(srv, sb["id"], "https://%s/" % OTHER, verify=False)
    t.ok(out.startswith("ERR"), "and nothing else, by address either", out)
    srv.request("DELETE", "/v1/sandboxes/" + sb["id"])


def check_proxy(t, d, args):
    """--egress-proxy: every TCP connection goes through the user's proxy,
    the secrets still put in."""
    srv = dbx.Server(args=args + ["--egress-proxy", "http://u:p@%s:3128" % PROXY])
    try:
        sb = srv.create({"network": "internet", "display": {"width": 320, "height": 200}})
        out = request(srv, sb["id"], "http://other.test/via-proxy")
        with open(os.path.join(d, "proxy.log")) as f:
            seen = f.read().split()
        t.ok(out == "200 seen" and OTHER + ":80" in seen,
             "with --egress-proxy a sandbox without secrets goes through the proxy", (out, seen))
        r = srv.request("POST", "/v1/secrets", {"name": "API_KEY", "value": VALUE,
                                                 "hosts": ["api.secret.test"]})
        sec = srv.create({"network": "internet", "secrets": ["API_KEY"],
                          "display": {"width": 320, "height": 200}})
        before = len(records(d))
        out = request(srv, sec["id"], "https://api.secret.test/via-proxy")
        recs = records(d)[before:]
        with open(os.path.join(d, "proxy.log")) as f:
            seen = f.read().split()
        t.ok(r.status == 201 and out == "200 seen" and API + ":443" in seen and recs and
             recs[0]["headers"].get("Authorization") == "Bearer " + VALUE,
             "and a secret is put in through the tunnel", (out, seen, recs))
        r = srv.exec(sb["id"], ["python3", "-c", "import socket; s = socket.create_connection("
                                "('%s', 22), timeout=5); print('connected')" % OTHER],
                     timeout_s=30)
        with open(os.path.join(d, "proxy.log")) as f:
            seen = f.read().split()
        t.ok(OTHER + ":22" in seen, "any port, not only the web ones", (r, seen))
    finally:
        srv.cleanup()


def inner():
    t = dbx.Tap()
    d = os.environ["DBX_SECRETS_DIR"]
    args = ["--uplink", "up0", "--dns-server", world.DNS,
            "--egress-ca-file", os.path.join(d, "ca.pem")]
    srv = dbx.Server(args=args)
    try:
        check_store(t, srv)
        sb = srv.create({"network": "internet", "secrets": ["API_KEY", "BODY_KEY"],
                         "display": {"width": 320, "height": 200}})
        secrets = {s["name"]: s["placeholder"] for s in sb.get("secrets", [])}
        ph = secrets.get("API_KEY", "")
        t.ok(ph.startswith("deskbox-secret-") and len(ph) == 47 and
             secrets.get("BODY_KEY", ph) != ph, "the sandbox shows a placeholder per secret",
             sb.get("secrets"))
        check_inside(t, srv, sb["id"], ph)
        check_memory(t, srv, sb["id"], ph)
        check_egress(t, srv, sb["id"], d)
        check_patch(t, srv, d)
        used = srv.request("GET", "/v1/secrets/API_KEY").json()
        t.ok((used.get("last_used_at") or "").endswith("Z"), "last_used_at is set", used)
        check_allow(t, srv, d)
        srv.stop()
        srv = dbx.Server(state_dir=srv.state_dir, args=args)
        t.eq(srv.request("GET", "/v1/secrets/API_KEY").status, 200,
             "the secrets survive a restart")
        t.eq(srv.request("POST", "/v1/sandboxes/%s/start" % sb["id"]).status, 200,
             "the sandbox starts again")
        out = srv.exec(sb["id"], ["sh", "-c", "echo $API_KEY"])["stdout"].strip()
        t.eq(out, ph, "with the same placeholder")
        before = len(records(d))
        request(srv, sb["id"], "https://api.secret.test/again")
        recs = records(d)[before:]
        t.ok(recs and recs[0]["headers"].get("Authorization") == "Bearer " + VALUE,
             "which is still replaced", recs)
        t.eq(srv.request("DELETE", "/v1/secrets/API_KEY").status, 204, "DELETE a secret")
        before = len(records(d))
        request(srv, sb["id"], "https://api.secret.test/deleted")
        recs = records(d)[before:]
        t.ok(not recs or recs[0]["headers"].get("Authorization") != "Bearer " + VALUE,
             "a deleted secret is no longer put in", recs)
        srv.request("DELETE", "/v1/sandboxes/" + sb["id"])
    finally:
        srv.cleanup()
    check_proxy(t, d, args)
    t.done()


if __name__ == "__main__":
    if os.environ.get("DBX_SECRETS_INNER"):
        inner()
    else:
        sys.exit(outer())
