#!/usr/bin/env python3
"""Names, metadata and read-only roots (docs/lifecycle.md, "Names and
metadata"): a sandbox created with "name" answers under that name in every
route family (GET, screenshot, exec, files, viewer tokens, ports through
the path and through a {port}-{name} Host, stop/start, fork, delete); of
16 concurrent creates of one name exactly one wins and the others get 409
name_taken; names and metadata survive a deskboxd restart that takes the
sandbox over; GET /v1/sandboxes?metadata.k=v filters (several parameters
AND together); bad names and metadata are 400 naming the field.  With
"read_only_root": true, writes outside /workspace, /tmp, /home/user and
/root fail inside with EROFS and through the files API with 403, the
desktop still starts and answers."""
import http.client
import json
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

t = dbx.Tap()
dbx.require_root_and_tools()


def code_of(r):
    try:
        return r.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def message_of(r):
    try:
        return r.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return ""


def raw(srv, method, path, headers):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    conn.request(method, path, headers=headers)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return dbx.Response(r.status, r.getheaders(), data)


def listed(srv, query=""):
    r = srv.request("GET", "/v1/sandboxes" + query)
    if r.status != 200:
        return r.status
    return sorted(sb["id"] for sb in r.json()["sandboxes"])


SMALL = {"display": {"width": 640, "height": 480}, "disk_mb": 256}


def spec(**kw):
    s = dict(SMALL)
    s.update(kw)
    return s


def check_refusals(srv):
    bad_names = ["", "Alice", "-a", "a-", "1abc", "a_b", "a.b", "a" * 64,
                 "0123456789abcdef0123456789abcdef", "abcdef0123456789abcdef0123456789", 5,
                 ["x"], "é"]
    for n in bad_names:
        r = srv.request("POST", "/v1/sandboxes", spec(name=n))
        t.ok(r.status == 400 and code_of(r) == "invalid_argument" and
             "'name'" in message_of(r), "name %r: 400 naming the field" % (n,),
             "%d %s" % (r.status, r.body[:200]))
    bad_meta = [
        ("a list", ["x"]),
        ("a number value", {"k": 1}),
        ("a null value", {"k": None}),
        ("a value of 257 bytes", {"k": "v" * 257}),
        ("33 keys", {"k%d" % i: "v" for i in range(33)}),
        ("a key with a space", {"a b": "v"}),
        ("a key of 65 bytes", {"k" * 65: "v"}),
        ("an empty key", {"": "v"}),
    ]
    for why, m in bad_meta:
        r = srv.request("POST", "/v1/sandboxes", spec(metadata=m))
        t.ok(r.status == 400 and code_of(r) == "invalid_argument" and
             "'metadata'" in message_of(r), "metadata with %s: 400 naming the field" % why,
             "%d %s" % (r.status, r.body[:200]))
    r = srv.request("POST", "/v1/sandboxes",
                    b'{"metadata": {"k": "a", "k": "b"}}', headers={"Content-Type":
                                                                     "application/json"})
    t.ok(r.status == 400 and "twice" in message_of(r), "a metadata key given twice: 400",
         r.body[:200])
    r = srv.request("POST", "/v1/sandboxes", spec(read_only_root="yes"))
    t.ok(r.status == 400 and "read_only_root" in message_of(r),
         "read_only_root not a boolean: 400", r.body[:200])
    t.eq(listed(srv), [], "no refused create left a sandbox behind")


