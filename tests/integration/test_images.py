"""Stored images (docs/images.md): an OCI image made here without network
(a rootfs of host files: sh, python3, Xvfb, openbox with their libraries,
put into a fresh layout with umoci) is imported through POST /v1/images,
and a sandbox from it runs python3, serves files and screenshots, and sees
none of the host's /usr; the image is listed, kept across stop/start and
refused for deletion while used.  An OCI archive (skopeo copy) of an
image with python3 but no Xvfb, openbox or X library (a `FROM python`
image) imports and boots to a desktop all the same, on the host's Xvfb and
openbox: screenshots, a menu driven by click and keys, code_run on the
image's own python.  Images without a shell, or whose shell has no libc,
are a 400 at create, as are a missing and two broken images;
an archive of the desktop image, imported twice at once, gives one 201 and
one 409 and boots to a desktop; a build against a closed loopback mirror
answers 202, then fails saying why; the default image is unchanged.
The Debian one is built for real by test_image_build.py."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

# Python's standard library without what a test never imports (~35 MB less).
PY_SKIP = {"config-3.11-x86_64-linux-gnu", "dist-packages", "test", "idlelib", "tkinter",
           "ensurepip", "lib2to3", "pydoc_data", "distutils", "turtledemo", "site-packages"}


def ldd(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            libs.append(parts[2])
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])
    return libs


def copy(root, path):
    """Host `path` to the same place under `root`, symlinks kept (and their
    targets copied too)."""
    dst = os.path.join(root, path.lstrip("/"))
    if os.path.lexists(dst):
        return
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.islink(path):
        target = os.readlink(path)
        os.symlink(target, dst)
        copy(root, target if target.startswith("/") else
             os.path.normpath(os.path.join(os.path.dirname(path), target)))
    elif os.path.isdir(path):
        shutil.copytree(path, dst, symlinks=True)
    else:
        shutil.copy2(path, dst)


# Only in the images' python: code_run proves it runs the image's own.
MARKER = "deskbox_image_marker"


def make_rootfs(root, desktop):
    """A small merged-/usr tree: sh, python3 and coreutils, and with
    `desktop` Xvfb (xkbcomp, the keymaps) and openbox (its theme, a font);
    without, python3 is /usr/local/bin/python3 as in the python images; a
    python module MARKER that only the image has."""
    for d in ("usr/bin", "usr/lib", "usr/lib64", "usr/sbin", "etc"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        os.symlink("usr/" + link, os.path.join(root, link))
    progs = ["/usr/bin/dash", "/usr/bin/cat", "/usr/bin/id", "/usr/bin/ls"]
    if desktop:
        progs += ["/usr/bin/python3", "/usr/bin/Xvfb", "/usr/bin/xkbcomp", "/usr/bin/openbox"]
    else:
        # Where the python images have theirs, and no /usr/bin/python3.
        os.makedirs(os.path.join(root, "usr/local/bin"))
        shutil.copy2(os.path.realpath("/usr/bin/python3"),
                     os.path.join(root, "usr/local/bin/python3"))
        progs.append("/usr/bin/python3")
    for p in progs:
        if desktop or p != "/usr/bin/python3":
            copy(root, p)
        for lib in ldd(os.path.realpath(p)):
            copy(root, lib)
    os.symlink("dash", os.path.join(root, "usr/bin/sh"))
    src = "/usr/lib/python3.11"
    shutil.copytree(src, os.path.join(root, src.lstrip("/")), symlinks=True,
                    ignore=lambda d, names: [n for n in names if d == src and n in PY_SKIP])
    if desktop:
        # openbox exits without its theme; fontconfig wants its config
        # and a font.
        for p in ("/usr/share/X11/xkb", "/etc/xdg/openbox", "/usr/share/themes/Clearlooks",
                  "/etc/fonts", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"):
            copy(root, p)
    with open(os.path.join(root, src.lstrip("/"), MARKER + ".py"), "w") as f:
        f.write("WHERE = 'the image'\n")
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")


def make_shell_only(root, libc):
    """A tree with the host's dash as /bin/sh and, with `libc`, nothing
    else; without, not even its libc and loader; or, with libc None, no
    shell at all (a text file only)."""
    os.makedirs(os.path.join(root, "usr/bin"))
    os.symlink("usr/bin", os.path.join(root, "bin"))
    with open(os.path.join(root, "README"), "w") as f:
        f.write("data only\n")
    if libc is None:
        return
    copy(root, "/usr/bin/dash")
    os.symlink("dash", os.path.join(root, "usr/bin/sh"))
    if libc:
        for lib in ldd("/usr/bin/dash"):
            copy(root, lib)


def make_layout(work, name, desktop, fill=None):
    """An OCI layout work/<name> with one tagged image ("t") holding
    make_rootfs's tree (or fill(root)'s) as its only layer, made with
    umoci."""
    layout = os.path.join(work, name)
    bundle = os.path.join(work, name + "-bundle")
    for argv in (["umoci", "init", "--layout", layout],
                 ["umoci", "new", "--image", layout + ":t"],
                 ["umoci", "unpack", "--image", layout + ":t", bundle]):
        subprocess.run(argv, check=True, capture_output=True)
    rootfs = os.path.join(bundle, "rootfs")
    shutil.rmtree(rootfs)
    if fill:
        os.makedirs(rootfs)
        fill(rootfs)
    else:
        make_rootfs(rootfs, desktop)
    subprocess.run(["umoci", "repack", "--image", layout + ":t", bundle], check=True,
                   capture_output=True)
    shutil.rmtree(bundle)
    return layout


def du_bytes(path):
    return int(subprocess.run(["du", "-sb", path], capture_output=True, text=True)
               .stdout.split()[0])


def import_checks(t, srv, layout, archive):
    bad = [({"name": "Bad!", "oci_layout": layout}, "a bad name"),
           ({"name": "x1"}, "no source"),
           ({"name": "x1", "oci_layout": layout, "oci_archive": archive}, "two sources"),
           ({"name": "x1", "oci_layout": "relative/path"}, "a relative path"),
           ({"name": "x1", "oci_layout": "/no/such/layout"}, "a missing path"),
           ({"name": "x1", "oci_layout": "/etc"}, "a directory that is no layout"),
           ({"name": "x1", "oci_layout": layout, "ref": "nope"}, "a tag not in the layout"),
           ({"name": "x1", "oci_layout": layout, "colour": 1}, "an unknown field"),
           ({"name": "x1", "build": "arch"}, "a build other than debian"),
           ({"name": "default", "oci_layout": layout}, "the name default")]
    for body, what in bad:
        r = srv.request("POST", "/v1/images", body)
        t.ok(r.status in (400, 409) and "error" in r.json(), "import with %s is refused (%d)"
             % (what, r.status), r.body[:300])
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/images", {"name": "tiny", "oci_layout": layout})
    import_s = time.monotonic() - t0
    t.eq(r.status, 201, "an OCI layout imports")
    m = r.json() if r.status == 201 else {}
    t.diag("import of a %.0f MB layout: %.2f s, image %.0f MB on disk" % (
        du_bytes(layout) / 1e6, import_s, m.get("size_bytes", 0) / 1e6))
    t.ok(m.get("name") == "tiny" and m.get("status") == "ready" and
         str(m.get("digest", "")).startswith("sha256:") and len(m.get("layers", [])) == 1 and
         m.get("size_bytes", 0) > 10 << 20 and (dbx.parse_time(m.get("created_at")) or 0) > 0 and
         m.get("source", "").startswith("oci-layout:" + layout),
         "the manifest has name, source, digest, layers, size and date", m)
    t.ok(m.get("desktop") is True and m.get("tools", {}).get("python3") is True and
         m.get("tools", {}).get("chromium") is False, "its tools: a desktop, python3, no chromium",
         m.get("tools"))
    with open(os.path.join(layout, "index.json")) as f:
        want = json.load(f)["manifests"][0]["digest"]
    t.eq(m.get("digest"), want, "the digest is the layout's manifest digest")
    r = srv.request("POST", "/v1/images", {"name": "tiny", "oci_layout": layout})
    t.eq(r.status, 409, "importing a name again is 409")
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/images", {"name": "headless", "oci_archive": archive})
    t.eq(r.status, 201, "an OCI archive made by skopeo copy imports")
    t.diag("import of the archive: %.2f s" % (time.monotonic() - t0))
    j = r.json() if r.status == 201 else {}
    t.ok(j.get("desktop") is False and j.get("host_parts") == ["Xvfb", "openbox"] and
         j.get("source", "").startswith("oci-archive:"),
         "an image without Xvfb and openbox says the host supplies them", r.body[:300])
    t.eq(m.get("host_parts"), [], "the desktop image needs nothing of the host's")
    left = [n for n in os.listdir(os.path.join(srv.state_dir, "images")) if n.startswith(".tmp")]
    t.eq(left, [], "nothing half-made is left in images/")


def archive_desktop_checks(t, srv, layout, work):
    """The desktop image again, as an OCI archive skopeo writes, imported
    twice at once under one name: one import wins, the other is a 409;
    then it boots to a desktop."""
    archive = os.path.join(work, "tiny.tar")
    subprocess.run(["skopeo", "copy", "oci:%s:t" % layout, "oci-archive:%s:t" % archive],
                   check=True, capture_output=True)
    got = []

    def one():
        got.append(srv.request("POST", "/v1/images", {"name": "tinyarc", "oci_archive": archive}))
    threads = [threading.Thread(target=one) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    t.eq(sorted(r.status for r in got), [201, 409], "two imports of one name at once: 201 and 409")
    # The command-line client's create --image.
    cli = [os.path.join(dbx.BUILD, "deskbox"), "--url", "http://127.0.0.1:%d" % srv.port,
           "--token", srv.token, "create"]
    p = subprocess.run(cli + ["--image", "nope"], capture_output=True, text=True, timeout=120)
    t.ok(p.returncode == 5 and "nope" in p.stderr, "deskbox create --image nope fails saying so",
         p.stderr)
    p = subprocess.run(cli + ["--image", "tinyarc"], capture_output=True, text=True, timeout=120)
    sb = {"id": p.stdout.strip()}
    r = srv.request("GET", "/v1/sandboxes/" + sb["id"])
    t.ok(p.returncode == 0 and r.status == 200 and r.json().get("image") == "tinyarc",
         "deskbox create --image tinyarc makes a sandbox on it", p.stderr + r.body.decode()[:200])
    info = dbx.png_info(srv.screenshot(sb["id"]))
    t.eq(info[:2], (1280, 800), "a sandbox from the archive's image has a desktop")
    srv.request("DELETE", "/v1/sandboxes/" + sb["id"])
    t.eq(srv.request("DELETE", "/v1/images/tinyarc").status, 204, "and its image deletes")


def shell_imports(t, srv, work):
    """Two images that cannot run anything, imported for refused_creates:
    one with no shell, one whose /bin/sh lacks its libc and loader."""
    for name, libc in (("noshell", None), ("nolibc", False)):
        layout = make_layout(work, name, False, fill=lambda root, libc=libc:
                             make_shell_only(root, libc))
        r = srv.request("POST", "/v1/images", {"name": name, "oci_layout": layout})
        t.ok(r.status == 201 and r.json().get("tools", {}).get("sh") is (libc is not None),
             "image '%s' imports (its tools say sh: %s)" % (name, libc is not None),
             r.body[:300])


def tree_has(root, names):
    """The files under `root` whose names start with one of `names`."""
    found = []
    for d, _, files in os.walk(root):
        found += [os.path.join(d, f) for f in files if f.startswith(names)]
    return found


def menu_checks(t, srv, sid):
    """The host's openbox draws its menu on a right click and moves its
    highlight on a key: input reaches the desktop and the frame changes."""
    a = srv.screenshot(sid)
    clicks = []

    def click_shows_menu():
        # openbox may announce itself before it binds its root menu: a
        # click that came too early shows nothing, so click again.
        clicks.append(srv.post(sid, "click", {"x": 300, "y": 300, "button": "right"}).status)
        b = dbx.wait_until(lambda: (lambda b: b if dbx.changed_bbox(a, b) else None)(
            srv.screenshot(sid)), timeout=2)
        return b
    menu = dbx.wait_until(click_shows_menu, timeout=30, interval=0)
    t.ok(clicks and set(clicks) == {200}, "right clicks on the desktop (%d)" % len(clicks),
         clicks)
    box = dbx.changed_bbox(a, menu) if menu else None
    t.ok(box and box[0] >= 295 and box[1] >= 295 and box[2] - box[0] > 60 and
         box[3] - box[1] > 60, "openbox's menu appears where it was clicked", box)
    colours = len({px for row in dbx.png_pixels(menu)[295:480]
                   for px in zip(row[0::3], row[1::3], row[2::3])}) if menu else 0
    t.ok(colours > 20, "the menu has text in it (%d colours: fonts work)" % colours)
    r = srv.post(sid, "key", {"keys": "Down"})
    down = dbx.wait_until(lambda: (lambda b: b if dbx.changed_bbox(menu, b) else None)(
        srv.screenshot(sid)), timeout=20) if menu and r.status == 200 else None
    box = dbx.changed_bbox(menu, down) if down else None
    t.ok(box and box[1] >= 295 and box[3] < 480, "a key moves the menu's highlight", box)
    srv.post(sid, "key", {"keys": "Escape"})
    gone = dbx.wait_until(lambda: dbx.changed_bbox(a, srv.screenshot(sid)) is None, timeout=20)
    t.ok(gone, "Escape closes it: the frame is the empty desktop again")


def host_desktop_checks(t, srv):
    """The image with python3 but no Xvfb, openbox or X library boots to a
    desktop on the host's, and its programs stay the image's."""
    tree = os.path.join(srv.state_dir, "images", "headless", "rootfs")
    t.ok(os.path.exists(os.path.join(tree, "usr/local/bin/python3")) and
         not os.path.lexists(os.path.join(tree, "usr/bin/python3")) and
         tree_has(tree, ("Xvfb", "openbox", "libX11", "xkbcomp")) == [],
         "the python image has /usr/local/bin/python3 but no Xvfb, openbox, xkbcomp, "
         "libX11 (nor /usr/bin/python3)")
    t0 = time.monotonic()
    r = srv.request("POST", "/v1/sandboxes", {"image": "headless"})
    t.eq(r.status, 201, "a sandbox from the image without a desktop is created")
    if r.status != 201:
        return t.diag(r.body[:500].decode(errors="replace"))
    sid = r.json()["id"]
    t.diag("create on the host's desktop, until it is up: %.2f s" % (time.monotonic() - t0))
    info = dbx.png_info(srv.screenshot(sid))
    t.eq(info[:2], (1280, 800), "its screenshot has the display's size")
    menu_checks(t, srv, sid)
    code = ("import os, sys, %s as m\n"
            "maps = open('/proc/self/maps').read()\n"
            "print(sys.executable, m.WHERE, '/.deskbox' in maps,\n"
            "      [k for k in os.environ if k.startswith('LD_')])" % MARKER)
    r = srv.request("POST", "/v1/sandboxes/%s/process/code_run" % sid, {"code": code})
    t.eq(r.json().get("stdout") if r.status == 200 else r.body[:300],
         "/usr/local/bin/python3 the image False []\n",
         "code_run runs the image's python (/usr/local/bin), on the image's libraries, "
         "with no LD_ variable")
    r = srv.request("POST", "/v1/sandboxes/%s/process/code_run" % sid, {"code": (
        "import os\ntry:\n    os.chroot('/.deskbox/host')\n    print('chrooted')\n"
        "except OSError as e:\n    print(e.errno, open('/proc/self/status').read()"
        ".split('CapEff:')[1].split()[0])")})
    t.eq(r.json().get("stdout") if r.status == 200 else r.body[:300], "1 0000000000000000\n",
         "the user has no capability and cannot chroot (EPERM): only the init can")
    r = srv.request("POST", "/v1/sandboxes/%s/process/code_run" % sid,
                    {"code": "console.log(1)", "language": "node"})
    t.ok(r.status == 400 and "/usr/local/bin/node" in r.json()["error"]["message"],
         "code_run in a language the image lacks is a 400, though the host has it",
         r.body[:300])
    r = srv.exec(sid, ["sh", "-c", "cat /proc/[0-9]*/comm; test -e /usr/bin/Xvfb || echo none; "
                       "test -x /.deskbox/host/usr/bin/Xvfb && echo host; "
                       "touch /.deskbox/host/x 2>/dev/null || echo ro"])
    out = r["stdout"].split()
    t.ok({"Xvfb", "openbox", "deskbox-vnc"} <= set(out) and out[-3:] == ["none", "host", "ro"],
         "Xvfb and openbox run, from the host's read-only /.deskbox/host, not the image's /usr",
         out)
    with open(os.path.join(srv.state_dir, "sandboxes", sid, "init.log"), errors="replace") as f:
        log = f.read()
    t.ok("the host's from /.deskbox/host" in log and "exited" not in log,
         "init.log says the host supplies them, and nothing exited", log[-1500:])
    t.eq(srv.request("POST", "/v1/sandboxes/%s/stop" % sid).status, 200, "stop it")
    r = srv.request("POST", "/v1/sandboxes/%s/start" % sid)
    t.eq(r.status, 200, "and start it again on the host's desktop")
    if r.status == 200:
        t.eq(dbx.png_info(srv.screenshot(sid))[:2], (1280, 800), "its desktop is back")
    t.eq(srv.request("DELETE", "/v1/sandboxes/" + sid).status, 204, "delete it")


def build_checks(t, srv):
    """The build's background path without network: a mirror on a closed
    loopback port makes debootstrap fail at once."""
    r = srv.request("POST", "/v1/images", {"name": "deb", "build": "debian",
                                           "mirror": "http://127.0.0.1:9/debian"})
    t.ok(r.status == 202 and r.json().get("status") in ("building", "failed"),
         "a build answers 202 with its status", r.body[:300])
    j = dbx.wait_until(lambda: (lambda x: x if x.get("status") != "building" else None)(
        srv.request("GET", "/v1/images/deb").json()), timeout=120, interval=0.2) or {}
    t.ok(j.get("status") == "failed" and "debootstrap failed" in j.get("error", "") and
         "127.0.0.1:9" in j.get("error", ""), "a failed build says why (GET)", j)
    r = srv.request("POST", "/v1/sandboxes", {"image": "deb"})
    t.ok(r.status == 400 and "not ready" in r.body.decode(), "create from a failed build is a 400",
         r.body[:300])
    names = [i["name"] for i in srv.request("GET", "/v1/images").json()["images"]]
    t.ok("deb" in names, "a failed build is listed", names)
    t.eq(srv.request("DELETE", "/v1/images/deb").status, 204, "a failed build's status deletes")
    t.eq(srv.request("GET", "/v1/images/deb").status, 404, "and is gone")
    left = [n for n in os.listdir(os.path.join(srv.state_dir, "images")) if n.startswith(".")]
    t.eq(left, [], "nothing of the build is left in images/")


def list_checks(t, srv):
    r = srv.request("GET", "/v1/images")
    names = [i["name"] for i in r.json().get("images", [])] if r.status == 200 else []
    t.eq(names, ["default", "headless", "nolibc", "noshell", "tiny"],
         "GET /v1/images lists default first, then all")
    r = srv.request("GET", "/v1/images/tiny")
    t.ok(r.status == 200 and r.json().get("sandboxes") == 0, "GET one image", r.body[:300])
    r = srv.request("GET", "/v1/images/default")
    t.ok(r.status == 200 and r.json().get("source") == "embedded", "GET the default image")
    t.eq(srv.request("GET", "/v1/images/nope").status, 404, "GET a missing image is 404")


def refused_creates(t, srv):
    images = os.path.join(srv.state_dir, "images")
    os.makedirs(os.path.join(images, "nomanifest", "rootfs"))
    os.makedirs(os.path.join(images, "norootfs"))
    with open(os.path.join(images, "norootfs", "manifest.json"), "w") as f:
        f.write('{"name": "norootfs"}')
    for name, want in (("nope", "does not exist"), ("noshell", "has no shell (/bin/sh)"),
                       ("nolibc", "dynamic loader /lib64/ld-linux-x86-64.so.2 (libc) is not"),
                       ("nomanifest", "no readable manifest"), ("norootfs", "no rootfs")):
        r = srv.request("POST", "/v1/sandboxes", {"image": name})
        msg = r.json().get("error", {}).get("message", "") if r.status == 400 else ""
        t.ok(r.status == 400 and name in msg and want in msg,
             "create from image '%s' is a 400 saying '%s'" % (name, want), r.body[:300])
    r = srv.request("POST", "/v1/sandboxes", {"image": "../etc"})
    t.eq(r.status, 400, "an image name with a slash is a 400")
    shutil.rmtree(os.path.join(images, "nomanifest"))
    shutil.rmtree(os.path.join(images, "norootfs"))


def template_checks(t, srv):
    """A template may name a stored image; one that does not exist is a 400."""
    r = srv.request("POST", "/v1/templates", {"name": "on-tiny", "image": "tiny",
                                               "display": {"width": 640, "height": 480}})
    t.eq(r.status, 201, "a template names a stored image")
    r = srv.request("POST", "/v1/templates", {"name": "on-none", "image": "no-such-image"})
    t.ok(r.status == 400 and "no-such-image" in r.json()["error"]["message"],
         "a template naming a missing image: 400 naming it", r.body[:200])
    r = srv.request("POST", "/v1/sandboxes", {"template": "on-tiny"})
    j = r.json() if r.status == 201 else {}
    t.ok(j.get("image") == "tiny" and j.get("display") == {"width": 640, "height": 480},
         "a create from it runs on the image", r.body[:300])
    if r.status == 201:
        srv.request("DELETE", "/v1/sandboxes/" + j["id"])
    srv.request("DELETE", "/v1/templates/on-tiny")


def sandbox_checks(t, srv):
    t0 = time.monotonic()
    template_checks(t, srv)
    sb = srv.create({"image": "tiny"})
    t.diag("create from the image: %.2f s" % (time.monotonic() - t0))
    sid = sb["id"]
    t.eq(sb.get("image"), "tiny", "the sandbox names its image")
    r = srv.exec(sid, ["python3", "-c", "import os, sys; print(sys.version_info[0], os.getuid())"])
    t.eq((r["exit_code"], r["stdout"]), (0, "3 1000\n"), "python3 -c runs inside as the user")
    r = srv.exec(sid, ["sh", "-c", "sudo python3 -c 'import os; print(os.getuid())' && "
                       "sudo sh -c 'echo img > /etc/by-root' && python3 -c "
                       "'import os; print(os.stat(\"/etc/by-root\").st_uid)'"])
    t.eq((r["exit_code"], r["stdout"]), (0, "0\n0\n"),
         "deskbox's sudo works in a stored image and its root owns its /etc")
    r = srv.exec(sid, ["sh", "-c", "ls /usr/bin/chromium /usr/bin/xterm 2>&1; echo $?"])
    t.ok(r["stdout"].strip().endswith("2"), "the host's /usr is not there (no chromium, xterm)",
         r["stdout"])
    base = "/v1/sandboxes/%s/files" % sid
    r = srv.request("PUT", base + "/upload?path=/workspace/hello.txt", b"hi from the host\n")
    t.eq(r.status, 201, "the files API uploads into it")
    r = srv.exec(sid, ["cat", "/workspace/hello.txt"])
    t.eq(r["stdout"], "hi from the host\n", "the sandbox sees the uploaded file")
    r = srv.request("GET", base + "/download?path=/workspace/hello.txt")
    t.eq(r.body, b"hi from the host\n", "and it downloads back")
    r = srv.exec(sid, ["sh", "-c", "cat /proc/[0-9]*/comm"])
    procs = set(r["stdout"].split())
    t.ok({"Xvfb", "openbox", "deskbox-vnc"} <= procs,
         "its desktop runs: the image's Xvfb and openbox, deskbox's VNC server", procs)
    r = srv.exec(sid, ["python3", "-c", "import os; print(len(os.listdir('/.deskbox/lib')), "
                       "[k for k in os.environ if k.startswith('LD_')])"])
    want = "%d []\n" % len(os.listdir(os.path.join(dbx.BUILD, "image", "lib")))
    t.eq(r["stdout"], want, "deskbox's libraries are in /.deskbox/lib; no LD_ variable reaches "
         "the user's programs")
    info = dbx.png_info(srv.screenshot(sid))
    with open(os.path.join(srv.state_dir, "sandboxes", sid, "init.log"), errors="replace") as f:
        log = f.read()
    t.ok("exited" not in log, "no part of the desktop exited (init.log)", log[-1500:])
    t.eq(info[:2], (1280, 800), "a screenshot of its desktop")
    r = srv.request("DELETE", "/v1/images/tiny")
    t.eq(r.status, 409, "deleting an image in use is 409")
    r = srv.request("GET", "/v1/images/tiny")
    t.eq(r.json().get("sandboxes"), 1, "the image counts its sandbox")
    t.eq(srv.request("POST", "/v1/sandboxes/%s/stop" % sid).status, 200, "stop")
    with open(os.path.join(srv.state_dir, "sandboxes", sid, "sandbox.json")) as f:
        t.eq(json.load(f).get("image"), "tiny", "sandbox.json keeps the image")
    t.eq(srv.request("DELETE", "/v1/images/tiny").status, 409, "still 409 while stopped")
    r = srv.request("POST", "/v1/sandboxes/%s/start" % sid)
    t.ok(r.status == 200 and r.json().get("image") == "tiny", "start keeps the image",
         r.body[:300])
    r = srv.exec(sid, ["cat", "/workspace/hello.txt"])
    t.eq(r["stdout"], "hi from the host\n", "its files survived stop/start")
    # A restart of deskboxd reads the image back from sandbox.json.
    srv.stop()
    srv = dbx.Server(state_dir=srv.state_dir)
    srv.own_state = True
    r = srv.request("POST", "/v1/sandboxes/%s/start" % sid)
    t.ok(r.status == 200 and r.json().get("image") == "tiny",
         "after a deskboxd restart it starts on its image", r.body[:300])
    r = srv.exec(sid, ["sh", "-c", "cat /workspace/hello.txt; test -e /usr/bin/xterm || echo no"])
    t.eq(r["stdout"], "hi from the host\nno\n", "with its files, still without the host's /usr")
    t.eq(srv.request("DELETE", "/v1/sandboxes/" + sid).status, 204, "delete the sandbox")
    return srv


def default_checks(t, srv):
    sb = srv.create({})
    t.eq(sb.get("image"), "default", "a create without image uses the default image")
    r = srv.exec(sb["id"], ["sh", "-c", "test -x /usr/bin/xterm && test -x /usr/bin/Xvfb && "
                            "test ! -e /.deskbox/lib/libc.so.6 && echo host-usr"])
    t.eq(r["stdout"], "host-usr\n", "the default image still has the host's /usr, no lib dir")
    srv.request("DELETE", "/v1/sandboxes/" + sb["id"])


def main():
    dbx.require_root_and_tools()
    for tool in ("umoci", "skopeo", "debootstrap", "tar", "ldd"):
        if not shutil.which(tool):
            dbx.skip_all("%s is not installed (run scripts/install-deps.sh)" % tool)
    if not os.path.isdir("/usr/lib/python3.11"):
        dbx.skip_all("the test copies the host's /usr/lib/python3.11, which is not there")
    if not os.path.exists(os.path.join(dbx.BUILD, "image", "lib", "libc.so.6")):
        dbx.skip_all("build/image is not built (make)")
    t = dbx.Tap()
    work = tempfile.mkdtemp(prefix="dbx-images-")
    srv = None
    try:
        t0 = time.monotonic()
        layout = make_layout(work, "tiny", desktop=True)
        headless = make_layout(work, "headless", desktop=False)
        archive = os.path.join(work, "headless.tar")
        # As `skopeo copy` writes an OCI archive (a tar of a layout).
        subprocess.run(["skopeo", "copy", "oci:%s:t" % headless, "oci-archive:%s:t" % archive],
                       check=True, capture_output=True)
        t.diag("two OCI images made in %.1f s (%.0f MB and %.0f MB)" % (
            time.monotonic() - t0, du_bytes(layout) / 1e6, du_bytes(headless) / 1e6))
        srv = dbx.Server()
        import_checks(t, srv, layout, archive)
        shell_imports(t, srv, work)
        list_checks(t, srv)
        archive_desktop_checks(t, srv, layout, work)
        build_checks(t, srv)
        refused_creates(t, srv)
        host_desktop_checks(t, srv)
        srv = sandbox_checks(t, srv)
        default_checks(t, srv)
        t.eq(srv.request("DELETE", "/v1/images/default").status, 400,
             "the default image cannot be deleted")
        t.eq(srv.request("DELETE", "/v1/images/tiny").status, 204, "an unused image deletes")
        t.eq(srv.request("GET", "/v1/images/tiny").status, 404, "and is gone")
        t.ok(not os.path.exists(os.path.join(srv.state_dir, "images", "tiny")),
             "its files are gone")
    finally:
        if srv:
            srv.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    t.done()


if __name__ == "__main__":
    main()
