#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs a command inside a throw-away qemu guest (TCG, no KVM) whose Debian kernel has
# soft-RoCE device rxe0 up, so the verbs tests run against real libibverbs on a machine
# without RDMA hardware, and has veth, bridge and sch_netem loaded for the netem tests.
# doc/testing-verbs.md explains how and why.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: tests/verbs/rxe_vm.sh [OPTIONS] -- COMMAND [ARGS...]
       tests/verbs/rxe_vm.sh --prepare
Boots a qemu guest that sees the host's / read-only at the same paths, with rxe0 (soft-RoCE)
up and veth, bridge and sch_netem loaded, runs COMMAND there as root with the caller's environment, streams its output, and exits
with COMMAND's exit status.
  --dir DIR       DIR is writable in the guest (repeatable); the first one is COMMAND's
                  working directory unless --cwd is given
  --cwd DIR       working directory of COMMAND (default: first --dir, else the current one)
  --timeout S     bound on the whole guest run, boot included (default 1800)
  --boot-timeout S  a guest not running COMMAND after S seconds is stopped and booted once
                  more (default 120; a boot takes about 10)
  --mem MB        guest memory (default 2048)
  --smp N         guest vCPUs (default 2)
  --mtu N         MTU of the netdev under rxe0 (default 1500, which gives an IB MTU of 1024)
  --prepare       only install the packages and build the cached kernel and initramfs
  --no-tty        COMMAND's output goes through a pipe instead of the guest's serial tty,
                  so tools write plain logs (no progress lines or colours); stdio buffers
                  more, PYTHONUNBUFFERED=1 helps Python tools
  --verbose       print the guest's console log and the wall time afterwards
exit status: COMMAND's own; 124 the guest run timed out; 125 the guest failed to be built,
  to boot or to set up rxe0 (the console's tail is printed); 130 interrupted.
in the guest: RXE_VM=1, BMI_VERBS_DEVICE=rxe0, BMI_VERBS_GID_INDEX (the RoCEv2 GID index of
  the IPv4 address), RXE_VM_IP (that address, for rdma_cm), HOME=/tmp; /tmp is the guest's.
environment: BMI_RXE_VM_CACHE  cache directory (default /var/tmp/libbmi-rxe-vm)
             BMI_RXE_VM_KERNEL kernel package (default: what linux-image-amd64 depends on)
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${BMI_RXE_VM_CACHE:-/var/tmp/libbmi-rxe-vm}
guest_ip=10.99.0.1
dirs=()
cwd=""
limit=1800
boot_limit=120
mem=2048
smp=2
mtu=1500
prepare_only=0
verbose=0
tty=1
# Guest modules in load order; their dependencies come along through modules.dep.
# crc32_generic: rxe needs the crc32 shash when rxe0 is created. rdma_ucm: for librdmacm.
# veth, bridge, sch_netem: the netem suite's namespaces, their links and the faults on them.
# tls and the AES-GCM modules: kernel TLS, measured against libbmi's own records
# (doc/perf/kernel-tls.md); the kernel loads no crypto module the initramfs lacks.
modules=(virtio_pci 9pnet_virtio 9p dummy crc32_generic rdma_rxe rdma_ucm veth bridge sch_netem
    aesni-intel ghash-clmulni-intel gcm ghash-generic tls)
# BMI_GUEST_PACKAGES, the host's packages this needs, are listed with all the others.
source "$here/../../scripts/lib.sh"

fail() {
    echo "rxe_vm: $*" >&2
    exit 125
}

while (($#)); do
    case $1 in
        --dir) dirs+=("$(realpath -e "${2:?--dir needs a directory}")") || fail "no directory $2"
               shift 2 ;;
        --cwd) cwd=$(realpath -e "${2:?--cwd needs a directory}") || fail "no directory $2"
               shift 2 ;;
        --timeout) limit=${2:?--timeout needs seconds}; shift 2 ;;
        --boot-timeout) boot_limit=${2:?--boot-timeout needs seconds}; shift 2 ;;
        --mem) mem=${2:?--mem needs megabytes}; shift 2 ;;
        --smp) smp=${2:?--smp needs a count}; shift 2 ;;
        --mtu) mtu=${2:?--mtu needs a number}; shift 2 ;;
        --prepare) prepare_only=1; shift ;;
        --verbose) verbose=1; shift ;;
        --no-tty) tty=0; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) usage >&2; fail "unknown option $1" ;;
    esac
