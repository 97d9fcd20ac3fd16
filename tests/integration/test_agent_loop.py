"""examples/agent_loop.py with a model: a stand-in for Anthropic's Messages
API and OpenAI's Responses API, on loopback in this test, replays a
recorded tool-use conversation (data/agent_anthropic.json,
data/agent_openai.json: screenshot, click, type, key, then the model
stops).  The example is pointed at it by ANTHROPIC_BASE_URL /
OPENAI_BASE_URL with a key set, exactly as it would call the real APIs.

Checked: the requests carry what the APIs require (key, version headers,
the computer tool with the agent display); every tool call reached
deskbox's adapter and its result came back to the model unchanged in the
next request (a tool_result or computer_call_output for the very call,
with a PNG of the declared display size); the loop ends when the model
stops; the command the model typed arrived in the sandbox's xterm (the
file it writes, read through deskbox's files API); a key the API refuses
ends the run with the API's message; without a key the model is never
called."""

import base64
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
import dbx  # noqa: E402
from test_actions import Desk, warm_up  # noqa: E402

HERE = os.path.dirname(__file__)
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "agent_loop.py")
WORD = "replayed-conversation-ok"
KEY = "sk-test-stand-in-key"
DISPLAY = (1024, 640)


def load(name):
    with open(os.path.join(HERE, "data", name)) as f:
        return json.load(f)


def png_size(b64):
    try:
        info = dbx.png_info(base64.b64decode(b64))
        return info[0], info[1]
    except Exception as e:  # noqa: BLE001 (anything undecodable is a wrong result)
        return repr(e)


