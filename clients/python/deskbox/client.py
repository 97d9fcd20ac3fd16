"""Deskbox (the server) and Sandbox (one desktop sandbox)."""

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._http import Transport, quote
from .desktop import Desktop
from .errors import NotFound
from .files import Files
from .images import Images
from .process import Process
from .sessions import Sessions, Terminals

# Creating waits for the desktop to come up (seconds, usually well under one).
_CREATE_TIMEOUT_S = 180.0


class Sandbox:
    """One sandbox.  `with deskbox.create() as sbx:` deletes it on exit."""

    def __init__(self, transport: Transport, info: Dict[str, Any]) -> None:
        self._t = transport
        self.info = info
        self.id: str = info["id"]
        base = "/v1/sandboxes/" + quote(self.id)
        self._base = base
        self.desktop = Desktop(transport, base)
        self.process = Process(transport, base)
        self.files = Files(transport, base)
        self.sessions = Sessions(transport, base)
        self.terminals = Terminals(transport, base)

    def __repr__(self) -> str:
        return "Sandbox(id=%r, status=%r)" % (self.id, self.info.get("status"))

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete(missing_ok=True)

    @property
    def status(self) -> str:
        return str(self.info.get("status"))

    @property
    def name(self) -> Optional[str]:
        """Its name (usable in place of the id), or None."""
        n = self.info.get("name")
        return str(n) if n is not None else None

    @property
    def metadata(self) -> Dict[str, str]:
        return dict(self.info.get("metadata") or {})

    def refresh(self) -> "Sandbox":
        self.info = self._t.json("GET", self._base)
        return self

    def stop(self) -> "Sandbox":
        """Every process ends; every file stays."""
        self.info = self._t.json("POST", self._base + "/stop", timeout=_CREATE_TIMEOUT_S)
        return self

    def start(self) -> "Sandbox":
        self.info = self._t.json("POST", self._base + "/start", timeout=_CREATE_TIMEOUT_S)
        return self

    def set_network(self, network: Any) -> "Sandbox":
        """Changes the network policy: "none", "internet" or
        {"allow": [names, networks, "addr:port"]} (docs/network.md); a
        running sandbox gets it at once."""
        self.info = self._t.json("PUT", self._base + "/network", body={"network": network},
                                 timeout=_CREATE_TIMEOUT_S)
        return self

    def delete(self, missing_ok: bool = False) -> None:
        """Deletes the sandbox: every process, mount and file of it."""
        try:
            self._t.request("DELETE", self._base, timeout=_CREATE_TIMEOUT_S)
        except NotFound:
            if not missing_ok:
                raise

    def set_timeout(self, timeout_s: int) -> "Sandbox":
        """Its on_timeout happens timeout_s seconds from now (0: never)."""
        self.info = self._t.json("POST", self._base + "/timeout", body={"timeout_s": timeout_s})
        return self

    def set_limits(self, memory_mb: Optional[int] = None, pids_max: Optional[int] = None,
                   cpu_millis: Optional[int] = None) -> "Sandbox":
        """Changes its limits while it lives (cpu_millis 0: no CPU limit);
        a stopped sandbox gets them at its next start."""
        body = {k: v for k, v in (("memory_mb", memory_mb), ("pids_max", pids_max),
                                  ("cpu_millis", cpu_millis)) if v is not None}
        self.info = self._t.json("PATCH", self._base, body=body)
        return self

    def set_metadata(self, changes: Mapping[str, Optional[str]]) -> "Sandbox":
        """Merges `changes` into its metadata: a string sets a key, None
        removes it, keys not named stay."""
        self.info = self._t.json("PATCH", self._base, body={"metadata": dict(changes)})
        return self

    def pause(self) -> "Sandbox":
        """Freezes every process (memory kept, no CPU); see resume()."""
        self.info = self._t.json("POST", self._base + "/pause")
        return self

    def resume(self) -> "Sandbox":
        self.info = self._t.json("POST", self._base + "/resume")
        return self

    def checkpoint(self, name: str) -> Dict[str, Any]:
        """Captures the filesystem as checkpoint `name`; the desktop keeps running."""
        return self._t.json("POST", self._base + "/checkpoints", body={"name": name},
                            timeout=_CREATE_TIMEOUT_S)

    def checkpoints(self) -> List[Dict[str, Any]]:
        return list(self._t.json("GET", self._base + "/checkpoints")["checkpoints"])

    def restore(self, name: str) -> "Sandbox":
        """Rolls the filesystem back to checkpoint `name` (the desktop restarts)."""
        self.info = self._t.json("POST", self._base + "/checkpoints/%s/restore" % quote(name),
                                 timeout=_CREATE_TIMEOUT_S)
        return self

    def delete_checkpoint(self, name: str) -> None:
        self._t.request("DELETE", self._base + "/checkpoints/" + quote(name))

    def fork(self, checkpoint: Optional[str] = None, name: Optional[str] = None) -> "Sandbox":
        """A new, independent sandbox with this one's files (of `checkpoint`,
        or as they are now) and metadata; named `name`, else unnamed."""
        body = {k: v for k, v in (("checkpoint", checkpoint), ("name", name)) if v}
        info = self._t.json("POST", self._base + "/fork", body=body, timeout=_CREATE_TIMEOUT_S)
        return Sandbox(self._t, info)

    def vnc_url(self, view_only: bool = True, ttl_s: int = 3600) -> str:
        """A browser URL (noVNC) that shows this desktop, with a fresh
        viewer token; view_only=False lets the viewer take over."""
        j = self._t.json("POST", self._base + "/vnc/tokens",
                         body={"view_only": view_only, "ttl_s": ttl_s})
        return self._t.url + j["url"]

    def port_url(self, port: int, ttl_s: int = 3600) -> str:
        """A URL for 127.0.0.1:port inside the sandbox (an app, a dev
        server) that works in any browser without the API token, with a
        fresh share token for that port."""
        j = self._t.json("POST", "%s/ports/%d/tokens" % (self._base, int(port)),
                         body={"ttl_s": ttl_s})
        return self._t.url + j["url"]

    def cdp_url(self) -> str:
        """The endpoint for Playwright's connectOverCDP / puppeteer's
        browserURL (send the API token as a bearer header); start the
        browser first with desktop.browser()."""
        return self._t.url + self._base + "/browser/cdp"


