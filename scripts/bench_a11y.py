"""make bench, the accessibility tree (docs/observation.md): a real chromium
page of ~200 elements (a button and 99 list items with links: ~625 AT-SPI
nodes) and a zenity dialog, in a sandbox created with DESKBOX_A11Y=1, read
through GET …/desktop/accessibility (the resident reader) against the old
way in the same run: one python3 + pyatspi per request
(scripts/bench_a11y_oneshot.py, the reader deskboxd ran before), run the
way deskboxd ran it, through the sandbox's exec agent (POST …/process/exec).
Both are timed by curl (time_total, a new connection each), so the client
costs the same.  Also the idle memory (PSS) of a desktop with DESKBOX_A11Y=1
against one without, and once the reader runs.
`BENCH_ONLY=a11y make bench` runs only this part."""

import json
import os
import subprocess
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = ("<!DOCTYPE html><title>a11y page</title><body>"
        "<button id=b onclick=\"document.title='pressed'\">Press me</button><ul>" +
        "".join("<li><a href='#%d'>item %d</a></li>" % (i, i) for i in range(99)) +
        "</ul></body>")
WINDOW = "a11y page - Chromium"


def curl_ms(srv, method, path, body=None):
    """curl's time_total in ms and the body."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = ["curl", "-s", "-o", out.name, "-w", "%{time_total}", "-X", method,
               "-H", "Authorization: Bearer " + srv.token,
               "http://127.0.0.1:%d%s" % (srv.port, path)]
        if body is not None:
            cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
        p = subprocess.run(cmd, input=json.dumps(body).encode() if body is not None else None,
                           capture_output=True, timeout=120, check=True)
        return float(p.stdout) * 1000, json.load(open(out.name))


def sh(srv, sid, cmd):
    return srv.exec(sid, ["sh", "-c", cmd], timeout_s=60)


def wait(cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.3)
    return False


def old_way(srv, sid, window):
    """The one-shot reader through exec: (ms, node count)."""
    src = open(os.path.join(HERE, "bench_a11y_oneshot.py")).read()
    ms, j = curl_ms(srv, "POST", "/v1/sandboxes/%s/process/exec" % sid, {
        "argv": ["/usr/bin/python3", "-c", src, "tree", window, "64", "", "5000"],
        "env": {"PYTHONDONTWRITEBYTECODE": "1"}, "timeout_s": 60})
    try:
        return ms, json.loads(j.get("stdout") or "{}").get("count", 0)
    except ValueError:
        return ms, 0


def new_way(srv, sid, window):
    ms, j = curl_ms(srv, "GET", "/v1/sandboxes/%s/desktop/accessibility?window=%s" %
                    (sid, urllib.parse.quote(window)))
    return ms, j.get("count", 0)


def compare(srv, report, sid, window, label, n, target=None):
    new = [new_way(srv, sid, window) for _ in range(n)]
    old = [old_way(srv, sid, window) for _ in range(max(3, n // 2))]
    nodes = max(c for _, c in new)
    report("a11y tree, %s (%d nodes), resident reader" % (label, nodes), [m for m, _ in new],
           naive=[m for m, _ in old], naive_name="one-shot pyatspi", target=target)
    return nodes


def memory(srv, report, idle_cost):
    """Idle PSS of a desktop with and without DESKBOX_A11Y=1, and with the
    reader started."""
    off = srv.create({"display": {"width": 1024, "height": 768}})["id"]
    on = srv.create({"display": {"width": 1024, "height": 768},
                     "env": {"DESKBOX_A11Y": "1"}})["id"]
    try:
        time.sleep(5)  # let both settle (their daemons start, pages fault in)
        pss_off, _ = idle_cost(srv, [off])
        pss_on, _ = idle_cost(srv, [on])
        srv.request("GET", "/v1/sandboxes/%s/desktop/accessibility" % on)
        time.sleep(2)
        pss_reader, _ = idle_cost(srv, [on])
        report("idle desktop PSS, DESKBOX_A11Y off", [pss_off], unit="MB")
        report("idle desktop PSS, DESKBOX_A11Y=1", [pss_on], unit="MB")
        report("idle desktop PSS, DESKBOX_A11Y=1, reader started", [pss_reader], unit="MB")
    finally:
        srv.request("DELETE", "/v1/sandboxes/" + off)
        srv.request("DELETE", "/v1/sandboxes/" + on)


def run(srv, report, idle_cost, quick):
    if not os.path.isdir("/usr/lib/python3/dist-packages/pyatspi") or \
            not os.path.exists("/usr/bin/chromium"):
        print("# a11y: skipped (python3-pyatspi or chromium missing: scripts/install-deps.sh)")
        return
    n = 5 if quick else 15
    sid = srv.create({"display": {"width": 1024, "height": 768},
                      "env": {"DESKBOX_A11Y": "1"}})["id"]
    try:
        sh(srv, sid, "mkdir -p /tmp/site && cat > /tmp/site/index.html <<'EOF'\n%s\nEOF" % PAGE)
        srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, {
            "argv": ["sh", "-c", "cd /tmp/site && exec python3 -m http.server 8000 "
                     "--bind 127.0.0.1"], "background": True})
        wait(lambda: sh(srv, sid, "curl -s -o /dev/null -w '%{http_code}' "
                        "http://127.0.0.1:8000/")["stdout"] == "200", 20)
        srv.post(sid, "browser", {"url": "http://127.0.0.1:8000/", "timeout_ms": 60000})
        if not wait(lambda: new_way(srv, sid, WINDOW)[1] >= 200, 90):
            print("# a11y: the page's tree never held 200 nodes")
            return
        nodes = compare(srv, report, sid, WINDOW, "chromium page", n, target="<= 300 ms")
        srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, {
            "argv": ["zenity", "--question", "--title", "Proceed", "--text", "Proceed"],
            "background": True})
        if wait(lambda: new_way(srv, sid, "Proceed")[1] > 0, 30):
            compare(srv, report, sid, "Proceed", "zenity dialog", n)
        print("# a11y: the chromium page's window holds %d nodes" % nodes)
    finally:
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    memory(srv, report, idle_cost)
