#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcachectl size: the paper's worked examples (section 4.2) come out, in text and JSON, and bad input
# is rejected with a message that names it, arithmetic that would overflow is refused, and an output
# that cannot be written (> /dev/full) fails the command.
set -euo pipefail
B=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}/llmcachectl
. "$(dirname "$0")/check.sh"
has() { grep -qF -- "$2" <<<"$1"; }
# A JSON number field: json_num JSON KEY [INDEX] (the INDEX-th occurrence, from 1).
json_num() { grep -oE "\"$2\":[0-9.]+" <<<"$1" | sed -n "${3:-1}p" | cut -d: -f2; }

# Top level: subcommands are listed; an unknown one is an error.
out=$("$B" --help)
check "--help lists size" has "$out" "size "
if "$B" frobnicate 2>/dev/null; then echo "FAIL: unknown command accepted"; fails=$((fails + 1)); fi

# Watch: (64 MiB - 4 MiB) + 100 MB/s x 0.1 s = 15360 + 2441 blocks = 72.9 MB = 69.5 MiB; the paper says 70.
out=$("$B" size --device watch)
check "watch: blocks" has "$out" "15360 + 2441 = 17801 blocks"
check "watch: MB and MiB" has "$out" "72.9 MB = 69.5 MiB"
check "watch: paper's rounding" has "$out" "60.0 + 10.0 = 70.0"
js=$("$B" size --device watch --json)
check "watch json: max_loop_blocks" test "$(json_num "$js" max_loop_blocks)" = 17801
check "watch json: max_loop_mb" test "$(json_num "$js" max_loop_mb)" = 72.9
check "watch json: max_loop_mib" test "$(json_num "$js" max_loop_mib)" = 69.5
check "watch json: paper_estimate" test "$(json_num "$js" paper_estimate)" = 70.0
check "watch json: mode" has "$js" '"mode":"max_loop"'

# Phone: 256-512 MiB of loop cache over 1 GB/s: the paper's ~356 and ~612 MB.
out=$("$B" size --device phone)
check "phone 256: numbers" has "$out" "65536 + 24414 = 89950 blocks = 368.4 MB = 351.4 MiB"
check "phone 512: numbers" has "$out" "131072 + 24414 = 155486 blocks = 636.9 MB = 607.4 MiB"
check "phone: paper's 356" has "$out" "256.0 + 100.0 = 356.0"
check "phone: paper's 612" has "$out" "512.0 + 100.0 = 612.0"
js=$("$B" size --device phone --json)
check "phone json: two scenarios" test "$(grep -o '"max_loop_blocks"' <<<"$js" | wc -l)" = 2
check "phone json: 256 MiB end" test "$(json_num "$js" paper_estimate 1)" = 356.0
check "phone json: 512 MiB end" test "$(json_num "$js" paper_estimate 2)" = 612.0
check "phone json: 512 MiB blocks" test "$(json_num "$js" max_loop_blocks 2)" = 155486

# The same watch from explicit options, with T overridden: 50 ms halves BW*T.
out=$("$B" size --cache 64MiB --hot 4MiB --bw 100MB/s --t 50ms)
check "explicit options, T 50 ms" has "$out" "15360 + 1220 = 16580 blocks"

# Loop mode: a 500 MB loop (122071 blocks) on the watch needs floor(N - BW*T) = 122071 - 2442 blocks.
js=$("$B" size --loop 500MB --device watch --json)
check "loop json: min loop cache" test "$(json_num "$js" min_loop_cache_blocks)" = 119629
check "loop json: deficit" test "$(json_num "$js" deficit_blocks)" = 104269
# (122071 - 15360) / 24414 s - 0.1 s = 4.270893749 s
check "loop json: stall" test "$(json_num "$js" stall_ns)" = 4270893749
check "loop json: tokens/s" test "$(json_num "$js" tokens_per_s_max)" = 0.229
# A loop that fits has no deficit and runs at 1/T.
js=$("$B" size --loop 60MiB --device watch --json)
check "fitting loop: no deficit" test "$(json_num "$js" deficit_blocks)" = 0
check "fitting loop: no stall" test "$(json_num "$js" stall_ns)" = 0
check "fitting loop: 10 tokens/s" test "$(json_num "$js" tokens_per_s_max)" = 10.0
out=$("$B" size --loop 600MB --bw 1GB/s)
check "loop without cache: min cache" has "$out" "S >= N - BW*T = 122071 blocks (500.0 MB"

# Bad input: non-zero exit and a message naming the bad text.
bad() { # expected text in the error, args...
	local want=$1; shift
	local err
	if err=$("$B" size "$@" 2>&1 >/dev/null); then
		echo "FAIL: size $* succeeded"; fails=$((fails + 1))
	elif ! has "$err" "$want"; then
		echo "FAIL: size $*: error '$err' does not name '$want'"; fails=$((fails + 1))
	fi
}
bad "64XB" --cache 64XB --bw 1GB/s
bad "fast" --cache 64MiB --bw fast
bad "5parsecs" --device watch --t 5parsecs
bad "lots" --loop lots --bw 1GB/s
bad "moon" --device moon
bad "extra" --device watch extra
bad "--bw" --cache 64MiB
bad "larger than the cache" --cache 64MiB --hot 128MiB --bw 1GB/s
bad "--loop" --bw 1GB/s
# Arithmetic that would wrap around 64 bits is refused, not printed wrong (BW*T wrapped to 107943426
# blocks for 1 TB/s x 76 s, where 70 s gives 17089843750).
bad "--bw 1TB/s x --t 76s is beyond" --cache 1GiB --bw 1TB/s --t 76s
bad "--bw 1TB/s x --t 76s is beyond" --loop 1GB --bw 1TB/s --t 76s
check "1 TB/s x 70 s still computes" has "$("$B" size --cache 1GiB --bw 1TB/s --t 70s)" "BW*T = 17089843750 blocks"
bad "--loop 5000000TiB is more than 4 EiB" --loop 5000000TiB --bw 1GB/s
bad "stall per iteration" --loop 4000000TiB --cache 1MiB --bw 4096B/s

# Output that cannot be written fails the command: results must not be lost silently.
if err=$("$B" size --device watch 2>&1 >/dev/full); then
	echo "FAIL: size > /dev/full exited 0"; fails=$((fails + 1))
elif ! has "$err" "cannot write the output"; then
	echo "FAIL: size > /dev/full: '$err'"; fails=$((fails + 1))
fi
if "$B" size --device watch --json >/dev/full 2>/dev/null; then
	echo "FAIL: size --json > /dev/full exited 0"; fails=$((fails + 1))
fi

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "llmcachectl size: all checks passed"
