#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fuzz llmcached's protocol parser briefly with libFuzzer (ASan + UBSan), from seeds of every message
# type. A crash, a sanitizer report or an abort in the target fails the test.
set -euo pipefail
src=${LLMCACHE_SRC:?}
seconds=${FUZZ_SECONDS:-20}
command -v clang++ >/dev/null || { echo "SKIP: clang++ is missing (make deps installs clang)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-I"$src/libllmcache" -I"$src" \
	"$src/tests/fuzz/fuzz_kv_protocol.cpp" "$src/libllmcache/kv/protocol.cpp" -o "$work/fuzz"

# Seeds: a well-formed header for each type with its payload size of zeros, little-endian; and an OPEN
# whose q_heads x head_dim x 4 wrapped around 64 bits in ShmLayout::of (found by this test).
mkdir "$work/corpus"
base64 -d >"$work/corpus/open-q-overflow" <<<"TUxMSwEAAQAgAAAABwAAAAIAAAAIAACAAgAAAMD/////AAkAAABMSwEAAAAQAAAA"
python3 - "$work/corpus" <<'PY'
import struct, sys
sizes = {1: 32, 2: 16, 3: 16, 4: 8, 5: 8, 6: 0, 7: 16, 8: 8}
for t, n in sizes.items():
    payload = bytearray(n)
    if t == 1:
        payload = bytearray(struct.pack("<8I", 2, 8, 2, 64, 1, 4096, 256, 16))
    with open(f"{sys.argv[1]}/type{t}", "wb") as f:
        f.write(struct.pack("<IHHII", 0x4b4c4c4d, 1, t, n, 7) + payload)
PY
# libFuzzer exits 77 on a crash by default, which ctest would count as a skip.
"$work/fuzz" -error_exitcode=1 -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$work/corpus" 2>&1 | tail -n 12
echo "fuzzed the KV protocol parser for ${seconds}s: no crash"
