#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcachectl status --json has one schema for llmcache.ko and llmcached --mode=bpf, the table of
# Documentation/admin-guide.md ("The status schema"). A stand-in for llmcached answers PAGECACHE_STATUS
# with every key the daemon writes (read from libllmcache/pagecache/manager.cpp) and a path holding a
# quote, a backslash, a newline, a space and a percent sign. The JSON must carry exactly the table's keys
# for the daemon, with their types, and the path intact; the module's side prints the name lists of
# tools/llmcachectl/kmod.cpp, which must be the table's keys for the module. loops --json gets the same
# path right, and kv status --json types a session's values (backend a string, beta a fraction).
set -euo pipefail
bin=${LLMCACHE_BIN:?}
src=${LLMCACHE_SRC:?}
[ -e /sys/kernel/llmcache ] && { echo "SKIP: llmcache.ko is loaded: status would read the module"; exit 77; }
work=$(mktemp -d)
fake=
cleanup() { [ -n "$fake" ] && kill "$fake" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

python3 - "$work/d.sock" "$src/libllmcache/pagecache/manager.cpp" <<'PY' &
import os, re, socket, struct, sys
src = open(sys.argv[2]).read()
body = src[src.index("std::string Manager::status("):]
def keys(start, end):
    part = body[body.index(start):body.index(end)]
    return re.findall(r'kv\("(\w+)"', part)
listing = "global mode bpf " + " ".join(f"{k} {i + 1}" for i, k in enumerate(keys('"global mode bpf"', 'out += "stats"')))
listing += " hook_mode bpf-filemap\n"
listing += "stats " + " ".join(f"{k} {i + 1}" for i, k in enumerate(keys('out += "stats"', 'out += "file"'))) + "\n"
listing += "file " + " ".join(f"{k} {i + 1}" for i, k in enumerate(keys('out += "file"', '" path "')))
listing += " path /models/a\"b\\c%0ad%20e%25.gguf\n"
listing += "loop seq 7 file 1 first 16 n 4096 iterations 5 period_ns 2000000 s_min 1654 pinned 100 deficit 1554 stall_ns 30000\n"
listing = listing.encode()
sessions = (b"session 3 uid 0 pid 42 backend emulated tokens 100 cpu_bytes 4096 spilled_pages 2 bytes_written 8192 "
            b"bytes_read 4096 partial_reads 1 selects 5 promoted_pages 1 beta 0.500000\n")
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1] + ".tmp"); s.listen(4); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    h = c.recv(4096)
    kind, seq = struct.unpack_from("<H", h, 6)[0], struct.unpack_from("<I", h, 12)[0]
    text = sessions if kind == 6 else listing
    reply = struct.pack("<iIQII", 0, 0, 0, len(text), 0) + text
    c.send(struct.pack("<IHHII", 0x4b4c4c4d, 1, 0x80, len(reply), seq) + reply)
    c.close()
PY
fake=$!
for _ in $(seq 100); do [ -S "$work/d.sock" ] && break; sleep 0.05; done
"$bin/llmcachectl" status --socket "$work/d.sock" --json >"$work/status.json" || fail "status --json failed"
"$bin/llmcachectl" loops --socket "$work/d.sock" --json >"$work/loops.json" || fail "loops --json failed"
"$bin/llmcachectl" kv status --socket "$work/d.sock" --json >"$work/kv.json" || fail "kv status --json failed"
python3 - "$work/kv.json" <<'PY' || fail "kv status --json: $(cat "$work/kv.json")"
import json, sys
s = json.load(open(sys.argv[1]))["sessions"][0]
assert s["backend"] == "emulated" and s["beta"] == 0.5 and s["session"] == 3 and s["partial_reads"] == 1, s
assert all(type(v) is int for k, v in s.items() if k not in ("backend", "beta")), s
PY
python3 - "$work/status.json" "$work/loops.json" "$src/Documentation/admin-guide.md" "$src/tools/llmcachectl/kmod.cpp" <<'PY' ||
import json, re, sys
status_text, loops_text = open(sys.argv[1]).read(), open(sys.argv[2]).read()
doc, kmod = open(sys.argv[3]).read(), open(sys.argv[4]).read()
path = '/models/a"b\\c\nd e%.gguf'

# The table: key -> (type, side).
section = doc[doc.index("#### The status schema"):]
section = section[:section.index("\n#")]
table = {}
for row in section.splitlines():
    cells = [c.strip() for c in row.split("|")[1:-1]]
    if len(cells) != 4 or cells[0] in ("key", "---"):
        continue
    for key in re.findall(r"`([^`]+)`", cells[0]):
        assert key not in table, f"{key} twice in the table"
        table[key] = (cells[1], cells[3])
assert table and all(side in ("both", "module", "bpf") for _, side in table.values()), table
types = {"number": int, "string": str, "object": dict, "array": list}

# The daemon's side: exactly the table's keys for bpf, with their types.
for text in (status_text, loops_text):
    assert text.endswith("}\n") and text.count("\n") == 1, f"not one line: {text!r}"
assert '/models/a\\"b\\\\c\\nd e%.gguf"' in status_text, status_text
d = json.loads(status_text)
seen = {}
def walk(obj, prefix):
    for k, v in obj.items():
        key = prefix + k
        seen[key] = v
        if isinstance(v, dict):
            walk(v, key + ".")
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for item in v:
                walk(item, key + "[].")
walk(d, "")
want = {k for k, (_, side) in table.items() if side in ("both", "bpf")}
assert set(seen) == want, f"undocumented: {sorted(set(seen) - want)}, missing: {sorted(want - set(seen))}"
for k, v in seen.items():
    t = types[table[k][0]]
    assert isinstance(v, t) and not isinstance(v, bool), f"{k} is {v!r}, not a {table[k][0]}"
assert d["source"] == "llmcached" and d["hook_mode"] == "bpf-filemap", d
assert d["files"][0]["path"] == path, d["files"][0]

# The module's side prints kmod.cpp's name lists: they must be the table's keys for the module.
def names(array):
    m = re.search(r"const char \*const " + array + r"\[\] = \{([^}]*)\}", kmod)
    return re.findall(r'"(\w+)"', m.group(1))
module = {"source", "stats", "sizing", "auto", "kv", "kv.cpu", "kv.storage", "files", "files[].id", "files[].path"}
module |= set(names("top_names"))
for prefix, array in (("stats.", "stat_names"), ("sizing.", "sizing_names"), ("auto.", "auto_names"),
                      ("kv.", "kv_names"), ("kv.cpu.", "kv_pool_names"), ("kv.storage.", "kv_pool_names"),
                      ("files[].", "file_fields")):
    module |= {prefix + n for n in names(array)}
want = {k for k, (_, side) in table.items() if side in ("both", "module")}
assert module == want, f"kmod.cpp only: {sorted(module - want)}, the table only: {sorted(want - module)}"
words = {"source", "hook_mode", "auto.mode", "files[].path"}
for k in module:
    assert (table[k][0] == "string") == (k in words), f"{k}: the table says {table[k][0]}"

loops = json.loads(loops_text)
assert loops["loops"][0]["path"] == path and loops["loops"][0]["stall_ns"] == 30000, loops
PY
	fail "status --json: $(cat "$work/status.json")"
echo "llmcachectl status --json: the documented schema for the daemon, the module's names documented, paths escaped"
