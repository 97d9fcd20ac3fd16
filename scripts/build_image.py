#!/usr/bin/env python3
"""make image: builds the Debian 12 desktop image (docs/images.md) through
deskboxd's own API, POST /v1/images {"name", "build": "debian"}, then checks
it: a sandbox from it runs python3, has chromium, and types into xterm.

It starts its own deskboxd on a free loopback port over --state-dir (stop
another deskboxd using that state dir first), waits for the build (bounded:
--timeout, default 1800 s), prints the figures and exits 0 only if all
worked.  Usage: build_image.py --build DIR --state-dir DIR [--name debian12]
[--mirror URL] [--keep]"""

import argparse
import http.client
import json
import os
import re
import secrets
import subprocess
import sys
import time


def request(port, token, method, path, body=None, timeout=600):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Authorization": "Bearer " + token}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    conn.close()
    try:
        return r.status, json.loads(raw) if raw else None
    except ValueError:
        return r.status, raw


def start_server(build, state_dir, token):
    cmd = [os.path.join(build, "deskboxd"), "--listen", "127.0.0.1:0", "--state-dir",
           state_dir, "--token", token]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=sys.stderr)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode(errors="replace")
        if not line:
            break
        m = re.search(r"listening on https?://[^:]+:(\d+)", line)
        if m:
            import threading
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, int(m.group(1))
    proc.kill()
    raise SystemExit("build_image: deskboxd did not start")


def serving(state_dir):
    """The pid of a deskboxd already running over `state_dir`, or None: a
    second one would take that one's containers for leftovers of a crash
    and remove them."""
    want = os.path.realpath(state_dir)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if not argv or os.path.basename(argv[0]) != "deskboxd":
            continue
        state = "/var/lib/deskbox"
        for i, a in enumerate(argv):
            if a == "--state-dir" and i + 1 < len(argv):
                state = argv[i + 1]
        if os.path.realpath(state) == want:
            return int(pid)
    return None


def wait_build(port, token, name, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st, j = request(port, token, "GET", "/v1/images/" + name)
        if st == 200 and j.get("status") != "building":
            return j
        time.sleep(5)
    raise SystemExit("build_image: not built after %d s" % timeout)


def check(port, token, name):
    """A sandbox from the image: python3, chromium and typing into xterm."""
    t0 = time.monotonic()
    st, sb = request(port, token, "POST", "/v1/sandboxes", {"image": name})
    if st != 201:
        raise SystemExit("build_image: create from the image: %d %s" % (st, sb))
    create_s = time.monotonic() - t0
    sid = sb["id"]
    ok = True
    try:
        def ex(argv):
            return request(port, token, "POST", "/v1/sandboxes/%s/process/exec" % sid,
                           {"argv": argv, "timeout": 60})[1]
        r = ex(["python3", "-c", "import sys; print(sys.version.split()[0])"])
        print("python3 in the image: %s" % r["stdout"].strip())
        ok = ok and r["exit_code"] == 0
        r = ex(["sh", "-c", "chromium --version"])
        print("chromium: %s" % r["stdout"].strip())
        ok = ok and r["exit_code"] == 0 and "Chromium" in r["stdout"]
        text = "deskbox typed 你好"
        st, _ = request(port, token, "POST", "/v1/sandboxes/%s/desktop/launch" % sid,
                        {"argv": ["xterm", "-e", "sh", "-c",
                                  "read line; printf '%s' \"$line\" > /tmp/typed; sleep 30"]})
        ok = ok and st in (200, 201)
        time.sleep(2)  # xterm maps its window; typing goes to the focused one
        request(port, token, "POST", "/v1/sandboxes/%s/desktop/type_text" % sid,
                {"text": text + "\n"})
        got = ""
        for _ in range(40):
            r = ex(["cat", "/tmp/typed"])
            got = r["stdout"]
            if got:
                break
            time.sleep(0.25)
        print("typed into xterm: %r" % got)
        ok = ok and got == text
    finally:
        request(port, token, "DELETE", "/v1/sandboxes/" + sid)
    return ok, create_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--name", default="debian12")
    ap.add_argument("--mirror")
    ap.add_argument("--timeout", type=int, default=1800)
    a = ap.parse_args()
    other = serving(a.state_dir)
    if other:
        raise SystemExit("build_image: deskboxd (pid %d) serves %s: stop it, or ask it with "
                         "POST /v1/images {\"name\":\"%s\",\"build\":\"debian\"}"
                         % (other, a.state_dir, a.name))
    token = secrets.token_hex(16)
    proc, port = start_server(a.build, a.state_dir, token)
    try:
        st, j = request(port, token, "GET", "/v1/images/" + a.name)
        if st == 200 and j.get("status") == "ready":
            print("image '%s' exists (DELETE /v1/images/%s to rebuild)" % (a.name, a.name))
        else:
            if st == 200:
                request(port, token, "DELETE", "/v1/images/" + a.name)
            body = {"name": a.name, "build": "debian"}
            if a.mirror:
                body["mirror"] = a.mirror
            t0 = time.monotonic()
            st, j = request(port, token, "POST", "/v1/images", body)
            if st != 202:
                raise SystemExit("build_image: POST /v1/images: %d %s" % (st, j))
            j = wait_build(port, token, a.name, a.timeout)
            if j.get("status") != "ready":
                raise SystemExit("build_image: build failed: %s" % j.get("error"))
            print("built in %.0f s" % (time.monotonic() - t0))
        print("image '%s': %.0f MB, %d packages, digest %s" % (
            a.name, j["size_bytes"] / 1e6, len(j.get("packages", [])), j.get("digest")))
        ok, create_s = check(port, token, a.name)
        print("create from the image: %.2f s" % create_s)
        print("image check: %s" % ("ok" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
