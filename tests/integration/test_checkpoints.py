"""Checkpoints and forks: a checkpoint of a running sandbox leaves its
desktop running; after files are changed and deleted, restore gives back
exactly the checkpoint's tree (hashed) with the desktop up again; a fork
from a checkpoint or from the sandbox as it is has its files, its user owns
them, and it is independent both ways; checkpoints of stopped sandboxes,
listing, delete, a restart of deskboxd; bad names and states are 4xx."""

import os
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

TREE = ("cd / && find workspace home/user -xdev -type f ! -name '.*' -print0 | sort -z | "
        "xargs -0 sha256sum | sha256sum | cut -c1-16")
XVFB = ('for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = Xvfb ] && '
        'echo ${p#/proc/}; done')


def base(sid):
    return "/v1/sandboxes/%s" % sid


def tree(srv, sid):
    return srv.exec(sid, ["sh", "-c", TREE])["stdout"].strip()


def sh(srv, sid, cmd):
    return srv.exec(sid, ["sh", "-c", cmd])


def download(srv, sid, path):
    r = srv.request("GET", "%s/files/download?path=%s" % (base(sid), urllib.parse.quote(path)))
    return r.body if r.status == 200 else r.status


def err_code(r):
    try:
        return r.status, r.json()["error"]["code"]
    except (ValueError, KeyError):
        return r.status, None


