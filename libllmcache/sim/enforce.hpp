// SPDX-License-Identifier: MIT
// The enforced replay: what an mmap engine reads from disk per token in a memory cgroup, with the kernel
// alone or with llmcache enforcing the planner's decisions (libllmcache/core/plan.h), predicted from a
// recorded trace of that engine.
//
// The replay models the engine's weights file only (the trace's largest file): the cgroup's limit less the
// engine's own memory (anonymous memory and the code it keeps) is the page cache the file has. An mmap
// engine reads every weight in every pass (one pass a token), but a trace shows a later pass only where it
// faulted (pages that stayed mapped are not seen again), so the replay runs every pass the trace holds in
// the order of the later pass that shows the most blocks, each block it lacks after the block below it
// (passes: the engine going back by more than half the file after reading a quarter of it). A miss reads
// the kernel's read-around window centred on the fault (what is not resident yet). The scan and tail
// drops of files read with read() are not modelled: an mmap engine's trace has none. Modes:
//   stock   the kernel alone, as one LRU list: a loop larger than the cache is read whole every pass. The
//           kernel's active list keeps a part of it (a fifth of the 604 MiB model at 107% on this
//           machine's kernel), which an LRU does not: stock is an upper bound.
//   module  llmcache.ko: the head of the file (llc_plan_heads) pinned within llc_plan_mapped_budget (its
//           margin of two stream units and LLC_PLAN_CODE_KEPT of code), the rest through the room left,
//           LRU; where llc_plan_read_ahead allows it, the stream read ahead by llc_plan_prefetch from
//           the engine's position (llc_plan_position) and what the engine passed dropped by
//           llc_plan_passed (kmod/stream.c).
//   daemon  llmcached --mode=bpf: the head pinned within the same budget (its margin and the engine's
//           code as given), the stream read ahead as the module's, and what the engine passed dropped
//           in any case.
// Documentation/replay.md, "Enforced replay", has the figures next to the measured ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/replay.hpp"

namespace llmcache::sim {

enum class EnforceMode { stock, module, daemon };

struct EnforceConfig {
	uint64_t limit = 0;        // the engine's memory cgroup limit, bytes
	uint64_t anon = 0;         // the engine's anonymous memory, bytes
	uint64_t code = 0;         // the code it keeps using (binary, libraries), bytes
	uint64_t read_around = 128 << 10; // the kernel's read-around of a fault: the device's read_ahead_kb
	uint64_t pin_budget = UINT64_MAX; // the configured pin budget, bytes
};

struct EnforceResult {
	EnforceMode mode;
	uint64_t pinned = 0;      // blocks pinned (the head)
	uint64_t room = 0;        // blocks of page cache the stream has besides the pins
	uint64_t read_first = 0;  // blocks read in the first pass (cold)
	uint64_t read_later = 0;  // blocks read in the passes after it
	uint64_t read_ahead = 0;  // of those, blocks read ahead of the engine
	uint64_t dropped = 0;     // blocks dropped once the engine passed them
	double later_per_pass(uint64_t passes) const { return passes > 1 ? double(read_later) / double(passes - 1) : 0; }
};

// The loop the replay runs: the weights file of a trace and the order of its blocks.
struct EnforceLoop {
	uint32_t file = 0;           // file number in the trace
	uint64_t blocks = 0;         // the file's size as the trace knows it (its highest block + 1)
	std::vector<uint32_t> order; // the blocks the trace touched, in the order of a pass
	uint64_t passes = 0;         // the engine's passes over it in the trace
};

// The largest file of t and its passes. Throws std::runtime_error when the trace has no file of at least
// 1 MiB touched or more than 2^32 blocks in it.
EnforceLoop enforce_loop(const Trace &t);

std::string enforce_mode_name(EnforceMode m);
// "stock", "module" or "daemon"; throws std::invalid_argument naming them.
EnforceMode parse_enforce_mode(const std::string &name);

// Replays loop.passes passes of loop.order under mode. Throws std::invalid_argument when the cgroup
// leaves the file no page cache (limit <= anon + code).
EnforceResult replay_enforced(const EnforceLoop &loop, EnforceMode mode, const EnforceConfig &c);

} // namespace llmcache::sim
