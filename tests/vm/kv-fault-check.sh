#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Storage faults under llmcached's KV service, run as root inside the VM (tests/vm/run.sh) with
# $LLMCACHE_BIN and $LLMCACHE_SCRATCH set. The KV device is a device-mapper node, /dev/mapper/kvfault,
# over a loop device on a file of the scratch disk; its table is switched under the running daemon
# (dmsetup suspend / load / resume) to inject faults:
#   flakey error_writes     every write fails (a spill), reads work
#   delay, then error       the device fails while a spill batch, or a restore, is in flight
#   flakey corrupt_bio_byte every read comes back with a byte changed
#   flakey drop_writes      writes "succeed" without reaching the medium (a lying device)
#   remove --force          the device disappears (its table becomes error, the node goes once closed)
#   suspend                 the device stalls: I/O waits, neither done nor failed, until resumed
# A scripted client (build/tests/kv_fault_client) holds sessions A and C, which spill, and B, which
# stays in the CPU pool, and checks every row the daemon returns against what it appended. Asserted:
# no row is ever wrong (a failed restore is an error naming the device and the cause, never data); the
# daemon stays up and keeps serving B and the resident part of A and C; every token stored while its
# spill failed is still served once the device works again (past a session's memory limit tokens are
# refused, not stored, and the client counts only what was stored); the daemon's log names the device and the
# error; while A's restore waits on a stalled device, a second client's session (in memory, on its own
# region of the same device), STATUS and new connections are each answered within
# $KV_STALL_BOUND_MS, and A, whose request waits longer than the daemon's client timeout, is answered
# right once the device resumes; SIGTERM (twice) with that request held still stops the daemon, after
# its 5 s wait for the session. Runs once with the `none` backend (the device disappears mid-spill) and once with `emulated`
# (it disappears mid-restore).
set -u
b=$LLMCACHE_BIN
client=$(dirname "$b")/tests/kv_fault_client
work=$LLMCACHE_SCRATCH/kvfault
name=kvfault
node=/dev/mapper/$name
sock=$work/kvd.sock
log=$work/kvd.log
img_mib=320
sectors=$((img_mib * 2048))
daemon= client_pid= client2_pid= loop= sent=
# How long a request of a session whose device is healthy may take while another session's device
# stalls, as the client measures it (its own checks included), under TCG beside other VMs.
stall_bound_ms=${KV_STALL_BOUND_MS:-1000}

fail() {
	echo "FAIL: $*"
	echo "---- llmcached log ----"
	cat "$log" 2>/dev/null
	dmsetup resume "$name" 2>/dev/null # a stall phase may have left it suspended
	[ -n "$client_pid" ] && kill "$client_pid" 2>/dev/null
	[ -n "$client2_pid" ] && kill "$client2_pid" 2>/dev/null
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null
	exit 1
}
note() { echo "  $*"; }
phase() { echo "-- $* [${SECONDS}s]"; }

