"""Shell sessions that keep their state between commands, and terminals
(the WebSocket itself is for a browser or a terminal client, not here)."""

import json
from typing import Any, Dict, List, Mapping, Optional

from ._http import Transport, quote
from .errors import NotFound
from .process import ExecResult

# How long past a command's own timeout the HTTP request may take.
_SLACK_S = 60.0


class SessionResult(ExecResult):
    """An ExecResult plus session_restarted (the shell was started afresh:
    a timeout, or the command ended it)."""

    @property
    def session_restarted(self) -> bool:
        return bool(self.raw.get("session_restarted"))


class Session:
    """One shell: `cd`, variables and functions last from one exec to the
    next.  `with sbx.sessions.create() as s:` closes it on exit."""

    def __init__(self, transport: Transport, base: str, info: Dict[str, Any]) -> None:
        self._t = transport
        self.info = info
        self.id: str = info["id"]
        self._base = base + "/" + quote(self.id)

    def __repr__(self) -> str:
        return "Session(id=%r)" % self.id

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def exec(self, command: str, timeout_s: Optional[float] = None) -> SessionResult:
        """Runs command in the session's shell and waits."""
        body: Dict[str, Any] = {"command": command}
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        timeout = None if timeout_s is None else max(300.0, timeout_s + _SLACK_S)
        j = self._t.json("POST", self._base + "/exec", body=body, timeout=timeout)
        return SessionResult.from_json(j)  # type: ignore[return-value]

    def close(self) -> None:
        """Kills the shell and everything it started."""
        try:
            self._t.request("DELETE", self._base)
        except NotFound:
            pass


class Sessions:
    def __init__(self, transport: Transport, base: str) -> None:
        self._t = transport
        self._base = base + "/sessions"

    def create(self, cwd: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None,
               user: Optional[str] = None) -> Session:
        body = {k: v for k, v in {"cwd": cwd, "env": dict(env) if env else None,
                                  "user": user}.items()
                if v is not None}
        return Session(self._t, self._base, self._t.json("POST", self._base, body=body))

    def list(self) -> List[Dict[str, Any]]:
        return list(self._t.json("GET", self._base)["sessions"])


class Terminals:
    def __init__(self, transport: Transport, base: str) -> None:
        self._t = transport
        self._base = base + "/terminals"

    def create(self, cols: Optional[int] = None, rows: Optional[int] = None,
               command: Optional[List[str]] = None, cwd: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None,
               user: Optional[str] = None) -> Dict[str, Any]:
        """Starts a program on a pseudo-terminal (default: a login shell);
        returns the terminal (its "id" for get/delete and the WebSocket)."""
        body = {k: v for k, v in {"cols": cols, "rows": rows,
                                  "command": list(command) if command else None,
                                  "cwd": cwd, "env": dict(env) if env else None,
                                  "user": user}.items()
                if v is not None}
        return self._t.json("POST", self._base, body=body)

    def list(self) -> List[Dict[str, Any]]:
        return list(self._t.json("GET", self._base)["terminals"])

    def get(self, tid: str) -> Dict[str, Any]:
        return self._t.json("GET", self._base + "/" + quote(tid))

    def delete(self, tid: str) -> Dict[str, Any]:
        """Kills the program and everything it started; returns its last state."""
        data = self._t.request("DELETE", self._base + "/" + quote(tid))
        return json.loads(data.decode("utf-8")) if data else {}