def check_routes(srv, sid, name):
    """Every route family, addressed by name."""
    base = "/v1/sandboxes/" + name
    r = srv.request("GET", base)
    t.ok(r.status == 200 and r.json()["id"] == sid and r.json()["name"] == name,
         "GET by name is the sandbox", r.body[:200])
    png = srv.screenshot(name)
    t.eq(dbx.png_info(png)[:2], (640, 480), "a screenshot by name")
    t.eq(srv.exec(name, ["echo", "hi"])["stdout"], "hi\n", "exec by name")
    up = srv.request("PUT", base + "/files/upload?path=/workspace/n.txt", b"by name\n")
    t.eq(up.status, 201, "an upload by name")
    r = srv.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/n.txt" % sid)
    t.eq(r.body, b"by name\n", "is the file the id reads back")
    r = srv.request("GET", base + "/files/list?path=/workspace")
    t.ok(r.status == 200 and "n.txt" in r.body.decode(), "a listing by name")
    tok = srv.request("POST", base + "/vnc/tokens", {})
    t.eq(tok.status, 201, "a viewer token by name")
    if tok.status == 201:
        tk = tok.json()["token"]
        r = raw(srv, "GET", "/v1/sandboxes/%s/vnc/?token=%s" % (sid, tk), {})
        t.eq(r.status, 200, "the viewer page under the id takes a token made under the name")
        r = raw(srv, "GET", "/v1/sandboxes/%s/vnc/?token=%s" % (name, tk), {})
        t.eq(r.status, 200, "and under the name")
    srv.exec(name, ["mkdir", "-p", "/workspace/www"])
    srv.request("PUT", base + "/files/upload?path=/workspace/www/p.txt", b"port by name\n")
    srv.exec(name, ["python3", "-m", "http.server", "-b", "127.0.0.1", "8000"],
             cwd="/workspace/www", background=True)
    ok = dbx.wait_until(lambda: srv.request("GET", base + "/ports/8000/p.txt").status == 200,
                        timeout=30)
    t.ok(ok, "a port through the proxy by name")
    r = raw(srv, "GET", "/p.txt", {"Host": "8000-%s.deskbox.test:%d" % (name, srv.port),
                                   "Authorization": "Bearer " + srv.token})
    t.ok(r.status == 200 and r.body == b"port by name\n",
         "Host {port}-{name}.deskbox.test reaches it too", "%d %r" % (r.status, r.body[:100]))
    r = srv.request("POST", base + "/stop")
    t.ok(r.status == 200 and r.json()["status"] == "stopped", "stop by name", r.body[:200])
    r = srv.request("POST", base + "/start")
    t.ok(r.status == 200 and r.json()["status"] == "running", "start by name", r.body[:200])
    r = srv.request("GET", "/v1/sandboxes/no-such-name/desktop/screenshot")
    t.ok(r.status == 404 and code_of(r) == "not_found", "an unknown name is 404", r.body[:200])


def check_race(srv):
    """16 creates of one name at once: one 201, fifteen 409 name_taken."""
    results = []
    lock = threading.Lock()
    go = threading.Event()

    def one():
        go.wait()
        r = srv.request("POST", "/v1/sandboxes", spec(name="race"), timeout=300)
        with lock:
            results.append((r.status, code_of(r), r.json().get("id") if r.status == 201
                            else None))
    ths = [threading.Thread(target=one) for _ in range(16)]
    for th in ths:
        th.start()
    go.set()
    for th in ths:
        th.join()
    wins = [x for x in results if x[0] == 201]
    taken = [x for x in results if x[0] == 409 and x[1] == "name_taken"]
    t.ok(len(wins) == 1 and len(taken) == 15,
         "16 concurrent creates of one name: exactly one 201 and 15 409 name_taken",
         [x[:2] for x in results])
    if wins:
        r = srv.request("GET", "/v1/sandboxes/race")
        t.ok(r.status == 200 and r.json()["id"] == wins[0][2], "the name is the winner's")
        srv.request("DELETE", "/v1/sandboxes/race")
    r = srv.request("GET", "/v1/sandboxes/race")
    t.eq(r.status, 404, "deleted by name: the name is gone")


