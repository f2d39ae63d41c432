#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian packages (make deb, debian/): builds all five with scripts/build-deb.sh into a scratch
# directory, checks their versions against VERSION and debian/changelog, runs lintian on them (no E:
# lines), and checks each package's contents with dpkg-deb -c. As root, it then installs them into a
# scratch root (an overlay over a Debian base cached in the build directory; deb-scratch-root.sh), not
# into the machine, and runs them there: the files are where promised, the tools run (the man pages
# carry the version; llmcached reads the packaged config; the example builds with plain pkg-config and
# runs against it; DKMS built the module in the postinst), and the purge leaves nothing behind.
set -euo pipefail
src=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
build=$(dirname "$bin")
for tool in dpkg-buildpackage dh dh_dkms help2man lintian fakeroot mmdebstrap; do
	command -v $tool >/dev/null || { echo "SKIP: $tool not found (make deps installs the packaging tools)"; exit 77; }
done
. "$(dirname "$0")/check.sh"
version=$(cat "$src/VERSION")
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
pkgs=(llmcache-tools llmcached llmcache-dkms libllmcache-kv0 libllmcache-kv-dev)
work=$(mktemp -d "$build/deb-test.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT

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

# Installed into a scratch root, not into the machine (deb-scratch-root.sh says how), and run there.
if [ "$(id -u)" -ne 0 ]; then
	echo "not root: the packages are not installed into a scratch root (their contents were checked above)"
else
	t0=$(date +%s)
	rc=0
	bash "$(dirname "$0")/deb-scratch-root.sh" "$build/deb-root" "$work" "$out" "$version" || rc=$?
	check "the packages install into a scratch root, run there and purge (rc $rc, $(( $(date +%s) - t0 )) s)" \
		test $rc -eq 0
fi
echo "== test_deb: $(( $(date +%s) - start )) s"
[ "$fails" -eq 0 ] || exit 1
echo PASS
