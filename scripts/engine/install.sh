#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the real engine of the benchmarks and tests into DIR: node-llama-cpp from npm, which ships
# llama.cpp's prebuilt CPU build, with only the prebuilt binaries of this machine (linux-x64 or
# linux-arm64, no GPU variants). Nothing is downloaded when DIR already has it. Needs node >= 20 and
# npm; without them it says what to install and exits 3, so that callers can skip with that reason.
# Usage: scripts/engine/install.sh DIR
set -euo pipefail
dir=${1:?usage: install.sh DIR}
version=3.22.1
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 20 ] || ! command -v npm >/dev/null; then
	echo "the real engine needs node >= 20 and npm (found: $(node --version 2>/dev/null || echo no node));" \
		"install them (Debian 13's nodejs and npm packages, or NodeSource's node 20+) and run again" >&2
	exit 3
fi
case $(uname -m) in
x86_64) arch=linux-x64 ;;
aarch64) arch=linux-arm64 ;;
*) echo "node-llama-cpp ships no prebuilt CPU build for $(uname -m)" >&2; exit 3 ;;
esac
mkdir -p "$dir"
cp "$(dirname "$0")/generate.mjs" "$dir/"
if [ -f "$dir/node_modules/node-llama-cpp/package.json" ] &&
	[ "$(node -p "require('$dir/node_modules/node-llama-cpp/package.json').version")" = "$version" ]; then
	exit 0
fi
cd "$dir"
[ -f package.json ] || echo '{"name":"llmcache-engine","private":true,"type":"module"}' >package.json
npm install --no-audit --no-fund --omit=optional --ignore-scripts --loglevel=error \
	"node-llama-cpp@$version" "@node-llama-cpp/$arch@$version" >&2