def check_filter(srv, a, b):
    t.eq(listed(srv, "?metadata.team=red"), [a], "metadata.team=red: only the red one")
    t.eq(listed(srv, "?metadata.tier=1"), sorted([a, b]), "metadata.tier=1: both")
    t.eq(listed(srv, "?metadata.team=red&metadata.tier=1"), [a], "two parameters AND together")
    t.eq(listed(srv, "?metadata.team=blue&metadata.tier=2"), [], "two that no one meets: none")
    t.eq(listed(srv, "?metadata.team=green"), [], "no match: an empty list")
    t.eq(listed(srv, "?metadata.owner=x"), [], "a key no one has: an empty list")
    t.eq(listed(srv, "?metadata.note=a%20b%26c"), [b], "values are URL-decoded")
    t.eq(listed(srv, "?other=1"), sorted([a, b]), "other parameters are ignored, as before")
    r = srv.request("GET", "/v1/sandboxes?metadata.bad%20key=x")
    t.ok(r.status == 400 and code_of(r) == "invalid_argument" and "metadata" in message_of(r),
         "a bad key in the query: 400", r.body[:200])
    r = srv.request("GET", "/v1/sandboxes")
    by_id = {sb["id"]: sb for sb in r.json()["sandboxes"]}
    t.eq(by_id[a].get("metadata"), {"team": "red", "tier": "1"}, "the list shows metadata")
    t.eq(by_id[a].get("name"), "alice-dev", "and the name")
    t.ok("name" not in by_id[b], "a sandbox without a name shows none")


def check_fork(srv, name):
    r = srv.request("POST", "/v1/sandboxes/%s/fork" % name, {})
    t.eq(r.status, 201, "a fork by name", )
    if r.status == 201:
        f = r.json()
        t.ok("name" not in f and f.get("metadata") == {"team": "red", "tier": "1"},
             "the fork has no name and the same metadata", r.body[:300])
        srv.request("DELETE", "/v1/sandboxes/" + f["id"])
    r = srv.request("POST", "/v1/sandboxes/%s/fork" % name, {"name": name})
    t.ok(r.status == 409 and code_of(r) == "name_taken", "a fork may not take the name",
         r.body[:200])
    r = srv.request("POST", "/v1/sandboxes/%s/fork" % name, {"name": "Bad"})
    t.eq(r.status, 400, "a fork with a bad name: 400")
    r = srv.request("POST", "/v1/sandboxes/%s/fork" % name, {"name": "alice-fork"})
    t.ok(r.status == 201 and r.json().get("name") == "alice-fork", "a fork with its own name",
         r.body[:200])
    if r.status == 201:
        srv.request("DELETE", "/v1/sandboxes/alice-fork")


def check_template(srv):
    r = srv.request("POST", "/v1/templates", {"name": "small", "display": SMALL["display"]})
    t.eq(r.status, 201, "a template")
    r = srv.request("POST", "/v1/sandboxes", {"template": "small", "name": "from-tpl",
                                               "metadata": {"via": "template"}})
    j = r.json() if r.status == 201 else {}
    t.ok(r.status == 201 and j.get("name") == "from-tpl" and
         j.get("metadata") == {"via": "template"},
         "a create from a template takes a name and metadata", r.body[:300])
    if r.status == 201:
        srv.request("DELETE", "/v1/sandboxes/from-tpl")
    r = srv.request("GET", "/v1/templates/small")
    t.ok(r.status == 200 and "metadata" not in r.json(), "the template holds neither")
    srv.request("DELETE", "/v1/templates/small")


def check_restart(srv, a, b):
    """SIGTERM with --on-exit keep, a new deskboxd on the state dir."""
    state = srv.state_dir
    srv.proc.send_signal(signal.SIGTERM)
    t.eq(srv.proc.wait(timeout=60), 0, "deskboxd exits on SIGTERM, sandboxes kept running")
    srv.log.close()
    srv2 = dbx.Server(state_dir=state, on_exit="keep", args=["--ports-domain", "deskbox.test"])
    r = srv2.request("GET", "/v1/sandboxes/alice-dev")
    t.ok(r.status == 200 and r.json()["id"] == a and r.json()["status"] == "running" and
         r.json()["metadata"] == {"team": "red", "tier": "1"},
         "after the restart the name still finds it, running, with its metadata", r.body[:300])
    t.eq(srv2.exec("alice-dev", ["cat", "/workspace/n.txt"])["stdout"], "by name\n",
         "exec by name in the taken-over sandbox")
    t.eq(listed(srv2, "?metadata.team=blue"), [b], "the filter works after the restart")
    r = srv2.request("POST", "/v1/sandboxes", spec(name="alice-dev"))
    t.ok(r.status == 409 and code_of(r) == "name_taken", "and the name is still taken",
         r.body[:200])
    return srv2


