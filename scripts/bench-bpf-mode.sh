#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcached --mode=bpf against the stock kernel under memory pressure. The llmworkload decoder reads a
# WEIGHTS MiB weights file once per token inside a memory cgroup limited to LIMIT MiB (192 and 128: the
# weights loop is 1.5x the memory available), with pread and with mmap. For each case: a warm-up run of 3
# tokens from a cold cache (the daemon learns the loop and pins during it), then RUNS measured runs of
# TOKENS tokens in the same cgroup. Printed: the median tokens/s; the bytes read from disk per token
# (getrusage ru_inblock of the run, through /usr/bin/time %I: the read I/O the engine waited for,
# start-up files included); with llmcached, the blocks S it pinned, the analytic floor (N - S) blocks per
# token, where the pins were charged (the engine's memory cgroup, or the daemon's) and what the daemon
# read itself. Needs root, BPF and a memory cgroup (v1 or v2). Documentation/evaluation.md has figures.
# Usage: scripts/bench-bpf-mode.sh BIN_DIR [RESULTS_DIR] [RUNS]
set -euo pipefail
bin=${1:?usage: bench-bpf-mode.sh BIN_DIR [RESULTS_DIR] [RUNS]}
out=${2:-results}/bench-bpf-mode
runs=${3:-3}
weights=${LLMCACHE_BENCH_WEIGHTS_MIB:-192} limit=${LLMCACHE_BENCH_LIMIT_MIB:-128} tokens=${LLMCACHE_BENCH_TOKENS:-20}
if [ "$(id -u)" -ne 0 ]; then echo "bench-bpf-mode.sh: skipped: needs root (llmcached loads a BPF program)"; exit 0; fi
[ -x "$bin/llmcached" ] && [ -x "$bin/llmtrace" ] || { echo "bench-bpf-mode.sh: skipped: built without BPF"; exit 0; }
mkdir -p "$out"
dir=$out/files sock=$out/llmcached.sock
if [ -d /sys/fs/cgroup/memory ]; then
	cg=/sys/fs/cgroup/memory/llmcache-bench-$$ limit_file=memory.limit_in_bytes
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	cg=/sys/fs/cgroup/llmcache-bench-$$ limit_file=memory.max
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
else
	echo "bench-bpf-mode.sh: skipped: no memory cgroup controller"; exit 0
fi
daemon=
cleanup() {
	[ -z "$daemon" ] || { kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; }
	rmdir "$cg" 2>/dev/null || true
}
trap cleanup EXIT
field() { grep -oE "(^| )$2=[0-9.]+" <<<"$1" | cut -d= -f2; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
wl=("$bin/llmworkload" decoder --dir "$dir" --weights-size "${weights}MiB")
n_blocks=$((weights * 256))
"${wl[@]}" --tokens 1 >/dev/null # create the files
files=("$dir"/decoder/*.bin)

in_cg() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }
run() { # tokens, access, extra...: prints "tokens_per_s inblock_bytes"
	local t=$1 access=$2; shift 2
	local o; o=$(in_cg /usr/bin/time -f "%I" -o "$out/time" "${wl[@]}" --tokens "$t" --access "$access" "$@")
	echo "$(field "$o" tokens_per_s) $(( $(tail -n 1 "$out/time") * 512 ))"
}
start_daemon() {
	"$bin/llmcached" --config /dev/null --mode=bpf --socket "$sock" --pin-budget 1GiB --memcg-headroom "${LLMCACHE_BENCH_HEADROOM:-16MiB}" \
		$(printf -- '--manage %s ' "${files[@]}") >"$out/llmcached.log" 2>&1 &
	daemon=$!
	for _ in $(seq 100); do
		"$bin/llmcachectl" status --socket "$sock" >/dev/null 2>&1 && return
		kill -0 "$daemon" 2>/dev/null || break
		sleep 0.1
	done
	echo "llmcached did not start:"; cat "$out/llmcached.log"; exit 1
}
json_num() { grep -oE "\"$2\":[0-9]+" <<<"$1" | head -n 1 | cut -d: -f2; }

echo "machine: $(nproc) cores, $(uname -r), $(free -g | awk '/^Mem/ {print $2}') GiB; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "decoder: weights ${weights} MiB (N = $n_blocks blocks), memory cgroup limit ${limit} MiB, $tokens tokens x $runs runs"
printf '%-6s %-14s %9s %16s %12s %22s  %s\n' access mode tokens/s "MB read/token" "pinned S" "floor (N-S) MB/token" notes
for access in ${LLMCACHE_BENCH_ACCESS:-pread mmap}; do
	declare -A tps=()
	for mode in stock llmcached; do
		mkdir "$cg"
		echo $((limit << 20)) >"$cg/$limit_file"
		notes= pinned=- floor=-
		[ "$mode" = stock ] || start_daemon
		run 3 "$access" --drop-cache >/dev/null
		rm -f "$out/tps" "$out/bytes"
		for _ in $(seq "$runs"); do
			read -r t b < <(run "$tokens" "$access")
			echo "$t" >>"$out/tps"
			echo "$b" >>"$out/bytes"
		done
		tps[$mode]=$(median <"$out/tps")
		mb=$(awk -v b="$(median <"$out/bytes")" -v t="$tokens" 'BEGIN { printf "%.1f", b / t / 1e6 }')
		if [ "$mode" = llmcached ]; then
			s=$("$bin/llmcachectl" status --socket "$sock" --json)
			pinned=$(json_num "$s" pinned)
			floor=$(awk -v n="$n_blocks" -v s="$pinned" 'BEGIN { printf "%.1f", (n - s) * 4096 / 1e6 }')
			unevictable=$(awk '$1 == "unevictable" { print $2 }' "$cg/memory.stat" 2>/dev/null || echo 0)
			notes="pins charged to the engine's cgroup: $((${unevictable:-0} >> 20)) MiB of $((pinned * 4096 >> 20)) MiB;"
			notes+=" llmcached read $(( $(awk '/^read_bytes/ { print $2 }' "/proc/$daemon/io") >> 20 )) MiB itself;"
			notes+=" $(awk -v a="${tps[llmcached]}" -v b="${tps[stock]}" 'BEGIN { printf "%.2fx tokens/s", a / b }')"
			kill "$daemon"
			wait "$daemon" || true
			daemon=
		fi
		printf '%-6s %-14s %9s %16s %12s %22s  %s\n' "$access" "$mode" "${tps[$mode]}" "$mb" "$pinned" "$floor" "$notes"
		rmdir "$cg"
	done
done
