"""Runs in a sandbox: exec and code_run, whole or streamed."""

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._http import Transport

# How long past a run's own timeout the HTTP request may take.
_SLACK_S = 60.0


@dataclass
class ExecResult:
    """The result of a foreground exec or code_run."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    oom_killed: bool = False
    killed: bool = False
    truncated: bool = False
    duration_ms: int = 0
    result: Optional[str] = None  # code_run in a context: repr() of the last expression
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def stdout_bytes(self) -> bytes:
        """stdout exactly as written (the text form has U+FFFD for bytes that
        are not UTF-8)."""
        b64 = self.raw.get("stdout_b64")
        return base64.b64decode(b64) if b64 else self.stdout.encode("utf-8")

    @property
    def stderr_bytes(self) -> bytes:
        b64 = self.raw.get("stderr_b64")
        return base64.b64decode(b64) if b64 else self.stderr.encode("utf-8")

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "ExecResult":
        code = j.get("exit_code")
        return cls(exit_code=-1 if code is None else int(code), stdout=j.get("stdout", ""),
                   stderr=j.get("stderr", ""), timed_out=bool(j.get("timed_out")),
                   oom_killed=bool(j.get("oom_killed")), killed=bool(j.get("killed")),
                   truncated=bool(j.get("truncated")), duration_ms=int(j.get("duration_ms", 0)),
                   result=j.get("result"), raw=dict(j))


@dataclass
class OutputEvent:
    """One event of a streamed run: `type` is "stdout", "stderr" or
    "result"; output events carry `text` and the exact `data` bytes, the
    last event its `result`."""

    type: str
    text: str = ""
    data: bytes = b""
    result: Optional[ExecResult] = None


class Process:
    def __init__(self, transport: Transport, base: str) -> None:
        self._t = transport
        self._base = base + "/process"

    @staticmethod
    def _body(argv: Union[None, str, Sequence[str]], command: Optional[str],
              extra: Mapping[str, Any]) -> Dict[str, Any]:
        body: Dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
        if isinstance(argv, str):
            command, argv = argv, None
        if argv is not None:
            body["argv"] = list(argv)
        if command is not None:
            body["command"] = command
        if "argv" not in body and "command" not in body:
            raise ValueError("exec needs argv (a list) or command (a string)")
        return body

    @staticmethod
    def _timeout(timeout_s: Optional[float]) -> Optional[float]:
        return None if timeout_s is None else max(300.0, timeout_s + _SLACK_S)

    def exec(self, argv: Union[None, str, Sequence[str]] = None, *,
             command: Optional[str] = None, timeout_s: Optional[float] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
             stdin: Optional[str] = None, user: Optional[str] = None) -> ExecResult:
        """Runs argv (a list), or a string through /bin/sh -c, and waits.
        user="root": as the sandbox's root (its user namespace's)."""
        body = self._body(argv, command, {"timeout_s": timeout_s, "env": env, "cwd": cwd,
                                          "stdin": stdin, "user": user})
        j = self._t.json("POST", self._base + "/exec", body=body,
                         timeout=self._timeout(timeout_s))
        return ExecResult.from_json(j)

    def start(self, argv: Union[None, str, Sequence[str]] = None, *,
              command: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
              cwd: Optional[str] = None, stdin: bool = False,
              user: Optional[str] = None) -> int:
        """Starts a background run; returns its pid in the sandbox.  With
        stdin=True its stdin stays open for write_stdin."""
        body = self._body(argv, command, {"env": env, "cwd": cwd, "background": True,
                                          "stdin": True if stdin else None, "user": user})
        return int(self._t.json("POST", self._base + "/exec", body=body)["pid"])

    def write_stdin(self, pid: int, data: Union[bytes, str] = b"",
                    close: bool = False) -> Dict[str, Any]:
        """Writes data to the stdin of a run started with stdin=True (and
        closes it after, with close=True); returns {"pid", "written",
        "closed"} once the program took all of it."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        conn, resp = self._t.open("POST", "%s/%d/stdin" % (self._base, pid),
                                  query={"close": close or None}, body=data,
                                  headers={"Content-Type": "application/octet-stream"})
        try:
            return json.loads(resp.read().decode("utf-8"))
        finally:
            conn.close()

    def exec_stream(self, argv: Union[None, str, Sequence[str]] = None, *,
                    command: Optional[str] = None, timeout_s: Optional[float] = None,
                    env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                    stdin: Optional[str] = None,
                    user: Optional[str] = None) -> Iterator[OutputEvent]:
        """Like exec, yielding output as it arrives and the result last.
        Leaving the loop early kills the run."""
        body = self._body(argv, command, {"timeout_s": timeout_s, "env": env, "cwd": cwd,
                                          "stdin": stdin, "user": user})
        return self._stream("/exec", body, timeout_s)

    def code_run(self, code: str, language: str = "python", *, stream: bool = False,
                 timeout_s: Optional[float] = None, env: Optional[Mapping[str, str]] = None,
                 cwd: Optional[str] = None, stdin: Optional[str] = None,
                 context: Optional[str] = None, user: Optional[str] = None) -> Any:
        """Runs code with python3, bash or node.  Returns an ExecResult, or
        with stream=True an iterator of OutputEvent."""
        body = {k: v for k, v in {"code": code, "language": language, "timeout_s": timeout_s,
                                  "env": env, "cwd": cwd, "stdin": stdin,
                                  "context": context, "user": user}.items()
                if v is not None}
        if stream:
            return self._stream("/code_run", body, timeout_s)
        j = self._t.json("POST", self._base + "/code_run", body=body,
                         timeout=self._timeout(timeout_s))
        return ExecResult.from_json(j)

    def _stream(self, route: str, body: Dict[str, Any],
                timeout_s: Optional[float]) -> Iterator[OutputEvent]:
        # The server sends a keepalive every 15 s, so a socket timeout above
        # that only fires when it is gone.
        for name, data in self._t.events(self._base + route + "?stream=1", body, timeout=60.0):
            if name in ("stdout", "stderr"):
                b64 = data.get("data_b64")
                text = data.get("data", "")
                yield OutputEvent(name, text, base64.b64decode(b64) if b64 else text.encode())
            elif name == "result":
                yield OutputEvent("result", result=ExecResult.from_json(data))

    def status(self, pid: int) -> Dict[str, Any]:
        return self._t.json("GET", "%s/%d" % (self._base, pid))

    def kill(self, pid: int) -> Dict[str, Any]:
        return self._t.json("POST", "%s/%d/kill" % (self._base, pid))

    def logs(self, pid: int) -> Dict[str, Any]:
        return self._t.json("GET", "%s/%d/logs" % (self._base, pid))

    def contexts(self) -> List[Dict[str, Any]]:
        return self._t.json("GET", self._base + "/contexts")["contexts"]

    def create_context(self, language: str = "python") -> str:
        """A persistent interpreter; pass its id as code_run(context=...)."""
        return self._t.json("POST", self._base + "/contexts", body={"language": language})["id"]
