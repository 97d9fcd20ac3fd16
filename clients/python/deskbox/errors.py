"""Exceptions: every error answer of deskboxd becomes a DeskboxError
carrying the HTTP status and the server's {"error":{"code","message"}}."""

from typing import Dict, Type


class DeskboxError(Exception):
    """An error from deskboxd (or reaching it: status 0, code "unavailable")."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__("%s: %s (HTTP %d)" % (code, message, status) if status
                         else "%s: %s" % (code, message))
        self.status = status
        self.code = code
        self.message = message


class InvalidArgument(DeskboxError):
    """400: the request was wrong; the message names the field."""


class Unauthorized(DeskboxError):
    """401: no token or a wrong one."""


class Forbidden(DeskboxError):
    """403: the sandbox's user may not (files), or read-only."""


class NotFound(DeskboxError):
    """404: no such sandbox, file, process or route."""


class Conflict(DeskboxError):
    """409: the sandbox is in the wrong state (e.g. stopped)."""


class LimitExceeded(DeskboxError):
    """429: a configured cap was reached."""


class ServerError(DeskboxError):
    """5xx, or no answer at all (status 0)."""


_BY_STATUS: Dict[int, Type[DeskboxError]] = {
    400: InvalidArgument,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    429: LimitExceeded,
}


def error_for(status: int, code: str, message: str) -> DeskboxError:
    """The most specific exception class for an answer."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 or status == 0 else DeskboxError
    return cls(status, code, message)
