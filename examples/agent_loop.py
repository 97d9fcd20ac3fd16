#!/usr/bin/env python3
"""A computer-use agent loop against deskbox, for Anthropic's and OpenAI's
tool formats, with nothing but the standard library.

The model is scripted here (this example cannot call a real model API): each
step shows where the real call goes and what goes in and out of it.  Every
tool call the model makes is forwarded verbatim to deskbox's adapter, whose
answer is already the tool result the model expects (Anthropic: a
tool_result block; OpenAI: a computer_call_output item).

The task: open a terminal, click into it, type a command that writes a file,
and check the file's content through the files API.  Exit status 0 only when
the file is right.

    DESKBOX_URL=http://127.0.0.1:8080 DESKBOX_TOKEN=$(cat /var/lib/deskbox/token) \\
        python3 examples/agent_loop.py [anthropic|openai] [SANDBOX_ID]

Without a sandbox id it creates one (and deletes it at the end).
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
        # Real agent: response = POST https://api.anthropic.com/v1/messages
        #   {"model": ..., "tools": tools, "messages": messages,
        #    "betas": ["computer-use-2025-01-24"]}
        # and take the tool_use block from response["content"].
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
        # Real agent: response = POST https://api.openai.com/v1/responses
        #   {"model": "computer-use-preview", "tools": tools, "input": inputs,
        #    "truncation": "auto", "previous_response_id": ...}
        # and take the item of type "computer_call" from response["output"].
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


def main():
    flavour = sys.argv[1] if len(sys.argv) > 1 else "anthropic"
    sid = sys.argv[2] if len(sys.argv) > 2 else None
    own = sid is None
    if own:
        sid = call("POST", "/v1/sandboxes", {"agent_display": AGENT_DISPLAY})["id"]
    word = "hello-from-%s-%d" % (flavour, os.getpid())
    path = "/workspace/agent-%s.txt" % flavour
    try:
        x, y = open_terminal(sid)
        if flavour == "openai":
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
