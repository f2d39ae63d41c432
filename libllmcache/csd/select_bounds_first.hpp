// SPDX-License-Identifier: MIT
/*
 * Bounds-first device selection: which spilled pages the storage device scores exactly, decided from
 * their Quest page bounds alone (Documentation/kv.md, "Bounds-first device selection").
 *
 * The exact in-storage scan reads every key of every spilled page from flash: at 32K tokens the card
 * is then flash-bound and no faster than the host reading the same keys over its link. A page's Quest
 * bound (kernels/score_quest_bounds.cpp) is an upper bound of the exact score of each of its tokens
 * and needs only the page's key minimum and maximum, 8 x dims bytes at the start of the K slab, which
 * a read of the slab's first 4 KiB blocks returns alone. So the device works in two stages:
 *   1. it reads the bounds blocks of every spilled page and scores each page by its bound;
 *   2. it takes pages best bound first (higher bound, then lower first position, NaN last: the order of
 *      score_merge.hpp) until they hold margin x k tokens, k being the select's top-k places, reads the
 *      key blocks of those pages only, scores their tokens exactly and returns their Score Blocks.
 * The host merges these with its own pool's scores as before. When every page left out has a bound
 * below the k-th best exact score of the pages taken ("the bounds separate the pages"), no token left
 * out could have entered the top-k, and the selection equals the exact one. Otherwise it is Quest's
 * approximation, measured as attention-mass recall against exact top-k (bench_kv_decode).
 *
 * Bytes: stage 1 reads ceil(8 x dims / 4096) blocks per page, stage 2 the blocks from there to the end
 * of the keys; the device keeps what stage 1 read (a block that holds both the end of the bounds and
 * the first keys is not read again). With every page taken, that is the K payload's blocks, never more
 * than the whole slabs the exact scan reads. Pure functions; the emulated backend executes them.
 */
#pragma once
#include "csd/backend.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace llmcache::csd {

// Stage 1's result for one page: its first token position, tokens and Quest bound.
struct PageBound {
	uint32_t first_pos, n_tokens;
	float bound;
};

// Stage 2's pages: indices into bounds, ascending. The best pages by bound until they hold at least
// ceil(margin x k) tokens (all pages if they hold fewer); none when k is 0.
std::vector<uint32_t> bounds_first_pages(std::span<const PageBound> bounds, size_t k, double margin);

// True when no page left out of `taken` (ascending indices into bounds) has a bound at or above
// kth_exact, the k-th best exact score among the taken pages' tokens: the selection is then exact.
bool bounds_separate(std::span<const PageBound> bounds, std::span<const uint32_t> taken, float kth_exact);

// The K slab's 4 KiB blocks each stage reads.
struct BoundsLayout {
	uint32_t bound_blocks = 0; // blocks [0, bound_blocks) hold kmin and kmax
	// One past the last block holding keys of a page of n_tokens.
	uint32_t key_end(const KvGeometry &g, uint32_t n_tokens) const;
};
BoundsLayout bounds_layout(const KvGeometry &g);

// Device bytes read for n pages of n_tokens each: the exact scan (whole slabs of slab_bytes) and the
// bounds-first one taking `taken` of them.
uint64_t exact_scan_bytes(uint64_t slab_bytes, size_t pages);
uint64_t bounds_first_bytes(const KvGeometry &g, std::span<const PageBound> bounds, std::span<const uint32_t> taken);

} // namespace llmcache::csd
