"""docs/openapi.yaml against the tree it lives in: the spec's operations and
the route table (server/api/api_routes.c) are the same set, both ways; the
auth of each agrees; the desktop action names the spec lists exist in the
desktop code and the ones there are in the spec; a live deskboxd routes
every spec operation (no 404 "no route", no 405) and serves the spec at
GET /v1/openapi.yaml; and @apidevtools/swagger-parser (tests/openapi,
pinned by its package-lock.json) accepts the document."""

import os
import re
import subprocess
import sys

# Debian's python3-yaml loads in Debian's interpreter; a pyenv python3 on
# the PATH may not have it.
try:
    import yaml
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("1..0 # SKIP python3-yaml is not installed (run scripts/install-deps.sh)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPEC = os.path.join(TOP, "docs", "openapi.yaml")
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
ACTION_ROUTE = "/v1/sandboxes/{id}/desktop/{action}"
ANY_METHOD = ("GET", "POST", "PUT", "PATCH", "DELETE")


def table_routes():
    """{(METHOD, pattern): no_auth} from the ROUTE(...)/STREAM(...) lines."""
    src = open(os.path.join(TOP, "server", "api", "api_routes.c")).read()
    sb = re.search(r'#define SB "([^"]+)"', src).group(1)
    routes = {}
    for m in re.finditer(r'\b(ROUTE|STREAM|PROXY)\((?:"([A-Z]+|\*)",\s*)?'
                         r'((?:SB\s*)?(?:"[^"]*")?)\s*,([^)]*)\)', src):
        kind, method, pat, rest = m.groups()
        if kind == "PROXY":
            method = "*"
        elif method is None:
            continue
        path = ""
        if pat.startswith("SB"):
            path = sb
            pat = pat[2:].strip()
        if pat:
            path += pat.strip('"')
        no_auth = kind == "PROXY" or (kind == "ROUTE" and "HTTP_NO_AUTH" in rest)
        # "*" takes any method: the spec lists the usual ones.
        for mm in ANY_METHOD if method == "*" else [method]:
            routes[(mm, path)] = no_auth
    return routes


def norm(pattern):
    """Template names do not matter, a rest-of-path capture does."""
    return re.sub(r"\{[^}*]+\}", "{}", re.sub(r"\{[^}]+\*\}", "{*}", pattern))


def spec_operations(spec):
    """[(METHOD, spec path, table pattern it maps to, operation)]."""
    ops = []
    for path, item in spec["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            route = op.get("x-deskbox-route") or item.get("x-deskbox-route") or path
            ops.append((method.upper(), path, route, op))
    return ops


def source_actions():
    """The action names the desktop code dispatches on."""
    names = set()
    for f in os.listdir(os.path.join(TOP, "server", "desktop")):
        if not f.endswith(".c"):
            continue
        src = open(os.path.join(TOP, "server", "desktop", f)).read()
        names.update(re.findall(r'\{"([a-z_]+)",\s*build_[a-z_]+\}', src))
        names.update(re.findall(r'strcmp\(name,\s*"([a-z_]+)"\)', src))
    return names


def concrete(path):
    """A request path for a spec path: dummy values for its templates."""
    values = {"id": "0" * 32, "pid": "1", "cid": "c", "wid": "1", "op": "activate",
              "token": "0" * 64, "path": "viewer.js"}
    return re.sub(r"\{([^}]+)\}", lambda m: values.get(m.group(1), "x"), path)


def main():
    t = dbx.Tap()
    spec = yaml.safe_load(open(SPEC))
    t.ok(str(spec.get("openapi", "")).startswith("3.1"), "the spec is OpenAPI 3.1")

    # ---- the route table and the spec, both ways ----
    routes = table_routes()
    t.ok(len(routes) > 30, "parsed %d routes from api_routes.c" % len(routes))
    ops = spec_operations(spec)
    spec_keys = {}
    for method, path, route, op in ops:
        spec_keys.setdefault((method, norm(route)), []).append((path, op))
    table_keys = {(m, norm(p)): (p, na) for (m, p), na in routes.items()}
    missing = sorted(k for k in table_keys if k not in spec_keys)
    extra = sorted(k for k in spec_keys if k not in table_keys)
    t.ok(not missing, "every route in the table is in the spec",
         "\n".join("%s %s" % (m, table_keys[(m, p)][0]) for m, p in missing))
    t.ok(not extra, "every operation in the spec is a route in the table",
         "\n".join("%s %s" % (m, spec_keys[(m, p)][0][0]) for m, p in extra))

    # ---- auth: bearer unless the table says HTTP_NO_AUTH ----
    wrong = []
    for key, (pattern, no_auth) in table_keys.items():
        for path, op in spec_keys.get(key, []):
            overridden = "security" in op and op["security"] != [{"bearer": []}]
            if overridden != no_auth:
                wrong.append("%s %s: table %s, spec %s" % (key[0], path,
                             "no auth" if no_auth else "bearer",
                             op.get("security", "bearer (global)")))
    t.ok(not wrong, "each operation's security matches the route's HTTP_NO_AUTH flag",
         "\n".join(wrong))

    # ---- desktop actions: POST …/desktop/{action} ----
    spec_actions = {path.rsplit("/", 1)[1] for method, path, route, op in ops
                    if route == ACTION_ROUTE}
    code = source_actions()
    # POST …/desktop/clipboard is set_clipboard (api_desktop.c).
    code_for = {a: ("set_clipboard" if a == "clipboard" else a) for a in spec_actions}
    unknown = sorted(a for a, c in code_for.items() if c not in code)
    t.ok(not unknown, "every action path in the spec is an action of the desktop code",
         ", ".join(unknown))
    # Names the code dispatches on that are served by routes of their own
    # (GET cursor/windows/clipboard/apps, windows/wait, windows/{wid}/{op}).
    elsewhere = {"cursor", "windows", "get_clipboard", "apps", "wait_window"}
    undocumented = sorted(c for c in code if c not in set(code_for.values()) and
                          c not in elsewhere and not c.startswith("window_"))
    t.ok(not undocumented, "every action of the desktop code has its path in the spec",
         ", ".join(undocumented))

    # ---- the document itself, by an independent validator ----
    node_dir = os.path.join(TOP, "tests", "openapi")
    if not os.path.isdir(os.path.join(node_dir, "node_modules", "@apidevtools")):
        t.skip("swagger-parser validates the spec",
               "tests/openapi/node_modules is missing (run scripts/install-deps.sh)")
    else:
        p = subprocess.run(["node", os.path.join(node_dir, "validate.mjs"), SPEC],
                           cwd=node_dir, capture_output=True, text=True, timeout=120)
        t.ok(p.returncode == 0, "swagger-parser validates the spec: " + p.stdout.strip(),
             p.stderr)

    # ---- the live server ----
    dbx.require_root_and_tools()
    srv = dbx.Server()
    try:
        r = srv.request("GET", "/v1/openapi.yaml", token=None)
        t.eq(r.status, 200, "GET /v1/openapi.yaml needs no token")
        t.eq((r.header("Content-Type") or "").split(";")[0], "application/yaml",
             "it is application/yaml")
        t.ok(r.body == open(SPEC, "rb").read(), "it is docs/openapi.yaml, byte for byte")

        unrouted = []
        for method, path, route, op in ops:
            # No token: a routed request that needs one is 401 before its
            # handler runs, so nothing happens; a public one is harmless.
            r = srv.request(method, concrete(path), token=None, timeout=30)
            code_ = None
            try:
                err = r.json().get("error", {})
                code_, msg = err.get("code"), err.get("message", "")
            except Exception:
                msg = ""
            if r.status == 405 or (r.status == 404 and msg.startswith("no route")):
                unrouted.append("%s %s: %d %s" % (method, path, r.status, msg))
        t.ok(not unrouted, "deskboxd routes all %d operations of the spec" % len(ops),
             "\n".join(unrouted))
        r = srv.request("GET", "/v1/no-such-route", token=None)
        t.ok(r.status == 404 and r.json()["error"]["message"].startswith("no route"),
             "(the check above tells an unknown route by its message)")
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
