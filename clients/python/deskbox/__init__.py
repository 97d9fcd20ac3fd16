"""deskbox: a Python client for deskboxd, the computer-use desktop sandbox
server.  Standard library only.

    from deskbox import Deskbox
    with Deskbox().create(display=(1280, 800)) as sbx:
        png = sbx.desktop.screenshot()
        print(sbx.process.exec(["uname", "-a"]).stdout)
"""

from .client import Deskbox, Sandbox
from .desktop import Desktop
from .errors import (Conflict, DeskboxError, Forbidden, InvalidArgument, LimitExceeded,
                     NotFound, ServerError, Unauthorized)
from .files import Files
from .images import BuildFailed, Images
from .process import ExecResult, OutputEvent, Process
from .sessions import Session, SessionResult, Sessions, Terminals

__version__ = "0.1.0"

__all__ = ["Deskbox", "Sandbox", "Desktop", "Process", "Files", "ExecResult", "OutputEvent",
           "Sessions", "Session", "SessionResult", "Terminals",
           "DeskboxError", "InvalidArgument", "Unauthorized", "Forbidden", "NotFound",
           "Conflict", "LimitExceeded", "ServerError", "Images", "BuildFailed"]
