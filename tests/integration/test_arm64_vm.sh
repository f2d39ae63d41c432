#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcache on arm64: scripts/cross-arm64.sh cross-builds the module against Debian's arm64 6.1 and 6.12
# headers, the tools and llmcached (cmake/aarch64-linux-gnu.cmake, multiarch libraries) and the
# kselftest binaries; every output must be an aarch64 ELF with the right vermagic. Then, in
# qemu-system-aarch64 (TCG, -M virt) booting Debian's arm64 kernels with a busybox root
# (tests/vm/run-arm64.sh): the runner's own contract (output, exit status, a WARNING in the guest's
# log fails the run), and on each kernel a smoke: load, the hooks it chose (kprobe on 6.1, tracepoint
# on 6.12), sysfs, register a file with the arm64 llmcachectl, read it, see the accesses, unload.
# Then the whole kselftest suite on the kernels of LLMCACHE_ARM64_FULL (default 6.12; "6.1 6.12" for
# both, "" for none), with a host thread per vCPU: about 7 minutes a kernel under aarch64 TCG on 2
# cores, where one thread times the module's load/unload churn out (Documentation/packaging.md, "arm64").
# Skips only without root (installing the cross toolchain and the arm64 libraries needs it).
set -euo pipefail
src=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
build=$(dirname "$bin")
full=${LLMCACHE_ARM64_FULL-6.12}

[ "$(id -u)" -eq 0 ] || { echo "SKIP: installing the arm64 cross toolchain and libraries needs root"; exit 77; }
. "$(dirname "$0")/check.sh"

start=$(date +%s)
"$src/scripts/cross-arm64.sh" --build-type None "$build" 6.1 6.12 >"$build/arm64-cross.log" 2>&1 && rc=0 || rc=$?
if [ $rc -ne 0 ]; then
	tail -n 60 "$build/arm64-cross.log"
	echo "FAIL: scripts/cross-arm64.sh exited $rc (log: $build/arm64-cross.log)"
	exit 1
fi
echo "== cross-build (module for two kernels, tools, llmcached, kselftest): $(( $(date +%s) - start )) s"
arm64=$build/arm64
aarch64() { file -b "$1" | grep -q "ELF 64-bit LSB .*ARM aarch64"; }
releases=()
for k in 6.1 6.12; do
	r=
	for d in "$arm64"/kmod-"$k".*-arm64 "$arm64"/kmod-"$k"-*-arm64; do [ -f "$d/llmcache.ko" ] && r=${d##*/kmod-}; done
	check "llmcache.ko built for an arm64 $k kernel ($r)" test -n "$r"
	[ -n "$r" ] || continue
	releases+=("$r")
	ko=$arm64/kmod-$r/llmcache.ko
	check "the $r module is an aarch64 ELF" aarch64 "$ko"
	vermagic=$(modinfo -F vermagic "$ko")
	check "the $r module's vermagic is $r, aarch64 ($vermagic)" eval '[[ $vermagic == "$r "*" aarch64"* ]]'
done
for f in user/bin/llmcachectl user/bin/llmworkload user/bin/llmreplay user/bin/llmcached \
	kselftest/llmcache_test kselftest/llmcache_fuzz kselftest/llmcache_anon_grow; do
	check "$f is an aarch64 executable" aarch64 "$arm64/$f"
done
[ "$fails" -eq 0 ] || exit 1

work=$(mktemp -d "$arm64/test.XXXXXX") # under BUILD/arm64: the guest sees it over 9p
trap 'rm -rf "$work"' EXIT
run() { LLMCACHE_BUILD="$build" "$src/tests/vm/run-arm64.sh" "$@"; }

# The runner: output and exit status come back, and a warning in the guest's log fails the run.
k=${releases[-1]}
out=$(run "$k" -- sh -c 'echo runner-output; exit 7' 2>&1) && rc=0 || rc=$?
check "run-arm64.sh returns the guest's output and status (rc $rc)" \
	eval '[ $rc -eq 7 ] && grep -q "^runner-output$" <<<"$out"'
out=$(run "$k" -- sh -c 'echo "WARNING: llmcache runner self-test" >/dev/kmsg' 2>&1) && rc=0 || rc=$?
check "run-arm64.sh fails on a WARNING in the guest's log (rc $rc)" \
	eval '[ $rc -eq 125 ] && grep -q "not clean" <<<"$out"'

cat >"$work/smoke.sh" <<'SMOKE'
set -e
uname -m
insmod "$LLMCACHE_KO"
echo "hook_mode $(cat /sys/kernel/llmcache/hook_mode)"
for f in pin_budget stats/accesses; do echo "$f $(cat /sys/kernel/llmcache/$f)"; done
f=$LLMCACHE_SCRATCH/weights.bin
dd if=/dev/urandom of="$f" bs=1M count=4 2>/dev/null
"$LLMCACHE_BIN/llmcachectl" register "$f"
cat "$f" >/dev/null
cat "$f" >/dev/null
echo "registered $(cat /sys/kernel/llmcache/registered)"
"$LLMCACHE_BIN/llmcachectl" status --json | grep -o '"accesses":[0-9]*'
rmmod llmcache
test ! -e /sys/kernel/llmcache && echo unloaded
SMOKE
is_full() { local v; for v in $full; do [[ $1 == "$v".* || $1 == "$v"-* ]] && return 0; done; return 1; }
for r in "${releases[@]}"; do
	case $r in 6.1.*|6.1-*) hooks=kprobe ;; *) hooks=tracepoint ;; esac
	echo "== load / sysfs / register / unload smoke on $r"
	t0=$(date +%s)
	out=$(run "$r" -- sh "$work/smoke.sh" 2>&1) && rc=0 || rc=$?
	echo "$out" | sed 's/^/   /'
	check "smoke on $r exits 0 (rc $rc, $(( $(date +%s) - t0 )) s)" test $rc -eq 0
	check "the guest is aarch64" grep -qx aarch64 <<<"$out"
	check "the module loaded on $r and chose $hooks hooks" grep -qx "hook_mode $hooks" <<<"$out"
	check "sysfs reads on $r" eval 'grep -qE "^pin_budget [0-9]+$" <<<"$out" && grep -qx "stats/accesses 0" <<<"$out"'
	check "a file registered on $r" grep -qx 'registered 1' <<<"$out"
	check "the module saw its reads on $r" grep -qE '^"accesses":[1-9]' <<<"$out"
	check "the module unloaded on $r" grep -qx unloaded <<<"$out"
	if is_full "$r"; then
		echo "== kselftest on $r"
		t0=$(date +%s)
		out=$(LLMCACHE_VM_TCG_THREAD=multi run --timeout 1500 "$r" -- "$arm64/kselftest/llmcache_test" 2>&1) && rc=0 || rc=$?
		echo "$out" | grep -E '^(not ok|# (FAIL|Totals)|run-arm64\.sh)|Expected' || true
		check "kselftest on $r exits 0 (rc $rc, $(( $(date +%s) - t0 )) s)" test $rc -eq 0
		check "kselftest on $r ran every test and all passed ($(grep '^# Totals' <<<"$out" || true))" \
			grep -q '^# Totals: pass:[1-9][0-9]* fail:0 .* skip:0 error:0' <<<"$out"
	fi
done
echo "== test_arm64_vm: $(( $(date +%s) - start )) s"
[ "$fails" -eq 0 ] || exit 1
echo "PASS: llmcache cross-built for arm64 (${releases[*]}, tools, llmcached, kselftest); smoke passed in the arm64 VM${full:+; suite on $full}"
