#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmtrace and llmreplay on the inputs of issue 19 (no privileges needed), each under a 1 GiB address-space
# limit so that a reader that believes a record and allocates for it fails here with std::bad_alloc:
# - bounded readers: 136 bytes of native trace claiming 2^32-1 blocks, a CSV line with a huge block
#   count, 2,400 random bytes (auto-detected as oracleGeneral before), /dev/zero read as CSV and as
#   strace, a record whose blocks wrap past 2^64. Each is an error (status 1) that names the byte offset
#   or line, within seconds.
# - convert: an output that is the input is refused and the input kept; a convert that fails leaves the
#   old output as it was and no temporary file; csv and strace text keep the trace's flags, and strace
#   text says that its mmap faults are unseen instead of dropping them silently; oracleGeneral says which
#   flags, ops and names it cannot keep.
# - bounds: blocks past 2^40 (stat, replay) and times past 2^63 ns (replay) are refused with the reason.
# - output errors: stat, replay and convert to /dev/full exit non-zero.
# - --version on every tool (llmcachectl and llmcached too), --help and --version to /dev/full exit 1,
#   set-file's help shows set-file; --from on both tools, exit status 2 for an unknown format, progress
#   on stderr.
# - llmtrace record's ring size, -p and --cgroup refused by their names, before anything loads.
set -euo pipefail
BIN=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
T=$BIN/llmtrace R=$BIN/llmreplay W=$BIN/llmworkload
if [ ! -x "$T" ]; then # built only with clang, bpftool, libbpf and kernel BTF (see bpf/CMakeLists.txt)
	[ -e /sys/kernel/btf/vmlinux ] || { echo "SKIP: llmtrace is not built: this kernel has no BTF"; exit 77; }
	echo "FAIL: $T is missing (install the BPF build dependencies: scripts/install-deps.sh bpf)"; exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
# expect CODE PATTERN command...: under a 1 GiB address-space limit and a 30 s timeout, exit status CODE
# and stderr matching PATTERN. The command's stdout goes to $out (/dev/null unless set).
out=/dev/null
expect() {
	local code=$1 pattern=$2 rc=0
	shift 2
	( ulimit -v 1048576; timeout 30 "$@" ) >"$out" 2>"$tmp/err" || rc=$?
	if [ "$rc" != "$code" ]; then
		echo "FAIL: '$*' exited $rc, want $code: $(head -c 300 "$tmp/err")"; fails=$((fails + 1))
	elif ! grep -qE -- "$pattern" "$tmp/err"; then
		echo "FAIL: '$*' said '$(head -c 300 "$tmp/err")', want /$pattern/"; fails=$((fails + 1))
	fi
}

python3 - "$tmp" <<'PY'
import os, random, struct, sys
d = sys.argv[1]
hdr = b"LLMTRACE" + struct.pack("<IIIIQ", 1, 96, 40, 0, 0) + b"test".ljust(64, b"\0")
def rec(t, ino, first, pid, dev, nr, op=0):
    return struct.pack("<QQQIIIB3x", t, ino, first, pid, dev, nr, op)
open(f"{d}/claims.trace", "wb").write(hdr + rec(1, 5, 0, 1, 1, 0xFFFFFFFF))
open(f"{d}/wrap.trace", "wb").write(hdr + rec(1, 5, 2**64 - 2, 1, 1, 10))
open(f"{d}/far.trace", "wb").write(hdr + rec(1, 5, 2**40 - 1, 1, 1, 2))
open(f"{d}/late.trace", "wb").write(hdr + rec(2**62, 5, 0, 1, 1, 2))
open(f"{d}/huge.csv", "w").write("time_ns,pid,dev,inode,first_block,nr_blocks,op,path\n1,1,1,1,0,4000000000,read,/x\n")
random.seed(19)
open(f"{d}/random.bin", "wb").write(bytes(random.getrandbits(8) for _ in range(2400)))
# A native trace flagged WRITES_UNSEEN, with reads and mmap faults of two files.
flags = hdr[:20] + struct.pack("<I", 2) + hdr[24:]
body = b""
for i in range(50):
    body += rec(1000 * i, 7, i, 42, 1, 1, 0) + rec(1000 * i + 500, 8, i, 42, 1, 1, 2)
open(f"{d}/flagged.trace", "wb").write(flags + body)
PY

