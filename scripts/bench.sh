#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make bench: speed and memory of the simulator and the policy core, the hit-ratio tables of the
# paper's four app workloads and of the recorded corpus (llm against every baseline and Belady, with an
# SVG plot per corpus trace), the recorder and the userspace
# mode as root, the real engine (bench-engine.sh), the KV half (bench-kv.sh) and a KV soak under faults
# (bench-kv-soak.sh).
# Figures are printed with the machine they ran on; Documentation/evaluation.md records them.
# Usage: scripts/bench.sh BUILD_DIR RESULTS_DIR
set -euo pipefail
build=${1:?usage: bench.sh BUILD_DIR RESULTS_DIR}
bin=$build/bin tests=$build/tests
out=${2:?usage: bench.sh BUILD_DIR RESULTS_DIR}/bench
mkdir -p "$out"

echo "=== Replay throughput, core cost, memory (10.5 M block accesses of a decoder) ==="
"$tests/bench_core" | tee "$out/core.txt"

echo
echo "=== Trace loading: native reader and replay of a 10 M-access trace ==="
"$bin/llmworkload" decoder --weights-size 128MiB --tokenizer-size 2MiB --config-size 16MiB --tokens 320 \
	--access pread --trace "$out/decoder-10M.trace" >/dev/null
/usr/bin/time -f "llmreplay, lru + llm at 50%%, 1 thread: %e s wall, %M KiB max RSS" \
	"$bin/llmreplay" "$out/decoder-10M.trace" -p lru,llm -s 50% -j 1 --progress never | tail -n 4

for app in ai-notes ai-translate text-embedder text-classification; do
	echo
	echo "=== Hit ratio (%): $app, every policy ==="
	"$bin/llmworkload" app "$app" --trace "$out/$app.trace" >/dev/null
	"$bin/llmreplay" "$out/$app.trace" --progress never --csv "$out/$app.csv" | sed -n '/^hit ratio/,/^$/p'
done

echo
echo "=== Hit ratio (%): the recorded corpus (tests/data/traces/), every policy, 10%-100% of the footprint ==="
mkdir -p "$out/corpus"
for xzfile in "$(dirname "$0")"/../tests/data/traces/*.trace.xz; do
	name=$(basename "$xzfile" .trace.xz)
	trace=$out/corpus/$name.trace
	python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$xzfile" "$trace"
	echo "--- $name (table: $out/corpus/$name.csv, plot: $out/corpus/$name.svg)"
	"$bin/llmreplay" "$trace" --progress never --csv "$out/corpus/$name.csv" --svg "$out/corpus/$name.svg" |
		sed -n '/^hit ratio/,/^$/p'
	rm -f "$trace"
done

echo
echo "=== llmtrace: recorder overhead against untraced and strace -f ==="
if [ "$(id -u)" -eq 0 ] && [ -x "$bin/llmtrace" ]; then
	"$(dirname "$0")/bench-bpf.sh" "$bin" "$out"
else
	echo "skipped: needs root and llmtrace (built where the kernel has BTF)"
fi

echo
echo "=== llmcached --mode=bpf against the stock kernel under a memory cgroup limit ==="
"$(dirname "$0")/bench-bpf-mode.sh" "$bin" "$out"

echo
echo "=== A real engine (llama.cpp) under memory cgroup limits: stock, static mlock, llmcached --mode=bpf ==="
"$(dirname "$0")/bench-engine.sh" "$build" "$out"

echo
"$(dirname "$0")/bench-kv.sh" "$tests" "$out"

echo
echo "=== KV soak: sessions for minutes while llmcached is stopped and its device fills up ==="
"$(dirname "$0")/bench-kv-soak.sh" "$tests" "$bin" "$out"
