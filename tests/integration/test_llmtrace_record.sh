#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmtrace record (as root): the BPF recorder sees every access of a known llmworkload run, compared with
# the workload's own exact trace W:
# - writes (the run that creates the files): the write records equal W's, in order.
# - pread: per file (matched by dev and inode), the sequence of read records (first block, block count)
#   must equal W's. The filemap hook sees each read() once (its folio batches are folded into the first),
#   clipped to the end of the file, which is exactly how llmworkload records a pread. A thread's reads
#   that carry on its run of reads of a file join it up to --join-blocks blocks (32 by default): W's
#   records are joined by the same rule before the comparison, and --join-blocks 1 compares read for
#   read. With the syscall hooks (the fallback for kernels without filemap tracepoints) the same holds.
# - mmap: a page fault maps a fault-around window or a whole large folio, and pages that stay mapped do
#   not fault again, so records cannot match W's touches one for one. What must hold: the blocks the
#   mmap-fault records cover are exactly the blocks W touched through the mapping (here: the whole weights
#   file), warm and cold cache alike.
# Also: -p and -- CMD record no other process, -- CMD nothing of llmtrace before the exec, children are followed, -c follows a cgroup v2 directory
# only, --min-size and --path-prefix leave files out, a tiny ring loses events and says so, Ctrl-C stops
# cleanly.
set -euo pipefail
BIN=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
T=$BIN/llmtrace W=$BIN/llmworkload
if [ ! -x "$T" ]; then # built only with clang, bpftool, libbpf and kernel BTF (see bpf/CMakeLists.txt)
	[ -e /sys/kernel/btf/vmlinux ] || { echo "SKIP: llmtrace is not built: this kernel has no BTF"; exit 77; }
	echo "FAIL: $T is missing (install the BPF build dependencies: scripts/install-deps.sh bpf)"; exit 1
fi
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: llmtrace record needs root (CAP_BPF, CAP_PERFMON)"; exit 77; fi
# A watchdog: whatever goes wrong, the test ends within LLMCACHE_TEST_TIMEOUT seconds (600 by default;
# it takes about 10 s).
[ -n "${LLMTRACE_TEST_WATCHDOG:-}" ] || LLMTRACE_TEST_WATCHDOG=1 exec timeout -k 10 "${LLMCACHE_TEST_TIMEOUT:-600}" bash "$0" "$@"
tmp=$(mktemp -d -p "${LLMCACHE_SCRATCH:-${TMPDIR:-/tmp}}") # the VM: the scratch disk, not tmpfs
cg=
cleanup() {
	local jobs; jobs=$(jobs -p)
	[ -z "$jobs" ] || kill $jobs 2>/dev/null || true
	[ -z "$cg" ] || rmdir "$cg" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "FAIL: timed out"; exit 1' TERM
# Skip only where BPF itself is missing (no BTF, no bpf(2)), which the feed checks before it loads the
# program and says as "BPF is not available here"; a program the kernel refuses is a failure.
if ! "$T" record -o "$tmp/probe.trace" -- true 2>"$tmp/probe.err"; then
	if grep -q "BPF is not available here" "$tmp/probe.err"; then
		echo "SKIP: $(cat "$tmp/probe.err")"; exit 77
	fi
	echo "FAIL: llmtrace record -- true: $(cat "$tmp/probe.err")"; exit 1
fi
# How mmap accesses are seen with the given hooks: the filemap tracepoints, or kprobes on the functions they
# sit in (Linux 6.1), see fault-around; exceptions:page_fault_user sees the faulting pages only.
mmap_hooks() { # hooks
	"$T" record --hooks "$1" -o "$tmp/probe.trace" -- true 2>&1 | grep -oE "filemap hooks|mmap from kprobes|faulting pages only" |
		head -n 1 || true
}
. "$(dirname "$0")/check.sh"
has() { grep -qE -- "$2" <<<"$1"; }

wl() { # dir, tokens, access, extra... : the decoder on real files
	local dir=$1 tokens=$2 access=$3; shift 3
	"$W" decoder --dir "$dir" --weights-size 4MiB --tokenizer-size 64KiB --config-size 256KiB --tokens "$tokens" \
		--access "$access" "$@"
}
# "dev:inode" of every file in a CSV trace, and its records of one op as "dev:inode first nr".
files_of() { awk -F, 'NR > 1 && !/^#/ { print $3 ":" $4 }' "$1" | sort -u; }
ops_of() { # csv, op, keys file
	awk -F, -v op="$2" 'NR == FNR { want[$1] = 1; next } FNR > 1 && $7 == op && (($3 ":" $4) in want) {
		print $3 ":" $4, $5, $6 }' "$3" "$1"
}
# "dev:inode first nr" records joined as the recorder joins one thread's reads: a record that carries on the
# one before, of the same file, joins it while the sum stays within $join blocks.
join=32
joined_reads() {
	awk -v max="$join" '$1 == k && $2 == f + n && n + $3 <= max { n += $3; next }
		{ if (k != "") print k, f, n; k = $1; f = $2; n = $3 } END { if (k != "") print k, f, n }'
}
# Blocks covered, one "dev:inode block" per line, sorted and unique.
coverage() { ops_of "$@" | awk '{ for (b = $2; b < $2 + $3; b++) print $1, b }' | sort -u; }

