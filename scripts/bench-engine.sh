#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make bench-engine: a real engine under memory pressure. llama.cpp's CPU build (node-llama-cpp, installed
# from npm into BUILD/engine) decodes greedily from a random-weight llama GGUF that llmworkload writes,
# through mmap (its default), inside a memory cgroup (v1 or v2) at several limits, with:
#   stock    the kernel alone;
#   mlock    a static mlock of the model's first (limit - the engine's own memory - 64 MiB) by a helper
#            in the engine's cgroup (what `vmtouch -l` does; 430 MiB at 650 MiB);
#   bpf      llmcached --mode=bpf --manage MODEL --pin-budget 1GiB;
# and the module (llmcache.ko, the model registered, pin_budget 1GiB) against stock in the VM, where the
# engine runs under TCG with the disk throttled (tests/vm/engine-bench-guest.sh).
# Each mode gets a warm-up run, then RUNS measured runs; the page cache is dropped before every run.
# Printed per model, limit and mode: median decode tokens/s and its ratio to stock, disk bytes read per
# token (the device's counter during the decode, and during its second half, "late", once what the
# engine's start moved has settled), what `llmreplay --enforce` predicts for it from a trace of the
# engine recorded with llmtrace under a limit of its anonymous memory and 80% of the model (stock: the
# kernel as an LRU; bpf: the daemon executing the planner; the VM's module rows: the module), major
# faults per token, refused or killed engines, the CPU time of a run per decoded token (the engine's, with
# its faults and the reclaim it does, and the helper's: the daemon with its prefetcher, mlock's locker;
# what the machine spends, in energy, for a token) and the helper's alone, and the sizing rule's floor
# (model - (limit - the engine's own memory: its anonymous memory and the code it keeps mapped, as the
# stock runs under the limit left them), bytes per token) and the ceiling
# it allows (compute time of the unlimited run + floor at the disk's measured bandwidth, no overlap). CSV and an SVG plot go to RESULTS/bench-engine. Documentation/engine-bench.md has figures.
# Needs root (cgroups, drop_caches, BPF) and node >= 20.
# Usage: scripts/bench-engine.sh BUILD_DIR [RESULTS_DIR] [RUNS]
# Environment: LLMCACHE_ENGINE_MODELS   "name:llmworkload gguf options, comma-separated" ...
#                                       (default "f16:--layers=24", 596 MiB)
#              LLMCACHE_ENGINE_LIMITS   limits, as % of the model or in MiB (default 650MiB; empty:
#                                       none, the VM rows only)
#              LLMCACHE_ENGINE_MODES    (default "stock mlock bpf"; "bpf:--opt,--opt=value" passes
#                                       llmcached options), _TOKENS (64), _THREADS (2)
#              LLMCACHE_ENGINE_VM       0: no VM rows; _VM_MODEL (the first model), _VM_LIMITS ("107", % of
#                                       the model), _VM_TOKENS (4), _VM_RUNS (1), _VM_DISK_BPS (10000000),
#                                       _VM_KERNEL (6.12), _VM_NO_READ_AHEAD (1: the module's runs
#                                       again without its read-ahead). Each VM run takes minutes: 11
#                                       at the defaults.
set -euo pipefail
build=${1:?usage: bench-engine.sh BUILD_DIR [RESULTS_DIR] [RUNS]}
out=${2:-results}/bench-engine
runs=${3:-3}
bin=$build/bin
models=${LLMCACHE_ENGINE_MODELS:-f16:--layers=24}
limits=${LLMCACHE_ENGINE_LIMITS-650MiB}
modes=${LLMCACHE_ENGINE_MODES:-stock mlock bpf}
tokens=${LLMCACHE_ENGINE_TOKENS:-64} threads=${LLMCACHE_ENGINE_THREADS:-2}
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" -ne 0 ]; then echo "bench-engine.sh: skipped: needs root (memory cgroups, drop_caches, BPF)"; exit 0; fi
engine=$(realpath -m "$build/engine")
if ! "$here/engine/install.sh" "$engine"; then echo "bench-engine.sh: skipped: no real engine (above)"; exit 0; fi
# shellcheck source=scripts/memcg.sh
. "$here/memcg.sh"
memcg_root || { echo "bench-engine.sh: skipped: no memory cgroup controller"; exit 0; }
mkdir -p "$out" "$engine/models"
cg=$cgroot/llmcache-engine-$$
sock=$out/llmcached.sock
helper=
cleanup() {
	[ -z "$helper" ] || { kill "$helper" 2>/dev/null; wait "$helper" 2>/dev/null || true; }
	rmdir "$cg" 2>/dev/null || true
}
trap cleanup EXIT
mkdir "$cg"

