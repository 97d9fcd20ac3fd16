"""Stored images (docs/images.md): list, get, delete, import an OCI layout,
and build one from a Dockerfile with its log."""

import io
import os
import tarfile
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from ._http import Transport, quote


class BuildFailed(Exception):
    """A Dockerfile build that ran and failed: `error` (the step, its exit
    status, its last output line), `log` (the whole build log), `image`
    (its status as GET /v1/images/{name} answers)."""

    def __init__(self, name: str, image: Dict[str, Any], log: str) -> None:
        self.error = image.get("error", image.get("status", ""))
        super().__init__("the build of image %r failed: %s" % (name, self.error))
        self.image = image
        self.log = log


def _context_tar(context: Union[str, bytes]) -> bytes:
    """A directory as a tar (its contents at the top), or a tar as is."""
    if isinstance(context, bytes):
        return context
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for entry in sorted(os.listdir(context)):
            tf.add(os.path.join(context, entry), arcname=entry)
    return buf.getvalue()


class Images:
    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def list(self) -> List[Dict[str, Any]]:
        return self._t.json("GET", "/v1/images")["images"]

    def get(self, name: str) -> Dict[str, Any]:
        return self._t.json("GET", "/v1/images/" + quote(name))

    def delete(self, name: str) -> None:
        self._t.request("DELETE", "/v1/images/" + quote(name))

    def import_oci(self, name: str, layout: Optional[str] = None,
                   archive: Optional[str] = None, ref: Optional[str] = None) -> Dict[str, Any]:
        """An OCI layout directory (or a tar of one) on deskboxd's host."""
        body = {"name": name, "oci_layout": layout, "oci_archive": archive, "ref": ref}
        return self._t.json("POST", "/v1/images",
                            body={k: v for k, v in body.items() if v is not None})

    def build(self, name: str, dockerfile: str, context: Union[str, bytes, None] = None,
              args: Optional[Mapping[str, str]] = None,
              on_log: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
        """Builds image `name` from `dockerfile` (its text) with `context` (a
        local directory, or the bytes of a tar) and `args` (the ARGs'
        values); `on_log` gets the log as it streams.  Returns the image's
        manifest; raises BuildFailed when the build ran and failed, and
        InvalidArgument / NotFound for a refused Dockerfile or FROM."""
        if context is not None:
            self._t.request("PUT", "/v1/images/%s/context" % quote(name),
                            body=_context_tar(context))
        body: Dict[str, Any] = {"name": name, "dockerfile": dockerfile}
        if args:
            body["args"] = dict(args)
        self._t.json("POST", "/v1/images", body=body)
        conn, resp = self._t.open("GET", "/v1/images/%s/build" % quote(name))
        chunks = []
        try:
            while True:
                piece = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
                if not piece:
                    break
                text = piece.decode("utf-8", errors="replace")
                chunks.append(text)
                if on_log:
                    on_log(text)
        finally:
            conn.close()
        image = self.get(name)
        if image.get("status") != "ready":
            raise BuildFailed(name, image, "".join(chunks))
        return image
