#!/bin/sh
# SPDX-License-Identifier: MIT
# The guest half of the module's rows of `make bench-engine` (scripts/bench-engine.sh), run as root
# inside the VM (tests/vm/run.sh, scratch disk reads throttled) with $LLMCACHE_BIN, $LLMCACHE_KO and
# $LLMCACHE_SCRATCH set and node-llama-cpp installed in $LLMCACHE_BIN/../engine.
#
# Writes a model with `llmworkload gguf $LLMCACHE_ENGINE_VM_GGUF` on the scratch disk, then for each
# limit in $LLMCACHE_ENGINE_VM_LIMITS (% of the model) runs llama.cpp (node-llama-cpp, mmap, 2 threads,
# greedy, $LLMCACHE_ENGINE_VM_TOKENS tokens) in a cgroup v2 memory group at that limit, page cache
# dropped before each run: $LLMCACHE_ENGINE_VM_RUNS runs without the module, then the module loaded, the
# model registered and a pin budget far above the limit (the planner caps it to the cgroup), a warm-up
# run and as many measured runs; with LLMCACHE_ENGINE_VM_NO_READ_AHEAD=1, as many again with the model
# flagged --no-read-ahead (mode module-no-read-ahead: the module without kmod/stream.c). One line per
# measured run:
#   result LIMIT_BYTES MODE TOKENS_PER_S DISK_BYTES DECODE_TOKENS MAJOR_FAULTS OWN_BYTES OUTCOME ANON_BYTES
# (MODE stock, module or module-no-read-ahead; DISK_BYTES read from the scratch disk during the decode; OWN_BYTES the engine's
# anonymous memory and code at its end, ANON_BYTES the first of them; OUTCOME ok, refused, killed or
# failed).
b=$LLMCACHE_BIN
engine=$(dirname "$b")/engine
model=$LLMCACHE_SCRATCH/bench-model.gguf
cg=/sys/fs/cgroup/llmcache-bench
tokens=${LLMCACHE_ENGINE_VM_TOKENS:-4} runs=${LLMCACHE_ENGINE_VM_RUNS:-1}
disk=$(basename "$(df "$LLMCACHE_SCRATCH" | awk 'NR == 2 { print $1 }')")
num() { grep -oE "\"$2\":[0-9.e+-]+" "$1" | head -n 1 | cut -d: -f2; }
oom_kills() { awk '$1 == "oom_kill" { print $2 }' "$cg/memory.events"; }

run() { # limit mode
	sync && echo 3 >/proc/sys/vm/drop_caches
	kills=$(oom_kills)
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" env LLMCACHE_DISK_STAT="/sys/block/$disk/stat" \
		node "$engine/generate.mjs" "$model" "$tokens" 2 Hi >"$LLMCACHE_SCRATCH/run.json" 2>"$LLMCACHE_SCRATCH/run.err"
	rc=$?
	j=$LLMCACHE_SCRATCH/run.json
	if [ "$(oom_kills)" != "$kills" ]; then outcome=killed
	elif grep -q InsufficientMemoryError "$LLMCACHE_SCRATCH/run.err"; then outcome=refused
	elif [ $rc -ne 0 ] || ! grep -q '"tokens"' "$j"; then outcome=failed; tail -n 3 "$LLMCACHE_SCRATCH/run.err"
	else outcome=ok; fi
	if [ $outcome = ok ]; then
		echo "result $1 $2 $(num "$j" tokens_per_s) $(num "$j" disk_read_bytes) $(num "$j" decode_tokens)" \
			"$(num "$j" major_faults) $(( $(num "$j" rss_anon) + $(num "$j" rss_code) )) ok $(num "$j" rss_anon)"
	else
		echo "result $1 $2 0 0 0 0 0 $outcome 0"
	fi
}

# shellcheck disable=SC2086 # the options, one word each
"$b/llmworkload" gguf "$model" $(echo "${LLMCACHE_ENGINE_VM_GGUF:---layers=24}" | tr ',' ' ') >/dev/null || exit 1
model_bytes=$(stat -c %s "$model")
echo "guest: $(uname -r), $(awk '$1 == "MemTotal:" { printf "%d MiB", $2 / 1024 }' /proc/meminfo)," \
	"read-ahead $(cat "/sys/block/$disk/queue/read_ahead_kb") KiB, model $((model_bytes >> 20)) MiB"
echo +memory >/sys/fs/cgroup/cgroup.subtree_control || exit 1
mkdir "$cg" || exit 1
for pct in ${LLMCACHE_ENGINE_VM_LIMITS:-107}; do
	limit=$(( model_bytes * ${pct%\%} / 100 ))
	echo "$limit" >"$cg/memory.max"
	for _ in $(seq "$runs"); do run "$limit" stock; done
	insmod "$LLMCACHE_KO" || exit 1
	"$b/llmcachectl" register "$model" >/dev/null && "$b/llmcachectl" set pin_budget=1GiB >/dev/null || exit 1
	run "$limit" module >/dev/null
	for _ in $(seq "$runs"); do run "$limit" module; done
	if [ "${LLMCACHE_ENGINE_VM_NO_READ_AHEAD:-0}" = 1 ]; then
		"$b/llmcachectl" set-file --no-read-ahead "$model" >/dev/null || exit 1
		for _ in $(seq "$runs"); do run "$limit" module-no-read-ahead; done
	fi
	echo "pinned $limit $(cat /sys/kernel/llmcache/stats/pinned) released $(cat /sys/kernel/llmcache/stats/shrinker_released)"
	rmmod llmcache || exit 1
done
rmdir "$cg"
