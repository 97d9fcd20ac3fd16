"""contrib/k8s (docs/cluster.md, "Kubernetes"): every manifest passes the
Kubernetes API's schemas (kubernetes-models, pinned in tests/k8s), a broken
one does not (so the check can fail), and the manifests agree with deskboxd
and with each other: every option the DaemonSet and the ConfigMap give is
one deskboxd --help lists, the cluster's etcd URLs name the StatefulSet's
members, the Secret holds the keys the DaemonSet reads, and the Service
selects the DaemonSet's pods."""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("1..0 # SKIP python3-yaml is not installed (run scripts/install-deps.sh --test)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(TOP, "contrib", "k8s")
NODE_DIR = os.path.join(TOP, "tests", "k8s")


def validate(files):
    p = subprocess.run(["node", os.path.join(NODE_DIR, "validate.mjs")] + files, cwd=NODE_DIR,
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def docs():
    out = {}
    for f in sorted(glob.glob(os.path.join(K8S, "*.yaml"))):
        for d in yaml.safe_load_all(open(f)):
            if d:
                out[(d["kind"], d["metadata"]["name"])] = d
    return out


def options_of(d, cm):
    """The --options the DaemonSet's command line and the ConfigMap give."""
    c = d["spec"]["template"]["spec"]["containers"][0]
    flags = [re.match(r"--([a-z-]+)", a).group(1) for a in c["command"][1:]]
    conf = {}
    for line in cm["data"]["deskboxd.conf"].splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, value = line.partition(" ")
            conf[name] = value.strip()
    return flags, conf


def main():
    t = dbx.Tap()
    files = sorted(glob.glob(os.path.join(K8S, "*.yaml")))
    t.ok(len(files) >= 4, "contrib/k8s has its manifests (%d files)" % len(files))
    if not shutil.which("node") or not os.path.isdir(
            os.path.join(NODE_DIR, "node_modules", "kubernetes-models")):
        t.skip("the manifests pass the Kubernetes schemas",
               "node or tests/k8s/node_modules is missing (run scripts/install-deps.sh --test)")
    else:
        rc, out = validate(files)
        t.ok(rc == 0 and out.count("\nok ") + out.startswith("ok ") >= 7,
             "every manifest passes the Kubernetes schemas", out)
        broken = open(os.path.join(K8S, "deskboxd.yaml")).read().replace(
            "containerPort: 8080", 'containerPort: "eighty"')
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(broken)
        rc, out = validate([f.name])
        os.unlink(f.name)
        t.ok(rc != 0 and "containerPort must be integer" in out,
             "a DaemonSet with a string port is refused", out)

    d = docs()
    ds, cm = d.get(("DaemonSet", "deskboxd")), d.get(("ConfigMap", "deskboxd"))
    sts, sec = d.get(("StatefulSet", "etcd")), d.get(("Secret", "deskbox"))
    svc = d.get(("Service", "deskbox"))
    t.ok(ds and cm and sts and sec and svc, "DaemonSet, ConfigMap, StatefulSet, Secret, Service")
    if not (ds and cm and sts and sec and svc):
        t.done()
    flags, conf = options_of(ds, cm)
    deskboxd = os.path.join(dbx.BUILD, "deskboxd")
    if os.path.exists(deskboxd):
        helptext = subprocess.run([deskboxd, "--help"], capture_output=True,
                                  text=True).stdout
        unknown = [o for o in flags + list(conf) if "--" + o not in helptext]
        t.ok(not unknown, "every option given is one of deskboxd's", ", ".join(unknown))
    else:
        t.skip("every option given is one of deskboxd's", "deskboxd is not built")
    t.ok({"node-name", "advertise", "listen"} <= set(flags) and
         {"cluster", "cluster-secret-file", "state-dir"} <= set(conf),
         "cluster mode's options are all there")
    members = re.findall(r"(etcd-\d+)\.etcd\.deskbox\.svc:2379", conf.get("cluster", ""))
    t.eq(members, ["etcd-%d" % i for i in range(sts["spec"]["replicas"])],
         "the cluster URLs name each etcd member")
    spec = ds["spec"]["template"]["spec"]
    c = spec["containers"][0]
    keys = {e["valueFrom"]["secretKeyRef"]["key"] for e in c["env"]
            if "secretKeyRef" in e.get("valueFrom", {})}
    keys |= {i["key"] for v in spec["volumes"] if "secret" in v for i in v["secret"]["items"]}
    t.ok(keys <= set(sec["stringData"]), "the Secret holds the keys read: %s" % sorted(keys))
    secret_mount = [m["mountPath"] for m in c["volumeMounts"] if m["name"] == "secret"]
    t.ok(secret_mount and conf["cluster-secret-file"].startswith(secret_mount[0] + "/"),
         "the cluster secret file is in the Secret's mount")
    t.ok(c["securityContext"].get("privileged") and spec.get("hostNetwork") and
         any(v.get("hostPath", {}).get("path") == "/var/lib/deskbox" for v in spec["volumes"]),
         "privileged, host network, the state dir on the host")
    t.eq(svc["spec"]["selector"], ds["spec"]["template"]["metadata"]["labels"],
         "the Service selects the DaemonSet's pods")
    t.done()


if __name__ == "__main__":
    main()
