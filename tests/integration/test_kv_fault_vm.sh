#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Storage faults under llmcached's KV service: tests/vm/kv-fault-check.sh as root in a VM booting
# Debian's 6.12 kernel (tests/vm/run.sh), whose device-mapper (flakey, delay, error) fails, corrupts
# and removes the KV device under the running daemon. The device is dm over a loop device on a file of
# the VM's virtio scratch disk, emulated by qemu: not real hardware. Fails if a row the daemon serves
# is wrong, a token whose spill failed is lost, the daemon dies or hangs, its log does not name the
# device and the error, or the guest's kernel log shows a BUG, WARNING, Oops or hung task.
set -euo pipefail
src=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
build=$(dirname "$bin")
k=6.12

if ! ls /boot/vmlinuz-"$k"[.-]*-amd64 >/dev/null 2>&1; then
	echo "SKIP: Debian kernel $k image not installed (run 'make deps')"
	exit 77
fi
[ -x "$bin/llmcached" ] || { echo "FAIL: $bin/llmcached is missing"; exit 1; }
[ -x "$build/tests/kv_fault_client" ] || { echo "FAIL: $build/tests/kv_fault_client is missing (build the project)"; exit 1; }
command -v dmsetup >/dev/null || { echo "FAIL: dmsetup is not installed (run 'make deps')"; exit 1; }

start=$SECONDS
out=$(LLMCACHE_BUILD="$build" LLMCACHE_BIN="$bin" "$src/tests/vm/run.sh" --timeout 600 "$k" -- \
	bash "$src/tests/vm/kv-fault-check.sh" 2>&1) && rc=0 || rc=$?
echo "$out"
echo "== storage faults on $k: exit $rc in $((SECONDS - start)) s"
if [ $rc -ne 0 ] || ! grep -q '^PASS$' <<<"$out"; then
	echo "FAIL: the fault-injection run in the VM exited $rc"
	exit 1
fi
echo "PASS: llmcached under I/O errors, a failing, corrupting, lying and vanishing KV device on $k"
