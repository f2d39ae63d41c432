#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The llmtrace recorder's test (test_llmtrace_record.sh) as root inside a VM booting Debian's 6.1 and
# 6.12 kernels (tests/vm/run.sh): 6.12 has the filemap access tracepoints, 6.1 takes reads from the
# syscall tracepoints. The workload files live on the guest's ext4 scratch disk.
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
	out=$(LLMCACHE_BUILD=$(dirname "$bin") LLMCACHE_BIN="$bin" "$src/tests/vm/run.sh" --timeout 1500 "$k" -- \
		bash "$src/tests/integration/test_llmtrace_record.sh" 2>&1) && rc=0 || rc=$?
	echo "== llmtrace record on $k: $(grep -E '^(PASS|SKIP)|check\(s\) failed|^run\.sh' <<<"$out" | tr '\n' ' ')"
	if [ $rc -ne 0 ]; then
		echo "FAIL: exit $rc on $k"
		echo "$out" | tail -n 40
		fails=$((fails + 1))
	fi
done
exit $fails
