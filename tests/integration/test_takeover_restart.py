"""A takeover lease outlives a restart of deskboxd (docs/observation.md):
a person takes the desktop over, deskboxd ends (SIGTERM, leaving its
sandboxes running, then SIGKILL) and a new one adopts the sandbox: the lease
is still in force with the same holder and end, agent clicks (native and
through an adapter) answer 423 taken_over while a viewer's RFB click through
the viewer WebSocket reaches an xev window, the events stream starts with
the lease, and the lease still ends at its time (an expired event) or when
released; a lease that ended is not brought back by another restart."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_actions import Desk, start_xev, wait_events, warm_up  # noqa: E402
from test_observe import Events, viewer_click  # noqa: E402


def state(srv, sid):
    r = srv.request("GET", "/v1/sandboxes/%s/desktop" % sid)
    return r.json().get("takeover", {}) if r.status == 200 else {"status": r.status}


def restart(srv, how):
    """A new deskboxd on the same state dir, after `how` ended the old."""
    st = srv.state_dir
    if how == "kill":
        srv.kill()
    else:
        srv.stop()
    srv.log.close()
    new = dbx.Server(state_dir=st, on_exit="keep")
    new.own_state = True
    srv.own_state = False
    return new


def viewer_token(srv, sid):
    r = srv.request("POST", "/v1/sandboxes/%s/vnc/tokens" % sid, {"view_only": False})
    return r.json()["token"] if r.status in (200, 201) else None


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server(on_exit="keep")
    sid = None
    try:
        sid = srv.create({"display": {"width": 1024, "height": 768}})["id"]
        d = Desk(srv, sid)
        warm_up(d)
        log = "/tmp/xev-takeover.log"
        win = start_xev(d, "Event Tester", "300x200+100+100", log)
        r = srv.request("POST", "/v1/sandboxes/%s/desktop/takeover" % sid,
                        {"ttl_s": 120, "by": "alice"})
        before = r.json() if r.status == 200 else {}
        t.ok(r.status == 200 and before.get("active"), "a person takes the desktop over",
             r.body[:200])

        srv = restart(srv, "stop")
        d = Desk(srv, sid)
        now = state(srv, sid)
        t.ok(now.get("active") and now.get("by") == "alice" and
             now.get("expires_at") == before.get("expires_at") and
             now.get("since") == before.get("since"),
             "after a restart of deskboxd the lease holds: same holder, start and end",
             (before, now))
        r = d.post("click", x=win[0] + 50, y=win[1] + 50)
        t.ok(r.status == 423 and r.json()["error"]["code"] == "taken_over",
             "an agent click is refused with 423 taken_over", r.body[:200])
        r = d.post("anthropic", {"action": "left_click", "coordinate": [150, 150]})
        t.ok(r.status == 200 and r.json().get("is_error") and
             "taken the desktop over" in r.body.decode(),
             "an adapter's click is a tool error saying so", r.body[:200])
        tok = viewer_token(srv, sid)
        if tok:
            viewer_click(srv, sid, tok, win[0] + 60, win[1] + 60)
            ok = wait_events(d, log, lambda s: "ButtonPress" in s, timeout=10)
            t.ok(ok, "a viewer's click through the viewer WebSocket reaches the window")
        else:
            t.ok(False, "a viewer token for the viewer's click")
        ev = Events(srv, sid)
        got, ok = ev.until(lambda e: e[1] == "ready", 10)
        t.ok(ok and got[-1][2]["takeover"].get("active"),
             "the events stream starts with the lease in force", got[-1:])
        ev.close()
        r = srv.request("DELETE", "/v1/sandboxes/%s/desktop/takeover" % sid)
        t.ok(r.status == 200 and r.json().get("released"), "DELETE gives the desktop back")
        t.eq(d.post("click", x=win[0] + 50, y=win[1] + 50).status, 200,
             "and an agent click runs again")

        # A short lease across a kill -9 (which may stop the sandbox: then it is
        # started again): it still ends at its time.
        r = srv.request("POST", "/v1/sandboxes/%s/desktop/takeover" % sid, {"ttl_s": 60})
        short = r.json() if r.status == 200 else {}
        srv = restart(srv, "kill")
        d = Desk(srv, sid)
        st = srv.request("GET", "/v1/sandboxes/" + sid).json().get("status")
        t.diag("after a kill -9 and a restart the sandbox is %s" % st)
        if st != "running":
            t.eq(srv.request("POST", "/v1/sandboxes/%s/start" % sid).status, 200,
                 "the sandbox starts again")
        now = state(srv, sid)
        left = short.get("expires_at", 0) - time.time() * 1000
        t.ok(now.get("active") and now.get("expires_at") == short.get("expires_at"),
             "a lease outlives a kill -9 of deskboxd too (%.1f s left)" % (left / 1000), now)
        ev = Events(srv, sid)
        r = d.post("move", x=5, y=5)
        t.ok(r.status == 423 and time.time() * 1000 < short.get("expires_at", 0),
             "and refuses the agent until it ends", r.body[:200])
        got, ok = ev.until(lambda e: e[1] == "takeover", 75)
        t.ok(ok and not got[-1][2]["active"] and got[-1][2]["reason"] == "expired" and
             time.time() * 1000 >= short.get("expires_at", 0),
             "the lease ends at its time with an expired event", got[-3:])
        ev.close()
        t.eq(d.post("move", x=6, y=6).status, 200, "then an agent action runs")
        srv = restart(srv, "stop")
        t.ok(not state(srv, sid).get("active"), "a lease that ended stays ended after a restart")
    finally:
        if sid:
            srv.request("DELETE", "/v1/sandboxes/" + sid)
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly on SIGTERM")
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
