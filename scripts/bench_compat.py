"""make bench, the compat front-ends (docs/compat.md): per engine, its
official SDK's create and one command round trip through deskbox, against
the same done through deskbox's native API in the same run, in the same node
process (scripts/bench_compat/<engine>.mjs, with the SDK pinned in
tests/compat-<engine>), alternating, so node's start-up and the machine's
drift count for neither.  The added ms is the median of the paired
differences (SDK minus native); the target is <= 1 ms at p50 for a command."""

import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests")
sys.path.insert(0, os.path.join(TESTS, "lib"))
import compat_node  # noqa: E402

# engine, its SDK's package (to see it is installed), the names shown
ENGINES = [
    ("e2b", "e2b", "E2B", "Sandbox.create", "commands.run"),
    ("daytona", "@daytonaio/sdk", "Daytona", "daytona.create", "process.executeCommand"),
    ("sprites", "@fly/sprites", "Sprites", "createSprite", "execFile"),
    ("opensandbox", "@alibaba-group/opensandbox", "OpenSandbox", "Sandbox.create",
     "commands.run"),
    ("zeroboot", None, "Zeroboot", None, "POST /zeroboot/v1/exec"),
]


def env_for(srv, engine, pool):
    url = "http://127.0.0.1:%d" % srv.port
    env = dict(os.environ, DESKBOX_URL=url, DESKBOX_TOKEN=srv.token, WARM_POOL=str(pool))
    for k in ("E2B_DEBUG", "E2B_DOMAIN", "DAYTONA_USE_DEPRECATED_POLLING"):
        env.pop(k, None)
    env.update({"e2b": {"E2B_API_URL": url + "/e2b", "E2B_SANDBOX_URL": url + "/e2b",
                        "E2B_API_KEY": srv.token},
                "daytona": {"DAYTONA_API_URL": url + "/daytona/api", "DAYTONA_API_KEY": srv.token,
                            "DAYTONA_OTEL_ENABLED": "false"},
                "sprites": {"SPRITES_BASE_URL": url + "/sprites"},
                "opensandbox": {"OSB_DOMAIN": "127.0.0.1:%d/opensandbox" % srv.port},
                "zeroboot": {}}[engine])
    return env


def run_one(srv, engine, package, n, m, pool):
    """The node script's figures, or a string saying why there are none."""
    node = shutil.which("node")
    cwd = os.path.join(TESTS, "compat-" + (engine if package else "e2b"))
    if not node:
        return "node is not installed"
    if package and not os.path.isdir(os.path.join(cwd, "node_modules", *package.split("/"))):
        return "tests/compat-%s has no node_modules (run scripts/install-deps.sh --test)" % engine
    # Sprites' SDK wants the global WebSocket (behind a flag before Node 22).
    argv = compat_node.node_argv(node, websocket=engine == "sprites")
    env = env_for(srv, engine, pool)
    env.update(N=str(n), M=str(m))
    r = subprocess.run(argv + [os.path.join(HERE, "bench_compat", engine + ".mjs")], cwd=cwd,
                       env=env, timeout=600, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = [ln for ln in r.stdout.decode(errors="replace").splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return "exit %d: %s" % (r.returncode, r.stderr.decode(errors="replace")[-600:])
    return json.loads(lines[-1])


def figures(report, title, what, pair, client="SDK"):
    sdk, nat = pair["sdk"], pair["native"]
    if not sdk or not nat:
        return None
    report("%s %s (%s)" % (title, what, client), sdk, naive=nat, naive_name="native")
    added = [a - b for a, b in zip(sdk, nat)]
    return added


def run(srv, report, quick, pool=2):
    """Every engine's figures; returns {engine: added ms at p50 per figure}."""
    n, m = (3, 15) if quick else (5, 30)
    summary = {}
    for engine, package, title, create, command in ENGINES:
        got = run_one(srv, engine, package, n, m if package else max(m // 3, 5), pool)
        if isinstance(got, str):
            print("compat %s: no figures: %s" % (title, got), flush=True)
            continue
        summary[engine] = {}
        if create:
            added = figures(report, "compat %s:" % title, "create, %s" % create, got["create"])
            if added:
                report("compat %s: create, added over native" % title, added)
                summary[engine]["create_added_ms"] = round(statistics.median(added), 3)
        added = figures(report, "compat %s:" % title, "command round trip, %s" % command,
                        got["command"], "SDK" if package else "REST")
        if added:
            report("compat %s: command, added over native" % title, added, target="<= 1 ms")
            summary[engine]["command_added_ms"] = round(statistics.median(added), 3)
        raw = got["command"].get("raw")
        if raw:
            # The same request by hand: the front-end's share, without the SDK's.
            report("compat %s: command by hand (no SDK)" % title, raw,
                   naive=got["command"]["native"], naive_name="native")
            report("compat %s: command by hand, added over native" % title,
                   [a - b for a, b in zip(raw, got["command"]["native"])])
    return summary
