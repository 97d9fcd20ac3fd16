"""The deskbox CLI end to end against a real deskboxd: create, ls, get,
exec with the command's exit code and output passed through, run, a few
MB uploaded and downloaded with equal sha256, a screenshot that is a PNG of
the display's size, click/type/key, --json output that parses, stop/start,
archive/unpack round trips checked by sha256,
find and search, vnc, rm, and the exit codes for usage errors, unknown sandboxes and an
unreachable server."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

CLI = os.path.join(dbx.BUILD, "deskbox")


class Cli:
    def __init__(self, srv):
        self.env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port,
                        DESKBOX_TOKEN=srv.token)

    def __call__(self, *args, stdin=None, timeout=180):
        p = subprocess.run([CLI] + list(args), input=stdin, capture_output=True,
                           env=self.env, timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def test_usage(t, cli):
    rc, out, _ = cli("--help")
    t.ok(rc == 0 and "Exit codes" in out and "exec" in out, "deskbox --help lists verbs and exit codes")
    rc, out, _ = cli("exec", "--help")
    t.ok(rc == 0 and "usage: deskbox exec" in out, "every verb has --help")
    t.eq(cli()[0], 2, "no verb exits 2")
    t.eq(cli("frobnicate")[0], 2, "an unknown verb exits 2")
    t.eq(cli("create", "--display", "wide")[0], 2, "a malformed --display exits 2")
    t.eq(cli("get")[0], 2, "a missing argument exits 2")
    t.eq(cli("click", "abc", "1")[0], 2, "click without Y exits 2")
    t.eq(cli("ls", "--bogus")[0], 2, "an unknown option exits 2")
    t.eq(cli("run", "x", "--lang", "cobol", "-")[0], 2, "an unknown language exits 2")


def test_errors(t, cli, srv):
    rc, _, err = cli("get", "0" * 32)
    t.ok(rc == 3 and "not_found" in err, "an unknown sandbox exits 3 with the server's code",
         (rc, err))
    t.eq(cli("exec", "0" * 32, "--", "true")[0], 3, "exec in an unknown sandbox exits 3")
    rc, _, err = cli("--token", "wrong", "ls")
    t.ok(rc == 5 and "unauthorized" in err, "a wrong token exits 5", (rc, err))
    rc, _, err = cli("--url", "http://127.0.0.1:1", "ls")
    t.ok(rc == 4, "an unreachable server exits 4", (rc, err))


def test_exec(t, cli, sid):
    rc, out, err = cli("exec", sid, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    t.eq(rc, 7, "exec passes the command's exit code through")
    t.eq((out, err), ("out\n", "err\n"), "exec prints stdout and stderr as they are")
    p = subprocess.run([CLI, "exec", sid, "--", "printf", "\\377\\000a"], capture_output=True,
                       env=cli.env)
    t.eq(p.stdout, b"\xff\x00a", "bytes that are not UTF-8 come out exactly")
    rc, out, _ = cli("--json", "exec", sid, "--", "sh", "-c", "echo hi; exit 3")
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    t.ok(rc == 3 and j.get("stdout") == "hi\n" and j.get("exit_code") == 3,
         "exec --json prints the server's result and keeps the exit code", (rc, out))
    rc, _, err = cli("exec", sid, "--timeout", "1", "--", "sleep", "30")
    t.ok(rc == 124 and "timed out" in err, "a timed-out command exits 124", (rc, err))
    rc, out, _ = cli("exec", sid, "--env", "GREETING=héllo", "--cwd", "/tmp", "--", "sh", "-c",
                     "echo $GREETING $(pwd)")
    t.eq((rc, out), (0, "héllo /tmp\n"), "exec --env and --cwd")
    rc, out, _ = cli("run", sid, "--lang", "python", "-",
                     stdin=b"import sys\nprint(6*7)\nsys.exit(4)\n")
    t.eq((rc, out), (4, "42\n"), "run - reads code from stdin, exit code passed through")
    rc, out, _ = cli("run", sid, "--lang", "bash", "-", stdin=b"echo $((2+3))")
    t.eq((rc, out), (0, "5\n"), "run --lang bash")


def test_files(t, cli, sid, tmp):
    src = os.path.join(tmp, "in.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(5 << 20) + b"tail")
    want = sha256_file(src)
    rc, out, err = cli("upload", sid, src, "dir/in.bin", "--parents")
    t.ok(rc == 0 and want in out and str((5 << 20) + 4) in out,
         "upload prints the size and sha256", (rc, out, err))
    dst = os.path.join(tmp, "out.bin")
    rc, out, err = cli("download", sid, "/workspace/dir/in.bin", dst)
    t.ok(rc == 0 and want in out, "download prints the sha256", (rc, out, err))
    t.eq(sha256_file(dst) if os.path.exists(dst) else None, want,
         "a 5 MiB round trip keeps every byte")
    left = [n for n in os.listdir(tmp) if "deskbox-" in n]
    t.eq(left, [], "no temporary files are left behind")
    rc, _, err = cli("download", sid, "no/such/file", os.path.join(tmp, "nope"))
    t.ok(rc == 3 and not os.path.exists(os.path.join(tmp, "nope")),
         "downloading a missing file exits 3 and writes nothing", (rc, err))
    rc, out, _ = cli("--json", "upload", sid, src, "in2.bin")
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    t.ok(rc == 0 and j.get("sha256") == want and j.get("path"),
         "upload --json prints the server's answer", out)


def test_desktop(t, cli, sid, tmp):
    shot = os.path.join(tmp, "shot.png")
    rc, out, err = cli("screenshot", sid, "-o", shot)
    data = open(shot, "rb").read() if os.path.exists(shot) else b""
    info = dbx.png_info(data) if data[:8] == b"\x89PNG\r\n\x1a\n" else None
    t.ok(rc == 0 and info and info[:2] == (800, 600), "screenshot writes a PNG of the display size",
         (rc, err, info))
    rc, _, err = cli("screenshot", sid, "-o", shot, "--region", "10,20,100,50")
    info = dbx.png_info(open(shot, "rb").read())
    t.ok(rc == 0 and info[:2] == (100, 50), "screenshot --region", (rc, err, info))
    t.eq(cli("screenshot", sid)[0], 2, "screenshot without -o exits 2")
    rc, out, _ = cli("--json", "click", sid, "100", "100", "--button", "left")
    t.ok(rc == 0 and "events" in json.loads(out or "{}"), "click --json answers the events", out)
    t.eq(cli("type", sid, "héllo ✓")[0], 0, "type")
    t.eq(cli("key", sid, "ctrl+c")[0], 0, "key")
    rc, _, err = cli("key", sid, "ctrl+nokey")
    t.ok(rc == 5 and "invalid_argument" in err, "a bad key name exits 5 with the server's code",
         (rc, err))
    rc, out, _ = cli("vnc", sid, "--view-only")
    t.ok(rc == 0 and out.startswith(cli.env["DESKBOX_URL"] + "/v1/sandboxes/" + sid + "/vnc/?token="),
         "vnc prints a full viewer URL", out)
    rc, out, _ = cli("port", sid, "8765", "--ttl", "60")
    url = out.strip()
    t.ok(rc == 0 and url.startswith(cli.env["DESKBOX_URL"] + "/v1/sandboxes/" + sid +
                                    "/ports/8765/?deskbox_token="), "port prints a share URL", out)
    try:
        status = urllib.request.urlopen(url, timeout=30).status
    except urllib.error.HTTPError as e:
        status = e.code
    # Nothing listens on 8765: 502 from the proxy, not 401, so the share
    # token alone got through.
    t.eq(status, 502, "the share URL needs no API token")
    t.eq(cli("port", sid, "70000")[0], 2, "port with a bad port number exits 2")


def test_lifecycle(t, cli, srv):
    # A bad allow entry is the server's 400 (other modes than none change
    # this machine's namespace: test_network.py tests them).
    rc, _, err = cli("create", "--network", "ok.test,bad name!")
    t.ok(rc == 5 and "bad name!" in err, "create --network with a bad entry exits 5", (rc, err))
    rc, sid, err = cli("create", "--display", "800x600", "--memory", "512", "--env", "A=1",
                       "--network", "none")
    sid = sid.strip()
    if not t.ok(rc == 0 and len(sid) == 32, "create prints the new id", (rc, sid, err)):
        return None
    rc, out, _ = cli("ls")
    t.ok(rc == 0 and sid in out and "running" in out and "800x600" in out, "ls lists it", out)
    rc, out, _ = cli("--json", "ls")
    ids = [s["id"] for s in json.loads(out)["sandboxes"]] if rc == 0 else []
    t.ok(sid in ids, "ls --json is the server's JSON")
    rc, out, _ = cli("get", sid, "--json")
    t.ok(rc == 0 and json.loads(out).get("memory_mb") == 512 and
         json.loads(out).get("network") == "none", "get --json (option after the id)")
    rc, out, _ = cli("get", sid)
    t.ok(rc == 0 and "status" in out and "running" in out, "get prints the fields", out)
    return sid


def test_stop_rm(t, cli, srv, sid):
    rc, out, _ = cli("stop", sid)
    t.ok(rc == 0 and "stopped" in out, "stop", out)
    t.eq(cli("exec", sid, "--", "true")[0], 5, "exec in a stopped sandbox exits 5 (conflict)")
    rc, out, _ = cli("start", sid)
    t.ok(rc == 0 and "running" in out, "start", out)
    rc, out, _ = cli("exec", sid, "--", "cat", "dir/in.bin")
    t.eq(rc, 0, "files survive stop/start")
    rc, _, _ = cli("rm", sid, "0" * 32)
    t.eq(rc, 3, "rm of a known and an unknown id exits 3")
    t.eq(srv.request("GET", "/v1/sandboxes/" + sid).status, 404, "rm deleted the known one")
    t.eq(cli("get", sid)[0], 3, "get after rm exits 3")


def tar_members(path):
    with tarfile.open(path) as tf:  # any compression
        return {m.name.lstrip("./"): hashlib.sha256(tf.extractfile(m).read()).hexdigest()
                for m in tf.getmembers() if m.isfile()}


def test_trees(t, cli, sid, tmp):
    """archive, unpack, find and search on a tree of three files."""
    blob = os.urandom(4000)
    files = {"a.py": b"print('needle')\n", "sub/b.py": b"x = 1\nneedle = 2\n", "sub/c.bin": blob}
    rcs = []
    for name, data in files.items():
        local = os.path.join(tmp, name.replace("/", "_"))
        with open(local, "wb") as f:
            f.write(data)
        rcs.append(cli("upload", sid, local, "tree/" + name, "--parents")[0])
    t.eq(rcs, [0, 0, 0], "a tree of three files")
    want = {"a.py": hashlib.sha256(b"print('needle')\n").hexdigest(),
            "sub/b.py": hashlib.sha256(b"x = 1\nneedle = 2\n").hexdigest(),
            "sub/c.bin": hashlib.sha256(blob).hexdigest()}
    tgz = os.path.join(tmp, "tree.tar.gz")
    rc, out, err = cli("archive", sid, "tree", "-o", tgz)
    ok = rc == 0 and os.path.exists(tgz)
    t.ok(ok and sha256_file(tgz) in out, "archive prints the size and sha256", (rc, out, err))
    t.eq(tar_members(tgz) if ok else None, want,
         "archive -o x.tar.gz: a gzipped tar of the tree (sha256 of each member)")
    rc, out, err = cli("unpack", sid, tgz, "copy/of/tree", "--parents")
    t.ok(rc == 0 and re.search(r": [45] members, %d bytes" % (4000 + 16 + 17), out),
         "unpack prints the members and bytes", (rc, out, err))
    tar = os.path.join(tmp, "copy.tar")
    rc, out, err = cli("--json", "archive", sid, "copy/of/tree", "-o", tar, "--format", "tar")
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    t.ok(rc == 0 and j.get("sha256") == sha256_file(tar) and tar_members(tar) == want,
         "the unpacked copy archives back to the same members (--json, --format tar)",
         (rc, out, err))
    rc, _, err = cli("unpack", sid, tgz, "copy/of/tree")
    t.ok(rc == 5 and "conflict" in err, "unpack onto a directory with files exits 5", (rc, err))
    t.eq(cli("archive", sid, "no/such/dir", "-o", os.path.join(tmp, "x.tar"))[0], 3,
         "archive of a missing directory exits 3")
    t.ok(not os.path.exists(os.path.join(tmp, "x.tar")), "and writes nothing")
    t.eq(cli("archive", sid, "tree", "-o", tar, "--format", "rar")[0], 2,
         "an unknown --format exits 2")
    t.eq(cli("archive", sid, "tree")[0], 2, "archive without -o exits 2")
    rc, out, _ = cli("find", sid, "tree", "--name", "*.py")
    t.eq(sorted(out.split()), ["/workspace/tree/a.py", "/workspace/tree/sub/b.py"],
         "find --name prints one path a line")
    rc, out, _ = cli("find", sid, "tree", "--max-depth", "0")
    t.eq(sorted(out.split()), ["/workspace/tree/a.py", "/workspace/tree/sub/"],
         "find --max-depth 0: directories end in /")
    rc, out, _ = cli("--json", "find", sid, "tree", "--name", "c.*")
    try:
        names = [e["name"] for e in json.loads(out)["entries"]]
    except (ValueError, KeyError):
        names = out
    t.eq(names, ["c.bin"], "find --json prints the server's answer")
    rc, out, _ = cli("search", sid, "tree", "needle")
    t.eq(sorted(out.splitlines()), ["/workspace/tree/a.py:1:print('needle')",
                                    "/workspace/tree/sub/b.py:2:needle = 2"],
         "search prints path:line:text")
    rc, out, _ = cli("search", sid, "tree", "^x = [0-9]$", "--regex")
    t.eq((rc, out), (0, "/workspace/tree/sub/b.py:1:x = 1\n"), "search --regex")
    t.eq(cli("search", sid, "tree", "no such text")[:2], (0, ""), "no match: exit 0, no output")
    t.eq(cli("search", sid, "tree")[0], 2, "search without PATTERN exits 2")
    t.eq(cli("find", sid, "no/such/dir")[0], 3, "find in a missing directory exits 3")
    rc, out, _ = cli("unpack", "--help")
    t.ok(rc == 0 and "usage: deskbox unpack" in out, "the new verbs have --help")


def main():
    dbx.require_root_and_tools()
    if not os.path.exists(CLI):
        dbx.skip_all("the CLI is not built in %s" % dbx.BUILD)
    t = dbx.Tap()
    srv = dbx.Server()
    tmp = tempfile.mkdtemp(prefix="dbx-cli-")
    cli = Cli(srv)
    try:
        test_usage(t, cli)
        test_errors(t, cli, srv)
        sid = test_lifecycle(t, cli, srv)
        if sid:
            test_exec(t, cli, sid)
            test_files(t, cli, sid, tmp)
            test_trees(t, cli, sid, tmp)
            test_desktop(t, cli, sid, tmp)
            test_stop_rm(t, cli, srv, sid)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
