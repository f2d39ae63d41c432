#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A real engine under llmcached --mode=bpf (as root): llama.cpp's CPU build (node-llama-cpp, installed
# from npm into the build directory by scripts/engine/install.sh) decodes greedily through mmap from a
# 64 MiB random-weight GGUF (llmworkload gguf), in a memory cgroup whose limit holds the engine's
# anonymous memory, 12 MiB of its code (node-llama-cpp keeps 11-12 MiB of it in use) and two thirds of
# the model. Checked:
# - the generated tokens are the same with and without the daemon (and vary: the check can fail);
# - while the engine runs, pins are present, within the budget, the engine's own code is locked within the
#   room the budget leaves for it, and the loops table shows the weights
#   file as one loop of the whole file, going round with the tokens (an iteration is seen where the
#   engine faults past the end of the file into its first unpinned blocks: at least one token in four);
# - what the engine passed of its unpinned part is dropped, a token in four at least;
# - no process of the cgroup is OOM-killed, and the engine is not refused memory;
# - once the engine exits, the pins stay within the budget of its cgroup;
# - under a limit that holds the model beside the engine, the daemon pins no head of it, and drops and
#   pages out nothing.
# Without node >= 20 and npm the test says what to install and skips.
set -euo pipefail
BIN=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
SRC=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root (memory cgroup, BPF, mlock)"; exit 77; fi
if [ ! -x "$BIN/llmtrace" ]; then
	[ -e /sys/kernel/btf/vmlinux ] || { echo "SKIP: the BPF feed is not built: this kernel has no BTF"; exit 77; }
	echo "FAIL: the BPF feed is not built (install the BPF build dependencies: scripts/install-deps.sh bpf)"; exit 1
fi
[ -n "${LLMCACHE_TEST_WATCHDOG:-}" ] || LLMCACHE_TEST_WATCHDOG=1 exec timeout -k 10 "${LLMCACHE_TEST_TIMEOUT:-900}" bash "$0" "$@"
engine=$(realpath -m "$BIN/../engine")
rc=0
"$SRC/scripts/engine/install.sh" "$engine" || rc=$?
if [ $rc -eq 3 ]; then echo "SKIP: no real engine (the line above says what to install)"; exit 77; fi
[ $rc -eq 0 ] || { echo "FAIL: installing node-llama-cpp into $engine failed (rc $rc)"; exit 1; }
# shellcheck source=scripts/memcg.sh
. "$SRC/scripts/memcg.sh"
memcg_root || { echo "SKIP: no memory cgroup controller"; exit 77; }
tmp=$(mktemp -d "${LLMCACHE_SCRATCH:-/var/tmp}/test_engine.XXXXXX") # not tmpfs: its pages cannot be dropped
cg=$cgroot/llmcache-test-engine-$$ sock=$tmp/llmcached.sock
cleanup() {
	local jobs; jobs=$(jobs -p)
	[ -z "$jobs" ] || kill -9 $jobs 2>/dev/null || true
	wait 2>/dev/null || true
	rmdir "$cg" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "FAIL: timed out"; exit 1' TERM
. "$(dirname "$0")/check.sh"
mkdir "$cg"
model=$tmp/model.gguf
"$BIN/llmworkload" gguf "$model" --embd 512 --ff 1408 --heads 8 --kv-heads 8 --size 64MiB >/dev/null
model_bytes=$(stat -c %s "$model")
tokens=160
run() { # the engine in the cgroup from a cold cache: its JSON line
	sync && echo 3 >/proc/sys/vm/drop_caches
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" \
		node "$engine/generate.mjs" "$model" "$tokens" 2 2>"$tmp/engine.err" || {
		echo "FAIL: the engine failed: $(tail -n 5 "$tmp/engine.err")" >&2
		return 1
	}
}
tokens_of() { grep -o '"tokens":\[[0-9,]*\]' <<<"$1"; }
num() { grep -oE "\"$2\":[0-9.]+" <<<"$1" | head -n 1 | cut -d: -f2; }

