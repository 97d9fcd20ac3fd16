"""HTTP to deskboxd with http.client: JSON requests, streamed bodies both
ways, and server-sent events.  Requests whose answer is read whole reuse
one kept-alive connection per thread (a new connection costs ~0.5-1 ms on
loopback); streams get their own.  So a Sandbox may be used from several
threads."""

import http.client
import json
import os
import threading
import time
import urllib.parse
from typing import IO, Any, Dict, Iterator, Mapping, Optional, Tuple, Union

from .errors import DeskboxError, error_for

Body = Union[None, bytes, Mapping[str, Any], IO[bytes]]

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 300.0
# deskboxd closes a kept-alive connection idle for its --header-timeout
# (10 s by default); a connection idle for longer than this is not reused.
IDLE_REUSE_S = 4.0
# What a reused connection that the server had closed raises on use; the
# request then goes again on a new one (it was not processed).
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class Transport:
    def __init__(self, url: Optional[str], token: Optional[str],
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url = (url or os.environ.get("DESKBOX_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get("DESKBOX_TOKEN")
        self.timeout = timeout
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("deskbox url must be http(s)://host[:port], not %r" % self.url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._idle = threading.local()  # .conn, .since: this thread's kept one

    def _connect(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=timeout or self.timeout)

    def _take_idle(self, timeout: Optional[float]) -> Optional[http.client.HTTPConnection]:
        conn = getattr(self._idle, "conn", None)
        self._idle.conn = None
        if conn is not None and time.monotonic() - self._idle.since > IDLE_REUSE_S:
            conn.close()
            conn = None
        if conn is not None:
            conn.timeout = timeout or self.timeout
            if conn.sock is not None:
                conn.sock.settimeout(conn.timeout)
        return conn

    def _keep(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        """After an answer read whole: this thread's idle connection."""
        if resp.will_close:
            conn.close()
            return
        old = getattr(self._idle, "conn", None)
        if old is not None:
            old.close()
        self._idle.conn, self._idle.since = conn, time.monotonic()

    def open(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None,
             body: Body = None, headers: Optional[Dict[str, str]] = None,
             timeout: Optional[float] = None, reuse: bool = False
             ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends a request and returns the connection and the response,
        whose body the caller reads (and then closes the connection).  With
        `reuse`, on this thread's kept-alive connection when it has one.
        Error answers are raised as DeskboxError."""
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if query:
            q = {k: (("1" if v else "0") if isinstance(v, bool) else str(v))
                 for k, v in query.items() if v is not None}
            path += "?" + urllib.parse.urlencode(q)
        data: Any = body
        if isinstance(body, Mapping):
            data = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        elif body is None and method in ("POST", "PUT"):
            data = b""
        kept = self._take_idle(timeout) if reuse and not hasattr(data, "read") else None
        conn = kept or self._connect(timeout)
        try:
            chunked = hasattr(data, "read") and "Content-Length" not in h
            try:
                resp = _send(conn, method, self._prefix + path, data, h, chunked)
            except STALE:
                if not kept:
                    raise
                conn.close()
                conn = self._connect(timeout)
                resp = _send(conn, method, self._prefix + path, data, h, False)
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise error_for(0, "unavailable", "cannot reach %s: %s" % (self.url, e)) from None
        if resp.status >= 300:
            raw = resp.read(65536)
            if reuse and resp.isclosed():
                self._keep(conn, resp)
            else:
                conn.close()
            raise _answer_error(resp.status, raw)
        return conn, resp

    def request(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None,
                body: Body = None, timeout: Optional[float] = None) -> bytes:
        conn, resp = self.open(method, path, query, body, timeout=timeout, reuse=True)
        try:
            data = resp.read()
        except BaseException:
            conn.close()
            raise
        self._keep(conn, resp)
        return data

    def json(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None,
             body: Body = None, timeout: Optional[float] = None) -> Any:
        data = self.request(method, path, query, body, timeout)
        return json.loads(data.decode("utf-8")) if data else None

    def events(self, path: str, body: Optional[Mapping[str, Any]],
               timeout: Optional[float] = None, method: str = "POST",
               query: Optional[Mapping[str, Any]] = None
               ) -> Iterator[Tuple[str, Dict[str, Any]]]:
        """Sends `body` (POST) or `query` (GET) and yields (event, data) of a
        text/event-stream as each event arrives.  Closing the generator
        closes the connection, which ends the run or watch on the server."""
        conn, resp = self.open(method, path, query, body=body,
                               headers={"Accept": "text/event-stream"}, timeout=timeout)
        try:
            event, data = "", []
            while True:
                line = resp.readline()
                if not line:
                    return
                text = line.decode("utf-8").rstrip("\r\n")
                if not text:
                    if data or event:
                        yield event or "message", json.loads("\n".join(data) or "null")
                    event, data = "", []
                elif text.startswith(":"):
                    continue
                else:
                    key, _, value = text.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if key == "event":
                        event = value
                    elif key == "data":
                        data.append(value)
        finally:
            conn.close()


def _send(conn: http.client.HTTPConnection, method: str, url: str, data: Any,
          headers: Dict[str, str], chunked: bool) -> http.client.HTTPResponse:
    """Sends the request and reads the answer's head.  The server may
    answer before it has read the whole body (a 507 for an upload past
    the sandbox's disk, a 413, a 401) and then close: sending the rest
    fails with a broken pipe, and that answer, already in the socket, is
    the one to report."""
    try:
        conn.request(method, url, body=data, headers=headers, encode_chunked=chunked)
    except (BrokenPipeError, ConnectionResetError):
        try:
            return conn.getresponse()
        except (OSError, http.client.HTTPException):
            pass
        raise
    return conn.getresponse()


def _answer_error(status: int, raw: bytes) -> DeskboxError:
    try:
        err = json.loads(raw.decode("utf-8"))["error"]
        return error_for(status, str(err["code"]), str(err["message"]))
    except (ValueError, KeyError, TypeError):
        return error_for(status, "http_%d" % status, raw[:200].decode("utf-8", "replace"))


def quote(segment: str) -> str:
    """One path segment (a sandbox id) escaped for a URL."""
    return urllib.parse.quote(segment, safe="")
