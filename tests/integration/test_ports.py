#!/usr/bin/env python3
"""The port proxy (docs/ports.md): /v1/sandboxes/{id}/ports/{port}/
reaches 127.0.0.1:{port} inside a sandbox whose network mode is none, over
real HTTP on loopback: files from python3 -m http.server, any method, a
100 MB streamed body, chunked bodies both ways, a WebSocket echo, share
tokens (cookie, revoke, expiry), host-based routing, and the errors."""
import base64
import hashlib
import http.client
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
t = dbx.Tap()
dbx.require_root_and_tools()
srv = dbx.Server(args=["--ports-domain", "deskbox.test"])


def raw(method, path, body=None, headers=None, timeout=120):
    """A request with exactly these headers (no API token unless given)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return dbx.Response(r.status, r.getheaders(), data)


def code_of(r):
    try:
        return r.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def ws_connect(path, headers):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = ["GET %s HTTP/1.1" % path, "Host: 127.0.0.1:%d" % srv.port, "Upgrade: websocket",
             "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
    lines += ["%s: %s" % kv for kv in headers.items()]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    return s, head.decode(errors="replace"), key


def ws_send(s, data):
    mask = os.urandom(4)
    n = len(data)
    head = bytes([0x82]) + (bytes([0x80 | n]) if n < 126 else bytes([0xFE]) + n.to_bytes(2, "big"))
    s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def ws_recv(s):
    def exact(n):
        buf = b""
        while len(buf) < n:
            b = s.recv(n - len(buf))
            if not b:
                raise EOFError
            buf += b
        return buf
    h = exact(2)
    n = h[1] & 0x7F
    if n == 126:
        n = int.from_bytes(exact(2), "big")
    return exact(n)


try:
    sid = srv.create({"display": {"width": 800, "height": 600}})["id"]
    base = "/v1/sandboxes/%s/ports" % sid
    with open(os.path.join(HERE, "data", "port_echo.py"), "rb") as f:
        up = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/echo.py" % sid,
                         f.read())
    t.eq(up.status, 201, "the echo service is uploaded")
    srv.exec(sid, ["mkdir", "-p", "/workspace/www"])
    up = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/www/hello.txt" % sid,
                     b"hello from inside\n")
    t.eq(up.status, 201, "a file to serve is uploaded")
    srv.exec(sid, ["python3", "/workspace/echo.py", "8001"], background=True)
    srv.exec(sid, ["python3", "-m", "http.server", "-b", "127.0.0.1", "8000"],
             cwd="/workspace/www", background=True)
    ready = dbx.wait_until(
        lambda: srv.request("GET", base + "/8000/hello.txt").status == 200 and
        srv.request("GET", base + "/8001/").status == 200, timeout=30)
    t.ok(ready, "both services answer through the proxy")

    # -- plain HTTP, any method, headers both ways --
    r = srv.request("GET", base + "/8000/hello.txt")
    t.ok(r.status == 200 and r.body == b"hello from inside\n",
         "a file from python3 -m http.server in a sandbox with network none",
         "%d %r" % (r.status, r.body[:200]))
    r = srv.request("PATCH", base + "/8001/echo/a%20b?x=1&y=%2F", b"abc",
                    headers={"X-Custom": "v1", "Cookie": "deskbox_share=zzz; app=2"})
    j = r.json()
    t.eq((j["method"], j["path"], j["length"]), ("PATCH", "/echo/a%20b?x=1&y=%2F", 3),
         "method, raw path and query and body reach the service unchanged")
    hdrs = {k.lower(): v for k, v in j["headers"].items()}
    t.ok("authorization" not in hdrs, "the API token is not passed into the sandbox", hdrs)
    t.eq(hdrs.get("cookie"), "app=2", "deskboxd's cookie is taken out, the app's kept")
    t.eq(hdrs.get("x-custom"), "v1", "other headers are passed on")
    t.eq(hdrs.get("x-forwarded-prefix"), base + "/8001", "X-Forwarded-Prefix names the prefix")
    t.ok(r.header("X-Echo") == "1" and "app=1" in (r.header("Set-Cookie") or ""),
         "the service's headers come back")
    r = srv.request("GET", base + "/8001/chunked?n=2000")
    want = "".join("line %d\n" % i for i in range(2000)).encode()
    t.ok(r.status == 200 and r.body == want, "a chunked answer arrives whole and unframed")

    # -- a 100 MB body, streamed --
    size = 100 << 20
    block = os.urandom(1 << 20)
    digest = hashlib.sha256()
    for _ in range(size >> 20):
        digest.update(block)

    def blocks():
        for _ in range(size >> 20):
            yield block
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
    t0 = time.monotonic()
    conn.request("PUT", base + "/8001/echo", body=blocks(),
                 headers={"Authorization": "Bearer " + srv.token,
                          "Content-Length": str(size)})
    resp = conn.getresponse()
    j = json.loads(resp.read())
    conn.close()
    secs = time.monotonic() - t0
    t.ok(j["length"] == size and j["sha256"] == digest.hexdigest(),
         "a 100 MB body streams through with the same sha256", j)
    t.diag("100 MB through the proxy in %.2f s (%.0f MB/s)" % (secs, 100 / secs))
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
    conn.request("POST", base + "/8001/echo", body=blocks(),
                 headers={"Authorization": "Bearer " + srv.token}, encode_chunked=True)
    j = json.loads(conn.getresponse().read())
    conn.close()
    t.ok(j["length"] == size and j["sha256"] == digest.hexdigest() and
         "chunked" in j["headers"].get("Transfer-Encoding", ""),
         "a chunked 100 MB request body is passed on chunked, byte for byte")

    # -- WebSocket --
    s, head, _ = ws_connect(base + "/8001/ws", {"Authorization": "Bearer " + srv.token})
    t.ok(head.startswith("HTTP/1.1 101"), "the WebSocket upgrade goes through", head)
    msgs = [b"hello", os.urandom(3000), "héllo ✓".encode()]
    got = []
    for m in msgs:
        ws_send(s, m)
        got.append(ws_recv(s))
    s.close()
    t.eq(got, msgs, "WebSocket messages come back echoed")

    # -- credentials --
    r = raw("GET", base + "/8000/hello.txt")
    t.ok(r.status == 401 and code_of(r) == "unauthorized", "no credential: 401")
    r = raw("GET", base + "/8000/hello.txt", headers={"Authorization": "Bearer nope"})
    t.eq(r.status, 401, "a wrong API token: 401")
    r = raw("GET", base + "/8000/hello.txt?deskbox_token=" + "ab" * 32)
    t.eq(r.status, 401, "an unknown share token: 401")
    s, head, _ = ws_connect(base + "/8001/ws", {})
    s.close()
    t.ok(head.startswith("HTTP/1.1 401"), "a WebSocket without a credential: 401", head)
    tok = srv.request("POST", base + "/8000/tokens", {"ttl_s": 600})
    tj = tok.json()
    t.ok(tok.status == 201 and len(tj["token"]) == 64 and tj["url"].endswith(tj["token"]) and
         tj["port"] == 8000, "a share token for a port", tok.body)
    r = raw("GET", tj["url"].replace("/?", "/hello.txt?"))
    cookie = r.header("Set-Cookie") or ""
    t.ok(r.status == 200 and r.body == b"hello from inside\n",
         "the share URL works without the API token", "%d %r" % (r.status, r.body[:300]))
    t.ok(cookie.startswith("deskbox_share=" + tj["token"]) and
         ("Path=%s/8000/" % base) in cookie and "HttpOnly" in cookie,
         "and leaves a cookie scoped to the port's path", cookie)
    r = raw("GET", base + "/8000/hello.txt", headers={"Cookie": "deskbox_share=" + tj["token"]})
    t.eq(r.status, 200, "the cookie alone opens the port's further URLs")
    r = raw("GET", base + "/8001/echo?deskbox_token=" + tj["token"])
    t.eq(r.status, 401, "a share token opens its own port only")
    r = raw("GET", "/v1/sandboxes/%s/files/list?path=/" % sid,
            headers={"Authorization": "Bearer " + tj["token"]})
    t.eq(r.status, 401, "a share token does not open the API")
    tj2 = srv.request("POST", base + "/8001/tokens", {}).json()
    r = raw("GET", base + "/8001/echo?a=1&deskbox_token=%s&b=2" % tj2["token"])
    t.eq(r.json()["path"], "/echo?a=1&b=2", "the share token's parameter is not passed on")
    r = srv.request("DELETE", base + "/8000/tokens/" + tj["token"])
    t.eq(r.status, 204, "revoking a share token")
    r = raw("GET", base + "/8000/hello.txt", headers={"Cookie": "deskbox_share=" + tj["token"]})
    t.eq(r.status, 401, "a revoked share token opens nothing")
    r = srv.request("DELETE", base + "/8000/tokens/" + tj["token"])
    t.eq(r.status, 404, "revoking it again: 404")
    short = srv.request("POST", base + "/8000/tokens", {"ttl_s": 1}).json()["token"]
    t.eq(raw("GET", base + "/8000/hello.txt?deskbox_token=" + short).status, 200,
         "a 1 s share token works at first")
    expired = dbx.wait_until(
        lambda: raw("GET", base + "/8000/hello.txt?deskbox_token=" + short).status == 401,
        timeout=5)
    t.ok(expired, "and not once it expired")
    for body, why in (({"ttl_s": 0}, "ttl_s 0"), ({"ttl_s": "1"}, "ttl_s a string"),
                      ({"ttl": 5}, "an unknown field")):
        r = srv.request("POST", base + "/8000/tokens", body)
        want = "unknown_field" if "ttl" in body else "invalid_argument"
        t.ok(r.status == 400 and code_of(r) == want, "token with %s: 400 %s" % (why, want))

    # -- host-based routing --
    host = "8000-%s.deskbox.test:%d" % (sid, srv.port)
    r = raw("GET", "/hello.txt", headers={"Host": host, "Authorization": "Bearer " + srv.token})
    t.ok(r.status == 200 and r.body == b"hello from inside\n",
         "Host {port}-{id}.deskbox.test reaches the same port", r.status)
    r = raw("GET", "/hello.txt", headers={"Host": host})
    t.eq(r.status, 401, "host-based routing needs a credential too")
    r = raw("GET", "/healthz", headers={"Host": "127.0.0.1"})
    t.eq(r.status, 200, "other hosts reach the API as before")

    # -- errors --
    r = srv.request("GET", base + "/8000")
    t.ok(r.status == 308 and r.header("Location") == base + "/8000/", "no slash: 308 to it")
    r = srv.request("GET", base + "/8999/")
    t.ok(r.status == 502 and code_of(r) == "bad_gateway", "nothing listening: 502", r.body)
    for bad in ("0", "65536", "http", "-1"):
        r = srv.request("GET", base + "/%s/" % bad)
        t.ok(r.status == 400 and code_of(r) == "invalid_argument", "port %r: 400" % bad)
    r = srv.request("GET", "/v1/sandboxes/%s/ports/8000/" % ("0" * 32))
    t.eq(r.status, 404, "an unknown sandbox: 404")
    r = srv.request("GET", "/v1/sandboxes/%s/browser/cdp" % sid)
    t.ok(r.status == 409 and "desktop/browser" in r.json()["error"]["message"],
         "CDP without a running browser: 409 saying how to start it", r.body)
    srv.request("POST", "/v1/sandboxes/%s/stop" % sid)
    r = srv.request("GET", base + "/8000/hello.txt")
    t.ok(r.status == 409 and code_of(r) == "sandbox_not_running", "a stopped sandbox: 409")
    srv.request("DELETE", "/v1/sandboxes/" + sid)
finally:
    srv.cleanup()
t.done()