class StandIn:
    """The model's API on 127.0.0.1:<free port>: answers the recording's
    turn N to the request that carries N earlier turns, and writes down
    what is wrong with each request in `problems`."""

    def __init__(self):
        self.anthropic = load("agent_anthropic.json")
        self.openai = load("agent_openai.json")
        self.requests = []
        self.problems = []
        self.sizes = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stand_in.requests.append((self.path, body))
                status, answer = stand_in.answer(self.path, self.headers, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def problem(self, what):
        self.problems.append(what)

    def answer(self, path, headers, body):
        if path == "/v1/messages":
            if headers.get("x-api-key") != KEY:
                return 401, {"type": "error", "error": {"type": "authentication_error",
                                                        "message": "invalid x-api-key"}}
            return 200, self.anthropic_turn(headers, body)
        if path == "/v1/responses":
            if headers.get("Authorization") != "Bearer " + KEY:
                return 401, {"error": {"message": "Incorrect API key provided",
                                       "type": "invalid_request_error"}}
            return 200, self.openai_turn(body)
        self.problem("a request to %s" % path)
        return 404, {"error": "no such route"}

    def anthropic_turn(self, headers, body):
        if headers.get("anthropic-version") != "2023-06-01":
            self.problem("anthropic-version %r" % headers.get("anthropic-version"))
        tool = (body.get("tools") or [{}])[0]
        if (tool.get("type"), tool.get("display_width_px"), tool.get("display_height_px")) != \
                ("computer_20250124", DISPLAY[0], DISPLAY[1]):
            self.problem("tools %r" % body.get("tools"))
        msgs = body.get("messages") or []
        turn = sum(1 for m in msgs if m.get("role") == "assistant")
        if turn:
            before = self.anthropic[turn - 1]["content"]
            if msgs[-2] != {"role": "assistant", "content": before}:
                self.problem("turn %d: the assistant's content did not come back as sent" % turn)
            want = [b["id"] for b in before if b["type"] == "tool_use"]
            got = msgs[-1].get("content") or []
            if msgs[-1].get("role") != "user" or [r.get("tool_use_id") for r in got] != want \
                    or any(r.get("type") != "tool_result" or r.get("is_error") for r in got):
                self.problem("turn %d: results %s" % (turn, json.dumps(got)[:300]))
            for r in got:
                for c in r.get("content") or []:
                    if c.get("type") == "image":
                        self.sizes.append(png_size(c["source"]["data"]))
        return self.anthropic[min(turn, len(self.anthropic) - 1)]

    def openai_turn(self, body):
        tool = (body.get("tools") or [{}])[0]
        if (tool.get("type"), tool.get("display_width"), tool.get("display_height")) != \
                ("computer_use_preview", DISPLAY[0], DISPLAY[1]):
            self.problem("tools %r" % body.get("tools"))
        prev = body.get("previous_response_id")
        ids = [r["id"] for r in self.openai]
        turn = ids.index(prev) + 1 if prev in ids else 0
        if prev is not None and prev not in ids:
            self.problem("previous_response_id %r" % prev)
        if turn:
            want = [i["call_id"] for i in self.openai[turn - 1]["output"]
                    if i["type"] == "computer_call"]
            got = body.get("input") or []
            if [i.get("call_id") for i in got] != want or \
                    any(i.get("type") != "computer_call_output" or i.get("status") for i in got):
                self.problem("turn %d: input %s" % (turn, json.dumps(got)[:300]))
            for i in got:
                url = (i.get("output") or {}).get("image_url", "")
                self.sizes.append(png_size(url.partition("base64,")[2]))
        return self.openai[min(turn, len(self.openai) - 1)]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def run_example(srv, sid, env_extra, flavour, *opts):
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env.update(DESKBOX_URL="http://127.0.0.1:%d" % srv.port, DESKBOX_TOKEN=srv.token,
               **env_extra)
    p = subprocess.run([sys.executable, EXAMPLE, flavour, sid] + list(opts), env=env,
                       capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def check_flavour(t, srv, sid, si, flavour):
    rec = si.anthropic if flavour == "anthropic" else si.openai
    base = "http://127.0.0.1:%d" % si.port
    env = ({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": base} if flavour == "anthropic"
           else {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": base + "/v1"})
    del si.requests[:], si.problems[:], si.sizes[:]
    rc, out = run_example(srv, sid, env, flavour, "--word", WORD)
    t.ok(rc == 0 and "done: the file holds what the agent typed" in out,
         "%s: the example runs the model's conversation to its end" % flavour, out[-2500:])
    t.eq(len(si.requests), len(rec), "%s: one request per turn, none after the model stopped"
         % flavour)
    t.ok(not si.problems, "%s: every tool call's result went back to the model as deskbox "
         "answered it, for that call" % flavour, "\n".join(si.problems))
    t.eq(si.sizes, [DISPLAY] * (len(rec) - 1),
         "%s: each result holds a screenshot in the declared display size" % flavour)
    r = srv.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/agent-%s.txt"
                    % (sid, flavour))
    t.eq((r.status, r.body), (200, (WORD + "\n").encode()),
         "%s: the typed command arrived in the xterm (its file, through the files API)"
         % flavour)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    si = StandIn()
    try:
        sid = srv.create({})["id"]
        warm_up(Desk(srv, sid))
        for flavour in ("anthropic", "openai"):
            check_flavour(t, srv, sid, si, flavour)

        del si.requests[:]
        rc, out = run_example(srv, sid, {"ANTHROPIC_API_KEY": "sk-wrong",
                                         "ANTHROPIC_BASE_URL": "http://127.0.0.1:%d" % si.port},
                              "anthropic")
        t.ok(rc != 0 and "answered 401" in out and "invalid x-api-key" in out,
             "a refused key ends the run with the API's own message", out[-1500:])
        del si.requests[:]
        rc, out = run_example(srv, sid, {"ANTHROPIC_BASE_URL": "http://127.0.0.1:%d" % si.port},
                              "anthropic")
        t.ok(rc == 0 and "no ANTHROPIC_API_KEY" in out and not si.requests,
             "without a key the scripted conversation runs and the model is never called",
             out[-1500:])
    finally:
        si.close()
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
