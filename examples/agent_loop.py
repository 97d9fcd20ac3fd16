#!/usr/bin/env python3
"""A computer-use agent loop against deskbox, for Anthropic's and OpenAI's
tool formats, with nothing but the standard library.

The model is scripted here (this example cannot call a real model API): each
step shows where the real call goes and what goes in and out of it.  Every
tool call the model makes is forwarded verbatim to deskbox's adapter, whose
answer is already the tool result the model expects.

    DESKBOX_URL=http://127.0.0.1:8080 DESKBOX_TOKEN=$(cat /var/lib/deskbox/token) \\
        python3 examples/agent_loop.py [anthropic|openai] [SANDBOX_ID]

Without a sandbox id it creates one (and deletes it at the end).
"""

import json
import os
import sys
import urllib.request

URL = os.environ.get("DESKBOX_URL", "http://127.0.0.1:8080").rstrip("/")
TOKEN = os.environ.get("DESKBOX_TOKEN", "")

# What the model is told about the screen; deskbox scales screenshots to it
# and maps the model's coordinates back to the real screen.
AGENT_DISPLAY = {"width": 1024, "height": 640}


def call(method, path, body=None):
    req = urllib.request.Request(URL + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + TOKEN,
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        data = r.read()
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


# ---- Anthropic: messages with the computer tool ----

ANTHROPIC_SCRIPT = [  # the tool_use inputs a model would send, in order
    {"action": "screenshot"},
    {"action": "left_click", "coordinate": [512, 320]},
    {"action": "type", "text": "hello from the agent ✓"},
    {"action": "key", "text": "ctrl+a"},
    {"action": "scroll", "coordinate": [512, 320], "scroll_direction": "down",
     "scroll_amount": 3},
    {"action": "zoom", "region": [0, 0, 512, 320]},
]


def anthropic_loop(sid):
    tools = [{"type": "computer_20250124", "name": "computer",
              "display_width_px": AGENT_DISPLAY["width"],
              "display_height_px": AGENT_DISPLAY["height"]}]
    messages = [{"role": "user", "content": "Type a greeting into the focused window."}]
    for step, tool_input in enumerate(ANTHROPIC_SCRIPT):
        # Real agent: response = POST https://api.anthropic.com/v1/messages
        #   {"model": ..., "tools": tools, "messages": messages,
        #    "betas": ["computer-use-2025-01-24"]}
        # and take the tool_use block from response["content"].
        tool_use = {"type": "tool_use", "id": "toolu_%02d" % step, "name": "computer",
                    "input": tool_input}
        messages.append({"role": "assistant", "content": [tool_use]})
        result = call("POST", "/v1/sandboxes/%s/desktop/anthropic" % sid,
                      dict(tool_use["input"], agent_display=AGENT_DISPLAY))
        print("model ->", short(tool_input))
        print("deskbox <-", short(result))
        content = result.get("content") or [{"type": "text", "text": result.get("output", "")}]
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tool_use["id"], "content": content}]})
    return messages, tools


# ---- OpenAI: responses with the computer_use_preview tool ----

OPENAI_SCRIPT = [  # the computer_call actions a model would send, in order
    {"type": "screenshot"},
    {"type": "click", "button": "left", "x": 512, "y": 320},
    {"type": "type", "text": "hello from the agent ✓"},
    {"type": "keypress", "keys": ["CTRL", "A"]},
    {"type": "scroll", "x": 512, "y": 320, "scroll_x": 0, "scroll_y": 300},
    {"type": "drag", "path": [{"x": 100, "y": 100}, {"x": 200, "y": 150}]},
    {"type": "wait"},
]


def openai_loop(sid):
    tools = [{"type": "computer_use_preview", "display_width": AGENT_DISPLAY["width"],
              "display_height": AGENT_DISPLAY["height"], "environment": "linux"}]
    inputs = [{"role": "user", "content": "Type a greeting into the focused window."}]
    for step, action in enumerate(OPENAI_SCRIPT):
        # Real agent: response = POST https://api.openai.com/v1/responses
        #   {"model": "computer-use-preview", "tools": tools, "input": inputs,
        #    "truncation": "auto", "previous_response_id": ...}
        # and take the item of type "computer_call" from response["output"].
        item = {"type": "computer_call", "id": "cu_%02d" % step, "call_id": "call_%02d" % step,
                "action": action, "pending_safety_checks": [], "status": "completed"}
        out = call("POST", "/v1/sandboxes/%s/desktop/openai" % sid,
                   dict(item, agent_display=AGENT_DISPLAY))
        print("model ->", short(action))
        print("deskbox <-", short(out))
        out.pop("frame", None)
        inputs.append(out)  # the computer_call_output for the next request
    return inputs, tools


def main():
    flavour = sys.argv[1] if len(sys.argv) > 1 else "anthropic"
    sid = sys.argv[2] if len(sys.argv) > 2 else None
    own = sid is None
    if own:
        sid = call("POST", "/v1/sandboxes", {"agent_display": AGENT_DISPLAY})["id"]
    try:
        # Something to type into.
        call("POST", "/v1/sandboxes/%s/desktop/launch" % sid,
             {"argv": ["xterm", "-geometry", "80x20+100+100"]})
        if flavour == "openai":
            openai_loop(sid)
        else:
            anthropic_loop(sid)
    finally:
        if own:
            call("DELETE", "/v1/sandboxes/" + sid)


if __name__ == "__main__":
    main()
