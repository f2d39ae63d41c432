// SPDX-License-Identifier: MIT
#include "kv/policy_select.hpp"

#include "kv/score_merge.hpp"

#include <algorithm>

namespace llmcache::kv::policy {

SelectPlan plan_select(uint32_t n_tokens, uint32_t sink_tokens, uint32_t recent_tokens, uint32_t budget)
{
	SelectPlan p;
	p.n = n_tokens;
	p.sink = std::min(sink_tokens, n_tokens);
	p.recent_from = std::max(p.sink, n_tokens > recent_tokens ? n_tokens - recent_tokens : 0);
	const uint32_t kept = p.sink + (n_tokens - p.recent_from);
	p.k = budget > kept ? budget - kept : 0;
	return p;
}

std::vector<uint32_t> select_tokens(const SelectPlan &plan, std::span<const csd_score> scores)
{
	ScoreMerge merge(plan.k, plan.sink, plan.recent_from);
	if (plan.k)
		merge.add(scores.data(), scores.size());
	return merge.select(plan.n);
}

std::vector<uint32_t> pages_hit(const SelectPlan &plan, std::span<const uint32_t> positions, uint32_t page_tokens)
{
	std::vector<uint32_t> hit;
	for (uint32_t pos : positions) {
		const uint32_t pg = pos / page_tokens;
		if (pos >= plan.sink && pos < plan.recent_from && (hit.empty() || hit.back() != pg))
			hit.push_back(pg);
	}
	return hit;
}

} // namespace llmcache::kv::policy
