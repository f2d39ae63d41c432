#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The layer rule, checked over the #include lines of the whole tree's C and C++.
# - libllmcache/: a file in layer L (libllmcache/L/...) may include its own layer's headers, those of
#   the layers that L's line in libllmcache/layers.txt names, and of the rest of the tree only include/
#   (the uapi header).
# - The rest (libllmcache/programs.txt): a file of unit U (a directory: kmod, bpf, a tool, the daemon,
#   the tests...; the longest one holding the file) may include its own unit's files, include/, and the
#   layers and earlier units that U's line names (* is every layer and every earlier unit).
# Includes are resolved as the compiler resolves them with the project's include roots (quotes: the
# including file's directory first; then the repository root and libllmcache/, then the directories of
# the units the file's line names, such as bpf/), so "../sim/x.hpp" is caught like "sim/x.hpp"; an
# include that resolves to no file in the tree (a system header, a generated one) is not the rule's
# business.
# Usage: check-layers.sh [SOURCE_DIR]  (default: this script's repository). The build runs it (the
# target llmcache_layers, part of all); it prints one line per forbidden include and exits 1.
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
table=libllmcache/layers.txt
programs=libllmcache/programs.txt
cd "$src"

# The table lists the layers bottom up: a layer names only layers on earlier lines, so there is no cycle.
declare -A may_include
layers=()
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
	layers+=("${words[0]}")
done <"$table"

# The units, in the same way: a unit names layers and units on earlier lines. unit_may holds what a
# unit may include (layers and unit directories), unit_roots the unit directories it names by name.
declare -A unit_may unit_roots
units=() tops=()
n=0
while read -ra words; do
	n=$((n + 1))
	[[ ${#words[@]} -eq 0 || ${words[0]} == \#* ]] && continue
	unit=${words[0]%/}
	if [ -n "${unit_may[$unit]+set}" ] || [[ $unit == libllmcache || $unit == libllmcache/* ]]; then
		echo "$programs:$n: $unit is defined twice, or is under libllmcache/ (whose layers are $table's)" >&2
		exit 1
	fi
	may=() roots=()
	for name in "${words[@]:1}"; do
		name=${name%/}
		if [ "$name" = '*' ]; then
			may+=("${layers[@]}" "${units[@]}")
		elif [ -n "${may_include[$name]+set}" ]; then
			may+=("$name")
		elif [ -n "${unit_may[$name]+set}" ]; then
			may+=("$name")
			roots+=("$name")
		else
			echo "$programs:$n: $unit names $name, which is neither a layer of $table nor a unit on an" \
				"earlier line (a unit may include only layers and the units above it)" >&2
			exit 1
		fi
	done
	unit_may[$unit]=${may[*]}
	unit_roots[$unit]=${roots[*]}
	units+=("$unit")
	[[ " ${tops[*]} " == *" ${unit%%/*} "* ]] || tops+=("${unit%%/*}")
done <"$programs"

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

# the unit of file $1 (the longest unit directory holding it; empty if none), into $found
unit_of() {
	local u
	found=
	for u in "${units[@]}"; do
		[[ $1 == "$u"/* && ${#u} -gt ${#found} ]] && found=$u
	done
	return 0
}

# the layer or unit a resolved path $1 belongs to, into $kind ("layer", "unit" or "") and $found
part_of() {
	kind= found=
	if [[ $1 =~ ^libllmcache/([^/]+)/ ]]; then
		kind=layer found=${BASH_REMATCH[1]}
		return 0
	fi
	unit_of "$1"
	[ -n "$found" ] && kind=unit
	return 0
}

# The directories to read: libllmcache/ and each unit's top directory that exists.
scan=(libllmcache)
for top in "${tops[@]}"; do [ -d "$top" ] && scan+=("$top"); done

violations=0
current=
while IFS=: read -r file line text; do
	if [ "$file" != "$current" ]; then # what the file is, once per file
		current=$file own= kind=
		if [[ $file == libllmcache/* ]]; then
			[[ $file =~ ^libllmcache/([^/]+)/ ]] && own=${BASH_REMATCH[1]}
			[ -n "$own" ] && [ -n "${may_include[$own]+set}" ] && kind=layer
			allowed=
			[ -n "$kind" ] && allowed=${may_include[$own]}
		else
			unit_of "$file"
			own=$found
			[ -n "$own" ] && kind=unit
			allowed=
			[ -n "$kind" ] && allowed=${unit_may[$own]}
		fi
		own_kind=$kind
		if [ -z "$own_kind" ]; then
			if [[ $file == libllmcache/* ]]; then
				echo "$file:$line: not in a layer of $table (add its directory there)"
			else
				echo "$file:$line: not in a unit of $programs (add its directory there)"
			fi
			violations=$((violations + 1))
		fi
		roots=(. libllmcache)
		[ "$own_kind" = unit ] && roots+=(${unit_roots[$own]})
	fi
	[ -z "$own_kind" ] && continue
	[[ $text =~ include[[:space:]]*([\"\<])([^\">]+)([\">]) ]] || continue
	include=${BASH_REMATCH[1]}${BASH_REMATCH[2]}${BASH_REMATCH[3]} name=${BASH_REMATCH[2]}
	dirs=("${roots[@]}")
	[ "${BASH_REMATCH[1]}" = '"' ] && dirs=("${file%/*}" "${roots[@]}")
	to=
	for dir in "${dirs[@]}"; do
		normalize "$dir/$name"
		if [ -f "$normalized" ]; then
			to=$normalized
			break
		fi
	done
	[[ -z $to || $to == include/* ]] && continue
	part_of "$to"
	if [ "$own_kind" = layer ]; then
		if [ "$kind" != layer ]; then
			echo "$file:$line: #include $include: $to is outside libllmcache/ (of the rest of the tree," \
				"libllmcache may include only include/)"
			violations=$((violations + 1))
			continue
		fi
		[ "$found" = "$own" ] && continue
		[[ " $allowed " == *" $found "* ]] && continue
		echo "$file:$line: #include $include: layer $own may not include layer $found" \
			"($own may include: ${allowed:-no other layer}; $table)"
		violations=$((violations + 1))
		continue
	fi
	# a unit's file
	[ "$kind" = unit ] && [ "$found" = "$own" ] && continue
	if [ -n "$kind" ] && [[ " $allowed " == *" $found "* ]]; then
		continue
	fi
	case $kind in
	layer) what="layer $found" ;;
	unit) what="$to (unit $found)" ;;
	*) what="$to, which is in no layer or unit" ;;
	esac
	echo "$file:$line: #include $include: $own may not include $what" \
		"($own may include: ${allowed:-no layer or unit}; $programs)"
	violations=$((violations + 1))
done < <(grep -rnE --include='*.c' --include='*.h' --include='*.cpp' --include='*.hpp' \
	'^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]' "${scan[@]}")

if [ $violations -gt 0 ]; then
	echo "check-layers: $violations include(s) break the layer rule of $table and $programs" \
		"(Documentation/design/layers.md)" >&2
	exit 1
fi