compare_pread() { # label, hooks, extra workload args...
	local label=$1 hooks=$2; shift 2
	"$T" record -q --hooks "$hooks" --join-blocks "$join" --format csv -o "$tmp/r.csv" -- "${wl_cmd[@]}" --access pread \
		--trace "$tmp/w.csv" --format csv "$@" >/dev/null 2>"$tmp/rec.err"
	files_of "$tmp/w.csv" >"$tmp/keys"
	ops_of "$tmp/w.csv" read "$tmp/keys" | joined_reads >"$tmp/w.reads"
	ops_of "$tmp/r.csv" read "$tmp/keys" >"$tmp/r.reads"
	check "$label: the workload read something" test "$(wc -l <"$tmp/w.reads")" -gt 30
	check "$label: the recorder saw every read, in order ($(wc -l <"$tmp/r.reads") vs $(wc -l <"$tmp/w.reads"))" \
		cmp -s "$tmp/w.reads" "$tmp/r.reads"
	check "$label: no lost events" has "$(cat "$tmp/rec.err")" " 0 lost events"
	check "$label: files named" grep -q ',read,.*/decoder/weights.bin$' "$tmp/r.csv"
	local wpid; wpid=$(awk -F, 'NR == 2 { print $2 }' "$tmp/w.csv")
	check "$label: the records carry the workload's pid" \
		test -z "$(awk -F, -v p="$wpid" 'NR == FNR && FNR > 1 { k[$3 ":" $4] = 1; next }
			FNR > 1 && (($3 ":" $4) in k) && $2 != p' "$tmp/w.csv" "$tmp/r.csv")"
}

compare_mmap() { # label, hooks, extra workload args...
	local label=$1 hooks=$2; shift 2
	"$T" record -q --hooks "$hooks" --format csv -o "$tmp/r.csv" -- "${wl_cmd[@]}" --tokens 3 --access mmap \
		--trace "$tmp/w.csv" --format csv "$@" >/dev/null 2>"$tmp/rec.err"
	files_of "$tmp/w.csv" >"$tmp/keys"
	coverage "$tmp/w.csv" mmap_fault "$tmp/keys" >"$tmp/w.cov"
	coverage "$tmp/r.csv" mmap_fault "$tmp/keys" >"$tmp/r.cov"
	check "$label: the workload touched the whole weights file" test "$(wc -l <"$tmp/w.cov")" -eq 1024
	check "$label: faults cover exactly the touched blocks ($(wc -l <"$tmp/r.cov") vs $(wc -l <"$tmp/w.cov"))" \
		cmp -s "$tmp/w.cov" "$tmp/r.cov"
	ops_of "$tmp/w.csv" read "$tmp/keys" >"$tmp/w.reads"
	ops_of "$tmp/r.csv" read "$tmp/keys" >"$tmp/r.reads"
	check "$label: the preads of the other files seen too" cmp -s "$tmp/w.reads" "$tmp/r.reads"
	check "$label: no lost events" has "$(cat "$tmp/rec.err")" " 0 lost events"
}

# 1. The first run creates the files with pwrite: every write seen with --writes (from sys_enter).
dir=$tmp/wl
"$T" record -q --writes --format csv -o "$tmp/r.csv" -- "$W" decoder --dir "$dir" --weights-size 4MiB --tokenizer-size 64KiB \
	--config-size 256KiB --tokens 1 --trace "$tmp/w.csv" --format csv >/dev/null 2>&1
