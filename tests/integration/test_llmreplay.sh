#!/bin/bash
# SPDX-License-Identifier: MIT
# llmreplay end to end on a small CSV trace made here: the tables, --json, --csv, the SVGs, and the error
# paths with their exit codes and messages.
set -u
R="${LLMCACHE_BIN:?set LLMCACHE_BIN to the bin directory of the build}/llmreplay"
if [ ! -x "$R" ]; then
	echo "SKIP: $R is not built"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "FAIL: $*"
	exit 1
}

# An app-like trace (format: time_ns,pid,dev,inode,first_block,nr_blocks,op[,path]): a one-time scan of 400
# blocks of config.bin (8 per record), then 10 sweeps of a 300-block loop over model.bin (4 per record),
# with one access to a 10-block hot set (tokenizer.bin) after every 12th loop record.
# Accesses: 400 + 3000 + 60 = 3460; footprint: 400 + 300 + 10 = 710 blocks.
awk 'BEGIN {
	print "time_ns,pid,dev,inode,first_block,nr_blocks,op,path"
	t = 0
	for (b = 0; b < 400; b += 8)
		printf "%d,100,1,11,%d,8,read,/app/config.bin\n", t += 1000, b
	h = 0
	for (it = 0; it < 10; it++)
		for (b = 0; b < 300; b += 4) {
			printf "%d,100,1,13,%d,4,read,/app/model.bin\n", t += 1000, b
			if (b / 4 % 12 == 11)
				printf "%d,100,1,12,%d,1,read,/app/tokenizer.bin\n", t += 1000, h++ * 7 % 10
		}
}' >"$tmp/app.csv"

# --- the table ---
out=$("$R" "$tmp/app.csv" -p llm,lru -s 10%,50%,100% --progress never 2>"$tmp/err") ||
	fail "replay failed: $(cat "$tmp/err")"
echo "$out"
grep -q "accesses: 3460 " <<<"$out" || fail "summary does not count 3460 block accesses"
grep -q "files: 3 " <<<"$out" || fail "summary does not count 3 files"
grep -q "footprint: 710 blocks" <<<"$out" || fail "summary does not give the 710-block footprint"
header=$(grep -A1 '^hit ratio' <<<"$out" | tail -1)
[[ "$header" =~ cache.*blocks.*MiB.*llm.*lru ]] || fail "hit-ratio table header: '$header'"
row() { grep -m1 -E "^ +$1 " <<<"$out"; }
# 10% = 71 blocks: LRU never keeps the 300-block loop nor a hot block (reused 500 accesses later).
read -r _ blocks _ llm lru <<<"$(row 10%)"
[ "$blocks" = 71 ] || fail "10% of 710 blocks resolved to $blocks, want 71"
[ "$lru" = 0.00 ] || fail "lru at 10% hits $lru%, want 0.00"
awk -v v="$llm" 'BEGIN { exit !(v > 5) }' || fail "llm at 10% hits only $llm%"
# 100%: everything fits, so only the 710 first accesses miss: (3460 - 710) / 3460 = 79.48%.
read -r _ blocks _ llm lru <<<"$(row 100%)"
[ "$blocks" = 710 ] && [ "$llm" = 79.48 ] && [ "$lru" = 79.48 ] || fail "100% row: $(row 100%)"
grep -q "^llm hits by class:" <<<"$out" || fail "no per-class table for llm"
grep -q "^lru hits by class:" <<<"$out" && fail "a per-class table for lru, which does not classify"
grep -q "SEQ hits/accesses.*LOOP hits/accesses.*HOT hits/accesses" <<<"$out" || fail "per-class header"

# --- the latency table ---
out=$("$R" "$tmp/app.csv" -p lru,llm -s 50% --latency --progress never) || fail "--latency failed"
grep -q "^llm total data-fetch latency" <<<"$out" || fail "latency table is not for llm"
grep -qE "misses +100MB/s +200MB/s +500MB/s +1GB/s" <<<"$out" || fail "latency table columns"

# --- JSON on stdout, instead of the tables ---
"$R" "$tmp/app.csv" -p llm,lru -s 10%,100% --progress never --json >"$tmp/out.json" || fail "--json failed"
python3 -m json.tool "$tmp/out.json" >/dev/null || fail "--json output does not parse"
python3 - "$tmp/out.json" <<'EOF' || fail "--json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["trace"]["accesses"] == 3460 and d["trace"]["footprint_blocks"] == 710, d["trace"]
assert [(r["policy"], r["size"]) for r in d["results"]] == [("llm", "10%"), ("llm", "100%"), ("lru", "10%"), ("lru", "100%")]
for r in d["results"]:
    assert r["hits"] + r["misses"] == 3460, r
    assert ("classes" in r) == (r["policy"] == "llm"), r
