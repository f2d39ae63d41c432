#!/bin/sh
# SPDX-License-Identifier: MIT
# A real engine beside llmcache.ko. Run as root inside the VM (tests/vm/run.sh) with $LLMCACHE_BIN,
# $LLMCACHE_KO and $LLMCACHE_SCRATCH set, and node-llama-cpp installed in $LLMCACHE_BIN/../engine.
#
# llama.cpp's CPU build (node-llama-cpp) decodes greedily through mmap from a 64 MiB random-weight GGUF
# on the scratch disk, in a cgroup v2 memory group whose limit holds the engine's anonymous memory,
# 12 MiB of its code and two thirds of the model (as tests/integration/test_engine.sh does on the host
# for llmcached --mode=bpf), first without the module, then with it loaded, the model registered and a
# pin budget far above the limit. Checked:
# - the generated tokens are the same with and without the module (and vary: the check can fail);
# - while the engine runs, pins are present and within what the cgroup leaves besides the engine's
#   anonymous memory; the loops table shows the weights as one loop of the whole file, going round with
#   the tokens;
# - no OOM kill in the cgroup, and the engine is never refused its context;
# - under a limit that holds the model beside the engine, the module pins no head of it (the planner's
#   fit rule, as in the daemon) and holds no pins once the engine ran.
# Prints PASS or the FAILs, and the tokens/s of each run (TCG: for information only).
b=$LLMCACHE_BIN
engine=$(dirname "$b")/engine
sys=/sys/kernel/llmcache
model=$LLMCACHE_SCRATCH/engine-model.gguf
cg=/sys/fs/cgroup/llmcache-engine
tokens=${LLMCACHE_ENGINE_CHECK_TOKENS:-12}
fails=0
check() { # description command...: counts a failure
	what=$1
	shift
	if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}
num() { grep -oE "\"$2\":[0-9.]+" "$1" | head -n 1 | cut -d: -f2; }
tokens_of() { grep -o '"tokens":\[[0-9,]*\]' "$1"; }
oom_kills() { awk '$1 == "oom_kill" { print $2 }' "$cg/memory.events"; }

# run NAME: the engine in the cgroup from a cold cache, its JSON line in $LLMCACHE_SCRATCH/NAME.json; the
# module's pins and loops sampled meanwhile when it is loaded.
run() {
	out=$LLMCACHE_SCRATCH/$1
	sync && echo 3 >/proc/sys/vm/drop_caches
	: >"$out.pinned"
	: >"$out.loops"
	if [ -d $sys ]; then
		(while sleep 0.5; do
			cat $sys/stats/pinned >>"$out.pinned"
			"$b/llmcachectl" loops --json >>"$out.loops" 2>/dev/null && echo >>"$out.loops"
		done) &
		sampler=$!
	fi
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" \
		node "$engine/generate.mjs" "$model" "$tokens" 2 Hi >"$out.json" 2>"$out.err"
	rc=$?
	[ -z "${sampler:-}" ] || { kill "$sampler"; wait "$sampler" 2>/dev/null; sampler=; }
	if grep -q InsufficientMemoryError "$out.err"; then
		echo "FAIL: $1: the engine was refused its context: $(grep -m1 InsufficientMemoryError "$out.err")"
		fails=$((fails + 1))
	elif [ $rc -ne 0 ] || ! grep -q '"tokens"' "$out.json"; then
		echo "FAIL: $1: the engine failed (rc $rc): $(tail -n 5 "$out.err")"
		fails=$((fails + 1))
	fi
	echo "$1: $(num "$out.json" tokens_per_s) tokens/s"
}

[ -f "$engine/generate.mjs" ] && command -v node >/dev/null || { echo "FAIL: no engine in $engine"; exit 1; }
"$b/llmworkload" gguf "$model" --embd 512 --ff 1408 --heads 8 --kv-heads 8 --size 64MiB >/dev/null ||
	{ echo "FAIL: llmworkload gguf"; exit 1; }
