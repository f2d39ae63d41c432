# SPDX-License-Identifier: MIT
# Memory cgroup helpers for the benchmarks and tests, sourced: cgroup v1 (a "memory" hierarchy) or v2.
# memcg_root: sets cgroot (where to make groups) and limit_file (their limit's file name), enabling the
# v2 controller for children; returns 1 when the kernel has no memory controller.
memcg_root() {
	if [ -d /sys/fs/cgroup/memory ]; then
		cgroot=/sys/fs/cgroup/memory limit_file=memory.limit_in_bytes
	elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
		cgroot=/sys/fs/cgroup limit_file=memory.max
		echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
	else
		return 1
	fi
}
# memcg_oom_kills DIR: the OOM kills in that group so far.
memcg_oom_kills() {
	if [ -f "$1/memory.events" ]; then awk '$1 == "oom_kill" { print $2 }' "$1/memory.events"
	else awk '$1 == "oom_kill" { print $2 }' "$1/memory.oom_control" 2>/dev/null || echo 0; fi
}
