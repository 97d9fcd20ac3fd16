#!/usr/bin/env python3
"""A computer-use agent loop against deskbox, for Anthropic's and OpenAI's
tool formats, with nothing but the standard library.

With ANTHROPIC_API_KEY (or OPENAI_API_KEY) set it calls the model over its
HTTP API (Anthropic's Messages API with the computer tool, OpenAI's
Responses API with computer_use_preview) and loops until the model stops
asking for actions.  Every tool call the model makes is forwarded verbatim
to deskbox's adapter, whose answer is already the tool result the model
expects (Anthropic: a tool_result block; OpenAI: the items of
`?items=true`), and goes back to the model as is.

Without a key nothing leaves the machine: a scripted conversation stands in
for the model (the tool calls a model would make, in order), through the
same adapters.  `--scripted` forces that with a key set too.

The task: a terminal is opened, the model clicks into it and types a
command that writes a file; the file is then checked through the files
API.  Exit status 0 only when the file is right.

    DESKBOX_URL=http://127.0.0.1:8080 DESKBOX_TOKEN=$(cat /var/lib/deskbox/token) \\
        python3 examples/agent_loop.py [anthropic|openai] [SANDBOX_ID] [--scripted]

Without a sandbox id it creates one (and deletes it at the end).  The
model's endpoints: ANTHROPIC_BASE_URL (default https://api.anthropic.com),
ANTHROPIC_MODEL (default claude-sonnet-4-5); OPENAI_BASE_URL (default
https://api.openai.com/v1), OPENAI_MODEL (default computer-use-preview);
DESKBOX_AGENT_MAX_STEPS (default 30) bounds the loop.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

URL = os.environ.get("DESKBOX_URL", "http://127.0.0.1:8080").rstrip("/")
TOKEN = os.environ.get("DESKBOX_TOKEN", "")

# What the model is told about the screen; deskbox scales screenshots to it
# and maps the model's coordinates back to the real screen.
AGENT_DISPLAY = {"width": 1024, "height": 640}


def call(method, path, body=None, raw=False):
    req = urllib.request.Request(URL + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + TOKEN,
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        data = r.read()
        if raw:
            return data
        return json.loads(data) if data else None


def short(obj):
    """The JSON with long base64 strings cut, for printing."""
    s = json.dumps(obj, ensure_ascii=False)
    while True:
        i = s.find("iVBOR")
        if i < 0:
            return s
        j = s.find('"', i)
        s = s[:i] + "<png base64, %d chars>" % (j - i) + s[j:]


def open_terminal(sid):
    """The model's first step in a real task would be finding a terminal;
    here it is launched and its window's middle (in the model's
    coordinates) is where the model clicks."""
    win = call("POST", "/v1/sandboxes/%s/desktop/launch" % sid,
               {"argv": ["xterm", "-geometry", "80x20+100+100"], "timeout_ms": 20000,
                "agent_display": AGENT_DISPLAY})["window"]
    if not win:
        raise SystemExit("the terminal did not open")
    return win["x"] + win["width"] // 2, win["y"] + win["height"] // 2


# ---- Anthropic: messages with the computer tool ----

def anthropic_script(x, y, path, word):
    return [  # the tool_use inputs a model would send, in order
        {"action": "screenshot"},
        {"action": "left_click", "coordinate": [x, y]},
        {"action": "type", "text": "echo %s > %s" % (word, path)},
        {"action": "key", "text": "Return"},
        {"action": "wait", "duration": 0.5},
        {"action": "zoom", "region": [x - 200, y - 100, x + 200, y + 100]},
    ]


def anthropic_loop(sid, script):
    tools = [{"type": "computer_20250124", "name": "computer",
              "display_width_px": AGENT_DISPLAY["width"],
              "display_height_px": AGENT_DISPLAY["height"]}]
    messages = [{"role": "user", "content": "Write a greeting into a file from a terminal."}]
    for step, tool_input in enumerate(script):
        # With a key, anthropic_model_loop below takes the tool_use blocks
        # from the answer of POST {ANTHROPIC_BASE_URL}/v1/messages.
        tool_use = {"type": "tool_use", "id": "toolu_%02d" % step, "name": "computer",
                    "input": tool_input}
        messages.append({"role": "assistant", "content": [tool_use]})
        result = call("POST", "/v1/sandboxes/%s/desktop/anthropic" % sid,
                      dict(tool_use, agent_display=AGENT_DISPLAY))
        print("model ->", short(tool_input))
        print("deskbox <-", short(result))
        if result.get("is_error"):
            raise SystemExit("the action failed: %s" % short(result))
        messages.append({"role": "user", "content": [result]})  # the tool_result as is
    return messages, tools


# ---- OpenAI: responses with the computer-use tool ----

def openai_script(x, y, path, word):
    return [  # the computer_call actions a model would send, in order
        {"type": "screenshot"},
        {"type": "click", "button": "left", "x": x, "y": y},
        # a batched call: several actions, one screenshot after them
        [{"type": "type", "text": "echo %s > %s" % (word, path)},
         {"type": "keypress", "keys": ["ENTER"]}],
        {"type": "wait"},
    ]


def openai_loop(sid, script):
    tools = [{"type": "computer_use_preview", "display_width": AGENT_DISPLAY["width"],
              "display_height": AGENT_DISPLAY["height"], "environment": "linux"}]
    inputs = [{"role": "user", "content": "Write a greeting into a file from a terminal."}]
    for step, action in enumerate(script):
        # With a key, openai_model_loop below takes the computer_call items
        # from the answer of POST {OPENAI_BASE_URL}/responses.
        item = {"type": "computer_call", "id": "cu_%02d" % step, "call_id": "call_%02d" % step,
                "pending_safety_checks": [], "status": "completed"}
        item["actions" if isinstance(action, list) else "action"] = action
        out = call("POST", "/v1/sandboxes/%s/desktop/openai" % sid,
                   dict(item, agent_display=AGENT_DISPLAY))
        print("model ->", short(action))
        print("deskbox <-", short(out))
        if out.get("status") == "incomplete":
            raise SystemExit("the action failed")
        inputs.append(out)  # the computer_call_output for the next request
    return inputs, tools


def check_file(sid, path, want, timeout=20):
    """The file the typed command wrote, through the files API."""
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        try:
            got = call("GET", "/v1/sandboxes/%s/files/download?path=%s"
                       % (sid, urllib.parse.quote(path)), raw=True).decode()
            if got == want:
                return got
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
        time.sleep(0.2)
    return got


def model_call(url, headers, body):
    """One POST to the model's API; its JSON answer.  An HTTP error ends
    the run with the API's own message."""
    req = urllib.request.Request(url, method="POST", data=json.dumps(body).encode(),
                                 headers=dict(headers, **{"Content-Type": "application/json"}))
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise SystemExit("the model's API answered %d: %s"
                         % (e.code, e.read().decode(errors="replace")[:2000]))