# The client: commands through one fifo, answers through another.
start_client() {
	rm -f "$work/cmd" "$work/out"
	mkfifo "$work/cmd" "$work/out" || fail "mkfifo"
	"$client" "$sock" <"$work/cmd" >"$work/out" 2>"$work/client.err" &
	client_pid=$!
	exec 3>"$work/cmd" 4<"$work/out"
}
stop_client() {
	exec 3>&- 4<&-
	wait "$client_pid" || fail "the client exited $?: $(cat "$work/client.err")"
	client_pid=
}
send() { echo "$*" >&3; sent=$*; }
# The answer to the last command sent, in $reply. A BAD answer (wrong data served) fails at once.
recv() {
	reply=
	read -r -t 120 reply <&4 || fail "no answer to '$sent' within 120 s (daemon hung?)"
	note "$sent -> $(cut -c1-240 <<<"$reply")"
	case $reply in BAD*) fail "wrong data served for '$sent': $reply" ;; esac
	alive
}
ask() { send "$@"; recv; }
ok() { ask "$@"; case $reply in ok*) ;; *) fail "'$*' failed: $reply" ;; esac; }
# err PATTERN COMMAND...: the command must fail with an answer matching the extended regex PATTERN.
err() {
	local pat=$1
	shift
	ask "$@"
	case $reply in err*) ;; *) fail "'$*' should have failed: $reply" ;; esac
	grep -Eq -- "$pat" <<<"$reply" || fail "'$*' failed without naming /$pat/: $reply"
}
# A second client (fds 5 and 6), whose session must not wait for the first client's device.
start_client2() {
	rm -f "$work/cmd2" "$work/out2"
	mkfifo "$work/cmd2" "$work/out2" || fail "mkfifo"
	"$client" "$sock" <"$work/cmd2" >"$work/out2" 2>"$work/client2.err" &
	client2_pid=$!
	exec 5>"$work/cmd2" 6<"$work/out2"
}
stop_client2() {
	exec 5>&- 6<&-
	wait "$client2_pid" || fail "the second client exited $?: $(cat "$work/client2.err")"
	client2_pid=
}
# quick COMMAND...: a command of the second client; it must succeed within $stall_bound_ms.
quick() {
	local ms
	echo "$*" >&5
	reply=
	read -r -t 10 reply <&6 || fail "(second client) no answer to '$*' within 10 s: another session's stalled device blocks it"
	ms=${reply##*[}
	ms=${ms%% ms]}
	note "(second client) $* -> $(cut -c1-160 <<<"${reply% \[*}") [$ms ms]"
	case $reply in ok*) ;; *) fail "(second client) '$*' failed: $reply" ;; esac
	[ "$ms" -le "$stall_bound_ms" ] ||
		fail "(second client) '$*' took $ms ms while another session's device stalled (bound $stall_bound_ms ms)"
	alive
}
# Fails if the first client has an answer waiting: its request should still be held by the device.
still_waiting() {
	read -r -t 0 <&4 && fail "'$sent' was answered while its device was suspended: $(head -n 1 <&4)"
	return 0
}
alive() { kill -0 "$daemon" 2>/dev/null || fail "llmcached died (during '$sent')"; }
# A session's counter from the daemon's STATUS listing into $value: counter SESSION_ID FIELD
counter() {
	ok status
	value=$(sed -n "s/.*session $1 uid [^;]* $2 \([0-9]*\).*/\1/p" <<<"$reply")
	[ -n "$value" ] || fail "no $2 for session $1 in the STATUS listing"
}

# The device-mapper node over a loop device on the scratch disk.
make_device() {
	truncate -s "${img_mib}M" "$work/kv.img" || fail "cannot create the backing file"
	loop=$(losetup -f --show --direct-io=on "$work/kv.img") || fail "losetup"
	dmsetup create "$name" --table "0 $sectors linear $loop 0" || fail "dmsetup create"
	dmsetup mknodes "$name" # no udev in the guest
	[ -b "$node" ] || fail "$node was not created"
	dm=
	for d in /sys/block/dm-*; do [ "$(cat "$d/dm/name")" = "$name" ] && dm=$d; done
	[ -n "$dm" ] || fail "no /sys/block entry for $name"
}
# table TARGET ARGS...: switches the live table, as an administrator or a failing path would.
table() {
	dmsetup suspend "$name" && dmsetup load "$name" --table "0 $sectors $*" && dmsetup resume "$name" ||
		fail "dmsetup: cannot switch $name to $*"
	note "table: $*"
}
# Waits (up to 30 s) until the device has reads ($1 = 0) or writes ($1 = 1) in flight.
wait_inflight() {
	local t=$((SECONDS + 30)) io
	while [ $SECONDS -lt $t ]; do
		read -r -a io <"$dm/inflight"
		[ "${io[$1]}" -gt 0 ] && return 0
	done
	fail "no $([ "$1" = 0 ] && echo reads || echo writes) in flight on $node within 30 s"
}

