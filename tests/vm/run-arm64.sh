#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run a command as root inside an arm64 VM: qemu-system-aarch64 (TCG, -M virt) booting one of Debian's
# arm64 kernels, with what scripts/cross-arm64.sh built into BUILD/arm64/. The arm64 counterpart of
# tests/vm/run.sh, with the same contract: the command's output comes back on stdout and its exit
# status is ours; exit 125 if the guest's kernel log shows BUG, WARNING, Oops, a soft lockup or a hung
# task, or if the guest does not finish within the timeout.
#
# The guest cannot use the host's root (amd64 programs), so its root is a minimal arm64 one assembled
# from Debian packages: an initramfs with busybox-static:arm64, the kernel package's virtio, 9p and
# ext4 modules and an init (written here); BUILD/arm64 is shared read-only over 9p at the same path,
# and the arm64 shared libraries it holds (sysroot/lib, copied from the host's multiarch libc6:arm64,
# libstdc++6:arm64, ...) are linked into /lib, so the cross-built programs run from there as built.
# The guest also has a fresh ext4 scratch disk on virtio-blk at $LLMCACHE_SCRATCH (/run/scratch),
# $LLMCACHE_KO (BUILD/arm64/kmod-RELEASE/llmcache.ko) and $LLMCACHE_BIN (BUILD/arm64/user/bin).
# The CPU is a Cortex-A57 (LLMCACHE_VM_CPU overrides): "max" emulates pointer authentication, which
# makes TCG several times slower for no coverage the module needs.
#
# Usage: tests/vm/run-arm64.sh [--mem 1G] [--timeout 300] [--disk 512M] [--smp 2] KERNEL -- COMMAND [ARG...]
#   KERNEL: a version prefix (6.1, 6.12) or a full release (6.12.117+deb12-arm64) in BUILD/arm64/debian.
#   BUILD is $LLMCACHE_BUILD (default: build). The command runs under busybox's sh.
# Example: tests/vm/run-arm64.sh 6.12 -- sh -c 'insmod $LLMCACHE_KO && cat /sys/kernel/llmcache/hook_mode'
set -euo pipefail

mem=1G timeout=300 disk=512M smp=2 tcg_thread=${LLMCACHE_VM_TCG_THREAD:-single} cpu=${LLMCACHE_VM_CPU:-cortex-a57}
usage() { sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--mem) mem=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--disk) disk=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	-h|--help) usage ;;
	--) usage ;;
	-*) echo "run-arm64.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -ge 3 ] && [ "$2" = "--" ] || usage
want=$1; shift 2

src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/vm/common.sh
. "$src/tests/vm/common.sh"
build=$(realpath -m "${LLMCACHE_BUILD:-$src/build}")
arm64=$build/arm64
root=$arm64/debian

release=
for k in "$root"/boot/vmlinuz-*-arm64; do
	[ -e "$k" ] || continue
	r=${k#"$root"/boot/vmlinuz-}
	case $r in "$want"|"$want".*-arm64|"$want"-*-arm64) release=$r ;; esac
done
if [ -z "$release" ] || [ ! -d "$root/lib/modules/$release" ]; then
	echo "run-arm64.sh: no Debian arm64 kernel $want in $root; run scripts/cross-arm64.sh $build $want" >&2
	exit 2
fi
for tool in qemu-system-aarch64 mkfs.ext4 cpio xz zstd modprobe; do
	command -v "$tool" >/dev/null || { echo "run-arm64.sh: $tool not found; run scripts/install-deps.sh cross/arm64" >&2; exit 2; }
done
[ -x "$root/bin/busybox" ] || { echo "run-arm64.sh: no arm64 busybox in $root; run scripts/cross-arm64.sh" >&2; exit 2; }

vmdir=$arm64/vm/$release
mkdir -p "$vmdir" "$arm64/vm/runs"

