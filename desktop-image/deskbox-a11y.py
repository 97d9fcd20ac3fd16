# deskbox-a11y: the resident reader of the accessibility tree, run inside
# the sandbox by deskboxd as `python3 -c SRC` (embedded in deskboxd) at the
# first request and kept: it holds its connection to the AT-SPI bus the
# sandbox's init starts (docs/observation.md), so deskboxd never speaks
# D-Bus to sandbox code and no request pays for starting python3.
#
# Protocol, one request at a time (process_helper_call in deskboxd):
#   stdin:  u32 big-endian length, then JSON
#           {"op": "tree", "window": str, "max_depth": int, "find": str, "max_nodes": int}
#           {"op": "action", "node": str, "name": str}
#   stdout: u32 big-endian length, then JSON: {"nodes": [...]}, {"matches": [...]},
#           {"done": ...} or {"error": "kind: message"}
# It exits at EOF, and after IDLE_S without a request (deskboxd starts it
# again when needed), which gives its memory back to an idle sandbox.
#
# Speed: every property of every node is a D-Bus call to the application
# (AT-SPI toolkits of Debian 12 have no bulk cache call), so the walk sends
# them all without waiting: a node's calls go out as soon as its parent's
# children are known, and the answers are gathered by one main loop.  The
# calls go straight to each application over the connection it offers
# (GetApplicationBusAddress), not through the bus daemon.  ~7 calls a node;
# a 625-node chromium page takes ~110 ms inside the sandbox.
#
# Node ids are paths of child indices from the desktop ("0.2.1"): stable
# while the application's tree does not change.
import json
import os
import select
import struct
import sys

IDLE_S = 600
CALL_MS = 5000
ACC = "org.a11y.atspi.Accessible"
PROPS = "org.freedesktop.DBus.Properties"
ACTION = "org.a11y.atspi.Action"
REGISTRY = ("org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root")
STATES = {"focused", "focusable", "enabled", "sensitive", "visible", "showing", "checked",
          "selected", "pressed", "expanded", "editable", "active", "default", "modal"}


class Fail(Exception):
    """An answer {"error": "kind: message"}."""


def load():
    """(dbus, GLib, role names, {state bit: name}), or Fail."""
    try:
        import dbus
        import dbus.mainloop.glib
        import gi
        gi.require_version("Atspi", "2.0")
        from gi.repository import Atspi, GLib
    except (ImportError, ValueError) as ex:
        raise Fail("unavailable: python3-dbus or gir1.2-atspi-2.0 is not installed in the "
                   "image (%s)" % ex)
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    roles = [Atspi.role_get_name(i) or "unknown" for i in range(int(Atspi.Role.LAST_DEFINED))]
    states = {}
    for v in range(64):
        try:
            nick = Atspi.StateType(v).value_nick.replace("-", "_")
        except ValueError:
            continue
        if nick in STATES:
            states[v] = nick
    return dbus, GLib, roles, states


class Reader:
    def __init__(self):
        self.dbus = None
        self.bus = None
        self.direct = {}

    def connect(self):
        if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
            raise Fail("unavailable: accessibility is off in this sandbox: create it with "
                       "env DESKBOX_A11Y=1")
        if self.dbus is None:
            self.dbus, self.GLib, self.roles, self.states = load()
        if self.bus is None:
            dbus = self.dbus
            try:
                sess = dbus.bus.BusConnection(os.environ["DBUS_SESSION_BUS_ADDRESS"])
                addr = sess.call_blocking("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus",
                                          "GetAddress", "", (), timeout=CALL_MS / 1000)
                self.bus = dbus.bus.BusConnection(str(addr))
                sess.close()
            except dbus.exceptions.DBusException as ex:
                raise Fail("unavailable: the accessibility bus did not answer: %s" % ex)
        return self.bus

    def conn(self, name):
        """The application's own connection when it offers one (atk-bridge
        does: a D-Bus server of its own), else the bus.  A direct
        connection spares the bus daemon two hops a call."""
        c = self.direct.get(name)
        if c is None:
            c = self.bus
            try:
                addr = str(self.sync(name, "/org/a11y/atspi/accessible/root",
                                     "org.a11y.atspi.Application", "GetApplicationBusAddress"))
                if addr:
                    c = self.dbus.connection.Connection(addr)
            except self.dbus.exceptions.DBusException:
                pass
            self.direct[name] = c
        return c

    def forget_except(self, names):
        """Closes the direct connections of applications that left."""
        for name in list(self.direct):
            if name not in names:
                c = self.direct.pop(name)
                if c is not self.bus:
                    c.close()

    def drop(self):
        """After a D-Bus failure: connect afresh at the next request."""
        for c in set(self.direct.values()) | {self.bus}:
            try:
                if c is not None:
                    c.close()
            except Exception:
                pass
        self.bus = None
        self.direct = {}

    def sync(self, name, path, iface, method, sig="", args=()):
        return self.bus.call_blocking(name, path, iface, method, sig, args,
                      timeout=CALL_MS / 1000)

    def state_names(self, bits):
        out = []
        for w, word in enumerate(bits):
            for b in range(32):
                if int(word) >> b & 1 and (w * 32 + b) in self.states:
                    out.append(self.states[w * 32 + b])
        return sorted(out)

    def role_name(self, role):
        role = int(role)
        return self.roles[role] if 0 <= role < len(self.roles) else "unknown"


