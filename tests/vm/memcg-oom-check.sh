#!/bin/sh
# SPDX-License-Identifier: MIT
# Pins under a memory cgroup's limit never make its OOM killer take the engine. Run as root inside the
# VM (tests/vm/run.sh) with $LLMCACHE_BIN, $LLMCACHE_KO and $LLMCACHE_SCRATCH set.
#
# A cgroup limited to LIMIT (128 MiB); llmworkload's decoder runs in it over and over (a weights loop
# read with pread or mmap: $LLMCACHE_OOM_ACCESS, default both) with its files registered and a pin
# budget far above the limit, so the module pins what it may of the loop in pages charged to the cgroup:
# of a 96 MiB loop read with pread, what the cgroup leaves besides the decoder and three 4 MiB read-ahead
# windows (llc_plan_read_budget); of a 160 MiB loop mapped (96 MiB would fit beside
# the decoder, and the planner pins nothing then), what the cgroup leaves besides the decoder, 16 MiB
# of code, eight 4 MiB stream units and a margin of two. Then, while the decoder keeps decoding, a second
# process in the cgroup (build/kselftest/llmcache_anon_grow) touches anonymous memory 8 MiB at a time up to LIMIT minus
# 16 MiB, into the room the pins hold, and holds it for a few seconds. Checked: no OOM kill in the
# cgroup (memory.events oom_kill on cgroup v2, memory.oom_control oom_kill on v1), both processes
# finish on their own, and the pins shrank to what the anonymous memory left (stats/pinned). The mapped
# loop runs a second time with the decoder paused (SIGSTOP) while the memory grows: no plan then follows
# the engine's memory, and the pins must go through the cgroup's failed reclaims (stats/shrinker_released
# grows), which a decoding engine's plans mostly leave nothing to do. Then, on
# cgroup v2, memory.max is written down to 48 MiB from outside the cgroup while the read() loop holds
# more than that in pins: the write
# succeeds, nothing is OOM-killed, and the pins fall under the new limit.
#
# cgroup v2 (the guest mounts it at /sys/fs/cgroup) when its memory controller is there, else v1
# mounted at /run/llmcache-memcg-v1; LLMCACHE_OOM_CGROUP=v1 forces v1 (kernels built with it: 6.1).
# LLMCACHE_OOM_ANON_MIB (112) and LLMCACHE_OOM_STEP_MIB (8) change how far and how fast the anonymous
# memory grows (120 and 60 pass too). Prints PASS or the first FAIL.
b=$LLMCACHE_BIN
grow=$(dirname "$b")/kselftest/llmcache_anon_grow
sys=/sys/kernel/llmcache
mib=1048576
limit_mib=128 anon_mib=${LLMCACHE_OOM_ANON_MIB:-112} step_mib=${LLMCACHE_OOM_STEP_MIB:-8} hold_s=5
engine=
fail() {
	echo "FAIL: $*"
	[ -n "$engine" ] && kill "$engine" 2>/dev/null
	cat "$LLMCACHE_SCRATCH"/engine.log 2>/dev/null | tail -n 5
	echo "module: pinned $(cat "$sys/stats/pinned" 2>/dev/null), released $(cat "$sys/stats/shrinker_released" 2>/dev/null);" \
		"cgroup: $(grep -hE '^(anon|file|unevictable) ' "$cg/memory.stat" 2>/dev/null | tr '\n' ' ')"
	for f in "$sys"/files/*/; do
		[ -e "$f/path" ] && echo "  $(cat "$f/path"): pinned $(cat "$f/pinned"), pin_limit $(cat "$f/pin_limit")"
	done
	dmesg | grep -iE 'oom|llmcache' | tail -n 20
	rmmod llmcache 2>/dev/null
	exit 1
}
num() { cat "$sys/$1"; }

[ -x "$grow" ] || fail "$grow is missing (make -C tests/kselftest)"

# The cgroup, with the memory controller of whichever hierarchy has it.
if [ "${LLMCACHE_OOM_CGROUP:-}" != v1 ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	version=2 root=/sys/fs/cgroup
	echo +memory >"$root/cgroup.subtree_control" || fail "cannot enable the memory controller"
else
	version=1 root=/run/llmcache-memcg-v1
	mkdir -p "$root"
	mount -t cgroup -o memory none "$root" || fail "no memory controller in cgroup v2 or v1"
fi
cg=$root/llmcache-oom
cg_make() {
	mkdir "$cg" || fail "mkdir $cg"
	if [ $version = 2 ]; then
		echo $((limit_mib * mib)) >"$cg/memory.max" || fail "cannot limit $cg"
		echo 0 >"$cg/memory.swap.max" 2>/dev/null # the guest has no swap; should it have some, none here
	else
		echo $((limit_mib * mib)) >"$cg/memory.limit_in_bytes" || fail "cannot limit $cg"
		echo 0 >"$cg/memory.swappiness"
	fi
}
oom_kills() {
	if [ $version = 2 ]; then
		awk '$1 == "oom_kill" { print $2 }' "$cg/memory.events"
	else
		awk '$1 == "oom_kill" { print $2 }' "$cg/memory.oom_control"
	fi
}
usage_mib() {
	if [ $version = 2 ]; then
		echo $(($(cat "$cg/memory.current") / mib))
	else
		echo $(($(cat "$cg/memory.usage_in_bytes") / mib))
	fi
}
in_cg() { # command...: runs it in the cgroup
	sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@"
}

insmod "$LLMCACHE_KO" || fail "insmod $LLMCACHE_KO"

# The engine: llmworkload's decoder over $wl with ACCESS and WEIGHTS_MIB, two tokens per run, run after
# run in the cgroup until stop_engine; a failed run is noted.
start_engine() { # access weights_mib
	rm -f "$LLMCACHE_SCRATCH/engine.stop" "$LLMCACHE_SCRATCH/engine.failed"
	in_cg sh -c 'while [ ! -e "$1/engine.stop" ]; do
		"$2/llmworkload" decoder --dir "$3" --weights-size "$4" --tokenizer-size 1MiB --config-size 4MiB \
			--access "$5" --tokens 2 >/dev/null || { echo "exit $?" >"$1/engine.failed"; exit 1; }
	done' sh "$LLMCACHE_SCRATCH" "$b" "$wl" "${2}MiB" "$1" >"$LLMCACHE_SCRATCH/engine.log" 2>&1 &
	engine=$!
}
stop_engine() { # what: the engine ends its run and stops
	touch "$LLMCACHE_SCRATCH/engine.stop"
	wait "$engine" || fail "$1: the engine did not finish on its own: $(cat "$LLMCACHE_SCRATCH/engine.failed" 2>/dev/null) (oom_kill $(oom_kills))"
	engine=
}
# SIGSTOP the engine's run, retried until one is stopped: between two runs there is none, and a run that
# was exiting when the signal came is followed by a new one.
pause_engine() { # what
	i=0
	while :; do
		pkill -STOP -x llmworkload
		sleep 0.2
		for pid in $(pgrep -x llmworkload); do
			[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = T ] && return
		done
		i=$((i + 1))
		[ $i -lt 50 ] || fail "$1: no engine run to pause in 10 s"
	done
}
# Until the engine's loop has three quarters of half the limit pinned, 60 s at most: the pins in $before.
wait_pinned() { # what
	half=$((limit_mib * mib / 2 / 4096)) i=0
	while [ "$(num stats/pinned)" -lt $((half * 3 / 4)) ] && [ $i -lt 600 ]; do
		[ -e "$LLMCACHE_SCRATCH/engine.failed" ] && fail "$1: the engine failed before the growth: $(cat "$LLMCACHE_SCRATCH/engine.failed")"
		sleep 0.1
		i=$((i + 1))
	done
	before=$(num stats/pinned)
}

run_one() { # access [paused]: one engine run under the growth; paused: the engine stopped meanwhile
	access=$1 paused=${2:-} wl=$LLMCACHE_SCRATCH/oom-wl-$1 what=$1${2:+ $2}
	if [ "$access" = mmap ]; then
		weights_mib=160 most=$(((limit_mib - 16 - 32 - 8) * mib / 4096))
	else
		weights_mib=96 most=$(((limit_mib - 3 * 4) * mib / 4096)) # llc_plan_read_budget: 3 windows of 4 MiB
	fi
	"$b/llmworkload" decoder --dir "$wl" --weights-size ${weights_mib}MiB --tokenizer-size 1MiB --config-size 4MiB \
		--tokens 1 >/dev/null || fail "creating the decoder's files"
	cg_make
	sync
	echo 3 >/proc/sys/vm/drop_caches # the engine's reads charge the pages to its cgroup
	echo $((1024 * mib)) >"$sys/pin_budget"
	echo 1 >"$sys/enable"
	"$b/llmcachectl" register "$wl/decoder/weights.bin" "$wl/decoder/tokenizer.bin" "$wl/decoder/config.bin" \
		>/dev/null || fail "llmcachectl register"
	released0=$(num stats/shrinker_released)
	start_engine "$access" $weights_mib
	# Its loop pinned: at least three quarters of half the limit, at most what the module lets one
	# cgroup's files pin.
	wait_pinned "$access"
	[ "$before" -ge $((half * 3 / 4)) ] || fail "$access: the loop was not pinned: $before blocks after 60 s"
	[ "$before" -le "$most" ] || fail "$access: $before blocks pinned, more than the module lets the cgroup's files pin ($most)"
	# The engine's own memory grows into the pins' room while it decodes; the pins are read while it
	# holds all of it (once it exits they may grow back). Paused (SIGSTOP, an app sent to the
	# background while another of its processes allocates), the engine starts no loop iteration and so
	# no plan that would follow its memory: only the cgroup's failed reclaims can release the pins.
	[ -z "$paused" ] || pause_engine "$what"
	in_cg "$grow" $anon_mib $step_mib 300 $hold_s >"$LLMCACHE_SCRATCH/grow.log" 2>&1 &
	grower=$!
	while ! grep -q "^anon $anon_mib MiB" "$LLMCACHE_SCRATCH/grow.log" && kill -0 $grower 2>/dev/null; do
		sleep 0.1
	done
	sleep 1
	after=$(num stats/pinned) usage=$(usage_mib)
	rc=0
	wait $grower || rc=$?
	[ -z "$paused" ] || pkill -CONT -x llmworkload
	stop_engine "$what"
	[ $rc = 0 ] || fail "$what: the allocation did not finish (exit $rc; oom_kill $(oom_kills)): $(tail -n 1 "$LLMCACHE_SCRATCH/grow.log")"
	kills=$(oom_kills)
	[ "$kills" = 0 ] || fail "$what: $kills OOM kills in the cgroup"
	released=$(($(num stats/shrinker_released) - released0))
	room=$(((limit_mib - anon_mib) * mib / 4096))
	[ -z "$paused" ] || [ "$released" -gt 0 ] || fail "$what: the pins went without a release by the cgroup's reclaim"
	[ "$after" -lt "$before" ] && [ "$after" -le "$room" ] ||
		fail "$what: pins went from $before to $after blocks with ${anon_mib} MiB of anonymous memory in ${limit_mib} MiB (usage $usage MiB)"
	# The allowance of a loop, read() or mapped, follows the engine's memory: the plan may drop pins
	# before any reclaim fails, and those are not counted as released.
	echo "$what: cgroup v$version ${limit_mib} MiB, anonymous ${anon_mib} MiB (usage $usage MiB): pins $before ->" \
		"$after blocks, $released released, no OOM kill"
	"$b/llmcachectl" unregister "$wl/decoder/weights.bin" "$wl/decoder/tokenizer.bin" "$wl/decoder/config.bin" \
		>/dev/null || fail "llmcachectl unregister"
	rmdir "$cg" || fail "rmdir $cg"
}

# memory.max lowered below the pins from outside the cgroup (cgroup v2: the write reclaims in the
# writer's context and calls the cgroup's OOM killer when that frees nothing; v1 refuses the write
# instead): the pins give way, the write succeeds, the engine is not killed.
lower_limit() {
	wl=$LLMCACHE_SCRATCH/oom-wl-pread lowered_mib=48
	cg_make
	sync
	echo 3 >/proc/sys/vm/drop_caches
	"$b/llmcachectl" register "$wl/decoder/weights.bin" >/dev/null || fail "llmcachectl register"
	start_engine pread 96
	wait_pinned lower
	[ "$before" -gt $((lowered_mib * mib / 4096)) ] || fail "lower: only $before blocks pinned, not above the lower limit"
	# The engine stops (no loop restart makes a new plan), a process stays in the cgroup for its OOM
	# killer to take, and the limit goes down.
	stop_engine lower
	sh -c 'echo $$ >"$0/cgroup.procs" && exec sleep 60' "$cg" &
	engine=$!
	echo $((lowered_mib * mib)) >"$cg/memory.max" || fail "lower: writing memory.max $lowered_mib MiB failed"
	after=$(num stats/pinned)
	kill -0 "$engine" 2>/dev/null || fail "lower: the process in the cgroup is gone (oom_kill $(oom_kills))"
	kill "$engine"
	wait "$engine" 2>/dev/null
	engine=
	[ "$(oom_kills)" = 0 ] || fail "lower: $(oom_kills) OOM kills in the cgroup"
	[ "$after" -le $((lowered_mib * mib / 4096)) ] || fail "lower: $after blocks still pinned under a $lowered_mib MiB limit"
	echo "lower: memory.max 128 -> $lowered_mib MiB with $before blocks pinned: $after pinned after, no OOM kill"
	"$b/llmcachectl" unregister "$wl/decoder/weights.bin" >/dev/null || fail "llmcachectl unregister"
	rmdir "$cg" || fail "rmdir $cg"
}

for access in ${LLMCACHE_OOM_ACCESS:-pread mmap}; do
	run_one "$access"
done
[ "${LLMCACHE_OOM_ACCESS:-mmap}" = pread ] || run_one mmap paused
[ $version = 1 ] || [ ! -d "$LLMCACHE_SCRATCH/oom-wl-pread" ] || lower_limit
rmmod llmcache || fail rmmod
[ $version = 1 ] && umount "$root"
echo PASS
