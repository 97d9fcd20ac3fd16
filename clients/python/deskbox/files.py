"""Files of a sandbox, streamed both ways.  Relative paths are in
/workspace."""

import json
import os
from typing import IO, Any, Dict, List, Optional, Union

from ._http import Transport

_CHUNK = 1 << 20


class Files:
    def __init__(self, transport: Transport, base: str) -> None:
        self._t = transport
        self._base = base + "/files"

    def upload(self, path: str, data: Union[bytes, str, IO[bytes]], parents: bool = True,
               mode: Optional[int] = None) -> Dict[str, Any]:
        """Writes bytes, text or a binary file object (streamed, never read
        whole) to path; returns {"path", "size", "sha256"}."""
        headers = {"Content-Type": "application/octet-stream"}
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            size = _remaining(data)
            if size is not None:
                headers["Content-Length"] = str(size)
        q = {"path": path, "parents": parents or None,
             "mode": None if mode is None else "%o" % mode}
        conn, resp = self._t.open("PUT", self._base + "/upload", query=q, body=data,
                                  headers=headers)
        try:
            return json.loads(resp.read().decode("utf-8"))
        finally:
            conn.close()

    def download(self, path: str) -> bytes:
        """The whole file in memory; for large files use download_to."""
        return self._t.request("GET", self._base + "/download", query={"path": path})

    def download_to(self, path: str, fileobj: IO[bytes]) -> int:
        """Streams the file into fileobj; returns the number of bytes."""
        conn, resp = self._t.open("GET", self._base + "/download", query={"path": path})
        total = 0
        try:
            while True:
                block = resp.read(_CHUNK)
                if not block:
                    return total
                fileobj.write(block)
                total += len(block)
        finally:
            conn.close()

    def list(self, path: str = "/workspace") -> List[Dict[str, Any]]:
        return self._t.json("GET", self._base + "/list", query={"path": path})["entries"]

    def stat(self, path: str) -> Dict[str, Any]:
        return self._t.json("GET", self._base + "/stat", query={"path": path})

    def exists(self, path: str) -> bool:
        from .errors import NotFound
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def mkdir(self, path: str, parents: bool = False) -> Dict[str, Any]:
        return self._t.json("POST", self._base + "/mkdir", body={"path": path, "parents": parents})

    def move(self, src: str, dst: str) -> Dict[str, Any]:
        return self._t.json("POST", self._base + "/move", body={"from": src, "to": dst})

    def delete(self, path: str, recursive: bool = False) -> None:
        self._t.request("DELETE", self._base, query={"path": path,
                                                     "recursive": recursive or None})


def _remaining(f: IO[bytes]) -> Optional[int]:
    """Bytes left in a seekable file object (so the upload has a
    Content-Length), None when it cannot tell (then it is sent chunked)."""
    try:
        pos = f.tell()
    except (OSError, AttributeError, ValueError):
        return None
    try:
        return os.fstat(f.fileno()).st_size - pos
    except (OSError, AttributeError, ValueError):
        pass
    try:
        end = f.seek(0, os.SEEK_END)
        f.seek(pos)
        return end - pos
    except (OSError, AttributeError, ValueError):
        return None
