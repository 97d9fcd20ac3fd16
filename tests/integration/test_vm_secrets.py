"""Secrets through a VM (docs/secrets.md, docs/isolation.md): the same
world of network namespaces as test_secrets.py (deskboxd in "host", the
recording HTTPS servers of the test's own CA in "internet"), so that no
packet leaves the machine, with one VM ("isolation":"vm") given two
secrets.

Cases: the VM's environment and files hold the placeholders, never the
value nor its CA's key; the guest trusts the sandbox's CA (the system
bundle over the 9p root, the CA file, SSL_CERT_FILE and friends); python
and curl in the guest reach the secret's host with the value put in
(header, request target, and the body for a replace_in_body secret); the
same placeholder to another host (HTTPS not intercepted, plain HTTP)
arrives as it is and is logged; a secret's host whose certificate fails
gets nothing (502); the guest's RAM (all of QEMU's memory) never holds
the value; a PATCH'ed secret is put in at once; the VM stopped and
started again keeps its placeholder, still replaced; the machine's own
interfaces carried nothing.  Timings of one HTTPS request through the
proxy (VM and container) are printed as diagnostics."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
import test_secrets as sec  # noqa: E402

world = sec.world
VALUE, BODY_VALUE = sec.VALUE, sec.BODY_VALUE

# In the guest: n HTTPS requests with the placeholder, the median seconds.
TIMED = r"""
import os, sys, time, urllib.request
url, n = sys.argv[1], int(sys.argv[2])
key = os.environ.get("API_KEY", "")
ts = []
for _ in range(n):
    t = time.monotonic()
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
    ts.append(time.monotonic() - t)
