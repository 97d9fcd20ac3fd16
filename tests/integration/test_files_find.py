"""Finding and changing files through the files API against a real deskboxd
and sandbox: find by name with depth and result bounds, search for lines
(literal, regex, case, binary and size skips, bounds), replace across files
(atomic per file, counts, regex groups, errors per file), chmod and chown
(only the sandbox's own ids)."""

import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

MAKE = r"""
import os
t = "/workspace/proj"
for d in ("src/pkg/deep", "docs", "node_modules/x"):
    os.makedirs(t + "/" + d, exist_ok=True)
files = {
    "src/main.py": "import os\nprint('hello world')\n# TODO: fix\n",
    "src/pkg/util.py": "def hello():\n    return 'Hello'\n",
    "src/pkg/deep/more.py": "HELLO = 1\nhello = 2\n",
    "src/pkg/notes.txt": "hello from text\n",
    "docs/readme.md": "# Readme\nsay hello\n",
    "node_modules/x/index.js": "hello js\n",
    "ünï.py": "héllo ünicode\n",
}
for p, c in files.items():
    with open(t + "/" + p, "w") as f: f.write(c)
with open(t + "/src/blob.bin", "wb") as f: f.write(b"hello\0binary\n" * 10)
with open(t + "/big.txt", "w") as f: f.write("hello big\n" * 300000)
os.symlink("/etc", t + "/etc-link")
with open(t + "/many.txt", "w") as f: f.write("match\n" * 5000)
with open(t + "/long.txt", "w") as f:
    f.write("x" * 100000 + "needle" + "y" * 100000 + "\nthe second needle\n")
"""


