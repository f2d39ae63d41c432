#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cross-build llmcache for arm64 on a Debian 12 amd64 host into BUILD/arm64/:
#   kmod-RELEASE/llmcache.ko  the module against Debian's arm64 headers, one per kernel (6.1, 6.12)
#   user/bin/                 the tools and llmcached (cmake/aarch64-linux-gnu.cmake, multiarch libraries)
#   kselftest/                the kselftest suite, the module's fuzzer and the VM helpers
#   debian/                   Debian's arm64 kernel packages and busybox-static:arm64, unpacked
#   sysroot/lib/              the arm64 shared libraries those programs need, copied from the host's
#                             multiarch directories (libc6:arm64, libstdc++6:arm64, ...)
# tests/vm/run-arm64.sh boots those kernels in qemu-system-aarch64 with that root.
#
# Why the kernel headers are unpacked and not installed: linux-headers-RELEASE-arm64:arm64 depends on
# gcc-12, which for an arm64 package means gcc-12:arm64, and apt would remove the host's compiler for
# it. What Debian does support is the rest: linux-kbuild-VERSION (the host programs: fixdep, modpost)
# is Multi-Arch: foreign, so the amd64 one serves arm64 headers, linux-headers-RELEASE-common is
# architecture-independent, and the arm64 tree's .kernelvariables sets ARCH=arm64 and wants the
# aarch64-linux-gnu- cross compiler. So the -arm64 headers package is unpacked (dpkg-deb -x) into
# debian/, its scripts link points at the host's installed kbuild, and kmod/Makefile runs with
# KDIR= that tree and CROSS_COMPILE=aarch64-linux-gnu-.
#
# As root it first installs what is missing: the package group scripts/deps/cross/arm64.list (after
# `dpkg --add-architecture arm64`), each kernel's -common headers and kbuild. Without root it only
# says what is missing. The kernel release for 6.1 is the one bookworm's linux-headers-arm64 names,
# for 6.12 the one bookworm-backports' linux-headers-6.12-arm64 names.
# Usage: scripts/cross-arm64.sh [--build-type TYPE] [BUILD [KERNEL...]]   (default: build, 6.1 6.12)
#   --build-type: CMAKE_BUILD_TYPE of the userspace (default RelWithDebInfo, as make builds; the test
#   uses None: no optimisation and no debug information, which compiles in about half the time).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
targets="llmworkload llmcachectl llmreplay llmcached"
build_type=RelWithDebInfo
while [ $# -gt 0 ]; do
	case $1 in
	--build-type) build_type=$2; shift 2 ;;
	*) break ;;
	esac
done
build=$(realpath -m "${1:-$src/build}")
[ $# -gt 0 ] && shift
kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || kernels=(6.1 6.12)
out=$build/arm64
root=$out/debian
triplet=aarch64-linux-gnu
nice=(nice -n 19)
say() { echo "cross-arm64: $*" >&2; }
is_root() { [ "$(id -u)" -eq 0 ]; }
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# Wait for the dpkg lock instead of failing when another installer holds it.
apt_config=$(mktemp)
trap 'rm -f "$apt_config"' EXIT
echo 'DPkg::Lock::Timeout "600";' >"$apt_config"
export APT_CONFIG=$apt_config

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
	is_root || { say "arm64 is not a dpkg architecture here: run as root (dpkg --add-architecture arm64)"; exit 1; }
	say "adding arm64 as a dpkg architecture (multiarch)"
	dpkg --add-architecture arm64
	apt-get update -qq
fi
"$src/scripts/install-deps.sh" cross/arm64 >&2

# The kernel release each version names in the archive, through its metapackage.
release_of() {
	local meta dep
	for meta in "linux-headers-$1-arm64" linux-headers-arm64; do
		dep=$(apt-cache depends "$meta:arm64" 2>/dev/null | sed -n 's/^  Depends: linux-headers-\(.*\)-arm64:arm64$/\1/p' | head -n 1)
		case $dep in "$1".*|"$1"-*) echo "$dep-arm64"; return 0 ;; esac
	done
	return 1
}

