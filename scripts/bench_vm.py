"""make bench: the VM backend (docs/isolation.md) beside the container, in
the same run: create to the first screenshot (cold, and claimed from a
template's warm pool of VMs), exec and screenshot
round trips, and the host memory (PSS) of an idle VM's QEMU.  On these
machines the VM runs under TCG (emulation: /dev/kvm is the nested kvm_pvm,
which does not boot Debian's kernel), and the figures say so.

  BENCH_ONLY=vm make bench     just these figures"""

import os
import statistics
import time


def accel():
    return "tcg" if os.path.exists("/sys/module/kvm_pvm") or \
        not os.path.exists("/dev/kvm") else "kvm"


def qemu_pss_kb(sid):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                if "/deskbox/dbx-" + sid not in f.read():
                    continue
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if b"qemu-system" not in f.read().split(b"\0")[0]:
                    continue
            with open("/proc/%s/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1])
        except OSError:
            continue
    return None


def to_first_shot(srv, spec, timeout=400):
    """ms from the create's request to the first screenshot's answer, and
    the sandbox's id (None when the create failed)."""
    t0 = time.perf_counter()
    r = srv.request("POST", "/v1/sandboxes", spec, timeout=timeout)
    if r.status != 201:
        return None, r
    sid = r.json()["id"]
    srv.screenshot(sid)
    return (time.perf_counter() - t0) * 1000, sid


def round_trips(srv, sid, n):
    ex, shots = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        srv.exec(sid, ["true"])
        ex.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        srv.request("GET", "/v1/sandboxes/%s/desktop/screenshot" % sid)
        shots.append((time.perf_counter() - t0) * 1000)
    return ex, shots


def pool_claims(srv, n):
    """ms from a create naming a VM template with a warm pool of n to its
    first screenshot, for each of the n ready members (the replacements
    boot meanwhile); [] when the pool did not fill."""
    srv.request("POST", "/v1/templates", {"name": "bench-vm", "isolation": "vm",
                                          "warm_pool": n})
    deadline = time.monotonic() + 150 * n
    while time.monotonic() < deadline:
        r = srv.request("GET", "/v1/templates/bench-vm")
        if r.status == 200 and r.json().get("warm_pool_ready") == n:
            break
        time.sleep(0.5)
    out, ids = [], []
    for _ in range(n):
        ms, sid = to_first_shot(srv, {"template": "bench-vm"})
        if ms is None:
            break
        out.append(ms)
        ids.append(sid)
    srv.request("DELETE", "/v1/templates/bench-vm")
    for sid in ids:
        srv.request("DELETE", "/v1/sandboxes/" + sid, timeout=120)
    return out


def run(srv, report, quick):
    a = accel()
    runs = 1 if quick else 3
    cont, vm = [], []
    cont_sid = vm_sid = None
    for i in range(runs):
        ms, sid = to_first_shot(srv, {"env": {"BENCH": "vm-beside"}})
        if ms is not None:
            cont.append(ms)
            if i < runs - 1:
                srv.request("DELETE", "/v1/sandboxes/" + sid)
            else:
                cont_sid = sid
    for i in range(runs):
        ms, sid = to_first_shot(srv, {"isolation": "vm"})
        if ms is None:
            print("# VM: not measured: %d %s" % (sid.status, sid.body[:200]), flush=True)
            break
        vm.append(ms)
        if i < runs - 1:
            srv.request("DELETE", "/v1/sandboxes/" + sid)
        else:
            vm_sid = sid
    if cont:
        report("container create to first screenshot", cont)
    if not vm:
        if cont_sid:
            srv.request("DELETE", "/v1/sandboxes/" + cont_sid)
        return
    report("VM (%s) create to first screenshot" % a, vm, naive=cont,
           naive_name="container", target="<= 400 ms with KVM; %s is emulation" % a)
    warm = pool_claims(srv, runs)
    if warm:
        report("VM (%s) create from a warm pool to first screenshot" % a, warm, naive=vm,
               naive_name="VM cold boot", target="<= 5 ms")
    # Idle for a while first: the boot's last programs settle.
    time.sleep(5)
    pss = qemu_pss_kb(vm_sid)
    if pss:
        report("VM (%s) idle host PSS of QEMU" % a, [pss / 1024.0], unit="MB",
               target="<= 60 MB with KVM")
    n = 5 if quick else 15
    vex, vshot = round_trips(srv, vm_sid, n)
    if cont_sid:
        cex, cshot = round_trips(srv, cont_sid, n)
        report("VM (%s) exec true" % a, vex, naive=cex, naive_name="container")
        report("VM (%s) screenshot" % a, vshot, naive=cshot, naive_name="container",
               target="<= 1.5x the container's with KVM")
        srv.request("DELETE", "/v1/sandboxes/" + cont_sid)
    else:
        report("VM (%s) exec true" % a, vex)
        report("VM (%s) screenshot" % a, vshot)
    print("# VM figures are %s: medians %s" % (
        a, ", ".join("%.0f" % statistics.median(x) for x in (vm, vex, vshot))), flush=True)
    srv.request("DELETE", "/v1/sandboxes/" + vm_sid)