assert d["results"][1]["hits"] == 3460 - 710
EOF

# --- hits by file: at 100% each file misses once a block, model.bin (3000 accesses of 300 blocks) hits
# 90%, config.bin (400 of 400) none; tokenizer.bin (60) is not among the two most accessed ---
out=$("$R" "$tmp/app.csv" -p llm,lru -s 10%,100% --by-file 2 --progress never) || fail "--by-file failed"
grep -q "^hit ratio (%) of the 2 most accessed files at 100% (710 blocks):" <<<"$out" || fail "--by-file title: $out"
sed -n '/most accessed files at 100%/,/^$/p' <<<"$out" >"$tmp/files100"
grep -qE "^ +file +accesses +llm +lru$" "$tmp/files100" || fail "--by-file header: $(cat "$tmp/files100")"
grep -qE "^ +/app/model.bin +3000 +90.00 +90.00$" "$tmp/files100" || fail "model.bin at 100%: $(cat "$tmp/files100")"
grep -qE "^ +/app/config.bin +400 +0.00 +0.00$" "$tmp/files100" || fail "config.bin at 100%: $(cat "$tmp/files100")"
grep -q tokenizer "$tmp/files100" && fail "--by-file 2 listed a third file: $(cat "$tmp/files100")"
sed -n '/most accessed files at 10%/,/^$/p' <<<"$out" | grep -qE "^ +/app/model.bin +3000 +[0-9.]+ +0.00$" ||
	fail "lru at 10% hits model.bin's 300-block loop"
"$R" "$tmp/app.csv" -p llm,lru -s 10%,100% --by-file 5 --progress never --json >"$tmp/files.json" ||
	fail "--by-file --json failed"
python3 - "$tmp/files.json" <<'EOF' || fail "--by-file in --json: $(cat "$tmp/files.json")"
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    files = r["files"]
    assert [f["file"] for f in files] == ["/app/model.bin", "/app/config.bin", "/app/tokenizer.bin"], files
    assert [f["accesses"] for f in files] == [3000, 400, 60], files
    assert sum(f["hits"] for f in files) == r["hits"], r
    if r["size"] == "100%":
        assert [f["hits"] for f in files] == [2700, 0, 50], files
EOF
"$R" "$tmp/app.csv" -p llm -s 10% --progress never --json | python3 -c '
import json, sys
assert all("files" not in r for r in json.load(sys.stdin)["results"])' || fail "--json without --by-file has results by file"

# --- a cache far larger than the footprint: replayed at the footprint, where it hits the same, without
# tables for the size asked (4 TiB is 2^30 blocks: every policy at once would need tens of GiB) ---
(ulimit -v 4000000 && "$R" "$tmp/app.csv" -s 100%,4TiB --progress never --json >"$tmp/big.json") 2>"$tmp/err" ||
	fail "a 4 TiB cache on a 710-block trace, under a 4 GB address-space limit: $(cat "$tmp/err")"
python3 - "$tmp/big.json" <<'EOF' || fail "the 4 TiB cache does not hit as the footprint's"
import json, sys
hits = {}
for r in json.load(open(sys.argv[1]))["results"]:
    hits.setdefault(r["policy"], {})[r["size"]] = r["hits"]
assert len(hits) == 14, sorted(hits)
for p, h in hits.items():
    assert h["100%"] == h["4TiB"] == 3460 - 710, (p, h)
EOF

# --- JSON types, and a trace name with a quote, a backslash and a newline escaped ---
odd=$tmp/$'a"b\\c\nd.csv'
cp "$tmp/app.csv" "$odd"
"$R" "$odd" -p llm -s 10% --progress never --bandwidths 100MB/s --json >"$tmp/odd.json" || fail "--json of the odd name failed"
python3 - "$tmp/odd.json" "$odd" <<'EOF' || fail "--json types or escaping: $(cat "$tmp/odd.json")"
import json, sys
text = open(sys.argv[1]).read()
assert 'a\\"b\\\\c\\nd.csv' in text, text
d = json.load(open(sys.argv[1]))
t = d["trace"]
assert t["path"] == sys.argv[2] and t["name"] == 'a"b\\c\nd.csv', t
assert all(type(t[k]) is int for k in ("records", "accesses", "files", "footprint_blocks", "footprint_bytes")), t
r = d["results"][0]
assert all(type(r[k]) is int for k in ("capacity_blocks", "accesses", "hits", "misses")), r
assert type(r["hit_ratio"]) is float and type(r["fetch_latency_s"]["100MB/s"]) is float, r
assert all(type(v) is int for c in r["classes"].values() for v in c.values()), r
EOF

