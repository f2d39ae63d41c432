#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcached's start-up checks, the class "accepted at start-up, fails later (or silently)": every
# option out of its range is refused before serving with a message that names the option and its range;
# a KV device that cannot take the spills (a directory, not writable, immutable) is refused at start-up;
# --socket never removes a file that is not a socket; --mode=bpf checks its own options by name and range
# and refuses a --pid that names no process and a --cgroup that is no cgroup, by llmcached's own option
# names.
set -euo pipefail
bin=${LLMCACHE_BIN:?}
work=$(mktemp -d /var/tmp/llmcached-options-XXXXXX)
chmod 755 "$work"
cleanup() { chattr -i "$work/immutable.img" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# refused EXIT WANT ARGS...: llmcached must exit EXIT before serving, its message containing WANT.
refused() {
	local code=$1 want=$2; shift 2
	local err rc=0
	err=$(timeout 10 "$bin/llmcached" --config /dev/null --socket "$work/d.sock" "$@" 2>&1) || rc=$?
	if [ $rc -ne "$code" ]; then
		fail "llmcached $*: exit $rc, not $code: $err"
	elif [[ $err != *"$want"* ]]; then
		fail "llmcached $*: '$err' does not say '$want'"
	elif [[ $err == *serving* ]]; then
		fail "llmcached $*: printed 'serving' before refusing"
	fi
}

# Numeric options: zero, too large, negative, not a number.
refused 2 "--kv-page-tokens 0: must be a whole number from 1 to 4096" --kv-page-tokens 0
refused 2 "--kv-score-block 0: must be a whole number from 1 to 1024" --kv-score-block 0
refused 2 "--kv-queue-depth 0: must be a whole number from 1 to 4096" --kv-queue-depth 0
refused 2 "--kv-queue-depth 100000: must be a whole number from 1 to 4096" --kv-queue-depth 100000
refused 2 "--kv-max-sessions 0: must be a whole number from 1 to 4096" --kv-max-sessions 0
refused 2 "--kv-max-sessions -1: must be" --kv-max-sessions -1
refused 2 "--kv-max-sessions-per-uid 0: must be" --kv-max-sessions-per-uid 0
refused 2 "--kv-sink-tokens 100000: must be a whole number from 0 to 4096" --kv-sink-tokens 100000
refused 2 "--kv-recent-tokens 1e9: must be" --kv-recent-tokens 1e9
refused 2 "--emu-bandwidth 0: must be more than 0" --emu-bandwidth 0
refused 2 "--emu-compute" --emu-compute 0
refused 2 "--kv-cpu-budget 0: must be from 4KiB to 1TiB" --kv-cpu-budget 0
refused 2 "--kv-session-device-bytes 5000: must be a multiple of 4KiB" --kv-session-device-bytes 5000
refused 2 "--kv-beta" --kv-beta -3
refused 2 "--kv-client-timeout 0s: must be from 10ms to 1h" --kv-client-timeout 0s
refused 2 "--kv-client-timeout soon" --kv-client-timeout soon
# The kernel binary is read at each session's open: a wrong one failed every session later.
refused 2 "--kv-xclbin $work/none.xclbin: No such file or directory" --kv-xclbin "$work/none.xclbin"
refused 2 "--kv-xclbin $work: not a regular file" --kv-xclbin "$work"
# The same names and ranges from the config file.
printf 'kv-page-tokens = 0\n' >"$work/bad.conf"
err=$("$bin/llmcached" --config "$work/bad.conf" --socket "$work/d.sock" 2>&1) && fail "bad config file accepted"
[[ $err == *"--kv-page-tokens 0: must be"* ]] || fail "bad config file: '$err'"
# A config file's own errors name it; a directory is no config file (it was read as an empty one).
printf 'bogus = 1\n' >"$work/unknown.conf"
err=$("$bin/llmcached" --config "$work/unknown.conf" --socket "$work/d.sock" 2>&1) && fail "unknown config option accepted"
[[ $err == *"the config file $work/unknown.conf: unrecognised option 'bogus'"* ]] || fail "unknown config option: '$err'"
err=$(timeout 5 "$bin/llmcached" --config "$work" --socket "$work/d.sock" 2>&1) && fail "a directory as the config file started"
[[ $err == *"the config file $work is a directory"* ]] || fail "config file directory: '$err'"

# KV devices that cannot take a spill.
refused 1 "is a directory" --kv-device "$work"
truncate -s 16M "$work/kv.img"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	chmod 644 "$work/kv.img" # root's, read-only to nobody
	err=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$bin/llmcached" --config /dev/null \
		--socket "$work/d.sock" --kv-device "$work/kv.img" 2>&1) && fail "a read-only device was accepted"
	[[ $err == *"is not writable"* ]] || fail "read-only device: '$err'"
fi
truncate -s 16M "$work/immutable.img"
if chattr +i "$work/immutable.img" 2>/dev/null; then
	refused 1 "is not writable (Operation not permitted)" --kv-device "$work/immutable.img"
	chattr -i "$work/immutable.img"
else
	echo "note: chattr +i is not available here; the immutable device is not tested"
fi

# --socket: a regular file there is somebody's data, not a leftover socket.
echo "precious" >"$work/file"
err=$("$bin/llmcached" --config /dev/null --socket "$work/file" 2>&1) && fail "--socket over a regular file started"
[[ $err == *"exists and is not a socket"* ]] || fail "--socket over a file: '$err'"
[ "$(cat "$work/file")" = precious ] || fail "--socket removed or changed the regular file"

# A device smaller than max sessions x region: said at start-up, not as 'raise kv-max-sessions' later.
"$bin/llmcached" --config /dev/null --socket "$work/d.sock" --kv-device "$work/kv.img" \
	--kv-session-device-bytes 8MiB >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q serving "$work/log" && break; sleep 0.05; done
kill $pid; wait $pid || fail "llmcached did not stop cleanly: $(cat "$work/log")"
grep -q "holds 2 session regions of 8.0 MiB: at most 2 sessions at once" "$work/log" || fail "regions note: $(cat "$work/log")"

# --mode=bpf: its options by name and range (exit 2; they were "bad option: '1EiB' ...", accepted --bw 0
# and a BW*T that wraps, and said "is BPF enabled?" for a ring of 1 TiB), and its targets.
truncate -s 1M "$work/model.bin"
bpf=(--mode=bpf --manage "$work/model.bin")
refused 2 "--pin-budget 1EiB: '1EiB' has an unknown unit" "${bpf[@]}" --pin-budget 1EiB
refused 2 "--memcg-headroom x: 'x' is not a size" "${bpf[@]}" --memcg-headroom x
refused 2 "--ring-size 1TiB: '1TiB' is not a power of two from 4KiB to 2GiB" "${bpf[@]}" --ring-size 1TiB
refused 2 "--bw 0: must be at least one 4 KiB block per second" "${bpf[@]}" --bw 0
refused 2 "--bw 1TB/s x --t 76s is beyond what the sizing rule computes exactly" "${bpf[@]}" --bw 1TB/s --t 76s
refused 2 "--scan-idle 1h: '1h' has an unknown unit" "${bpf[@]}" --scan-idle 1h
refused 2 "--hooks bogus: use auto, filemap or syscalls" "${bpf[@]}" --hooks bogus
refused 2 "--pid -5: '-5' is not a process id (a whole number from 1 to 4194304)" --mode=bpf --pid -5
refused 1 "--pid 999999: no such process" --mode=bpf --pid 999999
refused 1 "--cgroup $work: not a cgroup v2 directory" --mode=bpf --cgroup "$work"

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "llmcached options: every bad option and device refused at start-up, by name"
