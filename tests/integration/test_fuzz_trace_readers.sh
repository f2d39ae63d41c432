#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fuzz the four trace readers (native, strace, csv, oracleGeneral) and format detection briefly with
# libFuzzer (ASan + UBSan), with a 256 MiB limit on any one allocation and 1 GiB of RSS: a reader that
# believes what a record claims and allocates for it fails here, as does one that returns a record
# outside the bounds of trace.hpp or crashes. Seeded with the inputs of issue 19 (a native record of
# 2^32-1 blocks, a CSV line with a huge count, random bytes, zeros, a record whose blocks wrap) and a
# well-formed trace of each format.
set -euo pipefail
src=${LLMCACHE_SRC:?}
seconds=${FUZZ_SECONDS:-9} # per reader: five runs stay under a minute
command -v clang++ >/dev/null || { echo "SKIP: clang++ is missing (make deps installs clang)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

flags=(-std=c++20 -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
	-I"$src/libllmcache" -I"$src")
objs=()
for f in "$src"/libllmcache/trace/*.cpp; do
	o="$work/$(basename "$f" .cpp).o"
	clang++ "${flags[@]}" -c "$f" -o "$o" &
	objs+=("$o")
done
wait

python3 - "$work/seeds" <<'PY'
import os, random, struct, sys
d = sys.argv[1]
for sub in ("native", "strace", "csv", "oracleGeneral", "auto"):
    os.makedirs(f"{d}/{sub}")
def put(sub, name, data):
    with open(f"{d}/{sub}/{name}", "wb") as f:
        f.write(data)
hdr = b"LLMTRACE" + struct.pack("<IIIIQ", 1, 96, 40, 0, 0) + b"seed".ljust(64, b"\0")
def rec(t, ino, first, nr, op=0, pid=1, dev=1):
    return struct.pack("<QQQIIIB3x", t, ino, first, pid, dev, nr, op)
path = rec(0, 5, 0, 9, op=3) + b"/m/w.bin\0" + b"\0" * 7
native = {
    "ok": hdr + path + rec(1, 5, 0, 8) + rec(2, 5, 8, 8, op=2) + rec(3, 6, 0, 1, op=1),
    "claims": hdr + rec(1, 5, 0, 0xFFFFFFFF),
    "wrap": hdr + rec(1, 5, 2**64 - 2, 10),
}
csv_head = b"time_ns,pid,dev,inode,first_block,nr_blocks,op,path\n"
csv = {
    "ok": csv_head + b'1,1,1,5,0,8,read,/m/w.bin\n2,1,1,6,3,1,write,"/m/a,b"\n# flags: WRITES_UNSEEN\n',
    "huge": csv_head + b"1,1,1,1,0,4000000000,read,/x\n",
    "quote": csv_head + b'1,1,1,1,0,1,read,"/never\n',
}
strace = {
    "ok": b'700 15:00:00.000001 openat(AT_FDCWD, "/m/w.bin", O_RDONLY) = 3</m/w.bin>\n'
          b'700 15:00:00.000002 read(3</m/w.bin>, "x", 4096) = 4096\n'
          b'700 15:00:00.000003 pread64(3</m/w.bin>, "x", 8192, 65536) = 8192\n'
          b'700 15:00:00.000004 mmap(NULL, 4096, PROT_READ, MAP_SHARED, 3</m/w.bin>, 0) = 0x7f0000000000\n'
          b'700 15:00:00.000005 clone(child_stack=NULL, flags=CLONE_CHILD_SETTID|SIGCHLD) = 701\n'
          b'701 15:00:00.000006 read(3</m/w.bin>, "x", 100) = 100\n',
    "huge": b'1 read(3</m/w.bin>, "x", 1099511627776) = 1099511627776\n',
    "fd": b'1 openat(AT_FDCWD, "/m/w.bin", O_RDONLY) = 1000000\n',
}
oracle = {
    "ok": struct.pack("<IQIq", 1, 0, 4096, 2) + struct.pack("<IQIq", 1, 1, 4096, -1) + struct.pack("<IQIq", 2, 0, 4096, -1),
    "big": struct.pack("<IQIq", 1, 0, 0xFFFFFFFF, -1),
}
random.seed(19)
rnd = bytes(random.getrandbits(8) for _ in range(2400))
for name, data in native.items():
    put("native", name, data); put("auto", "native-" + name, data)
for name, data in csv.items():
    put("csv", name, data); put("auto", "csv-" + name, data)
for name, data in strace.items():
    put("strace", name, data); put("auto", "strace-" + name, data)
for name, data in oracle.items():
    put("oracleGeneral", name, data); put("auto", "oracle-" + name, data)
for sub in ("native", "strace", "csv", "oracleGeneral", "auto"):
    put(sub, "random", rnd)
    put(sub, "zeros", bytes(4096))
PY

clang++ "${flags[@]/fuzzer-no-link/fuzzer}" "$src/tests/fuzz/fuzz_trace_reader.cpp" "${objs[@]}" -o "$work/fuzz"
total=0
for format in native strace csv oracleGeneral auto; do
	# libFuzzer exits 77 on a crash by default, which ctest would count as a skip.
	FUZZ_TRACE_FORMAT=$format "$work/fuzz" -error_exitcode=1 -max_total_time="$seconds" -max_len=8192 -malloc_limit_mb=256 \
		-rss_limit_mb=1024 -print_final_stats=1 "$work/seeds/$format" >"$work/log" 2>&1 ||
		{ tail -n 40 "$work/log"; echo "FAIL: the $format reader"; exit 1; }
	runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$work/log" | grep -oE '[0-9]+$' || echo 0)
	echo "fuzzed the $format reader for ${seconds}s: $runs inputs, no crash"
	total=$((total + runs))
done
[ "$total" -gt 0 ] || { echo "FAIL: the fuzzers ran no input"; exit 1; }