# The engine's anonymous memory, measured without a limit; the limit then holds it, the part of its code
# it keeps using (node maps 100 MiB of binary and touches much of it once) and 2/3 of the model.
echo max >"$cg/$limit_file" 2>/dev/null || echo -1 >"$cg/$limit_file"
free_run=$(run)
anon=$(num "$free_run" rss_anon)
limit=$(( anon + (12 << 20) + model_bytes * 2 / 3 ))
echo "model $((model_bytes >> 20)) MiB; the engine's anonymous memory $((anon >> 20)) MiB; limit $((limit >> 20)) MiB"
echo "$limit" >"$cg/$limit_file"
stock=$(run)
check "the generated tokens vary (the comparison can tell a change)" \
	test "$(tokens_of "$stock" | tr ',' '\n' | sort -u | wc -l)" -gt 4
check "without a limit and under it, the same tokens" test "$(tokens_of "$free_run")" = "$(tokens_of "$stock")"

"$BIN/llmcached" --config /dev/null --mode=bpf --socket "$sock" --pin-budget 1GiB --manage "$model" >"$tmp/llmcached.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do "$BIN/llmcachectl" status --socket "$sock" >/dev/null 2>&1 && break; sleep 0.1; done
oom_before=$(memcg_oom_kills "$cg")
( while sleep 0.2; do
	"$BIN/llmcachectl" status --socket "$sock" --json 2>/dev/null >>"$tmp/status.json" && echo >>"$tmp/status.json"
	"$BIN/llmcachectl" loops --socket "$sock" --json 2>/dev/null >>"$tmp/loops.json" && echo >>"$tmp/loops.json"
done ) &
sampler=$!
with=$(run)
kill $sampler; wait $sampler 2>/dev/null || true
check "with llmcached, the same tokens as without" test "$(tokens_of "$with")" = "$(tokens_of "$stock")"
check "no OOM kill in the engine's cgroup" test "$(memcg_oom_kills "$cg")" = "$oom_before"
pinned_max=$(grep -oE '"pinned":[0-9]+' "$tmp/status.json" | cut -d: -f2 | sort -n | tail -n 1)
check "pins while the engine runs (at most ${pinned_max:-0} blocks)" test "${pinned_max:-0}" -gt 0
# Per sample: the budget, the engine's code (what the budget leaves room for), what is locked of it, and
# all that the daemon has locked.
samples=$(grep -oE '"(effective_budget|engine_code|engine_code_locked|vm_locked)":[0-9]+' "$tmp/status.json" |
	paste -d' ' - - - - | tr -d '"' | tr ':' ' ' |
	awk '{ for (i = 1; i < NF; i += 2) v[$i] = $(i + 1); print v["effective_budget"], v["engine_code"], v["engine_code_locked"], v["vm_locked"] }')
over=$(awk '$4 - $3 > $1 + 2097152 { n++ } END { print n + 0 }' <<<"$samples")
check "locked weights within the budget at every sample (2 MiB of slack for a shrinking budget)" test "$over" = 0
code_max=$(awk '$3 > m { m = $3 } END { print m + 0 }' <<<"$samples")
check "the engine's code locked once its loop ran (at most $((code_max >> 10)) KiB)" test "$code_max" -gt 0
check "locked code within the room the budget leaves for it at every sample" \
	test "$(awk '$3 > $2 + 1048576 { n++ } END { print n + 0 }' <<<"$samples")" = 0
# The loops table taken while the engine ran, the one that counted the most iterations: one loop, the
# whole file, going round with the tokens.
loops=$(grep '"blocks":' "$tmp/loops.json" | awk '{ match($0, /"iterations":[0-9]+/); n = substr($0, RSTART + 13, RLENGTH - 13) + 0
	if (n >= best) { best = n; line = $0 } } END { print line }')
