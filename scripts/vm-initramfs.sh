#!/bin/sh
# Generates the initramfs of deskbox's VM backend (docs/isolation.md) from
# packages Debian ships: busybox-static and the modules of the Debian kernel
# (linux-image-amd64) that a guest needs for virtio-mmio, 9p,
# virtio-serial, virtio-balloon and virtio-net.  Nothing binary is committed: this runs at build or first
# use.
#   scripts/vm-initramfs.sh OUT.cpio.gz [KERNEL_VERSION]
set -eu
out=$1
kver=${2:-$(ls /lib/modules | sort -V | grep -v "$(uname -r)" | tail -1)}
mods=/lib/modules/$kver
busybox=/bin/busybox
[ -d "$mods" ] || { echo "vm-initramfs: no modules in $mods (apt-get install linux-image-amd64)" >&2; exit 1; }
ldd "$busybox" 2>&1 | grep -q "not a dynamic" ||
	{ echo "vm-initramfs: $busybox is not static (apt-get install busybox-static)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/lib/modules" "$tmp/proc" "$tmp/sys" "$tmp/dev" "$tmp/newroot"
cp "$busybox" "$tmp/bin/busybox"
# In load order: each after what it depends on (modules.dep).
order="virtio_ring virtio virtio_mmio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_console virtio_balloon failover net_failover virtio_net netfs fscache 9pnet 9pnet_virtio 9p"
for m in $order; do
	f=$(grep -E "(^|/)$m\.ko:" "$mods/modules.dep" | cut -d: -f1)
	[ -n "$f" ] || { echo "vm-initramfs: no module $m in $mods" >&2; exit 1; }
	cp "$mods/$f" "$tmp/lib/modules/$m.ko"
done
echo "$order" > "$tmp/lib/modules/order"
cat > "$tmp/init" <<'INIT'
#!/bin/busybox sh
# PID 1 of the guest until deskbox-init takes over (exec, same pid).
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# The kernel leaves "module.param" words of its command line to modprobe:
# insmod gets them here.
for m in $(cat /lib/modules/order); do
	args=
	for w in $(cat /proc/cmdline); do
		case $w in $m.*) args="$args ${w#$m.}" ;; esac
	done
	insmod /lib/modules/$m.ko $args || echo "insmod $m failed"
done
r=/newroot
o=trans=virtio,version=9p2000.L,msize=262144
if mount -t 9p -o $o,cache=mmap${deskbox_ro:+,ro} root $r 2>/dev/null; then
	# A sandbox (server/runtime/runtime_vm.c): its own root tree (the
	# overlay deskboxd mounted for it, the same a container gets) over 9p,
	# written on the host as the sandbox's user; /run and the X socket's
	# directory are the guest's own (sockets do not cross 9p).
	sandbox=1
	# A read-only root (runtime_vm_ro.c): the root share is exported
	# read-only by QEMU and mounted read-only here (EROFS before any
	# permission check, as in a container); its writable places are
	# shares rw0, rw1, ... of their own, mounted over it in the order
	# deskbox_rw= names them.
	if [ -n "${deskbox_ro:-}" ]; then
		i=0
		for d in $(echo "${deskbox_rw:-}" | tr , ' '); do
			mount -t 9p -o $o,cache=mmap rw$i $r$d || echo "mount rw$i on $d failed"
			i=$((i + 1))
		done
	fi
	mount -t tmpfs -o mode=0755,size=16m run $r/run
	mkdir -p $r/run/deskbox $r/run/host
	mount -t 9p -o $o run $r/run/host || echo "mount run failed"
	# Its network (runtime_vm_net.c): eth0 is the tap's other end in the
	# sandbox's network namespace, which routes it out (or not, in mode
	# "none"); the resolver is the sandbox's resolv.conf, which deskboxd
	# rewrites in place on the uncached run share.
	ip link set lo up
	if [ -n "${deskbox_ip:-}" ] && [ -e /sys/class/net/eth0 ]; then
		ip addr add "$deskbox_ip" dev eth0 && ip link set eth0 up &&
			ip route add default via "$deskbox_gw" || echo "eth0 setup failed"
	fi
	[ -f $r/run/host/resolv.conf ] && [ -f $r/etc/resolv.conf ] &&
		mount --bind $r/run/host/resolv.conf $r/etc/resolv.conf