def check_read_only(srv):
    """read_only_root: EROFS outside /workspace, /tmp and the homes, inside
    and through the files API, running and stopped; the desktop works."""
    r = srv.request("POST", "/v1/sandboxes", spec(name="ro", read_only_root=True))
    t.ok(r.status == 201 and r.json().get("read_only_root") is True,
         "a create with read_only_root", r.body[:300])
    if r.status != 201:
        return
    for path in ("/usr/x", "/etc/x", "/x", "/var/x", "/opt/x"):
        x = srv.exec("ro", ["touch", path])
        t.ok(x["exit_code"] != 0 and "Read-only file system" in x["stderr"],
             "touch %s fails with EROFS inside" % path, x)
    for path in ("/workspace/x", "/tmp/x", "/home/user/x"):
        x = srv.exec("ro", ["sh", "-c", "echo w >%s && cat %s" % (path, path)])
        t.eq((x["exit_code"], x["stdout"]), (0, "w\n"), "%s is writable" % path)
    x = srv.exec("ro", ["sh", "-c", "echo w >~/y && echo $HOME"])
    t.eq((x["exit_code"], x["stdout"]), (0, "/home/user\n"), "~ (the HOME) is writable")
    x = srv.root_exec(srv.request("GET", "/v1/sandboxes/ro").json()["id"],
                      ["sh", "-c", "touch /root/x && echo root-ok; touch /etc/x"])
    t.ok("root-ok" in x["stdout"] and "Read-only file system" in x["stdout"],
         "the sandbox's root writes /root (the desktop's HOME) but not /etc", x)
    t.eq(dbx.png_info(srv.screenshot("ro"))[:2], (640, 480), "the desktop answers a screenshot")
    r = srv.post("ro", "launch", {"argv": ["xterm", "-title", "ro-term"]})
    t.eq(r.status, 200, "an xterm starts")
    wins = lambda: [w.get("title") for w in srv.request(
        "GET", "/v1/sandboxes/ro/desktop/windows").json().get("windows", [])]
    t.ok(dbx.wait_until(lambda: "ro-term" in wins(), timeout=20), "its window shows")
    srv.post("ro", "click", {"x": 100, "y": 100})
    srv.post("ro", "type_text", {"text": "echo typed >/workspace/typed.txt\n"})
    got = dbx.wait_until(lambda: srv.request(
        "GET", "/v1/sandboxes/ro/files/download?path=/workspace/typed.txt").body == b"typed\n",
        timeout=20)
    t.ok(got, "typing into it runs a command that writes /workspace")
    for state in ("running", "stopped"):
        for path in ("/usr/f", "/etc/f", "/f"):
            r = srv.request("PUT", "/v1/sandboxes/ro/files/upload?path=" + path, b"x")
            t.ok(r.status == 403 and code_of(r) == "forbidden" and
                 "Read-only file system" in message_of(r),
                 "%s: an upload to %s is 403 forbidden (EROFS)" % (state, path), r.body[:200])
        r = srv.request("POST", "/v1/sandboxes/ro/files/mkdir", {"path": "/etc/d"})
        t.eq(r.status, 403, "%s: mkdir in /etc is 403" % state)
        for path in ("/workspace/f", "/tmp/f", "/home/user/f"):
            r = srv.request("PUT", "/v1/sandboxes/ro/files/upload?path=" + path, state)
            t.eq(r.status, 201, "%s: an upload to %s works" % (state, path))
        if state == "running":
            r = srv.request("POST", "/v1/sandboxes/ro/stop")
            t.eq(r.status, 200, "it stops")
    r = srv.request("POST", "/v1/sandboxes/ro/start")
    t.eq(r.status, 200, "and starts again")
    x = srv.exec("ro", ["sh", "-c", "cat /workspace/f /tmp/f; touch /usr/x"])
    t.ok(x["stdout"] == "stoppedstopped" and "Read-only file system" in x["stderr"],
         "what was written stopped is there, the root still read-only", x)
    t.eq(srv.request("DELETE", "/v1/sandboxes/ro").status, 204, "deleted")


