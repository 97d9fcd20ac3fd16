#!/usr/bin/env python3
"""The VM backend's measured spike (docs/isolation.md): boots the Debian
kernel under QEMU -M microvm with deskbox-init as the guest's PID 1, the
guest's root built from the host's /usr over virtio-9p (read-only), and two
virtio-serial ports as the only channels to the host (no network device at
all): deskbox.agent (a shell) and deskbox.vnc (the guest's VNC server).
Prints the time from QEMU's start to the shell's first answer and to the
RFB ServerInit of the guest's desktop, and the guest's kernel and boot id
beside the host's.

  scripts/vm-spike.py [--accel kvm|tcg] [--runs N] [--build DIR]
"""

import argparse
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def kernel_version():
    vers = sorted(v for v in os.listdir("/lib/modules") if v != os.uname().release)
    if not vers:
        sys.exit("vm-spike: no Debian kernel (apt-get install linux-image-amd64)")
    return vers[-1]


def prepare(build, work):
    """The initramfs (generated) and the directory shared as /.deskbox."""
    initrd = os.path.join(build, "vm", "initramfs.cpio.gz")
    os.makedirs(os.path.dirname(initrd), exist_ok=True)
    if not os.path.exists(initrd) or \
            os.path.getmtime(initrd) < os.path.getmtime(os.path.join(HERE, "vm-initramfs.sh")):
        subprocess.run([os.path.join(HERE, "vm-initramfs.sh"), initrd, kernel_version()],
                       check=True)
    share = os.path.join(work, "deskbox")
    os.mkdir(share)
    for src, dst in (("deskbox-init", "init"), ("deskbox-vnc", "deskbox-vnc"),
                     ("deskbox-xtool", "xtool")):
        shutil.copy(os.path.join(build, src), os.path.join(share, dst))
    shutil.copy(os.path.join(ROOT, "desktop-image", "vm-relay.py"), share)
    return initrd, share


def qemu_argv(accel, machine, initrd, share, work, mem_mb):
    kver = kernel_version()
    cpu = "host,-arch-capabilities" if accel == "kvm" else "max"
    # microvm finds virtio-mmio devices through ACPI only (Debian's kernel
    # lacks VIRTIO_MMIO_CMDLINE_DEVICES), and its ACPI boot stalls on TCG's
    # timers; q35 with virtio-pci works with either.
    pci = machine == "q35"
    bus = "pci" if pci else "device"
    return [
        "qemu-system-x86_64", "-M", "q35" if pci else "microvm,x-option-roms=off,rtc=off",
        "-accel", accel, "-cpu", cpu, "-m", str(mem_mb), "-smp", "1",
        "-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-sandbox", "on",
        "-kernel", "/boot/vmlinuz-" + kver, "-initrd", initrd,
        "-append", "console=ttyS0 quiet panic=-1 deskbox_display=1280x800",
        "-serial", "file:" + os.path.join(work, "console.log"),
        "-device", "virtio-serial-" + bus,
        "-chardev", "socket,id=c0,path=%s/agent.sock,server=on,wait=off" % work,
        "-device", "virtserialport,chardev=c0,name=deskbox.agent",
        "-chardev", "socket,id=c1,path=%s/vnc.sock,server=on,wait=off" % work,
        "-device", "virtserialport,chardev=c1,name=deskbox.vnc",
        "-fsdev", "local,id=u,path=/usr,readonly=on,security_model=none",
        "-device", "virtio-9p-%s,fsdev=u,mount_tag=usr" % bus,
        "-fsdev", "local,id=d,path=%s,readonly=on,security_model=none" % share,
        "-device", "virtio-9p-%s,fsdev=d,mount_tag=deskbox" % bus,
    ]


def connect(path, deadline):
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except OSError:
            s.close()
            time.sleep(0.002)
    raise TimeoutError("no socket " + path)


def read_until(s, marker, deadline):
    buf = b""
    while marker not in buf:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        data = s.recv(65536)
        if not data:
            raise EOFError("closed")
        buf += data
    return buf


