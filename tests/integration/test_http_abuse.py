"""The API holds under abuse: slow clients (slowloris), too many connections
from one address, TLS, and the warning for a clear-text API on the network.

Every connection goes to 127.0.0.1.  The slow clients come from other
loopback addresses (127.0.0.2 and up, all of 127/8 is loopback on Linux) so
that the per-address cap and the header guard can be told apart.  The
non-loopback listen runs in a network namespace of its own, which has
nothing but a loopback device: not a packet can leave it."""

import os
import base64
import resource
import struct
import selectors
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

SLOW_CONNS = 600
SLOW_PER_ADDR = 60  # under the default per-address cap of 64
ATTACK_S = 20
HEADER_TIMEOUT_S = 10  # deskboxd's default
# What a slow client sends, one byte per second: a request header that
# never ends.
SLOW_BYTES = b"GET /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class SlowClients:
    """`n` connections that each send one byte of a header a second.  One
    the server closes is opened again at the next tick, as an attacker
    would.  Runs `seconds`, then closes everything."""

    def __init__(self, port, n, seconds):
        self.port, self.n, self.seconds = port, n, seconds
        self.socks = [None] * n
        self.opened_at = [0.0] * n
        self.sent = [0] * n
        self.opened = self.closed_by_server = 0
        self.longest_life = 0.0  # of a connection the server closed
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open(self, i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.bind(("127.0.0.%d" % (2 + i // SLOW_PER_ADDR), 0))
        s.connect_ex(("127.0.0.1", self.port))
        self.socks[i], self.opened_at[i], self.sent[i] = s, time.monotonic(), 0
        self.opened += 1

    def gone(self, i):
        life = time.monotonic() - self.opened_at[i]
        self.longest_life = max(self.longest_life, life)
        self.closed_by_server += 1
        self.socks[i].close()
        self.socks[i] = None

    def tick(self, i):
        s = self.socks[i]
        try:
            if s.recv(4096) == b"":
                return self.gone(i)
        except BlockingIOError:
            pass
        except OSError:
            return self.gone(i)
        try:
            s.send(SLOW_BYTES[self.sent[i]:self.sent[i] + 1])
            self.sent[i] += 1
        except BlockingIOError:
            pass  # not connected yet
        except OSError:
            self.gone(i)

    def run(self):
        end = time.monotonic() + self.seconds
        while not self.stop.is_set() and time.monotonic() < end:
            start = time.monotonic()
            for i in range(self.n):
                if self.socks[i] is None:
                    self.open(i)
                else:
                    self.tick(i)
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - start)))
        now = time.monotonic()
        self.oldest_open = max([now - self.opened_at[i] for i in range(self.n) if self.socks[i]],
                               default=0.0)
        for s in self.socks:
            if s:
                s.close()


def timed_get(port, path, token):
    conn = dbx.http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    t0 = time.monotonic()
    try:
        conn.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
        r = conn.getresponse()
        r.read()
        return r.status, time.monotonic() - t0
    except OSError as e:
        return "error: %s" % e, time.monotonic() - t0
    finally:
        conn.close()


def test_slowloris(t):
    """(a) 600 slow connections; a normal client is served within 1 s
    throughout."""
    have = raise_nofile(SLOW_CONNS + 256)
    if have < SLOW_CONNS + 64:
        t.skip("600 slow connections", "RLIMIT_NOFILE is %d and cannot be raised" % have)
        return
    srv = dbx.Server()
    try:
        atk = SlowClients(srv.port, SLOW_CONNS, ATTACK_S)
        atk.thread.start()
        # Let the first wave in before measuring.
        dbx.wait_until(lambda: atk.opened >= SLOW_CONNS, timeout=10)
        results = []
        while atk.thread.is_alive():
            for path, tok in (("/healthz", None), ("/v1/sandboxes", srv.token)):
                results.append((path,) + timed_get(srv.port, path, tok))
            atk.stop.wait(0.25)  # pacing of the normal client, not a wait for a state
        atk.thread.join()
        lat = [r[2] for r in results]
        bad = [r for r in results if r[1] != 200 or r[2] > 1.0]
        t.diag("slow clients: %d connections opened, %d closed by the server, "
               "longest lived %.1f s" % (atk.opened, atk.closed_by_server, atk.longest_life))
        t.diag("normal client: %d requests, median %.1f ms, max %.1f ms" %
               (len(results), statistics.median(lat) * 1000, max(lat) * 1000))
        t.ok(len(results) >= 20, "the normal client made requests during the attack",
             len(results))
        t.ok(not bad, "every request answered 200 within 1 s under 600 slow connections",
             "\n".join("%s: %s after %.2f s" % r for r in bad[:10]))
        # The guard did it: slow clients were closed (room for new ones,
        # the deadline), and none lived past the deadline (+3 s for a
        # busy machine).
        t.ok(atk.closed_by_server >= SLOW_CONNS - 128, "the server closed slow connections",
             atk.closed_by_server)
        t.ok(max(atk.longest_life, atk.oldest_open) < HEADER_TIMEOUT_S + 3,
             "no slow connection outlived the header deadline",
             "longest %.1f s" % max(atk.longest_life, atk.oldest_open))
        r = srv.request("GET", "/healthz", token=None)
        t.eq(r.status, 200, "served after the attack")
    finally:
        srv.cleanup()


def trickle_until_closed(port, data, interval, limit):
    """Sends `data` a byte every `interval` s until the server closes the
    connection; returns (seconds until then or None, what came back)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=interval)
    t0 = time.monotonic()
    got = b""
    try:
        for b in data:
            if time.monotonic() - t0 > limit:
                return None, got
            try:
                s.send(bytes([b]))
                chunk = s.recv(4096)
                if not chunk:
                    return time.monotonic() - t0, got
                got += chunk
            except socket.timeout:
                pass
            except OSError:
                return time.monotonic() - t0, got
        return None, got
    finally:
        s.close()


def test_header_deadline(t):
    """(b) a header trickled past --header-timeout is cut; a slow body
    after a complete header is not."""
    srv = dbx.Server(args=["--header-timeout", "2"])
    try:
        hdr = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 400
        took, got = trickle_until_closed(srv.port, hdr, 0.1, 15)
        t.ok(took is not None and 1.9 <= took < 5, "a header trickled a byte per 0.1 s is "
             "closed at the 2 s deadline", "closed after %s s" % took)
        t.ok(b"200" not in got, "and gets no answer", got[:200])
        # An anonymous request may not keep the connection with a slow body.
        anon = b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n" + b"x" * 300
        took, got = trickle_until_closed(srv.port, anon, 0.1, 15)
        t.ok(took is not None and 1.9 <= took < 5,
             "an anonymous slow body is cut at the deadline too",
             "closed after %s s" % took)
        # Authenticated: the header is done, the body may take its time.
        body = b'{"memory_mb": "lots"}' + b" " * 29
        head = ("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                % (srv.token, len(body))).encode()
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(head)
        t0 = time.monotonic()
        try:
            for b in body:
                s.sendall(bytes([b]))
                time.sleep(0.08)  # the trickle's pace (4 s in all), not a wait for a state
            reply = s.recv(4096)
        except OSError as e:
            reply = ("error: %s" % e).encode()
        s.close()
        t.ok(time.monotonic() - t0 > 3, "the body took longer than the deadline")
        t.ok(reply.startswith(b"HTTP/1.1 400") and b"memory_mb" in reply,
             "a slow body after a whole header is read and answered", reply[:200])
        r = srv.request("GET", "/healthz", token=None)
        t.eq(r.status, 200, "a prompt request is served")
    finally:
        srv.cleanup()


def connected_and_alive(s, timeout=3):
    """Whether `s` is still open: a request on it gets an answer."""
    try:
        s.settimeout(timeout)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        return s.recv(4096).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def closed_by_server(s, timeout=3):
    try:
        s.settimeout(timeout)
        return s.recv(4096) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def from_addr(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((addr, 0))
    s.connect(("127.0.0.1", port))
    return s


def test_per_address_cap(t):
    """(c) connections from one address beyond the cap are closed at once;
    other addresses are not affected."""
    srv = dbx.Server(args=["--max-connections-per-address", "4"])
    try:
        held = [from_addr("127.0.0.3", srv.port) for _ in range(4)]
        extra = from_addr("127.0.0.3", srv.port)
        t.ok(closed_by_server(extra), "a 5th connection from one address is closed at once")
        extra.close()
        other = from_addr("127.0.0.4", srv.port)
        t.ok(connected_and_alive(other), "another address is still served")
        other.close()
        t.ok(all(connected_and_alive(s) for s in held), "the 4 within the cap are served")
        held.pop().close()
        again = dbx.wait_until(lambda: connected_and_alive(from_addr("127.0.0.3", srv.port)),
                               timeout=10, interval=0.2)
        t.ok(again, "after one closes, the address gets a connection again")
        for s in held:
            s.close()
    finally:
        srv.cleanup()


def make_cert(d):
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


def https(port, ctx, method, path, token, body=None):
    conn = dbx.http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=60)
    h = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    conn.request(method, path, body=dbx.json.dumps(body) if body is not None else None,
                 headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def ws_frame(sock):
    """One server frame's payload (servers do not mask)."""
    def exact(n):
        b = b""
        while len(b) < n:
            c = sock.recv(n - len(b))
            if not c:
                raise ConnectionError("closed inside a frame")
            b += c
        return b
    _, n = exact(2)
    if n == 126:
        (n,) = struct.unpack(">H", exact(2))
    elif n == 127:
        (n,) = struct.unpack(">Q", exact(8))
    return exact(n)


def test_tls_websocket(t, srv, ctx):
    """The viewer's WebSocket over TLS: MHD moves the bytes between TLS and
    the session, which therefore runs on a thread of its own."""
    st, data = https(srv.port, ctx, "POST", "/v1/sandboxes", srv.token,
                     {"display": {"width": 640, "height": 480}})
    if st != 201:
        t.ok(False, "a sandbox over HTTPS", data[:300])
        return
    sid = dbx.json.loads(data)["id"]
    base = "/v1/sandboxes/%s/vnc/" % sid
    st, data = https(srv.port, ctx, "POST", base + "tokens", srv.token, {})
    tok = dbx.json.loads(data)["token"]
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
    s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    host = "127.0.0.1:%d" % srv.port
    s.sendall(("GET %swebsockify?token=%s HTTP/1.1\r\nHost: %s\r\nOrigin: https://%s\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Protocol: binary\r\n\r\n"
               % (base, tok, host, host, base64.b64encode(os.urandom(16)).decode())).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c:
            break
        head += c
    t.ok(head.startswith(b"HTTP/1.1 101"), "WebSocket upgrade over TLS", head[:200])
    try:
        version = ws_frame(s)
        mask = os.urandom(4)
        msg = b"RFB 003.008\n"
        s.sendall(bytes([0x82, 0x80 | len(msg)]) + mask +
                  bytes(b ^ mask[i % 4] for i, b in enumerate(msg)))
        types = ws_frame(s)
    except OSError as e:
        version, types = b"", str(e).encode()
    t.ok(version.startswith(b"RFB 003.") and len(types) >= 2,
         "RFB both ways through the TLS WebSocket", (version, types))
    # The session thread is waited for on the way out, and ends.
    t0 = time.monotonic()
    rc = srv.stop(timeout=60)
    t.ok(rc == 0, "deskboxd stops with a TLS WebSocket session open",
         "exit %s after %.1f s" % (rc, time.monotonic() - t0))
    s.close()


def test_tls(t):
    """(d) an HTTPS round trip; plain HTTP to the TLS port fails cleanly;
    an unreadable certificate is named."""
    if not shutil.which("openssl"):
        t.skip("TLS", "the openssl command is not installed (scripts/install-deps.sh)")
        return
    d = tempfile.mkdtemp(prefix="dbx-tls-")
    try:
        cert, key = make_cert(d)
        srv = dbx.Server(args=["--tls-cert", cert, "--tls-key", key])
        try:
            t.ok("listening on https://" in srv.startup, "the start line says https",
                 srv.startup)
            ctx = ssl.create_default_context(cafile=cert)
            conn = dbx.http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx,
                                                   timeout=10)
            conn.request("GET", "/v1/sandboxes", headers={"Authorization": "Bearer " + srv.token})
            r = conn.getresponse()
            t.ok(r.status == 200 and r.read() == b'{"sandboxes":[]}',
                 "HTTPS round trip, certificate verified")
            conn.close()
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    got += chunk
                ended = True
            except socket.timeout:
                ended = False
            except OSError:
                ended = True
            s.close()
            t.ok(ended and not got.startswith(b"HTTP/"), "plain HTTP to the TLS port is "
                 "closed without an HTTP answer", got[:100])
            conn = dbx.http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx,
                                                   timeout=10)
            conn.request("GET", "/healthz")
            t.eq(conn.getresponse().status, 200, "HTTPS still served afterwards")
            conn.close()
            test_tls_websocket(t, srv, ctx)  # stops srv
        finally:
            srv.cleanup()
        missing = os.path.join(d, "nope.pem")
        st = tempfile.mkdtemp(prefix="dbx-test-")
        p = subprocess.run([os.path.join(dbx.BUILD, "deskboxd"), "--listen", "127.0.0.1:0",
                            "--state-dir", st, "--token", dbx.TOKEN, "--tls-cert", missing,
                            "--tls-key", key], capture_output=True, timeout=60)
        shutil.rmtree(st, ignore_errors=True)
        t.ok(p.returncode != 0 and missing.encode() in p.stderr,
             "a missing certificate stops the start, naming the file", p.stderr[-300:])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_clear_text_warning(t, plain):
    """(e) the warning on a non-loopback listen without TLS.  deskboxd
    listens on 0.0.0.0 inside a network namespace of its own (only an
    unconfigured lo): nothing outside can reach it, nothing leaves."""
    t.ok("WARNING" not in plain.stderr(), "no warning on 127.0.0.1", plain.stderr()[-300:])
    if not shutil.which("unshare"):
        t.skip("warning on 0.0.0.0", "unshare is not installed (util-linux)")
        return
    srv = dbx.Server(args=["--listen", "0.0.0.0:0"], wrap=["unshare", "--net", "--"])
    try:
        dbx.wait_until(lambda: "WARNING" in srv.stderr(), timeout=5)
        err = srv.stderr()
        t.ok("WARNING" in err and "0.0.0.0" in err and "without TLS" in err,
             "listening on 0.0.0.0 without TLS warns", err[-500:])
    finally:
        srv.cleanup()


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    test_header_deadline(t)
    test_per_address_cap(t)
    test_tls(t)
    plain = dbx.Server()
    try:
        test_clear_text_warning(t, plain)
    finally:
        plain.cleanup()
    test_slowloris(t)
    t.done()


if __name__ == "__main__":
    main()
