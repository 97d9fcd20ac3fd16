"""Operating deskboxd: GET /metrics in Prometheus' text format counting
requests, X-Request-Id on every answer and in the logs (text and JSON),
--config files, and the systemd unit in contrib/."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? '
                  r'(-?[0-9.eE+-]+|\+Inf|NaN)$')


def parse_metrics(text):
    """{(name, labels): value}; None when a line is not valid exposition text."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = LINE.match(line)
        if not m:
            return None, line
        out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out, None


def metrics(t, srv):
    r = srv.request("GET", "/metrics")
    t.ok(r.status == 200 and r.header("Content-Type").startswith("text/plain; version=0.0.4"),
         "GET /metrics answers Prometheus text", r.status)
    m, bad = parse_metrics(r.body.decode())
    t.ok(m is not None, "every line parses as exposition text", bad)
    return m or {}


def test_metrics(t, srv):
    key = ("deskbox_http_requests_total", '{route="GET /healthz",status="200"}')
    before = metrics(t, srv).get(key, 0)
    for _ in range(3):
        srv.request("GET", "/healthz", token=None)
    m = metrics(t, srv)
    t.eq(m.get(key, 0) - before, 3, "three /healthz requests counted")
    t.ok(m.get(("deskbox_sandboxes", '{status="running"}')) == 1,
         "one sandbox running", {k: v for k, v in m.items() if k[0] == "deskbox_sandboxes"})
    t.ok(("deskbox_warm_pool_ready", "") in m, "the warm pool's size is there")
    t.ok(any(k[0] == "deskbox_http_request_duration_seconds_bucket" for k in m),
         "request latency histogram")
    t.ok(any(k[0] == "deskbox_screenshot_encode_seconds_count" and v >= 1 for k, v in m.items()),
         "screenshot encode time recorded")
    t.ok(m.get(("deskbox_upload_bytes_total", ""), 0) >= 1000 and
         m.get(("deskbox_download_bytes_total", ""), 0) >= 1000, "bytes up and down counted")
    r = srv.request("GET", "/metrics", token=None)
    t.eq(r.status, 401, "/metrics needs the token")


def test_request_ids(t, srv, sid):
    r = srv.request("GET", "/v1/sandboxes")
    rid = r.header("X-Request-Id")
    t.ok(rid and re.fullmatch(r"[0-9a-f]{16}", rid), "an X-Request-Id on every answer", rid)
    r = srv.request("GET", "/v1/sandboxes/" + "0" * 32, headers={"X-Request-Id": "client-42"})
    t.ok(r.status == 404 and r.header("X-Request-Id") == "client-42",
         "a client's own id comes back, on errors too", r.header("X-Request-Id"))
    r = srv.request("GET", "/v1/sandboxes", headers={"X-Request-Id": "bad id\x7f"})
    t.ok(r.header("X-Request-Id") != "bad id\x7f" and len(r.header("X-Request-Id") or "") == 16,
         "an id that cannot go in a header is replaced")


def test_json_logs(t):
    srv = dbx.Server(args=("--log-format", "json", "--log-level", "debug"))
    try:
        srv.request("GET", "/healthz", token=None, headers={"X-Request-Id": "trace-me-1"})
        srv.request("GET", "/v1/nothing-here", headers={"X-Request-Id": "trace-me-2"})
    finally:
        srv.stop()
    lines = [ln for ln in open(srv.log_path, encoding="utf-8", errors="replace").read()
             .splitlines() if ln.strip()]
    parsed = []
    for ln in lines:
        try:
            parsed.append(json.loads(ln))
        except ValueError:
            pass
    t.ok(lines and len(parsed) == len(lines), "--log-format json: every line is a JSON object",
         [ln for ln in lines if not ln.startswith("{")][:3])
    t.ok(all({"ts", "level", "msg"} <= set(p) for p in parsed), "each has ts, level and msg")
    mine = [p for p in parsed if p.get("request_id") in ("trace-me-1", "trace-me-2")]
    t.ok(len({p["request_id"] for p in mine}) == 2 and
         any("404" in p["msg"] for p in mine if p["request_id"] == "trace-me-2"),
         "the request's lines carry its X-Request-Id", mine)


def test_config(t):
    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    conf.write("# a comment\nmax-sandboxes = 1\n  exec-timeout 5   # trailing\n")
    conf.close()
    srv = dbx.Server(args=("--config", conf.name))
    try:
        a = srv.request("POST", "/v1/sandboxes", {})
        b = srv.request("POST", "/v1/sandboxes", {})
        t.ok(a.status == 201 and b.status == 429, "--config: max-sandboxes 1 applies",
             (a.status, b.status))
        if a.status == 201:
            r = srv.exec(a.json()["id"], ["sleep", "30"])
            t.ok(r.get("timed_out"), "--config: exec-timeout 5 applies", r)
    finally:
        srv.cleanup()
    bad = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    bad.write("max-sandboxes lots\n")
    bad.close()
    p = subprocess.run([os.path.join(dbx.BUILD, "deskboxd"), "--config", bad.name],
                       capture_output=True, timeout=30)
    t.ok(p.returncode == 2 and b"lots" in p.stderr, "a bad value in the file is refused",
         p.stderr[-300:])
    os.unlink(conf.name)
    os.unlink(bad.name)


def test_systemd(t):
    tool = shutil.which("systemd-analyze")
    if not tool:
        t.skip("systemd-analyze verify", "systemd-analyze is not installed")
        return
    d = tempfile.mkdtemp()
    unit = open(os.path.join(ROOT, "contrib", "deskboxd.service")).read()
    unit = unit.replace("/usr/local/lib/deskbox/deskboxd", os.path.join(dbx.BUILD, "deskboxd"))
    path = os.path.join(d, "deskboxd.service")
    with open(path, "w") as f:
        f.write(unit)
    p = subprocess.run([tool, "verify", path], capture_output=True, timeout=60)
    out = (p.stdout + p.stderr).decode(errors="replace")
    # verify also checks units the file names (network-online.target) and
    # may grumble about the host's own units: only lines about ours count.
    ours = [ln for ln in out.splitlines() if "deskboxd.service" in ln]
    t.ok(p.returncode == 0 and not ours, "systemd-analyze verify accepts contrib/deskboxd.service",
         out[-800:])
    shutil.rmtree(d)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({})["id"]
        srv.screenshot(sid)
        r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/workspace/m.bin" % sid,
                        b"x" * 5000)
        srv.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/m.bin" % sid)
        test_metrics(t, srv)
        test_request_ids(t, srv, sid)
    finally:
        srv.cleanup()
    test_json_logs(t)
    test_config(t)
    test_systemd(t)
    t.done()


main()
