#!/usr/bin/env python3
"""Root where agents need it: "user": "root" on exec, code_run, background
runs, sessions and terminals is the sandbox's user namespace's root (uid 0
inside, the sandbox's own host uid outside, no capability over the host);
"root": false at create or in a template turns it off (409 root_disabled);
bad values are 400."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

# CAP_SYS_ADMIN, CAP_SYS_MODULE, CAP_NET_ADMIN, CAP_SYS_PTRACE (bits)
HOST_CAPS = {"CAP_SYS_ADMIN": 21, "CAP_SYS_MODULE": 16, "CAP_NET_ADMIN": 12,
             "CAP_SYS_PTRACE": 19}


def sandbox_json(srv, sid):
    with open(os.path.join(srv.state_dir, "sandboxes", sid, "sandbox.json")) as f:
        return json.load(f)


def ex(srv, sid, argv, **kw):
    body = {"argv": argv}
    body.update(kw)
    return srv.request("POST", "/v1/sandboxes/%s/process/exec" % sid, body)


def sh(srv, sid, cmd, **kw):
    """stdout of `cmd` (sh -c) and its exit code."""
    r = ex(srv, sid, ["sh", "-c", cmd], **kw)
    if r.status != 200:
        return ("HTTP %d %s" % (r.status, r.body[:200]), -1)
    j = r.json()
    return (j["stdout"] + j["stderr"], j["exit_code"])


def err_code(r):
    try:
        return r.status, r.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return r.status, None


def check_root_runs(t, srv, sid, base):
    P = "/v1/sandboxes/%s/process" % sid
    t.eq(sh(srv, sid, "id -u; id -g")[0].split(), ["1000", "1000"],
         "without 'user' a run is the user (1000:1000)")
    t.eq(sh(srv, sid, "id -u; id -g", user="user")[0].split(), ["1000", "1000"],
         "\"user\": \"user\" is the user")
    t.eq(sh(srv, sid, "id -u; id -g", user="root")[0].split(), ["0", "0"],
         "\"user\": \"root\": id -u and id -g are 0")
    t.eq(sh(srv, sid, "echo $HOME $USER", user="root")[0].split(), ["/root", "root"],
         "root's HOME is /root and USER root")
    out, rc = sh(srv, sid, "echo made > /workspace/by-root && stat -c %u:%g /workspace/by-root",
                 user="root")
    t.eq((out.strip(), rc), ("0:0", 0), "a file root makes is owned by root inside")
    up = os.path.join(srv.upper_dir(sid), "workspace", "by-root")
    st = os.stat(up) if os.path.exists(up) else None
    t.ok(st is not None and (st.st_uid, st.st_gid) == (base, base),
         "the host sees it owned by the sandbox's mapped uid %d, not host root" % base,
         st and (st.st_uid, st.st_gid))
    out, rc = sh(srv, sid, "cat /workspace/by-root && echo x >> /workspace/by-root")
    t.ok(out.startswith("made") and rc != 0, "the user reads root's file but cannot write it",
         (out, rc))

    # Root of the namespace only: nothing over the host.
    caps, _ = sh(srv, sid, "grep CapEff /proc/self/status", user="root")
    try:
        eff = int(caps.split()[1], 16)
    except (IndexError, ValueError):
        eff = None
    t.ok(eff is not None and all(not (eff >> b) & 1 for b in HOST_CAPS.values()),
         "root has none of %s" % ", ".join(HOST_CAPS), caps)
    out, rc = sh(srv, sid, "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m", user="root")
    t.ok(rc != 0, "root cannot mount a filesystem", (out, rc))
    out, rc = sh(srv, sid, "mount --bind /workspace /tmp/m", user="root")
    t.ok(rc != 0, "root cannot bind-mount either", (out, rc))
    out, rc = sh(srv, sid, "hostname evil", user="root")
    t.ok(rc != 0, "root cannot change the hostname", (out, rc))
    out, _ = sh(srv, sid, "cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'",
                user="root")
    lines = out.split("\n")
    t.ok(lines[0].startswith("/.deskbox/init") and int(lines[1] or 999) < 50,
         "root sees only the sandbox's processes (pid 1 is its init)", out)
    out, rc = sh(srv, sid, "kill -0 %d" % os.getpid(), user="root")
    t.ok(rc != 0, "root cannot signal a host process", (out, rc))
    out, rc = sh(srv, sid, "ls /dev | tr '\\n' ' '; mknod /tmp/sda b 8 0", user="root")
    t.ok(rc != 0 and "sda" not in out.split(), "root has no host disk and cannot make one",
         (out, rc))
    t.ok(not os.path.exists("/workspace/by-root"), "nothing root made is on the host's /")

    # code_run and a background run as root.
    r = srv.request("POST", P + "/code_run",
                    {"language": "python", "code": "import os; print(os.getuid(), os.getgid())",
                     "user": "root"})
    t.eq((r.status, r.json().get("stdout", "").strip()), (200, "0 0"), "code_run as root")
    r = ex(srv, sid, ["sh", "-c", "id -u > /tmp/bg-uid"], background=True, user="root")
    pid = r.json().get("pid") if r.status == 200 else None
    done = pid and dbx.wait_until(
        lambda: srv.request("GET", "%s/%d" % (P, pid)).json().get("status") == "exited", 10)
    t.eq((bool(done), sh(srv, sid, "cat /tmp/bg-uid")[0].strip()), (True, "0"),
         "a background run as root")

    # A session and a terminal as root.
    S = "/v1/sandboxes/%s/sessions" % sid
    r = srv.request("POST", S, {"user": "root"})
    t.ok((r.status, r.json().get("user")) == (201, "root"), "a session as root", r.body)
    if r.status == 201:
        x = srv.request("POST", "%s/%s/exec" % (S, r.json()["id"]),
                        {"command": "cd /root && id -u && pwd"}).json()
        t.eq(x.get("stdout", "").split(), ["0", "/root"], "its commands run as root")
    r = srv.request("POST", S, {})
    t.eq(r.json().get("user"), "user", "a session without 'user' is the user's")
    T = "/v1/sandboxes/%s/terminals" % sid
    r = srv.request("POST", T, {"command": ["sh", "-c", "id -u > /tmp/term-uid; sleep 30"],
                                "user": "root"})
    t.ok((r.status, r.json().get("user")) == (201, "root"), "a terminal as root", r.body)
    got = dbx.wait_until(lambda: sh(srv, sid, "cat /tmp/term-uid 2>/dev/null")[0].strip(), 10)
    t.eq(got, "0", "the terminal's program is root")
    if r.status == 201:
        srv.request("DELETE", "%s/%s" % (T, r.json()["id"]))


def check_system_dirs(t, srv, sid, other, base):
    """/usr, /etc, /var and /opt are the sandbox's root's, through its own
    overlay; the shared lower layers and other sandboxes are untouched."""
    t.eq(sh(srv, sid, "stat -c %u:%g /usr/bin/env /etc/passwd /var/lib /opt")[0].split(),
         ["0:0"] * 4, "inside, root owns the system files (the host's /usr too)")
    out, rc = sh(srv, sid, "mkdir -p /usr/local/lib/dbx /opt/dbx /var/lib/dbx && "
                 "echo usr > /usr/local/lib/dbx/f && echo etc > /etc/dbx.conf && "
                 "cp /usr/bin/true /usr/bin/dbx-true && echo '# by root' >> /etc/bash.bashrc && "
                 "touch /opt/dbx/o /var/lib/dbx/v && /usr/bin/dbx-true && echo done", user="root")
    t.eq((out.strip(), rc), ("done", 0), "root writes /usr, /etc, /var and /opt")
    out, rc = sh(srv, sid, "touch /usr/bin/by-user /etc/by-user")
    t.ok(rc != 0, "the user still cannot", (out, rc))
    t.ok(not os.path.exists("/usr/local/lib/dbx") and not os.path.exists("/usr/bin/dbx-true")
         and not os.path.exists("/etc/dbx.conf"), "the host's /usr and /etc are unchanged")
    with open("/etc/bash.bashrc") as f:
        t.ok("# by root" not in f.read(), "the host's /etc/bash.bashrc is unchanged")
    out, _ = sh(srv, other, "ls /usr/local/lib/dbx /usr/bin/dbx-true /etc/dbx.conf /opt/dbx "
                "2>&1 | grep -c 'No such'; grep -c 'by root' /etc/bash.bashrc")
    t.eq(out.split(), ["4", "0"], "another sandbox sees none of it")
    up = srv.ns_path("sandboxes", sid, "disk", "usr-upper", "local", "lib", "dbx", "f")
    st = os.stat(up) if os.path.exists(up) else None
    t.ok(st is not None and st.st_uid == base,
         "the new /usr file is on the sandbox's own disk, owned by its range", st)


def check_sudo(t, srv, sid):
    """sudo for the user: the init's root door, no password."""
    t.eq(sh(srv, sid, "command -v sudo; sudo id -u; sudo -n id -g")[0].split(),
         ["/usr/bin/sudo", "0", "0"], "the user's sudo runs commands as root")
    out, rc = sh(srv, sid, "sudo sh -c 'echo by-sudo > /etc/by-sudo' && stat -c %u /etc/by-sudo")
    t.eq((out.strip(), rc), ("0", 0), "sudo writes /etc, the file root's")
    t.eq(sh(srv, sid, "sudo sh -c 'exit 7'")[1], 7, "sudo passes the exit code on")
    t.eq(sh(srv, sid, "echo piped | sudo cat")[0], "piped\n", "sudo passes stdin and stdout on")
    t.eq(sh(srv, sid, "cd /tmp && sudo pwd; sudo -i pwd; sudo -s id -u")[0].split(),
         ["/tmp", "/root", "0"], "the working directory, -i (root's login shell) and -s")
    out, rc = sh(srv, sid, "sudo -u nobody id")
    t.ok(rc == 1 and "only root" in out, "sudo -u another user says only root is there",
         (out, rc))
    r = ex(srv, sid, ["sh", "-c", "sudo sleep 37"], timeout_s=1)
    t.ok(r.status == 200 and r.json().get("timed_out"), "a run's timeout ends sudo", r.body)
    gone = dbx.wait_until(lambda: sh(srv, sid, "pgrep -f 'slee[p] 37'")[1] == 1, 10)
    t.ok(gone, "and the root command it started is killed with it")
    r = ex(srv, sid, ["sh", "-c", "sudo sh -c 'trap \"echo got-term; exit 3\" TERM; "
                      "sleep 30 & wait' & sleep 1; kill -TERM $!; wait $!; echo rc=$?"])
    t.ok("got-term" in r.json().get("stdout", "") and "rc=3" in r.json().get("stdout", ""),
         "a signal to sudo reaches the root command", r.body)