def max_steps():
    return int(os.environ.get("DESKBOX_AGENT_MAX_STEPS", "30"))


def anthropic_model_loop(sid, task):
    """Messages API: the assistant's content goes back as it came, every
    tool_use block to deskbox's adapter, its tool_result blocks back as
    the next user turn; the loop ends when a turn has no tool_use."""
    base = os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com").rstrip("/")
    headers = {"x-api-key": os.environ["ANTHROPIC_API_KEY"],
               "anthropic-version": "2023-06-01",
               "anthropic-beta": "computer-use-2025-01-24"}
    tools = [{"type": "computer_20250124", "name": "computer",
              "display_width_px": AGENT_DISPLAY["width"],
              "display_height_px": AGENT_DISPLAY["height"]}]
    messages = [{"role": "user", "content": task}]
    for _ in range(max_steps()):
        resp = model_call(base + "/v1/messages", headers,
                          {"model": os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5"),
                           "max_tokens": 1024, "tools": tools, "messages": messages})
        content = resp.get("content") or []
        messages.append({"role": "assistant", "content": content})
        results = []
        for block in content:
            if block.get("type") == "text":
                print("model says:", block.get("text"))
            if block.get("type") != "tool_use":
                continue
            result = call("POST", "/v1/sandboxes/%s/desktop/anthropic" % sid,
                          dict(block, agent_display=AGENT_DISPLAY))
            print("model ->", short(block.get("input")))
            print("deskbox <-", short(result))
            results.append(result)
        if not results:
            print("the model stopped (%s)" % resp.get("stop_reason"))
            return messages
        messages.append({"role": "user", "content": results})
    raise SystemExit("the model did not stop within %d steps" % max_steps())


