"""make bench, the port proxy: time to first byte and throughput through
/v1/sandboxes/{id}/ports/{port}/ against the same requests made directly
inside the sandbox (a client in its network namespace), in the same run."""
import http.client
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ECHO = os.path.join(HERE, "..", "tests", "integration", "data", "port_echo.py")

# Inside the sandbox: N requests to 127.0.0.1:PORT, printing each one's time
# to the first byte of the answer (ms), then one download's MB/s.
INNER = r"""
import socket, sys, time
port, n, big = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def get(path, read_all):
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
    first = s.recv(65536)
    t1 = time.perf_counter()
    got = len(first)
    while read_all:
        b = s.recv(1 << 20)
        if not b:
            break
        got += len(b)
    s.close()
    return (t1 - t0) * 1000, got, time.perf_counter() - t0
for _ in range(n):
    print("%.3f" % get("/echo", False)[0])
_, got, secs = get("/bytes?n=%d" % big, True)
print("MBPS %.1f" % (got / secs / 1e6))
"""


def bench_ports(srv, report, quick):
    sid = srv.create({"display": {"width": 800, "height": 600}})["id"]
    with open(ECHO, "rb") as f:
        srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/echo.py" % sid, f.read())
    srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/inner.py" % sid, INNER)
    srv.exec(sid, ["python3", "/workspace/echo.py", "8001"], background=True)
    base = "/v1/sandboxes/%s/ports/8001" % sid
    deadline = time.time() + 30
    while srv.request("GET", base + "/echo").status != 200 and time.time() < deadline:
        time.sleep(0.1)
    n = 20 if quick else 100
    big = (64 if quick else 256) << 20
    inner = srv.exec(sid, ["python3", "/workspace/inner.py", "8001", str(n), str(big)],
                     timeout_s=300)["stdout"].split()
    direct = [float(x) for x in inner if not x.startswith("MBPS")]
    direct_mbps = float(inner[inner.index("MBPS") + 1])
    ttfb = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        conn.request("GET", base + "/echo", headers={"Authorization": "Bearer " + srv.token})
        r = conn.getresponse()
        ttfb.append((time.perf_counter() - t0) * 1000)
        r.read()
        conn.close()
    report("port proxy time to first byte", ttfb, naive=direct,
           naive_name="direct inside", higher_is_better=False)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
    t0 = time.perf_counter()
    conn.request("GET", base + "/bytes?n=%d" % big, headers={"Authorization": "Bearer " + srv.token})
    r = conn.getresponse()
    got = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        got += len(b)
    secs = time.perf_counter() - t0
    conn.close()
    report("port proxy download throughput (%d MB)" % (big >> 20), [got / secs / 1e6],
           unit="MB/s", naive=[direct_mbps], naive_name="direct inside", higher_is_better=True)
    srv.request("DELETE", "/v1/sandboxes/" + sid)
