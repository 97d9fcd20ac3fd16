"""Errors that point at the cause: the Python SDK reports an answer the
server sent before reading the whole body (a 507 for an upload past the
sandbox's disk) as that answer, not as a broken pipe; a mistyped route is a
404, a known path with another method a 405; a missing or wrong token says
how to send it and where this server's token is; every timestamp in an
answer is RFC 3339 UTC; and a paused sandbox is still paused after a
restart of deskboxd (--on-exit keep)."""

import os
import sys
import time

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
import dbx  # noqa: E402
from deskbox import Deskbox, DeskboxError, Unauthorized  # noqa: E402

DISK_MB = 40


def early_answer(t, srv, sid):
    box = Deskbox(url="http://127.0.0.1:%d" % srv.port, token=srv.token)
    sbx = box.get(sid)
    for mb in (60, 200):
        try:
            sbx.files.upload("/workspace/big", os.urandom(mb << 20))
            got = "uploaded"
        except DeskboxError as e:
            got = e
        t.ok(isinstance(got, DeskboxError) and got.status == 507 and
             got.code == "insufficient_storage" and "quota" in str(got),
             "SDK: a %d MB upload into a %d MB disk is the server's 507, not a broken pipe" %
             (mb, DISK_MB), str(got))
    sbx.files.upload("/workspace/small", b"x" * 1000)
    t.eq(sbx.files.download("/workspace/small"), b"x" * 1000,
         "SDK: the next call on the same client works")


def routes(t, srv, sid):
    base = "/v1/sandboxes/" + sid
    for method, path, why in (
            ("GET", base + "/desktop/screnshot", "a misspelt GET desktop route"),
            ("POST", base + "/process/exex", "a misspelt POST process route"),
            ("GET", "/v1/sandboxs", "a misspelt collection")):
        r = srv.request(method, path, {} if method == "POST" else None)
        msg = r.json().get("error", {}).get("message", "") if r.body else ""
        t.ok(r.status == 404 and msg.startswith("no route " + method),
             "%s: 404 'no route %s ...'" % (why, method), (r.status, r.body[:200]))
    for method, path, why in (("GET", base + "/stop", "GET on POST .../stop"),
                              ("PUT", "/v1/sandboxes", "PUT on the collection"),
                              ("POST", base, "POST on a sandbox"),
                              ("DELETE", base + "/process/contexts", "DELETE on GET/POST contexts"),
                              ("GET", base + "/mcp", "GET on the MCP endpoint")):
        r = srv.request(method, path)
        t.ok(r.status == 405 and r.json()["error"]["code"] == "method_not_allowed",
             "%s: still 405" % why, (r.status, r.body[:200]))


def tokens(t):
    """A server whose token deskboxd made itself: the 401 names its file."""
    env = dict(os.environ)
    env.pop("DESKBOX_TOKEN", None)
    srv = dbx.Server(token=None, env=env)
    try:
        path = os.path.join(srv.state_dir, "token")
        t.ok(os.path.exists(path), "deskboxd wrote its token file", path)
        for tok, why in ((None, "missing"), ("x" * 40, "wrong")):
            r = srv.request("GET", "/v1/sandboxes", token=tok)
            msg = r.json()["error"]["message"] if r.status == 401 else ""
            t.ok(r.status == 401 and "DESKBOX_TOKEN" in msg and path in msg and
                 "Authorization: Bearer" in msg,
                 "%s token: 401 naming DESKBOX_TOKEN, the header and %s" % (why, path), msg)
        r = srv.request("GET", "/v1/sandboxes", token=None,
                        headers={"Authorization": "Basic abc"})
        t.ok(r.status == 401 and "Bearer" in r.json()["error"]["message"],
             "another scheme: 401 saying Bearer", r.body[:300])
        old = os.environ.pop("DESKBOX_TOKEN", None)
        try:
            Deskbox(url="http://127.0.0.1:%d" % srv.port).list()
            got = "listed"
        except Unauthorized as e:
            got = str(e)
        finally:
            if old is not None:
                os.environ["DESKBOX_TOKEN"] = old
        t.ok("DESKBOX_TOKEN" in got and path in got,
             "SDK without a token: Unauthorized saying DESKBOX_TOKEN and the file", got)
        r = srv.request("GET", "/v1/sandboxes", token=open(path).read().strip())
        t.eq(r.status, 200, "the file's token works")
    finally:
        srv.cleanup()


