#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run a command as root inside a VM booting one of Debian's packaged kernels under qemu (TCG).
# The guest sees the host's root filesystem read-only over 9p (same paths, same binaries), a fresh ext4
# scratch disk on virtio-blk at $LLMCACHE_SCRATCH (/run/scratch), and $LLMCACHE_KO, the llmcache.ko
# built for its kernel (make kmod). The command's output comes back on stdout and its exit status is
# ours. Fails (exit 125) if the guest's kernel log shows BUG, WARNING, Oops, a soft lockup or a hung
# task, or if the guest does not finish within the timeout.
#
# no_timer_check: under TCG on a loaded host the boot-time IO-APIC timer check can fail and panic.
# Both vCPUs run in one host thread (tcg,thread=single; LLMCACHE_VM_TCG_THREAD=multi overrides): see
# Documentation/admin-guide.md for why.
#
# Usage: tests/vm/run.sh [--mem 1G] [--timeout 300] [--disk 512M] [--disk-read-bps N] [--smp 2] KERNEL -- COMMAND [ARG...]
#   --disk-read-bps: throttle reads from the scratch disk to N bytes/s (qemu throttling.bps-read).
#   KERNEL: a version prefix (6.1, 6.12) or a full release (6.1.0-56-amd64) from /boot/vmlinuz-*.
# Example: tests/vm/run.sh 6.12 -- sh -c 'insmod $LLMCACHE_KO && cat /sys/kernel/llmcache/hook_mode'
set -euo pipefail

mem=1G timeout=300 disk=512M disk_throttle= smp=2 tcg_thread=${LLMCACHE_VM_TCG_THREAD:-single}
usage() { sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--mem) mem=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--disk) disk=$2; shift 2 ;;
	--disk-read-bps) disk_throttle=,throttling.bps-read=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	-h|--help) usage ;;
	--) usage ;;
	-*) echo "run.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -ge 3 ] && [ "$2" = "--" ] || usage
want=$1; shift 2

src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/vm/common.sh
. "$src/tests/vm/common.sh"
build=$(realpath -m "${LLMCACHE_BUILD:-$src/build}")

# The newest packaged generic amd64 kernel whose release starts with $want.
release=
for k in /boot/vmlinuz-*; do
	r=${k#/boot/vmlinuz-}
	case $r in "$want"|"$want".*-amd64|"$want"-*-amd64) ;; *) continue ;; esac
	case $r in *-cloud-amd64|*-rt-amd64) continue ;; esac
	[ -d "/lib/modules/$r" ] && release=$r
done
if [ -z "$release" ]; then
	echo "run.sh: no Debian kernel $want in /boot (have: $(ls /boot | grep vmlinuz- | tr '\n' ' ')); run make deps" >&2
	exit 2
fi
for tool in qemu-system-x86_64 mkfs.ext4 cpio xz zstd; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found; run make deps" >&2; exit 2; }
done

vmdir=$build/vm/$release
mkdir -p "$vmdir" "$build/vm/runs"

# Initramfs: static busybox, the 9p and virtio modules (decompressed), an init that mounts the host's
# root and switch_roots into tests/vm/guest-init.sh. Rebuilt when this script changes.
initrd=$vmdir/initramfs.cpio.gz
if [ ! -s "$initrd" ] || [ "$0" -nt "$initrd" ]; then
	stage=$(mktemp -d "$vmdir/initramfs.XXXXXX")
	mkdir -p "$stage"/{bin,dev,proc,sys,newroot,modules}
	cp /bin/busybox "$stage/bin/busybox"
	vm_stage_modules "$stage" "$release" / virtio_pci 9pnet_virtio 9p
	cat >"$stage/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do insmod /modules/$m || echo "initramfs: insmod $m failed"; done
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose host /newroot; then
	echo "initramfs: cannot mount the host root over 9p"; echo o >/proc/sysrq-trigger
fi
stage2=$(sed -n 's/.*llmvm_init=\([^ ]*\).*/\1/p' /proc/cmdline)
umount /proc
exec switch_root /newroot /bin/sh "$stage2"
INIT
	chmod +x "$stage/init"
	(cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) >"$initrd.tmp"
	mv "$initrd.tmp" "$initrd"
	rm -rf "$stage"
fi

run=$(mktemp -d "$build/vm/runs/run.XXXXXX")
trap '[ -n "${LLMCACHE_VM_KEEP:-}" ] || rm -rf "$run"' EXIT
truncate -s "$disk" "$run/scratch.img"
mkfs.ext4 -q -F -L llmcache-scratch "$run/scratch.img"

# The command, with the caller's working directory and the environment the guest needs.
{
	echo "cd $(printf %q "$PWD")"
	echo "export PATH=$(printf %q "$PATH")"
	{ env | grep -E '^LLMCACHE_[A-Z_]*=' || true; } | while IFS= read -r kv; do echo "export ${kv%%=*}=$(printf %q "${kv#*=}")"; done
	echo "export LLMCACHE_KO=$(printf %q "$build/kmod-$release/llmcache.ko")"
	echo "export LLMCACHE_SCRATCH=/run/scratch TMPDIR=/run/tmp LLMCACHE_VM_KERNEL=$release"
	printf 'exec'; printf ' %q' "$@"; echo
} >"$run/cmd"

start=$(date +%s.%N)
set +e
timeout --foreground -k 10 "$timeout" qemu-system-x86_64 -accel "tcg,thread=$tcg_thread" -m "$mem" -smp "$smp" -nographic \
	-no-reboot -monitor none -serial "file:$run/console.log" \
	-kernel "/boot/vmlinuz-$release" -initrd "$initrd" \
	-append "console=ttyS0 panic=-1 no_timer_check watchdog_thresh=30 rcupdate.rcu_cpu_stall_timeout=120 llmvm_init=$src/tests/vm/guest-init.sh llmvm_run=$run" \
	-virtfs "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap" \
	-virtfs "local,path=$run,mount_tag=out,security_model=none" \
	-drive "file=$run/scratch.img,if=virtio,format=raw,cache=unsafe$disk_throttle" >"$run/qemu.log" 2>&1
qemu_rc=$?
set -e
vm_verdict run.sh "$release" "$run" "$qemu_rc" "$timeout" "$start"
