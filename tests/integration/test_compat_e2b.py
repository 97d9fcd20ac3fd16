#!/usr/bin/env python3
"""E2B's official JavaScript SDKs (npm e2b, @e2b/code-interpreter, @e2b/desktop), unchanged,
against a real deskboxd: E2B_API_URL and E2B_SANDBOX_URL point at
http://HOST:PORT/e2b.  The node scripts in tests/compat-e2b use only the
official clients and check every effect through deskbox's own API; this
program runs them and sends what the SDKs never send (malformed bodies,
oversized ones, unknown paths and sandboxes, wrong keys), which must get
E2B's error shapes.  The SDK part is skipped, saying why, without node."""

import base64
import hashlib
import http.client
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

E2B_DIR = os.path.join(os.path.dirname(__file__), "..", "compat-e2b")
# The `desktop` template @e2b/desktop creates from (docs/compat.md).
TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "contrib",
                         "templates")


def raw(srv, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
    except (BrokenPipeError, ConnectionResetError):
        pass  # answered (413) before the whole body was sent: read the answer
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, r.getheader("Content-Type") or "", data


def e2b_error(t, got, status, name):
    st, ctype, data = got
    try:
        j = json.loads(data)
    except ValueError:
        j = None
    t.ok(st == status and ctype.startswith("application/json") and isinstance(j, dict) and
         j.get("code") == status and isinstance(j.get("message"), str) and j["message"],
         name, (st, ctype, data[:300]))


def bad_input(t, srv):
    key = {"X-API-KEY": srv.token, "Content-Type": "application/json"}
    e2b_error(t, raw(srv, "POST", "/e2b/v2/sandboxes", b'{"templateID":', key), 400,
              "a malformed create body: 400 with a numeric code")
    e2b_error(t, raw(srv, "POST", "/e2b/v2/sandboxes", b'{"timeout":"soon"}', key), 400,
              "a timeout that is not a number: 400")
    e2b_error(t, raw(srv, "POST", "/e2b/v2/sandboxes", b'{"metadata":["x"]}', key), 400,
              "metadata that is not an object: 400")
    e2b_error(t, raw(srv, "POST", "/e2b/v2/sandboxes", b'{"mcp":{}}', key), 400,
              "a cloud-only feature (mcp): 400 saying so")
    big = b'{"metadata":{"k":"' + b"x" * (3 << 20) + b'"}}'
    e2b_error(t, raw(srv, "POST", "/e2b/v2/sandboxes", big, key), 413, "an oversized body: 413")
    e2b_error(t, raw(srv, "GET", "/e2b/sandboxes/" + "0" * 32, None, key), 404,
              "an unknown sandbox: 404 with code 404")
    e2b_error(t, raw(srv, "GET", "/e2b/no/such/route", None, key), 404,
              "an unknown path under /e2b: 404 in E2B's shape")
    e2b_error(t, raw(srv, "GET", "/e2b/v2/sandboxes", None, {"X-API-KEY": "wrong"}), 401,
              "a wrong X-API-KEY: 401")
    e2b_error(t, raw(srv, "GET", "/e2b/v2/sandboxes", None,
                     {"Authorization": "Bearer " + srv.token}), 401,
              "deskbox's bearer header is not E2B's credential: 401")
    e2b_error(t, raw(srv, "GET", "/e2b/v2/sandboxes?metadata=%25zz", None, key), 400,
              "a list with a bad metadata query: 400")
    e2b_error(t, raw(srv, "GET", "/e2b/sandboxes/" + "0" * 32 + "/metrics", None, key), 400,
              "metrics (not offered): 400 saying so")
    st, _, data = raw(srv, "GET", "/v1/sandboxes", None, {"Authorization": "Bearer " + srv.token})
    t.ok(st == 200 and json.loads(data)["sandboxes"] == [], "no sandbox was left by bad input",
         data[:300])


def connect_error(t, got, status, code, name):
    """A unary procedure's error: `status` with Connect's JSON {"code"}.  A
    streaming one (application/connect+json) answers 200 with a stream that
    is only its end-of-stream envelope carrying the error, as Connect has
    it (the SDK reads any other status as unimplemented or internal)."""
    st, ctype, data = got
    if ctype.startswith("application/connect+json"):
        try:
            end = json.loads(data[5:]) if data[:1] == b"\x02" else None
        except ValueError:
            end = None
        err = end.get("error") if isinstance(end, dict) else None
        t.ok(st == 200 and isinstance(err, dict) and err.get("code") == code and
             isinstance(err.get("message"), str) and err["message"], name, (st, ctype, data[:300]))
        return
    try:
        j = json.loads(data)
    except ValueError:
        j = None
    t.ok(st == status and ctype.startswith("application/json") and isinstance(j, dict) and
         j.get("code") == code and isinstance(j.get("message"), str) and j["message"],
         name, (st, ctype, data[:300]))


def envelope(msg, flags=0):
    return bytes([flags]) + struct.pack(">I", len(msg)) + msg


def bad_envd_input(t, srv):
    """envd's Connect procedures: errors as Connect's JSON {"code":"…"}."""
    st, _, data = raw(srv, "POST", "/e2b/v2/sandboxes", b"{}",
                      {"X-API-KEY": srv.token, "Content-Type": "application/json"})
    sid = json.loads(data)["sandboxID"] if st == 201 else "0" * 32
    h = {"X-Access-Token": srv.token, "E2b-Sandbox-Id": sid,
         "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}
    start = b'{"process":{"cmd":"/bin/true"}}'
    connect_error(t, raw(srv, "POST", "/e2b/process.Process/Start", start, h), 400,
                  "invalid_argument", "Start without an envelope: invalid_argument")
    connect_error(t, raw(srv, "POST", "/e2b/process.Process/Start", envelope(start)[:-3], h),
                  400, "invalid_argument", "a truncated envelope: invalid_argument")
    connect_error(t, raw(srv, "POST", "/e2b/process.Process/Start", envelope(start, 1), h), 400,
                  "invalid_argument", "a compressed envelope: invalid_argument")
    connect_error(t, raw(srv, "POST", "/e2b/process.Process/Start",
                         b"\0\x7f\xff\xff\xff" + b"x" * 16, h), 413, "resource_exhausted",
                  "an envelope announcing 2 GiB: resource_exhausted")
    connect_error(t, raw(srv, "POST", "/e2b/process.Process/Start", envelope(b'{"process":1}'),
                         h), 400, "invalid_argument", "a message of the wrong shape: invalid_argument")
    connect_error(t, raw(srv, "POST", "/e2b/process.Process/Start", envelope(start),
                         dict(h, **{"E2b-Sandbox-Id": "f" * 32})), 404, "not_found",
                  "Start in an unknown sandbox: not_found")
    connect_error(t, raw(srv, "POST", "/e2b/process.Process/Start", envelope(start),
                         dict(h, **{"X-Access-Token": "wrong"})), 401, "unauthenticated",
                  "a wrong X-Access-Token: unauthenticated")
    uh = dict(h, **{"Content-Type": "application/json"})
    connect_error(t, raw(srv, "POST", "/e2b/filesystem.Filesystem/Stat", b'{"path":', uh), 400,
                  "invalid_argument", "Stat with malformed JSON: invalid_argument")
    connect_error(t, raw(srv, "POST", "/e2b/filesystem.Filesystem/Stat", b'{"path":"/nope"}', uh),
                  404, "not_found", "Stat of a missing path: not_found")
    connect_error(t, raw(srv, "POST", "/e2b/filesystem.Filesystem/Stat", b'{"path":"/../x/.."}',
                         uh), 400, "invalid_argument", "a path with '..': invalid_argument")
    connect_error(t, raw(srv, "POST", "/e2b/filesystem.Filesystem/CreateWatcher", b"{}", uh), 405,
                  "unimplemented", "a procedure deskbox does not offer: unimplemented")
    connect_error(t, raw(srv, "POST", "/e2b/filesystem.Filesystem/Stat", b'{"path":"/"}',
                         dict(uh, **{"E2b-Sandbox-Id": ""})), 400, "invalid_argument",
                  "no E2b-Sandbox-Id: invalid_argument")
    for proc, body, status, code, name in [
        ("SendInput", b'{"process":{"pid":999999},"input":{"stdin":"eA=="}}', 404, "not_found",
         "SendInput to a pid not started here: not_found"),
        ("SendInput", b'{"process":{},"input":{"stdin":"eA=="}}', 400, "invalid_argument",
         "SendInput naming no process: invalid_argument"),
        ("CloseStdin", b'{"process":{"tag":"nope"}}', 404, "not_found",
         "CloseStdin of an unknown tag: not_found"),
        ("Update", b'{"process":{"pid":1},"pty":{"size":{"cols":0}}}', 400, "invalid_argument",
         "Update with a zero-column PTY: invalid_argument"),
        ("SendSignal", b'{"process":{"pid":1},"signal":"SIGNAL_SIGKILL","x":1}', 400,
         "invalid_argument", "SendSignal with an unknown member: invalid_argument"),
    ]:
        connect_error(t, raw(srv, "POST", "/e2b/process.Process/" + proc, body, uh), status, code,
                      name)
    connect_error(t, raw(srv, "POST", "/e2b/process.Process/Start",
                         envelope(b'{"process":{"cmd":"/bin/true"},"pty":{"size":{"rows":99999}}}'),
                         h), 400, "invalid_argument", "Start with a PTY of 99999 rows: invalid_argument")
    st, ctype, data = raw(srv, "POST", "/e2b/process.Process/Connect",
                          envelope(b'{"process":{"pid":999999}}'), h)
    t.ok(st == 200 and ctype.startswith("application/connect+json") and data[:1] == b"\x02" and
         json.loads(data[5:])["error"]["code"] == "not_found",
         "Connect to an unknown pid: a stream ending in not_found", (st, ctype, data[:200]))
    st, _, data = raw(srv, "POST", "/e2b/files?path=/tmp/x", b"not a form",
                      {"X-Access-Token": srv.token, "E2b-Sandbox-Id": sid,
                       "Content-Type": "text/plain"})
    t.ok(st == 415 and json.loads(data).get("code") == 415, "a /files upload that is not a form: 415",
         (st, data[:200]))
    signed_files(t, srv, sid)
    raw(srv, "DELETE", "/e2b/sandboxes/" + sid, None, {"X-API-KEY": srv.token})


def e2b_signature(path, op, user, token, exp=None):
    """E2B's signature of a /files URL, computed here apart from the SDK
    (e2b:src/sandbox/signature.ts)."""
    raw_ = "%s:%s:%s:%s" % (path, op, user, token) + ("" if exp is None else ":%d" % exp)
    return "v1_" + base64.b64encode(hashlib.sha256(raw_.encode()).digest()).decode().rstrip("=")


def signed_files(t, srv, sid):
    """/files with a signature in place of X-Access-Token (the sandbox
    named by E2b-Sandbox-Id here; the SDK's own URLs: signed.test.mjs)."""
    h = {"E2b-Sandbox-Id": sid}
    form = (b"--dbxsignedform\r\nContent-Disposition: form-data; name=\"file\"; filename=\"s.txt\"\r\n\r\n"
            b"signed\r\n--dbxsignedform--\r\n")
    q = urllib.parse.urlencode({"path": "/workspace/s.txt",
                                "signature": e2b_signature("/workspace/s.txt", "write", "",
                                                           srv.token)})
    st, _, data = raw(srv, "POST", "/e2b/files?" + q, form,
                      dict(h, **{"Content-Type": "multipart/form-data; boundary=dbxsignedform"}))
    t.ok(st == 200, "a POST /files signed for write, no token: 200", (st, data[:200]))
    exp = int(time.time()) + 60
    q = urllib.parse.urlencode({"path": "/workspace/s.txt", "signature_expiration": exp,
                                "signature": e2b_signature("/workspace/s.txt", "read", "",
                                                           srv.token, exp)})
    st, _, data = raw(srv, "GET", "/e2b/files?" + q, None, h)
    t.ok(st == 200 and data == b"signed", "a GET /files signed for read until a time: the bytes",
         (st, data[:200]))
    e2b_error(t, raw(srv, "GET", "/e2b/files?" + q.replace("signature_expiration=%d" % exp,
                                                            "signature_expiration=%d" % (exp + 1)),
                     None, h), 401, "a signature whose expiration was changed: 401")
    e2b_error(t, raw(srv, "GET", "/e2b/files?path=/workspace/s.txt&signature=v1_x", None, h), 401,
              "a made-up signature: 401")
    e2b_error(t, raw(srv, "GET", "/e2b/files?path=/workspace/s.txt", None,
                     dict(h, **{"X-Access-Token": "wrong"})), 401, "a wrong X-Access-Token: 401")
    e2b_error(t, raw(srv, "GET", "/e2b/files?path=/workspace/s.txt&signature=v1_x"
                     "&signature_expiration=soon", None, h), 400,
              "a signature_expiration that is not a number: 400")


def sdk_script(t, srv, script, tls=None):
    """Runs one node script against `srv`; with `tls` (the CA file) over
    HTTPS with no E2B_SANDBOX_URL, the SDK reaching the sandboxes by the
    {port}-{id}.DOMAIN names of --ports-domain, which resolve to 127.0.0.1
    in the node process alone (resolve-test-domain.mjs)."""
    node = shutil.which("node")
    if not node:
        t.skip("the E2B SDK script " + script, "node is not installed")
        return
    if not os.path.isdir(os.path.join(E2B_DIR, "node_modules", "e2b")):
        t.skip("the E2B SDK script " + script, "tests/compat-e2b has no node_modules "
               "(run scripts/install-deps.sh)")
        return
    url = "%s://127.0.0.1:%d" % ("https" if tls else "http", srv.port)
    env = dict(os.environ, DESKBOX_URL=url, DESKBOX_TOKEN=srv.token, E2B_API_KEY=srv.token,
               E2B_API_URL=url + "/e2b", E2B_SANDBOX_URL=url + "/e2b")
    env.pop("E2B_DEBUG", None)
    argv = [node, script]
    if tls:
        del env["E2B_SANDBOX_URL"]
        env.update(NODE_EXTRA_CA_CERTS=tls, E2B_TEST_DOMAIN=TEST_DOMAIN)
        argv = [node, "--import", "./resolve-test-domain.mjs", script]
    r = subprocess.run(argv, cwd=E2B_DIR, env=env, timeout=600,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = r.stdout.decode(errors="replace")
    results = 0
    for line in out.splitlines():
        if line.startswith("ok ") or line.startswith("not ok "):
            name = line.split(" - ", 1)[1] if " - " in line else line
            t.ok(line.startswith("ok "), "sdk: " + name)
            results += 1
        elif line.startswith("#"):
            print(line, flush=True)
    t.ok(r.returncode == 0 and results > 0,
         "%s%s ran to its end (exit %d)" % (script, " over https" if tls else "", r.returncode),
         out[-2000:])


def desktop_script(t, srv, tls=None):
    """@e2b/desktop runs xdotool, scrot, xrandr and XFCE's session in the
    sandbox: they come from the host's /usr (scripts/install-deps.sh)."""
    missing = [b for b in ("xdotool", "scrot", "xrandr", "xdpyinfo", "startxfce4", "xfwm4",
                           "xfdesktop", "dbus-launch") if not shutil.which(b)]
    if missing:
        t.skip("the @e2b/desktop SDK script", "not installed: " + " ".join(missing) +
               " (scripts/install-deps.sh)")
        return
    sdk_script(t, srv, "desktop.test.mjs", tls=tls)


TEST_DOMAIN = "e2b.deskbox.test"


def over_tls(t):
    """The SDK scripts again over HTTPS (deskboxd's --tls-cert, trusted by
    NODE_EXTRA_CA_CERTS) with --ports-domain and no E2B_SANDBOX_URL."""
    if not shutil.which("openssl"):
        t.skip("the E2B SDK over https", "the openssl command is not installed")
        return
    d = tempfile.mkdtemp(prefix="dbx-e2b-tls-")
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=deskbox test CA", "-addext",
                    "subjectAltName=DNS:*.%s,DNS:%s,IP:127.0.0.1" % (TEST_DOMAIN, TEST_DOMAIN),
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    srv = dbx.Server(args=["--tls-cert", cert, "--tls-key", key, "--ports-domain", TEST_DOMAIN,
                           "--templates-dir", TEMPLATES])
    try:
        for script in ("hosts.test.mjs", "signed.test.mjs", "envd.test.mjs", "process.test.mjs",
                       "code.test.mjs"):
            sdk_script(t, srv, script, tls=cert)
        desktop_script(t, srv, tls=cert)
    finally:
        srv.cleanup()
        shutil.rmtree(d, ignore_errors=True)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server(args=["--templates-dir", TEMPLATES])
    try:
        bad_input(t, srv)
        bad_envd_input(t, srv)
        sdk_script(t, srv, "control.test.mjs")
        sdk_script(t, srv, "envd.test.mjs")
        sdk_script(t, srv, "process.test.mjs")
        sdk_script(t, srv, "code.test.mjs")
        desktop_script(t, srv)
    finally:
        srv.cleanup()
    over_tls(t)
    t.done()


if __name__ == "__main__":
    main()