class Walk:
    """One tree request: every call in flight at once, one loop for the
    answers.  A node is {"id", "role", "name", "description", "states",
    "bounds"?, "actions", "children"}; `kids` keeps its children by index
    until the end, so that they stay in order whatever order answers come
    in."""

    def __init__(self, reader, max_depth, max_nodes, direct=True):
        self.r = reader
        self.direct = direct
        self.max_depth, self.max_nodes = max_depth, max_nodes
        self.count = 0
        self.truncated = False
        self.pending = 0
        self.failed = None
        self.loop = reader.GLib.MainLoop()

    def call(self, name, path, iface, method, sig, args, cb):
        self.pending += 1

        def done(*v):
            self.finish(cb, v)

        def bad(ex):
            self.finish(cb, None)

        c = self.r.conn(name) if self.direct else self.r.bus
        c.call_async(name, path, iface, method, sig, args, done, bad,
                     timeout=CALL_MS / 1000)

    def finish(self, cb, v):
        try:
            cb(v)
        except Exception as ex:  # a malformed answer from the application
            self.failed = self.failed or ex
        self.pending -= 1
        if self.pending == 0:
            self.loop.quit()

    def node(self, name, path, nid, depth):
        """A node to visit, or None past max_nodes."""
        if self.count >= self.max_nodes:
            self.truncated = True
            return None
        self.count += 1
        n = {"id": nid, "role": "unknown", "name": "", "description": "", "states": [],
             "actions": [], "kids": {}}

        def props(v):
            if not v:
                return
            n["name"] = str(v[0].get("Name", ""))
            n["description"] = str(v[0].get("Description", ""))
            if int(v[0].get("ChildCount", 0)) > 0 and depth < self.max_depth:
                self.call(name, path, ACC, "GetChildren", "", (), kids)

        def kids(v):
            for i, (n2, p2) in enumerate(v[0] if v else []):
                k = self.node(str(n2), str(p2), "%s.%d" % (nid, i), depth + 1)
                if k is not None:
                    n["kids"][i] = k

        def role(v):
            if v:
                n["role"] = self.r.role_name(v[0])

        def states(v):
            if v:
                n["states"] = self.r.state_names(v[0])

        def extents(v):
            if v:
                x, y, w, h = (int(c) for c in v[0])
                n["bounds"] = {"x": x, "y": y, "width": w, "height": h}

        def actions(v):
            # GetActions gives localized names (empty in chromium): ask
            # each action's own name.
            for i in range(len(v[0]) if v else 0):
                n["actions"].append("")
                self.call(name, path, ACTION, "GetName", "i", (i,),
                          lambda a, i=i: n["actions"].__setitem__(i, str(a[0]) if a else ""))

        self.call(name, path, PROPS, "GetAll", "s", (ACC,), props)
        self.call(name, path, ACC, "GetRole", "", (), role)
        self.call(name, path, ACC, "GetState", "", (), states)
        self.call(name, path, "org.a11y.atspi.Component", "GetExtents", "u", (0,), extents)
        self.call(name, path, ACTION, "GetActions", "", (), actions)
        return n

    def run(self):
        # A connection whose application went away mid-walk may never
        # time its calls out: the walk gives up on its own.
        late = []

        def give_up():
            late.append(1)
            self.loop.quit()
            return False

        if self.pending:
            t = self.r.GLib.timeout_add(CALL_MS + 1000, give_up)
            self.loop.run()
            if not late:
                self.r.GLib.source_remove(t)
        if late:
            self.r.drop()
            raise Fail("unavailable: an application did not answer within %d ms" % CALL_MS)
        if self.failed:
            raise self.failed


def ordered(n):
    """Turns `kids` into the "children" list, in index order."""
    n["children"] = [ordered(n["kids"][i]) for i in sorted(n["kids"])]
    del n["kids"]
    n["actions"] = [a for a in n["actions"] if a]
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


def collect(n, find, out):
    """The nodes of `n` that match, in tree order, without children."""
    if matches(n, find):
        out.append({k: v for k, v in n.items() if k != "children"})
    for c in n["children"]:
        collect(c, find, out)