files_of "$tmp/w.csv" >"$tmp/keys"
ops_of "$tmp/w.csv" write "$tmp/keys" >"$tmp/w.writes"
ops_of "$tmp/r.csv" write "$tmp/keys" >"$tmp/r.writes"
check "writes: the workload created its files" test "$(wc -l <"$tmp/w.writes")" -ge 3
check "writes: every write seen, in order" cmp -s "$tmp/w.writes" "$tmp/r.writes"
# Without --writes the filemap hooks attach no syscall tracepoint and record no writes; the syscall hooks
# (attached for the reads anyway) record them all the same.
rm -rf "$tmp/wl2"
"$T" record --format csv -o "$tmp/r.csv" -- "$W" decoder --dir "$tmp/wl2" --weights-size 1MiB --tokenizer-size 64KiB \
	--config-size 64KiB --tokens 1 --trace "$tmp/w.csv" --format csv >/dev/null 2>"$tmp/rec.err"
files_of "$tmp/w.csv" >"$tmp/keys"
if has "$(cat "$tmp/rec.err")" "filemap hooks"; then
	check "writes: none without --writes ($(head -n 1 "$tmp/rec.err"))" test -z "$(ops_of "$tmp/r.csv" write "$tmp/keys")"
	check "writes: the start line says how to get them" has "$(cat "$tmp/rec.err")" "writes not recorded \(--writes\)"
	"$T" record -q -o "$tmp/r.trace" -- "$W" decoder --dir "$tmp/wl2" --weights-size 1MiB --tokenizer-size 64KiB \
		--config-size 64KiB --tokens 1 >/dev/null 2>&1
	check "writes: the native trace says they were not recorded" has "$("$T" stat "$tmp/r.trace")" \
		"writes were not recorded \(flag WRITES_UNSEEN\)"
fi
check "writes: the reads of that run seen" test "$(ops_of "$tmp/r.csv" read "$tmp/keys")" = "$(ops_of "$tmp/w.csv" read "$tmp/keys")"
rm -rf "$tmp/wl2"
"$T" record -q --hooks syscalls --format csv -o "$tmp/r.csv" -- "$W" decoder --dir "$tmp/wl2" --weights-size 1MiB \
	--tokenizer-size 64KiB --config-size 64KiB --tokens 1 --trace "$tmp/w.csv" --format csv >/dev/null 2>&1
files_of "$tmp/w.csv" >"$tmp/keys"
check "writes: the syscall hooks record them without --writes" \
	test "$(ops_of "$tmp/r.csv" write "$tmp/keys")" = "$(ops_of "$tmp/w.csv" write "$tmp/keys")"

