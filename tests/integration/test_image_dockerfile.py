"""Images from a Dockerfile (docs/images.md): a base image (sh and
coreutils, imported as an OCI layout), a build context uploaded with
PUT /v1/images/{name}/context, then POST /v1/images {"name","dockerfile"}
builds with RUN (shell and exec form, as root and as USER), COPY (a file, a
directory's contents, --chown), ADD of a local tar (unpacked), ENV, ARG,
WORKDIR; the build log streams from GET /v1/images/{name}/build to its
end; the image's files on disk are owned by the image's ids (not the
build's range); a template names the image and a sandbox from it sees the
files and the ENV (not the ARG).  Errors: a refused instruction is a 400
naming it and its line, a missing FROM image a 404, COPY without a context
a 400, a failing RUN a failed build whose error and log say which step and
what it printed, too many instructions a 429, a context upload over 512 MiB
a 413 before its body.  A host directory as the context with a glob COPY.
deskboxd stopped during a RUN: the container goes with it and the next
deskboxd shows the build failed."""

import io
import json
import os
import shutil
import socket
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_images import copy, ldd, make_layout  # noqa: E402

TOOLS = ["dash", "cat", "cp", "mkdir", "chown", "chmod", "dirname", "tar", "id", "ls", "env",
         "rm", "ln", "sleep"]

DOCKERFILE = """\
# a comment, then the instructions
FROM dfbase:latest
ARG GREETING=hi
ENV APP_HOME=/opt/app MODE="built from a Dockerfile"
WORKDIR $APP_HOME
COPY hello.txt ./
COPY dir /opt/tree/
ADD pack.tar /opt/unpacked/
COPY --chown=1000:1000 hello.txt /opt/owned.txt
RUN echo build-output-marker && \\
    echo "$GREETING $MODE" > made.txt && id -u > uid.txt
RUN ["/bin/sh", "-c", "cat hello.txt > copied-by-run.txt"]
RUN mkdir -p /opt/app/u && chown 1000:1000 /opt/app/u
USER 1000
RUN id -u > /opt/app/u/uid.txt
LABEL purpose=test
EXPOSE 8080
CMD ["/bin/sh"]
"""


