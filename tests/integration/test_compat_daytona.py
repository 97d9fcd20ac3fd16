"""Daytona's front-end (docs/compat.md) driven by the official
TypeScript SDK @daytonaio/sdk, unchanged, pinned in tests/compat-daytona
(tests/compat-daytona/daytona.test.mjs): DAYTONA_API_URL is
http://HOST:PORT/daytona/api, DAYTONA_API_KEY deskbox's token.  The script
creates, runs commands and code, moves files both ways, lists, labels,
stops and starts, and checks each effect through deskbox's own API; then
raw HTTP checks Daytona's error shape for bad input and the socket.io
channel's handshake."""

import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import compat_node  # noqa: E402
import dbx  # noqa: E402


def dt_error(t, r, status, name, word=None):
    try:
        body = r.json()
    except ValueError:
        body = None
    ok = (r.status == status and isinstance(body, dict) and body.get("statusCode") == status
          and isinstance(body.get("message"), str) and isinstance(body.get("error"), str)
          and (word is None or word in body["message"]))
    t.ok(ok, "%s: %d in Daytona's shape" % (name, status), (r.status, r.body[:300]))


def ws_frames(sock, want):
    """Reads server frames until `want` have come: [(opcode, payload)]."""
    buf, out = b"", []
    while len(out) < want:
        while True:
            if len(buf) >= 2:
                n = buf[1] & 0x7f
                hl = 2 + (2 if n == 126 else 8 if n == 127 else 0)
                if len(buf) >= hl:
                    if n >= 126:
                        n = int.from_bytes(buf[2:hl], "big")
                    if len(buf) >= hl + n:
                        out.append((buf[0] & 0x0f, buf[hl:hl + n]))
                        buf = buf[hl + n:]
                        break
            chunk = sock.recv(4096)
            if not chunk:
                return out
            buf += chunk
    return out


def ws_text(sock, text):
    data = text.encode()
    mask = os.urandom(4)
    sock.sendall(bytes([0x81, 0x80 | len(data)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def socketio(t, srv, key):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(("GET /daytona/api/socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: x\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    t.ok(head.startswith(b"HTTP/1.1 101") and b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head,
         "socket.io: the WebSocket upgrade needs no Authorization", head[:200])
    opened = ws_frames(s, 1)
    t.ok(opened and opened[0][1].startswith(b'0{"sid":') and b'"pingInterval":25000' in opened[0][1],
         "socket.io: the Engine.IO open packet", opened)
    ws_text(s, '40{"token":"%s"}' % key)
    return s


def raw_checks(t, srv):
    api = "/daytona/api"
    dt_error(t, srv.request("GET", api + "/sandbox/nothing"), 404, "an unknown sandbox")
    dt_error(t, srv.request("GET", "/daytona/toolbox/nothing/files?path=/"), 404,
             "the toolbox of an unknown sandbox")
    dt_error(t, srv.request("GET", api + "/sandbox", token=None), 401, "no API key")
    dt_error(t, srv.request("GET", api + "/sandbox", token="wrong"), 401, "a wrong API key")
    dt_error(t, srv.request("POST", api + "/sandbox", "{not json",
                            headers={"Content-Type": "application/json"}), 400, "a body that is not JSON")
    dt_error(t, srv.request("POST", api + "/sandbox", {"labels": "x"}), 400, "labels not an object")
    dt_error(t, srv.request("POST", api + "/sandbox", {"cpu": "many"}), 400, "cpu not a number")
    dt_error(t, srv.request("POST", api + "/sandbox", {"volumes": [{"volumeId": "v"}]}), 400,
             "volumes: not supported", "not supported")
    dt_error(t, srv.request("POST", api + "/sandbox/x/archive"), 501, "archive: not supported",
             "not supported")
    dt_error(t, srv.request("GET", api + "/nothing"), 404, "an unknown route")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
        s.sendall(("POST %s/sandbox HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Content-Length: %d\r\n\r\n" % (api, srv.token, 3 << 20)).encode())
        head = s.recv(65536).decode(errors="replace")
    body = head.split("\r\n\r\n", 1)[-1]
    t.ok(head.startswith("HTTP/1.1 413") and '"statusCode":413' in body,
         "a body over the cap: 413 in Daytona's shape", head[:400])

    sb = srv.create({})
    tb = "/daytona/toolbox/%s" % sb["id"]
    dt_error(t, srv.request("POST", tb + "/process/execute", {}), 400, "execute without a command",
             "command")
    dt_error(t, srv.request("POST", tb + "/process/code-run", {"code": "1", "language": "cobol"}), 400,
             "code-run in an unknown language", "cobol")
    dt_error(t, srv.request("POST", tb + "/process/execute", {"command": "true", "envs": {"A": 1}}), 400,
             "envs with a number", "A")
    r = srv.request("POST", tb + "/files/bulk-upload", "x", headers={"Content-Type": "text/plain"})
    t.ok(r.status in (400, 415) and "statusCode" in r.json(), "bulk-upload that is not multipart",
         (r.status, r.body[:200]))
    r = srv.request("POST", tb + "/files/bulk-upload",
                    "--xbound42\r\nContent-Disposition: form-data; name=\"files[0].file\"; filename=\"a\"\r\n\r\n"
                    "data\r\n--xbound42--\r\n", headers={"Content-Type": "multipart/form-data; boundary=xbound42"})
    t.ok(r.status == 400 and "path" in r.json().get("message", ""),
         "a file part with no .path before it is refused", (r.status, r.body[:200]))
    dt_error(t, srv.request("POST", tb + "/files/bulk-download", {"paths": "x"}), 400,
             "bulk-download with paths not a list")
    dt_error(t, srv.request("GET", tb + "/files?path=/workspace/none"), 404, "listing a missing folder")
    r = srv.request("GET", tb + "/files/info?path=/nothing")
    t.eq(r.status, 404, "info of a missing file is 404")
    srv.request("DELETE", "/v1/sandboxes/" + sb["id"])

    # The event channel: Engine.IO open packet, CONNECT with the key.
    s = socketio(t, srv, srv.token)
    got = ws_frames(s, 1)
    t.ok(got and got[0][0] == 1 and got[0][1].startswith(b'40{"sid":'), "socket.io: CONNECT with the key is answered", got)
    ws_text(s, "2")
    got = ws_frames(s, 1)
    t.ok(got and got[0][1] == b"3", "socket.io: a ping of the client's is answered", got)
    s.close()
    s = socketio(t, srv, "wrong")
    got = ws_frames(s, 2)
    t.ok(len(got) == 2 and got[0][1].startswith(b"44") and got[1][0] == 8,
         "socket.io: CONNECT with a wrong key is refused (44) and the socket closed", got)
    s.close()
    r = srv.request("GET", api + "/socket.io/?EIO=3&transport=polling", token=None)
    dt_error(t, r, 400, "socket.io over long-polling is refused")


def sdk_script(t, srv):
    env = dict(DESKBOX_URL="http://127.0.0.1:%d" % srv.port, DESKBOX_TOKEN=srv.token,
               DAYTONA_API_URL="http://127.0.0.1:%d/daytona/api" % srv.port,
               DAYTONA_API_KEY=srv.token, DAYTONA_OTEL_ENABLED="false")
    compat_node.run_script(t, "daytona", "@daytonaio/sdk", "daytona.test.mjs", env,
                           unset=["DAYTONA_USE_DEPRECATED_POLLING"])


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