# pread and mmap, warm then cold cache. The runs below only read.
wl_cmd=("$W" decoder --dir "$dir" --weights-size 4MiB --tokenizer-size 64KiB --config-size 256KiB)
compare_pread "pread warm" auto --tokens 3
compare_pread "pread cold" auto --tokens 3 --drop-cache
# 4 KiB reads: 32 of them per record, each record with its first read's time; --join-blocks 1 records
# every read. The run a thread has not sent when it exits is sent then (the workload's last reads).
joins() { grep -oE '[0-9]+ joined' "$tmp/rec.err" | cut -d' ' -f1; }
compare_pread "pread 4 KiB" auto --tokens 2 --read-size 4KiB
check "pread 4 KiB: reads joined ($(joins))" test "$(joins)" -ge 1900
join=1 compare_pread "pread 4 KiB, --join-blocks 1" auto --tokens 2 --read-size 4KiB
check "pread 4 KiB, --join-blocks 1: none joined ($(joins))" test "$(joins)" = 0
compare_pread "pread 4 KiB, syscall hooks" syscalls --tokens 2 --read-size 4KiB
# Partly cached (every other 40 KiB dropped): filemap_get_pages hands out the cached folios before a missing
# one without its tracepoint, so the recorder takes the start of such a read from the read syscall.
partly_cached() {
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)  # dirty pages would stay
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # read again below in one call, in smaller folios
os.pread(fd, os.fstat(fd).st_size, 0)
for off in range(0, os.fstat(fd).st_size, 81920):
    os.posix_fadvise(fd, off, 40960, os.POSIX_FADV_DONTNEED)' "$dir/decoder/weights.bin"
}
read_in() { grep -oE '[0-9]+ pages read into the page cache' "$tmp/rec.err" | cut -d' ' -f1; }
partly_cached
compare_pread "pread partly cached" auto --tokens 1
check "pread partly cached: the dropped pages read again ($(read_in) pages)" test "$(read_in)" -gt 100
partly_cached
compare_pread "pread partly cached, syscall hooks" syscalls --tokens 1
# read() and readv() take the start from the file position, which moves once the read is over: the
# weights read front to back in 128 KiB calls are 32 records of 32 blocks.
compare_read() { # hooks, read or readv
	partly_cached
	"$T" record -q --hooks "$1" --format csv -o "$tmp/r.csv" -- python3 -c 'import os, sys
fd, b = os.open(sys.argv[1], os.O_RDONLY), bytearray(131072)
while (os.readv(fd, [b]) if sys.argv[2] == "readv" else len(os.read(fd, len(b)))) > 0: pass' "$dir/decoder/weights.bin" "$2" \
		2>"$tmp/rec.err"
	check "$2 partly cached, $1 hooks: 32 reads of 32 blocks ($(grep -c weights.bin "$tmp/r.csv") records)" test \
		"$(awk -F, '$7 == "read" && $8 ~ /weights.bin$/ { printf "%s+%s ", $5, $6 }' "$tmp/r.csv")" = \
		"$(for i in $(seq 0 31); do printf "%d+32 " $((i * 32)); done)"
}
compare_read auto read
compare_read auto readv
compare_read syscalls read
compare_pread "pread, syscall hooks" syscalls --tokens 3
# mmap: exact coverage wherever fault-around is seen: the filemap tracepoints, or kprobes on
# filemap_map_pages and filemap_fault (Linux 6.1, or the syscall hooks where the kernel has a kprobe PMU).
# In the VM (LLMTRACE_EXPECT_MMAP=1) both kernels must see it.
auto_mmap=$(mmap_hooks auto)
if [ "$auto_mmap" = "filemap hooks" ] || [ "$auto_mmap" = "mmap from kprobes" ]; then
	compare_mmap "mmap warm ($auto_mmap)" auto
	compare_mmap "mmap cold ($auto_mmap)" auto --drop-cache
else
	check "mmap: fault-around seen (LLMTRACE_EXPECT_MMAP is set)" test -z "${LLMTRACE_EXPECT_MMAP:-}"
fi
# With exceptions:page_fault_user and bpf_find_vma() (no kprobe PMU, like this machine's 6.18), the syscall
# hooks see the faulting pages only (fault-around maps the rest without a fault): a non-empty subset.
sys_mmap=$(mmap_hooks syscalls)
if [ "$sys_mmap" = "faulting pages only" ]; then
	"$T" record -q --hooks syscalls --format csv -o "$tmp/r.csv" -- "${wl_cmd[@]}" --tokens 2 --access mmap \
		--trace "$tmp/w.csv" --format csv --drop-cache >/dev/null 2>&1
	files_of "$tmp/w.csv" >"$tmp/keys"
	coverage "$tmp/w.csv" mmap_fault "$tmp/keys" >"$tmp/w.cov"
	coverage "$tmp/r.csv" mmap_fault "$tmp/keys" >"$tmp/r.cov"
	check "mmap, syscall hooks: faults seen" test "$(wc -l <"$tmp/r.cov")" -gt 0
	check "mmap, syscall hooks: only touched blocks" test -z "$(comm -13 "$tmp/w.cov" "$tmp/r.cov")"
elif [ "$sys_mmap" = "mmap from kprobes" ] && [ "$auto_mmap" != "$sys_mmap" ]; then
	compare_mmap "mmap cold, syscall hooks ($sys_mmap)" syscalls --drop-cache
fi

# 2. Filters. An unrelated reader of other files runs at the same time; a child of the followed process
# is followed.
other=$tmp/other
wl "$other" 1 pread >/dev/null
other_keys() { "$W" decoder --dir "$other" --weights-size 4MiB --tokenizer-size 64KiB --config-size 256KiB --tokens 1 \
	--trace "$tmp/o.csv" --format csv >/dev/null; files_of "$tmp/o.csv"; }
