#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Hostile clients: the class "one local user stalls or starves the others". While three clients of an
# unprivileged uid (nobody) attack llmcached, a root client keeps asking for STATUS and opening a
# session, and every one of its calls must be answered within 2 s:
#  - a client that sends requests and never reads the replies (the old daemon blocked in sendmsg and
#    froze every client for ever): it must be dropped after kv-client-timeout;
#  - a client that floods requests on as many connections as it can open: it gets at most its share
#    (kv-max-sessions-per-uid + 8 connections);
#  - a client that opens sessions until refused: it holds at most kv-max-sessions-per-uid of them, the
#    refusal names that option, and root can still open one.
set -euo pipefail
bin=${LLMCACHE_BIN:?}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to run the attackers as the unprivileged uid nobody"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is missing"; exit 77; }
# The system's Python: nobody cannot run one installed under root's home (pyenv).
py=/usr/bin/python3
[ -x $py ] || { echo "SKIP: $py is missing"; exit 77; }
work=$(mktemp -d /tmp/llmcached-hostile-XXXXXX)
chmod 755 "$work"
daemon=
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$work/daemon.log" || true; exit 1; }

sock=$work/d.sock
"$bin/llmcached" --config /dev/null --socket "$sock" --kv-device none --kv-max-sessions 8 \
	--kv-max-sessions-per-uid 3 --kv-client-timeout 1s >"$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "llmcached did not create its socket"

cat >"$work/kv.py" <<'PY'
# The protocol of libllmcache/kv/protocol.hpp, enough to attack and to probe.
import fcntl, os, select, socket, struct, sys, time
MAGIC, OPEN, STATUS = 0x4b4c4c4d, 1, 6
def msg(t, payload=b"", seq=1):
    return struct.pack("<IHHII", MAGIC, 1, t, len(payload), seq) + payload
def conn(path, timeout=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(timeout)
    s.connect(path)
    return s
def reply(s):
    b = s.recv(1 << 16)
    if len(b) < 40:
        raise ConnectionError("connection closed")
    status, count, session, text_len = struct.unpack_from("<iIQI", b, 16)
    return status, session, b[40:40 + text_len].decode()
# A shape small enough for any budget: 1 layer, 1 query and 1 KV head of 16, fp16.
OPEN_SHAPE = struct.pack("<8I", 1, 1, 1, 16, 1, 1024, 128, 8)
def open_session(s):
    fd = os.memfd_create("kv", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 1 << 20)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    socket.send_fds(s, [msg(OPEN, OPEN_SHAPE)], [fd])
    os.close(fd)
    return reply(s)

role, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
log = open(out, "w", buffering=1)
if role == "mute":  # sends requests and never reads
    s = conn(path)
    s.setblocking(False)
    sent = 0
    try:
        while sent < 100000:
            s.send(msg(STATUS)); sent += 1
    except BlockingIOError:
        pass
    log.write(f"sent {sent}\n")
    # Still without reading: the daemon's end closing shows as a hang-up.
    p = select.poll()
    p.register(s, select.POLLRDHUP)
    if p.poll(20000):
        log.write("dropped\n")
    time.sleep(60)
elif role == "flood":  # as many connections as it may open, each sending and reading as fast as it can
    conns = []
    try:
        for _ in range(200):
            c = conn(path, 5)
            c.send(msg(STATUS))
            reply(c)
            conns.append(c)
    except (ConnectionError, OSError):
        pass
    log.write(f"connections {len(conns)}\n")
    end = time.time() + 60
    while time.time() < end and conns:
        for c in list(conns):
            try:
                c.send(msg(STATUS)); reply(c)
            except (ConnectionError, OSError):
                conns.remove(c)
elif role == "hog":  # opens sessions until refused and holds them
    held = []
    for _ in range(20):
        c = conn(path, 5)
        st, sid, text = open_session(c)
        if st != 0:
            log.write(f"refused {st} {text}\n")
            break
        held.append(c)
    log.write(f"held {len(held)}\n")
    time.sleep(60)
elif role == "probe":  # root: every call answered within 2 s, for a few seconds
    worst, n, end = 0.0, 0, time.time() + float(sys.argv[4])
    while time.time() < end:
        t = time.time()
        try:
            c = conn(path, 2)
            c.send(msg(STATUS)); st, _, _ = reply(c)
            assert st == 0, st
            c.close()
        except Exception as e:
            log.write(f"probe failed after {time.time() - t:.2f}s: {e!r}\n"); sys.exit(1)
        worst, n = max(worst, time.time() - t), n + 1
        time.sleep(0.02)
    c = conn(path, 2)
    t = time.time()
    st, sid, text = open_session(c)
    worst = max(worst, time.time() - t)
    if st != 0:
        log.write(f"root OPEN refused: {st} {text}\n"); sys.exit(1)
    log.write(f"calls {n + 1} worst {worst:.3f}s\n")
    sys.exit(0 if worst < 2.0 else 1)
PY

attack() { setpriv --reuid=nobody --regid=nogroup --clear-groups $py "$work/kv.py" "$1" "$sock" "$work/$1.out" & pids+=($!); }
touch "$work"/{mute,flood,hog}.out && chmod 666 "$work"/*.out
attack hog
for _ in $(seq 100); do grep -q '^held' "$work/hog.out" && break; kill -0 "${pids[0]}" || break; sleep 0.1; done
attack mute
for _ in $(seq 100); do grep -q '^sent' "$work/mute.out" && break; kill -0 "${pids[1]}" || break; sleep 0.1; done
attack flood
sleep 0.5
$py "$work/kv.py" probe "$sock" "$work/probe.out" 5 || fail "root's calls under attack: $(cat "$work/probe.out")"
cat "$work/probe.out"

grep -q '^held 3$' "$work/hog.out" || fail "the session hog: $(cat "$work/hog.out")"
grep -q 'kv-max-sessions-per-uid' "$work/hog.out" || fail "the refusal does not name the option: $(cat "$work/hog.out")"
conns=$(sed -n 's/^connections //p' "$work/flood.out")
# The uid's share is 3 + 8 = 11 connections; the hog holds 3 of them and the mute client 1.
[ -n "$conns" ] && [ "$conns" -le 7 ] || fail "the flooder opened $conns connections: $(cat "$work/flood.out")"
for _ in $(seq 100); do grep -q '^dropped' "$work/mute.out" && break; sleep 0.1; done
grep -q '^dropped' "$work/mute.out" || fail "the client that never reads was not dropped: $(cat "$work/mute.out")"
grep -q 'dropped the connection of uid 65534 .*has not read its replies' "$work/daemon.log" ||
	fail "no log line for the dropped client"
kill -0 "$daemon" || fail "llmcached died"
echo "hostile clients: root answered within 2 s; the mute client dropped, the flooder and the hog held to their share"
