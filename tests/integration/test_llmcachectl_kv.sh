#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcachectl kv status against a running llmcached: the table and the JSON of an idle daemon, and the
# errors for a missing daemon and a bad action, an output that cannot be written, and a daemon that
# never answers (status, kv status and loops all give up within --timeout). (Sessions in the listing:
# tests/unit/test_kv_service.)
set -euo pipefail
bin=${LLMCACHE_BIN:?}
work=$(mktemp -d)
daemon=
cleanup() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bin/llmcached" --config /dev/null --socket "$work/d.sock" --kv-device none >"$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$work/d.sock" ] && break; sleep 0.05; done
[ -S "$work/d.sock" ] || { cat "$work/daemon.log"; fail "llmcached did not create its socket"; }

out=$("$bin/llmcachectl" kv status --socket "$work/d.sock")
[ "$out" = "no KV sessions" ] || fail "idle table: '$out'"
json=$("$bin/llmcachectl" kv status --socket "$work/d.sock" --json)
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d == {"sessions": []}, d' ||
	fail "idle JSON: $json"

set +e
err=$("$bin/llmcachectl" kv status --socket "$work/none.sock" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] || fail "missing daemon: exit $rc"
[[ $err == *"cannot connect to llmcached at $work/none.sock"* ]] || fail "missing daemon message: $err"
set +e
err=$("$bin/llmcachectl" kv stats --socket "$work/d.sock" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || fail "bad action: exit $rc"
[[ $err == *"unknown action 'stats'"* ]] || fail "bad action message: $err"
err=$("$bin/llmcachectl" kv status --socket "$work/d.sock" 2>&1 >/dev/full) && fail "kv status > /dev/full exited 0"
[[ $err == *"cannot write the output"* ]] || fail "kv status > /dev/full: $err"

# A daemon that accepts and never answers: every query gives up within its timeout, saying so (the old
# llmcachectl waited for ever).
python3 - "$work/mute.sock" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1] + ".tmp")
s.listen(8)
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
held, end = [], time.time() + 30
s.settimeout(0.2)
while time.time() < end:
    try: held.append(s.accept())
    except OSError: pass
PY
mute=$!
for _ in $(seq 100); do [ -S "$work/mute.sock" ] && break; sleep 0.05; done
for cmd in "kv status" status loops; do
	start=$(date +%s%N)
	set +e
	err=$(timeout 20 "$bin/llmcachectl" $cmd --socket "$work/mute.sock" --timeout 1s 2>&1); rc=$?
	set -e
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	[ $rc -eq 1 ] || fail "$cmd on a mute daemon: exit $rc ($err)"
	[[ $err == *"did not answer within 1000 ms"* ]] || fail "$cmd on a mute daemon: $err"
	[ $ms -lt 5000 ] || fail "$cmd on a mute daemon took $ms ms"
done
kill $mute
echo "llmcachectl kv status: ok"
