"""Sprites' front-end (docs/compat.md) driven by the official
JavaScript SDK @fly/sprites, unchanged, pinned in tests/compat-sprites
(tests/compat-sprites/sprites.test.mjs): baseURL is http://HOST:PORT/sprites,
the token deskbox's.  The script creates a sprite, runs commands over the
exec WebSocket (stdout, stderr, exit codes, env, cwd, streamed stdin),
checkpoints with comments, restores, lists and deletes, checking each
effect through deskbox's own API; one command stays quiet for 50 s to
prove the keep-alive.  Then raw HTTP checks Sprites' error shape."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import compat_node  # noqa: E402
import dbx  # noqa: E402


def sp_error(t, r, status, name, word=None):
    try:
        body = r.json()
    except ValueError:
        body = None
    ok = (r.status == status and isinstance(body, dict) and isinstance(body.get("error"), str)
          and isinstance(body.get("message"), str) and (word is None or word in body["message"]))
    t.ok(ok, "%s: %d {\"error\",\"message\"}" % (name, status), (r.status, r.body[:300]))


def raw_checks(t, srv):
    sp = "/sprites/v1/sprites"
    sp_error(t, srv.request("GET", sp + "/nothing"), 404, "an unknown sprite")
    sp_error(t, srv.request("GET", sp, token=None), 401, "no token")
    sp_error(t, srv.request("POST", sp, {"name": "Bad Name"}), 400, "a name deskbox cannot take", "name")
    sp_error(t, srv.request("POST", sp, {"name": "ok-name", "config": {"ram_mb": "lots"}}), 400,
             "ram_mb not a number", "ram_mb")
    sp_error(t, srv.request("POST", sp, "{oops", headers={"Content-Type": "application/json"}), 400,
             "a body that is not JSON")
    sb = srv.create({"name": "raw-sprite"})
    sp_error(t, srv.request("GET", sp + "/raw-sprite/exec?cmd=true"), 400,
             "exec without a WebSocket upgrade", "WebSocket")
    sp_error(t, srv.request("GET", sp + "/raw-sprite/checkpoints/v7"), 404, "an unknown checkpoint")
    sp_error(t, srv.request("POST", sp + "/raw-sprite/checkpoints/v7/restore"), 404,
             "restoring an unknown checkpoint")
    sp_error(t, srv.request("GET", sp + "/raw-sprite/policy/privileges"), 501, "privileges policy: not supported",
             "not supported")
    sp_error(t, srv.request("POST", sp + "/raw-sprite/policy/network", {"rules": "x"}), 400,
             "network rules that are not a list", "rules")
    srv.request("DELETE", "/v1/sandboxes/" + sb["id"])


def sdk_script(t, srv):
    env = dict(DESKBOX_URL="http://127.0.0.1:%d" % srv.port, DESKBOX_TOKEN=srv.token,
               SPRITES_BASE_URL="http://127.0.0.1:%d/sprites" % srv.port, SPRITES_SLOW="1")
    # The SDK wants Node 24's WebSocket; Node 20 and 22 have it behind a flag.
    compat_node.run_script(t, "sprites", "@fly/sprites", "sprites.test.mjs", env, timeout=400,
                           websocket=True)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sdk_script(t, srv)
        raw_checks(t, srv)
        if t.failed:
            for line in srv.stderr().splitlines()[-30:]:
                t.diag("deskboxd: " + line)
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
