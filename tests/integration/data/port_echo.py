"""A service for test_ports.py, run inside a sandbox on 127.0.0.1:PORT:
POST/PUT /echo  answers {"method","path","headers","length","sha256"} of the
                request (bodies by Content-Length or chunked);
GET /chunked?n=N answers N numbered lines in a chunked body;
GET /bytes?n=N  answers N bytes (Content-Length);
GET /ws         a WebSocket that echoes every message back.
Standard library only."""
import base64
import hashlib
import json
import socketserver
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def body_digest(self):
        h, n = hashlib.sha256(), 0
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    break
                left = size
                while left:
                    b = self.rfile.read(min(left, 1 << 20))
                    h.update(b)
                    n += len(b)
                    left -= len(b)
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left:
                b = self.rfile.read(min(left, 1 << 20))
                if not b:
                    break
                h.update(b)
                n += len(b)
                left -= len(b)
        return n, h.hexdigest()

    def echo(self):
        n, digest = self.body_digest()
        out = json.dumps({"method": self.command, "path": self.path,
                          "headers": {k: v for k, v in self.headers.items()},
                          "length": n, "sha256": digest}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.send_header("X-Echo", "1")
        self.send_header("Set-Cookie", "app=1; Path=/")
        self.end_headers()
        self.wfile.write(out)

    do_POST = do_PUT = do_PATCH = do_DELETE = echo

    def do_GET(self):
        if self.path.startswith("/chunked"):
            n = int(self.path.split("n=")[1]) if "n=" in self.path else 10
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(n):
                line = ("line %d\n" % i).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path.startswith("/ws"):
            return self.websocket()
        if self.path.startswith("/bytes"):
            n = int(self.path.split("n=")[1])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = b"x" * (1 << 20)
            while n:
                self.wfile.write(block[:min(n, len(block))])
                n -= min(n, len(block))
            return
        self.echo()

    def websocket(self):
        key = self.headers.get("Sec-WebSocket-Key", "")
        acc = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", acc)
        self.end_headers()
        self.wfile.flush()
        while True:
            hdr = self.rfile.read(2)
            if len(hdr) < 2:
                return
            op, ln = hdr[0] & 0x0F, hdr[1] & 0x7F
            if ln == 126:
                ln = int.from_bytes(self.rfile.read(2), "big")
            elif ln == 127:
                ln = int.from_bytes(self.rfile.read(8), "big")
            mask = self.rfile.read(4) if hdr[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(ln)))
            if op == 8:
                self.wfile.write(b"\x88\x00")
                return
            head = bytes([0x80 | op])
            head += bytes([len(data)]) if len(data) < 126 else b"\x7e" + len(data).to_bytes(2, "big")
            self.wfile.write(head + data)
            self.wfile.flush()


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True


Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
