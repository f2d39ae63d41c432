// SPDX-License-Identifier: MIT
#include "kv/policy_spill.hpp"

#include <algorithm>

namespace llmcache::kv::policy {

uint64_t cpu_target(const Params &prm, double beta, uint64_t total_bytes)
{
	if (!prm.device || !(beta > 0))
		return prm.cpu_budget;
	return std::min<uint64_t>(prm.cpu_budget, (uint64_t)((double)total_bytes * beta / (1 + beta)));
}

bool must_spill_after_append(const Params &prm, uint64_t cpu_bytes, uint64_t target, bool page_full)
{
	return cpu_bytes > prm.cpu_budget || (page_full && cpu_bytes > target);
}

std::vector<PageRef> choose_spill_victims(const PoolSnapshot &pool, const Params &prm, uint64_t target)
{
	struct Candidate {
		uint32_t hits;
		PageRef ref;
	};
	std::vector<Candidate> cand;
	for (uint32_t l = 0; l < pool.pages.size(); l++) {
		const uint32_t recent_from = recent_start(pool.tokens[l], prm.recent_tokens);
		for (uint32_t pg = 0; pg < pool.pages[l].size(); pg++)
			if (evictable(pool.pages[l][pg], pg, prm, recent_from))
				cand.push_back({pool.pages[l][pg].hits, {l, pg}});
	}
	const uint64_t floor = spill_floor(target), pb = prm.page_bytes;
	const uint64_t excess = pool.cpu_bytes - std::min(floor, pool.cpu_bytes);
	const size_t want = std::min<size_t>(cand.size(), pb ? (excess + pb - 1) / pb : cand.size());
	std::partial_sort(cand.begin(), cand.begin() + want, cand.end(), [](const Candidate &a, const Candidate &b) {
		return a.hits != b.hits	       ? a.hits < b.hits
		       : a.ref.page != b.ref.page ? a.ref.page < b.ref.page
						  : a.ref.layer < b.ref.layer;
	});
	std::vector<PageRef> victims(want);
	for (size_t i = 0; i < want; i++)
		victims[i] = cand[i].ref;
	return victims;
}

std::vector<PageRef> choose_copies_to_drop(const PoolSnapshot &pool, const std::vector<PageRef> &victims, size_t pages)
{
	struct Candidate {
		uint32_t hits;
		PageRef ref;
	};
	std::vector<Candidate> cand;
	for (uint32_t l = 0; l < pool.pages.size(); l++)
		for (uint32_t pg = 0; pg < pool.pages[l].size(); pg++) {
			const PageInfo &p = pool.pages[l][pg];
			if (p.resident && p.device_copy && std::find(victims.begin(), victims.end(), PageRef{l, pg}) == victims.end())
				cand.push_back({p.hits, {l, pg}});
		}
	const size_t want = std::min(cand.size(), pages);
	std::partial_sort(cand.begin(), cand.begin() + want, cand.end(), [](const Candidate &a, const Candidate &b) {
		return a.hits != b.hits	       ? a.hits > b.hits
		       : a.ref.page != b.ref.page ? a.ref.page > b.ref.page
						  : a.ref.layer > b.ref.layer;
	});
	std::vector<PageRef> drop(want);
	for (size_t i = 0; i < want; i++)
		drop[i] = cand[i].ref;
	return drop;
}

} // namespace llmcache::kv::policy
