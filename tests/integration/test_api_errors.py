"""Auth, routing and request validation over real HTTP: every bad input gets
a JSON error with a fitting status, and nothing needs a container."""

import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def error_code(r):
    try:
        return r.json()["error"]["code"]
    except Exception:
        return None


def unknown_fields(t, srv):
    """A member deskbox does not know is a 400 unknown_field naming it, not
    a silent default; the body is checked before the target, so no sandbox
    is needed (and none is made)."""
    sb = "/v1/sandboxes/" + "0" * 32
    cases = [("POST", "/v1/sandboxes", {"isolaton": "vm"}, "isolaton"),
             ("POST", "/v1/sandboxes", {"display": {"width": 1280, "depth": 24}},
              "display.depth"),
             ("POST", "/v1/sandboxes", {"agent_display": {"width": 640, "height": 400,
                                                          "dpi": 2}}, "agent_display.dpi"),
             ("POST", "/v1/sandboxes", {"network": {"allow": ["a.test"], "deny": ["b.test"]}},
              "network.deny"),
             ("POST", "/v1/sandboxes", {"memroy_mb": 512}, "memroy_mb"),
             ("POST", "/v1/templates", {"name": "t1", "colour": 1}, "colour"),
             ("POST", "/v1/templates", {"name": "t1", "resources": {"gpus": 1}},
              "resources.gpus"),
             ("PATCH", sb, {"memory_mb": 512, "swap_mb": 1}, "swap_mb"),
             ("POST", sb + "/checkpoints", {"name": "c1", "memroy": True}, "memroy"),
             ("POST", sb + "/fork", {"checkpoint": "c1", "copies": 2}, "copies"),
             ("POST", sb + "/timeout", {"timeout_s": 5, "action": "stop"}, "action"),
             ("PUT", sb + "/network", {"network": "none", "dns": "1.1.1.1"}, "dns")]
    for method, path, body, field in cases:
        r = srv.request(method, path, body)
        msg = (r.json().get("error") or {}).get("message", "") if r.status == 400 else ""
        t.ok(r.status == 400 and error_code(r) == "unknown_field" and
             "unknown field '%s'" % field in msg,
             "%s %s with '%s': 400 unknown_field naming it" % (method, path[:40], field),
             r.body[:200])
    t.eq(srv.request("GET", "/v1/sandboxes").json(), {"sandboxes": []},
         "and no sandbox was made by any of them")
    r = srv.request("PATCH", sb, {"disk_mb": 1})
    t.ok(r.status == 400 and error_code(r) == "invalid_argument",
         "a known field PATCH cannot change stays invalid_argument", r.body[:200])


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        r = srv.request("GET", "/healthz", token=None)
        t.eq(r.status, 200, "healthz needs no token")

        r = srv.request("GET", "/v1/sandboxes", token=None)
        t.eq(r.status, 401, "no token: 401")
        t.eq(error_code(r), "unauthorized", "no token: JSON error code")
        t.ok(r.header("WWW-Authenticate") == "Bearer", "401 names the Bearer scheme")
        r = srv.request("GET", "/v1/sandboxes", token="wrong" + "x" * 30)
        t.eq(r.status, 401, "wrong token: 401")
        r = srv.request("GET", "/v1/sandboxes", token=dbx.TOKEN[:-1])
        t.eq(r.status, 401, "token prefix: 401")
        r = srv.request("GET", "/v1/sandboxes", token=None,
                        headers={"Authorization": "Basic " + dbx.TOKEN})
        t.eq(r.status, 401, "other scheme: 401")
        r = srv.request("GET", "/v1/sandboxes")
        t.eq(r.status, 200, "right token: 200")
        t.eq(r.json(), {"sandboxes": []}, "empty list")

        r = srv.request("GET", "/v1/nothing")
        t.eq(r.status, 404, "unknown route: 404")
        t.eq(error_code(r), "not_found", "unknown route: JSON error code")
        r = srv.request("PUT", "/v1/sandboxes")
        t.eq(r.status, 405, "wrong method: 405")
        t.eq(error_code(r), "method_not_allowed", "wrong method: JSON error code")

        r = srv.request("POST", "/v1/sandboxes", "{not json")
        t.eq(r.status, 400, "malformed JSON: 400")
        t.eq(error_code(r), "invalid_argument", "malformed JSON: JSON error code")
        r = srv.request("POST", "/v1/sandboxes", "[1,2]")
        t.eq(r.status, 400, "non-object JSON: 400")
        r = srv.request("POST", "/v1/sandboxes", {"display": {"width": 10, "height": 10}})
        t.eq(r.status, 400, "display too small: 400")
        t.ok("width" in r.json()["error"]["message"], "message names the field")
        r = srv.request("POST", "/v1/sandboxes", {"display": {"width": 1280.5}})
        t.eq(r.status, 400, "fractional width: 400")
        r = srv.request("POST", "/v1/sandboxes", {"memory_mb": "lots"})
        t.eq(r.status, 400, "string memory_mb: 400")
        r = srv.request("POST", "/v1/sandboxes", {"env": {"1BAD": "x"}})
        t.eq(r.status, 400, "bad env name: 400")
        unknown_fields(t, srv)
        # Refused from the Content-Length alone, before the body is read.
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Content-Length: %d\r\n\r\n" % (dbx.TOKEN, 3 << 20)).encode())
        head = s.recv(4096).decode(errors="replace")
        s.close()
        t.ok(head.startswith("HTTP/1.1 413"), "body over the cap: 413", head[:200])
        t.ok("payload_too_large" in head, "413 carries the JSON error", head[-200:])
        # A chunked body has no length up front: refused once it passes the cap.
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n" % dbx.TOKEN).encode())
        chunk = b"%x\r\n%s\r\n" % (1 << 20, b"x" * (1 << 20))
        try:
            for _ in range(3):
                s.sendall(chunk)
            s.sendall(b"0\r\n\r\n")
        except OSError:
            pass
        head = s.recv(4096).decode(errors="replace")
        s.close()
        t.ok(head.startswith("HTTP/1.1 413"), "chunked body over the cap: 413", head[:200])

        sid = "0" * 32
        r = srv.request("GET", "/v1/sandboxes/" + sid)
        t.eq(r.status, 404, "unknown sandbox: 404")
        r = srv.request("DELETE", "/v1/sandboxes/" + sid)
        t.eq(r.status, 404, "delete unknown sandbox: 404")
        r = srv.request("GET", "/v1/sandboxes/%s/desktop/screenshot" % sid)
        t.eq(r.status, 404, "screenshot of unknown sandbox: 404")
        r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, {"argv": ["true"]})
        t.eq(r.status, 404, "exec in unknown sandbox: 404")

        # Bodies whose length two parsers could read differently are
        # refused before any handler runs (request smuggling shapes).
        def raw(req):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(req)
            head = s.recv(4096).decode(errors="replace")
            s.close()
            return head
        auth = ("Authorization: Bearer %s\r\n" % srv.token).encode()
        head = raw(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth +
                   b"Content-Length: 2\r\nContent-Length: 12\r\n\r\n{}")
        t.ok(head.startswith("HTTP/1.1 400") and "Content-Length" in head,
             "two different Content-Length headers: 400", head[:300])
        head = raw(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth +
                   b"Content-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        t.ok(head.startswith("HTTP/1.1 400") and "Transfer-Encoding" in head,
             "Content-Length with Transfer-Encoding: 400", head[:300])
        head = raw(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                   b"Content-Length: 0\r\n\r\n")
        t.ok(head.startswith("HTTP/1.1 200"), "repeated equal Content-Length headers are fine",
             head[:300])

        # A raw, broken request line must not take the server down.
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"GARBAGE\r\n\r\n")
        s.recv(4096)
        s.close()
        r = srv.request("GET", "/healthz", token=None)
        t.eq(r.status, 200, "server still up after a garbage request")
    finally:
        srv.cleanup()
    t.done()


main()