def parse_find(text):
    find = []
    for part in filter(None, text.split(",")):
        k, _, v = part.partition(":")
        if k not in ("role", "name", "description", "action") or not v:
            raise Fail("invalid: find wants role:, name:, description: or action: terms, "
                       "not '%s'" % part)
        find.append((k, v.strip().lower()))
    return find


def tree(r, req):
    find = parse_find(str(req.get("find") or ""))
    window = str(req.get("window") or "")
    r.connect()
    w = Walk(r, int(req.get("max_depth", 64)), int(req.get("max_nodes", 5000)))
    apps = r.sync(REGISTRY[0], REGISTRY[1], ACC, "GetChildren")
    r.forget_except({str(name) for name, _ in apps})
    roots = {}
    for i, (name, path) in enumerate(apps):
        name, path = str(name), str(path)
        if not window:
            k = w.node(name, path, str(i), 0)
            if k is not None:
                roots[(i,)] = k
            continue
        # A top-level (a child of an application) whose title is `window`.
        for j, (n2, p2) in enumerate(r.sync(name, path, ACC, "GetChildren")):
            def top(v, i=i, j=j, n2=str(n2), p2=str(p2)):
                if v and str(v[0]) == window:
                    k = w.node(n2, p2, "%d.%d" % (i, j), 0)
                    if k is not None:
                        roots[(i, j)] = k
            w.call(n2, p2, PROPS, "Get", "ss", (ACC, "Name"), top)
    w.run()
    nodes = [ordered(roots[k]) for k in sorted(roots)]
    if find:
        found = []
        for n in nodes:
            collect(n, find, found)
        return {"matches": found, "count": w.count, "truncated": w.truncated}
    return {"nodes": nodes, "count": w.count, "truncated": w.truncated}


def resolve(r, path):
    """(bus name, object path) of node `path`."""
    at = REGISTRY
    for part in path.split("."):
        if not part.isdigit():
            raise Fail("not_found: no accessible node '%s'" % path)
        kids = r.sync(at[0], at[1], ACC, "GetChildren")
        if int(part) >= len(kids):
            raise Fail("not_found: no accessible node '%s'" % path)
        at = (str(kids[int(part)][0]), str(kids[int(part)][1]))
    return at


def action(r, req):
    path, name = str(req.get("node", "")), str(req.get("name", ""))
    r.connect()
    at = resolve(r, path)
    try:
        n = int(r.sync(at[0], at[1], PROPS, "Get", "ss", (ACTION, "NActions")))
    except r.dbus.exceptions.DBusException:
        raise Fail("invalid: node '%s' has no actions" % path)
    names = [str(r.sync(at[0], at[1], ACTION, "GetName", "i", (i,))) for i in range(n)]
    want = [name]
    # "click" is the name agents use; toolkits say press or activate too.
    if name == "click":
        want += ["press", "activate", "jump"]
    for w in want:
        if w in names:
            ok = r.sync(at[0], at[1], ACTION, "DoAction", "i", (names.index(w),))
            # Over the bus: the application may be closing (a dialog's
            # button) and its own connection with it.
            node = Walk(r, 0, 1, direct=False)
            k = node.node(at[0], at[1], path, 0)
            node.run()
            return {"done": w, "ok": bool(ok), "node": ordered(k)}
    raise Fail("invalid: node '%s' has no action '%s' (it has: %s)"
               % (path, name, ", ".join(names) or "none"))


def answer(r, req):
    try:
        if not isinstance(req, dict) or req.get("op") not in ("tree", "action"):
            raise Fail("invalid: the request wants op tree or action")
        return tree(r, req) if req["op"] == "tree" else action(r, req)
    except Fail as ex:
        return {"error": str(ex)}
    except Exception as ex:  # AT-SPI raises many kinds (D-Bus errors)
        r.drop()
        return {"error": "unavailable: AT-SPI: %s: %s" % (type(ex).__name__, ex)}


def main():
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open("/dev/null", os.O_RDWR)
    # stderr too: nobody reads it while the reader lives.
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    r = Reader()

    def read_exact(n, idle):
        buf = b""
        while len(buf) < n:
            if idle and not buf and not select.select([proto_in], [], [], IDLE_S)[0]:
                os._exit(0)
            chunk = proto_in.read(n - len(buf))
            if not chunk:
                os._exit(0)
            buf += chunk
        return buf

    while True:
        (n,) = struct.unpack(">I", read_exact(4, True))
        try:
            req = json.loads(read_exact(n, False))
        except ValueError:
            req = None
        data = json.dumps(answer(r, req)).encode()
        proto_out.write(struct.pack(">I", len(data)) + data)


main()