# Initramfs: busybox, the modules (decompressed, in dependency order), the init. Rebuilt when this
# script changes.
initrd=$vmdir/initramfs.cpio.gz
if [ ! -s "$initrd" ] || [ "$0" -nt "$initrd" ]; then
	stage=$(mktemp -d "$vmdir/initramfs.XXXXXX")
	mkdir -p "$stage"/{bin,dev,proc,sys,run,tmp,lib,modules}
	cp "$root/bin/busybox" "$stage/bin/busybox"
	vm_stage_modules "$stage" "$release" "$root" virtio_pci virtio_blk ext4 9pnet_virtio 9p
	cat >"$stage/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
ln -sf /proc/self/fd /dev/fd
for m in $(cat /modules/order); do insmod /modules/$m || echo "initramfs: insmod $m failed"; done
arm64=$(sed -n 's/.*llmvm_arm64=\([^ ]*\).*/\1/p' /proc/cmdline)
mkdir -p /run/vm /run/scratch /run/tmp /sys/fs/cgroup "$arm64"
mount -t cgroup2 cgroup2 /sys/fs/cgroup
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /run/vm &&
	mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose arm64 "$arm64" &&
	mount -t ext4 /dev/vda /run/scratch; then
	ln -s "$arm64/sysroot/lib/ld-linux-aarch64.so.1" /lib/ld-linux-aarch64.so.1
	ln -s "$arm64/sysroot/lib/aarch64-linux-gnu" /lib/aarch64-linux-gnu
	sh /run/vm/cmd </dev/null >/run/vm/out 2>&1
	echo $? >/run/vm/rc
	dmesg >/run/vm/dmesg
	umount /run/scratch
	umount /run/vm
else
	echo "initramfs: mounting the run directory, $arm64 or the scratch disk failed"
fi
sync
poweroff -f
INIT
	chmod +x "$stage/init"
	(cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) >"$initrd.tmp"
	mv "$initrd.tmp" "$initrd"
	rm -rf "$stage"
fi

run=$(mktemp -d "$arm64/vm/runs/run.XXXXXX")
trap '[ -n "${LLMCACHE_VM_KEEP:-}" ] || rm -rf "$run"' EXIT
truncate -s "$disk" "$run/scratch.img"
mkfs.ext4 -q -F -L llmcache-scratch "$run/scratch.img"

# The command, with the environment the guest needs (the host's PATH and working directory mean
# nothing there).
{
	echo "cd /run/tmp"
	echo "export PATH=/bin"
	{ env | grep -E '^LLMCACHE_[A-Z_]*=' | grep -vE '^LLMCACHE_(BIN|KO|SCRATCH)=' || true; } |
		while IFS= read -r kv; do echo "export ${kv%%=*}='${kv#*=}'"; done
	echo "export LLMCACHE_KO=$arm64/kmod-$release/llmcache.ko LLMCACHE_BIN=$arm64/user/bin"
	echo "export LLMCACHE_SCRATCH=/run/scratch TMPDIR=/run/tmp LLMCACHE_VM_KERNEL=$release"
	printf 'exec'; printf " '%s'" "$@"; echo
} >"$run/cmd"

start=$(date +%s.%N)
set +e
timeout --foreground -k 10 "$timeout" qemu-system-aarch64 -M virt -cpu "$cpu" -accel "tcg,thread=$tcg_thread" \
	-m "$mem" -smp "$smp" -nographic -no-reboot -monitor none -serial "file:$run/console.log" \
	-kernel "$root/boot/vmlinuz-$release" -initrd "$initrd" \
	-append "console=ttyAMA0 panic=-1 watchdog_thresh=30 rcupdate.rcu_cpu_stall_timeout=120 llmvm_arm64=$arm64" \
	-virtfs "local,path=$arm64,mount_tag=arm64,security_model=none,readonly=on,multidevs=remap" \
	-virtfs "local,path=$run,mount_tag=out,security_model=none" \
	-drive "file=$run/scratch.img,if=virtio,format=raw,cache=unsafe" >"$run/qemu.log" 2>&1
qemu_rc=$?
set -e
vm_verdict run-arm64.sh "$release" "$run" "$qemu_rc" "$timeout" "$start"
