#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llmcache-dkms on Debian's 6.1 and 6.12 kernels: builds the package (scripts/build-deb.sh --indep,
# seconds), unpacks its /usr/src/llmcache-VERSION, and runs `dkms add` + `dkms build` of that tree for
# each kernel's headers in a private DKMS tree (--sourcetree/--dkmstree: the machine's /var/lib/dkms
# is not touched). The module DKMS built must carry the package's version and the kernel's vermagic,
# and then pass the whole kselftest suite in the VM on the newer kernel (tests/vm/run.sh, as
# test_kmod_vm.sh runs it) and a load / register-a-file / statistics / unload smoke on the older one
# (the suite there is what test_kmod_vm.sh already runs, on the same source; twice would add minutes).
set -euo pipefail
src=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
build=$(dirname "$bin")
kernels=${LLMCACHE_VM_KERNELS:-"6.1 6.12"}
full=${LLMCACHE_DKMS_FULL:-${kernels##* }} # the kernels that run the whole suite ("6.1 6.12": both)

[ "$(id -u)" -eq 0 ] || { echo "SKIP: dkms build needs root"; exit 77; }
for tool in dkms dpkg-buildpackage dh_dkms qemu-system-x86_64; do
	command -v $tool >/dev/null || { echo "SKIP: $tool not found (make deps)"; exit 77; }
done
releases=()
for k in $kernels; do
	r=
	for d in /usr/src/linux-headers-"$k"[.-]*-amd64; do
		[ -d "$d" ] && [ -f "/boot/vmlinuz-${d#/usr/src/linux-headers-}" ] && r=${d#/usr/src/linux-headers-}
	done
	[ -n "$r" ] || { echo "SKIP: Debian kernel $k image or headers not installed (run 'make deps')"; exit 77; }
	releases+=("$r")
done
[ -x "$bin/llmcachectl" ] || { echo "FAIL: $bin/llmcachectl is missing"; exit 1; }

work=$(mktemp -d "$build/dkms-test.XXXXXX") # under the build: the guest sees it over 9p
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/check.sh"
version=$(cat "$src/VERSION")

start=$(date +%s)
deb=$("$src/scripts/build-deb.sh" --indep "$work") || { echo "FAIL: building llmcache-dkms"; exit 1; }
check "llmcache-dkms_${version}_all.deb built" test "$(basename "$deb")" = "llmcache-dkms_${version}_all.deb"
dpkg-deb -x "$deb" "$work/root"
tree=$work/root/usr/src/llmcache-$version
check "dkms.conf carries VERSION ($version)" grep -qx "PACKAGE_VERSION=\"$version\"" "$tree/dkms.conf"
mkdir -p "$work/dkms"
dkms=(dkms --sourcetree "$work/root/usr/src" --dkmstree "$work/dkms")
"${dkms[@]}" add -m llmcache -v "$version" >"$work/add.log" 2>&1 || { cat "$work/add.log"; echo "FAIL: dkms add"; exit 1; }

declare -A ko
for r in "${releases[@]}"; do
	t0=$(date +%s)
	rc=0
	"${dkms[@]}" build -m llmcache -v "$version" -k "$r" --kernelsourcedir "/usr/src/linux-headers-$r" \
		>"$work/build-$r.log" 2>&1 || rc=$?
	check "dkms build for $r (rc $rc, $(( $(date +%s) - t0 )) s)" test $rc -eq 0
	if [ $rc -ne 0 ]; then
		cat "$work/build-$r.log"; tail -n 30 "$work/dkms/llmcache/$version/build/make.log" 2>/dev/null || true
		continue
	fi
	m=$(find "$work/dkms/llmcache/$version/$r" -name 'llmcache.ko*' | head -1)
	case $m in
	*.ko.xz) xz -dc "$m" >"$work/llmcache-$r.ko" ;;
	*.ko.zst) zstd -qdc "$m" >"$work/llmcache-$r.ko" ;;
	*.ko) cp "$m" "$work/llmcache-$r.ko" ;;
	*) echo "FAIL: no llmcache.ko in the DKMS tree for $r"; fails=$((fails + 1)); continue ;;
	esac
	ko[$r]=$work/llmcache-$r.ko
	info=$(modinfo "${ko[$r]}")
	check "the $r module's vermagic is $r" test "$(modinfo -F vermagic "${ko[$r]}" | cut -d' ' -f1)" = "$r"
	check "the $r module is llmcache, Dual MIT/GPL" grep -qE '^license: +Dual MIT/GPL' <<<"$info"