def openai_model_loop(sid, task):
    """Responses API: every computer_call item to deskbox's adapter
    (`?items=true`: the output item, and a message saying why after a
    failed action), those items the next request's input, chained by
    previous_response_id; the loop ends when an answer has no call."""
    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
    headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    tools = [{"type": "computer_use_preview", "display_width": AGENT_DISPLAY["width"],
              "display_height": AGENT_DISPLAY["height"], "environment": "linux"}]
    inputs = [{"role": "user", "content": task}]
    previous = None
    for _ in range(max_steps()):
        body = {"model": os.environ.get("OPENAI_MODEL", "computer-use-preview"),
                "tools": tools, "input": inputs, "truncation": "auto"}
        if previous:
            body["previous_response_id"] = previous
        resp = model_call(base + "/responses", headers, body)
        previous = resp.get("id")
        inputs = []
        for item in resp.get("output") or []:
            if item.get("type") == "message":
                for part in item.get("content") or []:
                    print("model says:", part.get("text"))
            if item.get("type") != "computer_call":
                continue
            try:
                out = call("POST", "/v1/sandboxes/%s/desktop/openai?items=true" % sid,
                           dict(item, agent_display=AGENT_DISPLAY))
            except urllib.error.HTTPError as e:
                # 409: pending safety checks; a real agent asks its user
                # and sends the call again with ?acknowledge_safety_checks=true.
                raise SystemExit("deskbox answered %d: %s" % (e.code, e.read().decode()[:500]))
            print("model ->", short(item.get("action") or item.get("actions")))
            print("deskbox <-", short(out))
            inputs += out
        if not inputs:
            print("the model stopped")
            return
    raise SystemExit("the model did not stop within %d steps" % max_steps())


def parse_args(argv):
    import argparse
    p = argparse.ArgumentParser(description="A computer-use agent loop against deskbox.")
    p.add_argument("flavour", nargs="?", choices=["anthropic", "openai"],
                   help="the tool format (default: the one whose API key is set, else anthropic)")
    p.add_argument("sandbox", nargs="?", help="a sandbox id (default: a new one, deleted after)")
    p.add_argument("--scripted", action="store_true",
                   help="the scripted conversation even with an API key set")
    p.add_argument("--word", help="what the command writes into the file")
    args = p.parse_args(argv)
    if args.flavour is None:
        args.flavour = "openai" if (os.environ.get("OPENAI_API_KEY")
                                    and not os.environ.get("ANTHROPIC_API_KEY")) else "anthropic"
    key = "ANTHROPIC_API_KEY" if args.flavour == "anthropic" else "OPENAI_API_KEY"
    args.model = not args.scripted and bool(os.environ.get(key))
    if not args.model and not args.scripted:
        print("no %s: a scripted conversation stands in for the model" % key)
    return args


def main():
    args = parse_args(sys.argv[1:])
    flavour, sid = args.flavour, args.sandbox
    own = sid is None
    if own:
        sid = call("POST", "/v1/sandboxes", {"agent_display": AGENT_DISPLAY})["id"]
    word = args.word or "hello-from-%s-%d" % (flavour, os.getpid())
    path = "/workspace/agent-%s.txt" % flavour
    task = ("A terminal window is open on the screen. Click into it, type the command "
            "`echo %s > %s` and press Enter. Then stop." % (word, path))
    try:
        x, y = open_terminal(sid)
        if args.model:
            print("task:", task)
            (anthropic_model_loop if flavour == "anthropic" else openai_model_loop)(sid, task)
        elif flavour == "openai":
            openai_loop(sid, openai_script(x, y, path, word))
        else:
            anthropic_loop(sid, anthropic_script(x, y, path, word))
        got = check_file(sid, path, word + "\n")
        print("file %s: %r" % (path, got))
        if got != word + "\n":
            raise SystemExit("the file is not right: %r" % got)
        print("done: the file holds what the agent typed")
    finally:
        if own:
            call("DELETE", "/v1/sandboxes/" + sid)


if __name__ == "__main__":
    main()
