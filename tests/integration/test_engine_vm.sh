#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A real engine beside llmcache.ko in the VM on Debian's newer kernel (tests/vm/engine-check.sh has what
# is checked): llama.cpp's CPU build (node-llama-cpp, installed from npm into the build directory by
# scripts/engine/install.sh; the guest sees the host's root, node included) on a 64 MiB model under a
# memory cgroup, without and with the module. Without node >= 20 and npm, or without the kernel, the
# test says what to install and skips.
set -euo pipefail
src=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
build=$(dirname "$bin")
k=${LLMCACHE_VM_KERNELS:-"6.1 6.12"}
k=${k##* }
if ! ls /boot/vmlinuz-"$k"[.-]*-amd64 >/dev/null 2>&1 || ! ls -d /usr/src/linux-headers-"$k"[.-]*-amd64 >/dev/null 2>&1; then
	echo "SKIP: Debian kernel $k image or headers not installed (run 'make deps')"
	exit 77
fi
rc=0
"$src/scripts/engine/install.sh" "$(realpath -m "$build/engine")" || rc=$?
if [ $rc -eq 3 ]; then echo "SKIP: no real engine (the line above says what to install)"; exit 77; fi
[ $rc -eq 0 ] || { echo "FAIL: installing node-llama-cpp into $build/engine failed (rc $rc)"; exit 1; }
make -s -C "$src" kmod BUILD="$build" >/dev/null
out=$(LLMCACHE_BUILD="$build" LLMCACHE_BIN="$bin" "$src/tests/vm/run.sh" --mem 1G --timeout 1200 "$k" -- \
	sh "$src/tests/vm/engine-check.sh" 2>&1) && rc=0 || rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the engine beside llmcache.ko on $k (rc $rc)"; exit 1; }
