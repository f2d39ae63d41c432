#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcachectl kv status against a running llmcached: the table and the JSON of an idle daemon, and the
# errors for a missing daemon and a bad action. (Sessions in the listing: tests/unit/test_kv_service.)
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
echo "llmcachectl kv status: ok"
