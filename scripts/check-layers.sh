#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The layer rule of libllmcache, checked over its #include lines: a file in layer L (libllmcache/L/...)
# may include its own layer's headers, those of the layers that L's line in libllmcache/layers.txt
# names, and of the rest of the tree only include/ (the uapi header). Includes are resolved as the
# compiler resolves them with the project's one include root (quotes: the including file's directory
# first; then the repository root and libllmcache/), so "../sim/x.hpp" is caught like "sim/x.hpp"; an
# include that resolves to no file in the tree (a system header) is not the rule's business.
# Usage: check-layers.sh [SOURCE_DIR]  (default: this script's repository). The build runs it (the
# target llmcache_layers, part of all); it prints one line per forbidden include and exits 1.
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
table=libllmcache/layers.txt
cd "$src"

# The table lists the layers bottom up: a layer names only layers on earlier lines, so there is no cycle.
declare -A may_include
n=0
while read -ra words; do
	n=$((n + 1))
	[[ ${#words[@]} -eq 0 || ${words[0]} == \#* ]] && continue
	for lower in "${words[@]:1}"; do
		if [ -z "${may_include[$lower]+set}" ]; then
			echo "$table:$n: ${words[0]} names $lower, which no earlier line defines" \
				"(the table lists the layers bottom up; a layer may include only lower ones)" >&2
			exit 1
		fi
	done
	may_include[${words[0]}]=${words[*]:1}
done <"$table"

# a/b/../c -> a/c and ./a -> a, into $normalized (no subshell: this runs for every include)
normalize() {
	local out=() part IFS=/
	for part in $1; do
		case $part in
		'' | .) ;;
		..) [ ${#out[@]} -gt 0 ] && unset 'out[-1]' ;;
		*) out+=("$part") ;;
		esac
	done
	normalized="${out[*]}"
}

violations=0
while IFS=: read -r file line text; do
	[[ $file =~ ^libllmcache/([^/]+)/ ]] && own=${BASH_REMATCH[1]} || own=
	if [ -z "$own" ] || [ -z "${may_include[$own]+set}" ]; then
		echo "$file:$line: not in a layer of $table (add its directory there)"
		violations=$((violations + 1))
		continue
	fi
	[[ $text =~ include[[:space:]]*([\"\<])([^\">]+)([\">]) ]] || continue
	include=${BASH_REMATCH[1]}${BASH_REMATCH[2]}${BASH_REMATCH[3]} name=${BASH_REMATCH[2]}
	dirs=(. libllmcache)
	[ "${BASH_REMATCH[1]}" = '"' ] && dirs=("${file%/*}" . libllmcache)
	to=
	for dir in "${dirs[@]}"; do
		normalize "$dir/$name"
		if [ -f "$normalized" ]; then
			to=$normalized
			break
		fi
	done
	if [[ -z $to || $to == include/* ]]; then
		continue
	elif [[ ! $to =~ ^libllmcache/([^/]+)/ ]]; then
		echo "$file:$line: #include $include: $to is outside libllmcache/ (of the rest of the tree," \
			"libllmcache may include only include/)"
		violations=$((violations + 1))
		continue
	fi
	to=${BASH_REMATCH[1]}
	if [ "$to" = "$own" ] || [[ " ${may_include[$own]} " == *" $to "* ]]; then
		continue
	fi
	echo "$file:$line: #include $include: layer $own may not include layer $to" \
		"($own may include: ${may_include[$own]:-no other layer}; $table)"
	violations=$((violations + 1))
done < <(grep -rnE --include='*.c' --include='*.h' --include='*.cpp' --include='*.hpp' \
	'^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]' libllmcache)

if [ $violations -gt 0 ]; then
	echo "check-layers: $violations include(s) break the layer rule of $table" \
		"(Documentation/design/layers.md)" >&2
	exit 1
fi