print("%.3f" % sorted(ts)[n // 2])
"""


def outer():
    dbx.require_root_and_tools()
    for tool in ("ip", "nsenter", "dnsmasq", "nft", "openssl"):
        if not shutil.which(tool):
            dbx.skip_all("%s is not installed (run scripts/install-deps.sh)" % tool)
    tag = uuid.uuid4().hex[:8]
    host, inet = world.world_names(tag)
    d = tempfile.mkdtemp(prefix="dbxt-vmsecrets-")
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
        sec.make_certs(d)
        procs = sec.start_internet(inet, d, log)
        watcher = world.watch_host(leaks, stop)
        env = dict(os.environ, DBX_VMSECRETS_INNER=host, DBX_SECRETS_DIR=d)
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


def memory_holds(pid, needles):
    """Which of `needles` (bytes) occur in the readable memory of `pid`
    (QEMU: the guest's RAM is its memory), and how many bytes were read."""
    found, total, keep = set(), 0, max(len(n) for n in needles)
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in maps:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
            if not m:
                continue
            a, b = int(m.group(1), 16), int(m.group(2), 16)
            tail = b""
            while a < b:
                n = min(b - a, 16 << 20)
                try:
                    mem.seek(a)
                    chunk = mem.read(n)
                except OSError:
                    break
                buf = tail + chunk
                found.update(x for x in needles if x in buf)
                tail = buf[-keep:]
                total += len(chunk)
                a += n
    return found, total


def create_vm(t, srv, spec, what):
    spec = dict(spec, isolation="vm", display={"width": 640, "height": 400})
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/sandboxes", spec, timeout=400)
    if r.status == 501 and (b"make vm" in r.body or b"/dev/kvm" in r.body):
        return None, r.body[:300]
    t.ok(r.status == 201, "%s boots (%.1f s)" % (what, time.monotonic() - t0),
         (r.status, r.body[:300]))
    return (r.json() if r.status == 201 else None), None


def check_inside(t, srv, sid, ph):
    sec.check_inside(t, srv, sid, ph)
    r = srv.exec(sid, ["sh", "-c", "echo $REQUESTS_CA_BUNDLE $CURL_CA_BUNDLE "
                       "$NODE_EXTRA_CA_CERTS; openssl verify -CAfile /etc/deskbox/egress-ca.pem "
                       "/etc/deskbox/egress-ca.pem; mount | grep ' on / '; "
                       "test -e /etc/deskbox/ca.key || echo no-key"])
    out = r.get("stdout", "")
    t.ok("/etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt "
         "/etc/deskbox/egress-ca.pem" in out and ": OK" in out and "9p" in out and
         "no-key" in out, "in the guest (root over 9p): the CA file, the trust variables, "
         "no CA key", r)


def check_egress(t, srv, sid, d):
    records = sec.records
    before = len(records(d))
    out = sec.request(srv, sid, "https://api.secret.test/v1/models?key=KEY")
    recs = records(d)[before:]
    t.ok(out == "200 seen" and len(recs) == 1 and
         recs[0]["headers"].get("Authorization") == "Bearer " + VALUE and
         recs[0]["path"] == "/v1/models?key=" + VALUE,
         "python in the guest: the secret's host gets the value in the header and the "
         "target, the guest trusted the answer", (out, recs))
    before = len(records(d))
    r = srv.exec(sid, ["sh", "-c", 'curl -sS -m 30 -H "X-Api-Key: $API_KEY" -d "k=$BODY_KEY" '
                       'https://api.secret.test/curl'], timeout_s=90)
    recs = records(d)[before:]
    t.ok(r["stdout"] == "seen" and len(recs) == 1 and
         recs[0]["headers"].get("X-Api-Key") == VALUE and recs[0]["body"] == "k=" + BODY_VALUE,
         "curl in the guest too; the replace_in_body secret is put in the body", (r, recs))
    ph = srv.exec(sid, ["sh", "-c", "echo $API_KEY"])["stdout"].strip()
    before = len(records(d))
    out = sec.request(srv, sid, "https://other.test/leak", verify=False)
    recs = records(d)[before:]
    t.ok(out == "200 seen" and recs and recs[0]["headers"].get("Authorization") ==
         "Bearer " + ph, "to another host over HTTPS (not intercepted) the placeholder "
         "arrives as it is", (out, recs))
    before = len(records(d))
    r = srv.exec(sid, ["sh", "-c", 'curl -sS -m 30 -H "Authorization: Bearer $API_KEY" '
                       'http://other.test/plain'], timeout_s=90)
    recs = records(d)[before:]
    t.ok(r["stdout"] == "seen" and recs and recs[0]["headers"].get("Authorization") ==
         "Bearer " + ph, "over plain HTTP too (curl)", (r, recs))
    t.ok(dbx.wait_until(lambda: "sent the placeholder of 'API_KEY'" in srv.stderr(), 5),
         "and deskboxd logs the attempt")
    before = len(records(d))
    out = sec.request(srv, sid, "https://bad.secret.test/")
    t.ok(out.startswith("502") and "failed verification" in out and
         len(records(d)) == before, "a secret's host whose certificate fails gets nothing; "
         "the guest reads why (502)", out)


def check_memory(t, sid, ph):
    pid = qemu_pid(sid)
    t.ok(pid is not None, "the VM's QEMU is found")
    if not pid:
        return
    t0 = time.monotonic()
    found, n = memory_holds(pid, [VALUE.encode(), BODY_VALUE.encode(), ph.encode()])
    t.diag("scanned %d MB of QEMU's memory in %.1f s" % (n >> 20, time.monotonic() - t0))
    t.ok(ph.encode() in found and VALUE.encode() not in found and
         BODY_VALUE.encode() not in found,
         "the guest's RAM (QEMU's memory) holds the placeholder, never a value",
         (sorted(found), n))


def check_patch(t, srv, sid, d):
    r = srv.request("PATCH", "/v1/sandboxes/" + sid, {"secrets": ["API_KEY", "BODY_KEY",
                                                                  "NEW_KEY"]})
    got = {s["name"]: s["placeholder"] for s in r.json().get("secrets", [])} \
        if r.status == 200 else {}
    t.ok("NEW_KEY" in got, "PATCH secrets adds one to the running VM", r.body[:300])
    before = len(records_of(d))
    srv.exec(sid, ["python3", "-c", sec.REQUEST, "https://api.secret.test/patched",
                   "Authorization", "", "1"], env={"API_KEY": got.get("NEW_KEY", "")},
             timeout_s=90)
    recs = records_of(d)[before:]
    t.ok(recs and recs[0]["headers"].get("Authorization") == "Bearer new-" + VALUE,
         "it is put in at once", recs)


def records_of(d):
    return sec.records(d)


def timings(t, srv, vm_id, d):
    ct = srv.create({"network": "internet", "secrets": ["API_KEY"],
                     "display": {"width": 320, "height": 200}})
    for name, sid in (("VM", vm_id), ("container", ct["id"])):
        r = srv.exec(sid, ["python3", "-c", TIMED, "https://api.secret.test/timed", "9"],
                     timeout_s=300)
        v = (r.get("stdout") or "").strip()
        ok = re.match(r"^\d+\.\d+$", v) is not None
        t.ok(ok, "%s: nine HTTPS requests with the secret put in" % name, r)
        if ok:
            t.diag("%s: one HTTPS request through the egress proxy (a new TLS connection "
                   "each), median of 9: %.0f ms" % (name, float(v) * 1000))
    srv.request("DELETE", "/v1/sandboxes/" + ct["id"])


def check_restart(t, srv, sid, ph, d):
    r = srv.request("POST", "/v1/sandboxes/%s/stop" % sid, timeout=120)
    t.eq(r.status, 200, "stop the VM")
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/sandboxes/%s/start" % sid, timeout=400)
    t.eq(r.status, 200, "start it again (%.1f s)" % (time.monotonic() - t0))
    out = srv.exec(sid, ["sh", "-c", "echo $API_KEY; grep -c 'deskbox egress CA' "
                         "/etc/ssl/certs/ca-certificates.crt"])["stdout"].split()
    t.eq(out, [ph, "1"], "the same placeholder, the CA once in the bundle")
    before = len(records_of(d))
    out = sec.request(srv, sid, "https://api.secret.test/again")
    recs = records_of(d)[before:]
    t.ok(out == "200 seen" and recs and
         recs[0]["headers"].get("Authorization") == "Bearer " + VALUE,
         "still replaced after the restart", (out, recs))


def inner():
    t = dbx.Tap()
    d = os.environ["DBX_SECRETS_DIR"]
    args = ["--uplink", "up0", "--dns-server", world.DNS,
            "--egress-ca-file", os.path.join(d, "ca.pem")]
    srv = dbx.Server(args=args)
    vm = None
    try:
        for name, value, extra in (
                ("API_KEY", VALUE, {"hosts": ["api.secret.test", "bad.secret.test"]}),
                ("BODY_KEY", BODY_VALUE, {"replace_in_body": True}),
                ("NEW_KEY", "new-" + VALUE, {})):
            body = dict({"name": name, "value": value, "hosts": ["api.secret.test"]}, **extra)
            r = srv.request("POST", "/v1/secrets", body)
            t.eq(r.status, 201, "store the secret %s" % name)
        vm, msg = create_vm(t, srv, {"network": "internet", "secrets": ["API_KEY", "BODY_KEY"]},
                            "a VM with two secrets")
        if vm is None:
            if msg:
                t.skip("the VM secrets checks", "this host cannot run a VM: %s" % msg)
            t.done()
            return
        secrets = {s["name"]: s["placeholder"] for s in vm.get("secrets", [])}
        ph = secrets.get("API_KEY", "")
        t.ok(ph.startswith("deskbox-secret-") and len(ph) == 47 and
             secrets.get("BODY_KEY", ph) != ph, "the VM shows a placeholder per secret",
             vm.get("secrets"))
        check_inside(t, srv, vm["id"], ph)
        check_egress(t, srv, vm["id"], d)
        check_memory(t, vm["id"], ph)
        check_patch(t, srv, vm["id"], d)
        timings(t, srv, vm["id"], d)
        check_restart(t, srv, vm["id"], ph, d)
        r = srv.request("DELETE", "/v1/sandboxes/" + vm["id"], timeout=120)
        t.ok(r.status in (200, 204), "delete the VM", r.status)
        vm = None
    finally:
        if vm:
            srv.request("DELETE", "/v1/sandboxes/" + vm["id"], timeout=120)
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    if os.environ.get("DBX_VMSECRETS_INNER"):
        inner()
    else:
        sys.exit(outer())
