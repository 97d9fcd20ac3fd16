"""Runs one of the compat front-ends' node scripts (tests/compat-<engine>/),
which use only that engine's official SDK and print TAP lines: each "ok" /
"not ok" becomes a check of the calling test, "#" lines are echoed.  Skips,
saying why, when node or the pinned packages are not installed."""

import os
import shutil
import subprocess

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def client_dir(engine):
    return os.path.join(TESTS, "compat-" + engine)


def node_argv(node, websocket=False):
    """node, with --experimental-websocket on Node < 22 when the SDK needs
    the global WebSocket (Node 22 has it by default)."""
    args = [node]
    if websocket:
        major = int(subprocess.run([node, "-p", "process.versions.node.split('.')[0]"],
                                   capture_output=True, text=True).stdout.strip() or 0)
        if major < 22:
            args.append("--experimental-websocket")
    return args


def find_node(t, what, engine, package):
    """The node binary, or None after a skip saying why."""
    node = shutil.which("node")
    if not node:
        t.skip(what, "node is not installed")
        return None
    if not os.path.isdir(os.path.join(client_dir(engine), "node_modules", *package.split("/"))):
        t.skip(what, "tests/compat-%s has no node_modules (run scripts/install-deps.sh)" % engine)
        return None
    return node


def run_script(t, engine, package, script, env, timeout=300, websocket=False, unset=()):
    """Runs tests/compat-ENGINE/SCRIPT with `env` added to the environment
    (and the names in `unset` taken out);
    its TAP lines become checks, then one check that it ran to its end."""
    what = "the %s SDK script" % engine
    node = find_node(t, what, engine, package)
    if not node:
        return
    full = dict(os.environ, **env)
    for name in unset:
        full.pop(name, None)
    r = subprocess.run(node_argv(node, websocket) + [script], cwd=client_dir(engine), env=full,
                       timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = r.stdout.decode(errors="replace")
    results = 0
    for line in out.splitlines():
        if line.startswith("ok ") or line.startswith("not ok "):
            t.ok(line.startswith("ok "), "sdk: " + line.split(" - ", 1)[-1])
            results += 1
        elif line.startswith("#"):
            print(line, flush=True)
    t.ok(r.returncode == 0 and results > 0, "the SDK script ran to its end (exit %d)" % r.returncode,
         out[-2000:])