for tool in "$T stat" "$R"; do
	# shellcheck disable=SC2086 # the tool and its subcommand
	expect 1 "claims.trace:byte offset 96: .*4294967295 blocks" $tool "$tmp/claims.trace"
	# shellcheck disable=SC2086
	expect 1 "wrap.trace:byte offset 96: .*below 2\^51" $tool "$tmp/wrap.trace"
	# shellcheck disable=SC2086
	expect 1 "huge.csv:line 2: .*4000000000 blocks" $tool "$tmp/huge.csv"
	# shellcheck disable=SC2086
	expect 1 "random.bin:byte offset 0: cannot tell the trace format" $tool "$tmp/random.bin"
	# shellcheck disable=SC2086
	expect 1 "random.bin:byte offset 0: .*not a later record" $tool --from oracleGeneral "$tmp/random.bin"
	# shellcheck disable=SC2086
	expect 1 "/dev/zero:line 1: line longer than" $tool --from csv /dev/zero
	# shellcheck disable=SC2086
	expect 1 "/dev/zero:line 1: line longer than" $tool --from strace /dev/zero
	# shellcheck disable=SC2086
	expect 2 "unknown trace format 'bogus'" $tool --from bogus "$tmp/flagged.trace"
done
expect 1 "wrap.trace:byte offset 96: .*below 2\^51" "$T" convert "$tmp/wrap.trace" "$tmp/wrap.oracle" --to oracleGeneral
check "convert: nothing written for a refused trace" test ! -e "$tmp/wrap.oracle"
# Blocks past 2^40 are sound but beyond the 40-bit block numbers of stat and the simulator: refused, not
# folded into another file's blocks.
expect 1 "far.trace:byte offset 96: .*past 2\^40" "$T" stat "$tmp/far.trace"
expect 1 "far.trace.*40-bit block numbers" "$R" "$tmp/far.trace"
# A time of 2^62 ns or more: beyond the simulator's 62-bit times (the top bits mark an mmap fault, a write).
expect 1 "late.trace.*62-bit times" "$R" "$tmp/late.trace"
# The tools' own bounds: a trace that is sound but needs more than --max-memory.
expect 1 "flagged.trace:byte offset [0-9]+: the footprint passes 16 blocks.*--max-memory" \
	"$T" stat "$tmp/flagged.trace" --max-memory 1KiB
expect 1 "flagged.trace:byte offset [0-9]+: the trace claims more than 64 block accesses.*--max-memory" \
	"$R" "$tmp/flagged.trace" --max-memory 1KiB

# convert in place is refused, and the input is kept.
cp "$tmp/flagged.trace" "$tmp/x.trace"
expect 2 "is the input" "$T" convert "$tmp/x.trace" "$tmp/x.trace" --to native
ln -s x.trace "$tmp/link.trace"
expect 2 "is the input" "$T" convert "$tmp/x.trace" "$tmp/link.trace" --to csv
check "convert in place: the input is unchanged" cmp -s "$tmp/flagged.trace" "$tmp/x.trace"
# A convert that fails half way leaves the old output and no temporary file.
{ cat "$tmp/flagged.trace"; printf 'cut'; } >"$tmp/cut.trace"
echo "old output" >"$tmp/out.csv"
expect 1 "cut.trace:byte offset 4096: truncated record" "$T" convert "$tmp/cut.trace" "$tmp/out.csv" --to csv
check "failed convert: the old output is kept" test "$(cat "$tmp/out.csv")" = "old output"
check "failed convert: no temporary file left" test "$(find "$tmp" -name '*.tmp-*' | wc -l)" = 0

# Flags survive csv; strace text flags its mmap faults as unseen and says so.
"$T" convert "$tmp/flagged.trace" "$tmp/f.csv" --to csv 2>/dev/null
"$T" convert "$tmp/f.csv" "$tmp/f2.trace" --to native 2>/dev/null
check "native -> csv -> native keeps WRITES_UNSEEN" \
	test "$(od -An -tu4 -j20 -N4 "$tmp/f2.trace" | tr -d ' ')" = 2
"$T" convert "$tmp/flagged.trace" "$tmp/f.strace" --to strace 2>"$tmp/err"
check "to strace: the mmap faults are named in a note" grep -q "50 mmap-fault records" "$tmp/err"
"$T" convert "$tmp/f.strace" "$tmp/f3.trace" --to native 2>"$tmp/err"
check "strace -> native: the reader notes the mmapped file" grep -q "mmapped" "$tmp/err"
check "strace -> native: MMAP_UNSEEN and WRITES_UNSEEN set" \
	test "$(od -An -tu4 -j20 -N4 "$tmp/f3.trace" | tr -d ' ')" = 3
# oracleGeneral has no room for flags, ops or names: convert says what it drops (it said nothing).
"$T" convert "$tmp/flagged.trace" "$tmp/f.oracleGeneral" --to oracleGeneral 2>"$tmp/err"
check "to oracleGeneral: the flags and the mmap faults it drops are named in a note" \
	grep -q "oracleGeneral .*: the flags (WRITES_UNSEEN), the ops of 0 write and 50 mmap-fault records" "$tmp/err"