def _size(v: Optional[Tuple[int, int]]) -> Optional[Dict[str, int]]:
    return None if v is None else {"width": int(v[0]), "height": int(v[1])}


class Deskbox:
    """A deskboxd server.  url and token default to $DESKBOX_URL
    (else http://127.0.0.1:8080) and $DESKBOX_TOKEN."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None,
                 timeout: float = 300.0) -> None:
        self._t = Transport(url, token, timeout)
        self.images = Images(self._t)

    @property
    def url(self) -> str:
        return self._t.url

    def create(self, display: Optional[Tuple[int, int]] = None,
               memory_mb: Optional[int] = None, env: Optional[Mapping[str, str]] = None,
               agent_display: Optional[Tuple[int, int]] = None,
               pids_max: Optional[int] = None, cpu_millis: Optional[int] = None,
               network: Any = None, name: Optional[str] = None,
               metadata: Optional[Mapping[str, str]] = None,
               read_only_root: Optional[bool] = None,
               root: Optional[bool] = None) -> Sandbox:
        """Creates a sandbox; returns once its desktop is up.  `network`:
        "none", "internet" or {"allow": [...]} (default: the server's).
        `name`: unique, usable in place of the id (Conflict, code
        "name_taken", when in use); `metadata`: string labels list() can
        filter on; `read_only_root`: all but /workspace, /tmp and the home
        directories read-only (docs/lifecycle.md); `root=False`: nothing
        runs as the sandbox's root (user="root" is a Conflict, code
        "root_disabled"; docs/security.md)."""
        body = {"display": _size(display), "agent_display": _size(agent_display),
                "memory_mb": memory_mb, "env": dict(env) if env else None,
                "pids_max": pids_max, "cpu_millis": cpu_millis, "network": network,
                "name": name, "metadata": dict(metadata) if metadata is not None else None,
                "read_only_root": read_only_root, "root": root}
        info = self._t.json("POST", "/v1/sandboxes",
                            body={k: v for k, v in body.items() if v is not None},
                            timeout=_CREATE_TIMEOUT_S)
        return Sandbox(self._t, info)

    def list(self, metadata: Optional[Mapping[str, str]] = None) -> List[Sandbox]:
        """Every sandbox; with `metadata`, those whose metadata has all of
        these keys with these values."""
        q = {"metadata." + k: v for k, v in (metadata or {}).items()}
        return [Sandbox(self._t, s)
                for s in self._t.json("GET", "/v1/sandboxes", query=q)["sandboxes"]]

    def get(self, sandbox_id: str) -> Sandbox:
        """The sandbox with this id or name."""
        return Sandbox(self._t, self._t.json("GET", "/v1/sandboxes/" + quote(sandbox_id)))
