#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian packages llmcache needs (Debian 12). The lists are scripts/deps/*.list, one per
# part of the project: one package per line, '#' comments; NAME/bookworm-backports takes the package
# from bookworm-backports, which is enabled first when a list asks for it. Fast when all is installed.
# With --check it installs nothing: it names what is missing and the command that installs it, and
# exits 1 if anything is (make builds with it and needs no root).
# Usage: scripts/install-deps.sh [--check] [LIST...]   (default: every list)
set -euo pipefail
cd "$(dirname "$0")/deps"
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
lists=("$@")
[ ${#lists[@]} -gt 0 ] || lists=(*.list)

wanted=()
for list in "${lists[@]}"; do
	[ -f "$list" ] || list="$list.list"
	while read -r line; do
		line=${line%%#*}
		[ -n "${line// }" ] && wanted+=($line)
	done <"$list"
done

missing=()
for spec in "${wanted[@]}"; do
	dpkg-query -W -f='${Status}' "${spec%%/*}" 2>/dev/null | grep -q 'install ok installed' || missing+=("$spec")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ $check -eq 1 ] || [ "$(id -u)" -ne 0 ]; then
	echo "llmcache needs these Debian packages: ${missing[*]}" >&2
	echo "Install them with 'sudo make deps' (root: 'make deps'), then run make again." >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
backports=/etc/apt/sources.list.d/llmcache-bookworm-backports.sources
if [[ " ${missing[*]}" == */bookworm-backports* ]] && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	echo "Enabling bookworm-backports (for the 6.12 kernel and newer BPF tools) in $backports"
	cat >"$backports" <<SOURCES
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
fi
echo "Installing Debian packages: ${missing[*]}"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
