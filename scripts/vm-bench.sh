#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make vm-bench: llmcache.ko against the stock page cache on llmworkload's decoder, inside a VM booting
# each packaged kernel (tests/vm/run.sh, guest half tests/vm/bench-guest.sh). The decoder's weights loop
# is 1.5x the guest's available page cache; the module pins what its budget allows. Reads from the
# scratch disk are throttled (LLMCACHE_VM_BENCH_DISK_BPS, default 25 MB/s) so that, under TCG, disk and
# page-cache reads keep roughly the 1:10 bandwidth ratio of a phone's flash and DRAM: without it the
# "disk" is the host's page cache and a miss costs little more than a hit.
#
# Usage: scripts/vm-bench.sh BUILD_DIR [RESULTS_DIR]
# Environment: LLMCACHE_VM_KERNELS (default "6.12 6.1"), LLMCACHE_VM_BENCH_MEM (guest memory, 320M),
# LLMCACHE_VM_BENCH_DISK_BPS, and the LLMCACHE_BENCH_* knobs of tests/vm/bench-guest.sh (for instance
# LLMCACHE_BENCH_PARTS=fit LLMCACHE_BENCH_FIT_PAIRS=8 for the fits-in-memory rounds alone).
set -euo pipefail
build=$(realpath "${1:?usage: scripts/vm-bench.sh BUILD_DIR [RESULTS_DIR]}")
results=${2:-results}
src=$(cd "$(dirname "$0")/.." && pwd)
mem=${LLMCACHE_VM_BENCH_MEM:-320M}
bps=${LLMCACHE_VM_BENCH_DISK_BPS:-25000000}
mkdir -p "$results"

echo "# make vm-bench on $(hostname): $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
	"qemu TCG, guest memory $mem, disk reads throttled to $((bps / 1000000)) MB/s"
for k in ${LLMCACHE_VM_KERNELS:-6.12 6.1}; do
	out=$results/vm-bench-$k.txt
	LLMCACHE_BUILD=$build LLMCACHE_BIN=$build/bin "$src/tests/vm/run.sh" --mem "$mem" --disk 2G \
		--disk-read-bps "$bps" --timeout 3000 "$k" -- sh "$src/tests/vm/bench-guest.sh" >"$out" 2>&1 || {
		echo "vm-bench: the run on $k failed:" >&2
		cat "$out" >&2
		exit 1
	}
	grep '^guest:' "$out"
	awk '
	$1 == "result" {
		key = $2 " " $3; tps[key] = $4; disk[key] = $5; maj[key] = $6; pinned[key] = $7; budget[key] = $8; n = $9
	}
	$1 == "profile" { prof[$2 " " $3] = prof[$2 " " $3] " " $4 "%" }
	$1 == "fit" { fit[$2 " " $3] = fit[$2 " " $3] " " $5; run[$2 " " $3 " " $4] = $5; rounds[$2] = $4 + 1 }
	function median(v, n,   i, j, t) { # of v[1..n]
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
		return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
	}
	function round_ratio(a, mode,   r, v) { # the median over rounds of mode against unloaded, same round
		for (r = 0; r < rounds[a]; r++)
			v[r + 1] = run[a " " mode " " r] / run[a " unloaded " r]
		return median(v, rounds[a])
	}
	END {
		printf "%-6s %-9s %10s %16s %12s %10s %16s\n", "access", "module", "tokens/s", "disk MiB/token",
			"majflt/tok", "pinned", "floor MiB/token"
		split("pread mmap", access, " ")
		for (i = 1; i <= 2; i++) {
			a = access[i]
			split("unloaded nodrop loaded", modes, " ")
			for (m = 1; m <= 3; m++) {
				mode = modes[m]; key = a " " mode
				if (!(key in tps)) continue
				floor = (n - (budget[key] < n ? budget[key] : n)) * 4096 / 1048576
				printf "%-6s %-9s %10.3f %16.1f %12d %10d %16.1f\n", a, mode, tps[key],
					disk[key] / 1048576, maj[key], pinned[key], floor
			}
			u = a " unloaded"; l = a " loaded"; k = a " nodrop"; h = a " hooks"
			if (tps[u] > 0 && (l in tps))
				printf "%-6s speed-up %.2fx (%.2fx with the loop tails kept), disk reads per token %.2fx the floor\n",
					a, tps[l] / tps[u], tps[k] / tps[u], disk[l] / ((n - (budget[l] < n ? budget[l] : n)) * 4096)
			if (rounds[a])
				printf "%-6s fits in memory: tokens/s against unloaded in the same round, median of %d rounds: %.3f hooks only, %.3f loaded (unloaded:%s; hooks:%s; loaded:%s)\n",
					a, rounds[a], round_ratio(a, "hooks"), round_ratio(a, "loaded"), fit[u], fit[h], fit[l]
			if (h in prof)
				printf "%-6s fits in memory: share of the decoder'"'"'s CPU under the module'"'"'s hooks (perf): hooks only%s; loaded%s\n",
					a, prof[h], prof[l]
		}
	}' "$out"
done