else
	sandbox=
	mount -t tmpfs -o mode=0755,size=64m root $r
	mkdir -p $r/usr $r/etc $r/tmp $r/run/deskbox $r/proc $r/sys $r/dev $r/root $r/home/user \
		$r/workspace $r/.deskbox
	chmod 1777 $r/tmp
	for l in bin lib lib64 sbin; do ln -s usr/$l $r/$l; done
	printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n' > $r/etc/passwd
	printf 'root:x:0:\nuser:x:1000:\n' > $r/etc/group
	chown 1000:1000 $r/home/user $r/workspace
fi
# The image's /usr: the host's (read-only) or the sandbox's own overlay of
# it (deskbox_usr=rw: packages it installs persist); a stored image's is
# in its root already (deskbox_usr=none: runtime_vm_image.c).
if [ "${deskbox_usr:-ro}" != none ]; then
	mount -t 9p -o $o,${deskbox_usr:-ro},cache=loose usr $r/usr || echo "mount usr failed"
fi
mount -t 9p -o $o,ro,cache=loose deskbox $r/.deskbox || echo "mount deskbox failed"
hostname deskbox
mount --move /dev $r/dev
mount --move /proc $r/proc
mount --move /sys $r/sys
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts $r/dev/pts
ln -sf pts/ptmx $r/dev/ptmx 2>/dev/null
mount -t tmpfs -o mode=1777 shm $r/dev/shm
# ash gives background jobs /dev/null: one outside the new root too.
mknod -m 666 /dev/null c 1 3
port() { for p in $r/sys/class/virtio-ports/*; do [ "$(cat $p/name)" = "$1" ] && echo /dev/${p##*/}; done; }
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin HOME=/root LANG=C.UTF-8
export DISPLAY=:0 DESKBOX_DISPLAY=${deskbox_display:-1280x800}
if [ -n "$sandbox" ]; then
	# The sandbox's env (deskboxd writes it beside the ready flag).
	while IFS= read -r kv; do export "$kv"; done < $r/run/host/env
	mkdir -p $r/tmp/.X11-unix
	mount -t tmpfs -o mode=1777 x11 $r/tmp/.X11-unix
	ports=
	for p in $r/sys/class/virtio-ports/*; do
		case $(cat $p/name) in deskbox.exec*) ports="$ports /dev/${p##*/}" ;; esac
	done
	echo "deskbox exec ports:$ports"
	chroot $r /usr/bin/python3 /.deskbox/vm-agent.py $ports &
	# The host waits on run/ready (a link to its guest/ready).
	chroot $r /bin/sh -c "while [ ! -e /run/deskbox/ready ]; do sleep 0.2; done;
		: > /run/host/ready" &
else
	agent=$(port deskbox.agent)
	echo "deskbox ports: agent=$agent"
	[ -n "$agent" ] && chroot $r /bin/sh -c "while :; do /bin/sh -s <>$agent >&0 2>&0; sleep 0.01; done" &
fi
vnc=$(port deskbox.vnc)
# Live viewers' ports (deskbox.vncview0..N): the same VNC server, which
# takes several clients.
views=
for p in $r/sys/class/virtio-ports/*; do
	case $(cat $p/name) in deskbox.vncview*) views="$views 0.2 /dev/${p##*/} /run/deskbox/vnc.sock" ;; esac
done
echo "deskbox ports: vnc=$vnc views:$views"
[ -n "$vnc" ] && chroot $r /bin/sh -c "while [ ! -S /run/deskbox/vnc.sock ]; do sleep 0.005; done;
	exec python3 /.deskbox/vm-relay.py $vnc /run/deskbox/vnc.sock$views" &
exec chroot $r /.deskbox/init
INIT
chmod 755 "$tmp/init"
(cd "$tmp" && find . | cpio -o -H newc --quiet) | gzip -1 > "$out.tmp"
mv "$out.tmp" "$out"
