// SPDX-License-Identifier: MIT
// Bounds-first device selection: select_bounds_first.hpp says what it decides and why.
#include "csd/select_bounds_first.hpp"

#include "kvio/slab.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace llmcache::csd {
namespace {

// a ranks above b: higher bound, then lower position, NaN last (score_merge.hpp's order).
bool page_better(const PageBound &a, const PageBound &b)
{
	const bool an = std::isnan(a.bound), bn = std::isnan(b.bound);
	if (an != bn)
		return bn;
	if (!an && a.bound != b.bound)
		return a.bound > b.bound;
	return a.first_pos < b.first_pos;
}

uint32_t blocks_for(uint64_t bytes) { return (uint32_t)((bytes + kv::SLAB_ALIGN - 1) / kv::SLAB_ALIGN); }

} // namespace

std::vector<uint32_t> bounds_first_pages(std::span<const PageBound> bounds, size_t k, double margin)
{
	std::vector<uint32_t> order(bounds.size());
	std::iota(order.begin(), order.end(), 0u);
	if (k == 0)
		return {};
	std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return page_better(bounds[a], bounds[b]); });
	const double want = std::ceil(std::max(margin, 1.0) * (double)k);
	double held = 0;
	size_t n = 0;
	while (n < order.size() && held < want)
		held += bounds[order[n++]].n_tokens;
	order.resize(n);
	std::sort(order.begin(), order.end());
	return order;
}

bool bounds_separate(std::span<const PageBound> bounds, std::span<const uint32_t> taken, float kth_exact)
{
	if (std::isnan(kth_exact))
		return taken.size() == bounds.size();
	for (uint32_t i = 0, t = 0; i < bounds.size(); i++) {
		if (t < taken.size() && taken[t] == i) {
			t++;
			continue;
		}
		if (std::isnan(bounds[i].bound) || bounds[i].bound >= kth_exact)
			return false;
	}
	return true;
}

uint32_t BoundsLayout::key_end(const KvGeometry &g, uint32_t n_tokens) const { return blocks_for(g.k_payload(n_tokens)); }

BoundsLayout bounds_layout(const KvGeometry &g) { return {blocks_for(8ull * g.dims())}; }

uint64_t exact_scan_bytes(uint64_t slab_bytes, size_t pages) { return slab_bytes * pages; }

uint64_t bounds_first_bytes(const KvGeometry &g, std::span<const PageBound> bounds, std::span<const uint32_t> taken)
{
	const BoundsLayout L = bounds_layout(g);
	uint64_t blocks = (uint64_t)L.bound_blocks * bounds.size();
	for (uint32_t i : taken)
		blocks += L.key_end(g, bounds[i].n_tokens) - L.bound_blocks;
	return blocks * kv::SLAB_ALIGN;
}

} // namespace llmcache::csd