median() { sort -g | awk '{ v[NR] = $1 } END { if (!NR) print 0; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
json_num() { grep -oE "\"$2\":[0-9.e+-]+" <<<"$1" | head -n 1 | cut -d: -f2; }

# engine MODEL: one run in the cgroup, page cache dropped first. Prints its JSON line, or "refused" or
# "killed" (OOM) with the engine's last words in $out/engine.err.
engine_run() {
	local before o rc=0
	sync && echo 3 >/proc/sys/vm/drop_caches
	before=$(memcg_oom_kills "$cg")
	o=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" \
		env LLMCACHE_DISK_STAT="$disk_stat" node "$engine/generate.mjs" "$1" "$tokens" "$threads" \
		2>"$out/engine.err") || rc=$?
	if [ "$(memcg_oom_kills "$cg")" != "$before" ]; then echo killed
	elif grep -q InsufficientMemoryError "$out/engine.err"; then echo refused
	elif [ $rc -ne 0 ] || [ -z "$o" ]; then echo "failed (rc $rc): $(tail -n 3 "$out/engine.err")" >&2; echo failed
	else echo "$o"; fi
}

start_mode() { # mode[:options] model limit_bytes
	local opts=
	[ "${1#*:}" = "$1" ] || opts=${1#*:}
	case ${1%%:*} in
	stock) ;;
	mlock)
		sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" \
			"$build/tests/mlock_prefix" "$2" $(( $3 > own + (64 << 20) ? $3 - own - (64 << 20) : 0 )) >"$out/helper.out" 2>&1 &
		helper=$!
		for _ in $(seq 600); do grep -q locked "$out/helper.out" && return; sleep 0.1; done
		echo "mlock_prefix did not lock: $(cat "$out/helper.out")"; exit 1 ;;
	bpf)
		# shellcheck disable=SC2086 # the options, one word each
		"$bin/llmcached" --config /dev/null --mode=bpf --socket "$sock" --pin-budget 1GiB --manage "$2" ${opts//,/ } \
			>"$out/llmcached.log" 2>&1 &
		helper=$!
		for _ in $(seq 100); do
			"$bin/llmcachectl" status --socket "$sock" >/dev/null 2>&1 && return
			kill -0 "$helper" 2>/dev/null || break
			sleep 0.1
		done
		echo "llmcached did not start:"; cat "$out/llmcached.log"; exit 1 ;;
	esac
}
# The helper's (the daemon's, mlock_prefix's) CPU time so far in ms, user and system, with that of its
# children (the daemon's prefetcher, which it forks into the engine's cgroup), reaped or running; 0
# without a helper.
helper_cpu_ms() {
	[ -n "$helper" ] && [ -r "/proc/$helper/stat" ] || { echo 0; return; }
	local f own=1
	for f in "/proc/$helper/stat" $(pgrep -P "$helper" | sed 's|.*|/proc/&/stat|'); do
		cat "$f" 2>/dev/null | sed "s/^.*) /$own /" # a child may have gone since pgrep; its time is reaped then
		own=0
	done | awk -v hz="$(getconf CLK_TCK)" '{ ms += ($13 + $14 + ($1 ? $15 + $16 : 0)) * 1000 / hz } END { print ms + 0 }'
}
stop_mode() {
	[ -z "$helper" ] || { kill "$helper"; wait "$helper" 2>/dev/null || true; helper=; }
}

