#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The eBPF side on Debian's 6.1 and 6.12 kernels: the recorder's test (test_llmtrace_record.sh) and the
# userspace mode's (test_llmcached_bpf_mode.sh), as root inside a VM booting each kernel
# (tests/vm/run.sh, guest half tests/vm/bpf-check.sh), one boot per kernel. 6.12 has the filemap access tracepoints, 6.1 takes reads from
# the syscall tracepoints. The workload files live on the guest's ext4 scratch disk. A skip inside the
# VM is a failure: BPF must work there.
set -euo pipefail
src=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
kernels=${LLMCACHE_VM_KERNELS:-"6.1 6.12"}
[ -x "$bin/llmtrace" ] || { echo "SKIP: llmtrace is not built here (no kernel BTF on the build machine)"; exit 77; }
for k in $kernels; do
	ls /boot/vmlinuz-"$k"[.-]*-amd64 >/dev/null 2>&1 || { echo "SKIP: Debian kernel $k not installed (run 'make deps')"; exit 77; }
done
fails=0
for k in $kernels; do
	out=$(LLMCACHE_BUILD=$(dirname "$bin") LLMCACHE_BIN="$bin" LLMCACHE_SRC="$src" "$src/tests/vm/run.sh" \
		--timeout 2700 "$k" -- bash "$src/tests/vm/bpf-check.sh" 2>&1) && rc=0 || rc=$?
	echo "== $k"
	echo "$out"
	[ $rc -eq 0 ] || { echo "FAIL: exit $rc on $k"; fails=$((fails + 1)); }
done
exit $fails
