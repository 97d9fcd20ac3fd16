"""The desktop of a sandbox: screenshots, pointer, keyboard, waits,
windows.  Coordinates are screen pixels (or the agent_display's)."""

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ._http import Transport

Point = Union[Tuple[int, int], Sequence[int]]
Modifiers = Union[None, str, Sequence[str]]


def _clean(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class Desktop:
    def __init__(self, transport: Transport, base: str) -> None:
        self._t = transport
        self._base = base + "/desktop"

    def _post(self, action: str, body: Dict[str, Any]) -> Any:
        return self._t.json("POST", "%s/%s" % (self._base, action), body=_clean(body))

    def screenshot(self, region: Optional[Tuple[int, int, int, int]] = None,
                   format: str = "png", **options: Any) -> bytes:
        """PNG (or JPEG) bytes of the screen or of region (x, y, w, h);
        options are the query's (scale, width, height, quality, cursor)."""
        q: Dict[str, Any] = dict(options, format=format)
        if region is not None:
            q.update(zip(("x", "y", "w", "h"), region))
        return self._t.request("GET", self._base + "/screenshot", query=q)

    def info(self) -> Dict[str, Any]:
        return self._t.json("GET", self._base + "/info")

    def click(self, x: Optional[int] = None, y: Optional[int] = None, button: str = "left",
              count: int = 1, modifiers: Modifiers = None) -> Dict[str, Any]:
        return self._post("click", {"x": x, "y": y, "button": button, "count": count,
                                    "modifiers": modifiers})

    def double_click(self, x: Optional[int] = None, y: Optional[int] = None,
                     button: str = "left", modifiers: Modifiers = None) -> Dict[str, Any]:
        return self.click(x, y, button=button, count=2, modifiers=modifiers)

    def move(self, x: int, y: int, modifiers: Modifiers = None) -> Dict[str, Any]:
        return self._post("move", {"x": x, "y": y, "modifiers": modifiers})

    def mouse_down(self, button: str = "left") -> Dict[str, Any]:
        return self._post("mouse_down", {"button": button})

    def mouse_up(self, button: str = "left") -> Dict[str, Any]:
        return self._post("mouse_up", {"button": button})

    def drag(self, path: Sequence[Point], button: str = "left",
             modifiers: Modifiers = None) -> Dict[str, Any]:
        """Presses at the first point, moves through the others, releases."""
        return self._post("drag", {"path": [list(p) for p in path], "button": button,
                                   "modifiers": modifiers})

    def scroll(self, x: int, y: int, dx: int = 0, dy: int = 0,
               direction: Optional[str] = None, amount: Optional[int] = None,
               modifiers: Modifiers = None) -> Dict[str, Any]:
        """Wheel clicks: dy > 0 down, dx > 0 right; or direction + amount."""
        if direction is not None:
            body = {"x": x, "y": y, "direction": direction, "amount": amount}
        else:
            body = {"x": x, "y": y, "dx": dx, "dy": dy}
        body["modifiers"] = modifiers
        return self._post("scroll", body)

    def type_text(self, text: str, delay_ms: Optional[int] = None) -> Dict[str, Any]:
        """Types any Unicode text exactly; \\n is Return."""
        return self._post("type_text", {"text": text, "delay_ms": delay_ms})

    def key(self, keys: Union[str, Sequence[str]]) -> Dict[str, Any]:
        """"ctrl+c", "Return", "ctrl+a Delete" or a list pressed in order."""
        return self._post("key", {"keys": keys if isinstance(keys, str) else list(keys)})

    def wait(self, until: str = "stable", quiet_ms: Optional[int] = None,
             timeout_ms: Optional[int] = None, since_frame: Optional[int] = None
             ) -> Dict[str, Any]:
        """Waits until the screen is stable (or changed since a frame)."""
        return self._post("wait", {"until": until, "quiet_ms": quiet_ms,
                                   "timeout_ms": timeout_ms, "since_frame": since_frame})

    def cursor(self) -> Tuple[int, int]:
        j = self._t.json("GET", self._base + "/cursor")
        return int(j["x"]), int(j["y"])

    def windows(self) -> List[Dict[str, Any]]:
        return self._t.json("GET", self._base + "/windows")["windows"]

    def launch(self, argv: Sequence[str], timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """Starts a program and returns once its window is visible:
        {"pid", "window", "timed_out"}."""
        return self._post("launch", {"argv": list(argv), "timeout_ms": timeout_ms})

    def browser(self, url: Optional[str] = None,
                timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """Starts chromium on url (default about:blank), or opens url in a
        new tab of the running one, and returns once its window is up:
        {"window", "started", "url"} (and "pid" when started)."""
        return self._post("browser", {"url": url, "timeout_ms": timeout_ms})

    def clipboard(self) -> str:
        return self._t.json("GET", self._base + "/clipboard")["text"]

    def set_clipboard(self, text: str) -> Dict[str, Any]:
        return self._post("clipboard", {"text": text})

    def actions(self, actions: Sequence[Dict[str, Any]],
                then: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """A batch of actions, then an optional wait and screenshot."""
        return self._post("actions", {"actions": list(actions), "then": then})