# record_trace MODEL TRACE LIMIT_BYTES: one stock run of the engine at that limit under llmtrace (the
# model's directory only), for the predictions. Leaves TRACE empty when the recorder cannot run.
record_trace() {
	local rec
	: >"$2"
	echo "$3" >"$cg/$limit_file"
	"$bin/llmtrace" record --path-prefix "$(dirname "$1")" -o "$2" 2>"$out/llmtrace.err" &
	rec=$!
	for _ in $(seq 300); do
		grep -q "^llmtrace: recording" "$out/llmtrace.err" && break
		kill -0 "$rec" 2>/dev/null || break
		sleep 0.1
	done
	grep -q "^llmtrace: recording" "$out/llmtrace.err" && engine_run "$1" >/dev/null
	kill -TERM "$rec" 2>/dev/null
	wait "$rec" || : >"$2"
}

# predict TRACE MODE LIMIT ANON CODE READ_AHEAD_KB MODEL_BYTES: what llmreplay --enforce predicts for stock, bpf (the
# daemon) or module, two words: the MB read per token (a pass of the weights), and the planner's floor,
# the MB of the weights its pins leave out (N - S, S what the planner lets that mode pin); "- -" for the
# other modes or without a trace.
predict() {
	local as
	case $2 in stock) as=stock ;; bpf) as=daemon ;; module) as=module ;; *) echo "- -"; return ;; esac
	[ -s "$1" ] || { echo "- -"; return; }
	"$bin/llmreplay" "$1" --enforce "$as" --memcg-limit "$3" --engine-anon "$4" --engine-code "$5" \
		--read-around "$(( $6 << 10 ))" --csv - 2>/dev/null |
		awk -F, -v n="$7" 'NR == 2 { printf "%.1f %s", $6 / 1e6, ($3 > 0 ? sprintf("%.1f", (n - $3) / 1e6) : "-") }' |
		grep . || echo "- -"
}

svg() { # csv -> svg: tokens/s against the limit (% of the model), one line per model and mode
	awk -F, 'NR > 1 && $5 > 0 { key = $1 " " $4; x[key, ++n[key]] = $3; y[key, n[key]] = $5; keys[key];
			if ($3 > xmax) xmax = $3; if ($5 > ymax) ymax = $5 }
		END {
			W = 640; H = 400; L = 60; B = 50; xmax = xmax * 1.05 + 1; ymax = ymax * 1.1 + 0.001
			printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H
			printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
			printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, H - B, W - 10, H - B
			printf "<line x1=\"%d\" y1=\"10\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, L, H - B
			printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">memory limit (%% of the model)</text>\n", (L + W) / 2, H - 10
			printf "<text x=\"15\" y=\"%d\" transform=\"rotate(-90 15 %d)\" text-anchor=\"middle\">decode tokens/s</text>\n", H / 2, H / 2
			for (t = 0; t <= 4; t++) {
				printf "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.1f</text>\n", L - 5, H - B - t * (H - B - 10) / 4 + 4, ymax * t / 4
				printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", L + t * (W - L - 10) / 4, H - B + 15, xmax * t / 4
			}
			split("#1f77b4 #d62728 #2ca02c #9467bd #ff7f0e #8c564b", colour, " ")
			for (key in keys) {
				c = colour[++k]; pts = ""
				for (i = 1; i <= n[key]; i++)
					pts = pts sprintf("%.1f,%.1f ", L + x[key, i] / xmax * (W - L - 10), H - B - y[key, i] / ymax * (H - B - 10))
				printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", c, pts
				printf "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n", L + 10, 10 + 15 * k, c, key
			}
			print "</svg>"
		}' "$1"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)," \
	"$(free -g | awk '/^Mem/ {print $2}') GiB; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "engine: llama.cpp (node-llama-cpp $(node -p "require('$engine/node_modules/node-llama-cpp/package.json').version")," \
	"prebuilt CPU build), mmap, $threads threads, greedy, $tokens tokens per run, $runs runs per mode after a warm-up run"
