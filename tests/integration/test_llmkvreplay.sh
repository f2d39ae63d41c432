#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The KV trace from the daemon and its replay: llmcached --kv-trace serves a session (kv_fault_client)
# on a device file with a small CPU budget, so that pages spill and come back; llmkvreplay --check
# reproduces every recorded decision, two replays print the same bytes, other budgets replay, and a
# truncated trace, another version and garbage are refused with their line and exit 1.
# AERP: kv_fault_client opens plain sessions only, and llmcached does not trace AERP sessions, so the
# AERP replay runs here on a small hand-written trace whose decisions were worked out by hand from
# Kelle's rules (test_kv_replay records real ones from a KvStore): --check reproduces them, the figures
# are the hand-counted ones, an altered eviction and a malformed line exit 1 naming their line.
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
for bad in "--sink-tokens=-1" "--recent-tokens=1e3" "--select-budget=4294967296" "--page-tokens=x"; do
	rc=0
	out=$("$bin/llmkvreplay" "$trace" "$bad" 2>&1) || rc=$?
	check "$bad: exit 2 (rc $rc)" test $rc -eq 2
	check "$bad: says what it wants ($out)" grep -q "'${bad#*=}': give a number of tokens, a whole number from 0 to 4294967295" <<<"$out"
done
# One layer, one head of one dimension, budget 2 (sink 1, recent 1), d_model 1 (a token kept by its
# head stores x), the memory read past 1 token: tokens 1 and 2 are evicted as they leave the window.
cat >"$work/aerp.trace" <<'EOF'
llmcache-kv-trace 1
shape layers=1 q_heads=1 kv_heads=1 head_dim=1 dtype=0 max_context=64
policy page_tokens=32 sink_tokens=1 recent_tokens=1 cpu_budget=268435456 beta=0 device=0 estimator=exact aerp_budget=2 d_model=1 memory=1 route_threshold=1
i 0 1
l 0 10 1 0.5
s 0 0
i 0 1
f 0 0 x
l 0 10 2 0.5 0.25
s 0 0 1
a 0 1
f 0 1 kv
e 0 1:0
l 0 10 2 1 2
s 0 0 2
a 0 1
f 0 2 kv
e 0 2:0
l 0 10 2 0 0
s 0 0 3
EOF
rc=0
"$bin/llmkvreplay" "$work/aerp.trace" --check >"$work/aerp.out" 2>&1 || rc=$?
sed 's/^/  /' "$work/aerp.out"
check "AERP: llmkvreplay --check reproduces the 9 decisions (rc $rc)" grep -q "check: 9 recorded decisions, all reproduced" "$work/aerp.out"
"$bin/llmkvreplay" "$work/aerp.trace" --json >"$work/aerp.json"
check "AERP: the hand-counted figures" python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read())
want = dict(evicted_pairs=2, evicted_tokens=2, retained_tokens=2, x_tokens=1, decided_x=1, decided_kv=2, bytes_stored=12,
            memory_folded=2, memory_reads=3, memory_short=1, recomputed=3, selected_tokens=7)
assert all(d[k] == v for k, v in want.items()), d
' "$work/aerp.json"
"$bin/llmkvreplay" "$work/aerp.trace" --select-budget 1 --json >"$work/aerp1.json"
"$bin/llmkvreplay" "$work/aerp.trace" --select-budget 1 --json >"$work/aerp2.json"
check "AERP: two replays print the same bytes" cmp -s "$work/aerp1.json" "$work/aerp2.json"
sed '13s/1:0/1:0 3:0/' "$work/aerp.trace" >"$work/aerp-altered"
rc=0
out=$("$bin/llmkvreplay" "$work/aerp-altered" --check 2>&1) || rc=$?
check "AERP: an altered eviction: exit 1 (rc $rc)" test $rc -eq 1
check "AERP: and its line ($out)" grep -qF "(trace line 13): recorded 'e 0 1:0 3:0', replayed 'e 0 1:0'" <<<"$out"
sed '12s/kv$/y/' "$work/aerp.trace" >"$work/aerp-bad"
bad "AERP: a malformed format line" "$work/aerp-bad" "line 12: expected 'f LAYER POS x|kv'"
rc=0
"$bin/llmkvreplay" "$work/aerp.trace" --cpu-budget 4MiB >/dev/null 2>&1 || rc=$?
check "AERP: a parameter other than --select-budget: exit 1 (rc $rc)" test $rc -eq 1
[ "$fails" -eq 0 ] || exit 1
echo PASS