def fill_base(root):
    """sh and the coreutils the build's COPY and the checks use."""
    for d in ("usr/bin", "usr/lib", "usr/lib64", "etc"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        os.symlink("usr/" + (link if link != "sbin" else "bin"), os.path.join(root, link))
    for tool in TOOLS:
        p = shutil.which(tool)
        copy(root, p)
        for lib in ldd(os.path.realpath(p)):
            copy(root, lib)
    os.symlink("dash", os.path.join(root, "usr/bin/sh"))
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n")
    with open(os.path.join(root, "etc/group"), "w") as f:
        f.write("root:x:0:\nuser:x:1000:\n")


def context_tar():
    """The build context: hello.txt, dir/sub/a.txt, dir/.hidden, pack.tar."""
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w") as tf:
        data = b"unpacked by ADD\n"
        ti = tarfile.TarInfo("inner.txt")
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    files = {"hello.txt": b"hello from the context\n", "dir/sub/a.txt": b"a\n",
             "dir/.hidden": b"dot\n", "pack.tar": inner.getvalue()}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = 0o644
            tf.addfile(ti, io.BytesIO(data))
    return out.getvalue()


def follow_log(srv, name, timeout=600):
    """GET /v1/images/{name}/build read to its end: (text, seconds)."""
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    s.sendall(("GET /v1/images/%s/build HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Connection: close\r\n\r\n" % (name, srv.token)).encode())
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    head, _, body = buf.partition(b"\r\n\r\n")
    if b"chunked" in head.lower():
        out, rest = b"", body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size.split(b";")[0] or b"0", 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return head.split(b"\r\n")[0].decode(), body.decode(errors="replace"), time.monotonic() - t0


def build(srv, name, text):
    return srv.request("POST", "/v1/images", {"name": name, "dockerfile": text})


def refusals(t, srv):
    r = build(srv, "bad1", "FROM dfbase\nRUN true\nONBUILD RUN x\n")
    msg = r.json()["error"]["message"] if r.status == 400 else r.body[:300]
    t.ok(r.status == 400 and "ONBUILD" in msg and "line 3" in msg,
         "a refused instruction: 400 naming it and its line", msg)
    r = build(srv, "bad2", "FROM dfbase\nADD https://example.org/x.tgz /x\n")
    t.ok(r.status == 400 and "URL" in r.body.decode(), "ADD of a URL: 400", r.body[:300])
    r = build(srv, "bad3", "FROM no-such-base\nRUN true\n")
    t.ok(r.status == 404 and "no-such-base" in r.body.decode(),
         "a FROM image that does not exist: 404 naming it", r.body[:300])
    r = build(srv, "bad4", "FROM dfbase\nCOPY x /x\n")
    t.ok(r.status == 400 and "context" in r.body.decode(),
         "COPY without a build context: 400 saying so", r.body[:300])
    r = srv.request("POST", "/v1/images", {"name": "bad5", "dockerfile": "FROM dfbase\n",
                                           "contxt": "/x"})
    t.eq(r.status, 400, "an unknown member: 400")
    r = srv.request("POST", "/v1/images", {"name": "bad8", "dockerfile": "FROM dfbase\n",
                                           "args": {"NOT_DECLARED": "1"}})
    t.ok(r.status == 400 and "NOT_DECLARED" in r.body.decode(),
         "a build arg no ARG declares: 400 naming it", r.body[:200])
    r = build(srv, "bad6", "FROM dfbase\n" + "RUN true\n" * 200)
    t.eq(r.status, 429, "more than 200 instructions: 429")
    r = build(srv, "bad7", "FROM dfbase\n#" + "x" * 70000 + "\n")
    t.eq(r.status, 400, "a Dockerfile over 64 KiB: 400")
    t.eq(srv.request("GET", "/v1/images/bad1").status, 404, "a refused build leaves no image")


def failing_run(t, srv):
    r = build(srv, "fails", "FROM dfbase\nRUN echo about-to-fail\nRUN echo second && exit 3\n")
    t.eq(r.status, 202, "a build whose RUN fails starts (202)")
    _, log, _ = follow_log(srv, "fails")
    j = srv.request("GET", "/v1/images/fails").json()
    err = j.get("error", "")
    t.ok(j.get("status") == "failed" and "RUN (line 3)" in err and "exit status 3" in err
         and "second" in err, "the build failed, its error naming the step, its status and "
         "its last output", j)
    t.ok("about-to-fail" in log and "second" in log and "the build failed" in log,
         "the log holds each step's output and the failure", log[-800:])
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/images", {"name": "too-slow", "timeout_s": 2, "dockerfile":
                                           "FROM dfbase\nRUN echo begun && sleep 619\n"})
    t.eq(r.status, 202, "a build with a 2 s time limit starts")
    follow_log(srv, "too-slow")
    j = srv.request("GET", "/v1/images/too-slow").json()
    import subprocess
    left = subprocess.run(["pgrep", "-f", "sleep 619"], capture_output=True, text=True).stdout
    t.ok(j.get("status") == "failed" and "longer than 2 s" in j.get("error", "")
         and time.monotonic() - t0 < 15 and left == "",
         "past its time limit the build fails, saying so, its container gone (%.1f s)"
         % (time.monotonic() - t0), (j, left))
    srv.request("DELETE", "/v1/images/too-slow")
    r = srv.request("POST", "/v1/images", {"name": "x", "timeout_s": 0, "dockerfile": "FROM dfbase\n"})
    t.eq(r.status, 400, "timeout_s 0: 400")
    r = srv.request("POST", "/v1/sandboxes", {"image": "fails"})
    t.eq(r.status, 400, "a failed build is no image to create from")
    t.eq(srv.request("DELETE", "/v1/images/fails").status, 204, "a failed build is deleted")


