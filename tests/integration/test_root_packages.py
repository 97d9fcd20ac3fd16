#!/usr/bin/env python3
"""Installing into a sandbox's own /usr as its root: a small .deb built here
(dpkg-deb --build) with dpkg -i, a tiny wheel built here (zipfile, no
network) with pip from a local directory, and apt-get install from a local
flat repository (file:) and over HTTP from a mirror stand-in served on the
sandbox's own loopback (its network namespace: no packet leaves).  All of it
persists across stop/start, a checkpoint restore and a fork; another
sandbox and the host see none of it.  The image's dpkg database is the
host's: dpkg -s knows python3, a .deb depending on it installs with dpkg -i
and apt-get install ./x.deb fetching nothing, the host's database is
unchanged."""

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

HELLO = "#!/bin/sh\necho hello-from-deb\n"


def build_deb(tmp, name, version, script, depends=None):
    """A .deb holding /usr/bin/<name> (an sh script), made with dpkg-deb."""
    root = os.path.join(tmp, name)
    os.makedirs(os.path.join(root, "DEBIAN"))
    os.makedirs(os.path.join(root, "usr", "bin"))
    with open(os.path.join(root, "DEBIAN", "control"), "w") as f:
        f.write("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: deskbox tests "
                "<tests@localhost>\nDescription: deskbox test package\n" % (name, version))
        if depends:
            f.write("Depends: %s\n" % depends)
    path = os.path.join(root, "usr", "bin", name)
    with open(path, "w") as f:
        f.write(script)
    os.chmod(path, 0o755)
    out = os.path.join(tmp, "%s_%s_all.deb" % (name, version))
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", root, out], check=True,
                   capture_output=True)
    return out


def build_wheel(name, version, value):
    """A pure-Python wheel (bytes) made with zipfile: <name>/__init__.py."""
    files = {
        "%s/__init__.py" % name: "VALUE = %d\n" % value,
        "%s-%s.dist-info/METADATA" % (name, version):
            "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
        "%s-%s.dist-info/WHEEL" % (name, version):
            "Wheel-Version: 1.0\nGenerator: deskbox-test\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append("%s,sha256=%s,%d" % (path, digest.decode(), len(text.encode())))
    rec = "%s-%s.dist-info/RECORD" % (name, version)
    record.append(rec + ",,")
    files[rec] = "\n".join(record) + "\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return buf.getvalue()


def flat_repo(tmp, debs):
    """Packages and Release of a flat apt repository holding `debs`."""
    lines = []
    for deb in debs:
        data = open(deb, "rb").read()
        fields = subprocess.run(["dpkg-deb", "-f", deb], capture_output=True,
                                text=True, check=True).stdout.strip()
        lines.append("%s\nFilename: ./%s\nSize: %d\nSHA256: %s\n" % (
            fields, os.path.basename(deb), len(data), hashlib.sha256(data).hexdigest()))
    packages = "\n".join(lines)
    release = ("Origin: deskbox-test\nLabel: deskbox-test\nSuite: stable\nCodename: test\n"
               "Architectures: all amd64 arm64\nSHA256:\n %s %d Packages\n" % (
                   hashlib.sha256(packages.encode()).hexdigest(), len(packages.encode())))
    return packages, release


def upload(srv, sid, path, data):
    r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=%s" % (sid, path), data)
    return r.status


def sh(srv, sid, cmd, **kw):
    body = {"argv": ["sh", "-c", cmd]}
    body.update(kw)
    r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, body)
    if r.status != 200:
        return ("HTTP %d %s" % (r.status, r.body[:300]), -1)
    j = r.json()
    return (j["stdout"] + j["stderr"], j["exit_code"])


CHECK = ("dbx-hello; dpkg-query -W -f='${Status}\\n' dbx-hello; "
         "python3 -c 'import dbxwheel; print(dbxwheel.VALUE, dbxwheel.__file__)'; "
         "dbx-apt")


def installed(srv, sid):
    out, _ = sh(srv, sid, CHECK + " 2>&1")
    return out


def want_all(out):
    return ("hello-from-deb" in out and "install ok installed" in out and
            "42 /usr/local/lib/python3" in out and "hello-from-apt" in out)


def host_dpkg_digest():
    """A digest of the host's package database (status and file lists)."""
    h = hashlib.sha256()
    for rel in ["status"] + sorted("info/" + n for n in os.listdir("/var/lib/dpkg/info")):
        p = os.path.join("/var/lib/dpkg", rel)
        if os.path.isfile(p):
            h.update(rel.encode() + b"\0" + open(p, "rb").read())
    return h.hexdigest()


def host_has(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True,
                       text=True)
    return r.returncode == 0 and r.stdout == "install ok installed"


