#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmtrace stat and convert (no privileges needed): stat reports the records, the files, the footprint and
# the weights loop of a known llmworkload trace (N = the weights' blocks, tokens - 1 iterations); convert
# round-trips native -> csv -> native -> csv without changing a record or a name, writes oracleGeneral
# and strace-like text that the strace reader reads back, splits a trace by file path (--files,
# --exclude-files), and rejects bad requests with a reason.
set -euo pipefail
BIN=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
T=$BIN/llmtrace W=$BIN/llmworkload
if [ ! -x "$T" ]; then # built only with clang, bpftool, libbpf and kernel BTF (see bpf/CMakeLists.txt)
	[ -e /sys/kernel/btf/vmlinux ] || { echo "SKIP: llmtrace is not built: this kernel has no BTF"; exit 77; }
	echo "FAIL: $T is missing (install the BPF build dependencies: scripts/install-deps.sh bpf)"; exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
has() { grep -qE -- "$2" <<<"$1"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" <<<"$2"; }

"$W" decoder --trace "$tmp/w.trace" --weights-size 4MiB --tokenizer-size 64KiB --config-size 256KiB --tokens 5 >/dev/null
"$W" decoder --trace "$tmp/w.csv" --format csv --weights-size 4MiB --tokenizer-size 64KiB --config-size 256KiB \
	--tokens 5 >/dev/null

s=$("$T" stat --json "$tmp/w.trace")
records=$(($(wc -l <"$tmp/w.csv") - 1))
check "stat: records ($records)" test "$(json 'd["records"]' "$s")" = "$records"
check "stat: three files" test "$(json 'len(d["files"])' "$s")" = 3
check "stat: footprint = weights + tokenizer + config blocks" test "$(json 'd["footprint_blocks"]' "$s")" = $((1024 + 16 + 64))
check "stat: one loop, the weights" test "$(json 'd["sequences"]["loop"]' "$s")" = 1
check "stat: loop N = 1024 blocks" test "$(json 'd["loops"][0]["n_blocks"]' "$s")" = 1024
check "stat: loop path" test "$(json 'd["loops"][0]["path"]' "$s")" = decoder/weights.bin
check "stat: 4 iterations after the first pass" test "$(json 'd["loops"][0]["iterations"]' "$s")" = 4
check "stat: a period" test "$(json 'd["loops"][0]["period_ns"] > 0' "$s")" = True
text=$("$T" stat "$tmp/w.trace")
check "stat: text names the loop" has "$text" "decoder/weights.bin +0-1023 +1024 +4"
check "stat: reads a CSV trace too" test "$("$T" stat --json "$tmp/w.csv" | python3 -c 'import json,sys; print(json.load(sys.stdin)["records"])')" = "$records"
# A path with a quote, a backslash and a newline comes out escaped, and every count is a number.
printf 'time_ns,pid,dev,inode,first_block,nr_blocks,op,path\n0,1,0,7,0,4,read,"a""b\\c\nd.bin"\n' >"$tmp/odd.csv"
check "stat: a path with a quote, a backslash and a newline" python3 -c '
import json, sys
text = sys.stdin.read()
assert text.count("\n") == 1 and "a\\\"b\\\\c\\nd.bin" in text, text
d = json.loads(text)
assert d["files"][0]["path"] == "a\"b\\c\nd.bin", d
assert all(type(v) is int for k, v in d.items() if k not in ("files", "sequences", "blocks_by_class", "loops")), d
assert all(type(v) is int for k, v in d["files"][0].items() if k != "path"), d
' < <("$T" stat --json "$tmp/odd.csv")

"$T" convert "$tmp/w.trace" "$tmp/a.csv" --to csv 2>/dev/null
"$T" convert "$tmp/a.csv" "$tmp/b.trace" --to native 2>/dev/null
"$T" convert "$tmp/b.trace" "$tmp/b.csv" --to csv 2>/dev/null
check "convert: csv of the native trace is the workload's csv" cmp -s "$tmp/w.csv" "$tmp/a.csv"
check "convert: native -> csv -> native -> csv keeps every record and name" cmp -s "$tmp/a.csv" "$tmp/b.csv"
"$T" convert "$tmp/w.trace" "$tmp/o.bin" --to oracleGeneral 2>/dev/null
check "convert: oracleGeneral has 24 bytes per block access" test "$(stat -c %s "$tmp/o.bin")" = $((24 * $(json 'd["block_accesses"]' "$s")))

# strace-like text: the project's strace reader reads it back to the same blocks and paths (dev 0 and
# path_inode() instead of the real device and inode, as for any strace text).
"$T" convert "$tmp/w.trace" "$tmp/w.strace" --to strace 2>/dev/null
check "convert --to strace: strace -f -ttt -yy lines" grep -qE '^[0-9]+ [0-9]+\.[0-9]{9} pread64\(3<[^>]*decoder/weights.bin>, "", [0-9]+, [0-9]+\) = [0-9]+$' "$tmp/w.strace"
"$T" convert "$tmp/w.strace" "$tmp/s.csv" --to csv 2>/dev/null
check "convert: native -> strace -> csv keeps blocks, ops and paths" \
	cmp -s <(awk -F, 'NR > 1 { print $5, $6, $7, $8 }' "$tmp/a.csv") <(awk -F, 'NR > 1 { print $5, $6, $7, $8 }' "$tmp/s.csv")

# Split by path: the weights' records, the others', each complete and named; together the whole trace.
"$T" convert "$tmp/w.trace" "$tmp/wt.csv" --to csv --files 'weights\.bin$' 2>/dev/null
"$T" convert "$tmp/w.trace" "$tmp/rest.csv" --to csv --exclude-files 'weights\.bin$' 2>/dev/null
"$T" convert "$tmp/w.trace" "$tmp/tok.csv" --to csv --files '^decoder/' --exclude-files 'weights|config' 2>/dev/null
check "convert --files: the weights' records, every one" \
	cmp -s <(grep ',decoder/weights\.bin$' "$tmp/a.csv") <(tail -n +2 "$tmp/wt.csv" | grep -v '^#')
check "convert --exclude-files: the others' records, every one" \
	cmp -s <(grep -v ',decoder/weights\.bin$' "$tmp/a.csv" | tail -n +2 | grep -v '^#') <(tail -n +2 "$tmp/rest.csv" | grep -v '^#')
check "convert --files with --exclude-files: the tokenizer's records only" \
	test "$(tail -n +2 "$tmp/tok.csv" | grep -vc '^#')" = "$(grep -c ',decoder/tokenizer\.bin$' "$tmp/a.csv")" -a \
	"$(tail -n +2 "$tmp/tok.csv" | grep -v '^#' | grep -vc ',decoder/tokenizer\.bin$')" = 0
check "convert --files: the kept file keeps its loop" \
	test "$("$T" stat --json "$tmp/wt.csv" | python3 -c 'import json,sys; print(json.load(sys.stdin)["loops"][0]["n_blocks"])')" = 1024

set +e
e1=$("$T" convert "$tmp/w.trace" "$tmp/x" 2>&1); s1=$?
e2=$("$T" convert "$tmp/w.trace" "$tmp/x" --to nonsense 2>&1); s2=$?
e3=$("$T" stat "$tmp/missing" 2>&1); s3=$?
e4=$("$T" stat "$tmp/w.trace" extra 2>&1); s4=$?
e5=$("$T" convert "$tmp/w.trace" "$tmp/x" --to csv --files '(' 2>&1); s5=$?
echo kept >"$tmp/o.csv"
e6=$("$T" convert "$tmp/o.bin" "$tmp/o.csv" --to csv --files weights 2>&1); s6=$?
set -e
check "convert without --to: status 2 and why" test "$s1" = 2 -a -n "$(grep -- '--to' <<<"$e1")"
check "convert --to nonsense: status 2 and why" test "$s2" = 2 -a -n "$(grep 'nonsense' <<<"$e2")"
check "stat of a missing file: status 1, names it" test "$s3" = 1 -a -n "$(grep 'failed to open' <<<"$e3")"
check "stat: unknown positional rejected" test "$s4" = 2
check "convert --files '(': status 2, names the option" test "$s5" = 2 -a -n "$(grep -- "--files '('" <<<"$e5")"
check "convert --files of an unnamed (oracleGeneral) trace: status 1 and why" test "$s6" = 1 -a -n "$(grep 'names no files' <<<"$e6")"
check "convert --files of an unnamed trace: the output is left as it was" test "$(cat "$tmp/o.csv")" = kept

[ "$fails" -eq 0 ] && echo "PASS: llmtrace stat and convert" || { echo "$fails check(s) failed"; exit 1; }