model_bytes=$(stat -c %s "$model")
file_blocks=$(( (model_bytes + 4095) / 4096 ))
echo +memory >/sys/fs/cgroup/cgroup.subtree_control || { echo "FAIL: no memory controller in cgroup v2"; exit 1; }
mkdir "$cg"

run free
anon=$(num "$LLMCACHE_SCRATCH/free.json" rss_anon)
limit=$(( anon + (12 << 20) + model_bytes * 2 / 3 ))
echo "model $((model_bytes >> 20)) MiB; the engine's anonymous memory $((anon >> 20)) MiB; limit $((limit >> 20)) MiB"
echo "$limit" >"$cg/memory.max"
run stock
S=$LLMCACHE_SCRATCH
check "the generated tokens vary (the comparison can tell a change)" \
	test "$(tokens_of "$S/stock.json" | tr ',' '\n' | sort -u | wc -l)" -gt 4
check "without a limit and under it, the same tokens" test "$(tokens_of "$S/free.json")" = "$(tokens_of "$S/stock.json")"

insmod "$LLMCACHE_KO" || { echo "FAIL: insmod"; exit 1; }
"$b/llmcachectl" register "$model" >/dev/null || { echo "FAIL: register"; exit 1; }
"$b/llmcachectl" set pin_budget=1GiB >/dev/null || { echo "FAIL: set pin_budget"; exit 1; }
oom_before=$(oom_kills)
run module
check "with the module, the same tokens as without" test "$(tokens_of "$S/module.json")" = "$(tokens_of "$S/stock.json")"
check "no OOM kill in the engine's cgroup" test "$(oom_kills)" = "$oom_before"
pinned_max=$(sort -n "$S/module.pinned" | tail -n 1)
check "pins while the engine runs (at most ${pinned_max:-0} blocks)" test "${pinned_max:-0}" -gt 0
check "pins within what the cgroup leaves besides the engine's anonymous memory" \
	test "$(( ${pinned_max:-0} * 4096 ))" -le "$(( limit - anon ))"
# The loops table that counted the most iterations: one loop, the whole file, going round with the tokens.
loops=$(grep '"blocks":' "$S/module.loops" | awk '{ match($0, /"iterations":[0-9]+/); n = substr($0, RSTART + 13, RLENGTH - 13) + 0
	if (n >= best) { best = n; line = $0 } } END { print line }')
echo "$loops" >"$S/loops.best"
echo "loops: $loops"
check "the loops table shows one loop" test "$(grep -o '"seq"' "$S/loops.best" | wc -l)" = 1
check "that loop is the whole file ($file_blocks blocks)" test "$(num "$S/loops.best" blocks)" = "$file_blocks"
iterations=$(num "$S/loops.best" iterations)
check "it went round with the tokens (${iterations:-0} iterations, $tokens tokens)" \
	test "${iterations:-0}" -ge $((tokens / 4)) -a "${iterations:-0}" -le $((2 * tokens + 4))

# A limit that holds the model beside the engine: the kernel keeps the weights, and the module stays out
# of the way (what the planner counts of the engine is the most it has seen, so the limit leaves room
# for that and for 16 MiB of code).
echo $(( anon + model_bytes + (64 << 20) )) >"$cg/memory.max"
"$b/llmcachectl" unregister "$model" >/dev/null && "$b/llmcachectl" register "$model" >/dev/null ||
	{ echo "FAIL: registering the model again (its pins from the run above go)"; exit 1; }
run fit
check "when the model fits, the same tokens" test "$(tokens_of "$S/fit.json")" = "$(tokens_of "$S/stock.json")"
fit_pinned=$(sort -n "$S/fit.pinned" | tail -n 1)
check "when the model fits, no head pinned at any sample (at most ${fit_pinned:-none} blocks)" \
	test "${fit_pinned:-1}" -le $((file_blocks / 8))
sleep 1
check "when the model fits, no pins once the engine ran ($(cat $sys/stats/pinned) blocks)" test "$(cat $sys/stats/pinned)" = 0

rmmod llmcache
rmdir "$cg"
[ $fails -eq 0 ] && echo PASS
exit $fails