def check_host_db(t, srv, sid, tmp):
    """The host's installed packages are the image's: dpkg -s knows python3,
    a .deb that depends on it installs with dpkg -i and with apt-get
    install ./x.deb without fetching anything."""
    out, rc = sh(srv, sid, "dpkg -s python3")
    t.ok(rc == 0 and "Status: install ok installed" in out,
         "dpkg -s python3 in the sandbox: installed, as on the host", out[:300])
    want = subprocess.run(["dpkg", "-L", "python3"], capture_output=True, text=True).stdout
    out, rc = sh(srv, sid, "dpkg -L python3")
    t.ok(rc == 0 and want and out == want, "dpkg -L python3 lists the host's files for it",
         out[:300])
    deb = build_deb(tmp, "dbx-dep", "1.0", "#!/bin/sh\necho dep-ok\n", depends="python3")
    upload(srv, sid, "/workspace/dbx-dep.deb", open(deb, "rb").read())
    out, rc = sh(srv, sid, "dpkg -i /workspace/dbx-dep.deb 2>&1 && dbx-dep", user="root")
    t.ok(rc == 0 and "dep-ok" in out and "warning" not in out.lower() and
         "dependency problems" not in out,
         "dpkg -i of a .deb that Depends on python3: no complaint", out[-1500:])
    out, rc = sh(srv, sid, "dpkg -r dbx-dep >/dev/null && apt-get install -y "
                 "/workspace/dbx-dep.deb 2>&1 && dbx-dep", user="root",
                 timeout_s=120)
    t.ok(rc == 0 and "dep-ok" in out and "1 newly installed" in out and
         "Need to get 0 B/" in out and "://" not in out,
         "apt-get install ./x.deb: only it is installed, nothing fetched", out[-1500:])
    sh(srv, sid, "dpkg -r dbx-dep", user="root")


