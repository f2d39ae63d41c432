#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make bench, KV soak: clients append to and select from llmcached's sessions for minutes while the daemon
# is stopped and continued (SIGSTOP, SIGCONT) and its storage device runs out of space and comes back,
# then every client checks every token it appended. Reported: the rows checked, the errors the daemon
# gave (expected while the device is full), and what was lost or served wrong (must be nothing). The
# device is a loop device over a sparse file on a tmpfs smaller than the file: while a filler takes the
# tmpfs's room, every write to a part of the file not written before fails (ENOSPC, an I/O error to the
# daemon). That happens while the sessions first fill their regions: a closed session's region goes to
# the next one, whose writes then find room. Each client is tests/kv_fault_client (build/tests), which knows what every row
# must hold. Needs root (tmpfs, loop device).
# Usage: scripts/bench-kv-soak.sh TESTS_DIR BIN_DIR RESULTS_DIR
# Environment: KV_SOAK_SECONDS (120), KV_SOAK_CLIENTS (4).
set -euo pipefail
tests=${1:?usage: bench-kv-soak.sh TESTS_DIR BIN_DIR RESULTS_DIR}
bin=${2:?usage: bench-kv-soak.sh TESTS_DIR BIN_DIR RESULTS_DIR}
out=${3:?usage: bench-kv-soak.sh TESTS_DIR BIN_DIR RESULTS_DIR}/kv-soak
seconds=${KV_SOAK_SECONDS:-120} clients=${KV_SOAK_CLIENTS:-4}
if [ "$(id -u)" -ne 0 ]; then echo "bench-kv-soak: skipped: needs root (tmpfs and a loop device)"; exit 0; fi
mkdir -p "$out"
dir=$(mktemp -d /var/tmp/llmcache-kvsoak.XXXXXX)
loop= daemon= faults=
cleanup() {
	[ -z "$faults" ] || kill "$faults" 2>/dev/null || true
	[ -z "$daemon" ] || { kill -CONT "$daemon" 2>/dev/null; kill "$daemon" 2>/dev/null; } || true
	wait 2>/dev/null || true
	[ -z "$loop" ] || losetup -d "$loop" 2>/dev/null || true
	umount "$dir/fs" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$dir/fs"
mount -t tmpfs -o size=512m tmpfs "$dir/fs"
truncate -s 1G "$dir/fs/device.img"
loop=$(losetup -f --show "$dir/fs/device.img")
sock=$dir/kvd.sock
"$bin/llmcached" --config /dev/null --socket "$sock" --kv-device "$loop" --kv-cpu-budget 1MiB \
	--kv-session-device-bytes 64MiB --kv-max-sessions 8 >"$out/llmcached.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "bench-kv-soak: llmcached did not start:"; cat "$out/llmcached.log"; exit 1; }

# The faults, until killed: the daemon stopped for 2 s every 9 s, the device full for 4 s every 10 s.
(
	trap 'kill -CONT "$daemon" 2>/dev/null; rm -f "$dir/fs/filler"; exit 0' TERM
	t=0
	while sleep 1; do
		t=$((t + 1))
		if [ $((t % 9)) -eq 0 ]; then kill -STOP "$daemon"; sleep 2; kill -CONT "$daemon"; fi
		if [ $((t % 10)) -eq 2 ]; then dd if=/dev/zero of="$dir/fs/filler" bs=1M 2>/dev/null || true; fi
		if [ $((t % 10)) -eq 6 ]; then rm -f "$dir/fs/filler"; fi
	done
) &
faults=$!

# Each client: a session appended to in steps of 32 tokens, a layer selected after each step, every token
# checked every 8 steps and before the session is closed for a new one, at 1536, 3072 and 4096 tokens
# (the client's most) in turn. The next session is opened before the last one is closed, so that it
# takes another region.
client_script() {
	local c=$1 end=$(($(date +%s) + seconds)) s=0 step=0
	echo "open c$c.$s"
	while [ "$(date +%s)" -lt "$end" ]; do
		step=$((step + 1))
		echo "append c$c.$s 32"
		echo "select c$c.$s $((step % 2)) 256"
		[ $((step % 8)) -ne 0 ] || echo "verify c$c.$s"
		if [ "$step" -eq $((s % 3 == 2 ? 128 : 48 * (s % 3 + 1))) ]; then
			echo "verify c$c.$s"
			echo "open c$c.$((s + 1))"
			echo "close c$c.$s"
			s=$((s + 1)) step=0
		fi
		sleep 0.05
	done
	echo "verify c$c.$s"
	echo "close c$c.$s"
}
pids=
for c in $(seq "$clients"); do
	client_script "$c" | "$tests/kv_fault_client" "$sock" >"$out/client$c.out" 2>&1 &
	pids="$pids $!"
done
rc=0
for p in $pids; do wait "$p" || rc=$?; done
kill "$faults"; wait "$faults" 2>/dev/null || true
faults=
# After the faults: one more session per client, appended to and checked, with the device back and the daemon up.
for c in $(seq "$clients"); do
	printf 'open c%s.check\nappend c%s.check 64\nverify c%s.check\nclose c%s.check\n' "$c" "$c" "$c" "$c" |
		"$tests/kv_fault_client" "$sock" >"$out/check$c.out" 2>&1 || rc=$?
	grep -q '^ok 128 tokens checked' "$out/check$c.out" || { echo "bench-kv-soak: after the faults: $(cat "$out/check$c.out")"; rc=1; }
done
alive=yes
kill -0 "$daemon" 2>/dev/null || alive=no
kill -TERM "$daemon"
drc=0
wait "$daemon" || drc=$?
daemon=

checked=0 bad=0
for c in $(seq "$clients"); do
	f=$out/client$c.out
	checked=$((checked + $(awk '/^ok [0-9]+ tokens checked/ { n += $2 } END { print n + 0 }' "$f")))
	bad=$((bad + $(grep -c '^BAD' "$f" || true)))
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)"
echo "KV soak: $clients clients for $seconds s; llmcached stopped 2 s in 9, its device full 4 s in 10"
echo "replies: $(cat "$out"/client*.out | awk '{ print $1 }' | sort | uniq -c | awk '{ printf "%s %s, ", $2, $1 }')"
echo "errors by cause: $(cat "$out"/client*.out | awk '$1 == "err" { print $2 }' | sort | uniq -c |
	awk '{ printf "%s x%s, ", $2, $1 }')"
echo "token rows checked: $checked; served wrong or missing (BAD): $bad; daemon alive at the end: $alive," \
	"exit status on SIGTERM: $drc"
[ "$bad" -eq 0 ] && [ "$alive" = yes ] && [ "$drc" -eq 0 ] && [ "$rc" -eq 0 ] ||
	{ echo "bench-kv-soak: FAILED (logs in $out)"; exit 1; }
echo "lost or corrupt: nothing"
