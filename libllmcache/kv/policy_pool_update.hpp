// SPDX-License-Identifier: MIT
/*
 * The pool update after a select (HillInfer's bidirectional pools, Sec. 3.2): of the spilled pages that
 * hold selected tokens, which come back to memory. Most selected first, a page comes back while the
 * CPU pool has room under its target, or when a page of the layer that could be spilled in its place
 * was selected at least PROMOTE_MARGIN selects fewer: each such resident page is paired with one
 * promotion, so the spill that follows evicts exactly those pages. The pairing and the margin keep
 * pages from ping-ponging: with a repeated query the placement settles and stops moving.
 */
#pragma once
#include "kv/policy.hpp"

#include <span>

namespace llmcache::kv::policy {

constexpr uint32_t PROMOTE_MARGIN = 2;

// layer: the layer's pages (hits already counted for this select); fetched: the spilled pages holding
// selected tokens, ascending; recent_from: the select's recent window. Returns pages, ascending.
std::vector<uint32_t> choose_promotions(const std::vector<PageInfo> &layer, std::span<const uint32_t> fetched,
					const Params &prm, uint32_t recent_from, uint64_t cpu_bytes, uint64_t target);

} // namespace llmcache::kv::policy
