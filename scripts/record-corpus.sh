#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Re-record the corpus of real traces in tests/data/traces/ (issue 20; Documentation/corpus.md).
# Every trace is real I/O recorded by `llmtrace record` (eBPF), compressed with xz, with a sidecar
# NAME.meta (key=value: what produced it) next to it:
#   - the real engine of the benchmarks, llama.cpp's CPU build through node-llama-cpp (installed from npm
#     into BUILD/engine by scripts/engine/install.sh, driven by scripts/engine/generate.mjs), on two
#     random-weight GGUF models that `llmworkload gguf` writes: F16 with multi-head attention and Q8_0
#     with grouped-query attention;
#   - through mmap (llama.cpp's default), in a memory cgroup whose limit leaves the model 50%, 80% and
#     107% of its size beside the engine's own anonymous memory (measured in a run without a limit);
#   - through read() (node-llama-cpp's useMmap: false: generate.mjs with that one option changed), once
#     without a limit: the engine reads the weights into its own memory once, so its trace is one scan;
#   - each as prompt processing (a long prompt, one token) and decoding (a short prompt, a few tokens);
#   - the paper's four apps, `llmworkload app NAME --dir` doing real pread/pwrite I/O, recorded with
#     --writes (their files prepared by a first, unrecorded run), not their synthetic trace output.
# The page cache is dropped before every recorded run. Everything the followed processes touched is in
# the trace (node, its libraries, the model), as a user's recording would have it.
# Needs root (BPF, cgroups, drop_caches), node >= 20 and npm, xz (xz-utils).
# Usage: scripts/record-corpus.sh BUILD_DIR [OUT_DIR]   (OUT_DIR: tests/data/traces of this checkout)
# Environment: LLMCACHE_CORPUS_ONLY   a regular expression: record only the traces whose name matches
set -euo pipefail
build=$(realpath "${1:?usage: record-corpus.sh BUILD_DIR [OUT_DIR]}")
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${2:-$here/../tests/data/traces}")
only=${LLMCACHE_CORPUS_ONLY:-.}
bin=$build/bin
threads=2 decode_phase_tokens=8 prompt_phase_tokens=1 # tokens generated in each phase
short_prompt="The quick brown fox jumps over the lazy dog"
# 390 tokens of this vocabulary (byte-level for most of it): one prompt-processing batch of 512.
long_prompt=$(for i in $(seq 12); do printf 'The quick brown fox %d jumps over the lazy dog. ' "$i"; done)
models=(
	"f16-mha:--type f16 --embd 512 --ff 1408 --heads 8 --kv-heads 8 --size 96MiB"
	"q8-gqa:--type q8_0 --embd 512 --ff 1408 --heads 8 --kv-heads 2 --size 96MiB"
)
mmap_room_pcts="50 80 107"
apps="ai-notes ai-translate text-embedder text-classification"

