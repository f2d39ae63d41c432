#!/bin/sh
# SPDX-License-Identifier: MIT
# llmcachectl's kernel-module commands, run as root inside the VM (tests/vm/run.sh) with $LLMCACHE_BIN,
# $LLMCACHE_KO and $LLMCACHE_SCRATCH set: clear messages without the module or without root, register /
# unregister, status (human and JSON), set with units and with garbage, per-file options (register
# --no-pin, set-file), the loops table (human and JSON), the automatic mode, and status showing every
# value of the module's sysfs directory (SEQ drops and HOT protection with their real counts). Prints
# PASS or the first FAIL.
c=$LLMCACHE_BIN/llmcachectl
sys=/sys/kernel/llmcache
fail() { echo "FAIL: $*"; rmmod llmcache 2>/dev/null; exit 1; }
expect() { # exit status, pattern, command...: the command exits so and says the pattern
	want=$1 pattern=$2; shift 2
	out=$("$@" 2>&1); rc=$?
	[ "$rc" = "$want" ] || fail "$* exited $rc, not $want: $out"
	echo "$out" | grep -q -- "$pattern" || fail "$* did not say '$pattern': $out"
}

expect 1 'module is not loaded' "$c" status
expect 1 'module is not loaded' "$c" register /etc/hostname
expect 1 'module is not loaded' "$c" loops
expect 1 'module is not loaded' "$c" auto --pid 1
insmod "$LLMCACHE_KO" || fail "insmod $LLMCACHE_KO"
f=$LLMCACHE_SCRATCH/ctl.bin
dd if=/dev/zero of="$f" bs=4096 count=64 2>/dev/null
expect 1 'root only' setpriv --reuid=65534 --regid=65534 --clear-groups "$c" register "$f"
expect 1 'root only' setpriv --reuid=65534 --regid=65534 --clear-groups "$c" loops
expect 1 'root only' setpriv --reuid=65534 --regid=65534 --clear-groups "$c" auto --off
expect 0 'automatic mode off' setpriv --reuid=65534 --regid=65534 --clear-groups "$c" auto
expect 0 "registered $f ($sys/files/1)" "$c" register "$f"
expect 1 'already registered' "$c" register "$f"
expect 1 'not a regular file' "$c" register /dev/null
expect 1 'No such file' "$c" register "$LLMCACHE_SCRATCH/missing"
cat "$f" >/dev/null
expect 0 "file 1: $f" "$c" status
expect 0 '"registered":1,' "$c" status --json
expect 0 "\"path\":\"$f\",\"accesses\":64," "$c" status --json
expect 0 'pin_budget = 1048576' "$c" set pin_budget=1MiB t=50ms bw=100MB/s enable=1
[ "$(cat $sys/pin_budget) $(cat $sys/t_ns) $(cat $sys/bw)" = "1048576 50000000 100000000" ] ||
	fail "set wrote $(cat $sys/pin_budget) $(cat $sys/t_ns) $(cat $sys/bw)"
expect 2 'pin_budget' "$c" set pin_budget=lots
expect 2 'unknown setting' "$c" set colour=blue
expect 2 'not 0 or 1' "$c" set enable=yes
[ "$(cat $sys/pin_budget)" = 1048576 ] || fail "a refused setting changed pin_budget"
expect 0 'no loops in the registered files' "$c" loops
# Four passes over the file are a loop of its 64 blocks, sized with bw and t as set.
for i in 1 2 3 4; do cat "$f" >/dev/null; done
expect 0 't_ns = 10000000' "$c" set pin_budget=0 bw=4096000 t=10ms
# BW*T = 1000 blocks/s x 10 ms = 10 blocks: S_min 54, nothing pinned, stall 64/1000 s - 10 ms = 54 ms.
expect 0 '"bw":4096000,"bw_source":"set","t_ns":10000000,"t_source":"set",' "$c" loops --json
expect 0 "\"first_block\":0,\"blocks\":64,.*\"s_min\":54,\"pinned\":0,\"deficit\":54,\"stall_ns\":54000000}" \
	"$c" loops --json