echo "loops: $loops"
file_blocks=$(( (model_bytes + 4095) / 4096 ))
check "the loops table shows one loop" test "$(grep -o '"seq"' <<<"$loops" | wc -l)" = 1
check "that loop is the whole file ($file_blocks blocks)" test "$(num "$loops" blocks)" = "$file_blocks"
token_ns=$(awk -v t="$(num "$with" tokens_per_s)" 'BEGIN { printf "%d", 1e9 / t }')
# The median of the periods the samples saw (one loop of the whole file, measured): a restart (the
# position jumping back further than the read-ahead window) can end an iteration early, and a token the
# host delays (another test on the same cores) lengthens the period of a sample or two, not half of them.
period=$(grep '"blocks":'"$file_blocks"',' "$tmp/loops.json" | grep -v '"seq".*"seq"' | grep -oE '"period_ns":[0-9]+' |
	cut -d: -f2 | awk '$1 > 0' | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
check "its median period (${period:-none} ns) is under 3x the token time ($token_ns ns)" \
	awk -v p="${period:-0}" -v t="$token_ns" 'BEGIN { exit !(p > 0 && p < t * 3) }'
iterations=$(num "$loops" iterations)
check "it went round with the tokens ($iterations iterations by then, $tokens tokens in all)" \
	test "$iterations" -ge $((tokens / 4)) -a "$iterations" -le $((2 * tokens + 4))
dropped=$(grep -oE '"loop_tail_dropped":[0-9]+' "$tmp/status.json" | cut -d: -f2 | sort -n | tail -n 1)
check "what the engine passed was dropped ($dropped blocks: its unpinned part once a token in four at least)" \
	test "${dropped:-0}" -ge $(( (file_blocks - pinned_max) * tokens / 4 ))
sleep 1.5 # a tick after the daemon's once-a-second check for exited engines
after=$("$BIN/llmcachectl" status --socket "$sock" --json)
check "once the engine exited, the pins stay within the budget" \
	test "$(num "$after" vm_locked)" -le "$(num "$after" effective_budget)"
kill "$daemon"; wait "$daemon" || true
echo "tokens/s: without llmcached $(num "$stock" tokens_per_s), with $(num "$with" tokens_per_s)"

# A limit that holds the model beside the engine (its anonymous memory, 16 MiB of code, and 48 MiB for
# what its anonymous memory is above the end-of-run figure while it sets up its context): the kernel
# keeps the weights, and the daemon stays out of the way.
echo $(( anon + model_bytes + (64 << 20) )) >"$cg/$limit_file"
"$BIN/llmcached" --config /dev/null --mode=bpf --socket "$sock" --pin-budget 1GiB --manage "$model" >"$tmp/llmcached.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do "$BIN/llmcachectl" status --socket "$sock" >/dev/null 2>&1 && break; sleep 0.1; done
( while sleep 0.2; do
	"$BIN/llmcachectl" status --socket "$sock" --json 2>/dev/null >>"$tmp/status-fit.json" && echo >>"$tmp/status-fit.json"
done ) &
sampler=$!
fit=$(run)
kill $sampler; wait $sampler 2>/dev/null || true
sleep 0.3
last=$("$BIN/llmcachectl" status --socket "$sock" --json)
kill "$daemon"; wait "$daemon" || true
check "when the model fits, the same tokens" test "$(tokens_of "$fit")" = "$(tokens_of "$stock")"
fit_pinned=$(grep -oE '"pinned":[0-9]+' "$tmp/status-fit.json" | cut -d: -f2 | sort -n | tail -n 1)
fit_anon=$(grep -oE '"engine_anon":[0-9]+' "$tmp/status-fit.json" | cut -d: -f2 | sort -n | tail -n 1)
# Before it maps the model, the engine reads its header with read() a few times: the daemon may pin
# that loop for a moment (a few MiB), as for any read()-based engine. No head of the model, though.
check "when the model fits, no head pinned at any sample (at most ${fit_pinned:-none} blocks; the engine's anonymous memory at most $((${fit_anon:-0} >> 20)) MiB)" \
	test "${fit_pinned:-1}" -le $(( model_bytes / 4096 / 8 ))
check "when the model fits, no pins once the engine ran ($(num "$last" pinned) blocks)" test "$(num "$last" pinned)" = 0
check "when the model fits, nothing dropped or paged out" \
	test "$(num "$last" loop_tail_dropped)/$(num "$last" cold_blocks)/$(num "$last" engine_code_locked)" = 0/0/0
[ "$fails" -eq 0 ] || { echo "llmcached log:"; cat "$tmp/llmcached.log"; exit 1; }
echo "PASS"