die() { echo "record-corpus.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, memory cgroups, drop_caches): run it with sudo"
command -v xz >/dev/null || die "needs xz: apt-get install xz-utils"
for t in llmtrace llmworkload; do [ -x "$bin/$t" ] || die "no $bin/$t: build first (cmake --build $build)"; done
engine=$build/engine
"$here/engine/install.sh" "$engine" || die "no real engine (above)"
# The read() engine: the same driver with the model loaded through read() instead of mmap.
sed 's/useMmap: true/useMmap: false/' "$engine/generate.mjs" >"$engine/generate-read.mjs"
grep -q 'useMmap: false' "$engine/generate-read.mjs" || die "generate.mjs no longer says useMmap: true: update this script"
engine_version=$(node -p "require('$engine/node_modules/node-llama-cpp/package.json').version")
# shellcheck source=scripts/memcg.sh
. "$here/memcg.sh"
memcg_root || die "no memory cgroup controller"
work=$build/corpus
mkdir -p "$work/models" "$work/apps" "$out"
cg=$cgroot/llmcache-corpus-$$
mkdir "$cg"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
kernel=$(uname -r)

set_limit() { # bytes, or max
	if [ "$1" = max ]; then echo max >"$cg/$limit_file" 2>/dev/null || echo -1 >"$cg/$limit_file"
	else echo "$1" >"$cg/$limit_file"; fi
}
# run_recorded NAME CMD...: drops the page cache, runs CMD in the cgroup under `llmtrace record` (which
# follows it and its children from its exec), stdout to $work/NAME.out; sets hooks, records, lost.
run_recorded() {
	local name=$1 rec_opts=()
	shift
	[ "${writes:-0}" = 0 ] || rec_opts+=(--writes)
	sync && echo 3 >/proc/sys/vm/drop_caches
	"$bin/llmtrace" record "${rec_opts[@]}" -o "$work/$name.trace" -- \
		sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" "$@" \
		>"$work/$name.out" 2>"$work/$name.err" || die "$name: the recorded command failed: $(tail -n 5 "$work/$name.err")"
	hooks=$(sed -n 's/^llmtrace: recording with the \([a-z]*\) hooks.*/\1/p' "$work/$name.err" | head -n 1)
	local last
	last=$(grep -E '^llmtrace: [0-9]+ events' "$work/$name.err" | tail -n 1)
	records=$(sed -E 's/^llmtrace: ([0-9]+) events.*/\1/' <<<"$last")
	lost=$(sed -E 's/.* ([0-9]+) lost events.*/\1/' <<<"$last")
	[ "$lost" = 0 ] || die "$name: $lost events lost; record again with a larger --ring-size"
}
json_num() { grep -oE "\"$2\":[0-9.e+-]+" <<<"$1" | head -n 1 | cut -d: -f2; }
# finish NAME key=value...: compresses the trace into OUT and writes OUT/NAME.meta.
finish() {
	local name=$1
	shift
	xz -9e -T1 -c "$work/$name.trace" >"$out/$name.trace.xz"
	{
		echo "# SPDX-License-Identifier: MIT"
		echo "# What produced $name.trace.xz (scripts/record-corpus.sh; Documentation/corpus.md)."
		echo "name=$name"
		printf '%s\n' "$@"
		echo "recorder=llmtrace $("$bin/llmtrace" --version | awk '{ print $NF }')"
		echo "hooks=$hooks"
		echo "kernel=$kernel"
		echo "records=$records"
		echo "lost=$lost"
		echo "trace_bytes=$(stat -c %s "$work/$name.trace")"
		echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	} >"$out/$name.meta"
	echo "$name: $records records, $(stat -c %s "$out/$name.trace.xz") bytes compressed"
}

for spec in "${models[@]}"; do
	mname=${spec%%:*} gopts=${spec#*:}
	model=$work/models/$mname.gguf
	# shellcheck disable=SC2086 # the options, one word each
	desc=$("$bin/llmworkload" gguf "$model" $gopts)
	model_bytes=$(stat -c %s "$model")
	# The engine's own anonymous memory, without a limit and warm: the limits are that plus room for the model.
	set_limit max
	fit=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" node "$engine/generate.mjs" "$model" 2 "$threads")
	anon=$(json_num "$fit" rss_anon)
	[ -n "$anon" ] || die "the engine did not run on $model"
	for access in mmap read; do
		if [ $access = mmap ]; then rooms=$mmap_room_pcts script=generate.mjs; else rooms=none script=generate-read.mjs; fi
		for room in $rooms; do
			for phase in prompt decode; do
				if [ $phase = prompt ]; then tokens=$prompt_phase_tokens prompt=$long_prompt; else tokens=$decode_phase_tokens prompt=$short_prompt; fi
				if [ "$room" = none ]; then name=engine-$mname-$access-$phase limit=max
				else name=engine-$mname-$access-$room-$phase limit=$(( anon + model_bytes * room / 100 )); fi
				[[ $name =~ $only ]] || continue
				set_limit "$limit"
				run_recorded "$name" node "$engine/$script" "$model" "$tokens" "$threads" "$prompt"
				o=$(tail -n 1 "$work/$name.out")
				# The time of one pass over the weights: the prompt's, or a decoded token's.
				if [ $phase = prompt ]; then token_s=$(json_num "$o" prompt_s)
				else token_s=$(awk -v s="$(json_num "$o" decode_s)" -v n="$(json_num "$o" decode_tokens)" 'BEGIN { printf "%.6f", s / n }'); fi
				finish "$name" kind=engine "engine=llama.cpp CPU build through node-llama-cpp $engine_version (prebuilt, npm)" \
					"engine_driver=scripts/engine/generate.mjs$([ $access = mmap ] || echo ' with useMmap: false')" \
					"access=$access" "model=$mname" "model_path=$model" "model_bytes=$model_bytes" \
					"model_desc=$desc" "model_options=llmworkload gguf $gopts" \
					"limit_bytes=$limit" "model_room_pct=$room" "engine_anon_bytes=$anon" \
					"phase=$phase" "threads=$threads" "prompt_tokens=$(json_num "$o" prompt_tokens)" \
					"generated_tokens=$tokens" "decode_tokens=$(json_num "$o" decode_tokens)" \
					"load_s=$(json_num "$o" load_s)" "prompt_s=$(json_num "$o" prompt_s)" \
					"decode_s=$(json_num "$o" decode_s)" "token_s=$token_s" \
					"prompt=$prompt" "command=node $script MODEL $tokens $threads PROMPT"
			done
		done
	done
done

# The apps: their files prepared by a first run, then a cold recorded run of a few loop periods.
app_iterations=(ai-notes:8 ai-translate:200 text-embedder:8 text-classification:8)
for app in $apps; do
	name=app-$app
	[[ $name =~ $only ]] || continue
	iters=
	for a in "${app_iterations[@]}"; do [ "${a%%:*}" != "$app" ] || iters=${a#*:}; done
	set_limit max
	"$bin/llmworkload" app "$app" --dir "$work/apps" --iterations 1 >/dev/null
	writes=1 run_recorded "$name" "$bin/llmworkload" app "$app" --dir "$work/apps" --iterations "$iters" --drop-cache
	# Its loops, from the layout: the model and scratch files, FILE:BLOCKS.
	loops=$("$bin/llmworkload" app "$app" --layout | awk '$2 == "model" || $2 == "scratch" { printf "%s%s:%s", sep, $1, $5; sep = " " }')
	finish "$name" kind=app "engine=llmworkload app $app (the paper's app, real I/O)" access=pread \
		"app=$app" "iterations=$iters" "app_bytes=$(du -sb "$work/apps/$app" | cut -f1)" limit_bytes=max \
		"loops=$loops" \
		"summary=$(tail -n 1 "$work/$name.out")" \
		"command=llmworkload app $app --dir DIR --iterations $iters --drop-cache"
done
echo "corpus: $(du -cb "$out"/*.xz | tail -n 1 | cut -f1) bytes compressed in $out"