start_daemon() {
	rm -f "$log"
	"$b/llmcached" --config /dev/null --socket "$sock" --kv-device "$node" --kv-backend "$1" \
		--kv-cpu-budget 1MiB --kv-session-device-bytes 64MiB --kv-max-sessions 5 --kv-queue-depth 4 \
		--kv-client-timeout 2s >"$log" 2>&1 &
	daemon=$!
	local i=0
	while [ ! -S "$sock" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	[ -S "$sock" ] || fail "llmcached did not create its socket"
}

# One run of every fault against a daemon with backend $1; the device disappears during a spill
# ($2 = spill) or a restore ($2 = restore).
scenario() {
	local backend=$1 vanish=$2 a before after
	echo "== backend $backend, the device disappears mid-$vanish"
	make_device
	start_daemon "$backend"
	start_client
	ok open A
	a=${reply#ok session }
	a=${a%% *}
	ok open B
	ok open C

	phase "healthy device: A and C spill, B stays in memory"
	ok append A 1024
	ok append B 96
	ok append C 512
	ok verify A
	ok verify B
	ok verify C
	counter "$a" spilled_pages
	[ "$value" -gt 0 ] || fail "session A did not spill"

	phase "the device stalls (dmsetup suspend) under a restore of A: the others are served meanwhile"
	start_client2
	quick open E
	quick append E 64
	dmsetup suspend "$name" || fail "dmsetup suspend"
	local stalled=$SECONDS
	send verify A
	sleep 1
	still_waiting
	quick append E 32 # on E's own region, within its budget: no device I/O
	quick select E 0 0
	quick verify E
	quick status # a new connection each time
	quick open F
	quick append F 16
	quick verify F
	quick close F
	quick status
	still_waiting
	# Longer than the daemon's client timeout (2 s): A waits for its device, not for its client.
	[ $((stalled + 5 - SECONDS)) -gt 0 ] && sleep $((stalled + 5 - SECONDS))
	still_waiting
	dmsetup resume "$name" || fail "dmsetup resume"
	note "resumed after $((SECONDS - stalled)) s"
	recv
	case $reply in ok*) ;; *) fail "verify A after the stall: $reply" ;; esac
	quick verify E
	quick close E
	stop_client2
	ok verify B

	phase "every write fails (flakey error_writes): spills fail, the tokens stay in memory"
	table flakey "$loop" 0 0 3600 1 error_writes
	err "$node.*Input/output error" append A 256
	ok verify B
	ok select A 0 0
	ok verify A # reads still work: the spilled pages, and the new tokens from memory
	table linear "$loop" 0

	phase "the device fails in the middle of a spill"
	table delay "$loop" 0 50
	counter "$a" bytes_written
	before=$value
	send append A 512
	wait_inflight 1
	table error
	recv
	case $reply in err*Input/output*) ;; *) fail "append A during the failure: $reply" ;; esac
	counter "$a" bytes_written
	after=$value
	[ "$after" -gt "$before" ] || fail "no spill completed before the failure ($before -> $after bytes written)"
	note "A's spills wrote $((after - before)) bytes before the device failed"
	ok verify B
	ok select A 1 0
	err "$node.*Input/output error" verify A

	phase "the device works again: nothing the CPU pool held was lost"
	table linear "$loop" 0
	ok verify A

	phase "the device fails in the middle of a restore"
	table delay "$loop" 0 50
	send verify C
	wait_inflight 0
	table error
	recv
	case $reply in err*"$node"*Input/output*) ;; *) fail "verify C during the failure: $reply" ;; esac
	ok verify B
	ok select C 0 0
	table linear "$loop" 0
	ok verify C

	phase "every read comes back corrupted (flakey corrupt_bio_byte)"
	table flakey "$loop" 0 0 3600 5 corrupt_bio_byte 224 r 1 0
	err "^err -74 .*corrupted KV slab on $node" verify A
	ok verify B
	ok select A 0 0
	table linear "$loop" 0
	ok verify A

	phase "writes are dropped silently (flakey drop_writes): what the device lost is refused, not served"
	table flakey "$loop" 0 0 3600 1 drop_writes
	ok append C 512
	table linear "$loop" 0
	err "^err -74 .*corrupted KV slab on $node" verify C
	ok select C 0 0
	ok close C

	phase "the device disappears mid-$vanish (dmsetup remove --force)"
	table delay "$loop" 0 50
	if [ "$vanish" = spill ]; then
		send append A 512
		wait_inflight 1
	else
		send verify A
		wait_inflight 0
	fi
	dmsetup remove --force --deferred "$name" || fail "dmsetup remove"
	recv
	case $reply in err*"$node"*Input/output*) ;; *) fail "the $vanish when the device disappeared: $reply" ;; esac
	ok verify B
	ok select A 0 0
	ok select A 1 0
	err "$node.*Input/output error" append A 64
	ok select A 0 0 # the 64 tokens just appended are recent: in memory, and served
	err "$node.*Input/output error" verify A
	ok close A
	ok close B
	dmsetup mknodes # once the last session let go, the device is gone; without udev, so is the node
	[ -e "$node" ] && fail "$node still exists after its last user closed it"
	err "^err -2 .*$node does not exist" open D
	stop_client
	kill -TERM "$daemon" && wait "$daemon" || fail "llmcached did not stop cleanly after the faults"
	daemon=
	losetup -d "$loop" 2>/dev/null
	rm -f "$work/kv.img"

	phase "the daemon's log"
	grep -E "$node.*Input/output error" "$log" | head -n 3 | sed 's/^/  /'
	grep -Eq "$node.*Input/output error" "$log" || fail "the log does not name $node and the I/O error"
	grep -Eq "corrupted KV slab on $node" "$log" || fail "the log does not name the corrupted slabs on $node"
	grep -Eq "$node does not exist" "$log" || fail "the log does not say that $node is gone"
}

