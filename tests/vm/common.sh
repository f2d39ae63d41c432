# SPDX-License-Identifier: MIT
# Sourced by the VM runners (run.sh, run-arm64.sh): what both do around qemu.

# vm_stage_modules STAGE RELEASE MODROOT MODULE...: the modules and their dependencies, from the kernel
# RELEASE's tree under MODROOT (/ for the host's), decompressed into STAGE/modules and listed in load
# order in STAGE/modules/order.
vm_stage_modules() {
	local stage=$1 release=$2 modroot=$3 m verb path name
	shift 3
	: >"$stage/modules/order"
	for m in "$@"; do
		modprobe -d "$modroot" -S "$release" --show-depends "$m" | while read -r verb path _; do
			[ "$verb" = insmod ] || continue
			name=$(basename "$path"); name=${name%.xz}; name=${name%.zst}
			[ -e "$stage/modules/$name" ] && continue
			case $path in
			*.xz) xz -dc "$path" >"$stage/modules/$name" ;;
			*.zst) zstd -qdc "$path" >"$stage/modules/$name" ;;
			*) cp "$path" "$stage/modules/$name" ;;
			esac
			echo "$name" >>"$stage/modules/order"
		done
	done
}

# vm_verdict RUNNER RELEASE RUN_DIR QEMU_EXIT TIMEOUT START (date +%s.%N before qemu), once qemu has
# exited: prints the command's output and exits with its status, or with 125 when the guest did not
# finish or its kernel log shows BUG, WARNING, Oops, a soft lockup or a hung task (the log's last lines
# and qemu's output go to stderr).
vm_verdict() {
	local runner=$1 release=$2 run=$3 qemu_rc=$4 timeout=$5 start=$6 elapsed log fail= bad
	elapsed=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo "?")
	[ -f "$run/out" ] && cat "$run/out"
	log=$run/console.log
	[ -f "$run/dmesg" ] && log=$run/dmesg
	if [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
		fail="the guest did not finish within ${timeout}s"
	elif [ ! -f "$run/rc" ]; then
		fail="the guest stopped before the command finished (qemu exit $qemu_rc)"
	fi
	bad=$(grep -E '\bBUG\b|WARNING|Oops|soft lockup|hung task|blocked for more than|Call Trace' \
		"$run/console.log" "$run/dmesg" 2>/dev/null | head -20 || true)
	[ -n "$bad" ] && fail="${fail:+$fail; }the guest kernel log is not clean"
	if [ -n "$fail" ]; then
		echo "$runner: FAIL on $release: $fail" >&2
		[ -n "$bad" ] && { echo "---- offending kernel log lines ----" >&2; echo "$bad" >&2; }
		echo "---- guest kernel log (last 60 lines) ----" >&2
		tail -n 60 "$log" >&2
		[ -s "$run/qemu.log" ] && { echo "---- qemu ----" >&2; cat "$run/qemu.log" >&2; }
		exit 125
	fi
	echo "$runner: $release: exit $(cat "$run/rc") in ${elapsed}s" >&2
	exit "$(cat "$run/rc")"
}
