"""The terminal page (xterm.js) in real headless Chromium: starts deskboxd
and runs tests/browser/terminal.test.mjs (playwright-core driving the Debian chromium
package), passing its TAP through.  Skips (77) only when chromium or node is
not installed."""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BROWSER_DIR = os.path.join(HERE, "..", "browser")
CHROMIUM = "/usr/bin/chromium"


def main():
    dbx.require_root_and_tools()
    if not os.access(CHROMIUM, os.X_OK):
        dbx.skip_all("chromium is not installed (scripts/install-deps.sh installs it)")
    node = shutil.which("node")
    if not node:
        dbx.skip_all("node is not installed")
    if not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        npm = shutil.which("npm")
        if not npm:
            dbx.skip_all("npm is not installed, so playwright-core cannot be")
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=BROWSER_DIR,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            print("not ok 1 - npm ci in tests/browser")
            print("# " + r.stdout.decode(errors="replace")[-2000:].replace("\n", "\n# "))
            print("1..1")
            sys.exit(1)
    srv = dbx.Server()
    try:
        env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port,
                   DESKBOX_TOKEN=srv.token, CHROMIUM=CHROMIUM,
                   DESKBOX_STATE=srv.state_dir,
                   DESKBOX_DBX=os.path.abspath(dbx.__file__))
        r = subprocess.run([node, "terminal.test.mjs"], cwd=BROWSER_DIR, env=env, timeout=600)
        rc = r.returncode
        if rc != 0:
            for line in srv.stderr().splitlines()[-30:]:
                print("# deskboxd: " + line)
    finally:
        srv.cleanup()
    sys.exit(rc)


if __name__ == "__main__":
    main()