# --- CSV and SVG files, with the tables still on stdout ---
out=$("$R" "$tmp/app.csv" -p llm,lru -s 10%,50%,100% --progress never --csv "$tmp/out.csv" \
	--svg "$tmp/hit.svg" --latency-svg "$tmp/lat.svg" --json="$tmp/o2.json") || fail "file outputs failed"
grep -q "^hit ratio" <<<"$out" || fail "--json=FILE suppressed the tables"
python3 -m json.tool "$tmp/o2.json" >/dev/null || fail "--json=FILE does not parse"
want="policy,size,capacity_blocks,capacity_bytes,capacity_fraction,accesses,hits,misses,hit_ratio,seq_accesses,seq_hits,loop_accesses,loop_hits,hot_accesses,hot_hits,fetch_s@100MB/s,fetch_s@200MB/s,fetch_s@500MB/s,fetch_s@1GB/s"
[ "$(head -1 "$tmp/out.csv")" = "$want" ] || fail "CSV header: $(head -1 "$tmp/out.csv")"
[ "$(wc -l <"$tmp/out.csv")" = 7 ] || fail "CSV has $(wc -l <"$tmp/out.csv") lines, want 7"
awk -F, 'NR > 1 && (NF != 19 || $6 != 3460 || $7 + $8 != 3460) { bad = 1 } END { exit bad }' "$tmp/out.csv" ||
	fail "CSV rows: $(cat "$tmp/out.csv")"
grep -q '^lru,100%,710,2908160,1,3460,2750,710,' "$tmp/out.csv" || fail "CSV lru 100% row"
python3 - "$tmp/hit.svg" "$tmp/lat.svg" <<'EOF' || fail "SVG output"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
for path, lines, legend in ((sys.argv[1], 2, "lru"), (sys.argv[2], 4, "1GB/s")):
    root = ET.parse(path).getroot()
    assert root.tag == ns + "svg", root.tag
    assert len(root.findall(f".//{ns}polyline")) == lines, path
    texts = [t.text for t in root.iter(ns + "text")]
    assert legend in texts and any("app.csv" in (t or "") for t in texts), texts
EOF

# --- errors ---
expect() { # expect CODE PATTERN command...: exit status CODE and stderr matching PATTERN
	local code=$1 pattern=$2
	shift 2
	"$@" >/dev/null 2>"$tmp/err"
	local rc=$?
	[ $rc = "$code" ] || fail "'$*' exited $rc, want $code: $(cat "$tmp/err")"
	grep -qE -- "$pattern" "$tmp/err" || fail "'$*' said '$(cat "$tmp/err")', want /$pattern/"
	[ "$(wc -l <"$tmp/err")" = 1 ] || fail "'$*' wrote more than one line: $(cat "$tmp/err")"
}
expect 1 "$tmp/missing.csv.*No such file" "$R" "$tmp/missing.csv"
expect 2 "unknown policy 'nosuch'.*lru" "$R" "$tmp/app.csv" -p llm,nosuch
expect 2 "cache size 'abc'" "$R" "$tmp/app.csv" -s 10%,abc
expect 2 "cache size '0blocks'.*at least one block" "$R" "$tmp/app.csv" -s 0blocks
expect 2 "cache size '0%'" "$R" "$tmp/app.csv" -s 0%
# Issue 19: 1e3 and 0x100 were 1000 and 256 bytes (one block) while 1000 was 1000 blocks.
expect 2 "cache size '1e3'.*plain decimal" "$R" "$tmp/app.csv" -s 1e3
expect 2 "cache size '0x100'.*plain decimal" "$R" "$tmp/app.csv" -s 0x100
expect 2 "cache size '1000': a plain number is ambiguous; write 1000blocks" "$R" "$tmp/app.csv" -s 1000
expect 2 "--by-file '0': give the number of files to report, a whole number from 1 to 4294967295" "$R" "$tmp/app.csv" --by-file 0
expect 2 "--by-file 'many': give the number of files" "$R" "$tmp/app.csv" --by-file many
expect 2 "--by-file '-1': give the number of files" "$R" "$tmp/app.csv" --by-file=-1
expect 2 "--jobs '-1': give the number of replays to run at once" "$R" "$tmp/app.csv" --jobs=-1
expect 2 "--jobs '2x': give the number of replays" "$R" "$tmp/app.csv" -j 2x
expect 2 "--jobs '4294967296': give the number of replays" "$R" "$tmp/app.csv" -j 4294967296
expect 2 "--by-file reports the policies' hits, and --enforce replays no policy" "$R" "$tmp/app.csv" --by-file 3 --enforce
expect 2 "cache size '100B' is less than one 4 KiB block" "$R" "$tmp/app.csv" -s 100B
expect 2 "unknown trace format 'xml'" "$R" "$tmp/app.csv" --from xml
"$R" "$tmp/app.csv" -p lru -s 1000blocks,10% --json >"$tmp/blocks.json" || fail "-s 1000blocks,10% failed"
python3 - "$tmp/blocks.json" <<'EOF'
import json, sys
sizes = json.load(open(sys.argv[1]))["sizes"]
assert [s["size"] for s in sizes] == ["1000blocks", "10%"], sizes
assert sizes[0]["capacity_blocks"] == 1000, sizes
EOF
expect 2 "unexpected argument 'extra'" "$R" "$tmp/app.csv" extra
expect 2 "bandwidths" "$R" "$tmp/app.csv" --bandwidths fast
{ head -3 "$tmp/app.csv"; echo "99000,100,1,11,not-a-block,8,read"; } >"$tmp/bad.csv"
expect 1 "bad.csv.*4" "$R" "$tmp/bad.csv" --format csv
"$R" --help | grep -q EXAMPLES || fail "--help has no EXAMPLES"
"$R" --help >/dev/full 2>/dev/null && fail "--help to a full stdout exited 0"
# An output that is the trace is refused before anything is written: the trace stays whole.
cp "$tmp/app.csv" "$tmp/same.csv"
ln "$tmp/same.csv" "$tmp/same-link.csv"
for o in --csv --json --svg --latency-svg; do
	expect 2 "is the trace .*: writing it would destroy it" "$R" "$tmp/same.csv" -s 10% "$o=$tmp/same-link.csv"
	cmp -s "$tmp/app.csv" "$tmp/same.csv" || fail "$o over the trace changed it"
