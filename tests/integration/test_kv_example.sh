#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The engine-side example against an installed libllmcache-kv: `cmake --install` of this build into a
# scratch root (DESTDIR, prefix /usr) puts the shared library (soname libllmcache-kv.so.0, only the
# llmcache_kv_* symbols exported), the header and llmcache-kv.pc there; examples/kv_client.c is built
# with `cc $(pkg-config --cflags --libs llmcache-kv)` against that root (PKG_CONFIG_SYSROOT_DIR) and run
# against the llmcached of the same root, started here: it must append, select the planted important
# tokens with the right V rows, and close; without a daemon it must say why and exit 1.
set -euo pipefail
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
src=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
build=$(dirname "$bin")
for tool in cc pkg-config readelf; do
	command -v $tool >/dev/null || { echo "SKIP: $tool not found (make deps)"; exit 77; }
done
work=$(mktemp -d)
daemon=
cleanup() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
. "$(dirname "$0")/check.sh"

root=$work/root
DESTDIR=$root cmake --install "$build" --prefix /usr >"$work/install.log" 2>&1 || {
	cat "$work/install.log"; echo "FAIL: cmake --install"; exit 1; }
pc=$(find "$root" -name llmcache-kv.pc -path '*/pkgconfig/*')
lib=$(find "$root" -name 'libllmcache-kv.so.0' -path '*/lib*')
check "llmcache-kv.pc installed" test -n "$pc"
check "libllmcache-kv.so.0 installed" test -n "$lib"
[ -n "$pc" ] && [ -n "$lib" ] || exit 1
libdir=$(dirname "$lib")
check "header installed as llmcache/llmcache_kv.h" test -f "$root/usr/include/llmcache/llmcache_kv.h"
check "libllmcache-kv.so links to the soname" test "$(readlink "$libdir/libllmcache-kv.so")" = libllmcache-kv.so.0
check "the library's soname is libllmcache-kv.so.0" \
	grep -q 'SONAME.*\[libllmcache-kv\.so\.0\]' <(readelf -d "$lib")
exported=$(readelf --dyn-syms -W "$lib" | awk '$5 == "GLOBAL" && $7 != "UND" && $7 != "ABS" {sub(/@.*/, "", $8); print $8}' | sort -u)
check "it exports the C API (llmcache_kv_open, _select, _close)" \
	test -n "$(grep -x llmcache_kv_open <<<"$exported")" -a -n "$(grep -x llmcache_kv_select <<<"$exported")" \
	-a -n "$(grep -x llmcache_kv_close <<<"$exported")"
check "it exports nothing else ($(grep -v '^llmcache_kv_' <<<"$exported" | head -3 | tr '\n' ' '))" \
	test -z "$(grep -v '^llmcache_kv_' <<<"$exported")"
check "llmcache-kv.pc has the install prefix (/usr)" grep -qx 'prefix=/usr' "$pc"
check "llmcache-kv.pc has the project's version" grep -qx "Version: $(cat "$src/VERSION")" "$pc"
check "the installed unit starts /usr/sbin/llmcached" \
	grep -q '^ExecStart=/usr/sbin/llmcached ' "$root/usr/lib/systemd/system/llmcached.service"

# What an engine developer types, against the scratch root instead of /.
export PKG_CONFIG_LIBDIR=$(dirname "$pc") PKG_CONFIG_PATH= PKG_CONFIG_SYSROOT_DIR=$root
flags=$(pkg-config --cflags --libs llmcache-kv)
check "pkg-config points into the scratch root ($flags)" grep -q -- "-L$root/usr/lib" <<<"$flags"
cc -std=c11 -Wall -Wextra -Werror -o "$work/kv_client" "$src/examples/kv_client.c" $flags ||
	{ echo "FAIL: examples/kv_client.c does not build against the install"; exit 1; }
check "kv_client needs libllmcache-kv.so.0" grep -q 'NEEDED.*\[libllmcache-kv\.so\.0\]' <(readelf -d "$work/kv_client")

"$root/usr/sbin/llmcached" --config /dev/null --socket "$work/d.sock" --kv-device none >"$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$work/d.sock" ] && break; sleep 0.05; done
[ -S "$work/d.sock" ] || { cat "$work/daemon.log"; echo "FAIL: llmcached did not create its socket"; exit 1; }
check "the socket was linked into place from a listening one, with no temporary name left beside it" \
	test -z "$(find "$work" -maxdepth 1 -name 'd.sock.*')"

rc=0
out=$(LD_LIBRARY_PATH=$libdir "$work/kv_client" "$work/d.sock" 2>&1) || rc=$?
echo "$out" | sed 's/^/  kv_client: /'
check "kv_client exits 0 against llmcached (rc $rc)" test $rc -eq 0
check "it opened a session" grep -qE '^session [0-9]+ open: 2 layers, 2 KV heads x 64$' <<<"$out"
check "it appended the prompt" grep -qx 'appended 256 tokens to each of 2 layers' <<<"$out"
for layer in 0 1; do
	check "layer $layer: 96 tokens from the sink to the last, the 4 important ones, V rows intact" \
		grep -qx "layer $layer: selected 96 tokens (positions 0..255), important tokens 4/4, V rows match" <<<"$out"
done
check "it closed the session" grep -qx 'session closed: ok' <<<"$out"

rc=0
out=$(LD_LIBRARY_PATH=$libdir "$work/kv_client" "$work/none.sock" 2>&1) || rc=$?
check "without a daemon it exits 1 (rc $rc)" test $rc -eq 1
check "and says why ($out)" grep -q "llmcache_kv_open failed" <<<"$out"
rc=0
out=$(LD_LIBRARY_PATH=$libdir "$work/kv_client" a b 2>&1) || rc=$?
check "a stray argument: usage, exit 2 (rc $rc)" test $rc -eq 2 -a -n "$(grep usage: <<<"$out")"

# A client that connects the moment the socket file appears, as a script waiting for it or a service
# started right after the daemon does, is never refused: the file is linked into place only once it
# listens. 300 starts (before the fix, about 3 in 100 were refused between bind() and listen()).
refused=$(python3 - "$root/usr/sbin/llmcached" "$work" <<'EOF'
import os, socket, subprocess, sys, time
daemon, work = sys.argv[1], sys.argv[2]
refused = 0
for i in range(300):
    path = f"{work}/race{i}.sock"
    p = subprocess.Popen([daemon, "--config", "/dev/null", "--socket", path, "--kv-device", "none"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(path) and time.monotonic() < deadline and p.poll() is None:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
    except OSError:
        refused += 1
    s.close()
    p.terminate()
    p.wait()
print(refused)
EOF
)
check "300 clients connecting as the socket appears: none refused ($refused)" test "$refused" = 0
[ "$fails" -eq 0 ] || exit 1
echo PASS