def sandbox_checks(t, srv, name):
    r = srv.request("POST", "/v1/templates", {"name": "tpl-" + name, "image": name})
    t.eq(r.status, 201, "a template names the built image")
    r = srv.request("POST", "/v1/sandboxes", {"template": "tpl-" + name})
    t.ok(r.status == 201, "a sandbox from the template", r.body[:300])
    if r.status != 201:
        return
    sid = r.json()["id"]

    def sh(cmd):
        return srv.exec(sid, ["/bin/sh", "-c", cmd]).get("stdout", "")

    t.eq(sh("cat /opt/app/hello.txt"), "hello from the context\n", "COPY of a file (./ "
         "under WORKDIR)")
    t.eq(sh("cat /opt/tree/sub/a.txt /opt/tree/.hidden"), "a\ndot\n",
         "COPY of a directory copies its contents, dotfiles too")
    t.eq(sh("cat /opt/unpacked/inner.txt"), "unpacked by ADD\n", "ADD unpacks a local tar")
    t.eq(sh("cat /opt/app/made.txt"), "hey built from a Dockerfile\n",
         "RUN saw the ARG (the request's value over its default) and the ENV, in the WORKDIR")
    t.eq(sh("cat /opt/app/uid.txt /opt/app/u/uid.txt"), "0\n1000\n",
         "RUN ran as the image's root, and as USER 1000 after USER")
    t.eq(sh("cat /opt/app/copied-by-run.txt"), "hello from the context\n", "RUN's exec form")
    env = sh("env")
    t.ok("APP_HOME=/opt/app" in env and "MODE=built from a Dockerfile" in env
         and "GREETING" not in env, "the sandbox has the image's ENV, not its ARG", env)
    srv.request("DELETE", "/v1/sandboxes/" + sid)
    srv.request("DELETE", "/v1/templates/tpl-" + name)


def good_build(t, srv, work):
    r = srv.request("PUT", "/v1/images/app1/context", context_tar(),
                    headers={"Content-Type": "application/x-tar"})
    t.ok(r.status == 201 and r.json().get("context_bytes", 0) > 1000,
         "PUT …/context stores the build context", r.body[:300])
    r = srv.request("POST", "/v1/images", {"name": "app1", "dockerfile": DOCKERFILE,
                                           "args": {"GREETING": "hey"}})
    bid = r.json().get("build_id", "") if r.status == 202 else ""
    t.ok(r.status == 202 and r.json().get("status") == "building" and len(bid) == 16
         and r.json().get("log") == "/v1/images/app1/build", "POST with a dockerfile: 202, "
         "building, its build id, where its log is", r.body[:300])
    status, log, secs = follow_log(srv, "app1")
    t.diag("the build of %d instructions took %.1f s (log followed to its end)"
           % (16, secs))
    t.ok(status.endswith("200 OK") and log.startswith("build %s of image 'app1'" % bid)
         and "STEP 1/16: FROM dfbase:latest" in log
         and "build-output-marker" in log and "image 'app1' built" in log,
         "the log streams every step and the RUN's output to the end", log[-1500:])
    j = srv.request("GET", "/v1/images/app1").json()
    c = j.get("config", {})
    t.ok(j.get("status") == "ready" and j.get("source") == "dockerfile:dfbase:latest"
         and j.get("digest", "").startswith("sha256:") and j.get("steps") == 16,
         "the image is ready, its manifest says where it came from", json.dumps(j)[:600])
    t.ok("APP_HOME=/opt/app" in c.get("env", []) and c.get("cmd") == ["/bin/sh"]
         and c.get("labels") == {"purpose": "test"} and c.get("exposed_ports") == ["8080"]
         and c.get("workdir") == "/opt/app" and c.get("user") == "1000",
         "CMD, LABEL, EXPOSE, ENV, WORKDIR and USER are recorded", c)
    root = os.path.join(srv.state_dir, "images", "app1", "rootfs")
    owners = [(os.lstat(os.path.join(root, p)).st_uid, os.lstat(os.path.join(root, p)).st_gid)
              for p in ("opt/app/made.txt", "opt/owned.txt", "opt/app/u/uid.txt", "usr/bin")]
    t.eq(owners, [(0, 0), (1000, 1000), (1000, 1000), (0, 0)],
         "on disk the image's files are owned by its own ids, not the build's range")
    t.ok(not os.path.exists(os.path.join(srv.state_dir, "images", ".context-app1.tar")),
         "the uploaded context is gone after the build")
    r = build(srv, "app1", DOCKERFILE)
    t.eq(r.status, 409, "a second build of an existing name: 409")
    sandbox_checks(t, srv, "app1")