def all_or_nothing(t):
    """A count that does not fit (--max-sandboxes) leaves no fork."""
    srv = dbx.Server(args=["--max-sandboxes", "3"])
    try:
        sid = srv.create({})["id"]
        srv.request("POST", base(sid) + "/checkpoints", {"name": "c"})
        r = srv.request("POST", base(sid) + "/fork", {"checkpoint": "c", "count": 3},
                        timeout=120)
        left = [x["id"] for x in srv.request("GET", "/v1/sandboxes").json()["sandboxes"]]
        t.ok(r.status == 429 and left == [sid],
             "3 forks where 2 fit: 429, and the 2 made are gone again", (r.status, left))
    finally:
        srv.stop()


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    state = tempfile.mkdtemp(prefix="dbx-ckpt-")
    srv = dbx.Server(state_dir=state)
    servers = [srv]
    try:
        sid = srv.create({})["id"]
        sh(srv, sid, "mkdir -p /workspace/dir && echo one > /workspace/a.txt && "
                     "head -c 1048576 /dev/urandom > /workspace/dir/b.bin && "
                     "echo home > /home/user/h.txt")
        h0 = tree(srv, sid)
        xvfb0 = sh(srv, sid, XVFB)["stdout"]
        t.ok(xvfb0.strip().isdigit(), "the desktop's Xvfb runs", xvfb0)

        # ---- checkpoint of a running sandbox ----
        r = srv.request("POST", base(sid) + "/checkpoints", {"name": "deps-installed"})
        c = r.json() if r.status == 201 else {}
        t.eq(r.status, 201, "POST /checkpoints answers 201")
        t.ok(c.get("name") == "deps-installed" and c.get("size_bytes", 0) > 1 << 20 and
             str(c.get("created_at", "")).endswith("Z"), "with name, size and time", c)
        t.diag("checkpoint (1 MiB written): %.1f ms, frozen %.1f ms, %d bytes" %
               (c.get("duration_ms", -1), c.get("frozen_ms", -1), c.get("size_bytes", 0)))
        t.eq(sh(srv, sid, XVFB)["stdout"], xvfb0, "the desktop did not restart")
        t.eq(srv.request("GET", base(sid) + "/desktop/screenshot").status, 200,
             "and answers screenshots")
        t.eq(tree(srv, sid), h0, "the files are unchanged by the checkpoint")

        # ---- change, delete, restore ----
        sh(srv, sid, "echo two > /workspace/a.txt && rm -r /workspace/dir && "
                     "echo new > /workspace/c.txt && rm /home/user/h.txt")
        t.ok(tree(srv, sid) != h0, "the tree changed")
        r = srv.request("GET", base(sid) + "/checkpoints")
        lst = r.json().get("checkpoints") if r.status == 200 else None
        t.ok(lst and [x["name"] for x in lst] == ["deps-installed"] and
             lst[0]["size_bytes"] == c.get("size_bytes"), "GET /checkpoints lists it", lst)
        r = srv.request("POST", base(sid) + "/checkpoints/deps-installed/restore")
        t.eq((r.status, r.json().get("status")), (200, "running"), "restore answers running")
        t.diag("restore: %.1f ms (desktop start included)" % r.json().get("duration_ms", -1))
        t.eq(tree(srv, sid), h0, "after restore the tree is the checkpoint's, exactly")
        t.eq(sh(srv, sid, "cat /workspace/a.txt; test -e /workspace/c.txt; echo $?")["stdout"],
             "one\n1\n", "changed files are back, new ones gone")
        t.eq(srv.request("GET", base(sid) + "/desktop/screenshot").status, 200,
             "the desktop is up after restore")
        t.ok(sh(srv, sid, XVFB)["stdout"].strip().isdigit(), "with an X server")
        t.eq(sh(srv, sid, "echo ok > /workspace/after.txt && cat /workspace/after.txt")["stdout"],
             "ok\n", "the restored filesystem is writable")

        # ---- forks ----
        r = srv.request("POST", base(sid) + "/fork", {"checkpoint": "deps-installed"})
        t.eq(r.status, 201, "fork from a checkpoint answers 201")
        fid = r.json()["id"] if r.status == 201 else None
        if fid:
            t.diag("fork from a checkpoint: %.0f ms" % r.json().get("duration_ms", -1))
            t.ok(fid != sid and r.json()["status"] == "running", "a new running sandbox")
            t.eq(tree(srv, fid), h0, "the fork has the checkpoint's files")
            t.eq(sh(srv, fid, "echo more >> /workspace/a.txt && echo f > /workspace/fork.txt "
                              "&& cat /workspace/a.txt")["stdout"], "one\nmore\n",
                 "the fork's user owns its files (moved into its uid range)")
            sh(srv, sid, "echo p > /workspace/parent.txt")
            t.eq(download(srv, sid, "/workspace/fork.txt"), 404, "the parent does not see the "
                 "fork's writes")
            t.eq(download(srv, fid, "/workspace/parent.txt"), 404, "the fork does not see the "
                 "parent's writes")
            t.eq(download(srv, sid, "/workspace/a.txt"), b"one\n", "the parent's file is its own")
        r = srv.request("POST", base(sid) + "/fork")
        t.eq(r.status, 201, "fork without a checkpoint answers 201")
        gid = r.json()["id"] if r.status == 201 else None
        if gid:
            t.diag("fork of the running sandbox: %.0f ms" % r.json().get("duration_ms", -1))
            t.eq(download(srv, gid, "/workspace/parent.txt"), b"p\n",
                 "it has the parent's files as they are now")
            t.eq(sh(srv, sid, XVFB)["stdout"].strip().isdigit(), True,
                 "the parent's desktop still runs")

        # ---- several forks at once ----
        r = srv.request("POST", base(sid) + "/fork", {"checkpoint": "deps-installed", "count": 3},
                        timeout=120)
        many = r.json().get("sandboxes") or [] if r.status == 201 else []
        t.ok(r.status == 201 and len({m.get("id") for m in many}) == 3 and
             all(m.get("status") == "running" for m in many),
             "count 3: three running forks in one answer", r.body[:300])
        t.diag("3 forks from a checkpoint: %.0f ms" % (r.json().get("duration_ms", -1)
                                                       if r.status == 201 else -1))
        t.ok(many and all(tree(srv, m["id"]) == h0 for m in many),
             "each has the checkpoint's files")
        for m in many:
            srv.request("DELETE", "/v1/sandboxes/" + m["id"])
        for bad in (0, 33, "2", 1.5, True):
            r = srv.request("POST", base(sid) + "/fork", {"checkpoint": "deps-installed",
                                                          "count": bad})
            t.ok(r.status == 400 and "count" in r.body.decode(), "fork count %r: 400" % (bad,),
                 r.body[:200])
        r = srv.request("POST", base(sid) + "/fork", {"count": 2, "name": "twins"})
        t.ok(r.status == 400 and "name" in r.body.decode(), "name with count 2: 400",
             r.body[:200])
        all_or_nothing(t)

        # ---- bad inputs ----
        for name in ("", ".hidden", "-x", "a b", "../x", "a/b", "x" * 65, 5, None):
            r = srv.request("POST", base(sid) + "/checkpoints", {"name": name})
            t.eq(err_code(r), (400, "invalid_argument"), "checkpoint name %r: 400" % (name,))
        r = srv.request("POST", base(sid) + "/checkpoints", {"name": "deps-installed"})
        t.eq(err_code(r), (409, "conflict"), "a taken name: 409")
        r = srv.request("POST", base(sid) + "/checkpoints/nope/restore")
        t.eq(err_code(r), (404, "not_found"), "restore of an unknown checkpoint: 404")
        r = srv.request("DELETE", base(sid) + "/checkpoints/nope")
        t.eq(err_code(r), (404, "not_found"), "delete of an unknown checkpoint: 404")
        r = srv.request("POST", base(sid) + "/fork", {"checkpoint": "nope"})
        t.eq(err_code(r), (404, "not_found"), "fork from an unknown checkpoint: 404")
        r = srv.request("POST", base(sid) + "/fork", {"checkpoint": "../x"})
        t.eq(r.status, 400, "fork from a bad name: 400")
        r = srv.request("POST", base("f" * 32) + "/checkpoints", {"name": "x"})
        t.eq(r.status, 404, "checkpoint of an unknown sandbox: 404")
        nodisk = srv.create({"disk_mb": 0})["id"]
        r = srv.request("POST", base(nodisk) + "/checkpoints", {"name": "x"})
        t.eq(err_code(r), (409, "conflict"), "a sandbox without its own disk: 409")
        srv.request("DELETE", base(nodisk))

        # ---- stopped sandboxes, delete, restart ----
        t.eq(srv.request("POST", base(sid) + "/stop").status, 200, "stop")
        r = srv.request("POST", base(sid) + "/checkpoints", {"name": "stopped.1"})
        t.eq(r.status, 201, "checkpoint of a stopped sandbox")
        srv.request("DELETE", "%s/files?path=%s" % (base(sid), urllib.parse.quote(
            "/workspace/a.txt")))
        t.eq(download(srv, sid, "/workspace/a.txt"), 404, "a file deleted while stopped")
        r = srv.request("POST", base(sid) + "/checkpoints/stopped.1/restore")
        t.eq((r.status, r.json().get("status")), (200, "stopped"),
             "restore of a stopped sandbox keeps it stopped")
        t.eq(download(srv, sid, "/workspace/a.txt"), b"one\n", "and the file is back")
        t.eq(srv.request("DELETE", base(sid) + "/checkpoints/stopped.1").status, 204,
             "DELETE a checkpoint: 204")
        r = srv.request("GET", base(sid) + "/checkpoints")
        t.eq([x["name"] for x in r.json()["checkpoints"]], ["deps-installed"],
             "it is no longer listed")
        t.eq(srv.stop(), 0, "deskboxd stops")
        srv = dbx.Server(state_dir=state)
        servers.append(srv)
        r = srv.request("GET", base(sid) + "/checkpoints")
        t.eq([x["name"] for x in r.json()["checkpoints"]], ["deps-installed"],
             "checkpoints survive a restart of deskboxd")
        t.eq(srv.request("POST", base(sid) + "/start").status, 200, "the sandbox starts")
        t.eq(tree(srv, sid) != "", True, "and has its files")
        sh(srv, sid, "echo later > /workspace/later.txt")
        r = srv.request("POST", base(sid) + "/checkpoints/deps-installed/restore")
        t.eq((r.status, r.json().get("status")), (200, "running"),
             "a checkpoint from before the restart restores")
        t.eq(tree(srv, sid), h0, "to its tree, exactly")
        r = srv.request("POST", base(sid) + "/fork", {"checkpoint": "deps-installed"})
        t.eq(r.status, 201, "and forks")
        if r.status == 201:
            t.eq(tree(srv, r.json()["id"]), h0, "the fork has its tree")
            srv.request("DELETE", base(r.json()["id"]))
        pooled = os.path.exists(srv.ns_path("store", "sandboxes", sid, "checkpoints",
                                            "deps-installed", "disk.img"))
        t.diag("checkpoints are in the disk store: %s" % pooled)
        t.eq(srv.request("DELETE", base(sid)).status, 204, "delete the sandbox")
        t.ok(not os.path.exists(srv.ns_path("sandboxes", sid)) and
             not os.path.exists(srv.ns_path("store", "sandboxes", sid)),
             "its checkpoints went with it")
        if fid:
            t.eq(srv.request("POST", base(fid) + "/start").status, 200,
                 "the fork starts without its parent")
            t.eq(download(srv, fid, "/workspace/fork.txt"), b"f\n", "with its own files")

        # ---- the Python SDK ----
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients",
                                        "python"))
        import deskbox
        box = deskbox.Deskbox(url="http://127.0.0.1:%d" % srv.port, token=srv.token)
        with box.create() as sbx:
            t.eq(sbx.pause().status, "paused", "SDK: pause()")
            t.eq(sbx.resume().status, "running", "SDK: resume()")
            t.ok(sbx.set_timeout(600).info.get("expires_at"), "SDK: set_timeout()")
            t.eq(sbx.checkpoint("sdk").get("name"), "sdk", "SDK: checkpoint()")
            t.eq([c["name"] for c in sbx.checkpoints()], ["sdk"], "SDK: checkpoints()")
            t.eq(sbx.restore("sdk").status, "running", "SDK: restore()")
            f = sbx.fork("sdk")
            t.ok(f.id != sbx.id and f.status == "running", "SDK: fork()")
            f.delete()
            sbx.delete_checkpoint("sdk")
            t.eq(sbx.checkpoints(), [], "SDK: delete_checkpoint()")

        # ---- the CLI ----
        env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port,
                   DESKBOX_TOKEN=srv.token)

        def cli(*args):
            p = subprocess.run([os.path.join(dbx.BUILD, "deskbox")] + list(args), env=env,
                               capture_output=True, text=True, timeout=300)
            return p.returncode, p.stdout + p.stderr
        cid = srv.create({})["id"]
        rc, out = cli("pause", cid)
        t.ok(rc == 0 and "paused" in out, "CLI: pause", out)
        rc, out = cli("resume", cid)
        t.ok(rc == 0 and "running" in out, "CLI: resume", out)
        rc, out = cli("timeout", cid, "600")
        t.ok(rc == 0 and "expires 20" in out, "CLI: timeout", out)
        t.ok(cli("timeout", cid, "soon")[0] != 0, "CLI: timeout with a bad number fails")
        rc, out = cli("checkpoint", cid, "cli-1")
        t.ok(rc == 0 and out.startswith("cli-1"), "CLI: checkpoint", out)
        rc, out = cli("checkpoint", cid)
        t.ok(rc == 0 and "cli-1" in out, "CLI: checkpoint lists", out)
        rc, out = cli("restore", cid, "cli-1")
        t.ok(rc == 0 and "running" in out, "CLI: restore", out)
        rc, out = cli("fork", cid, "cli-1")
        t.ok(rc == 0 and "running" in out and not out.startswith(cid), "CLI: fork", out)
        if rc == 0:
            srv.request("DELETE", base(out.split()[0]))
        t.ok(cli("restore", cid, "nope")[0] != 0, "CLI: restore of an unknown checkpoint fails")
        srv.request("DELETE", base(cid))
    finally:
        dbx.stop_servers(t, servers, state)
    t.done()


main()
