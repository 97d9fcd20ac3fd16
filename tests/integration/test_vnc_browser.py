"""The browser viewer in real headless Chromium: starts deskboxd and runs
tests/browser/vnc.test.mjs (playwright-core driving the Debian chromium
package), passing its TAP through.  Skips (77) only when chromium or node is
not installed."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

if __name__ == "__main__":
    dbx.run_browser_script("vnc.test.mjs")