def stopped_during_build(t, srv):
    """deskboxd stopped while a RUN runs: the build container is killed,
    deskboxd exits, and the next one shows the build failed."""
    r = build(srv, "slow", "FROM dfbase\nRUN echo started && sleep 617\n")
    t.eq(r.status, 202, "a long build starts")
    log = dbx.wait_until(lambda: "\nstarted\n" in open(os.path.join(
        srv.state_dir, "images", ".build-slow.log")).read(), timeout=60)
    t.ok(log, "its RUN is running (its output is in the log)")
    t0 = time.monotonic()
    srv.stop()
    t.ok(time.monotonic() - t0 < 20, "deskboxd stops at once during a build (%.1f s)"
         % (time.monotonic() - t0))
    import subprocess
    left = subprocess.run(["pgrep", "-f", "sleep 617"], capture_output=True, text=True).stdout
    t.ok(left == "", "the build container is gone with it",
         left + open(srv.log_path, errors="replace").read()[-2000:])
    srv2 = dbx.Server(state_dir=srv.state_dir)
    r = build(srv2, "slow2", "FROM dfbase\nRUN echo started && sleep 618\n")
    t.eq(r.status, 202, "another long build starts")
    srv2.stop()
    left = subprocess.run(["pgrep", "-f", "sleep 618"], capture_output=True, text=True).stdout
    t.ok(left == "", "stopped at once after the POST, its container (starting or not) is gone "
         "too", left + open(srv2.log_path, errors="replace").read()[-2000:])
    srv2 = dbx.Server(state_dir=srv.state_dir)
    try:
        j = srv2.request("GET", "/v1/images/slow").json()
        t.ok(j.get("status") == "failed" and "stopped during the build" in j.get("error", ""),
             "the next deskboxd shows the build failed, saying why", j)
        t.eq(srv2.request("DELETE", "/v1/images/slow").status, 204, "and deletes it")
        srv2.request("DELETE", "/v1/images/slow2")
    finally:
        srv2.cleanup()


def context_dir_and_limits(t, srv, work):
    """`context` as a host directory, COPY with a glob; an upload over the
    size bound is refused before its body is read."""
    ctx = os.path.join(work, "ctx")
    os.makedirs(ctx)
    for n in ("one.txt", "two.txt", "skip.md"):
        with open(os.path.join(ctx, n), "w") as f:
            f.write(n + "\n")
    os.chmod(os.path.join(ctx, "one.txt"), 0o600)
    r = srv.request("POST", "/v1/images", {"name": "app2", "context": ctx, "dockerfile":
                                           "FROM dfbase\nCOPY *.txt /g/\nRUN cat /g/one.txt\n"})
    t.eq(r.status, 202, "a build with a host directory as its context")
    follow_log(srv, "app2")
    j = srv.request("GET", "/v1/images/app2").json()
    g = os.path.join(srv.state_dir, "images", "app2", "rootfs", "g")
    t.ok(j.get("status") == "ready" and sorted(os.listdir(g)) == ["one.txt", "two.txt"],
         "COPY of a glob copies what it matches (a 0600 file too)", j.get("error"))
    srv.request("DELETE", "/v1/images/app2")
    r = srv.request("POST", "/v1/images", {"name": "app4", "context": ctx, "dockerfile":
                                           "FROM dfbase\nCOPY ../etc /x\n"})
    follow_log(srv, "app4")
    j = srv.request("GET", "/v1/images/app4").json()
    t.ok(j.get("status") == "failed" and "outside the build context" in j.get("error", ""),
         "COPY of ../ fails the build: outside the context", j)
    srv.request("DELETE", "/v1/images/app4")
    r = build(srv, "app3", "FROM dfbase\nCOPY x /x\n")
    t.eq(r.status, 400, "the directory context is not left behind for the next build")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(("PUT /v1/images/big/context HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s"
               "\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n"
               % (srv.token, 600 << 20)).encode())
    head = s.recv(4096).decode(errors="replace")
    s.close()
    t.ok(head.startswith("HTTP/1.1 413"), "a context over 512 MiB: 413 before the body",
         head[:200])