def check_clients(srv):
    """The CLI's create flags and ls filter, and the SDK's parameters."""
    import subprocess
    env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port, DESKBOX_TOKEN=srv.token)

    def cli(*args):
        p = subprocess.run([os.path.join(dbx.BUILD, "deskbox")] + list(args), env=env,
                           capture_output=True, text=True, timeout=180)
        return p.returncode, p.stdout.strip(), p.stderr
    rc, sid, err = cli("create", "--display", "640x480", "--name", "cli-made", "--metadata",
                       "team=cli", "--metadata", "k2=v 2", "--read-only-root")
    t.ok(rc == 0 and len(sid) == 32, "deskbox create --name --metadata --read-only-root",
         (rc, sid, err))
    rc, out, err = cli("--json", "get", "cli-made")
    j = json.loads(out) if rc == 0 else {}
    t.ok(j.get("id") == sid and j.get("metadata") == {"team": "cli", "k2": "v 2"} and
         j.get("read_only_root") is True, "deskbox get NAME shows them", (rc, out[:300], err))
    rc, out, err = cli("ls", "--metadata", "k2=v 2")
    t.ok(rc == 0 and sid in out and out.count("\n") == 1, "deskbox ls --metadata K=V filters",
         (rc, out, err))
    rc, out, err = cli("ls", "--metadata", "team=nobody")
    t.ok(rc == 0 and sid not in out, "and lists none that do not match", (rc, out))
    rc, out, err = cli("exec", "cli-made", "--", "touch", "/etc/x")
    t.ok(rc != 0 and "Read-only" in err + out, "deskbox exec NAME runs in it, root read-only",
         (rc, out, err))
    t.eq(cli("rm", "cli-made")[0], 0, "deskbox rm NAME")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
    import deskbox
    d = deskbox.Deskbox(url="http://127.0.0.1:%d" % srv.port, token=srv.token)
    sbx = d.create(display=(640, 480), name="sdk-made", metadata={"via": "sdk"})
    try:
        t.ok(sbx.name == "sdk-made" and sbx.metadata == {"via": "sdk"},
             "SDK create(name=, metadata=)", sbx.info)
        t.eq([x.id for x in d.list(metadata={"via": "sdk"})], [sbx.id],
             "SDK list(metadata=) filters")
        t.eq(d.get("sdk-made").id, sbx.id, "SDK get(NAME)")
        try:
            d.create(display=(640, 480), name="sdk-made")
            t.ok(False, "SDK: a taken name raises Conflict")
        except deskbox.Conflict as ex:
            t.eq(ex.code, "name_taken", "SDK: a taken name raises Conflict, code name_taken")
    finally:
        sbx.delete(missing_ok=True)