done
"${dkms[@]}" status -m llmcache -v "$version" >"$work/status" 2>&1 || true
for r in "${!ko[@]}"; do
	check "dkms status says built for $r" grep -q "llmcache/$version, $r, x86_64: built" "$work/status"
done
echo "== dkms add + build for ${releases[*]}: $(( $(date +%s) - start )) s"
[ ${#ko[@]} -eq ${#releases[@]} ] || { echo "FAIL: DKMS did not build every kernel"; exit 1; }

make -s -C "$src/tests/kselftest" BUILD="$build" >/dev/null
# The smoke, as a file: run.sh hands the guest's sh its arguments in bash quoting, fine for words only.
cat >"$work/smoke.sh" <<'SMOKE'
set -e
insmod "$1"
echo "hook_mode $(cat /sys/kernel/llmcache/hook_mode)"
f=$LLMCACHE_SCRATCH/weights.bin
dd if=/dev/urandom of="$f" bs=1M count=4 status=none
"$LLMCACHE_BIN/llmcachectl" register "$f"
cat "$f" >/dev/null
cat "$f" >/dev/null
echo "registered $(cat /sys/kernel/llmcache/registered)"
"$LLMCACHE_BIN/llmcachectl" status --json | grep -o '"accesses":[0-9]*'
rmmod llmcache
test ! -e /sys/kernel/llmcache && echo unloaded
SMOKE
is_full() { local k; for k in $full; do [[ $1 == "$k".* || $1 == "$k"-* ]] && return 0; done; return 1; }
for r in "${releases[@]}"; do
	if is_full "$r"; then
		echo "== kselftest on $r with the DKMS-built module"
		t0=$(date +%s)
		out=$(LLMCACHE_BUILD="$build" "$src/tests/vm/run.sh" --timeout 900 "$r" -- \
			env LLMCACHE_KO="${ko[$r]}" "$build/kselftest/llmcache_test" 2>&1) && rc=0 || rc=$?
		echo "$out" | grep -E '^(not ok|# (FAIL|Totals)|run\.sh)|Expected' || true
		check "kselftest on $r exits 0 (rc $rc, $(( $(date +%s) - t0 )) s)" test $rc -eq 0
		check "kselftest on $r ran every test and all passed ($(grep '^# Totals' <<<"$out" || true))" \
			grep -q '^# Totals: pass:[1-9][0-9]* fail:0 .* skip:0 error:0' <<<"$out"
		[ $rc -eq 0 ] || tail -n 60 <<<"$out"
	else
		echo "== load / register / unload smoke on $r with the DKMS-built module"
		t0=$(date +%s)
		out=$(LLMCACHE_BUILD="$build" LLMCACHE_BIN="$bin" "$src/tests/vm/run.sh" "$r" -- \
			sh "$work/smoke.sh" "${ko[$r]}" 2>&1) && rc=0 || rc=$?
		echo "$out" | sed 's/^/   /'
		check "smoke on $r exits 0 (rc $rc, $(( $(date +%s) - t0 )) s)" test $rc -eq 0
		check "the module loaded and chose its hooks on $r" grep -qE '^hook_mode [a-z]' <<<"$out"
		check "a file registered on $r" grep -qx 'registered 1' <<<"$out"
		check "the module saw its reads on $r" grep -qE '^"accesses":[1-9]' <<<"$out"
		check "the module unloaded on $r" grep -qx unloaded <<<"$out"
	fi
done
[ "$fails" -eq 0 ] || exit 1
echo "PASS: DKMS builds llmcache $version for ${releases[*]}; the suite passed on $full, the smoke on the others"
