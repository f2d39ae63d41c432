#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcached --mode=bpf against the stock kernel under memory pressure. The llmworkload decoder reads a
# WEIGHTS MiB weights file once per token inside a memory cgroup limited to LIMIT MiB (192 and 128: the
# weights loop is 1.5x the memory available), with pread and with mmap. The stock and the llmcached runs
# use two copies of the files, each in a cgroup of its own (llmcached manages only its copy), so that
# their runs can alternate and share the machine's load (it is shared with other jobs). For each case: a
# warm-up run of 3 tokens from a cold cache (the daemon learns the loop and pins during it), then RUNS
# measured runs of TOKENS tokens each. Printed: the median tokens/s; the bytes read from disk per token
# (getrusage ru_inblock of the run, through /usr/bin/time %I: the read I/O the engine waited for,
# start-up files included); with llmcached, the blocks S it pinned, the analytic floor (N - S) blocks per
# token, where the pins were charged (the engine's memory cgroup, or the daemon's), what the daemon
# read itself and its CPU time over the case. Then the same with the disk throttled to THROTTLE bytes/s
# (200 MB/s by default, an eMMC-class device: the paper's premise that storage is the bottleneck) for
# the engines of both modes (cgroup v1 blkio.throttle.read_bps_device, or v2 io.max), with
# TOKENS_THROTTLED tokens per run.
# Needs root, BPF and a memory cgroup (v1 or v2). Documentation/evaluation.md has figures.
# Usage: scripts/bench-bpf-mode.sh BIN_DIR [RESULTS_DIR] [RUNS]
set -euo pipefail
bin=${1:?usage: bench-bpf-mode.sh BIN_DIR [RESULTS_DIR] [RUNS]}
out=${2:-results}/bench-bpf-mode
runs=${3:-3}
weights=${LLMCACHE_BENCH_WEIGHTS_MIB:-192} limit=${LLMCACHE_BENCH_LIMIT_MIB:-128} tokens=${LLMCACHE_BENCH_TOKENS:-20}
throttle=${LLMCACHE_BENCH_THROTTLE:-200000000} tokens_throttled=${LLMCACHE_BENCH_TOKENS_THROTTLED:-8}
if [ "$(id -u)" -ne 0 ]; then echo "bench-bpf-mode.sh: skipped: needs root (llmcached loads a BPF program)"; exit 0; fi
[ -x "$bin/llmcached" ] && [ -x "$bin/llmtrace" ] || { echo "bench-bpf-mode.sh: skipped: built without BPF"; exit 0; }
mkdir -p "$out"
sock=$out/llmcached.sock
# shellcheck source=scripts/memcg.sh
. "$(dirname "$0")/memcg.sh"
memcg_root || { echo "bench-bpf-mode.sh: skipped: no memory cgroup controller"; exit 0; }
daemon=
cleanup() {
	[ -z "$daemon" ] || { kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; }
	rmdir "$cgroot"/llmcache-bench-$$-* /sys/fs/cgroup/blkio/llmcache-bench-$$-* 2>/dev/null || true
}
trap cleanup EXIT
field() { grep -oE "(^| )$2=[0-9.]+" <<<"$1" | cut -d= -f2; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
n_blocks=$((weights * 256))
for mode in stock llmcached; do
	"$bin/llmworkload" decoder --dir "$out/files-$mode" --weights-size "${weights}MiB" --tokens 1 >/dev/null # create
done
files=("$out/files-llmcached"/decoder/*.bin)

# The whole disk under the files (throttling applies to disks, not partitions), as MAJ:MIN.
devno=$(stat -c %d "${files[0]}")
sysdev=/sys/dev/block/$(( (devno >> 8) & 0xfff )):$(( (devno & 0xff) | ((devno >> 12) & 0xfff00) ))
[ ! -e "$sysdev/partition" ] || sysdev=$(readlink -f "$sysdev/..")
disk=$(cat "$sysdev/dev" 2>/dev/null || true)
blkio() { # mode, bytes/s (0: none): the cgroup that throttles the engine's reads, or nothing
	local dir
	[ "$2" != 0 ] && [ -n "$disk" ] || return 0
	if [ -d /sys/fs/cgroup/blkio ]; then
		dir=/sys/fs/cgroup/blkio/llmcache-bench-$$-$1
		mkdir -p "$dir" && echo "$disk $2" >"$dir/blkio.throttle.read_bps_device" && echo "$dir"
	elif [ "$limit_file" = memory.max ]; then
		echo +io >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
		echo "$disk rbps=$2" >"$cgroot/llmcache-bench-$$-$1/io.max" 2>/dev/null || true
	fi
}
run() { # mode, tokens, access, extra...: prints "tokens_per_s inblock_bytes"
	local mode=$1 t=$2 access=$3; shift 3
	local o
	o=$(sh -c 'for d; do [ "$d" = -- ] && break; echo $$ > "$d/cgroup.procs" || exit 1; done
		while [ "$1" != -- ]; do shift; done; shift; exec "$@"' _ "$cgroot/llmcache-bench-$$-$mode" \
		${blkdir[$mode]:+"${blkdir[$mode]}"} -- \
		/usr/bin/time -f "%I" -o "$out/time" "$bin/llmworkload" decoder --dir "$out/files-$mode" \
		--weights-size "${weights}MiB" --tokens "$t" --access "$access" "$@")
	echo "$(field "$o" tokens_per_s) $(( $(tail -n 1 "$out/time") * 512 ))"
}
start_daemon() {
	"$bin/llmcached" --config /dev/null --mode=bpf --socket "$sock" --pin-budget 1GiB \
		${LLMCACHE_BENCH_HEADROOM:+--memcg-headroom "$LLMCACHE_BENCH_HEADROOM"} \
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
printf '%-6s %-9s %-10s %9s %14s %10s %21s  %s\n' access disk mode tokens/s "MB read/token" "pinned S" "floor (N-S) MB/token" notes
declare -A blkdir=()
for bps in 0 ${throttle}; do
[ "$bps" = 0 ] || [ -n "$disk" ] || { echo "no disk found under ${files[0]}: no throttled runs"; break; }
[ "$bps" = 0 ] || tokens=$tokens_throttled
for access in ${LLMCACHE_BENCH_ACCESS:-pread mmap}; do
	for mode in stock llmcached; do
		mkdir "$cgroot/llmcache-bench-$$-$mode"
		echo $((limit << 20)) >"$cgroot/llmcache-bench-$$-$mode/$limit_file"
		blkdir[$mode]=$(blkio $mode "$bps")
		rm -f "$out/$mode.tps" "$out/$mode.bytes"
	done
	start_daemon
	for mode in stock llmcached; do run $mode 3 "$access" --drop-cache >/dev/null; done
	for _ in $(seq "$runs"); do
		for mode in stock llmcached; do
			read -r t b < <(run $mode "$tokens" "$access") || { echo "$mode run failed (OOM kill? see dmesg)"; exit 1; }
			echo "$t" >>"$out/$mode.tps"
			echo "$b" >>"$out/$mode.bytes"
		done
	done
	s=$("$bin/llmcachectl" status --socket "$sock" --json)
	pinned=$(json_num "$s" pinned)
	cg=$cgroot/llmcache-bench-$$-llmcached
	unevictable=$(awk '$1 == "unevictable" { print $2 }' "$cg/memory.stat" 2>/dev/null || echo 0)
	daemon_read=$(awk '/^read_bytes/ { print $2 }' "/proc/$daemon/io")
	daemon_cpu_ms=$(awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$daemon/stat")
	kill "$daemon"; wait "$daemon" || true; daemon=
	declare -A tps=()
	for mode in stock llmcached; do
		tps[$mode]=$(median <"$out/$mode.tps")
		mb=$(awk -v b="$(median <"$out/$mode.bytes")" -v t="$tokens" 'BEGIN { printf "%.1f", b / t / 1e6 }')
		notes= p=- floor=-
		if [ $mode = llmcached ]; then
			p=$pinned
			floor=$(awk -v n="$n_blocks" -v s="$pinned" 'BEGIN { printf "%.1f", (n - s) * 4096 / 1e6 }')
			notes="$(awk -v a="${tps[llmcached]}" -v b="${tps[stock]}" 'BEGIN { printf "%.2fx tokens/s", a / b }');"
			notes+=" pins charged to the engine's cgroup: $((${unevictable:-0} >> 20)) of $((pinned * 4096 >> 20)) MiB;"
			notes+=" llmcached read $((daemon_read >> 20)) MiB itself and used $daemon_cpu_ms ms of CPU"
		fi
		printf '%-6s %-9s %-10s %9s %14s %10s %21s  %s\n' "$access" "$([ "$bps" = 0 ] && echo as-is || echo "$((bps / 1000000))MB/s")" \
			"$mode" "${tps[$mode]}" "$mb" "$p" "$floor" "$notes"
		echo "$access $bps $mode tokens/s: $(tr '\n' ' ' <"$out/$mode.tps")" >>"$out/runs.txt"
		rmdir "$cgroot/llmcache-bench-$$-$mode" ${blkdir[$mode]:+"${blkdir[$mode]}"}
	done
done
done
