"""The Node/TypeScript client (clients/typescript) against a real deskboxd:
clients/typescript/test/sdk.test.mjs drives sandboxes, processes with
streaming, files, the desktop, terminals, viewer and port URLs,
checkpoints, pause and errors, and prints TAP, forwarded here."""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import dbx  # noqa: E402

SCRIPT = os.path.join(HERE, "..", "..", "clients", "typescript", "test", "sdk.test.mjs")


def main():
    dbx.require_root_and_tools()
    node = shutil.which("node")
    if not node:
        dbx.skip_all("no node on the PATH (Debian: nodejs)")
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port,
                   DESKBOX_TOKEN=srv.token)
        # Node 20 has WebSocket behind a flag (on by default from 22).
        flags = ["--experimental-websocket"] if subprocess.run(
            [node, "--experimental-websocket", "-e", "0"], capture_output=True).returncode == 0 \
            else []
        p = subprocess.run([node] + flags + [SCRIPT], capture_output=True, text=True, env=env, timeout=600)
        results = 0
        for line in p.stdout.splitlines():
            ok = line.startswith("ok ")
            if ok or line.startswith("not ok "):
                results += 1
                name = line.split(" - ", 1)[1] if " - " in line else line
                if "# SKIP" in name:
                    name, _, why = name.partition(" # SKIP ")
                    t.skip(name, why)
                else:
                    t.ok(ok, name)
            elif line.startswith("#"):
                t.diag(line[1:].strip())
        t.ok(p.returncode == 0 and results > 30, "the node script ran to its end (%d results)" %
             results, p.stderr[-2000:])
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
