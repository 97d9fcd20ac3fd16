# deskbox-a11y: the accessibility tree of a sandbox's desktop, read inside
# the sandbox through AT-SPI (pyatspi) on the session bus its init starts
# (docs/observation.md), so deskboxd never speaks D-Bus to sandbox code.
# deskboxd runs it as `python3 -c SRC tree|action ...` and reads one JSON
# object on stdout: {"nodes":[...]} or {"done":...}, or {"error":"..."}.
#
#   tree WINDOW MAX_DEPTH FIND MAX_NODES
#     WINDOW: "" or an X window id (decimal) or a title; FIND: "" or
#     "role:push button,name:OK" (case-insensitive, all must match)
#   action NODE NAME
#
# Node ids are paths of child indices from the desktop ("0.2.1"): stable
# while the application's tree does not change.
import json
import os
import sys


def out(obj):
    sys.stdout.write(json.dumps(obj))
    sys.stdout.flush()
    sys.exit(0)


if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
    out({"error": "unavailable: accessibility is off in this sandbox: create it with "
                  "env DESKBOX_A11Y=1"})

try:
    import pyatspi
except ImportError as ex:
    out({"error": "unavailable: python3-pyatspi is not installed in the image (%s)" % ex})

STATES = {"focused", "focusable", "enabled", "sensitive", "visible", "showing", "checked",
          "selected", "pressed", "expanded", "editable", "active", "default", "modal"}


def node_of(acc, path):
    n = {"id": path, "role": acc.getRoleName(), "name": acc.name or "",
         "description": acc.description or ""}
    try:
        n["states"] = sorted(pyatspi.stateToString(s).replace(" ", "_")
                             for s in acc.getState().getStates()
                             if pyatspi.stateToString(s) in STATES)
    except Exception:
        n["states"] = []
    try:
        e = acc.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        n["bounds"] = {"x": e.x, "y": e.y, "width": e.width, "height": e.height}
    except Exception:
        pass
    try:
        a = acc.queryAction()
        n["actions"] = [a.getName(i) for i in range(a.nActions)]
    except Exception:
        n["actions"] = []
    return n


def matches(n, find):
    for k, v in find:
        got = n.get(k)
        if k == "action":
            if not any(v == a.lower() for a in n.get("actions", [])):
                return False
        elif k == "role":
            # "button" finds a "push button" (AT-SPI's names have a kind).
            role = n["role"].lower()
            if role != v and not role.endswith(" " + v):
                return False
        elif not isinstance(got, str) or got.lower() != v:
            return False
    return True


class Walk:
    def __init__(self, max_depth, find, max_nodes):
        self.max_depth, self.find, self.max_nodes = max_depth, find, max_nodes
        self.count = 0
        self.found = []
        self.truncated = False

    def walk(self, acc, path, depth):
        if self.count >= self.max_nodes:
            self.truncated = True
            return None
        self.count += 1
        n = node_of(acc, path)
        if self.find and matches(n, self.find):
            self.found.append(dict(n))
        kids = []
        if depth < self.max_depth:
            for i in range(acc.childCount):
                try:
                    c = acc.getChildAtIndex(i)
                except Exception:
                    continue
                if c is None:
                    continue
                k = self.walk(c, "%s.%d" % (path, i), depth + 1)
                if k is not None:
                    kids.append(k)
        n["children"] = kids
        return n


def window_match(acc, window):
    """A top-level (a child of an application) whose title is `window`."""
    return (acc.name or "") == window


def tree(window, max_depth, find, max_nodes):
    desk = pyatspi.Registry.getDesktop(0)
    w = Walk(max_depth, find, max_nodes)
    roots = []
    for i in range(desk.childCount):
        app = desk.getChildAtIndex(i)
        if app is None:
            continue
        if not window:
            r = w.walk(app, str(i), 0)
            if r is not None:
                roots.append(r)
            continue
        for j in range(app.childCount):
            top = app.getChildAtIndex(j)
            if top is not None and window_match(top, window):
                r = w.walk(top, "%d.%d" % (i, j), 0)
                if r is not None:
                    roots.append(r)
    res = {"nodes": roots, "count": w.count, "truncated": w.truncated}
    if find:
        for f in w.found:
            f.pop("children", None)
        res = {"matches": w.found, "count": w.count, "truncated": w.truncated}
    return res


def resolve(path):
    acc = pyatspi.Registry.getDesktop(0)
    for part in path.split("."):
        if not part.isdigit() or int(part) >= acc.childCount:
            out({"error": "not_found: no accessible node '%s'" % path})
        acc = acc.getChildAtIndex(int(part))
        if acc is None:
            out({"error": "not_found: no accessible node '%s'" % path})
    return acc


def action(path, name):
    acc = resolve(path)
    try:
        a = acc.queryAction()
    except NotImplementedError:
        out({"error": "invalid: node '%s' has no actions" % path})
    names = [a.getName(i) for i in range(a.nActions)]
    want = [name]
    # "click" is the name agents use; toolkits say press or activate too.
    if name == "click":
        want += ["press", "activate", "jump"]
    for w in want:
        if w in names:
            ok = a.doAction(names.index(w))
            return {"done": w, "ok": bool(ok), "node": node_of(acc, path)}
    out({"error": "invalid: node '%s' has no action '%s' (it has: %s)"
         % (path, name, ", ".join(names) or "none")})


def main(argv):
    try:
        if len(argv) == 5 and argv[0] == "tree":
            find = []
            for part in filter(None, argv[3].split(",")):
                k, _, v = part.partition(":")
                if k not in ("role", "name", "description", "action") or not v:
                    out({"error": "invalid: find wants role:, name:, description: or "
                                  "action: terms, not '%s'" % part})
                find.append((k, v.strip().lower()))
            out(tree(argv[1], int(argv[2]), find, int(argv[4])))
        if len(argv) == 3 and argv[0] == "action":
            out(action(argv[1], argv[2]))
        out({"error": "invalid: usage: tree WINDOW MAX_DEPTH FIND MAX_NODES | action NODE NAME"})
    except SystemExit:
        raise
    except Exception as ex:  # AT-SPI raises many kinds (D-Bus errors)
        out({"error": "unavailable: AT-SPI: %s: %s" % (type(ex).__name__, ex)})


main(sys.argv[1:])
