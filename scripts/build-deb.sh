#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make deb: the Debian packages (debian/), binary only, unsigned. dpkg-buildpackage writes into the
# tree it builds (debian/tmp, obj-*/) and puts the .debs beside it, so it runs on a copy of the source
# (the files git tracks plus new ones it does not ignore) in BUILD/deb/llmcache-VERSION/; the .debs,
# .buildinfo and .changes land in BUILD/deb/. Prints the .debs' paths, one a line, on stdout.
# --indep builds only the architecture-independent package, llmcache-dkms, in seconds (no compiling).
# Usage: scripts/build-deb.sh [--indep] [BUILD]   (default: build)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
what=-b
if [ "${1:-}" = --indep ]; then what=-A; shift; fi
build=$(realpath -m "${1:-$src/build}")
version=$(cat "$src/VERSION")
out=$build/deb
tree=$out/llmcache-$version

"$src/scripts/install-deps.sh" --check build bpf kv packaging >&2 || {
	echo "build-deb: the packages above are needed to build the .debs" >&2; exit 1; }
changelog=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
if [ "$changelog" != "$version" ]; then
	echo "build-deb: debian/changelog says $changelog but VERSION says $version: add a changelog entry" >&2
	exit 1
fi

rm -rf "$out"
mkdir -p "$tree"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
		[ -e "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -xf - -C "$tree"
else
	tar -C "$src" --exclude='./build*' --exclude=./results -cf - . | tar -xf - -C "$tree"
fi
echo "build-deb: building llmcache $version in $tree" >&2
(cd "$tree" && DEB_BUILD_OPTIONS="parallel=${JOBS:-$(nproc)} ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage "$what" -us -uc) >"$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log" >&2
	echo "build-deb: dpkg-buildpackage failed; the whole log is $out/build.log" >&2
	exit 1
}
ls "$out"/*.deb
