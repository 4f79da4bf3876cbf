#!/bin/busybox sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# /init (PID 1) of the rxe_vm.sh guest: loads the modules listed in /modules.load, mounts the
# host's / read-only over 9p, puts soft-RoCE device rxe0 on a dummy netdev, runs the host's
# command script chrooted into the host's / and leaves its exit status in the run share.
# Any setup failure powers off without an exit status, which the host reports as "guest failed".
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# The kernel's own request_module() calls go through busybox too.
echo /bin/modprobe >/proc/sys/kernel/modprobe

say() { echo "rxe_vm guest [$(cut -d' ' -f1 /proc/uptime)]: $*"; }
fail() {
    dmesg | tail -40
    say "setup failed: $*"
    poweroff -f
}

p9="trans=virtio,version=9p2000.L,msize=512000"
root=/newroot

say "kernel up"
while read -r module; do
    modprobe "$module" || fail "modprobe $module"
done </modules.load

# run share: conf (shell variables), dirs ("tag path" per writable directory), cmd.sh; gets rc.
mkdir -p /run-share $root
mount -t 9p -o "$p9,cache=mmap" rxevmrun /run-share || fail "mount of the run share"
. /run-share/conf

mount -t 9p -o "$p9,ro,cache=loose" hostroot $root || fail "mount of the host's /"
mount -t proc proc $root/proc
mount -t sysfs sys $root/sys
mount -t devtmpfs dev $root/dev
mkdir -p $root/dev/pts $root/dev/shm
mount -t devpts devpts $root/dev/pts
mount -t tmpfs shm $root/dev/shm
mount -t tmpfs tmp $root/tmp
mount -t tmpfs run $root/run
while read -r tag path; do
    # Directories under the guest's own /tmp or /run need a mount point there.
    mkdir -p "$root$path" 2>/dev/null
    mount -t 9p -o "$p9,cache=mmap" "$tag" "$root$path" || fail "mount of $path"
done </run-share/dirs
say "host mounted"

hostname "$RXE_HOSTNAME"
ip link set lo up
ip link add rxenet0 type dummy || fail "dummy netdev"
ip link set rxenet0 mtu "$RXE_MTU" up || fail "mtu $RXE_MTU on rxenet0"
ip addr add "$RXE_IP/24" dev rxenet0 || fail "address on rxenet0"
# busybox has no rdma tool; the host's (iproute2) runs fine in the chroot.
chroot $root rdma link add rxe0 type rxe netdev rxenet0 || fail "rdma link add rxe0"

# GIDs appear asynchronously. Wait (5 s at most) for the RoCEv2 GID of the IPv4 address:
# ::ffff:a.b.c.d, the one a test must name as its source GID.
want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(echo "$RXE_IP" | tr . ' '))
port=/sys/class/infiniband/rxe0/ports/1
gid_index=
for attempt in $(seq 100); do
    for file in $port/gids/*; do
        index=${file##*/}
        if [ "$(cat "$file" 2>/dev/null)" = "$want" ] &&
            [ "$(cat $port/gid_attrs/types/$index 2>/dev/null)" = "RoCE v2" ]; then
            gid_index=$index
            break 2
        fi
    done
    sleep 0.05
done
[ -n "$gid_index" ] || fail "no RoCEv2 GID for $RXE_IP on rxe0"
say "rxe0 up on rxenet0 ($RXE_IP, mtu $RXE_MTU, gid index $gid_index)"

cp /run-share/cmd.sh $root/tmp/.rxe_vm_cmd.sh
# ttyS1 is the host's stdout; raw so that output passes through unchanged.
stty -F /dev/ttyS1 raw -echo 2>/dev/null
say "running the command"
BMI_VERBS_GID_INDEX=$gid_index chroot $root /bin/bash /tmp/.rxe_vm_cmd.sh \
    </dev/null >/dev/ttyS1 2>&1
status=$?
say "command exited with $status"
dmesg >/run-share/dmesg.txt
echo $status >/run-share/rc
sync
while read -r tag path; do umount "$root$path"; done </run-share/dirs
umount /run-share
poweroff -f
