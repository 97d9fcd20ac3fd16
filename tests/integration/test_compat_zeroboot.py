"""Zeroboot's REST shape (docs/compat.md): POST /zeroboot/v1/exec
{"code"} with a bearer key runs the code in a fresh sandbox and answers
{id, stdout, stderr, exit_code, fork_time_ms, exec_time_ms, total_time_ms};
the sandbox is gone afterwards (checked through deskbox's own API) and one
run's files are not seen by the next.  Batch, health, timeouts, and errors
in Zeroboot's {"error": "..."} shape.  Zeroboot publishes no client package:
the requests are the ones its SDKs send (sdk/node: fetch with JSON)."""

import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

EXEC = "/zeroboot/v1/exec"


def zb_error(t, r, status, name, word=None):
    try:
        body = r.json()
    except ValueError:
        body = None
    ok = (r.status == status and isinstance(body, dict) and isinstance(body.get("error"), str)
          and "code" not in body and (word is None or word in body["error"]))
    t.ok(ok, "%s: %d {\"error\": ...}" % (name, status), (r.status, r.body[:300]))


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        before = srv.request("GET", "/v1/sandboxes").json()["sandboxes"]
        r = srv.request("POST", EXEC, {"code": "import sys\nprint(1 + 1)\nprint('e', file=sys.stderr)\n"
                                       "open('/workspace/mark', 'w').write('x')",
                                       "language": "python", "timeout_seconds": 30})
        j = r.json() if r.status == 200 else {}
        t.eq(r.status, 200, "exec answers 200")
        t.eq(j.get("stdout"), "2\n", "stdout of the python code")
        t.eq(j.get("stderr"), "e\n", "stderr of the python code")
        t.eq(j.get("exit_code"), 0, "exit_code 0")
        t.ok(all(isinstance(j.get(k), (int, float)) and j[k] >= 0
                 for k in ("fork_time_ms", "exec_time_ms", "total_time_ms"))
             and j["total_time_ms"] >= j["exec_time_ms"], "the three timings are numbers", j)
        t.diag("fork %.1f ms, exec %.1f ms, total %.1f ms" % (
            j.get("fork_time_ms", -1), j.get("exec_time_ms", -1), j.get("total_time_ms", -1)))
        sid = j.get("id", "")
        g = srv.request("GET", "/v1/sandboxes/" + sid)
        t.eq(g.status, 404, "the run's sandbox is deleted afterwards (deskbox's API: 404)")
        after = srv.request("GET", "/v1/sandboxes").json()["sandboxes"]
        t.eq(len(after), len(before), "no sandbox is left listed")

        r = srv.request("POST", EXEC, {"code": "import os\nprint(os.path.exists('/workspace/mark'))"})
        t.ok(r.status == 200 and r.json()["stdout"] == "False\n" and r.json()["id"] != sid,
             "the next run is in a fresh sandbox: the file of the last one is not there (python by default)",
             r.body[:300])

        r = srv.request("POST", EXEC, {"code": "console.log(6 * 7); process.exit(3)", "language": "node"})
        t.ok(r.status == 200 and r.json()["stdout"] == "42\n" and r.json()["exit_code"] == 3,
             "node code, its exit code", r.body[:300])
        r = srv.request("POST", EXEC, {"code": "import time\ntime.sleep(30)", "timeout_seconds": 1})
        j = r.json() if r.status == 200 else {}
        t.ok(r.status == 200 and j.get("exit_code") == -1 and j.get("stderr") == "Execution timed out after 1s"
             and j.get("exec_time_ms", 1e9) < 10000,
             "past timeout_seconds: exit_code -1 and Zeroboot's message", r.body[:300])

        r = srv.request("POST", EXEC + "/batch", {"executions": [
            {"code": "print(1)", "language": "python"}, {"code": "console.log(2)", "language": "node"}]})
        res = r.json().get("results", []) if r.status == 200 else []
        t.ok(len(res) == 2 and res[0]["stdout"] == "1\n" and res[1]["stdout"] == "2\n"
             and res[0]["id"] != res[1]["id"], "batch: one result per execution, each its own sandbox",
             r.body[:400])

        r = srv.request("GET", "/zeroboot/v1/health")
        t.ok(r.status == 200 and r.json()["status"] == "ok"
             and r.json()["templates"]["python"]["ready"] is True, "health", r.body)

        zb_error(t, srv.request("POST", EXEC, {"code": "print(1)"}, token=None), 401, "no bearer key")
        zb_error(t, srv.request("POST", EXEC, {"code": "print(1)"}, token="wrong"), 401, "a wrong key")
        zb_error(t, srv.request("POST", EXEC, {"language": "python"}), 400, "no code", "code")
        zb_error(t, srv.request("POST", EXEC, {"code": 5}), 400, "code not a string", "code")
        zb_error(t, srv.request("POST", EXEC, {"code": "1", "language": "cobol"}), 400,
                 "an unknown language", "cobol")
        zb_error(t, srv.request("POST", EXEC, "{not json", headers={"Content-Type": "application/json"}),
                 400, "a body that is not JSON")
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
            s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                       "Content-Length: %d\r\n\r\n" % (EXEC, srv.token, 3 << 20)).encode())
            head = s.recv(65536).decode(errors="replace")
        body = head.split("\r\n\r\n", 1)[-1]
        t.ok(head.startswith("HTTP/1.1 413") and body.startswith('{"error":"'),
             "a body over the cap: 413 {\"error\": ...}", head[:400])
        zb_error(t, srv.request("POST", "/zeroboot/v1/nothing", {}), 404, "an unknown route")
        zb_error(t, srv.request("GET", EXEC), 405, "a wrong method")
        r = srv.request("GET", "/v1/sandboxes/nothing")
        t.ok(r.status == 404 and "code" in r.json()["error"], "deskbox's own routes keep deskbox's shape")
        t.eq(len(srv.request("GET", "/v1/sandboxes").json()["sandboxes"]), len(before),
             "no sandbox is left after all of it")
        if t.failed:
            for line in srv.stderr().splitlines()[-30:]:
                t.diag("deskboxd: " + line)
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
