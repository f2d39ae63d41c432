#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The strace reader against ground truth: llmworkload does real I/O on real files and writes a native
# trace of exactly the calls it made; the same run under `strace -f -tt -yy`, parsed by the strace reader,
# must give the same (block, op) sequence for every file. Also: an mmap run gives the mmap note, and a
# strace output cut mid-line is an error naming the line. Both traces are turned into CSV by the unit
# test binary's --dump-csv mode, which goes through open_reader()/open_writer().
set -euo pipefail
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
W=$bin/llmworkload
dump=$bin/../tests/test_trace_strace
skip() { echo "SKIP: $*"; exit 77; }
[ -x "$W" ] || skip "$W is not built (tools/llmworkload)"
[ -x "$dump" ] || { echo "FAIL: $dump is missing: build the unit tests"; exit 1; }
command -v strace >/dev/null || skip "strace is not installed (apt-get install strace)"
strace -o /dev/null true 2>/dev/null || skip "strace cannot trace here (ptrace is not permitted)"
command -v python3 >/dev/null || skip "python3 is not installed"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# Per file path (canonical): the blocks accessed in order with their op, and the pids.
compare() { # workload.csv strace.csv
	python3 - "$1" "$2" <<'EOF'
import csv, os, sys

def load(name):
    seq, pids = {}, {}
    with open(name, newline="") as f:
        for row in csv.DictReader(f):
            if not row["path"]:
                continue
            p = os.path.realpath(row["path"])
            first, nr = int(row["first_block"]), int(row["nr_blocks"])
            seq.setdefault(p, []).extend((b, row["op"]) for b in range(first, first + nr))
            pids.setdefault(p, set()).add(row["pid"])
    return seq, pids

w, wpids = load(sys.argv[1])
s, spids = load(sys.argv[2])
ok = len(w) == 3
if not ok:
    print(f"expected 3 files in the workload trace, found {sorted(w)}")
for path, want in sorted(w.items()):
    got = s.get(path, [])
    if got != want:
        ok = False
        i = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
        print(f"{path}: workload {len(want)} block accesses, strace {len(got)}; first difference at #{i}: "
              f"workload {want[i:i + 3]}, strace {got[i:i + 3]}")
    elif wpids[path] != spids[path]:
        ok = False
        print(f"{path}: workload pids {wpids[path]}, strace pids {spids[path]}")
    else:
        print(f"ok: {path}: {len(want)} block accesses")
sys.exit(0 if ok else 1)
EOF
}

dir=$tmp/wl
args=(decoder --dir "$dir" --weights-size 2MiB --tokenizer-size 64KiB --config-size 256KiB --tokens 3)

# 1. pread: the strace-parsed trace equals the workload's own, file by file (creation writes included).
strace -f -tt -yy -o "$tmp/pread.strace" "$W" "${args[@]}" --access pread --trace "$tmp/pread.trace" >/dev/null
check "strace output converts" "$dump" --dump-csv "$tmp/pread.strace" auto "$tmp/strace.csv"
check "workload trace converts" "$dump" --dump-csv "$tmp/pread.trace" native "$tmp/workload.csv"
check "strace trace == workload trace per file" compare "$tmp/workload.csv" "$tmp/strace.csv"

# 2. mmap: strace cannot see the page accesses, and the reader says so.
strace -f -tt -yy -o "$tmp/mmap.strace" "$W" "${args[@]}" --access mmap >/dev/null
"$dump" --dump-csv "$tmp/mmap.strace" strace "$tmp/mmap.csv" 2>"$tmp/mmap.notes" || true
weights=$(realpath "$dir/decoder/weights.bin")
check "mmap note names weights.bin" grep -qF "regular file was mmapped ($weights)" "$tmp/mmap.notes"
check "mmap note says how to capture it" grep -qF "record with llmtrace" "$tmp/mmap.notes"

# 3. strace output cut in the middle of line 21: non-zero exit and the line number.
head -n 20 "$tmp/pread.strace" >"$tmp/cut.strace"
sed -n 21p "$tmp/pread.strace" | head -c 15 >>"$tmp/cut.strace"
if "$dump" --dump-csv "$tmp/cut.strace" strace "$tmp/cut.csv" 2>"$tmp/cut.err"; then
	echo "FAIL: a truncated strace output was accepted"
	fails=$((fails + 1))
fi
check "truncation error names line 21" grep -qF "cut.strace:line 21:" "$tmp/cut.err"

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "PASS"
