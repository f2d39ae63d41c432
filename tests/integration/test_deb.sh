#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian packages (make deb, debian/): builds all five with scripts/build-deb.sh into a scratch
# directory, checks their versions against VERSION and debian/changelog, runs lintian on them (no E:
# lines), and checks each package's contents with dpkg-deb -c. As root, on a machine where none of them
# is installed, it then installs them with dpkg -i, checks that the files are where promised and
# that the tools run (the man pages carry the version; llmcached reads the packaged config; the example
# builds with plain pkg-config against /usr and runs against it; DKMS built the module for a kernel
# with headers), and purges them again, checking that nothing is left (the trap purges on failure).
set -euo pipefail
src=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
build=$(dirname "$bin")
for tool in dpkg-buildpackage dh dh_dkms help2man lintian fakeroot; do
	command -v $tool >/dev/null || { echo "SKIP: $tool not found (make deps installs the packaging tools)"; exit 77; }
done
. "$(dirname "$0")/check.sh"
version=$(cat "$src/VERSION")
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
pkgs=(llmcache-tools llmcached llmcache-dkms libllmcache-kv0 libllmcache-kv-dev)
work=$(mktemp -d "$build/deb-test.XXXXXX")
installed=0 daemon=
cleanup() {
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	[ $installed -eq 1 ] && dpkg --purge "${pkgs[@]}" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

check "debian/changelog's version is VERSION ($version)" \
	test "$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)" = "$version"
start=$(date +%s)
"$src/scripts/build-deb.sh" "$work" >"$work/debs" || { echo "FAIL: make deb (scripts/build-deb.sh)"; exit 1; }
echo "== built in $(( $(date +%s) - start )) s: $(xargs -n1 basename <"$work/debs" | tr '\n' ' ')"
out=$work/deb
declare -A deb
for p in "${pkgs[@]}"; do
	a=$arch; [ $p = llmcache-dkms ] && a=all
	deb[$p]=$out/${p}_${version}_$a.deb
	check "$p ${version} ($a) built" test -f "${deb[$p]}"
	[ -f "${deb[$p]}" ] || exit 1
	check "$p's version is $version" test "$(dpkg-deb -f "${deb[$p]}" Version)" = "$version"
done

# lintian: no errors (warnings are printed, not fatal).
rc=0
lintian --no-tag-display-limit "$out/llmcache_${version}_$arch.changes" >"$work/lintian" 2>&1 || rc=$?
check "lintian ran (rc $rc; 2: it could not)" test $rc -ne 2
grep -E '^[EW]: ' "$work/lintian" | sed 's/^/   lintian: /' || true
check "lintian finds no errors ($(grep -c '^E: ' "$work/lintian" || true) E:, $(grep -c '^W: ' "$work/lintian" || true) W:)" \
	test -z "$(grep '^E: ' "$work/lintian" || true)"

# What each package holds.
expect() { # package, paths it must hold
	local p=$1; shift
	local list; list=$(dpkg-deb -c "${deb[$p]}" | awk '{print $6}' | sed 's|^\./|/|; s|/$||')
	for f in "$@"; do check "$p holds $f" grep -qx -- "$f" <<<"$list"; done
}
expect llmcache-tools /usr/bin/llmcachectl /usr/bin/llmtrace /usr/bin/llmreplay /usr/bin/llmworkload \
	/usr/bin/llmkvreplay /usr/share/man/man1/llmcachectl.1.gz /usr/share/man/man1/llmtrace.1.gz \
	/usr/share/man/man1/llmreplay.1.gz /usr/share/man/man1/llmworkload.1.gz /usr/share/man/man1/llmkvreplay.1.gz
expect llmcached /usr/sbin/llmcached /lib/systemd/system/llmcached.service /etc/llmcache/llmcached.conf \
	/usr/share/man/man8/llmcached.8.gz /usr/share/doc/llmcache/kv.md
expect llmcache-dkms /usr/src/llmcache-$version/dkms.conf /usr/src/llmcache-$version/Kbuild \
	/usr/src/llmcache-$version/main.c /usr/src/llmcache-$version/libllmcache/core/core.c \
	/usr/src/llmcache-$version/libllmcache/core/plan.c /usr/src/llmcache-$version/include/uapi/llmcache.h
expect libllmcache-kv0 /usr/lib/$ma/libllmcache-kv.so.0 /usr/lib/$ma/libllmcache-kv.so.$version
expect libllmcache-kv-dev /usr/include/llmcache/llmcache_kv.h /usr/lib/$ma/libllmcache-kv.so \
	/usr/lib/$ma/pkgconfig/llmcache-kv.pc /usr/share/doc/libllmcache-kv-dev/examples/kv_client.c
ctrl() { dpkg-deb --ctrl-tarfile "${deb[$1]}" | tar -xOf - "./$2" 2>/dev/null || true; }
check "/etc/llmcache/llmcached.conf is a conffile" grep -qx /etc/llmcache/llmcached.conf <<<"$(ctrl llmcached conffiles)"
check "llmcached's postinst enables the unit" grep -q 'deb-systemd-helper.*enable.*llmcached.service' <<<"$(ctrl llmcached postinst)"
check "libllmcache-kv0 has shlibs for soname 0" grep -qx "libllmcache-kv 0 libllmcache-kv0 (>= $version)" <<<"$(ctrl libllmcache-kv0 shlibs)"
check "libllmcache-kv0's symbols file lists llmcache_kv_open" \
	grep -q '^ llmcache_kv_open@LLMCACHE_KV_0 ' <<<"$(ctrl libllmcache-kv0 symbols)"
check "llmcache-dkms depends on dkms" grep -q dkms <<<"$(dpkg-deb -f "${deb[llmcache-dkms]}" Depends)"
check "llmcache-dkms's postinst builds it with DKMS" grep -q 'dkms/common.postinst' <<<"$(ctrl llmcache-dkms postinst)"
check "libllmcache-kv-dev depends on libllmcache-kv0 (= $version)" \
	grep -q "libllmcache-kv0 (= $version)" <<<"$(dpkg-deb -f "${deb[libllmcache-kv-dev]}" Depends)"

if [ "$(id -u)" -ne 0 ]; then
	echo "not root: the packages are not installed (their contents were checked above)"
elif dpkg-query -W -f='${Status}\n' "${pkgs[@]}" 2>/dev/null | grep -q 'install ok installed'; then
	echo "llmcache packages are already installed here: not installing over them (contents were checked above)"
else
	t0=$(date +%s)
	installed=1
	rc=0
	dpkg -i "${deb[@]}" >"$work/install.log" 2>&1 || rc=$?
	check "dpkg -i of the five packages (rc $rc, $(( $(date +%s) - t0 )) s)" test $rc -eq 0
	[ $rc -eq 0 ] || { cat "$work/install.log"; exit 1; }
	for p in "${pkgs[@]}"; do
		missing=$(dpkg -L "$p" | while read -r f; do [ -e "$f" ] || echo "$f"; done)
		check "every file of $p is on disk ($missing)" test -z "$missing"
	done
	for t in /usr/bin/llmcachectl /usr/bin/llmtrace /usr/bin/llmreplay /usr/bin/llmworkload /usr/bin/llmkvreplay \
		/usr/sbin/llmcached; do
		v=$("$t" --version 2>&1 || true)
		check "$t --version says $version ($v)" test "$v" = "$(basename "$t") $version"
	done
	for t in llmcachectl:1 llmtrace:1 llmreplay:1 llmworkload:1 llmkvreplay:1 llmcached:8; do
		name=${t%:*} sec=${t#*:}
		check "man $sec $name: from its --help, version $version" \
			grep -q "^\.TH ${name^^} \"$sec\" .*\"$name $version\"" <(zcat "/usr/share/man/man$sec/$name.$sec.gz")
	done
	check "man llmcachectl documents its options" grep -q 'EXAMPLES\|Usage' <(zcat /usr/share/man/man1/llmcachectl.1.gz)
	check "llmcachectl size --device watch runs from /usr/bin (the paper's ~70 MB loop)" \
		grep -q 'sustainable loop N = .* = 72.9 MB' <(/usr/bin/llmcachectl size --device watch 2>&1)
	check "the unit starts /usr/sbin/llmcached with /etc/llmcache/llmcached.conf" \
		grep -qx 'ExecStart=/usr/sbin/llmcached --config /etc/llmcache/llmcached.conf' /lib/systemd/system/llmcached.service

	# The packaged daemon with its packaged config (only the socket moved), and the example built the
	# way the header's users build it.
	/usr/sbin/llmcached --socket "$work/d.sock" >"$work/daemon.log" 2>&1 &
	daemon=$!
	for _ in $(seq 100); do [ -S "$work/d.sock" ] && break; sleep 0.05; done
	check "/usr/sbin/llmcached starts with /etc/llmcache/llmcached.conf" test -S "$work/d.sock"
	check "it took the config's backend (emulated)" grep -q emulated "$work/daemon.log"
	rc=0
	cc -o "$work/kv_client" /usr/share/doc/libllmcache-kv-dev/examples/kv_client.c \
		$(pkg-config --cflags --libs llmcache-kv) 2>"$work/cc.log" || rc=$?
	check "kv_client.c builds with pkg-config llmcache-kv against /usr (rc $rc $(cat "$work/cc.log"))" test $rc -eq 0
	out=$("$work/kv_client" "$work/d.sock" 2>&1) || true
	check "kv_client runs against the packaged daemon and library" grep -qx 'session closed: ok' <<<"$out"
	kill "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=

	# DKMS: the postinst built the module for the newest kernel that has headers (not for this
	# machine's own kernel, which has none); test_dkms_vm.sh builds it for each kernel and loads it.
	status=$(dkms status llmcache 2>/dev/null || true)
	echo "$status" | sed 's/^/   dkms status: /'
	check "DKMS has llmcache/$version" grep -q "^llmcache/$version" <<<"$status"
	newest=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sed 's|/usr/src/linux-headers-||' | grep -v -e cloud -e rt | sort -V | tail -1)
	if [ -n "$newest" ] && [ -d "/lib/modules/$newest" ]; then
		check "DKMS installed llmcache.ko for $newest" grep -q "^llmcache/$version, $newest, [^:]*: installed" <<<"$status"
	fi

	t0=$(date +%s)
	rc=0
	dpkg --purge "${pkgs[@]}" >"$work/purge.log" 2>&1 || rc=$?
	installed=0
	check "dpkg --purge (rc $rc, $(( $(date +%s) - t0 )) s)" test $rc -eq 0
	check "nothing of llmcache is left in /usr/bin, /usr/sbin, /etc, /usr/src" \
		test ! -e /usr/bin/llmcachectl -a ! -e /usr/sbin/llmcached -a ! -e /etc/llmcache -a ! -e "/usr/src/llmcache-$version"
	check "DKMS forgot the module" test -z "$(dkms status llmcache 2>/dev/null)"
	check "no DKMS-built llmcache.ko is left in /lib/modules" test -z "$(find /lib/modules -path '*/updates/dkms/llmcache.ko*')"
fi
echo "== test_deb: $(( $(date +%s) - start )) s"
[ "$fails" -eq 0 ] || exit 1
echo PASS