def main():
    dbx.require_root_and_tools()
    for tool in ("dpkg-deb",):
        if not shutil.which(tool):
            dbx.skip_all("%s is not installed" % tool)
    t = dbx.Tap()
    srv = dbx.Server()
    if "no user namespaces" in srv.startup:
        srv.cleanup()
        dbx.skip_all("deskboxd runs without user namespaces here: root is off")
    tmp = tempfile.mkdtemp(prefix="dbx-debs-")
    host_db = host_dpkg_digest() if os.path.isdir("/var/lib/dpkg/info") else None
    sid = other = fork = None
    try:
        sid = srv.create({})["id"]
        other = srv.create({})["id"]
        base = "/v1/sandboxes/%s" % sid

        sh(srv, sid, "mkdir -p /workspace/wheels /workspace/repo")

        # ---- the image's package database is the host's ----
        if host_has("python3"):
            check_host_db(t, srv, sid, tmp)
        else:
            print("# skipped the package database checks: the host has no python3 package")

        # ---- dpkg -i of a .deb made here ----
        deb = build_deb(tmp, "dbx-hello", "1.0", HELLO)
        t.eq(upload(srv, sid, "/workspace/dbx-hello.deb", open(deb, "rb").read()), 201,
             "the .deb is uploaded")
        out, rc = sh(srv, sid, "dpkg -i /workspace/dbx-hello.deb", user="root")
        t.ok(rc == 0, "dpkg -i installs it as root", out)
        out, rc = sh(srv, sid, "dbx-hello && stat -c %u /usr/bin/dbx-hello")
        t.eq((out.split(), rc), (["hello-from-deb", "0"], 0),
             "its program is in /usr/bin, root's, and the user runs it")

        # ---- pip from a local wheel directory ----
        t.eq(upload(srv, sid, "/workspace/wheels/dbxwheel-1.0-py3-none-any.whl",
                    build_wheel("dbxwheel", "1.0", 42)), 201, "the wheel is uploaded")
        out, rc = sh(srv, sid, "sudo python3 -m pip install --no-index --find-links "
                     "/workspace/wheels dbxwheel")
        t.ok(rc == 0, "sudo pip install from the local directory", out)
        out, _ = sh(srv, sid, "python3 -c 'import dbxwheel; print(dbxwheel.VALUE, "
                    "dbxwheel.__file__)'")
        t.ok(out.startswith("42 /usr/local/lib/python3"), "the user imports it from /usr/local",
             out)

        # ---- apt-get install from a flat repository on the sandbox's disk ----
        deb2 = build_deb(tmp, "dbx-apt", "2.0", "#!/bin/sh\necho hello-from-apt\n")
        packages, release = flat_repo(tmp, [deb2])
        for name, data in (("dbx-apt_2.0_all.deb", open(deb2, "rb").read()),
                           ("Packages", packages.encode()), ("Release", release.encode())):
            upload(srv, sid, "/workspace/repo/" + name, data)
        out, rc = sh(srv, sid, "echo 'deb [trusted=yes] file:/workspace/repo ./' > "
                     "/etc/apt/sources.list.d/local.list && apt-get update -q && "
                     "apt-get install -y -q dbx-apt", user="root", timeout_s=120)
        t.ok(rc == 0, "apt-get update and install from the local mirror", out[-1500:])
        out = installed(srv, sid)
        t.ok(want_all(out), "the three are installed", out)

        # ---- apt over HTTP: a mirror stand-in on the sandbox's own loopback ----
        deb3 = build_deb(tmp, "dbx-http", "3.0", "#!/bin/sh\necho hello-over-http\n")
        packages, release = flat_repo(tmp, [deb3])
        sh(srv, sid, "mkdir -p /workspace/mirror")
        for name, data in (("dbx-http_3.0_all.deb", open(deb3, "rb").read()),
                           ("Packages", packages.encode()), ("Release", release.encode())):
            upload(srv, sid, "/workspace/mirror/" + name, data)
        r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, {
            "argv": ["python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory",
                     "/workspace/mirror", "8765"], "background": True})
        mirror = r.json().get("pid") if r.status == 200 else None
        up = dbx.wait_until(lambda: sh(srv, sid, "python3 -c 'import urllib.request as u; "
                                       "u.urlopen(\"http://127.0.0.1:8765/Release\")'")[1] == 0,
                            10)
        out, rc = sh(srv, sid, "echo 'deb [trusted=yes] http://127.0.0.1:8765 ./' > "
                     "/etc/apt/sources.list.d/mirror.list && apt-get update -q && "
                     "apt-get install -y -q dbx-http && dbx-http", user="root", timeout_s=120)
        t.ok(up and rc == 0 and "hello-over-http" in out,
             "apt-get install over HTTP from a mirror stand-in in the sandbox's namespace",
             out[-1500:])
        if mirror:
            srv.request("POST", "/v1/sandboxes/%s/process/%d/kill" % (sid, mirror))
        sh(srv, sid, "rm /etc/apt/sources.list.d/mirror.list", user="root")

        # ---- nobody else sees them ----
        out, _ = sh(srv, other, CHECK + " 2>&1")
        t.ok("hello-from" not in out and "42 /usr" not in out and "dbx-hello" in out,
             "another sandbox sees none of it", out)
        t.ok(not os.path.exists("/usr/bin/dbx-hello") and not os.path.exists("/usr/bin/dbx-apt"),
             "nor does the host's /usr")
        if host_db:
            t.ok(host_dpkg_digest() == host_db and not host_has("dbx-dep") and
                 not host_has("dbx-hello"), "the host's /var/lib/dpkg is unchanged")

        # ---- stop and start ----
        t.eq(srv.request("POST", base + "/stop").status, 200, "stop")
        t.eq(srv.request("POST", base + "/start").status, 200, "start")
        out = installed(srv, sid)
        t.ok(want_all(out), "after stop and start all three are still installed", out)

        # ---- a checkpoint, a removal, the restore ----
        r = srv.request("POST", base + "/checkpoints", {"name": "pkgs"})
        t.eq(r.status, 201, "a checkpoint with them")
        out, rc = sh(srv, sid, "dpkg -r dbx-hello dbx-apt && python3 -m pip uninstall -y "
                     "dbxwheel", user="root")
        t.ok(rc == 0 and "hello-from" not in installed(srv, sid), "removed again", out)
        r = srv.request("POST", base + "/checkpoints/pkgs/restore")
        t.eq(r.status, 200, "restore the checkpoint")
        out = installed(srv, sid)
        t.ok(want_all(out), "after the restore they are back", out)

        # ---- a fork has them, in its own uid range ----
        r = srv.request("POST", base + "/fork", {"checkpoint": "pkgs"})
        fork = r.json().get("id") if r.status == 201 else None
        t.ok(fork, "a fork of the checkpoint", r.body)
        if fork:
            out = installed(srv, fork)
            t.ok(want_all(out), "the fork has them too", out)
            out, rc = sh(srv, fork, "sudo sh -c 'echo x >> /usr/bin/dbx-hello' && echo ok")
            t.eq((out.strip(), rc), ("ok", 0), "and its root may change them (its own ids)")
            t.eq(sh(srv, sid, "tail -n 1 /usr/bin/dbx-hello")[0], "echo hello-from-deb\n",
                 "which the parent does not see changed")
    finally:
        for s in (fork, other, sid):
            if s:
                srv.request("DELETE", "/v1/sandboxes/" + s)
        srv.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    t.done()


if __name__ == "__main__":
    main()
