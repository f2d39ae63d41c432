#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: generate the paper's four on-device app workloads and a decoder workload, replay every
# policy over a cache-size sweep, print the hit-ratio tables and the sizing report, and write the
# traces, tables, CSV, JSON and SVG plots to the results directory.
# Usage: scripts/demo.sh BIN_DIR RESULTS_DIR
set -euo pipefail
bin=${1:?usage: demo.sh BIN_DIR RESULTS_DIR}
out=${2:?usage: demo.sh BIN_DIR RESULTS_DIR}
mkdir -p "$out/traces"

section() { printf '\n=== %s ===\n' "$*"; }

section "Generating workloads (traces in $out/traces)"
for app in ai-notes ai-translate text-embedder text-classification; do
	"$bin/llmworkload" app "$app" --trace "$out/traces/$app.trace"
done
"$bin/llmworkload" decoder --weights-size 128MiB --tokenizer-size 2MiB --config-size 16MiB --tokens 24 \
	--access mmap --trace "$out/traces/decoder.trace"

for t in ai-notes ai-translate text-embedder text-classification decoder; do
	section "Replay: $t (hit ratio by cache size, as a fraction of the footprint)"
	"$bin/llmreplay" "$out/traces/$t.trace" --latency \
		--csv "$out/$t.csv" --json="$out/$t.json" --svg "$out/$t-hit-ratio.svg" \
		--latency-svg "$out/$t-latency.svg" | tee "$out/$t.txt"
done

section "Sizing rule S >= max(0, N - BW*T): the paper's devices"
"$bin/llmcachectl" size --device watch | tee "$out/sizing-watch.txt"
"$bin/llmcachectl" size --device phone | tee "$out/sizing-phone.txt"

section "Results"
echo "Tables, CSV, JSON and SVG plots are in $out/:"
ls "$out" | sed 's/^/  /'
