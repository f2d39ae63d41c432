#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcache.ko on Debian's 6.1 and 6.12 kernels: builds the module against both kernels' headers and the
# kselftest suite, then runs the suite as root in a VM booting each kernel (tests/vm/run.sh), which
# fails on a BUG, WARNING, Oops, soft lockup or hung task in the guest's kernel log; also checks the
# runner itself, llmcachectl's module commands (tests/vm/llmcachectl-check.sh), random ioctls and sysfs
# writes from privileged and unprivileged processes (tests/vm/fuzz-check.sh) and pins under a memory
# cgroup's limit giving way to the engine's anonymous memory (tests/vm/memcg-oom-check.sh) on the newer
# kernel. The suite runs on the kernels of LLMCACHE_KMOD_FULL, by default all but the newest of two or
# more: on that one test_dkms_vm.sh runs it with the module DKMS built from the same source.
set -euo pipefail
src=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
build=$(dirname "$bin")
kernels=${LLMCACHE_VM_KERNELS:-"6.1 6.12"}
full=${LLMCACHE_KMOD_FULL-${kernels% *}}

for k in $kernels; do
	if ! ls /boot/vmlinuz-"$k"[.-]*-amd64 >/dev/null 2>&1 || ! ls -d /usr/src/linux-headers-"$k"[.-]*-amd64 >/dev/null 2>&1; then
		echo "SKIP: Debian kernel $k image or headers not installed (run 'make deps')"
		exit 77
	fi
done
for tool in llmworkload llmcachectl; do
	[ -x "$bin/$tool" ] || { echo "FAIL: $bin/$tool is missing"; exit 1; }
done

make -s -C "$src" kmod BUILD="$build" >/dev/null
make -s -C "$src/tests/kselftest" BUILD="$build" >/dev/null

fails=0
# The runner itself: output and exit status come back, and a warning in the guest's log fails the run.
k=${kernels##* }
out=$(LLMCACHE_BUILD="$build" "$src/tests/vm/run.sh" "$k" -- sh -c 'echo runner-output; exit 7' 2>&1) && rc=0 || rc=$?
[ $rc -eq 7 ] && grep -q '^runner-output$' <<<"$out" || { echo "FAIL: run.sh lost the output or status ($rc): $out"; fails=$((fails + 1)); }
out=$(LLMCACHE_BUILD="$build" "$src/tests/vm/run.sh" "$k" -- sh -c 'echo "WARNING: llmcache runner self-test" >/dev/kmsg' 2>&1) && rc=0 || rc=$?
[ $rc -eq 125 ] && grep -q 'not clean' <<<"$out" || { echo "FAIL: run.sh missed a WARNING in the guest log ($rc)"; fails=$((fails + 1)); }

# llmcachectl's module commands, inside the VM.
out=$(LLMCACHE_BUILD="$build" LLMCACHE_BIN="$bin" "$src/tests/vm/run.sh" "$k" -- sh "$src/tests/vm/llmcachectl-check.sh" 2>&1) && rc=0 || rc=$?
echo "== llmcachectl on $k: $(tail -n 2 <<<"$out" | head -n 1)"
[ $rc -eq 0 ] || { echo "FAIL: llmcachectl in the VM ($rc): $out"; fails=$((fails + 1)); }

# llmcached's KV statistics under /sys/kernel/llmcache/kv/, inside the VM.
out=$(LLMCACHE_BUILD="$build" LLMCACHE_BIN="$bin" "$src/tests/vm/run.sh" "$k" -- sh "$src/tests/vm/kv-stats-check.sh" 2>&1) && rc=0 || rc=$?
echo "== llmcached KV stats on $k: $(tail -n 2 <<<"$out" | head -n 1)"
[ $rc -eq 0 ] || { echo "FAIL: KV stats in the VM ($rc): $out"; fails=$((fails + 1)); }

# Random ioctls and sysfs writes for 60 s, as root, as nobody and as root without CAP_SYS_ADMIN.
out=$(LLMCACHE_BUILD="$build" LLMCACHE_BIN="$bin" "$src/tests/vm/run.sh" --timeout 240 "$k" -- sh "$src/tests/vm/fuzz-check.sh" 2>&1) && rc=0 || rc=$?
echo "== fuzz on $k: $(grep '^fuzz:' <<<"$out" || true) $(grep '^run\.sh:' <<<"$out" || true)"
[ $rc -eq 0 ] || { echo "FAIL: the fuzz in the VM ($rc): $out"; fails=$((fails + 1)); }

# An engine's anonymous memory growing into its cgroup's pinned room: no OOM kill, the pins give way.
out=$(LLMCACHE_BUILD="$build" LLMCACHE_BIN="$bin" "$src/tests/vm/run.sh" --timeout 240 "$k" -- sh "$src/tests/vm/memcg-oom-check.sh" 2>&1) && rc=0 || rc=$?
echo "== pins under a memory cgroup on $k:"
grep -E '^(pread|mmap|mmap paused|lower):' <<<"$out" | sed 's/^/   /' || true
[ $rc -eq 0 ] || { echo "FAIL: pins under a memory cgroup in the VM ($rc): $out"; fails=$((fails + 1)); }

for k in $full; do
	echo "== kselftest on $k"
	out=$(LLMCACHE_BUILD="$build" "$src/tests/vm/run.sh" --timeout 900 "$k" -- "$build/kselftest/llmcache_test" 2>&1) && rc=0 || rc=$?
	echo "$out" | grep -E '^(not ok|ok|# (FAIL|PASS|Totals)|run\.sh)|Expected|decoder_classes:' || true
	if [ $rc -ne 0 ]; then
		echo "FAIL: kselftest on $k exited $rc"
		echo "$out" | tail -n 80
		fails=$((fails + 1))
	elif ! grep -q '^# Totals: pass:[1-9][0-9]* fail:0 .* skip:0 error:0' <<<"$out"; then
		echo "FAIL: kselftest on $k did not run every test: $(grep '^# Totals' <<<"$out")"
		fails=$((fails + 1))
	fi
done
[ $fails -eq 0 ] && echo "PASS: llmcache.ko on $kernels, kselftest on ${full:-none}, clean kernel logs"
exit $fails
