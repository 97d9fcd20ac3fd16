"""Files of a sandbox, streamed both ways.  Relative paths are in
/workspace."""

import json
import os
from typing import IO, Any, Dict, Iterator, List, Optional, Sequence, Union

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
        q = {"path": path, "parents": parents or None,
             "mode": None if mode is None else "%o" % mode}
        return self._put("/upload", q, data)

    def _put(self, route: str, query: Dict[str, Any],
             data: Union[bytes, str, IO[bytes]]) -> Dict[str, Any]:
        headers = {"Content-Type": "application/octet-stream"}
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            size = _remaining(data)
            if size is not None:
                headers["Content-Length"] = str(size)
        conn, resp = self._t.open("PUT", self._base + route, query=query, body=data,
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
        return self._get_to("/download", {"path": path}, fileobj)

    def archive_download(self, path: str, format: str = "tar") -> bytes:
        """The directory as a tar, tar.gz or zip archive, in memory; for
        large trees use archive_download_to."""
        return self._t.request("GET", self._base + "/archive",
                               query={"path": path, "format": format})

    def archive_download_to(self, path: str, fileobj: IO[bytes], format: str = "tar") -> int:
        """Streams the directory's archive into fileobj; returns its bytes."""
        return self._get_to("/archive", {"path": path, "format": format}, fileobj)

    def archive_upload(self, path: str, data: Union[bytes, IO[bytes]], format: str = "tar",
                       parents: bool = True) -> Dict[str, Any]:
        """Unpacks an archive (bytes or a binary file object, streamed) into
        the directory path, all or nothing; returns {"path", "members",
        "bytes"}."""
        return self._put("/archive", {"path": path, "format": format,
                                      "parents": parents or None}, data)

    def find(self, path: str = "/workspace", name: Optional[str] = None,
             max_depth: Optional[int] = None,
             max_results: Optional[int] = None) -> Dict[str, Any]:
        """Entries under path whose name matches the glob `name`:
        {"path", "entries": [{"path", "name", "type", ...}], "truncated"}."""
        return self._t.json("GET", self._base + "/find",
                            query={"path": path, "name": name, "max_depth": max_depth,
                                   "max_results": max_results})

    def search(self, path: str, pattern: str, regex: bool = False,
               ignore_case: bool = False, max_matches: Optional[int] = None,
               max_depth: Optional[int] = None) -> Dict[str, Any]:
        """Lines matching pattern in the files at or under path:
        {"path", "matches": [{"path", "line", "text"}], "truncated",
        "files_scanned"}."""
        return self._t.json("GET", self._base + "/search",
                            query={"path": path, "pattern": pattern, "regex": regex or None,
                                   "ignore_case": ignore_case or None,
                                   "max_matches": max_matches, "max_depth": max_depth})

    def replace(self, paths: Sequence[str], pattern: str, replacement: str,
                regex: bool = False) -> Dict[str, Any]:
        """Replaces every match in each file: {"files": [{"path",
        "replacements"} or {"path", "error"}], "replacements"}."""
        return self._t.json("POST", self._base + "/replace",
                            body={"paths": list(paths), "pattern": pattern,
                                  "replacement": replacement, "regex": regex})

    def chmod(self, path: str, mode: Union[int, str]) -> Dict[str, Any]:
        """Sets the permission bits (0o644 or "0644"); returns the stat."""
        return self._t.json("POST", self._base + "/chmod", body={"path": path, "mode": mode})

    def watch(self, path: str = "/workspace", recursive: bool = False,
              timeout_s: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """Yields the directory's changes as they happen: dicts with
        "event" ("ready" first, then "create", "modify", "move", "delete",
        "overflow", "end") and the event's fields.  Leaving the loop ends
        the watch."""
        q = {"path": path, "recursive": recursive or None, "timeout_s": timeout_s}
        # A keepalive comes every 5 s, so a socket timeout fires only when
        # the server is gone.
        for name, data in self._t.events(self._base + "/watch", None, timeout=60.0,
                                         method="GET", query=q):
            ev = dict(data) if isinstance(data, dict) else {}
            ev["event"] = name
            yield ev
            if name == "end":
                return

    def _get_to(self, route: str, query: Dict[str, Any], fileobj: IO[bytes]) -> int:
        conn, resp = self._t.open("GET", self._base + route, query=query)
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
