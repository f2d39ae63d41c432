#!/bin/sh
# SPDX-License-Identifier: MIT
# The guest half of `make vm-bench` (scripts/vm-bench.sh), run as root inside the VM with $LLMCACHE_BIN,
# $LLMCACHE_KO and $LLMCACHE_SCRATCH set. Sizes llmworkload's decoder from the page cache this guest has
# (its weights loop is LLMCACHE_BENCH_RATIO times MemAvailable), then for the pread and mmap variants
# runs it with llmcache.ko unloaded, loaded with the weights' loop tails kept (flag NO_DROP), and
# loaded (weights, tokenizer and config registered, pin budget = MemAvailable minus a margin), one
# after the other in this boot. Each run starts from a dropped page
# cache, decodes LLMCACHE_BENCH_WARMUP tokens (the loop is classified on its second sweep), then
# LLMCACHE_BENCH_TOKENS measured tokens. Prints one line per run:
#   result ACCESS MODE TOKENS_PER_S DISK_BYTES_PER_TOKEN MAJOR_FAULTS_PER_TOKEN PINNED_BLOCKS S_BLOCKS N_BLOCKS
# (MODE: unloaded, nodrop or loaded; pinned: at the end of the run; S: the pin budget, 0 unloaded;
# N: the weights loop) and, for the cost of the module on a workload that fits (weights half of
# MemAvailable), rounds of unloaded, hooks (loaded with pin_budget 0) and loaded runs, each measured once
# the warm-up's pins are in place:
#   fit ACCESS MODE ROUND TOKENS_PER_S
# and, when perf is installed, LLMCACHE_BENCH_PROFILE_RUNS profiled runs per mode (see profile below):
#   profile ACCESS MODE PERCENT_OF_THE_DECODERS_CPU_UNDER_THE_HOOKS
set -eu
bin=$LLMCACHE_BIN
ratio=${LLMCACHE_BENCH_RATIO:-1.5}
tokens=${LLMCACHE_BENCH_TOKENS:-3}
warmup=${LLMCACHE_BENCH_WARMUP:-2}
fit_tokens=${LLMCACHE_BENCH_FIT_TOKENS:-40} # per pread run; an mmap token copies nothing and costs 1/8 of it
fit_pairs=${LLMCACHE_BENCH_FIT_PAIRS:-3}
parts=${LLMCACHE_BENCH_PARTS:-all} # all, loop (the 1.5x runs) or fit (the fits-in-memory rounds)
profile_runs=${LLMCACHE_BENCH_PROFILE_RUNS:-2}
sys=/sys/kernel/llmcache
disk=$(basename "$(df "$LLMCACHE_SCRATCH" | awk 'NR == 2 { print $1 }')")
mib=1048576

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
sectors_read() { awk '{ print $3 }' "/sys/block/$disk/stat"; }
major_faults() { awk '$1 == "pgmajfault" { print $2 }' /proc/vmstat; }
json_field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }

drop
avail_kib=$(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo)
avail=$((avail_kib * 1024))
weights=$(awk -v a="$avail" -v r="$ratio" -v m=$mib 'BEGIN { printf "%d", int(a * r / m) * m }')
margin=$((avail / 8 > 32 * mib ? avail / 8 : 32 * mib))
budget=$(((avail - margin) / mib * mib))
echo "guest: $(uname -r), MemAvailable $((avail / mib)) MiB, weights $((weights / mib)) MiB," \
	"pin budget $((budget / mib)) MiB, disk $disk"

decoder() { # dir weights-bytes access tokens: the JSON summary
	"$bin/llmworkload" decoder --dir "$1" --weights-size "$2" --tokenizer-size 1MiB --config-size 4MiB \
		--access "$3" --tokens "$4" --json
}
load() { # dir budget
	insmod "$LLMCACHE_KO"
	echo "$2" >"$sys/pin_budget"
	"$bin/llmcachectl" register "$1/decoder/weights.bin" "$1/decoder/tokenizer.bin" \
		"$1/decoder/config.bin" >/dev/null
}

# Wait until the pin worker is done with what the warm-up asked (stats/pinned still for a second, at
# most 30 s): the fits-in-memory runs are short, and the steady state is what they measure.
settle() { # sh has no local variables: its own names
	settle_s=0 settle_before=-1
	while [ $settle_s -lt 30 ]; do
		settle_now=$(cat "$sys/stats/pinned" 2>/dev/null || echo 0)
		[ "$settle_now" = "$settle_before" ] && return
		settle_before=$settle_now settle_s=$((settle_s + 1))
		sleep 1
	done
}