def check_sdk(t, srv):
    """The Python SDK's user= and root= (the source tree's package)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
    import deskbox
    c = deskbox.Deskbox("http://127.0.0.1:%d" % srv.port, token=srv.token)
    sb = c.create(root=False)
    try:
        t.eq(sb.process.exec(["id", "-u"]).stdout, "1000\n", "SDK: exec as the user")
        try:
            sb.process.exec(["id", "-u"], user="root")
            got = None
        except deskbox.DeskboxError as err:
            got = (type(err).__name__, err.code)
        t.eq(got, ("Conflict", "root_disabled"), "SDK: root=False, then user=\"root\" is "
             "a Conflict with code root_disabled")
    finally:
        sb.delete()
    sb = c.create()
    try:
        t.eq(sb.process.exec(["id", "-u"], user="root").stdout, "0\n", "SDK: exec(user=\"root\")")
        t.eq(sb.process.code_run("import os; print(os.getuid())", user="root").stdout, "0\n",
             "SDK: code_run(user=\"root\")")
        t.eq(sb.sessions.create(user="root").exec("id -u").stdout, "0\n",
             "SDK: sessions.create(user=\"root\")")
    finally:
        sb.delete()


def check_bad_values(t, srv, sid):
    P = "/v1/sandboxes/%s" % sid
    r = ex(srv, sid, ["id", "-u"], user=None)
    t.eq((r.status, r.json().get("stdout")), (200, "1000\n"), "\"user\": null is the user")
    for v in ("admin", "ROOT", "", 0, True):
        r = ex(srv, sid, ["true"], user=v)
        t.eq(err_code(r), (400, "invalid_argument"), "exec \"user\": %r is 400" % (v,))
    r = srv.request("POST", P + "/process/code_run", {"code": "1", "user": "nobody"})
    t.eq(err_code(r), (400, "invalid_argument"), "code_run with a bad user is 400")
    r = srv.request("POST", P + "/process/code_run",
                    {"code": "1", "context": "c1", "user": "root"})
    t.eq(err_code(r), (400, "invalid_argument"), "a context as root is 400 (contexts are the user's)")
    r = srv.request("POST", P + "/sessions", {"user": "wheel"})
    t.eq(err_code(r), (400, "invalid_argument"), "a session with a bad user is 400")
    r = srv.request("POST", P + "/terminals", {"user": 1})
    t.eq(err_code(r), (400, "invalid_argument"), "a terminal with a bad user is 400")
    r = srv.request("POST", "/v1/sandboxes", {"root": "no"})
    t.eq(err_code(r), (400, "invalid_argument"), "create \"root\": \"no\" is 400")


def check_opt_out(t, srv):
    sb = srv.create({"root": False})
    sid = sb["id"]
    t.eq(sb.get("root"), False, "a sandbox made with \"root\": false says so")
    try:
        P = "/v1/sandboxes/%s" % sid
        t.eq(sh(srv, sid, "id -u")[0].strip(), "1000", "it still runs the user's programs")
        r = ex(srv, sid, ["id", "-u"], user="root")
        t.eq(err_code(r), (409, "root_disabled"), "exec as root is 409 root_disabled")
        t.ok("root" in r.json()["error"]["message"], "the message says why",
             r.json()["error"]["message"])
        r = srv.request("POST", P + "/process/code_run", {"code": "1", "user": "root"})
        t.eq(err_code(r), (409, "root_disabled"), "code_run as root is 409")
        r = srv.request("POST", P + "/sessions", {"user": "root"})
        t.eq(err_code(r), (409, "root_disabled"), "a session as root is 409")
        r = srv.request("POST", P + "/terminals", {"user": "root"})
        t.eq(err_code(r), (409, "root_disabled"), "a terminal as root is 409")
        t.eq(sandbox_json(srv, sid).get("root"), False, "sandbox.json keeps \"root\": false")
        out, rc = sh(srv, sid, "sudo id -u")
        t.ok(rc == 1 and "turned off" in out, "its sudo says root is turned off", (out, rc))
    finally:
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    r = srv.request("POST", "/v1/templates", {"name": "noroot", "root": False})
    t.ok(r.status == 201, "a template with \"root\": false", r.body)
    r = srv.request("POST", "/v1/sandboxes", {"template": "noroot"})
    if r.status != 201:
        t.ok(False, "a sandbox from it", r.body)
        return
    sid = r.json()["id"]
    try:
        t.eq(r.json().get("root"), False, "a sandbox from that template has root off")
        t.eq(err_code(ex(srv, sid, ["id"], user="root")), (409, "root_disabled"),
             "and its exec as root is 409")
    finally:
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    srv.request("DELETE", "/v1/templates/noroot")


def main():
    dbx.require_root_and_tools()
    t = dbx.Tap()
    srv = dbx.Server()
    if "no user namespaces" in srv.startup:
        srv.cleanup()
        dbx.skip_all("deskboxd runs without user namespaces here: root is off")
    try:
        sb = srv.create({})
        sid = sb["id"]
        t.eq(sb.get("root"), True, "a sandbox allows root by default")
        base = sandbox_json(srv, sid).get("userns_base")
        check_root_runs(t, srv, sid, base)
        other = srv.create({})["id"]
        check_system_dirs(t, srv, sid, other, base)
        check_sudo(t, srv, sid)
        srv.request("DELETE", "/v1/sandboxes/" + other)
        check_bad_values(t, srv, sid)
        check_opt_out(t, srv)
        check_sdk(t, srv)
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
