// SPDX-License-Identifier: MIT
/*
 * What the KV policy decides from: the parameters of a session's placement (page size, the always-kept
 * sink and recent tokens, the CPU pool's byte budget and HillInfer's beta) and a snapshot of its pool
 * (per layer and page: tokens held, selects that chose one of its tokens, whether it is in memory).
 * The decisions themselves are pure functions over these, one algorithm per file:
 *  - policy_spill.hpp: the CPU pool's byte target, when an append must spill, which pages go, and
 *    which device copies of resident pages give up their slots when the device is full;
 *  - policy_select.hpp: the always-kept set, the top-k over the scores, and which pages count a hit;
 *  - policy_pool_update.hpp: which fetched pages come back to memory after a select.
 * KvStore (kv_store.cpp) executes them with real pages and I/O; the KV replay (kv_replay.hpp) executes
 * them over a recorded trace with no data at all, so both make the same decisions on the same input.
 */
#pragma once
#include <cstdint>
#include <vector>

namespace llmcache::kv::policy {

struct Params {
	uint32_t page_tokens = 32, sink_tokens = 4, recent_tokens = 64;
	uint64_t cpu_budget = 256ull << 20; // bytes of pages kept in memory
	uint64_t page_bytes = 0;	    // bytes a page in memory counts against the budget
	bool device = true;		    // a storage pool exists: pages can spill
};

struct PageInfo {
	uint32_t n_tokens = 0, hits = 0;
	bool resident = true;
	// The device holds an up-to-date copy of the page: always for a spilled page; for a resident one,
	// when it came back from the device unchanged, or was written through when it filled (its slots
	// are kept, so spilling it writes nothing). No decision but the choice of copies to drop reads it;
	// the KV replay keeps it to count clean spills.
	bool device_copy = false;
};

struct PageRef {
	uint32_t layer = 0, page = 0;
	bool operator==(const PageRef &o) const { return layer == o.layer && page == o.page; }
};

// pages[layer][page]; tokens[layer] = tokens appended to the layer.
struct PoolSnapshot {
	std::vector<std::vector<PageInfo>> pages;
	std::vector<uint32_t> tokens;
	uint64_t cpu_bytes = 0;
};

// The first position of a layer's recent window: the last recent_tokens of n stay in memory.
inline uint32_t recent_start(uint32_t n_tokens, uint32_t recent_tokens)
{
	return n_tokens > recent_tokens ? n_tokens - recent_tokens : 0;
}

// A page may leave memory: in memory, full, and holding neither sink tokens nor recent ones.
inline bool evictable(const PageInfo &p, uint32_t page, const Params &prm, uint32_t recent_from)
{
	const uint32_t P = prm.page_tokens;
	return p.resident && p.n_tokens == P && page * P >= prm.sink_tokens && (page + 1) * P <= recent_from;
}

} // namespace llmcache::kv::policy
