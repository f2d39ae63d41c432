#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_deb.sh's second half (root only): installs the five packages into a scratch root, not into the
# machine, and runs them there. The root is an overlay (its changes in WORK) over a cached Debian base,
# CACHE/base: mmdebstrap's "apt" variant (the Essential packages and apt, nothing else) of the
# machine's release, plus what the checks need beside the packages and none of the packages' own
# dependencies: gcc, libc6-dev and pkg-config (to build the example, as a user of the -dev package
# would) and linux-headers-amd64 (a kernel for DKMS to build the module for). apt in the root
# installs the five packages from a local repository (with the machine's own .debs of their direct
# dependencies, for libxrt1, which the machine installed from a .deb no configured archive has) and
# pulls everything else they declare from the Debian mirror; CACHE/archives keeps the downloads for the
# next run. Then, all inside the root (chroot): every file of dpkg -L; each tool's --version and man
# page; the unit enabled; llmcached with the packaged config; the example built with pkg-config and run
# against it; DKMS's build of the module in the postinst; dpkg --purge leaving nothing behind.
# It runs in its own mount namespace (unshare), so the overlay and /proc vanish with it, whatever ends it.
# Usage: deb-scratch-root.sh CACHE WORK DEBDIR VERSION
set -euo pipefail
if [ -z "${LLMCACHE_DEB_ROOT_NS:-}" ]; then
	LLMCACHE_DEB_ROOT_NS=1 exec unshare --mount --propagation private -- bash "$0" "$@"
fi
cache=$1 work=$2 debs=$3 version=$4
. "$(dirname "$0")/check.sh"
pkgs=(llmcache-tools llmcached llmcache-dkms libllmcache-kv0 libllmcache-kv-dev)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
daemon=
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null' EXIT