# SIGTERM, twice, while a session's restore waits on a suspended device: the daemon must not hang on
# it nor crash, but wait Server::SHUTDOWN_WAIT (5 s) for the worker, say so, remove its socket and
# exit 0; the client gets an error, never data.
stop_while_stalled() {
	local t
	echo "== SIGTERM while a session waits on a stalled device"
	make_device
	start_daemon none
	start_client
	ok open A
	ok append A 1024
	dmsetup suspend "$name" || fail "dmsetup suspend"
	send verify A
	sleep 1
	still_waiting
	kill -TERM "$daemon"
	sleep 0.2
	kill -TERM "$daemon" 2>/dev/null
	t=$SECONDS
	while kill -0 "$daemon" 2>/dev/null && [ $((SECONDS - t)) -lt 30 ]; do sleep 0.1; done
	kill -0 "$daemon" 2>/dev/null && fail "llmcached did not exit within 30 s of SIGTERM with a stalled device"
	wait "$daemon" || fail "llmcached exited $? after SIGTERM with a stalled device"
	daemon=
	note "llmcached exited 0 after $((SECONDS - t)) s"
	grep -q "1 sessions still wait for their device" "$log" || fail "the log does not say that a session was left waiting"
	[ -e "$sock" ] && fail "the socket $sock is left after the exit"
	dmsetup resume "$name" || fail "dmsetup resume"
	read -r -t 120 reply <&4 || fail "the client got no answer once the daemon had gone"
	note "$sent -> $reply"
	case $reply in err*) ;; *) fail "'$sent' after the daemon stopped: $reply" ;; esac
	stop_client
	# The exited daemon's io_uring is torn down by the kernel in a worker once its last request, held
	# by the suspended device, completes: the device stays open for a moment after the resume.
	t=$SECONDS
	until dmsetup remove "$name" 2>/dev/null; do
		[ $((SECONDS - t)) -lt 10 ] || fail "dmsetup remove: $name still busy 10 s after the daemon exited"
		sleep 0.2
	done
	losetup -d "$loop" 2>/dev/null
	rm -f "$work/kv.img"
}

[ -x "$client" ] || fail "$client is missing (cmake --build build --target kv_fault_client)"
command -v dmsetup >/dev/null || fail "dmsetup is not installed (scripts/install-deps.sh kmod)"
for m in loop dm-mod dm-flakey dm-delay; do modprobe "$m" || fail "modprobe $m"; done
mkdir -p "$work"
scenario none spill
scenario emulated restore
stop_while_stalled
echo PASS
