#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Recorder overhead: a read-heavy llmworkload decoder (weights in the page cache, so the run is bound by
# the read path, the worst case for a tracer) untraced, under `llmtrace record` and under `strace -f`
# (what llmtrace replaces). Prints the median tokens/s of each and the slowdown against untraced, the
# median CPU seconds of the whole command (tracer included), the median CPU milliseconds of the workload
# alone (the BPF programs run in its context, so this is their cost; the steadiest figure on a shared
# machine), its minimum (other jobs only ever add to it) and llmtrace's lost events (the target is <= 5%
# slowdown and zero lost events). Needs root.
# The modes take turns, run after run, so that a change in the machine's load hits them all alike.
# Usage: scripts/bench-bpf.sh BIN_DIR [RESULTS_DIR] [RUNS]
# With LLMTRACE_BASELINE=PATH (another build's llmtrace, e.g. of an older commit) it also runs that one,
# in the row "baseline", for before/after figures from one run.
set -euo pipefail
bin=${1:?usage: bench-bpf.sh BIN_DIR [RESULTS_DIR] [RUNS]}
out=${2:-results}/bench-bpf
runs=${3:-5}
[ "$(id -u)" -eq 0 ] || { echo "bench-bpf.sh needs root (llmtrace loads a BPF program)"; exit 1; }
command -v strace >/dev/null || { echo "bench-bpf.sh needs strace (scripts/install-deps.sh build)"; exit 1; }
mkdir -p "$out"
dir=$out/files
field() { grep -oE "(^| )$2=[0-9.]+" <<<"$1" | cut -d= -f2; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "machine: $(nproc) cores, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for read_size in 128KiB 4KiB; do
	wl=("$bin/llmworkload" decoder --dir "$dir" --weights-size 64MiB --tokenizer-size 1MiB --config-size 1MiB
		--access pread --read-size "$read_size")
	tokens=$([ "$read_size" = 4KiB ] && echo 8 || echo 40)
	"${wl[@]}" --tokens 1 >/dev/null # create the files and warm the cache
	reads=$(( (64 << 20) / $( [ "$read_size" = 4KiB ] && echo 4096 || echo 131072 ) * tokens ))
	echo
	echo "=== decoder, 64 MiB weights in the page cache, $read_size preads, $tokens tokens (~$reads reads per run) ==="
	printf '%-10s %10s %9s %8s %9s %7s %7s %7s %7s  %s\n' mode tokens/s slowdown "CPU s" "CPU +" "wl ms" "wl +" \
		"wl min" "min +" notes
	declare -A tps=() cpu=() wcpu=() wmin=() lost_all=()
	modes=(untraced llmtrace ${LLMTRACE_BASELINE:+baseline} strace)
	for mode in "${modes[@]}"; do rm -f "$out/tps.$mode" "$out/cpu.$mode" "$out/wcpu.$mode"; lost_all[$mode]=0; done
	for _ in $(seq "$runs"); do
		for mode in "${modes[@]}"; do
			time=(/usr/bin/time -f "%S %U" -o "$out/time")
			# The workload's own user + system CPU, in ms (bash's time), on stderr of the inner shell.
			inner=(bash -c 'TIMEFORMAT="wlcpu %3U %3S"; time "$@"' _ "${wl[@]}" --tokens "$tokens")
			case $mode in
			untraced) o=$("${time[@]}" "${inner[@]}" 2>"$out/wl.err") ;;
			llmtrace|baseline)
				  tracer=$bin/llmtrace
				  [ "$mode" = llmtrace ] || tracer=$LLMTRACE_BASELINE
				  o=$("${time[@]}" "$tracer" record -q -o "$out/$mode.trace" -- "${inner[@]}" 2>"$out/wl.err")
				  lost=$(grep -oE '[0-9]+ lost events' "$out/wl.err" | cut -d' ' -f1)
				  lost_all[$mode]=$((lost_all[$mode] + ${lost:-0})) ;;
			strace) o=$("${time[@]}" strace -f -tt -yy -o "$out/run.strace" "${inner[@]}" 2>"$out/wl.err") ;;
			esac
			field "$o" tokens_per_s >>"$out/tps.$mode"
			awk '{ print $1 + $2 }' "$out/time" >>"$out/cpu.$mode"
			awk '$1 == "wlcpu" { print ($2 + $3) * 1000 }' "$out/wl.err" >>"$out/wcpu.$mode"
		done
	done
	for mode in "${modes[@]}"; do
		tps[$mode]=$(median <"$out/tps.$mode")
		cpu[$mode]=$(median <"$out/cpu.$mode")
		wcpu[$mode]=$(median <"$out/wcpu.$mode")
		wmin[$mode]=$(sort -g "$out/wcpu.$mode" | head -n 1)
		slow=$(awk -v a="${tps[untraced]}" -v b="${tps[$mode]}" 'BEGIN { printf "%.1f%%", (a / b - 1) * 100 }')
		more=$(awk -v a="${cpu[untraced]}" -v b="${cpu[$mode]}" 'BEGIN { printf "%.0f%%", (b / a - 1) * 100 }')
		wmore=$(awk -v a="${wcpu[untraced]}" -v b="${wcpu[$mode]}" 'BEGIN { printf "%.0f%%", (b / a - 1) * 100 }')
		minmore=$(awk -v a="${wmin[untraced]}" -v b="${wmin[$mode]}" 'BEGIN { printf "%.0f%%", (b / a - 1) * 100 }')
		note=""
		[ "$mode" = llmtrace ] || [ "$mode" = baseline ] &&
			note="lost events: ${lost_all[$mode]} over $runs runs; trace $(stat -c %s "$out/$mode.trace") bytes"
		[ "$mode" = strace ] && note="trace $(stat -c %s "$out/run.strace") bytes"
		printf '%-10s %10.1f %9s %8.2f %9s %7.0f %7s %7.0f %7s  %s\n' "$mode" "${tps[$mode]}" "$slow" "${cpu[$mode]}" \
			"$more" "${wcpu[$mode]}" "$wmore" "${wmin[$mode]}" "$minmore" "$note"
	done
	unset tps cpu wcpu wmin lost_all
done
rm -rf "$dir" "$out"/*.trace "$out/run.strace" "$out/time" "$out"/tps.* "$out"/cpu.* "$out"/wcpu.* "$out/wl.err"
