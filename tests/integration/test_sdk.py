"""The Python SDK (clients/python) end to end: installed with pip into a
fresh venv without a package index, then a script run by that venv's
python against a real deskboxd: create, screenshot, launch an xterm, click
and type into it and read the file back through files.download, exec,
code_run streaming (output arrives before the end), files round trip,
errors carrying the server's code, and the context manager deleting the
sandbox."""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

SDK = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))

# Runs inside the venv; prints "CHECK 1|0 name [detail]" per check.
SCRIPT = r'''
import hashlib, io, os, socket, struct, sys, tarfile, threading, time, zipfile
import urllib.error, urllib.request
import deskbox
from deskbox import Deskbox, DeskboxError, NotFound, Unauthorized

def check(cond, name, detail=""):
    print("CHECK %d %s\t%s" % (1 if cond else 0, name, str(detail).replace("\n", " ")[:300]),
          flush=True)
    return cond

def poll(fn, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)

check(os.path.dirname(deskbox.__file__).startswith(sys.prefix),
      "deskbox is imported from the venv", deskbox.__file__)
box = Deskbox()  # DESKBOX_URL and DESKBOX_TOKEN from the environment
sbx = box.create(display=(1024, 768), memory_mb=1024, env={"GREETING": "héllo"})
try:
    check(len(sbx.id) == 32 and sbx.status == "running", "create returns a running Sandbox")
    check(any(s.id == sbx.id for s in box.list()), "list shows it")
    check(box.get(sbx.id).info["display"] == {"width": 1024, "height": 768}, "get")

    png = sbx.desktop.screenshot()
    w, h = struct.unpack(">II", png[16:24])
    check(png[:8] == b"\x89PNG\r\n\x1a\n" and (w, h) == (1024, 768),
          "screenshot is a PNG of the display size", (w, h))
    part = sbx.desktop.screenshot(region=(0, 0, 200, 100))
    check(struct.unpack(">II", part[16:24]) == (200, 100), "screenshot of a region")

    text = "echo héllo 你好 ✓"
    r = sbx.desktop.launch(["xterm", "-u8", "-geometry", "60x10+100+100", "-e", "sh", "-c",
                            "cat > /workspace/typed.txt"], timeout_ms=20000)
    win = r.get("window") or {}
    check(win.get("width", 0) > 100, "launch answers with the xterm's window", r)
    cx = win.get("x", 100) + win.get("width", 200) // 2
    cy = win.get("y", 100) + win.get("height", 100) // 2
    sbx.desktop.click(x=cx, y=cy)
    sbx.desktop.type_text(text)
    sbx.desktop.key("Return")
    def typed():
        try:
            return sbx.files.download("typed.txt").decode("utf-8") == text + "\n"
        except NotFound:
            return False
    check(poll(typed), "clicked and typed text reads back exactly through files.download")
    sbx.desktop.key("ctrl+d")
    x, y = sbx.desktop.cursor()
    check((x, y) == (cx, cy), "cursor is where the click was", (x, y, cx, cy))
    check(isinstance(sbx.desktop.windows(), list), "windows")
    check(sbx.desktop.wait(until="stable", quiet_ms=100)["timed_out"] in (True, False), "wait")

    res = sbx.process.exec(["sh", "-c", "echo $GREETING; echo oops >&2; exit 3"], timeout_s=30)
    check((res.exit_code, res.stdout, res.stderr) == (3, "héllo\n", "oops\n"),
          "exec: exit code, stdout and stderr", res)
    check(sbx.process.exec("printf '\\377'").stdout_bytes == b"\xff",
          "exec of a shell string, exact bytes")

    code = "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')\n"
    t0 = time.monotonic()
    seen = []
    for ev in sbx.process.code_run(code, stream=True, timeout_s=30):
        seen.append((time.monotonic() - t0, ev))
    first = [t for t, ev in seen if ev.type == "stdout" and "first" in ev.text]
    last = seen[-1][1] if seen else None
    check(last is not None and last.type == "result" and last.result.exit_code == 0,
          "code_run stream ends with the result", [e.type for _, e in seen])
    check(first and seen[-1][0] - first[0] >= 1.0,
          "streamed output arrives before the end", [(round(t, 2), e.type) for t, e in seen])
    out = "".join(e.text for _, e in seen if e.type == "stdout")
    check(out == "first\nsecond\n", "streamed stdout is complete", out)
    check(sbx.process.code_run("print(6*7)").stdout == "42\n", "code_run")
    evs = list(sbx.process.exec_stream(["sh", "-c", "echo a; exit 5"]))
    check(evs[-1].result.exit_code == 5 and evs[0].text == "a\n", "exec_stream")

    data = os.urandom(3 << 20)
    up = sbx.files.upload("dir/blob.bin", io.BytesIO(data))
    check(up["size"] == len(data) and up["sha256"] == hashlib.sha256(data).hexdigest(),
          "upload of a file object", up)
    sink = io.BytesIO()
    n = sbx.files.download_to("dir/blob.bin", sink)
    check(n == len(data) and sink.getvalue() == data, "download_to streams it back")
    check([e["name"] for e in sbx.files.list("dir")] == ["blob.bin"], "files.list")
    sbx.files.mkdir("dir/sub")
    sbx.files.move("dir/blob.bin", "dir/sub/b.bin")
    check(sbx.files.stat("dir/sub/b.bin")["size"] == len(data), "mkdir, move, stat")
    sbx.files.delete("dir", recursive=True)
    check(not sbx.files.exists("dir"), "delete")

    # Trees: an archive round trip, find, search, replace, chmod, watch.
    tree = {"t/a.py": b"print('needle')\n", "t/sub/b.py": b"x = 1\nneedle = 2\n",
            "t/sub/c.txt": os.urandom(5000)}
    for p, b in tree.items():
        sbx.files.upload(p, b)
    digest = {p[2:]: hashlib.sha256(b).hexdigest() for p, b in tree.items()}
    def members(raw, mode):
        with tarfile.open(fileobj=io.BytesIO(raw), mode=mode) as tf:
            return {m.name.lstrip("./"): hashlib.sha256(tf.extractfile(m).read()).hexdigest()
                    for m in tf.getmembers() if m.isfile()}
    tar = sbx.files.archive_download("t")
    check(members(tar, "r:") == digest, "archive_download: a tar of the tree (sha256)",
          members(tar, "r:"))
    sink = io.BytesIO()
    n = sbx.files.archive_download_to("t", sink, format="tar.gz")
    check(n == len(sink.getvalue()) and members(sink.getvalue(), "r:gz") == digest,
          "archive_download_to streams a tar.gz", n)
    zipped = sbx.files.archive_download("t", format="zip")
    with zipfile.ZipFile(io.BytesIO(zipped)) as zf:
        zl = {i.filename for i in zf.infolist() if not i.is_dir()}
    check(zl == set(digest), "archive_download of a zip", zl)
    up = sbx.files.archive_upload("t2", io.BytesIO(tar))
    check(up.get("members", 0) >= 3
          and sbx.files.download("t2/sub/c.txt") == tree["t/sub/c.txt"],
          "archive_upload unpacks it elsewhere", up)
    try:
        sbx.files.archive_upload("t3", b"not an archive")
        check(False, "a bad archive raises")
    except DeskboxError as e:
        check(e.status == 400 and not sbx.files.exists("t3"),
              "a bad archive raises, leaves nothing", e)
    found = sbx.files.find("t", name="*.py")
    check(sorted(e["name"] for e in found["entries"]) == ["a.py", "b.py"], "find name=*.py", found)
    shallow = sbx.files.find("t", name="*.py", max_depth=0)
    check([e["name"] for e in shallow["entries"]] == ["a.py"],
          "find max_depth=0: its entries only", shallow)
    hits = sbx.files.search("t", "needle")
    check(sorted((m["path"].rsplit("/", 1)[-1], m["line"]) for m in hits["matches"])
          == [("a.py", 1), ("b.py", 2)], "search, literal", hits)
    hits = sbx.files.search("t", "^x = [0-9]$", regex=True)
    check([m["text"] for m in hits["matches"]] == ["x = 1"], "search, regex", hits)
    rep = sbx.files.replace(["t/a.py", "t/sub/b.py"], "needle", "pin")
    check(rep["replacements"] == 2 and sbx.files.download("t/a.py") == b"print('pin')\n",
          "replace", rep)
    st = sbx.files.chmod("t/a.py", 0o600)
    st2 = sbx.files.chmod("t/a.py", "0644")
    check(st["mode"] & 0o777 == 0o600 and st2["mode"] & 0o777 == 0o644,
          "chmod, a number and an octal string", st)
    sbx.files.mkdir("w")
    seen_ev = []
    for ev in sbx.files.watch("w", timeout_s=60):
        seen_ev.append(ev)
        if ev["event"] == "ready":
            sbx.files.upload("w/new.txt", b"hi")
        elif ev.get("path", ev.get("to", "")).endswith("/new.txt"):
            break
    check(seen_ev and seen_ev[0]["event"] == "ready" and seen_ev[-1]["event"] in ("create", "move"),
          "watch sees the file made after ready", [e["event"] for e in seen_ev])

    # Interactive: stdin of a background run, a session, a terminal.
    pid = sbx.process.start(["sh", "-c", "cat > /tmp/in.txt"], stdin=True)
    w1 = sbx.process.write_stdin(pid, "hello ")
    w2 = sbx.process.write_stdin(pid, b"world", close=True)
    check(w1["written"] == 6 and w2["closed"], "write_stdin, then close", (w1, w2))
    check(poll(lambda: sbx.process.status(pid).get("status") == "exited"), "cat ends at EOF",
          sbx.process.status(pid))
    check(sbx.files.download("/tmp/in.txt") == b"hello world", "its stdin arrived whole")
    with sbx.sessions.create() as ses:
        ses.exec("cd /tmp && export A=1")
        r = ses.exec("pwd; echo $A", timeout_s=30)
        check((r.exit_code, r.stdout) == (0, "/tmp\n1\n"), "a session keeps cd and variables", r)
        check(any(s["id"] == ses.id for s in sbx.sessions.list()), "sessions.list")
    check(all(s["id"] != ses.id for s in sbx.sessions.list()), "the with block closed it")
    term = sbx.terminals.create(cols=100, rows=30, command=["sleep", "600"])
    check(term["cols"] == 100 and term["rows"] == 30 and term["status"] == "running",
          "terminals.create", term)
    check(any(x["id"] == term["id"] for x in sbx.terminals.list()), "terminals.list")
    sbx.terminals.delete(term["id"])
    check(all(x["id"] != term["id"] for x in sbx.terminals.list()), "terminals.delete")

    try:
        sbx.files.download("no/such/file")
        check(False, "a missing file raises NotFound")
    except NotFound as e:
        check(e.status == 404 and e.code == "not_found" and e.message,
              "a missing file raises NotFound with the server's code", e)
    try:
        sbx.desktop.key("ctrl+nosuchkey")
        check(False, "a bad key raises")
    except DeskboxError as e:
        check(e.status == 400 and e.code == "invalid_argument" and "nosuchkey" in e.message,
              "an error carries the server's code and message", e)
    try:
        Deskbox(token="wrong").list()
        check(False, "a wrong token raises")
    except Unauthorized as e:
        check(e.code == "unauthorized", "a wrong token raises Unauthorized", e)

    url = sbx.vnc_url(view_only=True)
    check(url.startswith(box.url + "/v1/sandboxes/" + sbx.id + "/vnc/?token="), "vnc_url", url)
    # Only "none" here: other modes change this machine's network
    # namespace (test_network.py tests them in namespaces of its own).
    check(sbx.set_network("none").info["network"] == "none", "set_network")
    url = sbx.port_url(8765, ttl_s=60)
    try:
        status = urllib.request.urlopen(url, timeout=30).status
    except urllib.error.HTTPError as e:
        status = e.code
    check(url.startswith(box.url + "/v1/sandboxes/" + sbx.id + "/ports/8765/?deskbox_token=")
          and status == 502, "port_url opens the port without the API token (502: nothing there)",
          (url, status))
    check(sbx.cdp_url() == box.url + "/v1/sandboxes/" + sbx.id + "/browser/cdp", "cdp_url")

    # Kept-alive connections: one per thread; one the server (here: the
    # client's own shutdown) closed is replaced and the call goes through.
    made = []
    if box._t._idle.conn is not None:  # the one the calls above left
        box._t._idle.conn.close()
        box._t._idle.conn = None
    connect = box._t._connect
    box._t._connect = lambda timeout: (made.append(1), connect(timeout))[1]
    box.list()
    for _ in range(10):
        box.list()
    check(len(made) == 1, "eleven calls on one thread use one kept-alive connection", made)
    th = threading.Thread(target=box.list)
    th.start()
    th.join()
    check(len(made) == 2, "another thread gets its own", made)
    box._t._idle.conn.sock.shutdown(socket.SHUT_RDWR)
    check(any(s.id == sbx.id for s in box.list()) and len(made) == 3,
          "a kept connection found closed is replaced and the call answers", made)
    try:
        sbx.desktop.key("ctrl+nosuchkey")
    except DeskboxError:
        pass
    box.list()
    check(len(made) == 3, "an error answer read whole keeps the connection", made)
    box._t._connect = connect
    sbx.stop()
    check(sbx.status == "stopped", "stop")
    sbx.start()
    check(sbx.status == "running" and sbx.files.download("typed.txt") == (text + "\n").encode(),
          "start again, files kept")
finally:
    sbx.delete(missing_ok=True)

with box.create() as tmp:
    inner = tmp.id
    check(tmp.process.exec(["true"]).ok, "a sandbox in a with block works")
try:
    box.get(inner)
    check(False, "the with block deleted the sandbox")
except NotFound:
    check(True, "the with block deleted the sandbox")
'''


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    tmp = tempfile.mkdtemp(prefix="dbx-sdk-")
    venv = os.path.join(tmp, "venv")
    p = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
    if p.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        dbx.skip_all("python3 -m venv does not work here (Debian: python3-venv): " +
                     p.stderr.strip()[-200:])
    py = os.path.join(venv, "bin", "python")
    # --no-index: nothing may come from a package index; the build
    # backend ships inside clients/python.  A copy, so nothing pip writes
    # lands in the tree.
    src = os.path.join(tmp, "src")
    shutil.copytree(SDK, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    p = subprocess.run([py, "-m", "pip", "install", "--no-index", "--disable-pip-version-check",
                        src], capture_output=True, text=True)
    t.ok(p.returncode == 0, "pip install --no-index of clients/python into a fresh venv",
         p.stdout[-1500:] + p.stderr[-1500:])
    srv = dbx.Server()
    try:
        env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port,
                   DESKBOX_TOKEN=srv.token)
        env.pop("PYTHONPATH", None)
        script = os.path.join(tmp, "scenario.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        # From the temp dir, so `import deskbox` cannot find the source tree.
        p = subprocess.run([py, script], capture_output=True, text=True, env=env, cwd=tmp,
                           timeout=600)
        for line in p.stdout.splitlines():
            if line.startswith("CHECK "):
                flag, rest = line[6:].split(" ", 1)
                name, _, detail = rest.partition("\t")
                t.ok(flag == "1", name, detail)
        t.ok(p.returncode == 0, "the script ran to its end", p.stderr[-2000:])
        t.eq([s["id"] for s in srv.request("GET", "/v1/sandboxes").json()["sandboxes"]], [],
             "no sandbox is left")
    finally:
        srv.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    t.done()


if __name__ == "__main__":
    main()
