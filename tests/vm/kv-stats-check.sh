#!/bin/sh
# SPDX-License-Identifier: MIT
# /sys/kernel/llmcache/kv/ fed by llmcached, run as root inside the VM (tests/vm/run.sh) with
# $LLMCACHE_BIN, $LLMCACHE_KO and $LLMCACHE_SCRATCH set: without the module the daemon serves and says
# nothing about statistics; with it, the daemon pushes at start, every second and at exit, and a
# client's appends and selects (build/tests/bench_kv_service) move every pool's counters.
b=$LLMCACHE_BIN
client=$(dirname "$b")/tests/bench_kv_service
kv=/sys/kernel/llmcache/kv
sock=$LLMCACHE_SCRATCH/kvd.sock
log=$LLMCACHE_SCRATCH/kvd.log
daemon=
fail() { echo "FAIL: $*"; [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; cat "$log" 2>/dev/null; rmmod llmcache 2>/dev/null; exit 1; }
start() {
	"$b/llmcached" --config /dev/null --socket "$sock" --kv-device "$LLMCACHE_SCRATCH/kv.img" --kv-cpu-budget 1MiB \
		--kv-session-device-bytes 64MiB --kv-max-sessions 2 --kv-backend emulated >"$log" 2>&1 &
	daemon=$!
	i=0
	while [ ! -S "$sock" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	[ -S "$sock" ] || fail "llmcached did not create its socket"
}
stop() {
	kill -TERM "$daemon" && wait "$daemon" || fail "llmcached did not stop cleanly"
	daemon=
}
num() { cat "$kv/$1" 2>/dev/null || echo missing; }
# Waits up to 10 s for kv/$1 to reach at least $2.
wait_at_least() {
	i=0
	while [ "$(num "$1")" = missing ] || [ "$(num "$1")" -lt "$2" ]; do
		[ $i -ge 100 ] && fail "$kv/$1 is $(num "$1"), expected at least $2"
		sleep 0.1
		i=$((i + 1))
	done
}

[ -x "$client" ] || fail "$client is missing (build the project first)"
truncate -s 256M "$LLMCACHE_SCRATCH/kv.img" || fail "cannot create the KV device file"

# No module: serving works and nothing is said about statistics.
start
"$client" "$sock" 256 2 >/dev/null || fail "the client failed without the module"
stop
grep -qi 'statistic\|/dev/llmcache' "$log" && fail "llmcached complained without the module"

insmod "$LLMCACHE_KO" || fail "insmod $LLMCACHE_KO"
[ "$(num pushes)" = 0 ] || fail "pushes before any daemon: $(num pushes)"
start
wait_at_least pushes 1
[ "$(num sessions)" = 0 ] || fail "sessions of an idle daemon: $(num sessions)"
out=$("$client" "$sock" 2048 8) || fail "the client failed: $out"
echo "$out"
wait_at_least selects 16
for f in cpu/spills cpu/kernel_runs cpu/scored_tokens cpu/bus_bytes storage/spills storage/restores \
	storage/kernel_runs storage/scored_tokens storage/bus_bytes storage/score_latency_ns; do
	wait_at_least "$f" 1
done
before=$(num pushes)
stop
[ "$(num pushes)" -gt "$before" ] || fail "no push at exit (pushes $(num pushes))"
[ "$(num sessions)" = 0 ] || fail "sessions after exit: $(num sessions)"
[ "$(num selects)" -ge 16 ] || fail "the counters of the closed session were lost: selects $(num selects)"
echo "kv stats: pushes $(num pushes), selects $(num selects), cpu spills $(num cpu/spills), storage restores $(num storage/restores), storage kernel runs $(num storage/kernel_runs), storage bus bytes $(num storage/bus_bytes)"
rmmod llmcache || fail rmmod
echo PASS