# Debian's package NAME:ARCH unpacked into $root (downloaded once into $out/debs).
unpack() {
	local name=$1 deb
	mkdir -p "$out/debs" "$root/.unpacked"
	[ -e "$root/.unpacked/$name" ] && return 0
	deb=$(cd "$out/debs" && ls "${name%%:*}"_*.deb 2>/dev/null | tail -n 1 || true)
	if [ -z "$deb" ]; then
		(cd "$out/debs" && apt-get download -q "$name" >/dev/null 2>&1) ||
			{ is_root && apt-get update -qq && (cd "$out/debs" && apt-get download -q "$name" >/dev/null); } ||
			{ say "cannot download $name from the Debian archive"; return 1; }
		deb=$(cd "$out/debs" && ls "${name%%:*}"_*.deb | tail -n 1)
	fi
	dpkg-deb -x "$out/debs/$deb" "$root"
	touch "$root/.unpacked/$name"
}

mkdir -p "$out"
unpack busybox-static:arm64
for k in "${kernels[@]}"; do
	release=$(release_of "$k") || { say "no Debian arm64 kernel $k in the archive (apt-get update?)"; exit 1; }
	abi=${release%-arm64}
	for pkg in "linux-headers-$abi-common"; do
		installed "$pkg" && continue
		is_root || { say "$pkg is not installed (apt-get install $pkg, as root)"; exit 1; }
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >&2
	done
	unpack "linux-headers-$release:arm64"
	unpack "linux-image-$release:arm64"
	kdir=$root/usr/src/linux-headers-$release
	# scripts -> ../../lib/linux-kbuild-V/scripts: the host's kbuild of the same version.
	kbuild=$(readlink "$kdir/scripts" | sed -n 's|^\.\./\.\./lib/\(linux-kbuild-[^/]*\)/scripts$|\1|p')
	[ -n "$kbuild" ] || { say "unexpected layout of $kdir/scripts"; exit 1; }
	want=$(dpkg-deb -f "$out/debs/$(cd "$out/debs" && ls "linux-headers-${release}"_*.deb | tail -n 1)" Version)
	have=$(dpkg-query -W -f='${Version}' "$kbuild" 2>/dev/null || true)
	if [ -z "$have" ] || dpkg --compare-versions "$have" lt "$want"; then
		is_root || { say "$kbuild >= $want is not installed (apt-get install $kbuild, as root)"; exit 1; }
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$kbuild" >&2
	fi
	mkdir -p "$root/usr/lib"
	ln -sfn "/usr/lib/$kbuild" "$root/usr/lib/$kbuild"
	[ -f "$root/lib/modules/$release/modules.dep" ] || depmod -b "$root" "$release"
	"${nice[@]}" make -s -j "$(nproc)" -C "$src/kmod" KDIR="$kdir" BUILD="$out" CROSS_COMPILE=$triplet- >&2
	say "llmcache.ko for $release: ${SECONDS}s since the start"
done

"${nice[@]}" cmake -S "$src" -B "$out/user" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/$triplet.cmake" \
	-DCMAKE_BUILD_TYPE="$build_type" >/dev/null
"${nice[@]}" cmake --build "$out/user" -j "$(nproc)" --target $targets >&2
say "userspace ($targets, $build_type): ${SECONDS}s since the start"
"${nice[@]}" make -s -C "$src/tests/kselftest" BUILD="$out" CC=$triplet-gcc >&2

# The guest's shared libraries: what the programs need, transitively, from the multiarch directories.
mkdir -p "$out/sysroot/lib/$triplet"
cp -L "/lib/ld-linux-aarch64.so.1" "$out/sysroot/lib/"
pending=("$out"/user/bin/* "$out"/kselftest/llmcache_*)
declare -A seen
while [ ${#pending[@]} -gt 0 ]; do
	f=${pending[0]}; pending=("${pending[@]:1}")
	file -bL "$f" | grep -q 'ELF 64-bit.*ARM aarch64' || continue
	for lib in $($triplet-readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		[ -n "${seen[$lib]:-}" ] && continue
		seen[$lib]=1
		[ "$lib" = ld-linux-aarch64.so.1 ] && continue
		path=
		for dir in /lib/$triplet /usr/lib/$triplet; do [ -e "$dir/$lib" ] && { path=$dir/$lib; break; }; done
		[ -n "$path" ] || { say "$f needs $lib, which no arm64 package installed here provides"; exit 1; }
		cp -L "$path" "$out/sysroot/lib/$triplet/$lib"
		pending+=("$out/sysroot/lib/$triplet/$lib")
	done
done
say "built into $out: $(cd "$out" && ls -d kmod-*/llmcache.ko | tr '\n' ' ')user/bin kselftest"
