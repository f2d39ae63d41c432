#!/bin/sh
# SPDX-License-Identifier: MIT
# llmcachectl's kernel-module commands, run as root inside the VM (tests/vm/run.sh) with $LLMCACHE_BIN,
# $LLMCACHE_KO and $LLMCACHE_SCRATCH set: clear messages without the module or without root, register /
# unregister, status (human and JSON), set with units and with garbage. Prints PASS or the first FAIL.
c=$LLMCACHE_BIN/llmcachectl
sys=/sys/kernel/llmcache
fail() { echo "FAIL: $*"; rmmod llmcache 2>/dev/null; exit 1; }
expect() { # exit status, pattern, command...: the command exits so and says the pattern
	want=$1 pattern=$2; shift 2
	out=$("$@" 2>&1); rc=$?
	[ "$rc" = "$want" ] || fail "$* exited $rc, not $want: $out"
	echo "$out" | grep -q -- "$pattern" || fail "$* did not say '$pattern': $out"
}

expect 1 'module is not loaded' "$c" status
expect 1 'module is not loaded' "$c" register /etc/hostname
insmod "$LLMCACHE_KO" || fail "insmod $LLMCACHE_KO"
f=$LLMCACHE_SCRATCH/ctl.bin
dd if=/dev/zero of="$f" bs=4096 count=64 2>/dev/null
expect 1 'root only' setpriv --reuid=65534 --regid=65534 --clear-groups "$c" register "$f"
expect 0 "registered $f ($sys/files/1)" "$c" register "$f"
expect 1 'already registered' "$c" register "$f"
expect 1 'not a regular file' "$c" register /dev/null
expect 1 'No such file' "$c" register "$LLMCACHE_SCRATCH/missing"
cat "$f" >/dev/null
expect 0 "file 1: $f" "$c" status
expect 0 '"registered":1,' "$c" status --json
expect 0 "\"path\":\"$f\",\"accesses\":64," "$c" status --json
expect 0 'pin_budget = 1048576' "$c" set pin_budget=1MiB t=50ms bw=100MB/s enable=1
[ "$(cat $sys/pin_budget) $(cat $sys/t_ns) $(cat $sys/bw)" = "1048576 50000000 100000000" ] ||
	fail "set wrote $(cat $sys/pin_budget) $(cat $sys/t_ns) $(cat $sys/bw)"
expect 2 'pin_budget' "$c" set pin_budget=lots
expect 2 'unknown setting' "$c" set colour=blue
expect 2 'not 0 or 1' "$c" set enable=yes
[ "$(cat $sys/pin_budget)" = 1048576 ] || fail "a refused setting changed pin_budget"
expect 0 "unregistered $f" "$c" unregister "$f"
expect 1 'not registered' "$c" unregister "$f"
expect 0 '"registered":0,' "$c" status --json
rmmod llmcache || fail rmmod
echo PASS
