"""MCP (docs/mcp.md): raw HTTP checks of the Streamable HTTP transport
(session ids, 404 for an unknown session, 403 for a foreign Origin, 202 for
a notification, 405 for GET, JSON-RPC errors), then a whole session through
the official MCP TypeScript SDK client (tests/mcp/mcp.test.mjs): tools,
a screenshot, an xterm typed into, files read back, errors.  Skips the SDK
part only when node is not installed."""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MCP_DIR = os.path.join(HERE, "..", "mcp")
ACCEPT = {"Accept": "application/json, text/event-stream"}


def rpc(srv, path, msg, headers=None, method="POST"):
    return srv.request(method, path, msg, headers=dict(ACCEPT, **(headers or {})))


def initialize(srv, path, headers=None):
    return rpc(srv, path, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "raw", "version": "1"}}},
               headers)


def raw_checks(t, srv, sid):
    path = "/v1/sandboxes/%s/mcp" % sid
    r = initialize(srv, path)
    t.eq(r.status, 200, "initialize without a session answers 200")
    msid = r.header("Mcp-Session-Id")
    t.ok(msid and len(msid) == 32 and all(0x21 <= ord(c) <= 0x7e for c in msid),
         "initialize issues an Mcp-Session-Id of visible ASCII", r.headers)
    res = r.json().get("result", {})
    t.eq(res.get("protocolVersion"), "2025-06-18", "the client's revision is kept when deskbox speaks it")
    t.ok("tools" in res.get("capabilities", {}), "capabilities has tools", res)
    old = rpc(srv, path, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": "2024-11-05", "capabilities": {},
                                     "clientInfo": {"name": "raw", "version": "1"}}})
    t.eq(old.json()["result"]["protocolVersion"], "2025-11-25",
         "an older revision is answered with the newest deskbox speaks")

    h = {"Mcp-Session-Id": msid, "MCP-Protocol-Version": "2025-06-18"}
    r = rpc(srv, path, {"jsonrpc": "2.0", "method": "notifications/initialized"}, h)
    t.ok(r.status == 202 and r.body == b"", "notifications/initialized: 202, no body", (r.status, r.body))
    r = rpc(srv, path, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, h)
    t.ok(r.status == 200 and len(r.json()["result"]["tools"]) == 15, "tools/list in the session", r.body[:300])

    r = rpc(srv, path, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
            {"Mcp-Session-Id": "0" * 32})
    t.eq(r.status, 404, "a wrong session id is 404")
    r = rpc(srv, path, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    t.eq(r.status, 400, "no session id after initialize is 400")
    other = srv.request("POST", "/v1/sandboxes", {})
    if other.status == 201:
        oid = other.json()["id"]
        r = rpc(srv, "/v1/sandboxes/%s/mcp" % oid, {"jsonrpc": "2.0", "id": 3, "method": "ping"}, h)
        t.eq(r.status, 404, "a session is bound to its sandbox: another sandbox's endpoint answers 404")
        srv.request("DELETE", "/v1/sandboxes/" + oid)
    else:
        t.ok(False, "create a second sandbox", other.body[:300])
    r = rpc(srv, path, {"jsonrpc": "2.0", "id": 3, "method": "ping"},
            dict(h, **{"MCP-Protocol-Version": "1999-01-01"}))
    t.eq(r.status, 400, "an unsupported MCP-Protocol-Version is 400")

    for origin in ("http://evil.example", "http://evil.example:%d" % srv.port, "null"):
        r = rpc(srv, path, {"jsonrpc": "2.0", "id": 4, "method": "ping"},
                dict(h, Origin=origin, Host="evil.example:%d" % srv.port))
        t.eq(r.status, 403, "Origin %s is refused with 403" % origin)
    r = rpc(srv, path, {"jsonrpc": "2.0", "id": 4, "method": "ping"},
            dict(h, Origin="http://localhost:6274"))
    t.eq(r.status, 200, "a loopback Origin (a page on this machine) is allowed")
    r = srv.request("POST", path, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, token=None,
                    headers=dict(ACCEPT, **h))
    t.eq(r.status, 401, "no bearer token is 401")

    r = rpc(srv, path, "{not json", h)
    t.ok(r.status == 400 and r.json()["error"]["code"] == -32700, "a body that is not JSON is -32700",
         r.body)
    r = rpc(srv, path, [{"jsonrpc": "2.0", "id": 5, "method": "ping"}], h)
    t.ok(r.status == 400 and r.json()["error"]["code"] == -32600, "a batch is refused with -32600",
         r.body)
    r = rpc(srv, path, {"jsonrpc": "2.0", "id": 6, "method": "resources/list"}, h)
    t.ok(r.status == 200 and r.json()["error"]["code"] == -32601 and r.json()["id"] == 6,
         "an unknown method is -32601 with the request's id", r.body)
    r = rpc(srv, path, {"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"arguments": {}}}, h)
    t.ok(r.json().get("error", {}).get("code") == -32602, "tools/call without a name is -32602", r.body)
    r = rpc(srv, path, {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                        "params": {"name": "click", "arguments": {"x": -5, "y": 1}}}, h)
    res = r.json().get("result", {})
    t.ok(res.get("isError") is True and "x" in res["content"][0]["text"],
         "an out-of-range argument is a tool error naming the field", r.body)
    # "count" is a REST click's, not in the click tool's inputSchema
    for args, what in (({"x": 5, "y": 5, "count": 2}, "count"), ({"path": "/", "recurse": 1},
                                                                   "recurse")):
        tool = "click" if "x" in args else "list_files"
        r = rpc(srv, path, {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                            "params": {"name": tool, "arguments": args}}, h)
        res = r.json().get("result", {})
        t.ok(res.get("isError") is True and
             "unknown field '%s'" % what in res["content"][0]["text"],
             "%s: an argument its inputSchema lacks is a tool error naming it" % tool, r.body)

    r = srv.request("GET", path, headers=dict(ACCEPT, **h))
    t.eq(r.status, 405, "GET is 405: no server-initiated stream")
    r = srv.request("DELETE", path, headers=h)
    t.eq(r.status, 204, "DELETE ends the session")
    r = rpc(srv, path, {"jsonrpc": "2.0", "id": 8, "method": "ping"}, h)
    t.eq(r.status, 404, "the ended session is 404")
    r = srv.request("DELETE", path, headers=h)
    t.eq(r.status, 404, "ending it again is 404")


def stopped_checks(t, srv, sid):
    """A stopped sandbox still speaks MCP; its desktop tools say why they
    cannot run, and its files are still there."""
    path = "/v1/sandboxes/%s/mcp" % sid
    r = srv.request("POST", "/v1/sandboxes/%s/stop" % sid)
    if not t.eq(r.status, 200, "stop the sandbox"):
        return
    msid = initialize(srv, path).header("Mcp-Session-Id")
    h = {"Mcp-Session-Id": msid}
    r = rpc(srv, path, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "screenshot", "arguments": {}}}, h)
    res = r.json().get("result", {})
    t.ok(r.status == 200 and res.get("isError") is True and "stopped" in res["content"][0]["text"],
         "a screenshot of a stopped sandbox is a tool error saying it is stopped", r.body[:300])
    r = rpc(srv, path, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "list_files", "arguments": {"path": "/workspace"}}}, h)
    res = r.json().get("result", {})
    t.ok(r.status == 200 and not res.get("isError"), "list_files works on a stopped sandbox", r.body[:300])


