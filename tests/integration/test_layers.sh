#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The layer rule (libllmcache/layers.txt for libllmcache, libllmcache/programs.txt for the module, bpf/,
# the tools, the daemon, the tests and the example; checked by scripts/check-layers.sh, which the build
# runs): the tree as it is passes; a scratch copy of it fails once one forbidden include is planted in
# it (csd/ including kv/kv_store.hpp; trace/ reaching sim/ by a relative path; a directory that is no
# layer; a tool including a layer its line does not name, or another tool's header; the daemon
# reaching a tool; a layer reaching the daemon; a tool directory that is in no unit), with a message
# that names the file, the line, the include and the rule; and a table with a cycle fails.
set -euo pipefail
src=${LLMCACHE_SRC:?LLMCACHE_SRC is not set}
bin=${LLMCACHE_BIN:?LLMCACHE_BIN is not set}
. "$(dirname "$0")/check.sh"
work=$(mktemp -d "$(dirname "$bin")/layers-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

# copy NAME: a copy of what the check reads (libllmcache/, the top directories of programs.txt's units,
# the script) as $work/NAME
copy() {
	local dir
	mkdir -p "$work/$1/scripts"
	for dir in libllmcache include kmod bpf examples tools daemon tests; do
		[ -d "$src/$dir" ] && cp -r "$src/$dir" "$work/$1/"
	done
	cp "$src/scripts/check-layers.sh" "$work/$1/scripts/"
}

# plant NAME FILE LINE TEXT: copy NAME with TEXT as line LINE of FILE
plant() {
	local tree=$work/$1
	copy "$1"
	if [ -f "$tree/$2" ]; then
		sed -i "${3}i $4" "$tree/$2"
	else
		mkdir -p "$(dirname "$tree/$2")"
		echo "$4" >"$tree/$2"
	fi
}

# fails NAME EXPECTED...: the check of tree NAME exits 1 and its output holds each EXPECTED
fails() {
	local tree=$work/$1 status=0 want
	shift
	bash "$tree/scripts/check-layers.sh" "$tree" >"$tree.out" 2>&1 || status=$?
	sed 's/^/    /' "$tree.out"
	[ $status -eq 1 ] || { echo "    exit status $status, not 1"; return 1; }
	for want in "$@"; do
		grep -qF -- "$want" "$tree.out" || { echo "    no \"$want\" in the output"; return 1; }
	done
}

check "the tree as it is keeps its layers" bash "$src/scripts/check-layers.sh" "$src"

plant csd_kv libllmcache/csd/backend.cpp 3 '#include "kv/kv_store.hpp"'
check "csd/ including kv/kv_store.hpp fails, naming the file, the line, the include and the rule" \
	fails csd_kv 'libllmcache/csd/backend.cpp:3: #include "kv/kv_store.hpp"' \
	'layer csd may not include layer kv' 'csd may include: kvio' 'libllmcache/layers.txt'

plant trace_sim libllmcache/trace/csv.cpp 2 '#include "../sim/policy.hpp"'
check "trace/ including ../sim/policy.hpp (relative) fails" \
	fails trace_sim 'libllmcache/trace/csv.cpp:2: #include "../sim/policy.hpp"' \
	'layer trace may not include layer sim'

plant stray libllmcache/stray/stray.cpp 1 '#include "util/units.hpp"'
check "a directory that is no layer fails" fails stray 'libllmcache/stray/stray.cpp:1: not in a layer'

copy cycle
sed -i 's/^kvio$/kvio csd/' "$work/cycle/libllmcache/layers.txt"
check "a table with a cycle (kvio naming csd) fails" \
	fails cycle 'layers.txt:' 'kvio names csd, which no earlier line defines'

# The rest of the tree (programs.txt).
plant tool_sim tools/llmcachectl/kv.cpp 3 '#include "sim/policy.hpp"'
check "llmcachectl including sim/policy.hpp (sim is not on its line) fails, naming the rule" \
	fails tool_sim 'tools/llmcachectl/kv.cpp:3: #include "sim/policy.hpp"' \
	'tools/llmcachectl may not include layer sim' 'tools/llmcachectl may include: core util kv' \
	'libllmcache/programs.txt'

plant tool_tool tools/llmreplay/main.cpp 3 '#include "../llmcachectl/kmod.hpp"'
check "llmreplay including llmcachectl's kmod.hpp (another tool) fails" \
	fails tool_tool 'tools/llmreplay/main.cpp:3: #include "../llmcachectl/kmod.hpp"' \
	'tools/llmreplay may not include tools/llmcachectl/kmod.hpp (unit tools/llmcachectl)'

plant daemon_tool daemon/main.cpp 3 '#include "tools/llmtrace/strace_text.hpp"'
check "the daemon including a tool's header fails" \
	fails daemon_tool 'daemon/main.cpp:3: #include "tools/llmtrace/strace_text.hpp"' \
	'daemon may not include tools/llmtrace/strace_text.hpp'

plant layer_daemon libllmcache/kv/server.cpp 3 '#include "../../daemon/bpf_mode.hpp"'
check "a layer (kv) including the daemon's header fails" \
	fails layer_daemon 'libllmcache/kv/server.cpp:3: #include "../../daemon/bpf_mode.hpp"' \
	'daemon/bpf_mode.hpp is outside libllmcache/'

plant new_tool tools/llmnew/main.cpp 1 '#include "util/units.hpp"'
check "a tool directory that is in no unit fails" \
	fails new_tool 'tools/llmnew/main.cpp:1: not in a unit of libllmcache/programs.txt'

plant tests_tool tests/unit/test_layers_planted.cpp 1 '#include "tools/llmcachectl/kmod.hpp"'
check "a test including a tool's header passes (tests may include anything)" \
	bash "$work/tests_tool/scripts/check-layers.sh" "$work/tests_tool"

copy unit_cycle
sed -i 's/^bpf .*/bpf util daemon/' "$work/unit_cycle/libllmcache/programs.txt"
check "programs.txt naming a later unit (bpf naming daemon) fails" \
	fails unit_cycle 'programs.txt:' 'bpf names daemon, which is neither a layer'

[ $fails -eq 0 ]