def q(s):
    return urllib.parse.quote(s, safe="")


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create()["id"]
        base = "/v1/sandboxes/%s/files" % sid

        def get(route, **params):
            qs = "&".join("%s=%s" % (k, q(str(v))) for k, v in params.items())
            return srv.request("GET", "%s/%s?%s" % (base, route, qs))

        def post(route, body):
            return srv.request("POST", "%s/%s" % (base, route), body)

        r = srv.exec(sid, ["python3", "-c", MAKE])
        t.eq(r["exit_code"], 0, "the project tree is made: %s" % r["stderr"][-300:])

        # ---- find ----
        r = get("find", path="/workspace/proj", name="*.py")
        t.eq(r.status, 200, "find answers 200")
        paths = sorted(e["path"] for e in r.json()["entries"])
        t.eq(paths, ["/workspace/proj/src/main.py", "/workspace/proj/src/pkg/deep/more.py",
                     "/workspace/proj/src/pkg/util.py", "/workspace/proj/ünï.py"],
             "find name=*.py lists every .py file with its full path")
        t.eq(r.json()["truncated"], False, "not truncated")
        r = get("find", path="/workspace/proj", name="*.py", max_depth=1)
        t.eq(sorted(e["path"] for e in r.json()["entries"]),
             ["/workspace/proj/src/main.py", "/workspace/proj/ünï.py"],
             "max_depth=1 stops one level below")
        r = get("find", path="/workspace/proj", max_results=3)
        t.ok(len(r.json()["entries"]) == 3 and r.json()["truncated"] is True,
             "max_results bounds the answer and says truncated")
        r = get("find", path="/workspace/proj", name="etc-link")
        ents = r.json()["entries"]
        t.ok(len(ents) == 1 and ents[0]["type"] == "symlink",
             "a symlink is listed as a link")
        r = get("find", path="/workspace/proj", name="passwd")
        t.eq(r.json()["entries"], [], "and never followed (no /etc/passwd through it)")
        r = get("find", path="/", name="cpuinfo")
        t.eq(r.json()["entries"], [], "other mounts (/proc) are not walked")
        t.eq(get("find", path="/workspace/nope").status, 404, "a missing directory is 404")
        t.eq(get("find", path="/workspace/proj/src/main.py").status, 400,
             "find on a file is 400")
        t.eq(get("find", path="/workspace/proj", max_depth=-1).status, 400,
             "a negative max_depth is 400")

        # ---- search ----
        r = get("search", path="/workspace/proj", pattern="hello", max_file_size=20000)
        t.eq(r.status, 200, "search answers 200")
        got = sorted((m["path"].replace("/workspace/proj/", ""), m["line"], m["text"])
                     for m in r.json()["matches"])
        want = sorted([("src/main.py", 2, "print('hello world')"),
                       ("src/pkg/util.py", 1, "def hello():"),
                       ("src/pkg/deep/more.py", 2, "hello = 2"),
                       ("src/pkg/notes.txt", 1, "hello from text"),
                       ("docs/readme.md", 2, "say hello"),
                       ("node_modules/x/index.js", 1, "hello js")])
        t.eq(got, want, "literal search: file, line and text of each match (binary file "
             "and files over max_file_size skipped)")
        t.eq(r.json()["truncated"], False, "not truncated")
        r = get("search", path="/workspace/proj", pattern="hello")
        t.ok(r.json()["truncated"] is True and len(r.json()["matches"]) == 1000,
             "1000 matches by default: big.txt truncates the answer")
        r = get("search", path="/workspace/proj/src", pattern="hello", ignore_case=1)
        t.eq(len(r.json()["matches"]), 6, "ignore_case=1 also finds Hello and HELLO")
        r = get("search", path="/workspace/proj", pattern="^(def|HELLO) ", regex=1,
                max_file_size=100000)
        got = sorted((m["path"].rsplit("/", 1)[1], m["line"]) for m in r.json()["matches"])
        t.eq(got, [("more.py", 1), ("util.py", 1)], "regex=1 uses an extended regex")
        t.eq(r.json()["truncated"], False, "max_file_size skips big.txt: not truncated")
        r = get("search", path="/workspace/proj/many.txt", pattern="match", max_matches=10)
        t.ok(len(r.json()["matches"]) == 10 and r.json()["truncated"] is True,
             "max_matches bounds the matches; a single file can be searched")
        r = get("search", path="/workspace/proj/long.txt", pattern="needle")
        t.eq([(m["line"], len(m["text"])) for m in r.json()["matches"]],
             [(1, 1024), (2, len("the second needle"))],
             "a 200 KB line is searched in pieces: line numbers right, text cut at 1024")
        r = get("search", path="/workspace/proj", pattern="binary")
        t.eq(r.json()["matches"], [], "files with NUL bytes are not searched")
        r = get("search", path="/workspace/proj", pattern="ünicode")
        t.eq([m["text"] for m in r.json()["matches"]], ["héllo ünicode"], "UTF-8 text")
        t.eq(get("search", path="/workspace/proj", pattern="(", regex=1).status, 400,
             "a bad regex is 400")
        t.eq(get("search", path="/workspace/proj").status, 400, "a missing pattern is 400")

        # ---- replace ----
        r = post("replace", {"paths": ["proj/src/main.py", "proj/src/pkg/util.py",
                                       "proj/docs/readme.md"],
                             "pattern": "hello", "replacement": "goodbye"})
        t.eq(r.status, 200, "replace answers 200")
        t.eq([(f["path"], f.get("replacements")) for f in r.json()["files"]],
             [("/workspace/proj/src/main.py", 1), ("/workspace/proj/src/pkg/util.py", 1),
              ("/workspace/proj/docs/readme.md", 1)], "a count per file")
        t.eq(r.json()["replacements"], 3, "and the total")
        out = srv.exec(sid, ["cat", "/workspace/proj/src/main.py"])["stdout"]
        t.eq(out, "import os\nprint('goodbye world')\n# TODO: fix\n", "the file changed")
        r = post("replace", {"paths": ["/workspace/proj/src/pkg/deep/more.py"],
                             "pattern": r"^([A-Za-z]+) = ([0-9])$",
                             "replacement": r"\2 := \1", "regex": True})
        t.eq(r.json()["files"][0].get("replacements"), 2, "regex replace with groups: 2")
        out = srv.exec(sid, ["cat", "/workspace/proj/src/pkg/deep/more.py"])["stdout"]
        t.eq(out, "1 := HELLO\n2 := hello\n", "groups \\1 and \\2, per line anchors")
        srv.exec(sid, ["chmod", "0750", "/workspace/proj/src/pkg/notes.txt"])
        ino = srv.exec(sid, ["stat", "-c", "%i", "/workspace/proj/src/pkg/notes.txt"])["stdout"]
        r = post("replace", {"paths": ["/workspace/proj/src/pkg/notes.txt", "/workspace/none",
                                       "/workspace/proj/src/blob.bin",
                                       "/workspace/proj/docs/readme.md"],
                             "pattern": "hello", "replacement": "hi"})
        files = r.json()["files"]
        t.eq(files[0].get("replacements"), 1, "replace in a 0750 file")
        st = srv.exec(sid, ["stat", "-c", "%a %i", "/workspace/proj/src/pkg/notes.txt"])
        mode, ino2 = st["stdout"].split()
        t.ok(mode == "750" and ino2 != ino.strip(),
             "the mode is kept and the file was replaced (new inode: temp + rename)")
        t.eq(files[1].get("error", {}).get("code"), "not_found", "a missing file: its error")
        t.eq(files[2].get("error", {}).get("code"), "invalid_argument",
             "a binary file is refused")
        t.eq(files[3].get("replacements"), 0, "no match: 0, the file untouched")
        ls = srv.exec(sid, ["sh", "-c", "ls -A /workspace/proj/src/pkg /workspace/proj/docs"])
        t.ok(".deskbox" not in ls["stdout"], "no temporary file left behind")
        r = post("replace", {"paths": ["/workspace/proj/x"], "pattern": "(", "regex": True,
                             "replacement": ""})
        t.eq(r.status, 400, "a bad regex is 400 for the request")
        t.eq(post("replace", {"paths": [], "pattern": "a", "replacement": "b"}).status, 400,
             "empty paths is 400")
        t.eq(post("replace", {"paths": ["../x"], "pattern": "a", "replacement": "b"}).status,
             400, "a '..' path is 400")

        # ---- chmod ----
        r = post("chmod", {"path": "/workspace/proj/src/main.py", "mode": "0700"})
        t.eq((r.status, r.json().get("mode")), (200, 0o700), "chmod with an octal string")
        r = post("chmod", {"path": "/workspace/proj/src/main.py", "mode": 0o644})
        t.eq((r.status, r.json().get("mode")), (200, 0o644), "chmod with a number")
        t.eq(post("chmod", {"path": "/workspace/proj/etc-link", "mode": "0777"}).status, 400,
             "chmod of a symlink is 400 (never followed)")
        t.eq(post("chmod", {"path": "/etc/passwd", "mode": "0666"}).status, 403,
             "chmod of root's file is 403")
        t.eq(post("chmod", {"path": "/workspace/proj/src/main.py", "mode": "999"}).status, 400,
             "a bad mode is 400")

        # ---- chown ----
        p = "/workspace/proj/src/pkg/util.py"
        r = post("chown", {"path": p, "uid": 0, "gid": 0})
        t.eq(r.status, 200, "chown to root inside: %s" % r.body[:200])
        own = srv.exec(sid, ["stat", "-c", "%u:%g", p])["stdout"].strip()
        t.eq(own, "0:0", "the sandbox sees root as the owner")
        r = post("chown", {"path": p, "uid": 1000, "gid": 1000})
        own = srv.exec(sid, ["stat", "-c", "%u:%g", p])["stdout"].strip()
        t.eq((r.status, own), (200, "1000:1000"), "and back to its user")
        r = post("chown", {"path": p, "uid": 1001})
        t.eq(r.status, 403, "another id is refused with 403")
        r = post("chown", {"path": p, "uid": 65534, "gid": 65534})
        t.eq(r.status, 403, "nobody is refused too")
        etc0 = srv.exec(sid, ["stat", "-L", "-c", "%g", "/workspace/proj/etc-link"])["stdout"]
        r = post("chown", {"path": "/workspace/proj/etc-link", "gid": 0})
        own = srv.exec(sid, ["stat", "-c", "%g", "/workspace/proj/etc-link"])["stdout"].strip()
        etc = srv.exec(sid, ["stat", "-L", "-c", "%g", "/workspace/proj/etc-link"])["stdout"]
        t.ok(r.status == 200 and own == "0" and etc == etc0,
             "chown of a symlink changes the link, not /etc: %d %s %s %s" %
             (r.status, r.body[:200], own, etc))
        t.eq(post("chown", {"path": p}).status, 400, "no uid and no gid is 400")
        # /usr is the sandbox's own overlay (root inside may change it):
        # a chown there changes its copy only, never the host's file.
        r = post("chown", {"path": "/usr/bin/env", "uid": 1000})
        own = srv.exec(sid, ["stat", "-c", "%u", "/usr/bin/env"])["stdout"].strip()
        t.ok(r.status == 200 and own == "1000" and os.stat("/usr/bin/env").st_uid == 0,
             "chown in the sandbox's /usr changes its copy, not the host's: %d %s %s" %
             (r.status, r.body[:200], own))
        t.eq(srv.request("DELETE", "/v1/sandboxes/" + sid).status, 204, "delete the sandbox")
    finally:
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly")
        log = srv.stderr()
        if "AddressSanitizer" in log or "runtime error" in log:
            t.ok(False, "sanitizers are quiet", log[-3000:])
        if t.failed:
            t.diag(srv.stderr())
        srv.cleanup()
    t.done()


main()
