"""Property-based requests generated from docs/openapi.yaml's own schemas
(Hypothesis) against a live deskboxd with one sandbox: for every operation
of the spec that this tree routes, valid and invalid bodies, query and path
parameters. Properties: never a 5xx (but a 501 not_implemented the spec
lists); the status is one the spec lists for
the operation; a JSON answer validates (jsonschema) against the spec's
schema for that status; other answers have a content type the spec names.

Bounded: EXAMPLES requests per operation (DESKBOX_FUZZ_EXAMPLES, default
25), waits and timeouts clamped to a few hundred ms, commands and file paths
drawn from safe sets for the operations that run or change things, create
and PATCH of the limits sent only invalid bodies plus one default create
and one valid PATCH, stop and start once each,
the sandbox deleted last. Before them: every JSON request body of the spec
is closed, and each of its properties, sent with a member deskbox does not
know, gets a 400 unknown_field naming that member. DESKBOX_FUZZ_SEED repeats a run."""

import json
import os
import random
import re
import sys
import time
import urllib.parse

try:
    import hypothesis
    import jsonschema
    import yaml
    from hypothesis import strategies as st
except ImportError:
    # Debian's python3-hypothesis/-jsonschema/-yaml load in Debian's
    # interpreter; a pyenv python3 on the PATH may not have them.
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("1..0 # SKIP python3-hypothesis, python3-jsonschema or python3-yaml missing "
          "(run scripts/install-deps.sh)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402
import test_openapi as common  # noqa: E402

EXAMPLES = int(os.environ.get("DESKBOX_FUZZ_EXAMPLES", "25"))
SEED = int(os.environ.get("DESKBOX_FUZZ_SEED", str(random.randrange(1 << 30))))

# ---- the spec, $refs inlined ----


def deref(node, root, depth=0):
    if depth > 40:
        raise RuntimeError("$ref nesting too deep")
    if isinstance(node, dict):
        if "$ref" in node:
            target = root
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            merged = deref(target, root, depth + 1)
            rest = {k: v for k, v in node.items() if k != "$ref"}
            if rest:
                merged = dict(merged, **deref(rest, root, depth + 1))
            return merged
        return {k: deref(v, root, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [deref(v, root, depth + 1) for v in node]
    return node


def flatten(schema):
    """allOf of objects as one object schema (for generation only)."""
    if "allOf" not in schema:
        return schema
    out = {"type": "object", "properties": {}, "required": []}
    for part in schema["allOf"]:
        part = flatten(part)
        out["properties"].update(part.get("properties", {}))
        out["required"] += part.get("required", [])
    return out


# ---- schema → strategy ----

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=6)


def strategy(schema):
    schema = flatten(schema)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return st.one_of([strategy(s) for s in schema[key]])
    t = schema.get("type")
    if isinstance(t, list):
        return st.one_of([strategy(dict(schema, type=x)) for x in t])
    if t == "null":
        return st.none()
    if t == "boolean":
        return st.booleans()
    if t == "integer":
        lo = schema.get("minimum", -1000)
        hi = schema.get("maximum", max(lo, 0) + 100000)
        return st.integers(lo, hi)
    if t == "number":
        return st.floats(schema.get("minimum", -1000), schema.get("maximum", 1e6),
                         allow_nan=False, allow_infinity=False)
    if t == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(lambda s: len(s) < 60)
        return st.text(min_size=schema.get("minLength", 0),
                       max_size=min(schema.get("maxLength", 40), 40))
    if t == "array":
        lo = schema.get("minItems", 0)
        return st.lists(strategy(schema.get("items", {})), min_size=lo,
                        max_size=min(schema.get("maxItems", lo + 4), lo + 4))
    if t == "object" or "properties" in schema:
        props = schema.get("properties", {})
        req = set(schema.get("required", []))
        fixed = {k: strategy(v) for k, v in props.items() if k in req}
        optional = {k: strategy(v) for k, v in props.items() if k not in req}
        base = st.fixed_dictionaries(fixed, optional=optional)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            names = st.from_regex(schema.get("propertyNames", {}).get("pattern", "^[a-z]{1,8}$"),
                                  fullmatch=True).filter(lambda s: len(s) < 40)
            more = st.dictionaries(names, strategy(extra), max_size=3)
            return st.tuples(base, more).map(lambda p: dict(p[1], **p[0]))
        return base
    return JSONISH


# ---- invalid values ----

BAD = [None, True, -1, 1.5, 10 ** 12, -(10 ** 12), "", "x", "\u0000", "é" * 3, "a" * 5000,
       [], [1, "a"], {}, {"x": {}}]


# Wrong for every field of a create body (which must never be valid here).
BAD_FOR_ALL = ["x", 10 ** 12, -1, 1.5, [1, "a"]]


def mutate(rnd, body, schema, bad=BAD):
    """An invalid variant of a generated body."""
    kind = rnd.randrange(6)
    if kind == 0 or not isinstance(body, dict):
        return rnd.choice([[], "text", 3, None, b"{", b"\xff\xfe", b"[1,2", b'{"a":'])
    props = list(flatten(schema).get("properties", {}))
    if kind == 1 and flatten(schema).get("required"):
        body = dict(body)
        body.pop(rnd.choice(flatten(schema)["required"]), None)
        return body
    if props:
        body = dict(body)
        body[rnd.choice(props)] = rnd.choice(bad)
        return body
    return dict(body, unexpected=rnd.choice(BAD))


# ---- bounds: nothing waits long, runs anything unsafe, or touches files
# outside /workspace/fuzz ----

CLAMP = {"timeout_ms": 300, "ms": 300, "quiet_ms": 100, "duration_ms": 200, "delay_ms": 5,
         "timeout_s": 3, "duration": 0.3, "ttl_s": 3600}
SAFE_ARGV = [["true"], ["echo", "hi"], ["sh", "-c", "echo out; echo err >&2; exit 3"],
             ["printf", "\\377\\376"], ["no-such-program"], ["sleep", "0.1"]]
SAFE_COMMAND = ["true", "echo $HOME", "exit 7", "printf '\\377'", "echo err >&2"]
SAFE_CODE = ["1+1", "print('x')", "raise SystemExit(2)", "echo hi", "import sys; sys.exit(1)"]
FUZZ_PATHS = ["/workspace/fuzz/a", "/workspace/fuzz/b", "fuzz/c", "/workspace/fuzz/d/e",
              "/workspace/fuzz", "", "..", "/workspace/../etc", "x" * 300,
              "/" + "y" * 5000, "/etc/passwd", "/usr/bin", "/workspace/fuzz/a\u0000b"]


def clamp(v):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k in CLAMP and isinstance(x, (int, float)) and not isinstance(x, bool) \
                    and x > CLAMP[k] and abs(x) < 1e9:
                x = CLAMP[k]
            out[k] = clamp(x)
        return out
    if isinstance(v, list):
        return [clamp(x) for x in v]
    return v


def make_safe(op_id, body, rnd):
    if not isinstance(body, dict):
        return body
    body = dict(body)
    if op_id == "exec":
        if "argv" in body and isinstance(body["argv"], list):
            body["argv"] = rnd.choice(SAFE_ARGV)
        if "command" in body and isinstance(body["command"], str):
            body["command"] = rnd.choice(SAFE_COMMAND)
        if "argv" not in body and "command" not in body:
            body["argv"] = rnd.choice(SAFE_ARGV)
    if op_id == "codeRun" and isinstance(body.get("code"), str):
        body["code"] = rnd.choice(SAFE_CODE)
    if op_id in ("exec", "codeRun") and isinstance(body.get("cwd"), str):
        body["cwd"] = rnd.choice(["/workspace", "/tmp", "/no/such/dir", body["cwd"]])
    # A network other than none changes this machine's own network
    # namespace (links, nftables, ip_forward): test_network.py tests those
    # in namespaces it makes.  Here: none, or a value the server refuses.
    if op_id == "setSandboxNetwork" and "network" in body:
        body["network"] = rnd.choice(["none", "intranet", {"allow": []}, {"allow": ["bad name"]},
                                      {"deny": ["x.test"]}, 7])
    if op_id == "browser":
        # Every valid URL (and none: about:blank) starts chromium or opens a tab in it, a
        # few hundred MB each; test_browser.py covers those.
        body["url"] = rnd.choice(["ftp://x", "javascript:alert(1)", "", "x", "http://a b",
                                  "chrome://settings", "http://", "a" * 9000])
    if op_id == "putTemplate" and body.get("warm_pool"):
        # A warm pool starts desktops in the background, with the
        # template's network and startup commands: test_templates.py tests
        # those.  Here: none (invalid values still come from mutate).
        body["warm_pool"] = 0
    if op_id == "createImage" and "build" in body:
        # A real build downloads ~300 MB for minutes (make image does it): a
        # mirror on a closed loopback port makes debootstrap fail at once.
        body["mirror"] = "http://127.0.0.1:9/debian"
    if op_id == "launch" and isinstance(body.get("argv"), list):
        body["argv"] = rnd.choice([["true"], ["no-such-program"], ["sh", "-c", "exit 0"]])
    # Random modifier names and agent displays make nearly every action a
    # 400: keep them in some.
    for k in ("modifiers", "agent_display"):
        if k in body and rnd.random() < 0.7:
            del body[k]
    # Coordinates inside the default 1280x800 screen, mostly.
    for k, n in (("x", 1280), ("y", 800)):
        if isinstance(body.get(k), int) and not isinstance(body[k], bool) and rnd.random() < 0.8:
            body[k] %= n
    if isinstance(body.get("path"), list):
        body["path"] = [[p[0] % 1280, p[1] % 800] if isinstance(p, list) and len(p) == 2 else p
                        for p in body["path"]]
    if op_id in ("makeDirectory", "moveFile"):
        for k in ("path", "from", "to"):
            if isinstance(body.get(k), str):
                body[k] = rnd.choice(FUZZ_PATHS)
    return body


# ---- requests ----


class Fuzzer:
    def __init__(self, srv, spec, t):
        self.srv, self.spec, self.t = srv, spec, t
        self.sid = None
        self.pids, self.cids, self.wids = [], [], []
        self.statuses = {}

    def path_value(self, name, rnd):
        if name == "id":
            return self.sid if rnd.random() < 0.85 else rnd.choice(["0" * 32, "x", "%2e%2e"])
        pools = {"pid": self.pids, "cid": self.cids, "wid": self.wids}
        if name in pools and pools[name] and rnd.random() < 0.7:
            return str(rnd.choice(pools[name]))
        return rnd.choice({"pid": ["1", "0", "-5", "99999999", "abc"],
                           "cid": ["nope", "x" * 70, "%00"],
                           "wid": ["1", "0x400001", "zz", "9" * 25],
                           "op": ["activate", "close", "move", "resize", "minimize", "maximize",
                                  "explode"],
                           "token": ["0" * 64, "abc"],
                           "path": ["viewer.js", "viewer.css", "core/rfb.js", "../etc/passwd",
                                    "core/.hidden.js", "x.exe", "vendor/none.js"]}
                          .get(name, ["x"]))

    def query(self, params, op_id, rnd, draw):
        q = {}
        for p in params:
            if p.get("in") != "query":
                continue
            name = p["name"]
            if not p.get("required") and rnd.random() < 0.5:
                continue
            if name == "path":
                v = rnd.choice(FUZZ_PATHS) if op_id in ("uploadFile", "uploadFileMultipart",
                                                        "deleteFile") else \
                    rnd.choice(FUZZ_PATHS + ["/", "/etc", "/workspace", "/proc/self"])
            elif rnd.random() < 0.2:
                v = rnd.choice(["", "-1", "abc", "1e99", "0x10", "\u0000", "9" * 30, "é"])
            else:
                v = draw(strategy(p.get("schema", {})))
                if isinstance(v, bool):
                    v = "1" if v else "0"
            q[name] = v
        if op_id in ("exec", "codeRun") and "stream" in q:
            q["stream"] = rnd.choice(["1", "0", "true", "x"])
        if op_id in ("watchFiles", "desktopEvents"):
            q["timeout_s"] = "1"  # a watch streams until then
        return q

    def send(self, method, path, q, body, headers):
        url = path + ("?" + urllib.parse.urlencode(q) if q else "")
        if isinstance(body, (dict, list, str, int, float)) or body is None and method in (
                "POST", "PUT"):
            data = json.dumps(body).encode() if body is not None or method == "POST" else None
            headers = dict(headers, **{"Content-Type": "application/json"})
        else:
            data = body
        return self.srv.request(method, url, body=data, headers=headers, timeout=60)

    def check(self, op, method, url, r, problems):
        self.statuses[r.status] = self.statuses.get(r.status, 0) + 1
        where = "%s %s -> %d" % (method, url[:160], r.status)
        # A proxy to a port in the sandbox (x-deskbox-proxy) answers 502 or
        # 504 when nothing there does, as the spec says; and a 501
        # not_implemented the spec lists for the operation (pause with
        # "memory": true) is an answer, not a failure.  Nothing else may.
        listed = str(r.status) in op["responses"]
        not_built = r.status == 501 and listed and b'"not_implemented"' in r.body
        if r.status >= 500 and not not_built and not (op.get("x-deskbox-proxy") and listed):
            problems.append(where + ": " + r.body[:300].decode("utf-8", "replace"))
            return
        responses = op["responses"]
        resp = responses.get(str(r.status)) or responses.get("default")
        if resp is None:
            problems.append(where + ": status not in the spec (%s): %s" % (
                ",".join(responses), r.body[:200].decode("utf-8", "replace")))
            return
        ctype = (r.header("Content-Type") or "").split(";")[0].strip()
        content = resp.get("content", {})
        if not content:
            if r.body:
                problems.append(where + ": the spec says no body, got %d bytes" % len(r.body))
            return
        if ctype not in content:
            problems.append(where + ": content type %r not in the spec (%s)" % (
                ctype, ",".join(content)))
            return
        if ctype == "application/json":
            try:
                doc = json.loads(r.body)
            except ValueError as e:
                problems.append(where + ": not JSON: %s" % e)
                return
            errs = sorted(jsonschema.Draft202012Validator(content[ctype]["schema"])
                          .iter_errors(doc), key=lambda e: list(e.path))
            if errs:
                problems.append(where + ": answer does not match the schema: %s at %s; body %s" % (
                    errs[0].message[:200], "/".join(map(str, errs[0].path)),
                    r.body[:200].decode("utf-8", "replace")))

    def run_op(self, method, path, op, params, invalid_only=False, examples=EXAMPLES):
        op_id = op.get("operationId", "")
        body_schema = None
        rb = op.get("requestBody", {}).get("content", {})
        if "application/json" in rb:
            body_schema = rb["application/json"]["schema"]
        problems = []
        seen = [0]

        @hypothesis.seed(SEED)
        @hypothesis.settings(max_examples=examples, deadline=None, database=None,
                             suppress_health_check=list(hypothesis.HealthCheck),
                             phases=[hypothesis.Phase.generate])
        @hypothesis.given(st.data(), st.randoms(use_true_random=False))
        def one(data, rnd):
            seen[0] += 1
            url = re.sub(r"\{([^}]+)\}", lambda m: self.path_value(m.group(1), rnd), path)
            q = self.query(params, op_id, rnd, data.draw)
            headers = {}
            body = None
            if body_schema is not None:
                body = clamp(data.draw(strategy(body_schema)))
                body = make_safe(op_id, body, rnd)
                if invalid_only:
                    body = mutate(rnd, body, body_schema, BAD_FOR_ALL)
                elif rnd.random() < 0.35:
                    body = mutate(rnd, body, body_schema)
            elif "application/octet-stream" in rb:
                body = rnd.choice([b"", b"hello\n", bytes(range(256))])
                headers["Content-Type"] = "application/octet-stream"
            elif "multipart/form-data" in rb:
                if rnd.random() < 0.5:
                    b = "fuzzb0undary"
                    body = ("--%s\r\nContent-Disposition: form-data; name=\"file\"; "
                            "filename=\"f\"\r\n\r\nhi\r\n--%s--\r\n" % (b, b)).encode()
                    headers["Content-Type"] = "multipart/form-data; boundary=" + b
                else:
                    body = rnd.choice([b"garbage", b"--x\r\n"])
                    headers["Content-Type"] = rnd.choice(
                        ["multipart/form-data", "text/plain", "multipart/form-data; boundary=x"])
            if op_id in ("exec", "codeRun") and rnd.random() < 0.2:
                headers["Accept"] = "text/event-stream"
            r = self.send(method, url, q, body, headers)
            self.check(op, method, url, r, problems)
            self.learn(op_id, r)

        one()
        return seen[0], problems

    def learn(self, op_id, r):
        """Ids from answers, for later path parameters."""
        if r.status not in (200, 201) or not (r.header("Content-Type") or "").startswith(
                "application/json"):
            return
        try:
            j = json.loads(r.body)
        except ValueError:
            return
        if op_id in ("exec", "codeRun") and "pid" in j and len(j) == 1:
            self.pids.append(j["pid"])
        if op_id == "createContext":
            self.cids.append(j["id"])
        if op_id == "listWindows":
            self.wids += [w["id"] for w in j.get("windows", [])][:5]


# ---- closed bodies: a member the server does not know is a 400 ----

UNKNOWN = "deskbox_unknown_field"
# The JSON-RPC envelope of MCP is the protocol's, not deskbox's (its tools'
# arguments are checked against their inputSchema, test_mcp.py).
LENIENT = {"mcpPost"}
# The tool-format adapters answer a refused member in their own format.
ADAPTERS = {"anthropic": {"action": "cursor_position"}, "openai": {"type": "wait"},
            "gemini": {"name": "hover_at", "args": {"x": 1, "y": 1}}}


def sample(schema):
    """A value of the type `schema` names (its checks come after the names')."""
    schema = flatten(schema)
    for key in ("const", "default"):
        if key in schema and schema[key] is not None:
            return schema[key]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            return sample(schema[key][0])
    t = schema.get("type")
    t = t[0] if isinstance(t, list) else t
    return {"string": "x", "integer": schema.get("minimum", 1), "number": 1,
            "boolean": False, "array": [], "object": {}}.get(t)


def closed_bodies(t, f, ops, routes):
    """Every JSON body of the spec is closed (additionalProperties or
    unevaluatedProperties false), and the server agrees: each property the
    spec names, sent with one it does not, gets 400 unknown_field naming
    the latter (so the property itself is known), before anything runs."""
    open_, wrong, sent = [], [], 0
    for method, path, route, op, params in ops:
        op_id = op.get("operationId", "")
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if not body or op_id in LENIENT or (method, common.norm(route)) not in routes:
            continue
        schema = body["schema"]
        if schema.get("additionalProperties") is not False and \
                schema.get("unevaluatedProperties") is not False:
            open_.append("%s %s" % (method, path))
        names = [None] + list(flatten(schema).get("properties", {}))
        for name in names:
            if op_id in ADAPTERS and name is not None:
                continue
            doc = dict(ADAPTERS.get(op_id, {}))
            if name is not None:
                doc[name] = sample(flatten(schema)["properties"][name])
            doc[UNKNOWN] = 1
            op_name = "resize" if name in ("width", "height") else "move"
            url = re.sub(r"\{([^}]+)\}", lambda m: {
                "id": f.sid, "port": "8000", "op": op_name}.get(m.group(1), "1"), path)
            r = f.srv.request(method, url, doc)
            sent += 1
            if op_id in ADAPTERS:
                got = (r.status, r.header("X-Action-Error") or "")
                ok = r.status == 200 and "unknown field '%s'" % UNKNOWN in got[1]
            else:
                try:
                    err = r.json()["error"]
                except Exception:
                    err = {}
                got = (r.status, err.get("code"), err.get("message", "")[:160])
                ok = r.status == 400 and err.get("code") == "unknown_field" and \
                    "unknown field '%s'" % UNKNOWN in err.get("message", "")
            if not ok:
                wrong.append("%s %s with %s: %r" % (method, path, name, got))
    t.ok(not open_, "every JSON request body of the spec is closed", ", ".join(open_))
    t.ok(sent > 100 and not wrong, "%d bodies with a member deskbox does not know: each a 400 "
         "unknown_field naming it, whatever known member came first" % sent,
         "\n".join(wrong[:10]))


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    spec = yaml.safe_load(open(common.SPEC))
    spec = deref(spec, spec)
    routes = {(m, common.norm(p)) for m, p in common.table_routes()}
    t.diag("seed %d (DESKBOX_FUZZ_SEED), %d examples per operation" % (SEED, EXAMPLES))
    srv = dbx.Server()
    started = time.monotonic()
    try:
        f = Fuzzer(srv, spec, t)
        # One default create, the sandbox every sandbox route works on.
        r = srv.request("POST", "/v1/sandboxes", {})
        t.eq(r.status, 201, "a default create")
        f.sid = r.json()["id"]
        srv.request("POST", "/v1/sandboxes/%s/process/contexts" % f.sid, {})
        # A window for the window operations.
        srv.request("POST", "/v1/sandboxes/%s/desktop/launch" % f.sid,
                    {"argv": ["xterm"], "timeout_ms": 5000})
        ops = []
        for method, path, route, op in common.spec_operations(spec):
            params = spec["paths"][path].get("parameters", []) + op.get("parameters", [])
            ops.append((method, path, route, op, params))
        last = {"deleteSandbox", "stopSandbox", "startSandbox", "createSandbox",
                "updateSandbox"}
        order = [o for o in ops if o[3].get("operationId") not in last]
        order.sort(key=lambda o: o[3].get("operationId") == "listWindows", reverse=True)
        by_id = {o[3].get("operationId"): o for o in ops}

        def fuzz(o, **kw):
            method, path, route, op, params = o
            name = "%s %s" % (method, path)
            if (method, common.norm(route)) not in routes:
                t.skip(name, "not a route of this tree (test_openapi.py says so too)")
                return
            f.statuses = {}
            n, problems = f.run_op(method, path, op, params, **kw)
            t.ok(not problems, "%s: %d requests (%s), no 5xx, answers as the spec says" % (
                name, n, " ".join("%dx%d" % (c, k) for k, c in sorted(f.statuses.items()))),
                "\n".join(problems[:6]))

        closed_bodies(t, f, ops, routes)
        for o in order:
            fuzz(o)
        # Creates: invalid bodies only (a valid one would start a desktop
        # per example); then stop and start once each, then delete.
        fuzz(by_id["createSandbox"], invalid_only=True)
        # Limits: invalid bodies (a valid one could starve the sandbox the
        # other operations used), then one valid change.
        fuzz(by_id["updateSandbox"], invalid_only=True)
        o = by_id["updateSandbox"]
        r = srv.request("PATCH", o[1].replace("{id}", f.sid), {"memory_mb": 1024})
        f_problems = []
        f.check(o[3], "PATCH", o[1], r, f_problems)
        t.ok(r.status == 200 and not f_problems, "updateSandbox answers as the spec says",
             "\n".join(f_problems) or r.body[:300])
        for op_id in ("stopSandbox", "startSandbox"):
            o = by_id[op_id]
            r = srv.request("POST", o[1].replace("{id}", f.sid), {})
            f_problems = []
            f.check(o[3], "POST", o[1], r, f_problems)
            t.ok(r.status == 200 and not f_problems, "%s of the sandbox answers as the spec says"
                 % op_id, "\n".join(f_problems) or r.body[:300])
        r = srv.request("DELETE", "/v1/sandboxes/%s" % f.sid)
        problems = []
        f.check(by_id["deleteSandbox"][3], "DELETE", "/v1/sandboxes/{id}", r, problems)
        t.ok(r.status == 204 and not problems, "the sandbox is deleted last")
        f.sid = "0" * 32
        for op_id in ("deleteSandbox", "stopSandbox", "startSandbox"):
            fuzz(by_id[op_id], examples=3)
        t.diag("%.0f s" % (time.monotonic() - started))
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