other_keys >"$tmp/okeys"
( for _ in $(seq 40); do wl "$other" 2 pread >/dev/null; sleep 0.02; done ) &
bg=$!
"$T" record -q --format csv -o "$tmp/f.csv" -- sh -c "sleep 0.3; $(printf "%q " "${wl_cmd[@]}") --tokens 3 --access pread --trace $tmp/wf.csv --format csv >/dev/null; true" 2>"$tmp/rec.err"
check "-- CMD: the child of the shell is followed" grep -q '/decoder/weights.bin$' "$tmp/f.csv"
check "-- CMD: nothing of the unrelated process" test -z "$(ops_of "$tmp/f.csv" read "$tmp/okeys")"
files_of "$tmp/wf.csv" >"$tmp/keys"
ops_of "$tmp/wf.csv" read "$tmp/keys" >"$tmp/w.reads"
ops_of "$tmp/f.csv" read "$tmp/keys" >"$tmp/r.reads"
check "-- CMD: every read of the followed child" cmp -s "$tmp/w.reads" "$tmp/r.reads"
# Issue 19: the forked child ran llmtrace's own code (its binary, libstdc++) before its exec and was
# recorded; CMD starts at its first instruction now. cat is C: no file of llmtrace's is CMD's.
head -c 1048576 /dev/urandom >"$tmp/cat.in"
"$T" record -q --format csv -o "$tmp/cat.csv" -- cat "$tmp/cat.in" >/dev/null 2>"$tmp/rec.err"
check "-- CMD: the command's own reads are there" grep -q ",read,$tmp/cat.in$" "$tmp/cat.csv"
check "-- CMD: nothing of llmtrace before the exec ($(grep -E "$(readlink -f "$T")\$|libstdc\+\+" "$tmp/cat.csv" | head -n 2))" \
	test -z "$(grep -E "$(readlink -f "$T")\$|libstdc\+\+" "$tmp/cat.csv")"
"$T" record -q -o "$tmp/x.trace" -- /nonexistent/cmd 2>"$tmp/rec.err" && st=0 || st=$?
check "-- CMD that cannot run: status 127 and why ($st)" test "$st" = 127 -a -n "$(grep 'failed to run /nonexistent/cmd' "$tmp/rec.err")"

# The processes below start once the recorder says it is recording (its first line on stderr).
ready() { printf 'while ! grep -qs "recording with" %q; do sleep 0.05; done; ' "$1"; }
sh -c "$(ready "$tmp/rec.err") exec $(printf "%q " "${wl_cmd[@]}") --tokens 3 --access pread --trace $tmp/wp.csv --format csv >/dev/null" &
target=$!
rm -f "$tmp/rec.err"
"$T" record --format csv -p "$target" -o "$tmp/p.csv" 2>"$tmp/rec.err"
check "-p: stops when the process is gone" has "$(cat "$tmp/rec.err")" "lost events"
files_of "$tmp/wp.csv" >"$tmp/keys"
ops_of "$tmp/wp.csv" read "$tmp/keys" >"$tmp/w.reads"
ops_of "$tmp/p.csv" read "$tmp/keys" >"$tmp/r.reads"
check "-p: every read of the process" cmp -s "$tmp/w.reads" "$tmp/r.reads"
check "-p: nothing of the unrelated process" test -z "$(ops_of "$tmp/p.csv" read "$tmp/okeys")"
check "-p: the reads carry its pid" test -z "$(awk -F, -v p="$target" 'NR == FNR { k[$1] = 1; next }
	FNR > 1 && (($3 ":" $4) in k) && $2 != p' "$tmp/keys" "$tmp/p.csv")"
wait "$bg"
# Reads a live process joined and did not send yet are sent when the recording stops: it reads 100
# blocks in 4 KiB reads and sleeps; SIGINT stops the recorder meanwhile.
python3 -c 'import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
while not os.path.exists(sys.argv[2]): time.sleep(0.05)
for i in range(100): os.pread(fd, 4096, i * 4096)
open(sys.argv[3], "w").close()
time.sleep(60)' "$dir/decoder/weights.bin" "$tmp/go" "$tmp/done" &
reader=$!
rm -f "$tmp/rec.err"
"$T" record --format csv -p "$reader" -o "$tmp/s.csv" 2>"$tmp/rec.err" &
rec=$!
eval "$(ready "$tmp/rec.err")"; touch "$tmp/go"
while [ ! -e "$tmp/done" ]; do sleep 0.05; done
kill -INT "$rec"
check "stop: the recorder stops on SIGINT with status 0" wait "$rec"
kill "$reader"; wait "$reader" 2>/dev/null || true
check "stop: the live process's joined reads are in the trace ($(awk -F, '$8 ~ /weights.bin$/ { n += $6 } END { print n + 0 }' "$tmp/s.csv") blocks)" \
	test "$(awk -F, '$7 == "read" && $8 ~ /weights.bin$/ { n += $6 } END { print n + 0 }' "$tmp/s.csv")" = 100