run() { # access mode
	drop
	if [ "$2" != unloaded ]; then
		load "$dir" "$budget"
		[ "$2" = nodrop ] && "$bin/llmcachectl" set-file --no-drop "$dir/decoder/weights.bin" >/dev/null
	fi
	decoder "$dir" "$weights" "$1" "$warmup" >/dev/null
	s0=$(sectors_read) f0=$(major_faults)
	tps=$(decoder "$dir" "$weights" "$1" "$tokens" | json_field tokens_per_s)
	s1=$(sectors_read) f1=$(major_faults)
	pinned=0 s=0
	if [ "$2" != unloaded ]; then
		pinned=$(cat "$sys/stats/pinned") s=$((budget / 4096))
		rmmod llmcache
	fi
	echo "result $1 $2 $tps $(((s1 - s0) * 512 / tokens)) $(((f1 - f0) / tokens)) $pinned $s $((weights / 4096))"
}

if [ "$parts" != fit ]; then
	dir=$LLMCACHE_SCRATCH/big
	decoder "$dir" "$weights" pread 0 >/dev/null
	for access in pread mmap; do
		run "$access" unloaded
		run "$access" nodrop
		run "$access" loaded
	done
	rm -rf "$dir"
fi
[ "$parts" != loop ] || exit 0

# The module's cost measured inside one run, which the host's speed cannot move: perf samples the
# decoder's thread (its system calls included) by CPU clock, and the share of samples under the hooks
# is what they cost it. Under the hooks means below the kprobe trampolines where kprobes feed the core
# (6.1: the trap's own cost included), else below llc_feed_access, plus llc_feed_cache (page cache
# insertions and deletions). A sample that falls while interrupts are off is taken where they come
# back on (_raw_spin_unlock_irqrestore), inside the same hook, so it counts too.
profile() { # dir weights-bytes access tokens mode
	perf record -q -N -g -e cpu-clock -F 2000 -o "$LLMCACHE_SCRATCH/perf.data" -- "$bin/llmworkload" decoder \
		--dir "$1" --weights-size "$2" --tokenizer-size 1MiB --config-size 4MiB --access "$3" --tokens "$4" \
		>/dev/null 2>&1
	perf report -i "$LLMCACHE_SCRATCH/perf.data" --stdio --children --sort sym -g none 2>/dev/null |
		awk -v a="$3" -v m="$5" '
		$3 == "[k]" { share[$4] = $1 + 0 }
		END { printf "profile %s %s %.2f\n", a, m,
			("ftrace_trampoline" in share ? share["ftrace_trampoline"] : share["llc_feed_access"]) + share["llc_feed_cache"] }'
}

# The module's cost when everything fits: the same decoder at half of MemAvailable, warm cache. Odd
# rounds run the modes in the reverse order, so that a drift of the host's speed favours none of them.
dir=$LLMCACHE_SCRATCH/fit
small=$((avail / 2 / mib * mib))
decoder "$dir" "$small" pread 0 >/dev/null
for access in pread mmap; do
	tokens_per_run=$fit_tokens
	[ $access = mmap ] && tokens_per_run=$((fit_tokens * 8))
	i=0
	while [ $i -lt "$fit_pairs" ]; do
		modes="unloaded hooks loaded"
		[ $((i % 2)) = 1 ] && modes="loaded hooks unloaded"
		for mode in $modes; do
			[ $mode = hooks ] && load "$dir" 0
			[ $mode = loaded ] && load "$dir" "$budget"
			decoder "$dir" "$small" "$access" 2 >/dev/null
			settle
			echo "fit $access $mode $i $(decoder "$dir" "$small" "$access" "$tokens_per_run" | json_field tokens_per_s)"
			[ $mode != unloaded ] && rmmod llmcache
		done
		i=$((i + 1))
	done
	command -v perf >/dev/null || continue
	for mode in hooks loaded; do
		[ $mode = hooks ] && load "$dir" 0
		[ $mode = loaded ] && load "$dir" "$budget"
		decoder "$dir" "$small" "$access" 2 >/dev/null
		settle
		i=0
		while [ $i -lt "$profile_runs" ]; do
			profile "$dir" "$small" "$access" "$tokens_per_run" "$mode"
			i=$((i + 1))
		done
		rmmod llmcache
	done
done
