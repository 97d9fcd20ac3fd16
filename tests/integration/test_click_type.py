"""Text typed right after a click lands in the clicked window: two xterms
side by side, each `cat`-ing into its own file; 50 times a click into the
unfocused one, then typing at once, in batches (deskbox's actions route and
OpenAI's batched `actions`).  openbox focuses on the click through a
pointer grab it holds for a moment; every character must reach the window
clicked, none the one focused before."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

PAIRS = 50
PER_BATCH = 5
GEOM = {"A": "40x10+40+60", "B": "40x10+420+60"}


def window(srv, sid, name, timeout=20):
    def find():
        out = srv.exec(sid, ["sh", "-c", "xwininfo -name '%s' 2>/dev/null" % name])["stdout"]
        vals = {}
        for line in out.splitlines():
            k, _, v = line.strip().partition(":")
            vals[k] = v.strip()
        if "IsViewable" not in out:
            return None
        return (int(vals["Absolute upper-left X"]), int(vals["Absolute upper-left Y"]),
                int(vals["Width"]), int(vals["Height"]))
    return dbx.wait_until(find, timeout=timeout, interval=0.1)


def read(srv, sid, path):
    return srv.exec(sid, ["sh", "-c", "cat %s 2>/dev/null" % path])["stdout"]


def main():
    dbx.require_root_and_tools()
    for tool in ("xterm", "xwininfo"):
        if not dbx.shutil.which(tool):
            dbx.skip_all("%s is not installed" % tool)
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create({})["id"]
        wins = {}
        for name in ("A", "B"):
            srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid,
                        {"argv": ["sh", "-c", "exec xterm -fn 6x13 -T term%s -geometry %s -e sh -c "
                                  "'exec cat > /tmp/%s.txt'" % (name, GEOM[name], name)],
                         "background": True})
            wins[name] = window(srv, sid, "term" + name)
        t.ok(all(wins.values()), "both xterms are up (%s)" % wins)
        if not all(wins.values()):
            t.done()
        srv.post(sid, "wait", {"until": "stable", "quiet_ms": 300, "timeout_ms": 5000})
        # B has the focus (it came last): the first click goes to A.
        want = {"A": "", "B": ""}
        statuses = []
        t0 = time.monotonic()
        for b in range(PAIRS // PER_BATCH):
            openai = b % 2 == 1
            acts = []
            for k in range(PER_BATCH):
                i = b * PER_BATCH + k
                name = "A" if i % 2 == 0 else "B"
                x, y, w, h = wins[name]
                text = "%02d%s xyz\n" % (i, name)
                want[name] += text
                if openai:
                    acts += [{"type": "click", "button": "left", "x": x + w // 2, "y": y + h // 2},
                             {"type": "type", "text": text}]
                else:
                    acts += [{"action": "click", "x": x + w // 2, "y": y + h // 2},
                             {"action": "type_text", "text": text}]
            if openai:
                r = srv.post(sid, "openai", {"type": "computer_call", "call_id": "c%d" % b,
                                             "actions": acts})
                ok = r.status == 200 and "status" not in r.json()
            else:
                r = srv.post(sid, "actions", {"actions": acts})
                ok = r.status == 200
            statuses.append(ok)
            if not ok:
                t.diag("batch %d: %d %s" % (b, r.status, r.body[:300]))
        el = time.monotonic() - t0
        t.ok(all(statuses), "%d batches (deskbox and OpenAI) ran" % len(statuses))
        got = {}
        for name in ("A", "B"):
            got[name] = dbx.wait_until(
                lambda: (lambda s: s if len(s) >= len(want[name]) else None)(
                    read(srv, sid, "/tmp/%s.txt" % name)), timeout=15, interval=0.2) or \
                read(srv, sid, "/tmp/%s.txt" % name)
        for name in ("A", "B"):
            t.eq(got[name], want[name], "every character typed after a click into %s "
                 "arrived there, nothing else" % name)
        t.diag("%d click-then-type pairs in %.2f s" % (PAIRS, el))
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        rc = srv.stop()
        t.eq(rc, 0, "deskboxd exits cleanly on SIGTERM")
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