# -c: a cgroup v2 directory; the process in it is recorded, the one outside is not.
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
if [ -n "$cg2" ] && mkdir "$cg2/llmtrace-test-$$" 2>/dev/null; then
	cg=$cg2/llmtrace-test-$$
	rm -f "$tmp/rec.err"
	( echo $BASHPID >"$cg/cgroup.procs"; eval "$(ready "$tmp/rec.err")"
	  exec "${wl_cmd[@]}" --tokens 3 --access pread --trace "$tmp/wc.csv" --format csv >/dev/null ) &
	inside=$!
	( eval "$(ready "$tmp/rec.err")"; exec "$W" decoder --dir "$other" --weights-size 4MiB --tokenizer-size 64KiB \
		--config-size 256KiB --tokens 2 >/dev/null ) &
	"$T" record --format csv -c "$cg" -o "$tmp/c.csv" 2>"$tmp/rec.err" &
	rec=$!
	wait "$inside"; sleep 0.3; kill -INT "$rec"
	check "-c: the recorder stops on SIGINT with status 0" wait "$rec"
	wait
	files_of "$tmp/wc.csv" >"$tmp/keys"
	ops_of "$tmp/wc.csv" read "$tmp/keys" >"$tmp/w.reads"
	ops_of "$tmp/c.csv" read "$tmp/keys" >"$tmp/r.reads"
	check "-c: every read of the process in the cgroup" cmp -s "$tmp/w.reads" "$tmp/r.reads"
	check "-c: nothing of the process outside" test -z "$(ops_of "$tmp/c.csv" read "$tmp/okeys")"
else
	echo "note: no writable cgroup v2 hierarchy: -c not tested"
fi

# --min-size and --path-prefix: the small files of the workload are left out, or everything outside DIR.
"$T" record -q --format csv --min-size 1MiB -o "$tmp/m.csv" -- "${wl_cmd[@]}" --tokens 3 --access pread \
	--trace "$tmp/wm.csv" --format csv >/dev/null 2>&1
files_of "$tmp/wm.csv" >"$tmp/keys"
check "--min-size: weights there" grep -q ',read,.*/weights\.bin$' "$tmp/m.csv"
check "--min-size: config and tokenizer left out" test -z "$(grep -E '(config|tokenizer)\.bin$' "$tmp/m.csv")"
check "--min-size: the weights recorded" test "$(ops_of "$tmp/m.csv" read "$tmp/keys")" = \
	"$(ops_of "$tmp/wm.csv" read "$tmp/keys" | grep -F "$(awk -F, '/weights.bin$/ { print $3 ":" $4; exit }' "$tmp/wm.csv")")"
"$T" record -q --format csv --path-prefix "$dir/" -o "$tmp/pp.csv" -- "${wl_cmd[@]}" --tokens 3 --access pread \
	--trace "$tmp/wpp.csv" --format csv >/dev/null 2>&1
files_of "$tmp/wpp.csv" >"$tmp/keys"
check "--path-prefix: only files under it" test "$(awk -F, -v d="$dir/" 'NR > 1 && !/^#/ && index($8, d) != 1' "$tmp/pp.csv" | wc -l)" = 0
check "--path-prefix: every read under it" test "$(ops_of "$tmp/pp.csv" read "$tmp/keys")" = "$(ops_of "$tmp/wpp.csv" read "$tmp/keys")"
check "--path-prefix: no other records" test "$(($(grep -vc '^#' "$tmp/pp.csv") - 1))" = "$(ops_of "$tmp/pp.csv" read "$tmp/keys" | wc -l)"

# Pages read into the page cache (mm_filemap_add_to_page_cache): a cold run reads the whole footprint
# (64 + 16 + 1024 blocks), a warm one nothing. Another test's memory pressure may reclaim some of the
# pages between the runs (read once, they sit in the oldest generation), so a warm run gets three tries.
pages_in() { grep -oE '[0-9]+ pages read into the page cache' "$1" | cut -d' ' -f1; }
"$T" record -q --path-prefix "$dir" -o "$tmp/x.trace" -- "${wl_cmd[@]}" --tokens 2 --access pread --drop-cache \
	>/dev/null 2>"$tmp/rec.err"