def walk_times(obj, where, out):
    """Every field named *_at or *_at_ms anywhere in an answer."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k.endswith("_at") or k.endswith("_at_ms"):
                out.append((where + "." + k, v))
            walk_times(v, where + "." + k, out)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            walk_times(v, "%s[%d]" % (where, i), out)


def timestamps(t, srv, sid):
    base = "/v1/sandboxes/" + sid
    answers = {}

    def keep(name, r):
        if r.status in (200, 201):
            answers[name] = r.json()
        else:
            t.diag("%s: %d %s" % (name, r.status, r.body[:200]))

    keep("timeout", srv.request("POST", base + "/timeout", {"timeout_s": 3600}))
    keep("sandbox", srv.request("GET", base))
    keep("list", srv.request("GET", "/v1/sandboxes"))
    keep("checkpoint", srv.request("POST", base + "/checkpoints", {"name": "c1"}))
    keep("checkpoints", srv.request("GET", base + "/checkpoints"))
    keep("vnc token", srv.request("POST", base + "/vnc/tokens", {}))
    keep("port token", srv.request("POST", base + "/ports/8000/tokens", {}))
    run = srv.request("POST", base + "/process/exec", {"argv": ["sleep", "0.2"],
                                                      "background": True})
    keep("background run", run)
    if run.status == 200:
        pid = run.json()["pid"]
        keep("run status", srv.request("GET", "%s/process/%s" % (base, pid)))
    keep("context", srv.request("POST", base + "/process/contexts", {"language": "python"}))
    keep("session", srv.request("POST", base + "/sessions", {}))
    term = srv.request("POST", base + "/terminals", {})
    keep("terminal", term)
    if term.status == 201:
        tid = term.json()["id"]
        keep("terminal token", srv.request("POST", "%s/terminals/%s/tokens" % (base, tid), {}))
    keep("images", srv.request("GET", "/v1/images"))
    found = []
    for name, j in answers.items():
        walk_times(j, name, found)
    names = sorted(set(w.split(".")[0] for w, _ in found))
    t.ok(len(names) >= 10, "timestamps found in %d kinds of answer" % len(names), names)
    bad = [(w, v) for w, v in found if v is not None and dbx.parse_time(v) is None]
    t.eq(bad, [], "every *_at field is RFC 3339 UTC with milliseconds (or null)")
    now = time.time()
    far = [(w, v) for w, v in found if v is not None and dbx.parse_time(v) is not None and
           not (now - 3600 < dbx.parse_time(v) < now + 7200)]
    t.eq(far, [], "and each is a plausible time (now, or a deadline within hours)")
    t.ok(any(w.endswith("expires_at") for w, _ in found) and
         any(w.endswith("created_at") for w, _ in found) and
         any(w.endswith("started_at") for w, _ in found),
         "created_at, expires_at and started_at all seen", [w for w, _ in found])


def pause_restart(t):
    srv = dbx.Server(on_exit="keep")
    state = srv.state_dir
    servers = [srv]
    try:
        sid = srv.create()["id"]
        srv.exec(sid, ["sh", "-c", "echo before > /workspace/p"])
        r = srv.request("POST", "/v1/sandboxes/%s/pause" % sid)
        t.eq((r.status, r.json().get("status")), (200, "paused"), "pause")
        t.eq(srv.stop(), 0, "deskboxd stops (--on-exit keep) with the sandbox paused")
        srv = dbx.Server(state_dir=state, on_exit="stop")
        servers.append(srv)
        r = srv.request("GET", "/v1/sandboxes/" + sid)
        t.eq(r.json().get("status"), "paused", "the next deskboxd lists it paused")
        r = srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, {"argv": ["true"]})
        t.eq(r.json().get("error", {}).get("code"), "sandbox_paused",
             "a call on it is still 409 sandbox_paused")
        r = srv.request("POST", "/v1/sandboxes/%s/resume" % sid)
        t.eq((r.status, r.json().get("status")), (200, "running"), "it resumes")
        t.eq(srv.exec(sid, ["cat", "/workspace/p"])["stdout"], "before\n",
             "and its processes and files are there")
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        for s in servers:
            s.cleanup()


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server(args=["--disk-quota-mb", str(DISK_MB)])
    try:
        sid = srv.create()["id"]
        early_answer(t, srv, sid)
        routes(t, srv, sid)
        timestamps(t, srv, sid)
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        srv.cleanup()
    tokens(t)
    pause_restart(t)
    t.done()


if __name__ == "__main__":
    main()