done
((prepare_only || $#)) || { usage >&2; fail "no command given"; }
((EUID == 0)) || fail "must run as root (9p passthrough of / and apt-get)"

# apt waits for a lock held by another apt instead of failing at once.
apt_get() {
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get -q -o DPkg::Lock::Timeout=300 "$@"
}

install_host_packages() {
    local missing=() pkg
    for pkg in "${BMI_GUEST_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$pkg")
    done
    ((${#missing[@]})) || return 0
    echo "rxe_vm: installing ${missing[*]}" >&2
    # Missing or stale package lists: update once and try again.
    if ! apt_get install -y --no-install-recommends "${missing[@]}" >"$cache/apt.log" 2>&1; then
        apt_get update >>"$cache/apt.log" 2>&1 || true
        apt_get install -y --no-install-recommends "${missing[@]}" >>"$cache/apt.log" 2>&1 ||
            { tail -20 "$cache/apt.log" >&2; fail "apt-get install ${missing[*]} failed"; }
    fi
}

# The generic amd64 flavour: cloud-amd64 has neither rdma_rxe nor 9p.
kernel_package() {
    apt-cache depends linux-image-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}

# Copies module file $1 (relative to $2) decompressed into the initramfs tree $3.
copy_module() {
    local dest=$3/${1%.ko*}.ko
    mkdir -p "${dest%/*}"
    case $1 in
        *.xz) xz -dc "$2/$1" ;;
        *.zst) zstd -qdc "$2/$1" ;;
        *.gz) gzip -dc "$2/$1" ;;
        *) cat "$2/$1" ;;
    esac >"$dest"
}