cold=$(pages_in "$tmp/rec.err")
check "cold run: the footprint read into the page cache ($cold pages)" test "${cold:-0}" -ge 1104 -a "${cold:-0}" -le 2208
for try in 1 2 3; do
	"$T" record -q --path-prefix "$dir" -o "$tmp/x.trace" -- "${wl_cmd[@]}" --tokens 2 --access pread >/dev/null 2>"$tmp/rec.err"
	warm=$(pages_in "$tmp/rec.err")
	[ "${warm:-9999}" -ge 100 ] || break
	echo "note: warm run $try read $warm pages into the page cache (reclaimed in between?)"
done
check "warm run: nothing read into the page cache ($warm pages)" test "${warm:-9999}" -lt 100

# 3. A tiny ring and a burst of small reads: events are lost, counted and reported.
"$T" record -q --ring-size 4096 --join-blocks 1 -o "$tmp/lost.trace" -- "${wl_cmd[@]}" --tokens 20 --access pread --read-size 4KiB \
	>/dev/null 2>"$tmp/rec.err"
lost=$(grep -oE '[0-9]+ lost events' "$tmp/rec.err" | cut -d' ' -f1)
check "tiny ring: lost events counted and printed ($(cat "$tmp/rec.err"))" test "${lost:-0}" -gt 0
check "tiny ring: the summary says what to do" has "$(cat "$tmp/rec.err")" "raise --ring-size"
check "tiny ring: the trace is still valid" "$T" stat "$tmp/lost.trace" >/dev/null

# 4. Ctrl-C stops a system-wide recording cleanly with a valid trace; the live summary is printed.
rm -f "$tmp/rec.err"
"$T" record -o "$tmp/all.trace" 2>"$tmp/rec.err" &
rec=$!
eval "$(ready "$tmp/rec.err")"; wl "$dir" 1 pread >/dev/null; sleep 1.2; kill -INT "$rec"
check "SIGINT: status 0" wait "$rec"
check "SIGINT: live summary once a second" has "$(cat "$tmp/rec.err")" "events/s, [0-9]+ events, [0-9]+ files, [0-9]+ lost"
check "SIGINT: a valid trace with the workload in it" has "$("$T" stat "$tmp/all.trace")" "decoder/weights.bin"

# 5. strace-like text output names the files and reads back through the strace reader.
"$T" record -q --format strace -o "$tmp/r.strace" -- "${wl_cmd[@]}" --tokens 1 --access pread >/dev/null 2>&1
check "--format strace: pread64 lines of the weights" grep -qE "^[0-9]+ [0-9.]+ pread64\(3<$dir/decoder/weights.bin>" "$tmp/r.strace"
check "--format strace: stat reads it back" has "$("$T" stat "$tmp/r.strace")" "$dir/decoder/weights.bin"

# 6. CMD's exit status is passed on; bad options say what is wrong.
set +e
"$T" record -q -o "$tmp/x.trace" -- sh -c 'exit 3' 2>/dev/null; st=$?
err=$("$T" record -o "$tmp/x.trace" --ring-size 5000 -- true 2>&1); st2=$?
err3=$("$T" record -o "$tmp/x.trace" -p 1 -- true 2>&1); st3=$?
err4=$(timeout 20 "$T" record stray -o "$tmp/x.trace" 2>&1); st4=$?
err5=$("$T" record -o "$tmp/x.trace" --join-blocks 0 -- true 2>&1); st5=$?
set -e
check "CMD's exit status is llmtrace's" test "$st" = 3
check "--ring-size 5000 rejected" test "$st2" = 2
check "--ring-size: says why" has "$err" "power of two"
check "-p with -- CMD rejected" has "$err3" "choose one of"
check "a stray positional rejected ($err4)" test "$st4" = 2
check "--join-blocks 0 rejected with the range ($err5)" test "$st5" = 2 -a -n "$(grep -- "--join-blocks must be 1 to" <<<"$err5")"

[ "$fails" -eq 0 ] && echo "PASS: llmtrace record" || { echo "$fails check(s) failed"; exit 1; }