s=$("$T" stat "$tmp/f3.trace")
check "strace -> native: stat notes what the trace misses" grep -q "note: regular files were mmapped" <<<"$s"

# Output errors.
out=/dev/full
expect 1 "failed to write the summary to stdout: No space left" "$T" stat "$tmp/flagged.trace" --json
expect 1 "failed to write the summary to stdout: No space left" "$T" stat "$tmp/flagged.trace"
expect 1 "cannot write the results to stdout: No space left" "$R" "$tmp/flagged.trace" -p lru -s 50%
expect 1 "cannot write to stdout: No space left" "$R" "$tmp/flagged.trace" -p lru -s 50% --json
expect 1 "failed to write .*stdout.*: No space left" "$T" convert "$tmp/flagged.trace" - --to csv
expect 1 "failed to write to stdout: No space left" "$W" app ai-notes --layout
expect 1 "failed to write to stdout: No space left" "$W" app ai-notes --layout --json
out=/dev/null
expect 1 "failed to write /dev/full: No space left" "$T" convert "$tmp/flagged.trace" /dev/full --to csv
expect 1 "No space left" "$T" convert "$tmp/flagged.trace" /dev/full --to oracleGeneral
# Writing to a device writes into it; the device node stays.
if [ -w /dev/null ]; then
	"$T" convert "$tmp/flagged.trace" /dev/null --to native 2>/dev/null
	check "convert to /dev/null keeps the device" test -c /dev/null
fi

# llmtrace record's options, refused before anything loads (no privileges needed), each by the name the
# user gave it: a ring of 1 TiB was "failed to load the BPF program ... is BPF enabled?", -p -5 became
# pid 4294967291, --cgroup was named -c.
expect 2 "--ring-size: '1TiB' is not a power of two from 4KiB to 2GiB" "$T" record -o "$tmp/r.trace" --ring-size 1TiB -- true
expect 2 "-p: '-5' is not a process id" "$T" record -o "$tmp/r.trace" -p -5
expect 2 "--cgroup $tmp: not a cgroup v2 directory" "$T" record -o "$tmp/r.trace" --cgroup "$tmp"
expect 2 "-c $tmp: not a cgroup v2 directory" "$T" record -o "$tmp/r.trace" -c "$tmp"
check "record: nothing written for refused options" test ! -e "$tmp/r.trace"

# --version on every tool, and one name for the input format.
for t in "$T" "$R" "$W" "$BIN/llmcachectl" "$BIN/llmcached"; do
	check "$(basename "$t") --version" grep -qE "^$(basename "$t") [0-9]+\.[0-9]+" <<<"$("$t" --version)"
done
# --help and --version lost on a full stdout are errors too (they exited 0).
out=/dev/full
for t in "$T" "$W" "$BIN/llmcachectl" "$BIN/llmcached"; do
	expect 1 "No space left" "$t" --help
	expect 1 "No space left" "$t" --version
done
expect 1 "No space left" "$T" stat --help
out=/dev/null
# set-file's help showed `register --no-pin` as its example.
check "llmcachectl set-file --help: its own examples" \
	test "$("$BIN/llmcachectl" set-file --help | grep -c 'llmcachectl register')" = 0
check "llmreplay --from" "$R" "$tmp/flagged.trace" --from native -p lru -s 50% --json >/dev/null
check "llmreplay -f" "$R" "$tmp/flagged.trace" -f native -p lru -s 50% --json >/dev/null
check "llmtrace stat -f" "$T" stat -f native "$tmp/flagged.trace" >/dev/null

# Progress: a CSV trace fed through a pipe that pauses half way; --progress always draws a line.
{
	echo "time_ns,pid,dev,inode,first_block,nr_blocks,op,path"
	seq 1 70000 | awk '{ print $1 ",1,1,1," $1 ",1,read," }'
	sleep 0.6
	seq 70001 140000 | awk '{ print $1 ",1,1,1," $1 ",1,read," }'
} >"$tmp/slow.fifo.txt" &
wait
mkfifo "$tmp/pipe"
{ head -n 70001 "$tmp/slow.fifo.txt"; sleep 0.6; tail -n +70002 "$tmp/slow.fifo.txt"; } >"$tmp/pipe" &
"$T" stat --progress always --from csv "$tmp/pipe" >/dev/null 2>"$tmp/err"
wait
check "stat --progress always: a progress line on stderr" grep -q "M records/s" "$tmp/err"
"$T" stat --progress never --from csv "$tmp/slow.fifo.txt" >/dev/null 2>"$tmp/err"
check "stat --progress never: nothing on stderr" test ! -s "$tmp/err"
expect 2 "--progress must be auto, always or never" "$T" convert "$tmp/flagged.trace" "$tmp/p.csv" --to csv --progress sometimes

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "llmtrace bad input: all checks passed"
