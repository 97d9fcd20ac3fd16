"""Timeouts: "timeout_s" at create and POST /timeout set a deadline shown as
"expires_at"; when it passes, "on_timeout" (stop, delete, pause) happens
within about a second; extending and shortening work; a deadline survives a
restart of deskboxd; --default-timeout applies to creates without one, warm
pool claims included; bad inputs are 4xx JSON errors."""

import calendar
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def base(sid):
    return "/v1/sandboxes/%s" % sid


def get(srv, sid):
    r = srv.request("GET", base(sid))
    return r.json() if r.status == 200 else {"status": r.status}


def parse_time(s):
    """RFC 3339 UTC with milliseconds into unix seconds."""
    secs, _, frac = s.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(secs, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def fired_late(srv, sid, expires):
    """Waits until the deadline fired (expires_at cleared or the sandbox
    gone) and returns how long after its time that was seen, or None."""
    got = dbx.wait_until(lambda: get(srv, sid).get("expires_at", "gone") is None or
                         get(srv, sid)["status"] == 404, timeout=60, interval=0.05)
    return time.time() - expires if got else None


def check_fires(t, srv, action, want_status):
    sb = srv.create({"timeout_s": 2, "on_timeout": action})
    sid = sb["id"]
    t.eq((sb.get("timeout_s"), sb.get("on_timeout")), (2, action),
         "%s: create answers timeout_s and on_timeout" % action)
    exp = sb.get("expires_at")
    t.ok(isinstance(exp, str) and exp.endswith("Z"), "%s: expires_at is RFC 3339 UTC" % action,
         exp)
    if not isinstance(exp, str):
        return sid
    expires = parse_time(exp)
    t.ok(abs(expires - (time.time() + 2)) < 2, "%s: expires_at is 2 s from now" % action, exp)
    late = fired_late(srv, sid, expires)
    t.ok(late is not None and late < 1.5, "%s: the deadline fired within a second" % action,
         "late by %r s" % late)
    t.diag("%s: fired %.0f ms after expires_at" % (action, (late or 0) * 1000))
    got = dbx.wait_until(lambda: get(srv, sid)["status"] == want_status, timeout=30)
    t.ok(got, "%s: the sandbox is then %s" % (action, want_status), get(srv, sid))
    return sid


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    state = tempfile.mkdtemp(prefix="dbx-timeouts-")
    srv = dbx.Server(state_dir=state)
    servers = [srv]
    try:
        # ---- each action ----
        sid = check_fires(t, srv, "stop", "stopped")
        t.eq(get(srv, sid).get("expires_at", "missing"), None, "stop: expires_at is null after")
        check_fires(t, srv, "delete", 404)
        sid = check_fires(t, srv, "pause", "paused")
        r = srv.request("POST", base(sid) + "/resume")
        t.eq(r.status, 200, "pause: a timed-out paused sandbox resumes")
        t.eq(srv.exec(sid, ["echo", "back"])["stdout"], "back\n", "pause: and runs commands")
        srv.request("DELETE", base(sid))

        # ---- none, extend, shorten ----
        sb = srv.create({})
        t.eq((sb.get("timeout_s"), sb.get("expires_at", "missing")), (0, None),
             "no timeout_s and no --default-timeout: no deadline")
        sb = srv.create({"timeout_s": 3})
        sid = sb["id"]
        t.eq(sb.get("on_timeout"), "stop", "on_timeout defaults to stop")
        r = srv.request("POST", base(sid) + "/timeout", {"timeout_s": 3600})
        t.eq(r.status, 200, "POST /timeout extends")
        exp = r.json().get("expires_at") if r.status == 200 else None
        t.ok(exp and abs(parse_time(exp) - time.time() - 3600) < 5, "expires_at moved 1 h out",
             exp)
        t.eq(get(srv, sid).get("timeout_s"), 3600, "GET shows the new timeout_s")
        went = dbx.wait_until(lambda: get(srv, sid)["status"] != "running", timeout=6)
        t.ok(not went, "the extended sandbox is still running past its first deadline")
        r = srv.request("POST", base(sid) + "/timeout", {"timeout_s": 1})
        t.eq(r.status, 200, "POST /timeout shortens")
        exp = parse_time(r.json()["expires_at"])
        late = fired_late(srv, sid, exp)
        t.ok(late is not None and late < 1.5, "the shortened deadline fires on time",
             "late by %r s" % late)
        t.ok(dbx.wait_until(lambda: get(srv, sid)["status"] == "stopped", timeout=30),
             "and stops it")
        r = srv.request("POST", base(sid) + "/timeout", {"timeout_s": 0})
        t.eq((r.status, r.json().get("expires_at", "missing")), (200, None),
             "timeout_s 0 clears the deadline")

        # ---- bad inputs ----
        for body, what in (({"timeout_s": -1}, "negative"), ({"timeout_s": "5"}, "a string"),
                           ({"timeout_s": 1.5}, "a fraction"), ({}, "missing"),
                           ({"timeout_s": 10 ** 12}, "too large")):
            r = srv.request("POST", base(sid) + "/timeout", body)
            t.ok(r.status == 400 and r.json()["error"]["code"] == "invalid_argument",
                 "POST /timeout with timeout_s %s: 400" % what, r.body[:200])
        r = srv.request("POST", base("f" * 32) + "/timeout", {"timeout_s": 5})
        t.eq(r.status, 404, "POST /timeout on an unknown sandbox: 404")
        for body, what in (({"on_timeout": "explode"}, "on_timeout"),
                           ({"timeout_s": -5}, "timeout_s"), ({"auto_resume": "yes"},
                                                              "auto_resume")):
            r = srv.request("POST", "/v1/sandboxes", body)
            t.ok(r.status == 400 and what in r.json()["error"]["message"],
                 "create with a bad %s: 400 naming it" % what, r.body[:200])

        # ---- a deadline survives a restart; --default-timeout; the pool ----
        sb = srv.create({"timeout_s": 12, "on_timeout": "delete"})
        sid = sb["id"]
        expires = parse_time(sb["expires_at"])
        t.eq(srv.stop(), 0, "deskboxd stops cleanly")
        srv = dbx.Server(state_dir=state, args=["--default-timeout", "600", "--warm-pool", "1"])
        servers.append(srv)
        sb = get(srv, sid)
        t.eq((sb.get("status"), sb.get("expires_at") and parse_time(sb["expires_at"])),
             ("stopped", expires), "after a restart the deadline is still there")
        late = fired_late(srv, sid, expires)
        t.ok(late is not None and late < 1.5, "and fires on time after the restart",
             "late by %r s" % late)
        t.ok(dbx.wait_until(lambda: get(srv, sid)["status"] == 404, timeout=30),
             "deleting the sandbox")
        ready = dbx.wait_until(lambda: b"deskbox_warm_pool_ready 1" in
                               srv.request("GET", "/metrics").body, timeout=120)
        t.ok(ready, "the warm pool has a desktop ready")
        t0 = time.time()
        sb = srv.create({})
        exp = sb.get("expires_at")
        t.eq(sb.get("timeout_s"), 600, "--default-timeout applies to a claimed pool desktop")
        t.ok(exp and abs(parse_time(exp) - t0 - 600) < 5, "its deadline counts from the claim",
             exp)
        sb = srv.create({"timeout_s": 0, "display": {"width": 800, "height": 600}})
        t.eq(sb.get("expires_at", "missing"), None, "timeout_s 0 overrides --default-timeout")
    finally:
        dbx.stop_servers(t, servers, state)
    t.done()


main()
