#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The KV trace from the daemon and its replay: llmcached --kv-trace serves a session (kv_fault_client)
# on a device file with a small CPU budget, so that pages spill and come back; llmkvreplay --check
# reproduces every recorded decision, two replays print the same bytes, other budgets replay, and a
# truncated trace, another version and garbage are refused with their line and exit 1.
set -euo pipefail
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
client=$(dirname "$bin")/tests/kv_fault_client
[ -x "$client" ] || { echo "SKIP: $client not built"; exit 77; }
work=$(mktemp -d)
dev=$(mktemp /var/tmp/llmkvreplay-test-XXXXXX)
daemon=
cleanup() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; wait 2>/dev/null; rm -rf "$work" "$dev"; }
trap cleanup EXIT
. "$(dirname "$0")/check.sh"
truncate -s 64M "$dev"

rc=0
out=$("$bin/llmcached" --config /dev/null --socket "$work/x.sock" --kv-trace "$work/no/such/dir/t" 2>&1) || rc=$?
check "--kv-trace into a missing directory: exit 2 (rc $rc)" test $rc -eq 2
check "and says which directory ($out)" grep -q "the directory $work/no/such/dir does not exist" <<<"$out"
check "--help documents --kv-trace" grep -q -- "--kv-trace FILE" <("$bin/llmcached" --help)

"$bin/llmcached" --config /dev/null --socket "$work/d.sock" --kv-device "$dev" --kv-session-device-bytes 32MiB \
	--kv-cpu-budget 2MiB --kv-trace "$work/kv.trace" >"$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$work/d.sock" ] && break; sleep 0.05; done
[ -S "$work/d.sock" ] || { cat "$work/daemon.log"; echo "FAIL: llmcached did not create its socket"; exit 1; }
{
	echo "open a"
	echo "append a 400"
	for step in $(seq 40); do
		echo "append a 1"
		echo "select a 0 96"
		echo "select a 1 96"
	done
	echo "close a"
} | "$client" "$work/d.sock" >"$work/client.out" 2>&1 || true
check "the client's commands succeeded ($(grep -v '^ok' "$work/client.out" | head -2 | tr '\n' ' '))" \
	test -z "$(grep -v '^ok' "$work/client.out")"
kill -TERM "$daemon"
wait "$daemon" || true
daemon=
trace=$work/kv.trace.1
check "the session wrote its trace ($trace)" test -s "$trace"
check "it starts with the version header" test "$(head -1 "$trace")" = "llmcache-kv-trace 1"
check "it recorded spills" grep -q '^v [0-9]' "$trace"
check "and selects" test "$(grep -c '^q ' "$trace")" -eq 80

rc=0
"$bin/llmkvreplay" "$trace" --check >"$work/check.out" 2>&1 || rc=$?
cat "$work/check.out" | sed 's/^/  /'
check "llmkvreplay --check reproduces every decision (rc $rc)" test $rc -eq 0
check "and says so" grep -q "recorded decisions, all reproduced" "$work/check.out"
"$bin/llmkvreplay" "$trace" --cpu-budget 1MiB,2MiB,8MiB --json >"$work/a.json"
"$bin/llmkvreplay" "$trace" --cpu-budget 1MiB,2MiB,8MiB --json >"$work/b.json"
check "two replays print the same bytes" cmp -s "$work/a.json" "$work/b.json"
check "one JSON object per budget" test "$(wc -l <"$work/a.json")" -eq 3
check "the JSON's figures are counts, beta a fraction, select_budget null (the recorded one)" python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    assert type(d["beta"]) in (int, float) and d["select_budget"] is None, d
    assert all(type(v) is int for k, v in d.items() if k not in ("beta", "select_budget")), d
' "$work/a.json"
"$bin/llmkvreplay" "$trace" --decisions "$work/d1" >/dev/null
"$bin/llmkvreplay" "$trace" --decisions "$work/d2" >/dev/null
check "the decisions written twice are the same bytes" cmp -s "$work/d1" "$work/d2"
check "and are the trace's decisions" cmp -s <(grep '^[spv]' "$work/d1") <(grep '^[spv]' "$trace")

bad() { # DESCRIPTION FILE EXPECTED-MESSAGE
	local rc=0 out
	out=$("$bin/llmkvreplay" "$2" 2>&1) || rc=$?
	check "$1: exit 1 (rc $rc)" test $rc -eq 1
	check "$1: '$3' ($out)" grep -qF -- "$3" <<<"$out"
}
head -c $(($(stat -c %s "$trace") - 3)) "$trace" >"$work/truncated"
bad "a truncated trace" "$work/truncated" "truncated (the trace ends inside a line, without its newline)"
sed '1s/ 1$/ 7/' "$trace" >"$work/v7"
bad "version 7" "$work/v7" "line 1: version 7 is not supported (this reader reads version 1)"
head -c 3000 /dev/urandom >"$work/garbage"
bad "garbage" "$work/garbage" "line 1: "
sed '5s/^a /x /' "$trace" >"$work/event"
bad "an unknown event" "$work/event" "line 5: unknown event 'x'"
rc=0
"$bin/llmkvreplay" "$trace" --check --cpu-budget 4MiB >/dev/null 2>&1 || rc=$?
check "--check with a parameter varied: exit 2 (rc $rc)" test $rc -eq 2
[ "$fails" -eq 0 ] || exit 1
echo PASS
