#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian packages llmcache needs (Debian 12). Fast when they are already there.
# Usage: scripts/install-deps.sh [build|all]   (build: what the userspace build and tests need)
set -euo pipefail

build_packages=(build-essential cmake pkg-config libcmocka-dev libboost-program-options-dev strace python3)
packages=("${build_packages[@]}")

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "llmcache needs these Debian packages: ${missing[*]}" >&2
	echo "Run 'sudo make deps' (or install them with apt-get) and try again." >&2
	exit 1
fi
echo "Installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
