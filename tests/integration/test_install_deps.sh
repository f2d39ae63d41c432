#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/install-deps.sh --check, which `make` (all) runs before it builds: it names the missing
# packages and the command that installs them, exits 1, and installs nothing (an apt-get first in PATH
# records any call), as root or not; with nothing missing it says nothing and exits 0. Without --check,
# a user who is not root gets the same message instead of an apt-get that would fail.
set -euo pipefail
SRC=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
command -v dpkg-query >/dev/null || { echo "SKIP: no dpkg-query (not a Debian system)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
mkdir "$tmp/bin"
printf '#!/bin/sh\necho "$0 $*" >>%s/called\n' "$tmp" >"$tmp/bin/apt-get"
chmod +x "$tmp/bin/apt-get"
printf '# a list as scripts/deps has them\nllmcache-no-such-package  # missing\nbash\n' >"$tmp/missing.list"
echo bash >"$tmp/present.list"

rc=0
out=$(PATH="$tmp/bin:$PATH" "$SRC/scripts/install-deps.sh" --check "$tmp/missing.list" 2>&1) || rc=$?
check "--check with a package missing exits 1 (rc $rc)" test $rc -eq 1
check "--check names the missing package" grep -q 'llmcache-no-such-package' <<<"$out"
check "--check does not name what is installed" test -z "$(grep -ow bash <<<"$out")"
check "--check says how to install it" grep -q 'make deps' <<<"$out"
check "--check installs nothing" test ! -e "$tmp/called"

rc=0
out=$("$SRC/scripts/install-deps.sh" --check "$tmp/present.list" 2>&1) || rc=$?
check "--check with nothing missing exits 0 (rc $rc) and says nothing" test $rc -eq 0 -a -z "$out"

if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	chmod 755 "$tmp"
	chmod 644 "$tmp"/*.list
	rc=0
	out=$(PATH="$tmp/bin:$PATH" setpriv --reuid nobody --regid nogroup --clear-groups \
		"$SRC/scripts/install-deps.sh" "$tmp/missing.list" 2>&1) || rc=$?
	check "not root, without --check: exits 1 (rc $rc) and says how to install" \
		test $rc -eq 1 -a -n "$(grep 'make deps' <<<"$out")"
	check "not root, without --check: installs nothing" test ! -e "$tmp/called"
fi
check "make's all target has no deps prerequisite: it checks, it does not install" \
	grep -qE '^all:$' "$SRC/Makefile"
[ "$fails" -eq 0 ] || exit 1
echo PASS