csv=$out/engine.csv
echo "model,limit_mib,limit_pct,mode,tokens_per_s,x_stock,mb_read_per_token,major_faults_per_token,floor_mb_per_token,ceiling_tokens_per_s,refused,killed,late_mb_read_per_token,predicted_mb_per_token,planner_floor_mb_per_token,cpu_ms_per_token,helper_cpu_ms_per_token" >"$csv"
for spec in $models; do
	name=${spec%%:*} opts=${spec#*:}
	model=$engine/models/$name.gguf
	# shellcheck disable=SC2086 # the options, one word each
	"$bin/llmworkload" gguf "$model" ${opts//,/ } >/dev/null
	model_bytes=$(stat -c %s "$model")
	devno=$(stat -c %d "$model")
	sysdev=/sys/dev/block/$(( (devno >> 8) & 0xfff )):$(( (devno & 0xff) | ((devno >> 12) & 0xfff00) ))
	[ ! -e "$sysdev/partition" ] || sysdev=$(readlink -f "$sysdev/..")
	disk_stat=$sysdev/stat
	# The disk's bandwidth, the engine's speed and its other memory (heap, context, code) with no limit.
	t0=$(date +%s%N)
	dd if="$model" of=/dev/null bs=8M iflag=direct status=none
	bw=$(( model_bytes * 1000000000 / ($(date +%s%N) - t0) ))
	echo max >"$cg/$limit_file" 2>/dev/null || echo -1 >"$cg/$limit_file"
	engine_run "$model" >/dev/null
	fit=$(engine_run "$model")
	fit_tps=$(json_num "$fit" tokens_per_s)
	fit_anon=$(json_num "$fit" rss_anon) fit_code=$(json_num "$fit" rss_code)
	own=$((fit_anon + fit_code))
	record_trace "$model" "$out/$name.trace" $(( fit_anon + model_bytes * 80 / 100 ))
	echo
	echo "model $name: $((model_bytes >> 20)) MiB (llmworkload gguf ${opts//,/ }), disk $(basename "$sysdev") at $((bw / 1000000)) MB/s," \
		"read-ahead $(cat "$sysdev/queue/read_ahead_kb") KiB; no limit: $(printf %.2f "$fit_tps") tokens/s, anonymous memory $((fit_anon >> 20)) MiB, code mapped $((fit_code >> 20)) MiB"
	[ -s "$out/$name.trace" ] && echo "trace for the predictions: $out/$name.trace, recorded with the engine's anonymous memory and 80% of the model as the limit" ||
		echo "no predictions: llmtrace could not record the engine ($(tail -n 1 "$out/llmtrace.err"))"
	printf '%-9s %-5s %-18s %9s %8s %14s %10s %10s %13s %11s %10s %13s %9s %12s  %s\n' limit "%" mode tokens/s "x stock" "MB read/token" \
		"late MB/t" "predicted" "majflt/token" "floor MB/t" "N-S MB/t" "ceiling t/s" "CPU ms/t" "helper ms/t" notes
	for lim in $limits; do
		case $lim in
		*%) limit_bytes=$(( model_bytes * ${lim%\%} / 100 )) ;;
		*MiB) limit_bytes=$(( ${lim%MiB} << 20 )) ;;
		*) echo "bench-engine.sh: a limit is a percentage of the model (80%) or MiB (650MiB), not '$lim'"; exit 2 ;;
		esac
		pct=$(( limit_bytes * 100 / model_bytes ))
		floor_of() { # the engine's own memory in bytes: the floor and the ceiling
			floor=$(( model_bytes + $1 > limit_bytes ? model_bytes + $1 - limit_bytes : 0 ))
			ceiling=$(awk -v t="$fit_tps" -v f="$floor" -v bw="$bw" 'BEGIN { printf "%.2f", 1 / (1 / t + f / bw) }')
		}
		floor_of "$own"
		declare -A tps=()
		for mode in $modes; do
			echo "$limit_bytes" >"$cg/$limit_file"
			start_mode "$mode" "$model" "$limit_bytes"
			rm -f "$out/runs"
			engine_run "$model" >/dev/null
			refused=0 killed=0
			for _ in $(seq "$runs"); do
				cpu0=$(helper_cpu_ms)
				o=$(engine_run "$model")
				cpu=$(awk -v a="$cpu0" -v b="$(helper_cpu_ms)" 'BEGIN { print b - a }')
				case $o in
				refused) refused=$((refused + 1)) ;;
				killed) killed=$((killed + 1)) ;;
				failed) ;;
				*) echo "$(json_num "$o" tokens_per_s) $(json_num "$o" disk_read_bytes) $(json_num "$o" major_faults)" \
					"$(json_num "$o" decode_tokens) $(( $(json_num "$o" rss_anon) + $(json_num "$o" rss_code) ))" \
					"$(json_num "$o" late_disk_read_bytes) $(json_num "$o" late_tokens) $(json_num "$o" rss_anon) $(json_num "$o" rss_code) $cpu $(json_num "$o" cpu_s)" >>"$out/runs" ;;
				esac
			done
			stop_mode
			of_runs() { if [ -f "$out/runs" ]; then awk "{ print $1 }" "$out/runs" | median; else echo 0; fi; }
			t=$(of_runs '$1') mb=$(of_runs '$2 / $4 / 1e6') mf=$(of_runs '$3 / $4') late=$(of_runs '($7 ? $6 / $7 / 1e6 : 0)')
			cpu=$(of_runs '$10 / $4') total_cpu=$(of_runs '($11 * 1000 + $10) / $4')
			tps[$mode]=$t
			# The stock engine under the limit: what it keeps of its own memory sets the floor.
			[ "$mode" != stock ] || [ ! -f "$out/runs" ] || floor_of "$(of_runs '$5' | cut -d. -f1)"
			# The prediction's engine memory: what the engine had in that mode, anonymous and code.
			anon=$fit_anon code=$fit_code
			[ ! -f "$out/runs" ] || anon=$(of_runs '$8' | cut -d. -f1) code=$(of_runs '$9' | cut -d. -f1)
			read -r predicted planner_floor < <(predict "$out/$name.trace" "${mode%%:*}" "$limit_bytes" "$anon" "$code" \
				"$(cat "$sysdev/queue/read_ahead_kb")" "$model_bytes")
			x=$(awk -v a="$t" -v b="${tps[stock]:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
			notes=
			[ $refused = 0 ] || notes+="refused $refused of $runs; "
			[ $killed = 0 ] || notes+="OOM-killed $killed of $runs; "
			printf '%-9s %-5s %-18s %9.2f %8s %14.1f %10.1f %10s %13.0f %11.1f %10s %13s %9.1f %12.1f  %s\n' "$((limit_bytes >> 20))MiB" "$pct" "$mode" \
				"$t" "$x" "$mb" "$late" "$predicted" "$mf" "$(awk -v f="$floor" 'BEGIN { print f / 1e6 }')" "$planner_floor" "$ceiling" "$total_cpu" "$cpu" "$notes"
			echo "$name,$((limit_bytes >> 20)),$pct,${mode//,/ },$t,$x,$mb,$mf,$(awk -v f="$floor" 'BEGIN { print f / 1e6 }'),$ceiling,$refused,$killed,$late,$predicted,$planner_floor,$total_cpu,$cpu" >>"$csv"
		done
	done
done
# The module's rows: the same engine beside llmcache.ko in the VM (tests/vm/engine-bench-guest.sh), the
# scratch disk's reads throttled so that the stock run is I/O-bound under TCG, where the engine computes
# about 100 times slower than here.
vm_kernel=${LLMCACHE_ENGINE_VM_KERNEL:-6.12}
vm_spec=${LLMCACHE_ENGINE_VM_MODEL:-${models%% *}}
vm_bps=${LLMCACHE_ENGINE_VM_DISK_BPS:-10000000}
echo
if [ "${LLMCACHE_ENGINE_VM:-1}" = 0 ]; then
	echo "module in the VM: not run (LLMCACHE_ENGINE_VM=0)"
elif ! ls /boot/vmlinuz-"$vm_kernel"[.-]*-amd64 >/dev/null 2>&1 || ! ls -d /usr/src/linux-headers-"$vm_kernel"[.-]*-amd64 >/dev/null 2>&1; then
	echo "module in the VM: skipped: Debian kernel $vm_kernel image or headers not installed (make deps)"
else
	make -s -C "$here/.." kmod BUILD="$build" >/dev/null
	vm_name=${vm_spec%%:*} vm_opts=${vm_spec#*:}
	vm_out=$out/vm-$vm_name.txt
	echo "module in the VM: llmcache.ko on Debian $vm_kernel under qemu TCG (2 vCPUs, 1536 MiB), scratch disk reads" \
		"throttled to $((vm_bps / 1000000)) MB/s; model $vm_name, ${LLMCACHE_ENGINE_VM_TOKENS:-4} tokens per run," \
		"${LLMCACHE_ENGINE_VM_RUNS:-1} runs per mode (the module's after a warm-up run)"
	LLMCACHE_ENGINE_VM_GGUF=$vm_opts LLMCACHE_ENGINE_VM_LIMITS="${LLMCACHE_ENGINE_VM_LIMITS:-107}" \
		LLMCACHE_BUILD=$build LLMCACHE_BIN=$bin "$here/../tests/vm/run.sh" --mem 1536M --disk 2G \
		--disk-read-bps "$vm_bps" --timeout 14400 "$vm_kernel" -- sh "$here/../tests/vm/engine-bench-guest.sh" >"$vm_out" 2>&1 || {
		echo "bench-engine.sh: the VM run failed:"; cat "$vm_out"; exit 1
	}
	grep '^guest:' "$vm_out"
	printf '%-9s %-5s %-18s %9s %8s %14s %10s %13s %11s %10s  %s\n' limit "%" mode tokens/s "x stock" "MB read/token" \
		predicted "majflt/token" "floor MB/t" "N-S MB/t" notes
	vm_model=$(( $(sed -n 's/^guest:.* model \([0-9]*\) MiB$/\1/p' "$vm_out") << 20 ))
	vm_read_ahead=$(sed -n 's/^guest:.* read-ahead \([0-9]*\) KiB.*/\1/p' "$vm_out")
	runs_of() { awk -v l="$limit" -v m="$mode" '$1 == "result" && $2 == l && $3 == m' "$vm_out"; }
	for limit in $(awk '$1 == "result" { print $2 }' "$vm_out" | uniq); do
		pct=$(( limit * 100 / vm_model ))
		for mode in stock module $([ "${LLMCACHE_ENGINE_VM_NO_READ_AHEAD:-0}" = 1 ] && echo module-no-read-ahead); do
			ok_runs=$(runs_of | awk '$9 == "ok"')
			t=$(awk '{ print $4 }' <<<"$ok_runs" | median)
			mb=$(awk '$6 { print $5 / $6 / 1e6 }' <<<"$ok_runs" | median)
			mf=$(awk '$6 { print $7 / $6 }' <<<"$ok_runs" | median)
			refused=$(runs_of | grep -c ' refused$' || true) killed=$(runs_of | grep -c ' killed$' || true)
			if [ $mode = stock ]; then
				stock_t=$t
				own=$(awk '{ print $8 }' <<<"$ok_runs" | median)
				floor=$(awk -v m="$vm_model" -v o="$own" -v l="$limit" 'BEGIN { f = m + o - l; print (f > 0 ? f / 1e6 : 0) }')
			fi
			vm_anon=$(awk '{ print $10 }' <<<"$ok_runs" | median | cut -d. -f1)
			vm_code=$(awk '{ print $8 - $10 }' <<<"$ok_runs" | median | cut -d. -f1)
			x=$(awk -v a="$t" -v b="$stock_t" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
			notes=
			[ "$refused" = 0 ] || notes+="refused $refused; "
			[ "$killed" = 0 ] || notes+="OOM-killed $killed; "
			read -r predicted planner_floor < <(predict "$out/$vm_name.trace" "$mode" "$limit" "$vm_anon" "$vm_code" \
				"$vm_read_ahead" "$vm_model")
			printf '%-9s %-5s %-18s %9.3f %8s %14.1f %10s %13.0f %11.1f %10s  %s\n' "$((limit >> 20))MiB" "$pct" "$mode (VM)" \
				"$t" "$x" "$mb" "$predicted" "$mf" "$floor" "$planner_floor" "$notes"
			echo "$vm_name,$((limit >> 20)),$pct,vm-$mode,$t,$x,$mb,$mf,$floor,,$refused,$killed,,$predicted,$planner_floor" >>"$csv"
		done
	done
	grep '^pinned' "$vm_out" | awk '{ printf "module at %d MiB: %d MiB pinned at the end, %d blocks released to the cgroup\n", $2 / 1048576, $3 / 256, $5 }'
fi

svg "$csv" >"$out/engine.svg"
echo
echo "CSV: $csv; plot: $out/engine.svg"
