// SPDX-License-Identifier: MIT
/*
 * The pool update after a select (HillInfer's bidirectional pools, Sec. 3.2): of the spilled pages that
 * hold selected tokens, which come back to memory. Most selected first, a page comes back while the
 * CPU pool has room under the floor a spill leaves it at (7/8 of its target, policy_spill.hpp), or when
 * a page of the layer that could be spilled in its place was selected at least PROMOTE_MARGIN selects
 * fewer: each such resident page is paired with one promotion, and the spills that follow evict the
 * least selected pages first, those. The pairing and the margin keep pages from ping-ponging: with a
 * repeated query the placement settles and stops moving.
 * Room is counted up to the floor, not up to the target: the slack between them is what lets a spill
 * batch its pages, and refilling it at every select without a pair kept bringing back pages (one whole
 * page read each) once the placement had settled, 10 pages per layer and step at 32K context in
 * bench_kv_decode, against none now (Documentation/kv.md, "Clean demotion and the pool update").
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
