#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Signals at random points, the class "a signal at the wrong moment crashes the daemon or leaves its
# socket": llmcached is started again and again with sessions of a client spilling to a device, and
# sent one to three of SIGTERM, SIGINT and SIGHUP at random moments of start-up, serving and shutdown
# (`timeout` sends two: the old daemon's handler then used the freed server and segfaulted in 13 of 15
# runs). Every run must end by a clean exit (0) within 10 s and leave no socket; a run whose first
# signal came before the handlers were installed may end by that signal, also without a socket.
# bash starts a background command with SIGINT ignored (no job control): an INT before llmcached's
# main() was then lost and the daemon served on (a CI failure, "did not stop within 10 s of INT").
# A daemon started by a service manager or a shell with job control inherits the default action, so
# the test starts it with that (env --default-signal=INT).
set -euo pipefail
bin=${LLMCACHE_BIN:?}
runs=${SIGNAL_RUNS:-30}
work=$(mktemp -d /var/tmp/llmcached-signals-XXXXXX)
pid=
client=
cleanup() {
	[ -n "$client" ] && kill "$client" 2>/dev/null
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: run $run: $*"; cat "$work/log"; exit 1; }
truncate -s 64M "$work/kv.img"
sock=$work/d.sock

# A client that keeps sessions busy: opens, appends (spilling past the small budget), reopens when the
# daemon goes away. It only loads the daemon; its own errors do not matter here.
cat >"$work/client.py" <<'PY'
import fcntl, os, socket, struct, sys, time
path = sys.argv[1]
shape = struct.pack("<8I", 1, 8, 2, 16, 1, 4096, 128, 16)
def call(s, t, payload=b"", fds=()):
    m = struct.pack("<IHHII", 0x4b4c4c4d, 1, t, len(payload), 1) + payload
    socket.send_fds(s, [m], list(fds)) if fds else s.send(m)
    b = s.recv(1 << 16)
    return struct.unpack_from("<iIQ", b, 16)
while True:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(5)
        s.connect(path)
        fd = os.memfd_create("kv", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, 1 << 20)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        st, _, sid = call(s, 1, shape, [fd])
        os.close(fd)
        for _ in range(250):
            call(s, 2, struct.pack("<QII", sid, 0, 16))
        s.close()
    except (OSError, struct.error):
        time.sleep(0.01)
PY
python3 "$work/client.py" "$sock" &
client=$!

signals=(TERM INT HUP)
for run in $(seq "$runs"); do
	: >"$work/log"
	env --default-signal=INT "$bin/llmcached" --config /dev/null --socket "$sock" --kv-device "$work/kv.img" --kv-cpu-budget 64KiB \
		--kv-session-device-bytes 4MiB --kv-page-tokens 16 --kv-recent-tokens 32 >"$work/log" 2>&1 &
	pid=$!
	# Start-up takes milliseconds: the first signal comes at 0-60 ms, the next ones 0-30 ms apart.
	sleep "$(printf 0.%03d $((RANDOM % 60)))"
	sent=()
	for _ in $(seq $((1 + RANDOM % 3))); do
		sig=${signals[RANDOM % 3]}
		kill -s "$sig" "$pid" 2>/dev/null && sent+=("$sig")
		sleep "$(printf 0.%03d $((RANDOM % 30)))"
	done
	rc=
	for _ in $(seq 200); do
		if ! kill -0 "$pid" 2>/dev/null; then
			set +e; wait "$pid"; rc=$?; set -e
			break
		fi
		sleep 0.05
	done
	[ -n "$rc" ] || fail "llmcached did not stop within 10 s of ${sent[*]}"
	pid=
	[ -e "$sock" ] && fail "llmcached left its socket after ${sent[*]} (exit $rc)"
	if [ "$rc" -ne 0 ]; then
		first=$(kill -l "$((rc - 128))" 2>/dev/null || echo "?")
		# Only the first signal, and only before the daemon said anything: it had no handler yet.
		[ "$first" = "${sent[0]}" ] && [ ! -s "$work/log" ] ||
			fail "llmcached exited $rc (signal $first) after ${sent[*]}"
	fi
done
echo "$runs runs with SIGTERM/SIGINT/SIGHUP at random points: every one stopped cleanly"