# The base, made once per build directory (and again when what it is made of changes).
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
mirror=${LLMCACHE_DEB_MIRROR:-http://deb.debian.org/debian}
security=${LLMCACHE_DEB_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
scaffold=gcc,libc6-dev,pkg-config,linux-headers-$arch
sources=("deb $mirror $suite main" "deb $mirror $suite-updates main" "deb $security $suite-security main"
	"deb $mirror $suite-backports main")
spec="mmdebstrap --variant=apt --include=$scaffold $suite ${sources[*]}"
base=$cache/base
mkdir -p "$cache/archives/partial"
if [ ! -d "$base" ] || [ "$(cat "$cache/base.spec" 2>/dev/null)" != "$spec" ]; then
	t0=$(date +%s)
	rm -rf --one-file-system "$base" "$base.tmp" "$cache/base.spec"
	rc=0
	mmdebstrap --variant=apt --include="$scaffold" --skip=cleanup/apt/lists "$suite" "$base.tmp" \
		"${sources[@]}" >"$cache/base.log" 2>&1 || rc=$?
	check "the scratch root's base: $spec (rc $rc, $(($(date +%s) - t0)) s, log $cache/base.log)" test $rc -eq 0
	[ $rc -eq 0 ] || { tail -20 "$cache/base.log"; exit 1; }
	mv "$base.tmp" "$base"
	echo "$spec" >"$cache/base.spec"
else
	echo "== the scratch root's base: $base (cached; $spec)"
fi

root=$work/root
mkdir -p "$root" "$work/root.upper" "$work/root.work"
mount -t overlay overlay -o "lowerdir=$base,upperdir=$work/root.upper,workdir=$work/root.work" "$root"
mount -t proc proc "$root/proc"
mount --bind "$cache/archives" "$root/var/cache/apt/archives"
rm -f "$root/etc/resolv.conf"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\n# no service starts in the scratch root\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
inroot() {
	chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# The local repository: the five packages, and the machine's .debs (from its apt cache) of the
# versions it has installed of their direct dependencies.
repo=$root/srv/llmcache
mkdir -p "$repo"
deps=
for p in "${pkgs[@]}"; do
	a=$arch; [ $p = llmcache-dkms ] && a=all
	cp "$debs/${p}_${version}_$a.deb" "$repo/"
	deps+=" $(dpkg-deb -f "$debs/${p}_${version}_$a.deb" Depends | tr ',|\n' '   ' |
		sed 's/([^)]*)//g; s/:any//g')"
done
served=
for d in $(tr ' ' '\n' <<<"$deps" | grep -v -e '^$' -e '^llmcache' -e '^libllmcache' | sort -u); do
	v=$(dpkg-query -W -f='${Version}' "$d:$arch" 2>/dev/null || dpkg-query -W -f='${Version}' "$d" 2>/dev/null) || continue
	for a in $arch all; do
		f=/var/cache/apt/archives/${d}_${v//:/%3a}_$a.deb
		[ -f "$f" ] && cp "$f" "$repo/" && served+=" $d"
	done
done
echo "== local repository: the five packages and the machine's$served"
(cd "$repo" && dpkg-scanpackages --multiversion . >Packages 2>/dev/null)
echo "deb [trusted=yes] file:/srv/llmcache ./" >"$root/etc/apt/sources.list.d/llmcache.list"

t0=$(date +%s)
rc=0
{
	inroot apt-get update -o Dir::Etc::sourcelist=sources.list.d/llmcache.list -o Dir::Etc::sourceparts=- \
		-o APT::Get::List-Cleanup=0 &&
		inroot apt-get install -y --no-install-recommends "${pkgs[@]}"
} >"$work/root-install.log" 2>&1 || rc=$?
if [ $rc -ne 0 ] && grep -q -e '^E: Failed to fetch' -e '^E: Unable to fetch' "$work/root-install.log"; then
	echo "== the base's package lists are stale: apt-get update, then again"
	rc=0
	{ inroot apt-get update && inroot apt-get install -y --no-install-recommends "${pkgs[@]}"; } \
		>>"$work/root-install.log" 2>&1 || rc=$?
fi
added=$(grep -c '^Setting up ' "$work/root-install.log" || true)
check "apt-get install of the five packages into the scratch root $root (rc $rc, $(($(date +%s) - t0)) s, $added packages set up)" \
	test $rc -eq 0
[ $rc -eq 0 ] || { tail -30 "$work/root-install.log"; exit 1; }
sed -n 's/^Setting up \([^ ]*\) .*/\1/p' "$work/root-install.log" | tr '\n' ' ' | fold -s -w 100 | sed 's/^/   set up: /'
echo
# what llmcache-dkms's postinst said (DKMS's kernels, its build)
awk '/^Setting up llmcache-dkms/ { on = 1; next } /^(Setting up|Processing triggers) / { on = 0 } on' \
	"$work/root-install.log" | sed 's/^/   llmcache-dkms postinst: /'

for p in "${pkgs[@]}"; do
	missing=$(inroot sh -c 'dpkg -L "$1" | while read -r f; do [ -e "$f" ] || echo "$f"; done' sh "$p")
	check "every file of $p is in the root ($missing)" test -z "$missing"
done
for t in /usr/bin/llmcachectl /usr/bin/llmtrace /usr/bin/llmreplay /usr/bin/llmworkload /usr/bin/llmkvreplay \
	/usr/sbin/llmcached; do
	v=$(inroot "$t" --version 2>&1 || true)
	check "$t --version in the root says $version ($v)" test "$v" = "$(basename "$t") $version"
done
for t in llmcachectl:1 llmtrace:1 llmreplay:1 llmworkload:1 llmkvreplay:1 llmcached:8; do
	name=${t%:*} sec=${t#*:}
	check "man $sec $name: from its --help, version $version" \
		grep -q "^\.TH ${name^^} \"$sec\" .*\"$name $version\"" <(zcat "$root/usr/share/man/man$sec/$name.$sec.gz")
done
check "man llmcachectl documents its options" grep -q 'EXAMPLES\|Usage' <(zcat "$root/usr/share/man/man1/llmcachectl.1.gz")
check "llmcachectl size --device watch runs in the root (the paper's ~70 MB loop)" \
	grep -q 'sustainable loop N = .* = 72.9 MB' <(inroot /usr/bin/llmcachectl size --device watch 2>&1)
unit=$root/lib/systemd/system/llmcached.service
check "the unit starts /usr/sbin/llmcached with /etc/llmcache/llmcached.conf" \
	grep -qx 'ExecStart=/usr/sbin/llmcached --config /etc/llmcache/llmcached.conf' "$unit"
check "the postinst enabled the unit (multi-user.target.wants)" \
	test -L "$root/etc/systemd/system/multi-user.target.wants/llmcached.service"

# The packaged daemon with its packaged config (only the socket moved), and the example built the
# way the header's users build it, both in the root.
inroot /usr/sbin/llmcached --socket /tmp/d.sock >"$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$root/tmp/d.sock" ] && break; sleep 0.05; done
check "llmcached starts in the root with /etc/llmcache/llmcached.conf" test -S "$root/tmp/d.sock"
check "it took the config's backend (emulated)" grep -q emulated "$work/daemon.log"
rc=0
inroot sh -c 'cc -o /tmp/kv_client /usr/share/doc/libllmcache-kv-dev/examples/kv_client.c \
	$(pkg-config --cflags --libs llmcache-kv)' >"$work/cc.log" 2>&1 || rc=$?
check "kv_client.c builds in the root with pkg-config llmcache-kv (rc $rc $(cat "$work/cc.log"))" test $rc -eq 0
out=$(inroot /tmp/kv_client /tmp/d.sock 2>&1) || true
check "kv_client runs in the root against the packaged daemon and library" grep -qx 'session closed: ok' <<<"$out"
kill "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=

# DKMS: the postinst, in the root, built and installed the module for the root's kernels (those of
# its /lib/modules, the headers' kernel: the machine's own kernel is the chroot's host, not the root's).
status=$(inroot dkms status llmcache 2>/dev/null || true)
echo "$status" | sed 's/^/   dkms status: /'
check "DKMS has llmcache/$version" grep -q "^llmcache/$version" <<<"$status"
for k in $(ls "$root/lib/modules"); do
	[ -e "$root/lib/modules/$k/build" ] || continue
	check "DKMS installed llmcache.ko for $k in the root" grep -q "^llmcache/$version, $k, [^:]*: installed" <<<"$status"
	check "$k's updates/dkms/llmcache.ko is in the root" \
		test -n "$(find "$root/lib/modules/$k/updates/dkms" -name 'llmcache.ko*' 2>/dev/null)"
done

t0=$(date +%s)
rc=0
inroot dpkg --purge "${pkgs[@]}" >"$work/purge.log" 2>&1 || rc=$?
check "dpkg --purge in the root (rc $rc, $(($(date +%s) - t0)) s)" test $rc -eq 0
[ $rc -eq 0 ] || tail -20 "$work/purge.log"
check "nothing of llmcache is left in the root's /usr/bin, /usr/sbin, /etc, /usr/src, /usr/lib" \
	test ! -e "$root/usr/bin/llmcachectl" -a ! -e "$root/usr/sbin/llmcached" -a ! -e "$root/etc/llmcache" \
	-a ! -e "$root/usr/src/llmcache-$version" -a -z "$(find "$root/usr/lib" -name 'libllmcache-kv*')"
check "the unit is no longer enabled" test ! -e "$root/etc/systemd/system/multi-user.target.wants/llmcached.service"
check "DKMS forgot the module" test -z "$(inroot dkms status llmcache 2>/dev/null)"
check "no DKMS-built llmcache.ko is left in the root's /lib/modules" \
	test -z "$(find "$root/lib/modules" -path '*/updates/dkms/llmcache.ko*')"
[ "$fails" -eq 0 ]
