// SPDX-License-Identifier: MIT
#include "csd/backend.hpp"

#include <cerrno>

namespace llmcache::csd {

void score_page(const KvGeometry &g, Estimator est, const float *q, const uint8_t *k_payload, uint32_t first_pos,
		uint32_t n_tokens, uint32_t block_tokens, const BlockFn &fn)
{
	const uint32_t dims = g.dims();
	auto kmin = reinterpret_cast<const float *>(k_payload), kmax = kmin + dims;
	std::vector<csd_score> out(n_tokens);
	uint32_t blocks = 0;
	if (est == Estimator::QuestBounds) {
		// One bound per page, given to each of its tokens so selection stays per token.
		csd_score bound;
		score_quest_bounds(q, kmin, kmax, 1, &first_pos, g.q_heads, g.kv_heads, g.head_dim, 1, &bound, &blocks);
		for (uint32_t t = 0; t < n_tokens; t++)
			out[t] = {first_pos + t, bound.score};
	} else {
		auto keys = reinterpret_cast<const uint32_t *>(k_payload + 8ull * dims);
		score_exact(q, keys, n_tokens, first_pos, g.q_heads, g.kv_heads, g.head_dim, g.dtype, block_tokens,
			    out.data(), &blocks);
	}
	for (uint32_t i = 0; i < n_tokens; i += block_tokens)
		fn(out.data() + i, std::min(block_tokens, n_tokens - i));
}

int make_backend(const BackendConfig &cfg, std::unique_ptr<Backend> &out, std::string &err, std::string &note)
{
	if (cfg.name == "none") {
		out = make_none_backend(cfg);
		return 0;
	}
	if (cfg.name == "emulated")
		return make_emulated_backend(cfg, out, err);
	if (cfg.name == "xrt") {
		std::string why;
		if (make_xrt_backend(cfg, out, why) == 0)
			return 0;
		note = "xrt backend unavailable (" + why + "); using the emulated backend";
		return make_emulated_backend(cfg, out, err);
	}
	err = "unknown computational-storage backend '" + cfg.name + "': use none, emulated or xrt";
	return -EINVAL;
}

} // namespace llmcache::csd
