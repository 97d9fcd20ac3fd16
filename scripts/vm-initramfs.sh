#!/bin/sh
# Generates the initramfs of deskbox's VM backend (docs/isolation.md) from
# packages Debian ships: busybox-static and the modules of the Debian kernel
# (linux-image-amd64) that a guest needs for virtio-mmio, 9p and
# virtio-serial.  Nothing binary is committed: this runs at build or first
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
order="virtio_ring virtio virtio_mmio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_console netfs fscache 9pnet 9pnet_virtio 9p"
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
mount -t tmpfs -o mode=0755,size=64m root $r
mkdir -p $r/usr $r/etc $r/tmp $r/run/deskbox $r/proc $r/sys $r/dev $r/root $r/home/user \
	$r/workspace $r/.deskbox
chmod 1777 $r/tmp
for l in bin lib lib64 sbin; do ln -s usr/$l $r/$l; done
o=trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144
mount -t 9p -o $o usr $r/usr || echo "mount usr failed"
mount -t 9p -o $o deskbox $r/.deskbox || echo "mount deskbox failed"
printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n' > $r/etc/passwd
printf 'root:x:0:\nuser:x:1000:\n' > $r/etc/group
echo deskbox > $r/etc/hostname
chown 1000:1000 $r/home/user $r/workspace
mount --move /dev $r/dev
mount --move /proc $r/proc
mount --move /sys $r/sys
# ash gives background jobs /dev/null: one outside the new root too.
mknod -m 666 /dev/null c 1 3
port() { for p in $r/sys/class/virtio-ports/*; do [ "$(cat $p/name)" = "$1" ] && echo /dev/${p##*/}; done; }
agent=$(port deskbox.agent)
echo "deskbox ports: agent=$agent"
vnc=$(port deskbox.vnc)
echo "deskbox ports: vnc=$vnc"
# A port reads EOF until the host end is connected: retry.
[ -n "$agent" ] && chroot $r /bin/sh -c "while :; do /bin/sh -s <>$agent >&0 2>&0; sleep 0.01; done" &
[ -n "$vnc" ] && chroot $r /bin/sh -c "while [ ! -S /run/deskbox/vnc.sock ]; do sleep 0.005; done;
	exec python3 /.deskbox/vm-relay.py $vnc /run/deskbox/vnc.sock" &
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin HOME=/root LANG=C.UTF-8
export DISPLAY=:0 DESKBOX_DISPLAY=${deskbox_display:-1280x800}
exec chroot $r /.deskbox/init
INIT
chmod 755 "$tmp/init"
(cd "$tmp" && find . | cpio -o -H newc --quiet) | gzip -1 > "$out.tmp"
mv "$out.tmp" "$out"
