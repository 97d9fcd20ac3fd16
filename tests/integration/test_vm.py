"""Isolation backends: "isolation" at create, in templates and as
--default-isolation.  A sandbox names its isolation ("container" by
default) and keeps it across a restart of deskboxd; an unknown isolation is
400 naming the field; "vm" is 501 not_implemented saying why (no /dev/kvm on
this host, or what this deskboxd cannot yet do in a VM: docs/isolation.md),
never a container in its place; a template may carry "isolation" and a
create from a "vm" one is refused the same way."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402


def code_of(r):
    try:
        return r.json()["error"]["code"]
    except Exception:
        return None


def message_of(r):
    try:
        return r.json()["error"]["message"]
    except Exception:
        return r.body[:200]


def kvm_usable():
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError as ex:
        return False, "/dev/kvm: %s" % ex.strerror
    os.close(fd)
    return True, ""


def count(srv):
    return len(srv.request("GET", "/v1/sandboxes").json())


def check_vm_refused(t, srv, r, what):
    kvm, why = kvm_usable()
    t.ok(r.status == 501 and code_of(r) == "not_implemented", what + ": 501 not_implemented",
         (r.status, r.body[:300]))
    msg = message_of(r)
    if kvm:
        t.ok("vm" in msg and "isolation.md" in msg, what + ": the message names the reason", msg)
    else:
        t.ok("/dev/kvm" in msg, what + ": the message says /dev/kvm is missing (%s)" % why, msg)


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    state = srv.state_dir
    servers = [srv]
    try:
        sb = srv.create()
        t.eq(sb.get("isolation"), "container", "a sandbox is a container by default")
        sid = sb["id"]
        r = srv.exec(sid, ["true"])
        t.eq(r["exit_code"], 0, "and exec works in it through the container backend")
        sb2 = srv.create({"isolation": "container"})
        t.eq(sb2.get("isolation"), "container", "\"isolation\":\"container\" is accepted")
        r = srv.request("GET", "/v1/sandboxes/" + sb2["id"])
        t.eq(r.json().get("isolation"), "container", "GET shows the isolation")

        n = count(srv)
        for bad in ("kvm", 1, True, {"vm": 1}, ""):
            r = srv.request("POST", "/v1/sandboxes", {"isolation": bad})
            t.ok(r.status == 400 and "isolation" in message_of(r),
                 "isolation %r: 400 naming the field" % (bad,), r.body[:200])
        r = srv.request("POST", "/v1/sandboxes", {"isolation": "vm"})
        check_vm_refused(t, srv, r, "isolation vm")
        t.eq(count(srv), n, "the refused creates left no sandbox")

        r = srv.request("POST", "/v1/templates", {"name": "vmdesk", "isolation": "vm"})
        t.ok(r.status in (200, 201), "a template may name isolation vm", r.body[:200])
        r = srv.request("POST", "/v1/templates", {"name": "bad", "isolation": "kvm"})
        t.ok(r.status == 400 and "isolation" in message_of(r),
             "a template with a bad isolation: 400 naming the field", r.body[:200])
        r = srv.request("POST", "/v1/sandboxes", {"template": "vmdesk"})
        check_vm_refused(t, srv, r, "a create from a vm template")
        r = srv.request("POST", "/v1/sandboxes", {"template": "vmdesk", "isolation": "container"})
        t.ok(r.status == 201 and r.json().get("isolation") == "container",
             "the request's own isolation wins over the template's", r.body[:200])

        # Kept across a restart: sandbox.json has it.
        srv.stop()
        # One made before isolations existed has no "isolation" in its
        # sandbox.json: it is a container whatever the default is now.
        path = os.path.join(state, "sandboxes", sb2["id"], "sandbox.json")
        with open(path) as f:
            saved = json.load(f)
        t.eq(saved.get("isolation"), "container", "sandbox.json keeps the isolation")
        del saved["isolation"]
        with open(path, "w") as f:
            json.dump(saved, f)
        srv = dbx.Server(state_dir=state, args=["--default-isolation", "vm"])
        servers.append(srv)
        r = srv.request("GET", "/v1/sandboxes/" + sid)
        t.eq(r.json().get("isolation"), "container",
             "after a restart with --default-isolation vm the old sandbox is still a container")
        r = srv.request("GET", "/v1/sandboxes/" + sb2["id"])
        t.eq(r.json().get("isolation"), "container",
             "and one persisted without an isolation is a container too")
        r = srv.request("POST", "/v1/sandboxes/%s/start" % sid)
        t.ok(r.status == 200, "and it starts as one", r.body[:200])
        r = srv.request("POST", "/v1/sandboxes", {})
        check_vm_refused(t, srv, r, "--default-isolation vm, a create naming none")
        r = srv.request("POST", "/v1/sandboxes", {"isolation": "container"})
        t.ok(r.status == 201 and r.json().get("isolation") == "container",
             "--default-isolation vm, a create naming container gets one", r.body[:200])
    finally:
        dbx.stop_servers(t, servers, state)
    t.done()


if __name__ == "__main__":
    main()