def sdk_session(t, srv):
    node = shutil.which("node")
    if not node:
        t.skip("MCP session through the official SDK client", "node is not installed")
        return
    if not os.path.isdir(os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol", "sdk")):
        npm = shutil.which("npm")
        if not npm:
            t.skip("MCP session through the official SDK client", "npm is not installed")
            return
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=MCP_DIR,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if not t.ok(r.returncode == 0, "npm ci in tests/mcp", r.stdout.decode(errors="replace")[-2000:]):
            return
    env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port, DESKBOX_TOKEN=srv.token)
    r = subprocess.run([node, "mcp.test.mjs"], cwd=MCP_DIR, env=env, timeout=600,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = r.stdout.decode(errors="replace")
    # The node script's results become this program's, renumbered.
    results = 0
    for line in out.splitlines():
        if line.startswith("ok ") or line.startswith("not ok "):
            ok = line.startswith("ok ")
            name = line.split(" - ", 1)[1] if " - " in line else line
            t.ok(ok, "sdk: " + name)
            results += 1
        elif line.startswith("#"):
            print(line, flush=True)
    t.ok(r.returncode == 0 and results > 0, "the SDK client script ran to its end (exit %d)" % r.returncode,
         out[-2000:])


def stdio_session(t, srv, sid):
    """`deskbox mcp ID` launched as a command by the official SDK client."""
    node = shutil.which("node")
    cli = os.path.join(dbx.BUILD, "deskbox")
    if not node or not os.path.exists(cli):
        t.skip("MCP over stdio through deskbox mcp", "node or build/deskbox is missing")
        return
    env = dict(os.environ, DESKBOX_URL="http://127.0.0.1:%d" % srv.port,
               DESKBOX_TOKEN=srv.token, DESKBOX_CLI=cli, DESKBOX_SID=sid)
    r = subprocess.run([node, "mcp_stdio.test.mjs"], cwd=MCP_DIR, env=env, timeout=300,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = r.stdout.decode(errors="replace")
    results = 0
    for line in out.splitlines():
        if line.startswith("ok ") or line.startswith("not ok "):
            t.ok(line.startswith("ok "), "stdio: " + line.split(" - ", 1)[-1])
            results += 1
    t.ok(r.returncode == 0 and results > 0, "the stdio script ran to its end (exit %d)"
         % r.returncode, out[-2000:])


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sb = srv.create({"display": {"width": 1024, "height": 640}})
        raw_checks(t, srv, sb["id"])
        sdk_session(t, srv)
        stdio_session(t, srv, sb["id"])
        stopped_checks(t, srv, sb["id"])
        if t.failed:
            for line in srv.stderr().splitlines()[-30:]:
                t.diag("deskboxd: " + line)
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
