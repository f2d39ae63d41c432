#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The corpus of real traces (tests/data/traces/, recorded by scripts/record-corpus.sh; see
# Documentation/corpus.md), no privileges needed. For every NAME.trace.xz with its NAME.meta:
#   - llmtrace stat: the loops the policy core finds. An mmap engine's weights file is one loop of N
#     blocks within 2% of the model's blocks, iterating at least once per two recorded passes (the
#     prompt's and one per decoded token); a read() engine reads its weights once (at most 10% of its
#     block accesses again: llama.cpp's loader reads the block two tensors share twice, and a few ranges
#     twice), so no loop of it iterates more than once; an app's model and scratch files are loops of N
#     within 2% of their size.
#   - llmreplay, every policy at 25%, 50% and 90% of the footprint: the replay's footprint equals stat's,
#     and Belady's offline optimum hits at least as much as every policy (to 0.01 points).
#   - where llm beats every baseline by a margin today (llm_wins below: at least 1.5 points, so that it
#     means something), that it still does, with the figures;
#   - wherever some baseline reaches 0.95 of Belady's hit ratio, that llm does too (issue 20's target as
#     Documentation/corpus.md reads it).
# It prints every table, the weights loop's period beside the engine's time per token, llm's ratio to
# Belady and whether it beats LIRS; issue 20's item 2 (llm at least every baseline everywhere) is not
# done, so the rest is printed, not asserted. About 40 s on 2 cores.
set -euo pipefail
BIN=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
SRC=${LLMCACHE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$BIN/llmtrace R=$BIN/llmreplay
if [ ! -x "$T" ]; then # built only with clang, bpftool, libbpf and kernel BTF (see bpf/CMakeLists.txt)
	[ -e /sys/kernel/btf/vmlinux ] || { echo "SKIP: llmtrace is not built: this kernel has no BTF"; exit 77; }
	echo "FAIL: $T is missing (install the BPF build dependencies: scripts/install-deps.sh bpf)"; exit 1
fi
corpus=$SRC/tests/data/traces
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
sizes=25%,50%,90%
traces=("$corpus"/*.trace.xz)
check "the corpus has traces" test -e "${traces[0]}"
# xz from xz-utils when installed, else Python's lzma (python3 is a build dependency).
unxz_to() {
	if command -v xz >/dev/null; then xz -dc "$1" >"$2"
	else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"; fi
}

for xzfile in "${traces[@]}"; do
	name=$(basename "$xzfile" .trace.xz)
	meta=$corpus/$name.meta
	check "$name: has its sidecar $name.meta" test -f "$meta"
	[ -f "$meta" ] || continue
	trace=$tmp/$name.trace
	unxz_to "$xzfile" "$trace"
	"$T" stat --json --loops 1000 "$trace" >"$tmp/$name.stat.json"
	"$R" "$trace" -s "$sizes" --json="$tmp/$name.replay.json" --progress never >"$tmp/$name.replay.txt"
	echo
	echo "== $name: $(grep -E '^(kind|access|model|model_room_pct|phase|decode_tokens|app|iterations)=' "$meta" | tr '\n' ' ')"
	# The checks and the figures: one line per check ("ok"/"FAIL" DESCRIPTION), then the tables.
	python3 - "$meta" "$tmp/$name.stat.json" "$tmp/$name.replay.json" >"$tmp/$name.checks" <<'EOF'
import json, math, sys
meta = {}
for line in open(sys.argv[1]):
    if line.strip() and not line.startswith("#") and "=" in line:
        k, v = line.rstrip("\n").split("=", 1)
        meta[k] = v
stat = json.load(open(sys.argv[2]))
replay = json.load(open(sys.argv[3]))
def check(ok, what):
    print(("ok" if ok else "FAIL") + " " + what)
def loops_of(suffix):
    return [l for l in stat["loops"] if l["path"].endswith(suffix)]
def near(n, want, tol=0.02):
    return abs(n - want) <= tol * want

if meta["kind"] == "engine":
    model = meta["model_path"]
    blocks = math.ceil(int(meta["model_bytes"]) / 4096)
    loops = loops_of(model)
    big = max(loops, key=lambda l: l["n_blocks"]) if loops else None
    if meta["access"] == "mmap":
        check(big is not None and near(big["n_blocks"], blocks),
              f"the weights loop N = {big['n_blocks'] if big else 'none'} blocks is within 2% of the model's {blocks}")
        # The prompt's pass, then one per decoded token. Where the model fits, a pass that faults on
        # little of it does not restart the loop (Documentation/corpus.md): at least half of them must.
        passes = int(meta["decode_tokens"]) + 1
        check(big is not None and 2 * big["iterations"] >= passes,
              f"the weights loop iterates {big['iterations'] if big else 0} times for {passes} passes (at least half)")
        if big and big["period_ns"] and meta.get("token_s"):
            print(f"info: weights loop: {big['iterations']} iterations, last period {big['period_ns'] / 1e9:.3f} s;"
                  f" the engine's {meta['phase']} time per token {float(meta['token_s']):.3f} s")
    else:
        model_file = [f for f in stat["files"] if f["path"] == model]
        fp = model_file[0]["footprint_blocks"] if model_file else 0
        reads = model_file[0]["block_accesses"] if model_file else 0
        check(near(fp, blocks), f"read(): the whole model is read ({fp} of {blocks} blocks)")
        check(fp and reads <= 1.1 * fp, f"read(): once ({reads} block accesses for {fp} blocks, at most 10% more)")
        again = max([l["iterations"] for l in loops] + [0])
        check(again <= 1, f"read(): no part of the model is read more than twice (loop iterations at most 1: {again})")
else:
    for spec in meta["loops"].split():
        path, n = spec.split(":")
        loops = loops_of("/" + path)
        big = max(loops, key=lambda l: l["n_blocks"]) if loops else None
        check(big is not None and near(big["n_blocks"], int(n)),
              f"{path}: a loop of N = {big['n_blocks'] if big else 'none'} blocks within 2% of its {n}")

tr = replay["trace"]
check(tr["footprint_blocks"] == stat["footprint_blocks"],
      f"the replay's footprint ({tr['footprint_blocks']} blocks) equals the trace's ({stat['footprint_blocks']})")
policies = []
for r in replay["results"]:
    if r["policy"] not in policies:
        policies.append(r["policy"])
hit = {(r["size"], r["policy"]): 100 * r["hit_ratio"] for r in replay["results"]}
sizes = [s["size"] for s in replay["sizes"]]
# Where llm beats every baseline by at least 1.5 points (Documentation/corpus.md, "Hit ratios").
llm_wins = {
    "engine-f16-mha-mmap-107-decode": ["25%", "50%"],
    "engine-f16-mha-mmap-107-prompt": ["25%", "50%"],  # 25%: since fault-around windows are not
    "engine-f16-mha-mmap-50-prompt": ["50%"],
    "engine-f16-mha-mmap-80-prompt": ["25%", "50%"],   # 25%: since reuse distance against idleness
    "engine-q8-gqa-mmap-107-prompt": ["25%", "50%"],   # scans (corpus.md), here too
    "engine-q8-gqa-mmap-50-prompt": ["50%"],   # since the retouching loops' probation (corpus.md)
    "engine-q8-gqa-mmap-80-prompt": ["25%", "50%"],   # 25%: since reuse distance against idleness
    "engine-f16-mha-read-decode": ["25%"],     # since reuse distance against idleness (corpus.md)
    "engine-f16-mha-read-prompt": ["25%"],
    "engine-q8-gqa-read-decode": ["25%"],
    "engine-q8-gqa-read-prompt": ["25%"],
    "engine-f16-mha-mmap-80-decode": ["25%"],  # since the retouching loops' probation (corpus.md)
    "engine-q8-gqa-mmap-107-decode": ["25%", "50%"],
    "engine-q8-gqa-mmap-50-decode": ["25%", "50%"],
    "engine-q8-gqa-mmap-80-decode": ["25%", "50%"],
    "app-ai-notes": ["25%", "50%"],             # 25%: since equal loops keep their pins (corpus.md);
    "app-text-classification": ["25%", "50%"],  # the rest since loops that stopped are keyed by their
    "app-text-embedder": ["25%", "50%"],        # age (corpus.md, "Loops that stopped")
}
for s in llm_wins.get(meta["name"], []):
    rivals = [p for p in policies if p not in ("llm", "belady")]
    best = max(rivals, key=lambda p: hit[(s, p)])
    check(hit[(s, "llm")] > hit[(s, best)],
          f"{s}: llm ({hit[(s, 'llm')]:.2f}%) beats every baseline (the best: {best}, {hit[(s, best)]:.2f}%)")
# Issue 20's 0.95-of-Belady target as Documentation/corpus.md reads it ("Decision: how the 0.95 target
# is read"): wherever some baseline reaches 0.95 of Belady's hit ratio, llm reaches it too.
for s in sizes:
    b = hit[(s, "belady")]
    reach = [p for p in policies if p not in ("llm", "belady") and hit[(s, p)] >= 0.95 * b]
    if reach:
        check(hit[(s, "llm")] >= 0.95 * b,
              f"{s}: llm ({hit[(s, 'llm')]:.2f}%) at 0.95 of Belady ({b:.2f}%) or more, as {reach[0]} is ({hit[(s, reach[0])]:.2f}%)")
for s in sizes:
    worse = [p for p in policies if hit[(s, p)] > hit[(s, "belady")] + 0.01]
    check(not worse, f"{s}: Belady ({hit[(s, 'belady')]:.2f}%) >= every policy{' (not: ' + ', '.join(worse) + ')' if worse else ''}")
print("table: cache  " + " ".join(f"{p:>7}" for p in policies) + "  llm/belady  llm>lirs")
for s in sizes:
    b = hit[(s, "belady")]
    ratio = hit[(s, "llm")] / b if b > 0 else float("nan")
    print(f"table: {s:>5}  " + " ".join(f"{hit[(s, p)]:7.2f}" for p in policies) +
          f"  {ratio:10.3f}  {'yes' if hit[(s, 'llm')] > hit[(s, 'lirs')] else 'no':>8}")
EOF
	while read -r verdict what; do
		case $verdict in
		ok | FAIL) check "$name: $what" test "$verdict" = ok ;;
		table:) echo "   $what" ;;
		info:) echo "   $what" ;;
		esac
	done <"$tmp/$name.checks"
	rm -f "$trace"
done
echo
[ "$fails" -eq 0 ] && echo "test_corpus: all passed (${#traces[@]} traces)" || echo "test_corpus: $fails failed"
exit $((fails ? 1 : 0))