# build_image DIR: kernel and initramfs into DIR, from a kernel .deb and busybox-static that
# are unpacked, not installed (installing busybox-static would remove a busybox package).
build_image() {
    local out=$1 pkg kver work mods tree busybox module line file
    pkg=${BMI_RXE_VM_KERNEL:-$(kernel_package)}
    if [[ -z $pkg ]]; then
        apt_get update >&2 || true
        pkg=$(kernel_package)
    fi
    [[ -n $pkg ]] || fail "no linux-image package known to apt"
    kver=${pkg#linux-image-}
    kver=${kver%-unsigned}
    echo "rxe_vm: building the guest from $pkg" >&2
    work=$(mktemp -d "$cache/build.XXXXXX")
    # An archive that moved on to a newer kernel build needs fresh lists.
    if ! (cd "$work" && apt_get download "$pkg" busybox-static >/dev/null 2>&1) &&
        ! (cd "$work" && apt_get update >/dev/null 2>&1 &&
            apt_get download "$pkg" busybox-static >/dev/null); then
        rm -rf "$work"
        fail "apt-get download $pkg busybox-static failed"
    fi
    dpkg -x "$work/${pkg}"_*.deb "$work/kernel"
    dpkg -x "$work"/busybox-static_*.deb "$work/busybox"
    mods=$work/kernel/lib/modules/$kver
    tree=$work/initramfs
    busybox=$work/busybox/bin/busybox
    if [[ ! -f $work/kernel/boot/vmlinuz-$kver ]]; then
        rm -rf "$work"
        fail "$pkg has no vmlinuz-$kver"
    fi
    # The .deb ships no modules.dep.
    "$busybox" depmod -b "$work/kernel" "$kver"
    mkdir -p "$tree"/{bin,proc,sys,dev,tmp,lib/modules/"$kver"}
    cp "$busybox" "$tree/bin/busybox"
    cp "$here/rxe_vm_init.sh" "$tree/init"
    chmod 755 "$tree/init"
    : >"$tree/modules.load"
    for module in "${modules[@]}"; do
        grep -qE "/$module\.ko\$" "$mods/modules.builtin" && continue
        line=$(grep -E "/$module\.ko(\.[a-z]+)?:" "$mods/modules.dep") ||
            { rm -rf "$work"; fail "$pkg has no module $module"; }
        echo "$module" >>"$tree/modules.load"
        for file in ${line%%:*} ${line#*:}; do
            copy_module "$file" "$mods" "$tree/lib/modules/$kver"
        done
    done
    cp "$mods/modules.builtin" "$tree/lib/modules/$kver/"
    "$busybox" depmod -b "$tree" "$kver"
    mkdir -p "$work/image"
    cp "$work/kernel/boot/vmlinuz-$kver" "$work/image/vmlinuz"
    (cd "$tree" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/image/initrd"
    echo "$pkg" >"$work/image/kernel-package"
    rm -rf "$out"
    mv "$work/image" "$out"
    rm -rf "$work"
}

# Sets image: the cached guest for this version of the harness and this kernel choice.
# A lock keeps concurrent runs from building the same image twice.
prepare_image() {
    local key
    key=$(cat "$here/rxe_vm.sh" "$here/rxe_vm_init.sh" <(echo "${BMI_RXE_VM_KERNEL:-}") |
        sha256sum | cut -c1-16)
    image=$cache/image-$key
    exec 9>"$cache/lock"
    flock -w 900 9 || fail "timed out waiting for $cache/lock"
    [[ -f $image/initrd ]] || build_image "$image"
    touch "$image"
    # Other harness versions' images go after a week unused.
    find "$cache" -maxdepth 1 -name 'image-*' -mtime +7 -exec rm -rf {} + 2>/dev/null || true
    exec 9>&-
}

mkdir -p "$cache"
install_host_packages
prepare_image
if ((prepare_only)); then
    echo "rxe_vm: ready: $image ($(cat "$image/kernel-package"))" >&2
    exit 0
fi

# The run directory is shared read-write with the guest: conf, dirs and cmd.sh go in, rc,
# dmesg.txt come back. It is kept as last-run/ with console.log for a post-mortem.
run=$(mktemp -d "$cache/run.XXXXXX")
qemu_pid=""
stop_qemu() {
    if [[ -n $qemu_pid ]]; then
        kill -TERM "$qemu_pid" 2>/dev/null || true
        wait "$qemu_pid" 2>/dev/null || true
        qemu_pid=""
    fi
}
keep_run() {
    stop_qemu
    rm -rf "$cache/last-run"
    mv "$run" "$cache/last-run" 2>/dev/null || true
}
trap keep_run EXIT
trap 'exit 130' INT TERM HUP

[[ -n $cwd ]] || cwd=${dirs[0]:-$PWD}
echo "RXE_MTU=$mtu RXE_IP=$guest_ip RXE_HOSTNAME=$(hostname)" >"$run/conf"
for i in "${!dirs[@]}"; do echo "dir$i ${dirs[$i]}"; done >"$run/dirs"
# The caller's environment, less what describes the host's shell or terminal.
{
    echo '#!/bin/bash'
    for var in $(compgen -e); do
        case $var in
            PWD|OLDPWD|SHLVL|_|TMPDIR|TERM|HOME|RXE_VM*|BMI_VERBS_DEVICE|BMI_VERBS_GID_INDEX)
                continue ;;
        esac
        printf 'export %s=%q\n' "$var" "${!var}"
    done
    printf 'export RXE_VM=1 RXE_VM_IP=%s BMI_VERBS_DEVICE=rxe0 BMI_VERBS_GID_INDEX\n' "$guest_ip"
    echo 'export HOME=/tmp TERM=dumb'
    # ibv_reg_mr pins memory.
    echo 'ulimit -l unlimited'
    printf 'cd -- %q || exit 125\n' "$cwd"
    if ((tty)); then
        printf 'exec'
        printf ' %q' "$@"
        echo
    else
        echo 'set -o pipefail'
        printf '%q ' "$@"
        echo '2>&1 | cat'
    fi
} >"$run/cmd.sh"

qemu=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem"
      -nodefaults -display none -no-reboot -nic none
      -kernel "$image/vmlinuz" -initrd "$image/initrd"
      -append "console=ttyS0 quiet loglevel=4 panic=-1 clocksource=tsc tsc=reliable"
      -serial "file:$run/console.log"
      -chardev stdio,id=out,signal=off -serial chardev:out
      -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
      -virtfs "local,path=${run//,/,,},mount_tag=rxevmrun,security_model=none")
for i in "${!dirs[@]}"; do
    qemu+=(-virtfs
           "local,path=${dirs[$i]//,/,,},mount_tag=dir$i,security_model=none,multidevs=remap")
done

# boot ATTEMPT: runs the guest once; sets qemu_status (124: timed out, "hung": stopped because
# it did not reach the command within boot_limit seconds).
boot() {
    local waited=0 remaining=$((limit - SECONDS))
    ((remaining > 0)) || { qemu_status=124; return; }
    : >"$run/console.log"
    # qemu dies with its parent (timeout), and timeout with this script, even on SIGKILL.
    setpriv --pdeathsig TERM -- timeout -k 10 "$remaining" \
        setpriv --pdeathsig KILL -- "${qemu[@]}" </dev/null &
    qemu_pid=$!
    # A TCG guest has been seen, rarely, to spin before printing anything at all; one that is
    # not running the command after boot_limit seconds is stopped so that it can boot again.
    while ! grep -q 'running the command' "$run/console.log" && kill -0 "$qemu_pid" 2>/dev/null
    do
        if ((waited++ >= boot_limit)); then
            stop_qemu
            cp "$run/console.log" "$run/console-hung-$1.log"
            qemu_status=hung
            return
        fi
        sleep 1
    done
    qemu_status=0
    wait "$qemu_pid" || qemu_status=$?
    qemu_pid=""
}

SECONDS=0
started=$(date +%s%N)
for attempt in 1 2; do
    boot "$attempt"
    [[ $qemu_status == hung ]] || break
    echo "rxe_vm: the guest did not come up within ${boot_limit}s (attempt $attempt)" >&2
done
if ((verbose)); then
    cat "$run/console.log" >&2
    echo "rxe_vm: wall time $((($(date +%s%N) - started) / 1000000)) ms" >&2
fi
[[ -f $run/rc ]] && exit "$(cat "$run/rc")"
((verbose)) || tail -n 30 "$run/console.log" >&2
if [[ $qemu_status == 124 ]]; then
    echo "rxe_vm: the guest run timed out after ${limit}s" >&2
    exit 124
fi
[[ $qemu_status == hung ]] && fail "the guest did not come up in two boots; see $cache/last-run/"
fail "the guest ended without an exit status (qemu: $qemu_status); see $cache/last-run/console.log"
