// SPDX-License-Identifier: MIT
#include "kv/policy_precision.hpp"

#include "kv/score_merge.hpp"

#include <algorithm>
#include <cmath>

namespace llmcache::kv::policy {

std::vector<uint32_t> high_plane_only(std::span<const csd_score> top, double full)
{
	std::vector<csd_score> s(top.begin(), top.end());
	std::sort(s.begin(), s.end(), score_better);
	const double f = std::clamp(full, 0.0, 1.0);
	const size_t keep = std::min(s.size(), (size_t)std::ceil(f * (double)s.size() - 1e-9));
	std::vector<uint32_t> out;
	for (size_t i = keep; i < s.size(); i++)
		out.push_back(s[i].pos);
	std::sort(out.begin(), out.end());
	return out;
}

} // namespace llmcache::kv::policy
