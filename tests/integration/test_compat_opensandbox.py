"""OpenSandbox's front-end (docs/compat.md) driven by the official
JavaScript SDK @alibaba-group/opensandbox, unchanged, pinned in
tests/compat-opensandbox (tests/compat-opensandbox/opensandbox.test.mjs):
`domain` is HOST:PORT/opensandbox, the API key deskbox's token.  The script
creates with an image, Kubernetes resources, an egress allow-list and a
timeout, runs commands through execd's event stream, writes and reads
files, looks endpoints up, lists, renews, pauses, resumes and kills,
checking each effect through deskbox's own API.  Then raw HTTP checks
OpenSandbox's error shape for bad input."""

import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import compat_node  # noqa: E402
import dbx  # noqa: E402

KEY = {"OPEN-SANDBOX-API-KEY": dbx.TOKEN}


def osb_error(t, r, status, name, word=None):
    try:
        body = r.json()
    except ValueError:
        body = None
    ok = (r.status == status and isinstance(body, dict) and isinstance(body.get("code"), str)
          and isinstance(body.get("message"), str) and "error" not in body
          and (word is None or word in body["message"]))
    t.ok(ok, "%s: %d {\"code\",\"message\"}" % (name, status), (r.status, r.body[:300]))


def raw_checks(t, srv):
    v1 = "/opensandbox/v1/sandboxes"
    req = lambda m, p, b=None, h=KEY: srv.request(m, p, b, token=None, headers=h)  # noqa: E731
    osb_error(t, req("GET", v1 + "/nothing"), 404, "an unknown sandbox")
    osb_error(t, req("GET", v1, h={}), 401, "no OPEN-SANDBOX-API-KEY")
    osb_error(t, req("GET", v1, h={"OPEN-SANDBOX-API-KEY": "wrong"}), 401, "a wrong key")
    osb_error(t, req("POST", v1, {"image": {"uri": "default"}, "resourceLimits": {"cpu": "lots"}}), 400,
              "a cpu quantity that is not one", "cpu")
    osb_error(t, req("POST", v1, {"image": {"uri": "default"}, "resourceLimits": {"memory": "12Qi"}}), 400,
              "a memory quantity with a bad unit", "memory")
    osb_error(t, req("POST", v1, {"image": {"uri": "default"}, "networkPolicy": {
        "defaultAction": "allow", "egress": [{"action": "deny", "target": "evil.com"}]}}), 400,
              "a deny list: not supported", "deny")
    osb_error(t, req("POST", v1, {"image": {"uri": "default"}, "volumes": [{"name": "v"}]}), 400,
              "volumes: not supported", "not supported")
    osb_error(t, req("POST", v1, {}), 400, "no image", "image")
    osb_error(t, req("POST", v1, "{x", {**KEY, "Content-Type": "application/json"}), 400,
              "a body that is not JSON")
    osb_error(t, req("GET", "/opensandbox/v1/snapshots"), 501, "snapshots: not supported", "not supported")
    osb_error(t, req("GET", "/opensandbox/nothing"), 404, "an unknown route")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nOPEN-SANDBOX-API-KEY: %s\r\n"
                   "Content-Length: %d\r\n\r\n" % (v1, srv.token, 3 << 20)).encode())
        head = s.recv(65536).decode(errors="replace")
    t.ok(head.startswith("HTTP/1.1 413") and '"code":"PAYLOAD_TOO_LARGE"' in head,
         "a body over the cap: 413 in OpenSandbox's shape", head[:400])
    sb = srv.create({})
    ex = "/opensandbox/execd/%s" % sb["id"]
    osb_error(t, req("POST", ex + "/command", {}), 400, "a command without 'command'", "command")
    osb_error(t, req("POST", ex + "/command", {"command": "true", "background": True}), 400,
              "background commands: not supported", "not supported")
    osb_error(t, req("GET", ex + "/files/download?path=/nothing"), 404, "downloading a missing file")
    osb_error(t, req("GET", ex + "/files/download?path=relative"), 400, "a relative path", "absolute")
    osb_error(t, req("GET", ex + "/metrics"), 501, "execd metrics: not supported")
    r = req("GET", ex + "/ping")
    t.ok(r.status == 200, "execd ping", r.status)
    osb_error(t, req("GET", ex + "/ping", h={}), 401, "execd without a key")
    srv.request("DELETE", "/v1/sandboxes/" + sb["id"])


def sdk_script(t, srv):
    env = dict(DESKBOX_URL="http://127.0.0.1:%d" % srv.port, DESKBOX_TOKEN=srv.token,
               OSB_DOMAIN="127.0.0.1:%d/opensandbox" % srv.port)
    compat_node.run_script(t, "opensandbox", "@alibaba-group/opensandbox", "opensandbox.test.mjs",
                           env)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sdk_script(t, srv)
        raw_checks(t, srv)
        if t.failed:
            for line in srv.stderr().splitlines()[-30:]:
                t.diag("deskboxd: " + line)
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