def shell_ready(work, deadline):
    """The guest's shell answers: its kernel and boot id."""
    s = connect(os.path.join(work, "agent.sock"), deadline)
    # The port reads EOF until the guest's shell opens it: say it until
    # it is heard.
    cmd = b"echo @@; uname -r; cat /proc/sys/kernel/random/boot_id; echo @@END\n"
    buf = b""
    while b"@@END\n" not in buf:
        if time.monotonic() > deadline:
            raise TimeoutError("the guest's shell did not answer")
        # Held in the socket while the guest's port is closed; said again
        # only after a quiet while (the shell may have read EOF first).
        s.settimeout(1)
        try:
            s.sendall(cmd)
        except socket.timeout:
            pass
        s.settimeout(2)
        try:
            while b"@@END\n" not in buf:
                buf += s.recv(65536)
        except socket.timeout:
            pass
    t = time.monotonic()
    lines = buf.split(b"@@\n", 1)[-1].decode().split("\n")
    return t, s, lines[0], lines[1]


def vnc_ready(work, deadline):
    """RFB 3.8 handshake with security None up to ServerInit."""
    while True:
        s = connect(os.path.join(work, "vnc.sock"), deadline)
        try:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            banner = read_until(s, b"\n", deadline)
            break
        except (EOFError, socket.timeout, OSError):
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    t_banner = time.monotonic()
    s.sendall(b"RFB 003.008\n")
    n = s.recv(1)[0]
    types = s.recv(n)
    if 1 not in types:
        raise RuntimeError("no security type None: %r" % types)
    s.sendall(b"\x01")
    if struct.unpack(">I", s.recv(4))[0] != 0:
        raise RuntimeError("security failed")
    s.sendall(b"\x01")  # shared
    init = s.recv(24)
    w, h = struct.unpack(">HH", init[:4])
    t_init = time.monotonic()
    s.close()
    return banner.strip().decode(), t_banner, t_init, w, h


def run_once(args, build):
    work = tempfile.mkdtemp(prefix="dbx-vm-spike-")
    proc = None
    try:
        initrd, share = prepare(build, work)
        argv = qemu_argv(args.accel, args.machine, initrd, share, work, args.memory_mb)
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=open(os.path.join(work, "qemu.log"), "wb"))
        deadline = t0 + args.timeout
        t_shell, agent, kver, boot_id = shell_ready(work, deadline)
        banner, t_banner, t_init, w, h = vnc_ready(work, deadline)
        agent.close()
        with open("/proc/sys/kernel/random/boot_id") as f:
            host_boot = f.read().strip()
        return {
            "shell_ms": (t_shell - t0) * 1000, "vnc_banner_ms": (t_banner - t0) * 1000,
            "vnc_serverinit_ms": (t_init - t0) * 1000, "screen": "%dx%d" % (w, h),
            "rfb": banner, "guest_kernel": kver, "host_kernel": os.uname().release,
            "guest_boot_id": boot_id, "host_boot_id": host_boot,
        }
    except Exception:
        if proc:
            proc.kill()
            proc.wait()
        for name in ("qemu.log", "console.log"):
            try:
                sys.stderr.write(open(os.path.join(work, name)).read()[-3000:])
            except OSError:
                pass
        raise
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--accel", default="kvm", choices=["kvm", "tcg"])
    ap.add_argument("--machine", default="microvm", choices=["microvm", "q35"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--memory-mb", type=int, default=512)
    ap.add_argument("--build", default=os.environ.get("DESKBOX_BUILD", os.path.join(ROOT, "build")))
    args = ap.parse_args()
    results = []
    for i in range(args.runs):
        r = run_once(args, args.build)
        results.append(r)
        print("run %d: shell %.0f ms, VNC banner %.0f ms, ServerInit %.0f ms (%s, %s)" % (
            i + 1, r["shell_ms"], r["vnc_banner_ms"], r["vnc_serverinit_ms"], r["screen"],
            r["rfb"]), flush=True)
    r = results[0]
    print("guest kernel %s, host kernel %s" % (r["guest_kernel"], r["host_kernel"]))
    print("guest boot_id %s, host boot_id %s" % (r["guest_boot_id"], r["host_boot_id"]))
    for k in ("shell_ms", "vnc_banner_ms", "vnc_serverinit_ms"):
        v = sorted(x[k] for x in results)
        print("median %s: %.0f (accel %s, %d runs)" % (k, v[len(v) // 2], args.accel, len(v)))


if __name__ == "__main__":
    main()