def check_pool():
    """A warm-pool desktop takes the name and metadata of the create that
    claims it; a taken name leaves it in the pool; a read-only root is
    never served from it."""
    p = dbx.Server(args=["--warm-pool", "1:640x480"])
    root = os.path.join(p.state_dir, "runtime")

    def ctrs():
        try:
            return sorted(d[4:] for d in os.listdir(root) if d.startswith("dbx-"))
        except OSError:
            return []
    try:
        t.ok(dbx.wait_until(lambda: dbx.warm_pool_ready(p) == 1, timeout=60, interval=0.2),
             "a warm pool of one desktop, ready", ctrs())
        pooled = ctrs()[:1]
        body = {"display": {"width": 640, "height": 480}, "name": "warm",
                "metadata": {"pool": "yes"}}
        r = p.request("POST", "/v1/sandboxes", body)
        j = r.json() if r.status == 201 else {}
        t.ok([j.get("id")] == pooled and j.get("name") == "warm" and
             j.get("metadata") == {"pool": "yes"},
             "a create with a name and metadata claims the pool's desktop", r.body[:300])
        t.eq(p.request("GET", "/v1/sandboxes/warm").json().get("id"), j.get("id"),
             "and the name finds it")
        t.ok(dbx.wait_until(lambda: dbx.warm_pool_ready(p) == 1 and len(ctrs()) == 2,
                            timeout=60, interval=0.2), "a replacement fills the pool")
        r = p.request("POST", "/v1/sandboxes", body)
        t.ok(r.status == 409 and code_of(r) == "name_taken", "a taken name: 409, from the pool too",
             r.body[:200])
        t.ok(len(listed(p)) == 1 and len(ctrs()) == 2, "and the pool's desktop stays in the pool")
        waiting = [c for c in ctrs() if c != j.get("id")]
        r = p.request("POST", "/v1/sandboxes", dict(body, name="cold", read_only_root=True))
        t.ok(r.status == 201 and r.json()["read_only_root"] is True and
             r.json()["id"] not in waiting and set(waiting) <= set(ctrs()),
             "a read-only root is created cold, not from the pool", r.body[:200])
    finally:
        p.cleanup()


srv = dbx.Server(on_exit="keep", args=["--ports-domain", "deskbox.test"])
servers = [srv]
state = srv.state_dir
try:
    check_refusals(srv)
    check_read_only(srv)
    check_clients(srv)
    check_pool()
    r = srv.request("POST", "/v1/sandboxes",
                    spec(name="alice-dev", metadata={"team": "red", "tier": "1"}))
    t.eq(r.status, 201, "a create with a name and metadata")
    a = r.json()
    t.ok(a.get("name") == "alice-dev" and a.get("metadata") == {"team": "red", "tier": "1"} and
         a.get("read_only_root") is False, "its answer shows them", r.body[:300])
    a = a["id"]
    b = srv.create(spec(metadata={"team": "blue", "tier": "1", "note": "a b&c"}))
    t.ok("name" not in b and b.get("metadata", {}).get("note") == "a b&c",
         "a sandbox with metadata and no name")
    b = b["id"]
    r = srv.request("POST", "/v1/sandboxes", spec(name="alice-dev"))
    t.ok(r.status == 409 and code_of(r) == "name_taken" and "alice-dev" in message_of(r),
         "a second create with the name: 409 name_taken", r.body[:200])
    check_routes(srv, a, "alice-dev")
    check_filter(srv, a, b)
    check_race(srv)
    check_fork(srv, "alice-dev")
    check_template(srv)
    srv = check_restart(srv, a, b)
    servers.append(srv)
    old_tok = srv.request("POST", "/v1/sandboxes/alice-dev/vnc/tokens", {}).json()["token"]
    r = srv.request("DELETE", "/v1/sandboxes/alice-dev")
    t.eq(r.status, 204, "delete by name")
    t.eq(srv.request("GET", "/v1/sandboxes/" + a).status, 404, "it is gone")
    r = srv.request("POST", "/v1/sandboxes", spec(name="alice-dev"))
    t.ok(r.status == 201 and r.json()["id"] != a, "the name is free again for a new sandbox",
         r.body[:200])
    r = raw(srv, "GET", "/v1/sandboxes/alice-dev/vnc/?token=" + old_tok, {})
    t.ok(r.status in (401, 403), "the old sandbox's viewer token does not open the new one's "
         "page under the same name", r.status)
    for sb in srv.request("GET", "/v1/sandboxes").json()["sandboxes"]:
        srv.request("DELETE", "/v1/sandboxes/" + sb["id"])
finally:
    for s in servers:
        s.on_exit = "keep"
        s.own_state = False
        if s.proc.poll() is None:
            s.cleanup()
    dbx.stop_servers(t, servers, state)
t.done()