expect 0 "S_min" "$c" loops
expect 0 "  *0  *64 .* 54  *0  *54  *54 ms  $f" "$c" loops
expect 0 't_ns = 0' "$c" set bw=measured t=measured
expect 0 '"bw_source":"measured","t_ns":[1-9][0-9]*,"t_source":"measured",' "$c" loops --json
expect 2 'too many positional' "$c" loops extra
# Per-file options.
expect 0 "$f: flags 5, pin limit 1.0 MiB" "$c" set-file --no-pin --no-protect --pin-limit 1MiB "$f"
[ "$(cat $sys/files/1/flags) $(cat $sys/files/1/pin_limit)" = "5 1048576" ] || fail "set-file wrote $(cat $sys/files/1/flags)"
expect 0 '"flags":5,"pin_limit":1048576}' "$c" status --json
expect 2 'pin-limit' "$c" set-file --pin-limit lots "$f"
expect 1 'not registered' "$c" set-file --no-pin /etc/hostname
expect 0 "unregistered $f" "$c" unregister "$f"
expect 1 'not registered' "$c" unregister "$f"
expect 0 "registered $f" "$c" register --no-drop "$f"
[ "$(cat $sys/files/2/flags)" = 2 ] || fail "register --no-drop set flags $(cat $sys/files/2/flags)"
expect 0 "unregistered $f" "$c" unregister "$f"
expect 0 '"registered":0,' "$c" status --json
# The automatic mode: a process holding a large and a small file open.
big=$LLMCACHE_SCRATCH/auto-big.bin small=$LLMCACHE_SCRATCH/auto-small.bin
dd if=/dev/zero of="$big" bs=1M count=3 2>/dev/null
dd if=/dev/zero of="$small" bs=4096 count=4 2>/dev/null
sh -c 'exec 3<"$1" 4<"$2"; sleep 30' sh "$big" "$small" &
holder=$!
expect 1 "no process 999999" "$c" auto --pid 999999
expect 1 "is not a cgroup v2 directory" "$c" auto --cgroup /etc
expect 2 'say one of' "$c" auto --pid $holder --off
expect 0 "automatic mode on: pid $holder, files from 2.0 MiB" "$c" auto --pid $holder --min-size 2MiB
i=0
while ! grep -qx "$big" $sys/files/*/path 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -qx "$big" $sys/files/*/path || fail "auto did not register $big"
grep -qx "$small" $sys/files/*/path && fail "auto registered $small"
expect 0 '"mode":"pid","target":'$holder',"min_size":2097152,"registered":[1-9]' "$c" auto --json
expect 0 'automatic mode off' "$c" auto --off
kill $holder
rmmod llmcache || fail rmmod

# status shows every tunable and statistic the module exports, with sane values: a fresh module's
# defaults, then a config read once and dropped after seq_drop, and a tokenizer's lookups protected.
insmod "$LLMCACHE_KO" || fail "insmod $LLMCACHE_KO"
json=$("$c" status --json) || fail "status --json: $json"
human=$("$c" status) || fail "status: $human"
for n in $(cd $sys && for v in *; do [ -f "$v" ] && echo "$v"; done); do
	echo "$json" | grep -q "\"$n\":" || fail "status --json lacks $n: $json"
done
for n in $(ls $sys/stats); do
	echo "$json" | grep -q "\"$n\":$(cat $sys/stats/$n)[,}]" || fail "status --json lacks stats/$n: $json"
	echo "$human" | grep -q "^  $n  *[0-9]" || fail "status lacks stats/$n: $human"
done
for n in sizing/bw_measured sizing/t_measured_ns auto/mode auto/min_size kv/sessions kv/cpu/bytes kv/storage/spills; do
	echo "$json" | grep -q "\"${n##*/}\":" || fail "status --json lacks $n: $json"
done
expect 0 '"seq_drop_ns":1000000000,"hook_mode":"[a-z]*","registered":0,"stats":{"accesses":0,' "$c" status --json
expect 0 '"seq_dropped":0,"hot_protected":0,' "$c" status --json
expect 0 '"sizing":{"bw_measured":0,"t_measured_ns":0},"auto":{"mode":"off","target":0,' "$c" status --json
expect 0 '"kv":{"sessions":0,.*"cpu":{"bytes":0,.*"storage":{"bytes":0,' "$c" status --json
expect 0 'SEQ drop after 1 s' "$c" status
expect 0 'automatic mode off' "$c" status
expect 0 'measured: BW none yet, T none (no loops)' "$c" status
expect 0 'seq_drop_ns = 200000000' "$c" set seq_drop=200ms hot_reserve=64KiB
expect 2 'seq_drop' "$c" set seq_drop=soon
[ "$(cat $sys/seq_drop_ns)" = 200000000 ] || fail "a refused seq_drop changed seq_drop_ns"
g=$LLMCACHE_SCRATCH/config.bin t=$LLMCACHE_SCRATCH/tokenizer.bin
dd if=/dev/urandom of="$g" bs=4096 count=64 2>/dev/null
dd if=/dev/urandom of="$t" bs=4096 count=64 2>/dev/null
sync
echo 1 >/proc/sys/vm/drop_caches
expect 0 "registered $g" "$c" register "$g"
cat "$g" >/dev/null
# The scan's 64 blocks dropped once idle for 200 ms: at least 64 (in a guest slowed down by a loaded
# host one block was seen dropped, read again and dropped again: 65 reads of the disk, 65 drops), and
# once the count is still, status says what sysfs says.
i=0
while [ "$(cat $sys/stats/seq_dropped)" -lt 64 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
dropped=$(cat $sys/stats/seq_dropped)
sleep 0.5
i=0
while [ "$(cat $sys/stats/seq_dropped)" != "$dropped" ] && [ $i -lt 20 ]; do
	dropped=$(cat $sys/stats/seq_dropped)
	sleep 0.5
	i=$((i + 1))
done
[ "$dropped" -ge 64 ] || fail "the 64-block scan was not dropped: seq_dropped $dropped after 10 s"
expect 0 '"seq_drop_ns":200000000,' "$c" status --json
expect 0 "\"seq_dropped\":$dropped,\"hot_protected\":0," "$c" status --json
expect 0 "^  seq_dropped  *$dropped\$" "$c" status
expect 0 'SEQ drop after 200 ms' "$c" status
expect 0 'seq_drop_ns = 0' "$c" set seq_drop=off
expect 0 'SEQ drop off' "$c" status
# A tokenizer: a scan, then 5 rounds of lookups of 10 blocks; the 10 HOT blocks fit in the reserve.
expect 0 "registered $t" "$c" register "$t"
cat "$t" >/dev/null
for r in 1 2 3 4 5; do
	for k in 0 1 2 3 4 5 6 7 8 9; do dd if="$t" of=/dev/null bs=4096 skip=$((3 + 6 * k)) count=1 2>/dev/null; done
done
i=0
while [ "$(cat $sys/stats/hot_protected)" != 10 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
expect 0 '"hot_reserve":65536,' "$c" status --json
expect 0 '"hot_protected":10,' "$c" status --json
expect 0 '^  hot_protected  *10$' "$c" status
expect 0 'hot reserve 64.0 KiB' "$c" status
rmmod llmcache || fail rmmod
echo PASS
