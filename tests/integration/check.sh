# SPDX-License-Identifier: MIT
# Sourced by the integration tests: check DESCRIPTION COMMAND... runs the command, prints "ok:" or
# "FAIL:" with the description, and counts the failures in $fails, which the test turns into its exit
# status at the end.
fails=0
check() {
	local what=$1; shift
	if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}
