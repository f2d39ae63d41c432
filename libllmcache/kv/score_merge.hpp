// SPDX-License-Identifier: MIT
/*
 * Incremental top-k merge of Score Blocks (HillInfer Alg. 1, lines 10-15). Blocks of <token position,
 * score> arrive from the CPU pool and from the storage backend in any order; the merger keeps the k best
 * in a min-heap as they come, so the final selection costs O(k log k) once the last block lands instead
 * of a sort of every score. Tokens in the always-kept set (attention sinks and the recent window) are
 * skipped: they are selected anyway and must not take a top-k place. The order is total (higher score
 * first, then lower position; NaN ranks below everything), so the result does not depend on the order
 * in which blocks arrive.
 */
#pragma once
#include "csd/kernels/kernel_common.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llmcache::kv {

class ScoreMerge {
public:
	// Keeps the k best tokens outside [0, sink) and [recent_from, ...).
	ScoreMerge(size_t k, uint32_t sink, uint32_t recent_from) : k_(k), sink_(sink), recent_from_(recent_from)
	{
		heap_.reserve(k);
	}
	void add(const csd_score *block, size_t n);
	// The selected positions: the always-kept tokens below n_tokens plus the top k, ascending.
	std::vector<uint32_t> select(uint32_t n_tokens) const;
	size_t seen() const { return seen_; }
	// The top-k kept so far, with their scores, in heap order.
	const std::vector<csd_score> &top() const { return heap_; }

private:
	size_t k_, seen_ = 0;
	uint32_t sink_, recent_from_;
	std::vector<csd_score> heap_; // min-heap under better(): heap_[0] is the worst kept
};

// a ranks above b.
inline bool score_better(const csd_score &a, const csd_score &b)
{
	const bool an = a.score != a.score, bn = b.score != b.score;
	if (an != bn)
		return bn;
	if (!an && a.score != b.score)
		return a.score > b.score;
	return a.pos < b.pos;
}

} // namespace llmcache::kv
