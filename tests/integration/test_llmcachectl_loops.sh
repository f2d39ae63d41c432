#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcachectl loops --json has one schema in both modes, the class "a script that works with the module
# breaks with --mode=bpf": a stand-in for llmcached --mode=bpf answers PAGECACHE_STATUS with a known
# listing, and the JSON must carry exactly the keys that the module's loops --json prints (read from
# tools/llmcachectl/control.cpp, so the two cannot drift apart), with the values of the listing.
set -euo pipefail
bin=${LLMCACHE_BIN:?}
src=${LLMCACHE_SRC:?}
[ -e /sys/kernel/llmcache ] && { echo "SKIP: llmcache.ko is loaded: loops would read the module"; exit 77; }
work=$(mktemp -d)
fake=
cleanup() { [ -n "$fake" ] && kill "$fake" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

python3 - "$work/d.sock" <<'PY' &
import os, socket, struct, sys
listing = ("global mode bpf enable 1 pin_budget 8388608 hot_reserve 0 bw 100000000 t_ns 100000000 hook_mode bpf-filemap registered 1\n"
           "stats accesses 10\n"
           "file id 1 path /models/m.gguf blocks 8192 pinned 100\n"
           "loop seq 7 file 1 first 16 n 4096 iterations 5 period_ns 2000000 s_min 1654 pinned 100 deficit 1554 stall_ns 30000\n"
           "loop seq 0 file 1 first 0 n 8192 iterations 2 period_ns 9000000 s_min 0 pinned 0 deficit 0 stall_ns 18446744073709551615\n").encode()
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1] + ".tmp"); s.listen(4); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    h = c.recv(4096)
    seq = struct.unpack_from("<I", h, 12)[0]
    reply = struct.pack("<iIQII", 0, 0, 0, len(listing), 0) + listing
    c.send(struct.pack("<IHHII", 0x4b4c4c4d, 1, 0x80, len(reply), seq) + reply)
    c.close()
PY
fake=$!
for _ in $(seq 100); do [ -S "$work/d.sock" ] && break; sleep 0.05; done
json=$("$bin/llmcachectl" loops --socket "$work/d.sock" --json)
python3 - "$json" "$src/tools/llmcachectl/control.cpp" <<'PY' || fail "loops --json: $json"
import json, re, sys
d = json.loads(sys.argv[1])
src = open(sys.argv[2]).read()
body = src[src.index("int loops("):src.index("int auto_mode(")]
keys = re.findall(r'\{"(\w+)", ', body)
top = keys[:keys.index("loops") + 1]
per_loop = keys[keys.index("loops") + 1:]
assert list(d) == top, (list(d), top)
assert len(d["loops"]) == 2 and d["total"] == 2, d
for l in d["loops"]:
    assert list(l) == per_loop, (list(l), per_loop)
a, b = d["loops"]
assert (d["bw"], d["t_ns"], d["bw_source"], d["t_source"]) == (100000000, 100000000, "set", "set"), d
assert (a["file_id"], a["path"], a["seq"], a["first_block"], a["blocks"], a["iterations"]) == (1, "/models/m.gguf", 7, 16, 4096, 5), a
assert (a["period_ns"], a["s_min"], a["pinned"], a["deficit"], a["stall_ns"]) == (2000000, 1654, 100, 1554, 30000), a
assert b["stall_ns"] is None and b["blocks"] == 8192, b
PY
echo "llmcachectl loops --json: the module's schema in --mode=bpf too"