def cli_build(t, srv, work):
    """deskbox build NAME DIR: the context sent, the log printed, exit 0;
    a failing build exits 5 with the reason."""
    import subprocess
    cli = os.path.join(dbx.BUILD, "deskbox")
    d = os.path.join(work, "cli-ctx")
    os.makedirs(d)
    with open(os.path.join(d, "data.txt"), "w") as f:
        f.write("from the cli\n")
    with open(os.path.join(d, "Dockerfile"), "w") as f:
        f.write("FROM dfbase\nARG WHO=nobody\nCOPY data.txt /d/\nRUN echo \"by $WHO\" >> "
                "/d/data.txt && cat /d/data.txt\n")
    env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port,
               DESKBOX_TOKEN=srv.token)
    p = subprocess.run([cli, "build", "fromcli", d, "--arg", "WHO=cli"], env=env,
                       capture_output=True, text=True, timeout=300)
    f = os.path.join(srv.state_dir, "images", "fromcli", "rootfs", "d", "data.txt")
    got = open(f).read() if os.path.exists(f) else None
    t.ok(p.returncode == 0 and "STEP 4/4: RUN" in p.stdout and "by cli" in p.stdout
         and got == "from the cli\nby cli\n", "deskbox build NAME DIR: context, args, "
         "the log on stdout, exit 0", p.stdout[-800:] + p.stderr[-400:])
    with open(os.path.join(d, "Dockerfile.bad"), "w") as f:
        f.write("FROM dfbase\nRUN echo nope && false\n")
    p = subprocess.run([cli, "build", "cli-bad", d, "--file", os.path.join(d, "Dockerfile.bad")],
                       env=env, capture_output=True, text=True, timeout=300)
    t.ok(p.returncode == 5 and "nope" in p.stdout and "RUN (line 2) failed" in p.stderr,
         "a failing build: the log, the reason on stderr, exit 5",
         "%d %s %s" % (p.returncode, p.stdout[-400:], p.stderr[-400:]))
    for n in ("fromcli", "cli-bad"):
        srv.request("DELETE", "/v1/images/" + n)


def sdk_build(t, srv, work):
    """The Python SDK: client.images.build with a context directory, args
    and the log as it streams; a failed build raises BuildFailed."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
    import deskbox
    client = deskbox.Deskbox("http://127.0.0.1:%d" % srv.port, srv.token)
    d = os.path.join(work, "sdk-ctx")
    os.makedirs(os.path.join(d, "sub"))
    with open(os.path.join(d, "sub", "f.txt"), "w") as f:
        f.write("sdk\n")
    seen = []
    m = client.images.build("fromsdk", "FROM dfbase\nARG N=0\nCOPY sub /s\nRUN echo n=$N\n",
                            context=d, args={"N": "7"}, on_log=seen.append)
    f = os.path.join(srv.state_dir, "images", "fromsdk", "rootfs", "s", "f.txt")
    t.ok(m.get("status") == "ready" and "n=7" in "".join(seen) and os.path.exists(f),
         "SDK: images.build with a directory context, args and the streamed log",
         "".join(seen)[-500:])
    try:
        client.images.build("sdk-bad", "FROM dfbase\nRUN echo broken >&2; exit 4\n")
        t.ok(False, "SDK: a failed build raises BuildFailed")
    except deskbox.BuildFailed as e:
        t.ok("exit status 4" in e.error and "broken" in e.log,
             "SDK: a failed build raises BuildFailed with the error and the log", e.error)
    for n in ("fromsdk", "sdk-bad"):
        client.images.delete(n)


def main():
    dbx.require_root_and_tools()
    for tool in ["umoci"] + TOOLS:
        if not shutil.which(tool):
            dbx.skip_all("%s is not installed" % tool)
    t = dbx.Tap()
    work = tempfile.mkdtemp(prefix="dbx-dockerfile-")
    srv = dbx.Server()
    try:
        layout = make_layout(work, "dfbase", False, fill=fill_base)
        r = srv.request("POST", "/v1/images", {"name": "dfbase", "oci_layout": layout})
        t.eq(r.status, 201, "the base image imports")
        refusals(t, srv)
        good_build(t, srv, work)
        failing_run(t, srv)
        context_dir_and_limits(t, srv, work)
        cli_build(t, srv, work)
        sdk_build(t, srv, work)
        stopped_during_build(t, srv)
    finally:
        srv.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    t.done()


if __name__ == "__main__":
    main()
