// SPDX-License-Identifier: MIT
#include "kv/policy_pool_update.hpp"

#include "kv/policy_spill.hpp"

#include <algorithm>

namespace llmcache::kv::policy {

std::vector<uint32_t> choose_promotions(const std::vector<PageInfo> &layer, std::span<const uint32_t> fetched,
					const Params &prm, uint32_t recent_from, uint64_t cpu_bytes, uint64_t target)
{
	std::vector<uint32_t> promoted;
	if (!prm.device || fetched.empty())
		return promoted;
	std::vector<uint32_t> low; // hits of the layer's evictable resident pages, ascending
	for (uint32_t pg = 0; pg < layer.size(); pg++)
		if (evictable(layer[pg], pg, prm, recent_from))
			low.push_back(layer[pg].hits);
	std::sort(low.begin(), low.end());
	std::vector<uint32_t> order(fetched.begin(), fetched.end());
	std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return layer[a].hits > layer[b].hits; });
	const uint64_t floor = spill_floor(target);
	uint64_t room = cpu_bytes < floor && prm.page_bytes ? (floor - cpu_bytes) / prm.page_bytes : 0;
	for (size_t i = 0, v = 0; i < order.size(); i++) {
		const uint32_t h = layer[order[i]].hits;
		if (room)
			room--;
		else if (v < low.size() && low[v] + PROMOTE_MARGIN <= h)
			v++;
		else
			continue;
		promoted.push_back(order[i]);
	}
	std::sort(promoted.begin(), promoted.end());
	return promoted;
}

} // namespace llmcache::kv::policy
