#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmworkload: real I/O on real files (--dir) with an exact native trace of what it did, trace-only
# generation, determinism by seed, and clear errors for bad options. The native trace is decoded here
# from the ABI in include/uapi/llmcache.h (od + awk), so the check does not depend on the trace reader.
set -euo pipefail
W=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}/llmworkload
[ -x "$W" ] || { echo "FAIL: $W is missing"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
has() { grep -qF -- "$2" <<<"$1"; }
not() { ! "$@"; }
field() { grep -oE "(^| )$2=[0-9.]+" <<<"$1" | cut -d= -f2; } # key=value summary field

# Native trace -> lines "P <dev:inode> <path>" and "A <dev:inode> <first> <nr> <op> <pid> <time>".
decode_native() {
	od -An -v -tu1 -w1 "$1" | awk '
	{ b[n++] = $1 + 0 }
	function u(off, len,   v, i) { v = 0; for (i = len - 1; i >= 0; i--) v = v * 256 + b[off + i]; return v }
	function hex(off, len,   s, i) { s = ""; for (i = len - 1; i >= 0; i--) s = s sprintf("%02x", b[off + i]); return s }
	END {
		magic = ""; for (i = 0; i < 8 && i < n; i++) magic = magic sprintf("%c", b[i])
		if (n < 96 || magic != "LLMTRACE") { print "E not a native trace"; exit 1 }
		if (u(8, 4) != 1 || u(16, 4) != 40) { print "E version " u(8, 4) " record size " u(16, 4); exit 1 }
		for (p = u(12, 4); p + 40 <= n; ) {
			key = hex(p + 28, 4) ":" hex(p + 8, 8); op = b[p + 36]; nr = u(p + 32, 4)
			if (op == 3) {
				s = ""; for (i = 0; i < nr; i++) s = s sprintf("%c", b[p + 40 + i])
				print "P", key, s; p += 40 + int((nr + 7) / 8) * 8
			} else {
				printf "A %s %.0f %d %d %d %.0f\n", key, u(p + 16, 8), nr, op, u(p + 24, 4), u(p, 8); p += 40
			}
		}
		if (p != n) { print "E trailing bytes at offset " p; exit 1 }
	}'
}
# Accesses as "path first nr op", in trace order.
accesses() { decode_native "$1" | awk '$1 == "E" { print; exit 1 } $1 == "P" { path[$2] = $3; next } { print path[$2], $3, $4, $5 }'; }

# 1. The decoder on real files: the exact command another test runs under strace.
dir=$tmp/wl
args=(decoder --dir "$dir" --weights-size 2MiB --tokenizer-size 64KiB --config-size 256KiB --tokens 3 --access pread)
out=$("$W" "${args[@]}" --trace "$tmp/first.trace")
check "first run creates 3 files" test "$(field "$out" files_created)" = 3
check "summary: tokens" test "$(field "$out" tokens)" = 3
check "summary: bytes read" test "$(field "$out" bytes_read)" = $((3 * (2097152 + 4 * 4096) + 262144 + 65536))
for f in config.bin:262144 tokenizer.bin:65536 weights.bin:2097152; do
	check "$f size" test "$(stat -c %s "$dir/decoder/${f%%:*}")" = "${f#*:}"
done
acc=$(accesses "$tmp/first.trace")
check "trace decodes" test -n "$acc"
# Paths are absolute, named once each.
paths=$(decode_native "$tmp/first.trace" | awk '$1 == "P" { print $3 }' | sort)
check "three absolute paths" test "$paths" = "$(printf '%s\n' "$dir"/decoder/{config,tokenizer,weights}.bin)"
# Creation: 1 MiB writes; then the config scan and the tokenizer read, 128 KiB per call.
check "weights created in 1 MiB writes" test "$(grep -c "weights.bin [0-9]* 256 1$" <<<"$acc")" = 2
check "config scan" test "$(grep "config.bin .* 0$" <<<"$acc" | awk '{ print $2 }' | tr '\n' ' ')" = "0 32 "
# Per token: 4 single-block tokenizer reads, then weights blocks 0..511 in 16 reads of 32 blocks.
w=$(grep "weights.bin .* 0$" <<<"$acc")
check "48 weights reads" test "$(wc -l <<<"$w")" = 48
check "weights swept in order 3 times" test "$(awk '{ print $2 }' <<<"$w" | tr '\n' ' ')" = \
	"$(for t in 1 2 3; do seq -s ' ' 0 32 480; done | tr '\n' ' ')"
check "tokenizer hot reads" test "$(grep -c "tokenizer.bin [0-9]* 1 0$" <<<"$acc")" = 12
# Real pid and dev, CLOCK_MONOTONIC times in order.
check "one non-zero pid" test "$(decode_native "$tmp/first.trace" | awk '$1 == "A" { print $6 }' | sort -u | grep -cv '^0$')" = 1
check "times non-decreasing" decode_native "$tmp/first.trace" | awk '$1 == "A" { if ($7 < last) exit 1; last = $7 }'
# st_dev as new_encode_dev(major, minor), which is st_dev itself for any st_dev below 2^32; st_ino as inode.
dev_hex=$(printf '%08x' "$(stat -c %d "$dir/decoder/weights.bin")")
ino_hex=$(printf '%016x' "$(stat -c %i "$dir/decoder/weights.bin")")
check "dev and inode of weights.bin" has "$(decode_native "$tmp/first.trace")" "P $dev_hex:$ino_hex $dir/decoder/weights.bin"

# 2. The trace is exactly what strace sees, per call and in order (when ptrace is allowed here).
if command -v strace >/dev/null && strace -o /dev/null true 2>/dev/null; then
	strace -f -tt -yy -e trace=pread64,pwrite64 -o "$tmp/strace.log" "$W" "${args[@]}" --trace "$tmp/st.trace" >/dev/null
	sed -nE 's/.*(pread64|pwrite64)\([0-9]+<([^>]*)>, .*, ([0-9]+), ([0-9]+)\) += ([0-9]+)$/\1 \2 \4 \5/p' "$tmp/strace.log" |
		awk -v d="$dir/" 'index($2, d) == 1 { f = int($3 / 4096); print $2, f, int(($3 + $4 - 1) / 4096) - f + 1, $1 == "pwrite64" }' \
		>"$tmp/strace.txt"
	check "strace saw the accesses" test -s "$tmp/strace.txt"
	check "trace == strace" diff "$tmp/strace.txt" <(accesses "$tmp/st.trace")
else
	echo "note: strace cannot trace here; skipping the strace comparison"
fi

# 3. Existing files of the right size are reused; a file of the wrong size is recreated.
out=$("$W" "${args[@]}" --trace "$tmp/again.trace")
check "files reused" test "$(field "$out" files_created)" = 0
check "no writes when reused" test "$(accesses "$tmp/again.trace" | awk '$4 != 0' | wc -l)" = 0
truncate -s 1MiB "$dir/decoder/weights.bin"
out=$("$W" "${args[@]}")
check "wrong size recreated" test "$(field "$out" files_created)" = 1
check "recreated size" test "$(stat -c %s "$dir/decoder/weights.bin")" = 2097152
check "content is deterministic" cmp -s "$dir/decoder/weights.bin" <("$W" "${args[@]/$dir/$tmp/wl2}" >/dev/null && cat "$tmp/wl2/decoder/weights.bin")

# 4. mmap: weights as MMAP_FAULT runs, one per 128 KiB, the rest still pread.
out=$("$W" "${args[@]/pread/mmap}" --trace "$tmp/mmap.trace" --json)
check "mmap json summary" has "$out" '"tokens":3'
check "real json summary: counts and seconds typed" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["mode"] == "real" and type(d["seconds"]) is float and type(d["tokens_per_s"]) is float, d
assert all(type(d[k]) is int for k in ("tokens", "bytes_read", "bytes_written", "files_created", "records", "blocks")), d
' "$out"
odd=$tmp/$'a"b\\c\nd.gguf'
out=$("$W" gguf "$odd" --size 1MiB --json)
check "gguf json: a path with a quote, a backslash and a newline" python3 -c '
import json, sys
assert sys.argv[1].count("\n") == 0 and "a\\\"b\\\\c\\nd.gguf" in sys.argv[1], sys.argv[1]
d = json.loads(sys.argv[1])
assert d["path"] == sys.argv[2] and type(d["bytes"]) is int and d["type"] == "f16", d
' "$out" "$odd"
acc=$(accesses "$tmp/mmap.trace")
check "mmap fault runs" test "$(grep -c "weights.bin [0-9]* 32 2$" <<<"$acc")" = 48
check "no weights reads with mmap" test "$(grep -c "weights.bin .* 0$" <<<"$acc")" = 0

# 5. An app on real files: the scratch file is written, the model read.
out=$("$W" app ai-notes --scale 0.02 --iterations 2 --dir "$dir" --trace "$tmp/notes.trace")
check "app files" test "$(stat -c %s "$dir/ai-notes/nmt-weights.bin")" = $((200 * 4096))
check "app writes" test "$(field "$out" bytes_written)" = $((2 * 100 * 4096))
check "app write loop in trace" test "$(accesses "$tmp/notes.trace" | grep -c "handwriting.bin [0-9]* [0-9]* 1$")" -ge 8

# 6. Trace-only mode is deterministic by seed.
"$W" app ai-translate --iterations 20 --seed 5 --trace "$tmp/a.trace" >/dev/null
"$W" app ai-translate --iterations 20 --seed 5 --trace "$tmp/b.trace" >/dev/null
"$W" app ai-translate --iterations 20 --seed 6 --trace "$tmp/c.trace" >/dev/null
check "same seed, same trace" cmp -s "$tmp/a.trace" "$tmp/b.trace"
check "other seed, other trace" not cmp -s "$tmp/a.trace" "$tmp/c.trace"
check "trace-only paths are the relative names" has "$(decode_native "$tmp/a.trace")" " ai-translate/dictation-src.bin"
check "csv output" test "$("$W" decoder --tokens 1 --weights-size 256KiB --trace - --format csv 2>/dev/null | wc -l)" -ge 20

# 7. Bad options: non-zero exit and a message that names the problem.
bad() { # expected text, args...
	local want=$1; shift
	local err
	if err=$("$W" "$@" 2>&1 >/dev/null); then
		echo "FAIL: llmworkload $* succeeded"; fails=$((fails + 1))
	elif ! has "$err" "$want"; then
		echo "FAIL: llmworkload $*: error '$err' does not name '$want'"; fails=$((fails + 1))
	fi
}
bad "frobnicate" frobnicate
bad "ai-poetry" app ai-poetry --trace "$tmp/x"
bad "name the app" app --trace "$tmp/x"
bad "extra" app ai-notes extra --trace "$tmp/x"
bad "12QB" decoder --weights-size 12QB --trace "$tmp/x"
bad "6000" decoder --read-size 6000 --trace "$tmp/x"
bad "-3" decoder --tokens -3 --trace "$tmp/x"
bad "bogus" decoder --access bogus --trace "$tmp/x"
bad "xml" decoder --format xml --trace "$tmp/x"
bad "--trace FILE, --dir DIR" decoder
bad "--drop-cache" decoder --drop-cache --trace "$tmp/x"
bad "nope" decoder --nope --trace "$tmp/x"
touch "$tmp/file"
bad "$tmp/file" decoder --dir "$tmp/file/sub" --tokens 1

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "llmworkload: all checks passed"
