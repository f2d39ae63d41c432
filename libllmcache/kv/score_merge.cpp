// SPDX-License-Identifier: MIT
#include "kv/score_merge.hpp"

#include <algorithm>

namespace llmcache::kv {

void ScoreMerge::add(const csd_score *block, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const csd_score &s = block[i];
		if (s.pos < sink_ || s.pos >= recent_from_ || k_ == 0)
			continue;
		seen_++;
		if (heap_.size() < k_) {
			heap_.push_back(s);
			std::push_heap(heap_.begin(), heap_.end(), score_better);
		} else if (score_better(s, heap_.front())) {
			std::pop_heap(heap_.begin(), heap_.end(), score_better);
			heap_.back() = s;
			std::push_heap(heap_.begin(), heap_.end(), score_better);
		}
	}
}

std::vector<uint32_t> ScoreMerge::select(uint32_t n_tokens) const
{
	std::vector<uint32_t> out;
	for (uint32_t p = 0; p < std::min(sink_, n_tokens); p++)
		out.push_back(p);
	for (const csd_score &s : heap_)
		out.push_back(s.pos);
	for (uint32_t p = std::max(sink_, recent_from_); p < n_tokens; p++)
		out.push_back(p);
	std::sort(out.begin(), out.end());
	return out;
}

} // namespace llmcache::kv