done
expect 2 "give a size with a unit \(64MiB\), a percentage \(10%\) or Nblocks" "$R" "$tmp/app.csv" -s 99999999999999999999999MiB
# A result file is written whole or not at all: one that cannot be renamed into place leaves the old one.
echo old >"$tmp/kept.csv"
chattr +i "$tmp/kept.csv" 2>/dev/null && {
	"$R" "$tmp/app.csv" -p lru -s 10% --csv "$tmp/kept.csv" >/dev/null 2>&1 && fail "--csv over an immutable file exited 0"
	chattr -i "$tmp/kept.csv"
	[ "$(cat "$tmp/kept.csv")" = old ] || fail "a failed --csv changed the old file"
}

# --- the enforced replay: an mmap engine's trace (a 64 MiB weights file, read whole in the first pass and
# then in 5 passes that show every other block only) in a memory cgroup of 70 MiB beside 8 MiB of
# anonymous memory and 4 of code: 58 MiB of page cache.
awk 'BEGIN {
	print "time_ns,pid,dev,inode,first_block,nr_blocks,op,path"
	t = 0
	for (p = 0; p < 6; p++)
		for (b = 0; b < 16384; b += (p ? 2 : 1))
			printf "%d,100,1,20,%d,1,mmap_fault,/m/w.gguf\n", t += 1000, b
}' >"$tmp/engine.csv"
out=$("$R" "$tmp/engine.csv" --enforce --memcg-limit 70MiB --engine-anon 8MiB --engine-code 4MiB --read-around 4KiB \
	--csv "$tmp/enforce.csv" 2>"$tmp/err") || fail "enforced replay failed: $(cat "$tmp/err")"
echo "$out"
grep -q "64.0 MiB, 6 passes" <<<"$out" || fail "the enforced replay did not find the 6 passes over the 64 MiB file"
# Stock: an LRU of 58 MiB under a 64 MiB loop reads it whole every pass.
awk -F, '$1 == "stock" && $6 == 67108864 { ok = 1 } END { exit !ok }' "$tmp/enforce.csv" ||
	fail "stock does not read the whole loop each pass: $(cat "$tmp/enforce.csv")"
# The module and the daemon read what their pins leave out, each pass.
awk -F, '$1 != "stock" && $1 != "mode" && $3 > 0 && $6 == 67108864 - $3 { n++ } END { exit n != 2 }' "$tmp/enforce.csv" ||
	fail "module and daemon do not read what their pins leave: $(cat "$tmp/enforce.csv")"
expect 2 "--enforce needs --memcg-limit" "$R" "$tmp/engine.csv" --enforce --engine-anon 8MiB
expect 2 "more than --engine-anon" "$R" "$tmp/engine.csv" --enforce --memcg-limit 8MiB --engine-anon 8MiB
expect 2 "unknown mode 'lru'" "$R" "$tmp/engine.csv" --enforce lru --memcg-limit 70MiB --engine-anon 8MiB
expect 2 "is an option of --enforce" "$R" "$tmp/engine.csv" --memcg-limit 70MiB
head -50 "$tmp/engine.csv" >"$tmp/small.csv"
expect 1 "no file of the trace reaches 1 MiB" "$R" "$tmp/small.csv" --enforce --memcg-limit 70MiB --engine-anon 8MiB
echo PASS
