// SPDX-License-Identifier: MIT
/*
 * The selection rule of a decode step (HillInfer Alg. 1, with StreamingLLM's always-kept tokens): for
 * a layer of n tokens and a token budget, the sink tokens [0, sink) and the recent window
 * [recent_from, n) are always selected, and k = budget minus their number is filled with the best
 * scores of the rest (score_merge.hpp: higher score, then lower position, NaN last). Pages wholly
 * inside the always-kept ranges need no score. Every page holding a top-k token (not an always-kept
 * one) counts one hit per select: HillInfer's hit-rate table, which the spill and pool-update
 * policies read.
 */
#pragma once
#include "csd/kernels/kernel_common.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace llmcache::kv::policy {

struct SelectPlan {
	uint32_t n = 0, sink = 0, recent_from = 0;
	size_t k = 0; // top-k places beyond the always-kept tokens
	// A page with tokens outside the always-kept ranges: its tokens are scored.
	bool scored(uint32_t page, uint32_t page_tokens) const
	{
		return (page + 1) * page_tokens > sink && page * page_tokens < recent_from;
	}
};

SelectPlan plan_select(uint32_t n_tokens, uint32_t sink_tokens, uint32_t recent_tokens, uint32_t budget);

// The selected positions, ascending: the always-kept ones and the top k of scores.
std::vector<uint32_t> select_tokens(const SelectPlan &plan, std::span<const csd_score> scores);

// The pages that count a hit for this selection, ascending.
std::vector<uint32_t> pages_hit(const SelectPlan &plan, std::span<const uint32_t> positions, uint32_t page_tokens);

} // namespace llmcache::kv::policy
